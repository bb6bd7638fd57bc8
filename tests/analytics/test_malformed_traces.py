"""Malformed traces: each ends in one clear error line (exit 2) or a flagged row, never a crash or a hang.

Every hand-made case runs twice, through the library (`ingest`) and through the real `helios ingest` entry
point (cli.main), each time over a data folder holding a dataset `target` that a failure must leave untouched.
Generated traces (hypothesis) check the same promises on random bytes, values and zip member names.
"""

from __future__ import annotations

import io
import os
import re
import stat
import struct
import tempfile
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cli
from analytics import schema, store
from analytics.ingest import IngestError, IngestOptions, ingest

TIMEOUT_S = 60
MAX_MESSAGE_CHARS = 1000
HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"
FIELDS = HEADER.split(",")
ROW = "1,u1,vcA,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:10,2020-04-01 00:01:10,60,10"
ROW2 = "2,u2,vcA,2,8,1,FAILED,2020-04-01 01:00:00,2020-04-01 01:00:00,2020-04-01 01:30:00,1800,0"
CAPACITY = "date,vcA,total\n2020-04-01,8,8\n"
LOG = "Venus/cluster_log.csv"
CAP = "Venus/cluster_gpu_number.csv"
PHILLY_HEADER = "timestamp,duration,num_gpus,cluster"
PHILLY_ROW = "2020-04-01 00:00:00,100,4,vc1"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
)
POD_ROW = "p1,1000,100,1,1000,,LS,Succeeded,0,100,10"
NODES = "sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1000,8,V100\n"
POD_FILE, NODE_FILE = "openb_pod_list_default.csv", "openb_node_list_gpu_node.csv"
NO_LOG = r"no <Cluster>/cluster_log.csv found"
MISSING_COLUMN = r"missing required column\(s\)"


def with_field(column: str, value: str, row: str = ROW2) -> str:
    """ROW2 (or row) with one field replaced."""
    fields = dict(zip(FIELDS, row.split(","), strict=True))
    fields[column] = value
    return ",".join(fields.values())


def bad(column: str, value: str) -> Callable[[Path], Path]:
    """A Helios folder whose log has a good row, then ROW2 with one field replaced (file row 3)."""
    return helios_folder(log_text(with_field(column, value)))


def log_text(*rows: str, header: str = HEADER, newline: str = "\n") -> bytes:
    """A cluster_log.csv body: the header, the good first row, then rows (file rows 2, 3, ...)."""
    return newline.join([header, ROW, *rows]).encode() + newline.encode()


# --- Sources ---------------------------------------------------------------------------------------


def helios_folder(log: bytes | None, capacity: bytes | None = CAPACITY.encode()) -> Callable[[Path], Path]:
    """A builder of a Helios folder with one cluster, Venus, holding the given file bytes (None = absent)."""

    def build(root: Path) -> Path:
        (root / "Venus").mkdir(parents=True)
        if log is not None:
            (root / LOG).write_bytes(log)
        if capacity is not None:
            (root / CAP).write_bytes(capacity)
        return root

    return build


Patch = Callable[[bytes], bytes]


def helios_zip(members: list[tuple[str | zipfile.ZipInfo, bytes]], patch: Patch | None = None):
    """A builder of data.zip with the given members (optionally patched byte by byte afterwards)."""

    def build(root: Path) -> Path:
        root.mkdir(parents=True)
        archive = root / "data.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members:
                zf.writestr(name, data)
        if patch is not None:
            archive.write_bytes(patch(archive.read_bytes()))
        return archive

    return build


def good_members() -> list[tuple[str, bytes]]:
    """The members of a valid one-cluster Helios zip."""
    return [(LOG, log_text()), (CAP, CAPACITY.encode())]


