"""Slurm sacct exports: the real exports of the test cluster (fixtures/slurm), crafted rows for what a one-node
cluster cannot show (requeues, het jobs, typed GPUs), the state table, capacities and clear errors."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from analytics import schema
from analytics.capabilities import capacity_disabled
from analytics.ingest import IngestError, IngestOptions, ingest
from analytics.ingest.capacity import node_gpus, read_capacity
from analytics.ingest.gpus import gpu_count
from analytics.ingest.slurm import (
    ARRAY_BIT,
    HET_BIT,
    STATE_MAP,
    SlurmOptions,
    pseudonym,
    read_export,
    sacct_command,
)

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
BATCH1 = FIXTURES / "batch1.sacct.txt"  # sacct --parsable2 with steps, while "timeout" and "long" still ran
BATCH1_ALL = FIXTURES / "batch1.all.sacct.txt"  # the same jobs, --format=ALL
SYNC = FIXTURES / "sync.sacct.txt"  # helios sync's export (-X, Cluster first) once every job had ended
HEADER = "|".join(
    ["JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "State", "Submit", "Eligible", "Start", "End"]
    + ["ElapsedRaw", "NCPUS", "ReqTRES", "AllocTRES"]
)
T0 = "2026-12-02T03:49"
ALLOC = "billing=1,cpu=1,gres/gpu=1,node=1"
REQ = "billing=1,cpu=1,gres/gpu=1,mem=16000M,node=1"


def row(job: str, raw: str, state: str = "COMPLETED", name: str = "j", alloc: str = ALLOC, **times: str) -> str:
    """One sacct line of HEADER's columns (user alice, account teama, partition vcA)."""
    t = {"submit": f"{T0}:00", "eligible": f"{T0}:00", "start": f"{T0}:10", "end": f"{T0}:40", "elapsed": "30"}
    t |= times
    fields = [job, raw, name, "alice", "teama", "vcA", state, t["submit"], t["eligible"], t["start"], t["end"]]
    return "|".join([*fields, t["elapsed"], "1", REQ, alloc])


