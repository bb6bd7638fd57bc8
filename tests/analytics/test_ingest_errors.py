"""Fatal ingest errors: one line naming file, row, column and value, exit code 2, and nothing written."""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

import pytest

import cli
from analytics import store
from analytics.ingest import IngestError, IngestOptions, ingest
from analytics.ingest.archive import copy_limited, member_path

HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"
GOOD = "1,u1,vcA,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:10,2020-04-01 00:01:10,60,10"
GPU_NUMBER = "date,vcA,total\n2020-04-01,8,8\n"


def make_cluster(root: Path, log_text: str, gpu_text: str | None = GPU_NUMBER) -> Path:
    """Write one cluster folder with the given file contents (no capacity file when gpu_text is None)."""
    folder = root / "Venus"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cluster_log.csv").write_text(log_text)
    if gpu_text is not None:
        (folder / "cluster_gpu_number.csv").write_text(gpu_text)
    return root


def expect_fatal(path: Path, match: str, fmt: str = "helios", options: IngestOptions | None = None) -> str:
    """Ingest must raise IngestError matching `match` in one line; returns the message."""
    with pytest.raises(IngestError, match=match) as info:
        ingest(path, fmt, "target", options)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.fixture
def existing(data_root, tmp_path) -> tuple[store.Dataset, list[str]]:
    """A dataset `target` that failed ingests must leave intact, and the data folder listing after it."""
    dataset = ingest(make_cluster(tmp_path / "good", f"{HEADER}\n{GOOD}\n"), "helios", "target")
    return dataset, sorted(p.name for p in data_root.iterdir())


def assert_intact(data_root: Path, before: tuple[store.Dataset, list[str]]) -> None:
    """The old dataset is unchanged and nothing was added to the data folder (no temporary folder left)."""
    dataset, listing = before
    after = store.open_dataset("target")
    assert after.version == dataset.version and after.meta == dataset.meta
    assert after.jobs().collect().equals(dataset.jobs().collect())
    assert sorted(p.name for p in data_root.iterdir()) == listing


def test_missing_path(data_root, tmp_path):
    expect_fatal(tmp_path / "nope", r"nope: no such file or folder")
    assert list(data_root.iterdir()) == []


def test_unreadable_log_file(data_root, tmp_path, existing):
    root = make_cluster(tmp_path / "src", "")
    expect_fatal(root, r"Venus/cluster_log.csv: cannot read CSV file \(empty CSV")
    assert_intact(data_root, existing)


def test_invalid_utf8_is_unreadable(data_root, tmp_path, existing):
    root = tmp_path / "src"
    make_cluster(root, "")
    (root / "Venus" / "cluster_log.csv").write_bytes(HEADER.encode() + b"\n1,\xff\xfe,vcA\n")
    expect_fatal(root, r"cluster_log.csv: cannot read CSV file \(invalid utf-8")
    assert_intact(data_root, existing)


def test_missing_required_column(data_root, tmp_path, existing):
    header = HEADER.replace(",submit_time", "")
    row = GOOD.replace(",2020-04-01 00:00:00,", ",", 1)
    message = expect_fatal(make_cluster(tmp_path / "src", f"{header}\n{row}\n"), r"missing required column")
    assert "Venus/cluster_log.csv" in message and "submit_time" in message
    assert_intact(data_root, existing)


def test_no_rows(data_root, tmp_path, existing):
    expect_fatal(make_cluster(tmp_path / "src", HEADER + "\n"), r"Venus/cluster_log.csv: no data rows")
    assert_intact(data_root, existing)


def test_missing_capacity_file(data_root, tmp_path, existing):
    root = make_cluster(tmp_path / "src", f"{HEADER}\n{GOOD}\n", gpu_text=None)
    expect_fatal(root, r"Venus/cluster_gpu_number.csv: no such file")
    assert_intact(data_root, existing)


@pytest.mark.parametrize(
    ("column", "bad", "expected"),
    [
        ("submit_time", "2020-13-45 00:00:00", "YYYY|%Y-%m-%d %H:%M:%S"),
        ("gpu_num", "two", "an integer"),
        ("duration", "1.5", "an integer"),
        ("job_id", "x7", "an integer"),
    ],
)
def test_unparsable_required_value_is_named(data_root, tmp_path, existing, column, bad, expected):
    fields = dict(zip(HEADER.split(","), GOOD.split(","), strict=True))
    fields[column] = bad
    log = f"{HEADER}\n{GOOD}\n{','.join(fields.values())}\n"
    message = expect_fatal(make_cluster(tmp_path / "src", log), rf"row 3, column '{column}'")
    assert f"cannot parse '{bad}'" in message and "Venus/cluster_log.csv" in message
    assert any(word in message for word in expected.split("|"))
    assert_intact(data_root, existing)


def test_unparsable_capacity_value(data_root, tmp_path, existing):
    capacity = "date,vcA,total\n2020-04-01,8,8\n2020-04-02,lots,8\n"
    root = make_cluster(tmp_path / "src", f"{HEADER}\n{GOOD}\n", capacity)
    expect_fatal(root, r"cluster_gpu_number.csv row 3, column 'vcA': cannot parse 'lots' as an integer")
    assert_intact(data_root, existing)


def test_all_rows_dropped_is_fatal_and_says_why(data_root, tmp_path, existing):
    log = f"{HEADER}\n{GOOD.replace(',1,4,1,', ',-1,4,1,', 1)}\n"
    why = r"negative_gpu_num 1 \(gpu_num < 0\) \(e\.g\. \S+cluster_log\.csv row 2: gpu_num=-1\)$"
    expect_fatal(make_cluster(tmp_path / "src", log), r"no valid rows left after validation \(1 rows read\): " + why)
    assert_intact(data_root, existing)