def files(named: dict[str, bytes], target: str | None = None) -> Callable[[Path], Path]:
    """A builder of a folder of files; the path ingested is target inside it (default the folder)."""

    def build(root: Path) -> Path:
        root.mkdir(parents=True)
        for name, data in named.items():
            (root / name).write_bytes(data)
        return root / target if target else root

    return build


def philly(*rows: str, nodes: str | None = None) -> Callable[[Path], Path]:
    """A Philly job file (and an optional VC node table beside it)."""
    named = {"philly.csv": "\n".join([PHILLY_HEADER, PHILLY_ROW, *rows]).encode() + b"\n"}
    if nodes is not None:
        named["philly_vc_nodes.csv"] = nodes.encode()
    return files(named, "philly.csv")


def alibaba(*rows: str, nodes: str | None = NODES) -> Callable[[Path], Path]:
    """An Alibaba openb folder with the pod list rows (and the GPU node list unless None)."""
    named = {"openb_pod_list_default.csv": "\n".join([POD_HEADER, POD_ROW, *rows]).encode() + b"\n"}
    if nodes is not None:
        named["openb_node_list_gpu_node.csv"] = nodes.encode()
    return files(named)


# --- Zip surgery -----------------------------------------------------------------------------------


def _patch_headers(data: bytes, member: str, local_at: int, central_at: int, fmt: str, value: int) -> bytes:
    """Set one field of member's local header and central directory entry (offsets from each signature)."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo(member)
    struct.pack_into(fmt, out, info.header_offset + local_at, value)
    at = out.find(b"PK\x01\x02")
    while at != -1:
        name_len = struct.unpack_from("<H", out, at + 28)[0]
        if bytes(out[at + 46 : at + 46 + name_len]) == member.encode():
            struct.pack_into(fmt, out, at + central_at, value)
        at = out.find(b"PK\x01\x02", at + 4)
    return bytes(out)


def declared_size(size: int) -> Callable[[bytes], bytes]:
    """A patch that makes the log member declare `size` uncompressed bytes."""
    return lambda data: _patch_headers(data, LOG, 22, 24, "<I", size)


def encrypted_flag(data: bytes) -> bytes:
    """Mark the log member as encrypted."""
    return _patch_headers(data, LOG, 6, 8, "<H", 0x1)


def compression_method(method: int) -> Callable[[bytes], bytes]:
    """A patch that sets the log member's compression method."""
    return lambda data: _patch_headers(data, LOG, 8, 10, "<H", method)