def export(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    """A sacct export file of the given rows."""
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def read(path: Path, **options) -> pl.DataFrame:
    """The jobs read from an export (without the row numbers)."""
    return read_export(path, SlurmOptions(**options)).jobs.drop("_row")


def test_the_real_export_has_one_row_per_job_and_no_steps():
    result = read_export(BATCH1, SlurmOptions(cluster="heliostest"))
    lines = BATCH1.read_text().splitlines()[1:]
    steps = [line for line in lines if "." in line.split("|")[0]]
    assert result.steps_skipped == len(steps) == 29 and result.rows_superseded == 0
    jobs = result.jobs.drop("_row")
    assert jobs.height == len(lines) - len(steps) == 29
    states = dict(jobs.group_by("state").len().iter_rows())
    assert states == {"COMPLETED": 22, "RUNNING": 2, "CANCELLED": 3, "FAILED": 2}
    by_name = {r["job_name"]: r for r in jobs.iter_rows(named=True)}
    assert by_name["long"]["end_time"] is None and by_name["long"]["duration"] > 0  # elapsed so far
    assert by_name["cancel-pending"]["start_time"] is None and by_name["cancel-pending"]["gpu_num"] == 8  # ReqTRES
    assert by_name["cancel-begin"]["queue"] is None and by_name["cancel-running"]["start_time"] is not None
    assert {r["job_id"] for r in jobs.iter_rows(named=True) if r["job_name"].startswith("arr [")} == {16, 27, 28, 29}
    assert by_name["arr [16_3]"]["job_id"] == 16  # the last element keeps the array's number as JobIDRaw
    assert sorted(jobs["gpu_num"].unique().to_list()) == list(range(9))


def test_format_all_reads_the_same_jobs_as_the_narrow_export():
    narrow = read(BATCH1, cluster="heliostest")
    wide = read(BATCH1_ALL)  # its Cluster column names the cluster
    assert wide.drop("priority").equals(narrow.drop("priority"))  # the narrow export has no Priority
    assert narrow["priority"].is_null().all() and wide["priority"].is_not_null().all()


def test_the_scheduler_columns_come_from_account_partition_qos_timelimit_and_priority():
    jobs = read(BATCH1_ALL).sort("job_id")
    first = jobs.row(0, named=True)  # Timelimit 00:01:00, TimelimitRaw 1 (minutes)
    assert (first["account"], first["partition"], first["qos"], first["timelimit_s"]) == ("teama", "vcA", "normal", 60)
    assert first["priority"] == 4294901759
    by_id = {r["job_id"]: r["timelimit_s"] for r in jobs.iter_rows(named=True)}
    assert by_id[4] is None and by_id[5] is None  # Partition_Limit: the partition's limit, left to the scheduler


def test_a_time_limit_is_read_from_timelimitraw_minutes_when_timelimit_is_absent(tmp_path):
    path = tmp_path / "raw.txt"
    lines = ["JobID|Partition|State|Submit|ReqTRES|TimelimitRaw", "7|gpu|PENDING|2026-01-02T03:04:05|gres/gpu=1|90"]
    path.write_text("\n".join([*lines, "8|gpu|PENDING|2026-01-02T03:04:05|gres/gpu=1|UNLIMITED"]) + "\n")
    jobs = ingest(path, "slurm", "raw", root=tmp_path / "data").jobs().collect().sort("job_id")
    assert jobs["timelimit_s"].to_list() == [5400, None]


def test_the_cluster_is_the_given_name_else_the_cluster_column_else_slurm():
    assert set(read(SYNC)["cluster"]) == {"heliostest"}
    assert set(read(SYNC, cluster="ours")["cluster"]) == {"ours"}
    assert set(read(BATCH1)["cluster"]) == {"slurm"}


def test_fewer_columns_still_make_jobs_and_say_what_they_supply(tmp_path):
    path = tmp_path / "few.txt"
    path.write_text("JobID|State|Submit|Partition|ReqTRES\n12|COMPLETED|2026-01-02T03:04:05|gpu|gres/gpu=2\n")
    dataset = ingest(path, "slurm", "few", root=tmp_path / "data")
    jobs = dataset.jobs().collect()
    assert jobs.select("job_id", "vc", "gpu_num", "state", "duration").row(0) == (12, "gpu", 2, "COMPLETED", 0)
    assert jobs["start_time"].is_null().all()
    absent = dataset.meta["quality"]["absent_columns"]
    assert {"user", "start_time", "end_time", "queue", "cpu_num"} <= set(absent)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("JobID|State|Submit\n1|COMPLETED|2026-01-01T00:00:00\n", r"missing required sacct column\(s\) Partition"),
        ("JobID|State|Partition|AllocTRES\n", r"missing required sacct column\(s\) Submit"),
        ("JobID|State|Submit|Partition\n", r"a GPU column \(AllocTRES, AllocGRES, ReqTRES, ReqGRES or Gres\)"),
        ("", r"empty file"),
    ],
)
def test_a_missing_column_is_named(tmp_path, text, match):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(IngestError, match=match):
        read_export(path, SlurmOptions())


@pytest.mark.parametrize(
    ("bad_row", "kind", "detail"),
    [
        (row("7", "7", name="a|b"), "wrong_field_count", "16 fields, the header has 15: 7|7|a|b|alice|"),
        (row("7", "7", submit="yesterday"), "unparsable_required", "Submit=yesterday (expected YYYY-MM-DD"),
        (row("7x", "7"), "unparsable_required", "JobID=7x (expected a Slurm job id"),
        (row("7", "seven"), "unparsable_required", "JobIDRaw=seven (expected an integer)"),
        ("", "blank_row", "empty row"),
    ],
)
def test_a_line_that_is_no_job_is_rejected_with_its_file_row_and_reason(tmp_path, bad_row, kind, detail):
    path = export(tmp_path, row("1", "1"), bad_row, row("8", "8"))
    dataset = ingest(path, "slurm", "x", root=tmp_path / "data")
    assert dataset.jobs().collect()["job_id"].to_list() == [1, 8]
    issue = dataset.meta["quality"]["issues"][kind]
    assert issue["count"] == 1 and issue["action"] == "dropped"
    example = issue["examples"][0]
    assert (example["file"], example["row"]) == (str(path), 3) and example["detail"].startswith(detail)