def test_bad_dataset_name_writes_nothing(data_root, tmp_path):
    with pytest.raises(IngestError, match="invalid dataset name"):
        ingest(make_cluster(tmp_path / "src", f"{HEADER}\n{GOOD}\n"), "helios", "../escape")
    assert list(data_root.iterdir()) == []
    assert not (data_root.parent / "escape").exists()


def test_not_a_zip(data_root, tmp_path):
    bogus = tmp_path / "data.zip"
    bogus.write_bytes(b"this is not a zip")
    expect_fatal(bogus, r"data.zip: cannot read zip file")


def _zip_with(tmp_path: Path, members: dict[str, str]) -> Path:
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return archive


EVIL_NAMES = ["../evil.csv", "data/../../evil.csv", "/etc/evil.csv", "C:/evil.csv", "..\\evil"]


@pytest.mark.parametrize("evil", EVIL_NAMES)
def test_zip_member_escaping_the_target_is_fatal(data_root, tmp_path, existing, evil):
    members = {
        "data/Venus/cluster_log.csv": f"{HEADER}\n{GOOD}\n",
        "data/Venus/cluster_gpu_number.csv": GPU_NUMBER,
    }
    archive = _zip_with(tmp_path, {**members, evil: "x"})
    expect_fatal(archive, r"escapes the extraction folder")
    assert not (tmp_path / "evil.csv").exists()
    assert_intact(data_root, existing)


def test_zip_member_above_declared_limit_is_fatal(data_root, tmp_path, existing):
    log = f"{HEADER}\n" + f"{GOOD}\n" * 50
    members = {"data/Venus/cluster_log.csv": log, "data/Venus/cluster_gpu_number.csv": GPU_NUMBER}
    archive = _zip_with(tmp_path, members)
    message = expect_fatal(
        archive,
        r"declared size \d+ bytes exceeds the limit of 1000 bytes",
        options=IngestOptions(max_member_bytes=1000),
    )
    assert "data.zip:data/Venus/cluster_log.csv" in message
    assert_intact(data_root, existing)


def test_copy_limited_stops_reading_past_the_limit():
    source = io.BytesIO(b"x" * (3 << 20))
    sink = io.BytesIO()
    with pytest.raises(IngestError, match="more than 1000000 bytes uncompressed"):
        copy_limited(source, sink, 1_000_000, "m")
    assert len(sink.getvalue()) <= 1_000_000
    assert source.tell() <= 2 << 20  # stopped within one chunk of the limit, not at the end


def test_copy_limited_copies_within_the_limit():
    sink = io.BytesIO()
    assert copy_limited(io.BytesIO(b"abc"), sink, 3, "m") == 3 and sink.getvalue() == b"abc"


@pytest.mark.parametrize("name", ["a/b.csv", "data/Venus/cluster_log.csv", "x..y/z.csv"])
def test_member_path_accepts_relative_names(name):
    assert member_path(name, "z").as_posix() == name


def test_options_for_other_formats_are_rejected(data_root, tmp_path):
    clusters, nodes = IngestOptions(clusters=("A",)), IngestOptions(vc_nodes=tmp_path)
    expect_fatal(tmp_path, r"--clusters applies to --format helios only", "philly", clusters)
    expect_fatal(tmp_path, r"--vc-nodes applies to --format philly only", "helios", nodes)


def test_cli_fatal_error_is_one_line_with_exit_code_2(data_root, tmp_path, existing, capsys):
    root = make_cluster(tmp_path / "src", f"{HEADER}\n{GOOD}\n1,u1,vcA,1,4,1,COMPLETED,soon,,,60,10\n")
    code = cli.main(["ingest", str(root), "--format", "helios", "--name", "target", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("helios: error: ")
    assert "cluster_log.csv row 3, column 'submit_time': cannot parse 'soon'" in err
    assert_intact(data_root, existing)


def test_cli_error_after_progress_starts_on_its_own_line(data_root, tmp_path, capsys):
    root = make_cluster(tmp_path / "src", f"{HEADER}\n{GOOD}\n1,u1,vcA,many,4,1,COMPLETED,,,,60,10\n")
    assert cli.main(["ingest", str(root), "--format", "helios", "--name", "t"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "[1/3] reading Venus ..."
    assert lines[1].startswith("helios: error: ") and "column 'gpu_num': cannot parse 'many'" in lines[1]
    assert len(lines) == 2


@pytest.mark.parametrize("fails", [False, True])
def test_zip_extraction_folder_is_removed(data_root, tmp_path, monkeypatch, fails):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    log = f"{HEADER}\n{GOOD}\n" + ("1,u1,vcA,1,4,1,COMPLETED,never,,,60,10\n" if fails else "")
    members = {"data/Venus/cluster_log.csv": log, "data/Venus/cluster_gpu_number.csv": GPU_NUMBER}
    archive = _zip_with(tmp_path, members)
    if fails:
        expect_fatal(archive, "cannot parse 'never'")
    else:
        ingest(archive, "helios", "ok")
    assert list(scratch.iterdir()) == []


def test_cli_rejects_non_positive_member_limit(capsys):
    with pytest.raises(SystemExit):
        cli.main(["ingest", "x", "--format", "helios", "--name", "a", "--max-member-bytes", "0"])
    assert "--max-member-bytes: must be positive" in capsys.readouterr().err