def symlink_member(name: str, target: str) -> zipfile.ZipInfo:
    """A zip entry that unpacks (with tools honouring Unix modes) as a symbolic link."""
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def nested_zip() -> bytes:
    """A valid Helios zip, as bytes, to put inside another zip."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in good_members():
            zf.writestr(name, data)
    return buf.getvalue()


def symlinked_folder(target: str) -> Callable[[Path], Path]:
    """A Helios folder whose cluster_log.csv is a symbolic link to target (e.g. an endless device)."""

    def build(root: Path) -> Path:
        helios_folder(None)(root)
        (root / LOG).symlink_to(target)
        return root

    return build


def log_as_folder(root: Path) -> Path:
    """A Helios folder whose cluster_log.csv is a folder."""
    helios_folder(None)(root)
    (root / LOG).mkdir()
    return root


# --- Cases -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fatal:
    """The ingest must fail with one line matching pattern."""

    pattern: str


@dataclass(frozen=True)
class Flagged:
    """The ingest must succeed with at least one row under this data-quality kind."""

    kind: str


@dataclass(frozen=True)
class Accepted:
    """The ingest must succeed with this many jobs (the oddity is harmless)."""

    jobs: int


@dataclass(frozen=True)
class Case:
    """One malformed trace: how to build it, its format, the expected outcome and the zip size limit."""

    build: Callable[[Path], Path]
    expect: Fatal | Flagged | Accepted
    fmt: str = "helios"
    max_member_bytes: int | None = None


BIG_ZEROS = b"0" * 20_000_000
BIG_DIGITS = b"".join(str(n * 7919 % 1_000_003).encode() + b"\n" for n in range(300_000))  # ~2 MB, compresses ~2x
CASES: dict[str, Case] = {
    # structure
    "empty file": Case(helios_folder(b""), Fatal(rf"{LOG}: cannot read CSV file \(empty CSV")),
    "header only": Case(helios_folder(HEADER.encode() + b"\n"), Fatal(rf"{LOG}: no data rows")),
    "missing required column": Case(
        helios_folder(b"job_id,vc,gpu_num,duration\n1,vcA,1,60\n"),
        Fatal(rf"{LOG}: missing required column\(s\) submit_time \(found: job_id, vc, gpu_num, duration\)"),
    ),
    "extra columns": Case(
        helios_folder(b"\n".join(line + b",x,y" for line in log_text(ROW2).splitlines()) + b"\n"),
        Accepted(2),
    ),
    "too many fields in a row": Case(
        helios_folder(log_text(ROW2 + ",extra,extra")), Fatal(r"cannot read CSV file \(found more fields")
    ),
    "too few fields in a row": Case(helios_folder(log_text("2,u2,vcA")), Flagged("missing_required")),
    "unterminated quote": Case(helios_folder(log_text('3,"u3,vcA')), Fatal(rf"{LOG}: cannot read CSV file")),
    "semicolon delimiter": Case(
        helios_folder(log_text(header=HEADER.replace(",", ";"))), Fatal(rf"{MISSING_COLUMN} job_id")
    ),
    "binary garbage": Case(
        helios_folder(bytes(range(256)) * 40), Fatal(rf"{LOG}: (cannot read CSV file|{MISSING_COLUMN})")
    ),
    "log is a folder": Case(log_as_folder, Fatal(NO_LOG)),
    "log links to an endless device": Case(symlinked_folder("/dev/zero"), Fatal(NO_LOG)),
    "missing capacity file": Case(helios_folder(log_text(), None), Fatal(rf"{CAP}: no such file")),
    "empty capacity file": Case(helios_folder(log_text(), b""), Fatal(rf"{CAP}: cannot read CSV file")),
    "capacity without date column": Case(
        helios_folder(log_text(), b"vcA,total\n8,8\n"), Fatal(rf"{CAP}: missing required column\(s\) date")
    ),
    # wrong types
    "text in gpu_num": Case(
        bad("gpu_num", "two"),
        Fatal(rf"{LOG} row 3, column 'gpu_num': cannot parse 'two' as an integer"),
    ),
    "fraction in job_id": Case(
        bad("job_id", "1.5"),
        Fatal(r"row 3, column 'job_id': cannot parse '1.5' as an integer"),
    ),
    "inf duration": Case(
        bad("duration", "inf"),
        Fatal(r"row 3, column 'duration': cannot parse 'inf' as an integer"),
    ),
    "text in optional cpu_num": Case(bad("cpu_num", "lots"), Flagged("unparsable_value")),
    "text in optional queue": Case(bad("queue", "soon"), Flagged("unparsable_value")),
    "NaN duration": Case(bad("duration", "NaN"), Flagged("missing_required")),
    # bad dates
    "month 13": Case(
        bad("submit_time", "2020-13-01 00:00:00"),
        Fatal(r"row 3, column 'submit_time': cannot parse '2020-13-01 00:00:00' as %Y-%m-%d %H:%M:%S"),
    ),
    "ISO date with time zone": Case(
        bad("submit_time", "2020-04-01T00:00:00Z"),
        Fatal(r"row 3, column 'submit_time': cannot parse '2020-04-01T00:00:00Z'"),
    ),
    "year 99999": Case(
        bad("submit_time", "99999-04-01 00:00:00"),
        Fatal(r"row 3, column 'submit_time': cannot parse '99999-04-01 00:00:00'"),
    ),
    "garbage optional start_time": Case(bad("start_time", "yesterday"), Flagged("unparsable_value")),
    "end before start": Case(bad("end_time", "2020-03-01 00:00:00"), Flagged("end_before_start")),
    "bad capacity date": Case(
        helios_folder(log_text(), b"date,vcA,total\n2020-02-30,8,8\n"),
        Fatal(rf"{CAP} row 2, column 'date': cannot parse '2020-02-30'"),
    ),
    # negative and huge numbers
    "negative gpu_num": Case(bad("gpu_num", "-4"), Flagged("negative_gpu_num")),
    "negative duration": Case(bad("duration", "-60"), Flagged("negative_duration")),
    "negative queue": Case(bad("queue", "-5"), Flagged("negative_queue")),
    "gpu_num above int32": Case(
        bad("gpu_num", "3000000000"),
        Fatal(r"row 3, column 'gpu_num': cannot parse '3000000000' as an integer from -2147483648 to \d+"),
    ),
    "node_num above int32": Case(bad("node_num", "3000000000"), Flagged("unparsable_value")),
    "gpu_num beyond int64": Case(
        bad("gpu_num", "9" * 30),
        Fatal(r"row 3, column 'gpu_num': cannot parse '9{30}'"),
    ),
    "duration at int64 max": Case(bad("duration", str(2**63 - 1)), Flagged("duration_mismatch")),
    "capacity above int32": Case(
        helios_folder(log_text(), b"date,vcA,total\n2020-04-01,99999999999,8\n"),
        Fatal(rf"{CAP} row 2, column 'vcA': cannot parse '99999999999'"),
    ),
    "all rows dropped": Case(
        helios_folder(HEADER.encode() + b"\n" + with_field("gpu_num", "-1", ROW).encode() + b"\n"),
        Fatal(r"no valid rows left after validation \(1 rows read\)"),
    ),
    # states and ids
    "unknown state": Case(bad("state", "EXPLODED"), Flagged("unknown_state")),
    "lower-case state": Case(bad("state", "completed"), Flagged("unknown_state")),
    "duplicate job ids": Case(bad("job_id", "1"), Flagged("duplicate_job_id")),
    # encodings and line endings
    "latin-1 bytes": Case(
        helios_folder(log_text(with_field("user", "J\xfcrgen")).replace("\xfc".encode(), b"\xfc")),
        Fatal(rf"{LOG}: cannot read CSV file \(invalid utf-8"),
    ),
    "UTF-16 file": Case(helios_folder(log_text().decode().encode("utf-16")), Fatal(MISSING_COLUMN)),
    "CRLF line endings": Case(helios_folder(log_text(ROW2, newline="\r\n")), Accepted(2)),
    "UTF-8 byte-order mark": Case(helios_folder(b"\xef\xbb\xbf" + log_text(ROW2)), Accepted(2)),
    "bare CR line endings": Case(helios_folder(log_text(ROW2, newline="\r")), Fatal(rf"{LOG}: no data rows")),
    "blank lines": Case(helios_folder(log_text("", ROW2, "")), Flagged("blank_row")),
    # gigantic lines
    "gigantic field": Case(
        bad("user", "u" * 5_000_000),
        Fatal(r"row 3, column 'user': value of 5000000 characters \(the limit is 4096\)"),
    ),
    "gigantic line without newline": Case(
        helios_folder(b"a" * 5_000_000), Fatal(r"\(found: a{40}\.\.\. \(5000000 characters\)\)")
    ),
    "twenty thousand columns": Case(
        helios_folder(",".join(f"c{i}" for i in range(20_000)).encode() + b"\n"),
        Fatal(r"\(found: c0, c1, .*, c19 and 19980 more\)"),
    ),
    # other formats
    "philly bad timestamp": Case(
        philly("yesterday,100,4,vc1"),
        Fatal(r"philly.csv row 3, column 'timestamp': cannot parse 'yesterday'"),
        "philly",
    ),
    "philly negative gpus": Case(philly("2020-04-01 00:00:00,1,-4,v"), Flagged("negative_gpu_num"), "philly"),
    "philly far-future date": Case(
        philly("9999-01-01 00:00:00,100,4,vc1", nodes="vc,node num\nvc1,2\n"),
        Fatal(r"philly.csv: times span 2020-04-01 to 9999-01-01, more than \d+ days"),
        "philly",
    ),
    "philly node count overflow": Case(
        philly(nodes="vc,node num\nvc1,999999999999\n"),
        Fatal(r"philly_vc_nodes.csv row 2, column 'node num': 999999999999 nodes is more than"),
        "philly",
    ),
    "alibaba offset beyond a century": Case(
        alibaba("p2,1000,100,1,1000,,LS,Succeeded,9223372036854775000,9223372036854775807,9223372036854775800"),
        Fatal(r"pod_list_default.csv row 3, column 'creation_time': cannot parse '9223372036854775000'"),
        "alibaba-openb",
    ),
    "alibaba unknown phase": Case(
        alibaba("p2,1000,100,1,1000,,LS,Exploded,0,50,10"), Flagged("unknown_state"), "alibaba-openb"
    ),
    "alibaba deleted before scheduled": Case(
        alibaba("p2,1000,100,1,1000,,LS,Failed,0,5,10"), Flagged("end_before_start"), "alibaba-openb"
    ),
    "alibaba without node list": Case(alibaba(nodes=None), Accepted(1), "alibaba-openb"),  # capacity unknown
    # zips
    "zip path traversal": Case(
        helios_zip([*good_members(), ("../../evil.csv", b"x")]), Fatal(r"member '../../evil.csv' escapes")
    ),
    "zip absolute path": Case(helios_zip([*good_members(), ("/etc/x", b"")]), Fatal("'/etc/x' escapes")),
    "zip symlink member": Case(
        helios_zip([(symlink_member(LOG, "/etc/passwd"), b"/etc/passwd"), (CAP, CAPACITY.encode())]),
        Fatal(rf"member '{LOG}' is a symbolic link"),
    ),
    "zip bomb (declared size)": Case(
        helios_zip([(LOG, log_text() + BIG_ZEROS), (CAP, CAPACITY.encode())]),
        Fatal(rf"data.zip: member '{LOG}' expands \d+x \(at most 200x\): refused"),
    ),
    "zip with too many members": Case(
        helios_zip([*good_members(), *((f"pad/{i}.txt", b"") for i in range(10_001))]),
        Fatal(r"data.zip: 10003 members \(at most 10000\)"),
    ),
    "zip member over the size limit": Case(
        helios_zip([(LOG, log_text() + BIG_DIGITS), (CAP, CAPACITY.encode())]),
        Fatal(rf"data.zip:{LOG}: declared size \d+ bytes exceeds the limit of 1000000 bytes"),
        max_member_bytes=1_000_000,
    ),
    "zip bomb (understated size)": Case(
        helios_zip([(LOG, log_text() + BIG_ZEROS), (CAP, CAPACITY.encode())], declared_size(100)),
        Fatal(rf"data.zip:{LOG}: cannot extract \(Bad CRC-32"),
        max_member_bytes=1_000_000,
    ),
    "nested zip": Case(helios_zip([("inner/data.zip", nested_zip())]), Fatal(NO_LOG)),
    "encrypted member": Case(helios_zip(good_members(), encrypted_flag), Fatal(rf"'{LOG}' is encrypted")),
    "unknown compression": Case(
        helios_zip(good_members(), compression_method(99)), Fatal(rf"'{LOG}' uses unsupported compression 99")
    ),
    "truncated zip": Case(
        helios_zip(good_members(), lambda data: data[: len(data) // 2]), Fatal(r"cannot read zip file")
    ),
    "text file named .zip": Case(files({"data.zip": b"text"}, "data.zip"), Fatal(r"cannot read zip file")),
    "empty zip": Case(helios_zip([]), Fatal(rf"data.zip: {NO_LOG}")),
    "zip folder entry named like the log": Case(
        helios_zip([(LOG + "/", b""), (CAP, CAPACITY.encode())]), Fatal(rf"member {LOG} is missing")
    ),
}


# --- Running ---------------------------------------------------------------------------------------


def bounded(fn: Callable[[], Any]) -> Any:
    """Run fn on a daemon thread and fail (instead of hanging) when it takes more than TIMEOUT_S."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # re-raised on the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(TIMEOUT_S)
    assert not thread.is_alive(), f"ingest still running after {TIMEOUT_S} s (a hang)"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.fixture