def test_every_rejected_line_is_counted_and_the_first_are_shown(tmp_path):
    bad = [row(str(n), str(n), name="a|b") for n in range(10, 17)]
    dataset = ingest(export(tmp_path, row("1", "1"), *bad), "slurm", "x", root=tmp_path / "data")
    issue = dataset.meta["quality"]["issues"]["wrong_field_count"]
    assert issue["count"] == 7 and [e["row"] for e in issue["examples"]] == [3, 4, 5, 6, 7]


def test_a_bad_optional_time_is_nulled_and_flagged(tmp_path):
    path = export(tmp_path, row("1", "1", end="soon"))
    jobs = read_export(path, SlurmOptions()).jobs
    assert jobs["end_time"].to_list() == [None] and jobs["_issue:unparsable_value"].to_list() == ["End=soon"]


@pytest.mark.parametrize(("slurm", "state"), [*STATE_MAP.items(), ("CANCELLED by 1234", "CANCELLED")])
def test_every_slurm_state_maps_to_a_schema_state(tmp_path, slurm, state):
    jobs = read(export(tmp_path, row("1", "1", state=slurm)))
    assert jobs["state"].to_list() == [state] and state in schema.STATES


def test_unfinished_states_are_never_final():
    unfinished = {s for s, mapped in STATE_MAP.items() if mapped in schema.UNFINISHED_STATES}
    assert {"RUNNING", "PENDING", "SUSPENDED", "REQUEUED", "COMPLETING", "REQUEUE_HOLD"} <= unfinished
    assert all(schema.state_group(STATE_MAP[s]) == schema.UNFINISHED for s in unfinished)


def test_an_unknown_state_is_kept_for_validation_to_flag(tmp_path):
    dataset = ingest(export(tmp_path, row("1", "1", state="EXPLODED")), "slurm", "x", root=tmp_path / "d")
    assert dataset.jobs().collect()["state"].to_list() == [None]
    assert dataset.meta["quality"]["issues"]["unknown_state"]["examples"][0]["detail"] == "state=EXPLODED"


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ("billing=4,cpu=4,gres/gpu=8,mem=4000M,node=1", 8),
        ("cpu=2,gres/gpu:a100=2,gres/gpu=2,node=1", 2),  # typed beside the total: the total
        ("cpu=2,gres/gpu:a100=2,gres/gpu:v100=1,node=1", 3),  # typed only: their sum
        ("cpu=2,gres/gpumem=40G,mem=1G", None),  # another gres, no GPU named
        ("gres/gpu=16", 16),
        (None, None),
    ],
)
def test_gpus_come_from_the_tres_text(tres, gpus):
    assert pl.DataFrame({"t": [tres]}, schema={"t": pl.String}).select(gpu_count("t")).item() == gpus


def test_gpus_fall_back_to_the_request_when_there_is_no_allocation(tmp_path):
    pending = row("2", "2", state="PENDING", alloc="", start="Unknown", end="Unknown", elapsed="0")
    jobs = read(export(tmp_path, pending.replace(REQ, REQ.replace("gpu=1", "gpu=4"))))
    assert jobs.select("gpu_num", "start_time", "end_time", "duration", "queue").row(0) == (4, None, None, 0, None)