def workspace(data_root, tmp_path, monkeypatch):
    """A data folder holding dataset `target`, a private temp folder, and a snapshot to compare after."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    jobs = pl.DataFrame({"cluster": ["Old"], "job_id": [7], "vc": ["v"], "gpu_num": [1]})
    jobs = jobs.with_columns(submit_time=pl.datetime(2019, 1, 1), duration=pl.lit(5))
    existing = store.write_dataset("target", jobs, schema.empty_vc_gpus(), {"clusters": ["Old"]})
    listing = sorted(os.listdir(data_root))
    return {"root": data_root, "scratch": scratch, "existing": existing, "listing": listing}


def assert_untouched(ws: dict[str, Any]) -> None:
    """The existing dataset is intact, nothing was added to the data folder and no temp files are left."""
    after = store.open_dataset("target")
    assert after.version == ws["existing"].version and after.meta == ws["existing"].meta
    assert after.jobs().collect().equals(ws["existing"].jobs().collect())
    assert sorted(os.listdir(ws["root"])) == ws["listing"]
    assert os.listdir(ws["scratch"]) == []


def assert_written(ws: dict[str, Any], jobs: int | None = None) -> store.Dataset:
    """The new `target` replaced the old one completely (no leftovers) and has the canonical schema."""
    dataset = store.open_dataset("target")
    assert dataset.version != ws["existing"].version
    frame = dataset.jobs().collect()
    assert frame.schema == pl.Schema(schema.JOB_SCHEMA)
    assert jobs is None or frame.height == jobs
    leftovers = [n for n in os.listdir(ws["root"]) if n != "target" and not n.startswith(".target.v-")]
    copies = [n for n in os.listdir(ws["root"]) if n.startswith(".target.v-")]
    assert leftovers == [] and len(copies) == 2  # the new version and the replaced one, kept for its readers
    assert os.listdir(ws["scratch"]) == []
    return dataset


def run_library(case: Case, path: Path, ws: dict[str, Any]) -> None:
    """Ingest through analytics.ingest and check the outcome."""
    options = IngestOptions(max_member_bytes=case.max_member_bytes or IngestOptions.max_member_bytes)
    if isinstance(case.expect, Fatal):
        with pytest.raises(IngestError) as info:
            bounded(lambda: ingest(path, case.fmt, "target", options))
        message = str(info.value)
        assert "\n" not in message and len(message) <= MAX_MESSAGE_CHARS, message[:2000]
        assert re.search(case.expect.pattern, message), message
        assert_untouched(ws)
        return
    bounded(lambda: ingest(path, case.fmt, "target", options))
    check_success(case, assert_written(ws, getattr(case.expect, "jobs", None)))


def check_success(case: Case, dataset: store.Dataset) -> None:
    """A flagged case names its kind with a file and row; an accepted one flags nothing dropped."""
    issues = dataset.meta["quality"]["issues"]
    if isinstance(case.expect, Flagged):
        entry = issues[case.expect.kind]
        assert entry["count"] >= 1 and entry["examples"][0]["row"] >= 2 and entry["examples"][0]["file"]


def run_cli(case: Case, path: Path, ws: dict[str, Any], capsys) -> None:
    """Ingest through the real `helios ingest` entry point and check exit code and output."""
    argv = ["ingest", str(path), "--format", case.fmt, "--name", "target", "--quiet"]
    if case.max_member_bytes:
        argv += ["--max-member-bytes", str(case.max_member_bytes)]
    code = bounded(lambda: cli.main(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    if isinstance(case.expect, Fatal):
        assert code == 2 and err.startswith("helios: error: ") and err.count("\n") == 1, err[:2000]
        assert len(err) <= MAX_MESSAGE_CHARS + 20
        assert re.search(case.expect.pattern, err), err
        assert_untouched(ws)
        return
    assert code == 0 and err == ""
    dataset = assert_written(ws, getattr(case.expect, "jobs", None))
    check_success(case, dataset)
    if isinstance(case.expect, Flagged):
        assert f"  {case.expect.kind}: " in out


def test_there_are_at_least_30_malformed_traces():
    assert len(CASES) >= 30


@pytest.mark.parametrize("name", CASES)
def test_library(name, workspace, tmp_path):
    case = CASES[name]
    run_library(case, case.build(tmp_path / "source"), workspace)


@pytest.mark.parametrize("name", CASES)
def test_cli(name, workspace, tmp_path, capsys):
    case = CASES[name]
    run_cli(case, case.build(tmp_path / "source"), workspace, capsys)


def test_zip_bomb_stops_reading_at_the_limit(workspace, tmp_path):
    archive = helios_zip([(LOG, log_text() + BIG_ZEROS), (CAP, CAPACITY.encode())])(tmp_path / "source")
    assert archive.stat().st_size < 100_000  # a small file that claims 20 MB
    with zipfile.ZipFile(archive) as zf:
        assert zf.getinfo(LOG).file_size > 20_000_000
    with pytest.raises(IngestError, match=r"expands \d+x \(at most 200x\)"):
        bounded(lambda: ingest(archive, "helios", "target", IngestOptions(max_member_bytes=1_000_000)))
    assert_untouched(workspace)


def test_disk_full_while_writing_leaves_no_partial_dataset(workspace, tmp_path, monkeypatch, capsys):
    def no_space(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", no_space)
    source = helios_folder(log_text(ROW2))(tmp_path / "source")
    argv = ["ingest", str(source), "--format", "helios", "--name", "target", "--quiet"]
    assert bounded(lambda: cli.main(argv)) == 2
    err = capsys.readouterr().err
    assert "the disk is full" in err and "nothing was changed" in err, err
    assert_untouched(workspace)


# --- Generated traces (hypothesis) -----------------------------------------------------------------

FIELD = st.one_of(
    st.sampled_from(["", "NaN", "0", "-1", "1", "COMPLETED", "odd", "2020-04-01 00:00:00", "2020-02-30 9"]),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
)
# zipfile cannot write a NUL in a name; duplicates of the trace's own members only trigger a warning.
NAME_CHARS = st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\x00")
MEMBER_NAME = st.text(NAME_CHARS, min_size=1)
MEMBER_NAME = MEMBER_NAME.filter(lambda n: n not in (LOG, CAP))
ROWS = st.lists(st.lists(FIELD, min_size=10, max_size=14).map(",".join), min_size=1, max_size=6)
FIXTURES_OK = [HealthCheck.function_scoped_fixture]
GENERATED = settings(max_examples=40, deadline=None, suppress_health_check=FIXTURES_OK)


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A factory of fresh (source folder, workspace) pairs, one per generated example."""
    counter = iter(range(10**6))

    def make() -> tuple[Path, dict[str, Any]]:
        base = tmp_path / f"example-{next(counter)}"
        root, scratch = base / "data", base / "scratch"
        root.mkdir(parents=True)
        scratch.mkdir()
        monkeypatch.setenv("HELIOS_DATA_DIR", str(root))
        monkeypatch.setattr(tempfile, "tempdir", str(scratch))
        jobs = pl.DataFrame({"cluster": ["Old"], "job_id": [7], "vc": ["v"], "gpu_num": [1]})
        jobs = jobs.with_columns(submit_time=pl.datetime(2019, 1, 1), duration=pl.lit(5))
        existing = store.write_dataset("target", jobs, schema.empty_vc_gpus(), {"clusters": ["Old"]})
        ws = {"root": root, "scratch": scratch, "existing": existing, "listing": sorted(os.listdir(root))}
        return base / "source", ws

    return make


def check_any_outcome(path: Path, ws: dict[str, Any], fmt: str = "helios") -> None:
    """Ingest must end in one clear IngestError line (nothing changed) or a consistent, valid dataset."""
    try:
        bounded(lambda: ingest(path, fmt, "target"))
    except IngestError as exc:
        message = str(exc)
        assert "\n" not in message and 0 < len(message) <= MAX_MESSAGE_CHARS, message[:2000]
        assert_untouched(ws)
        return
    dataset = assert_written(ws)
    report = dataset.meta["quality"]
    dropped = sum(e["count"] for e in report["issues"].values() if e["action"] == "dropped")
    assert report["rows_in"] - report["rows_out"] == dropped
    jobs = dataset.jobs().collect()
    assert jobs.height == report["rows_out"] and (jobs["gpu_num"] >= 0).all()
    assert jobs.select(pl.col("state").is_in(schema.STATES) | pl.col("state").is_null()).to_series().all()
    assert not jobs.select(["cluster", "job_id"]).is_duplicated().any()


@GENERATED
@given(data=st.binary(max_size=3000))
def test_generated_random_bytes(fresh, data):
    source, ws = fresh()
    check_any_outcome(helios_folder(data)(source), ws)


@GENERATED
@given(rows=ROWS)
def test_generated_rows_of_odd_values(fresh, rows):
    source, ws = fresh()
    check_any_outcome(helios_folder("\n".join([HEADER, *rows]).encode() + b"\n")(source), ws)