def test_a_requeued_job_counts_once_as_its_last_record(tmp_path):
    first = row("5", "5", state="REQUEUED", end=f"{T0}:20", elapsed="10")
    requeued = {"submit": f"{T0}:20", "eligible": "2026-12-02T03:51:20", "start": "2026-12-02T03:51:30"}
    last = row("5", "5", state="COMPLETED", **requeued)
    result = read_export(export(tmp_path, first, last), SlurmOptions())
    assert result.rows_superseded == 1
    assert result.jobs.select("job_id", "state", "queue").rows() == [(5, "COMPLETED", 10)]


def test_het_components_are_jobs_with_their_own_raw_ids(tmp_path):
    jobs = read(export(tmp_path, row("7+0", "7", name="het"), row("7+1", "8", name="het"), row("7+0.0", "7.0")))
    assert jobs.select("job_id", "job_name").rows() == [(7, "het [7+0]"), (8, "het [7+1]")]


def test_without_jobidraw_array_and_het_ids_are_distinct_and_above_plain_ids(tmp_path):
    header = HEADER.replace("JobIDRaw|", "")
    rows = [r.split("|", 2)[0] + "|" + r.split("|", 2)[2] for r in (row(j, "") for j in ("15", "15_0", "15_1"))]
    rows += [row(j, "").replace("||", "|", 1) for j in ("15+1", "15_[2-5]")]
    jobs = read(export(tmp_path, *rows, header=header))
    ids = jobs["job_id"].to_list()
    assert ids[0] == 15 and len(set(ids)) == 5
    assert ids[1:3] == [ARRAY_BIT + (15 << 24), ARRAY_BIT + (15 << 24) + 1]
    assert ids[3] == HET_BIT + (15 << 24) + 1 and ids[4] > ids[2]
    assert jobs["job_name"].to_list() == ["j", "j [15_0]", "j [15_1]", "j [15+1]", "j [15_[2-5]]"]


def test_unknown_and_none_times_are_nulls_and_elapsed_text_gives_the_duration(tmp_path):
    header = "JobID|State|Submit|Eligible|Start|End|Elapsed|Partition|AllocTRES"
    lines = [
        "1|RUNNING|2026-01-01T00:00:00|Unknown|2026-01-01T00:00:05|Unknown|1-02:03:04|p|gres/gpu=1",
        "2|PENDING|2026-01-01T00:00:00|None|None|Unknown|00:00:00|p|",
    ]
    jobs = read(export(tmp_path, *lines, header=header))
    assert jobs.select("duration", "queue").rows() == [(93_784, 5), (0, None)]
    assert jobs["end_time"].null_count() == 2


def test_queue_starts_at_eligible_when_it_is_known(tmp_path):
    held = row("1", "1", eligible=f"{T0}:08")  # submitted :00, eligible :08, started :10
    plain = row("2", "2", eligible="Unknown")
    assert read(export(tmp_path, held, plain))["queue"].to_list() == [2, 10]


def test_anonymise_replaces_users_by_salted_pseudonyms_and_drops_job_names(tmp_path):
    path = export(tmp_path, row("1", "1", name="alice-secret"), row("2_0", "3", name="x"))
    jobs = read(path, anonymise_salt="pepper")
    assert jobs["user"].to_list() == [pseudonym("alice", "pepper")] * 2
    assert pseudonym("alice", "pepper") != pseudonym("alice", "salt") and "alice" not in pseudonym("alice", "pepper")
    assert jobs["job_name"].to_list() == [None, "[2_0]"]


def test_the_account_can_be_the_virtual_cluster(tmp_path):
    jobs = read(export(tmp_path, row("1", "1")), vc_from="account")
    assert jobs["vc"].to_list() == ["teama"]


def test_parsable_with_a_trailing_bar_and_windows_line_ends(tmp_path):
    path = tmp_path / "p.txt"
    path.write_bytes(f"{HEADER}|\r\n{row('1', '1')}|\r\n".encode())
    assert read(path).select("job_id", "gpu_num").rows() == [(1, 1)]