@GENERATED
@given(rows=ROWS, capacity=st.lists(FIELD, min_size=2, max_size=4).map(",".join))
def test_generated_capacity_values(fresh, rows, capacity):
    source, ws = fresh()
    cap = f"date,vcA,total\n{capacity}\n".encode()
    check_any_outcome(helios_folder(log_text(*rows[:1]), cap)(source), ws)


@GENERATED
@given(names=st.lists(MEMBER_NAME, max_size=4, unique=True))
def test_generated_zip_member_names(fresh, tmp_path, names):
    source, ws = fresh()
    archive = helios_zip([*good_members(), *((n, b"x") for n in names)])(source)
    outside_before = {p for p in tmp_path.rglob("*") if "data" not in p.parts}
    check_any_outcome(archive, ws)
    outside_after = {p for p in tmp_path.rglob("*") if "data" not in p.parts}
    assert outside_after == outside_before  # nothing was extracted anywhere but the (removed) temp folder


@settings(max_examples=15, deadline=None, suppress_health_check=FIXTURES_OK)
@given(data=st.binary(max_size=2000), fmt=st.sampled_from(["helios", "philly", "alibaba-openb"]))
def test_generated_bytes_through_the_cli(fresh, capsys, data, fmt):
    source, ws = fresh()
    build = {
        "helios": helios_folder(data),
        "philly": files({"philly.csv": data}, "philly.csv"),
        "alibaba-openb": files({POD_FILE: data, NODE_FILE: NODES.encode()}),
    }[fmt]
    path = build(source)
    code = bounded(lambda: cli.main(["ingest", str(path), "--format", fmt, "--name", "target", "--quiet"]))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 2:
        assert err.startswith("helios: error: ") and err.count("\n") == 1
        assert_untouched(ws)
    else:
        assert code == 0 and err == ""
        assert_written(ws)