def test_capacity_from_scontrol_and_sinfo_of_the_real_cluster():
    for name in ("scontrol_nodes.txt", "sinfo.txt"):
        capacity = read_capacity(FIXTURES / name)
        assert capacity.vc_gpus == {"vcA": 8, "vcB": 8, "vcC": 8}, name
        assert capacity.total_gpus == 8 and capacity.gpus_per_node == 8, name


def test_capacity_of_shared_nodes_counts_each_node_once_in_the_total(tmp_path):
    path = tmp_path / "nodes.txt"
    path.write_text(
        "NodeName=a1 Gres=gpu:a100:4(S:0-1) Partitions=gpu,all CfgTRES=cpu=64,gres/gpu=4\n"
        "NodeName=a2 Gres=gpu:a100:4,gpu:v100:2 Partitions=gpu,all\n"
        "NodeName=c1 Gres=(null) Partitions=all\n"
    )
    capacity = read_capacity(path)
    assert capacity.vc_gpus == {"all": 10, "gpu": 10} and capacity.total_gpus == 10
    assert capacity.gpus_per_node is None  # 4 and 6 GPUs


@pytest.mark.parametrize(("tres", "gres", "gpus"), [(None, "gpu:8", 8), ("gres/gpu=2", "gpu:9", 2), (None, None, 0)])
def test_node_gpus(tres, gres, gpus):
    assert node_gpus(tres, gres) == gpus


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("vc,gpus\nvcA,eight\n", r"caps.csv row 2, column 'gpus': expected a whole number of GPUs, got 'eight'"),
        ("name,size\nvcA,8\n", r"expected columns vc,gpus"),
        ("NODELIST|PARTITION\nn1|p\n", r"needs NODELIST, PARTITION and GRES"),
        ("NodeName=n1 Gres=gpu:2\nhello\n", r"row 2: expected a NodeName=... line"),
    ],
)
def test_a_bad_capacity_file_is_named(tmp_path, text, match):
    path = tmp_path / "caps.csv"
    path.write_text(text)
    with pytest.raises(IngestError, match=match):
        read_capacity(path)


def test_an_ingest_with_capacity_writes_daily_rows_and_one_without_names_the_disabled_views(tmp_path):
    root = tmp_path / "data"
    options = IngestOptions(capacity=FIXTURES / "scontrol_nodes.txt", cluster="heliostest")
    with_caps = ingest(BATCH1, "slurm", "with", options, root=root)
    assert with_caps.jobs_path.is_dir() and capacity_disabled(with_caps.meta) == []
    assert with_caps.meta["gpus_per_node"] == 8
    caps = with_caps.vc_gpus()
    assert set(caps["vc"]) == {"vcA", "vcB", "vcC", "*"} and caps["date"].n_unique() == 1
    without = ingest(BATCH1, "slurm", "without", root=root)
    assert without.vc_gpus().is_empty() and any("what-if" in v for v in capacity_disabled(without.meta))
    assert without.meta["quality"]["issues"]["vc_without_capacity"]["count"] == 29


def test_options_of_other_formats_are_refused(tmp_path):
    with pytest.raises(IngestError, match="--vc-from applies to --format slurm only"):
        ingest(BATCH1, "csv", "x", IngestOptions(vc_from="account"), root=tmp_path)
    with pytest.raises(IngestError, match="--capacity and --anonymise apply to --format slurm and csv only"):
        ingest(BATCH1, "philly", "x", IngestOptions(capacity=BATCH1), root=tmp_path)


def test_the_sync_command_asks_for_every_user_and_no_steps():
    command = sacct_command("2026-12-01T00:00:00")
    assert command[:4] == ["sacct", "--allusers", "--allocations", "--parsable2"]
    assert "--starttime=2026-12-01T00:00:00" in command and "--endtime=now+7days" in command
    assert command[-1].startswith("--format=Cluster,JobID,JobIDRaw,")
