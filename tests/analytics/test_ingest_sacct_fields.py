"""Slurm exports as Open XDMoD takes them: `sacct --noheader --parsable2` with XDMoD's field lists (`--sacct-fields
xdmod|xdmod-legacy|LIST`), legacy GRES strings, jobs without a partition, times that are not times, and a rejection
that always says why. Fixtures (fixtures/slurm/xdmod*.sacct.txt) are written from sacct's documented output."""

from __future__ import annotations

import pytest

import cli
from analytics import store
from analytics.ingest import IngestError, IngestOptions, ingest
from analytics.ingest.slurm import FIELD_LISTS, sacct_fields
from tests.analytics.test_ingest_slurm import FIXTURES

XDMOD = FIXTURES / "xdmod.sacct.txt"  # 26 fields, 12 lines: 11 jobs (1011 requeued, so listed twice)
LEGACY = FIXTURES / "xdmod-legacy.sacct.txt"  # 25 fields, GPUs only in ReqGRES
# The lists as the issue gives them (Open XDMoD's Slurm shredder), to check FIELD_LISTS against.
ISSUE_XDMOD = (
    "JobID,JobIDRaw,Cluster,Partition,QOS,Account,Group,GID,User,UID,Submit,Eligible,Start,End,Elapsed,ExitCode,"
    "State,NNodes,NCPUS,ReqCPUS,ReqMem,ReqTRES,AllocTRES,Timelimit,NodeList,JobName"
)
ISSUE_LEGACY = (
    "JobID,JobIDRaw,Cluster,Partition,Account,Group,GID,User,UID,Submit,Eligible,Start,End,Elapsed,ExitCode,State,"
    "NNodes,NCPUS,ReqCPUS,ReqMem,ReqGRES,ReqTRES,Timelimit,NodeList,JobName"
)
# job_id -> (vc, gpu_num, gpu_type, state, queue s, duration s): read by hand from the fixture lines.
XDMOD_JOBS = {
    1001: ("gpu", 2, "a100", "COMPLETED", 300, 3600),
    1002: ("gpu", 1, None, "FAILED", 600, 1800),
    1003: ("cpu", 0, None, "COMPLETED", 30, 600),
    1004: ("gpu", 4, None, "CANCELLED", None, 0),  # cancelled while pending: its Start and End are the cancel time
    1005: ("gpu", 4, "v100", "PENDING", None, 0),  # End printed as its submit time
    1006: ("gpu", 8, None, "RUNNING", 60, 7140),  # Elapsed so far
    1007: ("(none)", 2, None, "COMPLETED", 0, 3600),  # empty Partition
    1008: ("gpu", 1, None, "COMPLETED", 240, 1200),  # 1008_2: the last element keeps the array's id
    1009: ("gpu", 1, None, "COMPLETED", 120, 600),  # 1008_1
    1010: ("gpu", 1, None, "TIMEOUT", 0, 86_410),  # Elapsed 1-00:00:10
    1011: ("gpu", 1, None, "COMPLETED", 120, 1200),  # the requeued job's last record, queued from Eligible
}
LEGACY_JOBS = {
    2001: ("gpu", 2, "P100", "COMPLETED", 600, 7200),  # gpu:P100:2(IDX:0-1)
    2002: ("gpu", 4, None, "FAILED", 20, 1800),  # hbm:0,gpu:4
    2003: ("gpu", 2, None, "COMPLETED", 3600, 3600),  # gpu:2
    2004: ("gpu", 1, "k80", "COMPLETED", 5, 600),  # bandwidth:4G,gpu:k80:1
    2005: ("cpu", 0, None, "COMPLETED", 0, 1200),  # no GRES
    2006: ("gpu", 1, "tesla", "COMPLETED", 60, 300),  # gpu:tesla:1(IDX:3),bandwidth:4G
    2007: ("gpu", 2, None, "PENDING", None, 0),  # Start None, End Unknown
    2008: ("gpu", 8, None, "CANCELLED", None, 0),  # cancelled before it started
    2009: ("(none)", 2, None, "COMPLETED", 0, 3600),  # empty Partition
    2010: ("gpu", 4, "P100", "NODE_FAIL", 600, 3600),  # gpu:P100:4(IDX:0-3)
    2011: ("gpu", 1, None, "OUT_OF_MEMORY", 10, 300),
}


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of a quiet `helios` command (no progress lines)."""
    code = cli.main([*argv, "--quiet"] if argv[0] == "ingest" and "--quiet" not in argv else list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _by_id(name: str) -> dict[int, tuple]:
    jobs = store.open_dataset(name).jobs().collect()
    cols = ["job_id", "vc", "gpu_num", "gpu_type", "state", "queue", "duration"]
    return {row[0]: row[1:] for row in jobs.select(cols).rows()}


def test_the_named_lists_are_xdmods_26_and_25_fields():
    assert FIELD_LISTS["xdmod"] == tuple(ISSUE_XDMOD.split(",")) and len(FIELD_LISTS["xdmod"]) == 26
    assert FIELD_LISTS["xdmod-legacy"] == tuple(ISSUE_LEGACY.split(",")) and len(FIELD_LISTS["xdmod-legacy"]) == 25


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("xdmod", FIELD_LISTS["xdmod"]),
        ("XDMoD-Legacy", FIELD_LISTS["xdmod-legacy"]),
        ("jobid,state,submit,partition,alloctres", ("jobid", "state", "submit", "partition", "alloctres")),
        ("JobID|State|Submit", ("JobID", "State", "Submit")),
        ("JobID%20,JobName%-30,State", ("JobID", "JobName", "State")),  # sacct --format widths
    ],
)
def test_sacct_fields_takes_a_named_list_or_the_format_text(text, names):
    assert sacct_fields(text) == names


@pytest.mark.parametrize("text", ["", ",", "JobID,,State"])
def test_an_empty_field_name_is_refused(text):
    with pytest.raises(IngestError, match=r"--sacct-fields .*expected xdmod \(26 fields\), xdmod-legacy \(25 fields\)"):
        sacct_fields(text)


def test_an_xdmod_export_ingests_its_jobs_states_gpus_queues_and_gpu_time(data_root, capsys):
    code, out, err = _run(capsys, "ingest", str(XDMOD), "--format", "slurm", "--name", "x", "--sacct-fields", "xdmod")
    assert (code, err) == (0, "")
    assert "dataset x: 11 jobs, clusters pearl" in out and "rows: 11 read, 11 kept" in out
    assert _by_id("x") == XDMOD_JOBS
    ds = store.open_dataset("x")
    jobs = ds.jobs().collect()
    gpu_s = (jobs["gpu_num"].cast(int) * jobs["duration"]).sum()
    assert gpu_s == 7200 + 1800 + 57_120 + 7200 + 1200 + 600 + 86_410 + 1200
    never = jobs.filter(jobs["job_id"].is_in([1004, 1005]))
    assert never["start_time"].is_null().all() and never["end_time"].is_null().all()
    assert ds.meta["slurm"]["columns_from"] == "--sacct-fields" and ds.meta["slurm"]["rows_superseded"] == 1


def test_a_legacy_gres_export_ingests_with_the_gpus_of_its_reqgres(data_root, capsys):
    argv = ("ingest", str(LEGACY), "--format", "slurm", "--name", "old", "--sacct-fields", "xdmod-legacy")
    code, out, err = _run(capsys, *argv)
    assert (code, err) == (0, "") and "dataset old: 11 jobs, clusters oak" in out
    assert _by_id("old") == LEGACY_JOBS
    jobs = store.open_dataset("old").jobs().collect()
    gpu_s = (jobs["gpu_num"].cast(int) * jobs["duration"]).sum()
    assert gpu_s == 14_400 + 7200 + 7200 + 600 + 300 + 7200 + 14_400 + 300
    assert store.open_dataset("old").meta["slurm"]["gpus_from"] == ["ReqTRES", "ReqGRES"]


def test_a_list_of_ones_own_names_reads_a_headerless_export(tmp_path, data_root):
    path = tmp_path / "mine.txt"
    path.write_text("7|gpu|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|2026-01-01T00:11:00|gpu:v100:2\n")
    fields = sacct_fields("JobID,Partition,State,Submit,Start,End,AllocGRES")
    jobs = ingest(path, "slurm", "mine", IngestOptions(sacct_fields=fields)).jobs().collect()
    cols = ["job_id", "vc", "gpu_num", "gpu_type", "queue", "duration"]
    assert jobs.select(cols).rows() == [(7, "gpu", 2, "v100", 60, 600)]


def test_a_job_line_holding_field_names_is_still_a_job(tmp_path, data_root):
    path = tmp_path / "names.txt"
    path.write_text("9|gpu|user|state|COMPLETED|2026-01-01T00:00:00|gres/gpu=1\n")  # user `user`, job `state`
    fields = sacct_fields("JobID,Partition,User,JobName,State,Submit,AllocTRES")
    jobs = ingest(path, "slurm", "names", IngestOptions(sacct_fields=fields)).jobs().collect()
    assert jobs.select("job_id", "user", "job_name").rows() == [(9, "user", "state")]


def test_a_headerless_export_without_the_option_names_it_and_the_field_count(data_root, capsys):
    code, out, err = _run(capsys, "ingest", str(XDMOD), "--format", "slurm", "--name", "x")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "the first line is not a sacct header but a row of 26 fields ('1001|1001|pearl|gpu|" in err
    assert "--sacct-fields LIST|xdmod|xdmod-legacy (--sacct-fields xdmod has 26 fields)" in err
    code, _, err = _run(capsys, "ingest", str(LEGACY), "--format", "slurm", "--name", "x")
    assert code == 2 and "a row of 25 fields" in err and "(--sacct-fields xdmod-legacy has 25 fields)" in err
    assert not (data_root / "x").exists()


def test_a_field_list_for_an_export_with_a_header_is_refused(data_root, capsys):
    argv = ("ingest", str(FIXTURES / "batch1.sacct.txt"), "--format", "slurm", "--name", "x", "--sacct-fields", "xdmod")
    code, _, err = _run(capsys, *argv)
    assert code == 2 and "the first line is a header ('JobID|JobIDRaw|" in err and "leave it out" in err


def test_the_option_is_for_slurm_only(data_root, capsys):
    code, _, err = _run(capsys, "ingest", str(XDMOD), "--format", "csv", "--name", "x", "--sacct-fields", "xdmod")
    assert code == 2 and "--sacct-fields applies to --format slurm only" in err


def test_a_row_with_another_field_count_is_named_by_row_and_counted(tmp_path, data_root, capsys):
    lines = XDMOD.read_text().splitlines()
    lines[2] = lines[2].replace("|prep", "|prep|with|bars")  # a job name holding two '|'
    lines[5] = lines[5].rsplit("|", 1)[0]  # a line cut short
    path = tmp_path / "bad.txt"
    path.write_text("\n".join(lines) + "\n")
    code, out, _ = _run(capsys, "ingest", str(path), "--format", "slurm", "--name", "x", "--sacct-fields", "xdmod")
    assert code == 0 and "dataset x: 9 jobs" in out and "rows: 11 read, 9 kept" in out
    assert f"wrong_field_count: 2 dropped (e.g. {path} row 3: 28 fields, the field list has 26: 1003|1003|" in out
    assert "; row 6: 25 fields, the field list has 26: 1006|1006|" in out
    issue = store.open_dataset("x").meta["quality"]["issues"]["wrong_field_count"]
    assert issue["count"] == 2 and [e["row"] for e in issue["examples"]] == [3, 6]


def test_an_append_reads_a_newer_headerless_export(data_root, capsys):
    base = ("--format", "slurm", "--name", "x", "--sacct-fields", "xdmod", "--quiet")
    assert _run(capsys, "ingest", str(XDMOD), *base)[0] == 0
    later = data_root.parent / "later.txt"
    running = next(line for line in XDMOD.read_text().splitlines() if line.startswith("1006|"))
    ended = running.replace("|Unknown|01:59:00|0:0|RUNNING|", "|2024-03-02T12:01:00|04:00:00|0:0|COMPLETED|")
    new_job = "1012|1012|pearl|gpu|normal|proj1|grp1|5001|alice|6001|2024-03-05T00:00:00|2024-03-05T00:00:00|"
    new_job += "2024-03-05T00:00:00|2024-03-05T00:10:00|00:10:00|0:0|COMPLETED|1|1|1|1G|gres/gpu=1|gres/gpu=1|"
    new_job += "00:20:00|gpu01|later"
    later.write_text(f"{ended}\n{new_job}\n")
    code, out, _ = _run(capsys, "ingest", str(later), "--append", *base)
    assert code == 0 and "dataset x: 1 added, 1 updated, 0 unchanged" in out and "now 12 jobs" in out
    assert _by_id("x")[1006] == ("gpu", 8, None, "COMPLETED", 60, 14_400)


def test_the_account_is_the_vc_with_vc_from_account(data_root):
    options = IngestOptions(sacct_fields=FIELD_LISTS["xdmod"], vc_from="account")
    jobs = ingest(XDMOD, "slurm", "acct", options).jobs().collect()
    assert dict(jobs.select("job_id", "vc").rows())[1007] == "proj3"


def test_a_job_without_its_vc_column_value_is_kept_in_the_documented_vc(tmp_path, data_root):
    path = tmp_path / "noaccount.txt"
    line = XDMOD.read_text().splitlines()[0].replace("|normal|proj1|", "|normal||")
    path.write_text(line + "\n")
    options = IngestOptions(sacct_fields=FIELD_LISTS["xdmod"], vc_from="account")
    dataset = ingest(path, "slurm", "acct", options)
    assert dataset.jobs().collect().select("vc", "gpu_num").rows() == [("(none)", 2)]
    assert "a job without a account is in VC (none)" in dataset.meta["notes"]


def test_an_export_with_every_row_rejected_says_why(tmp_path, data_root, capsys):
    lines = XDMOD.read_text().splitlines()
    bad = [
        lines[0].replace("|2024-03-01T10:00:00|2024-03-01T10:00:00|", "|yesterday|2024-03-01T10:00:00|", 1),
        lines[1].replace("1002|1002|", "1002x|1002|", 1),
        "",
        lines[2] + "|extra",
        lines[3].replace("|2024-03-01T12:00:00|", "|Unknown|", 1),
    ]
    path = tmp_path / "allbad.txt"
    path.write_text("\n".join(bad) + "\n")
    code, out, err = _run(capsys, "ingest", str(path), "--format", "slurm", "--name", "x", "--sacct-fields", "xdmod")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert f"{path}: no valid rows left after validation (5 rows read): " in err
    assert "blank_row 1 (empty line in the file) (e.g. " in err and "row 3: empty row" in err
    assert "wrong_field_count 1 (" in err and "row 4: 27 fields, the field list has 26" in err
    assert "unparsable_required 2 (" in err and "row 1: Submit=yesterday (expected" in err
    assert "row 2: JobID=1002x (expected a Slurm job id" in err
    assert "missing_required 1 (" in err and "row 5: null submit_time" in err
    assert not (data_root / "x").exists()


def test_a_rejected_line_has_no_say_in_the_traces_span(tmp_path, data_root):
    lines = XDMOD.read_text().splitlines()
    path = tmp_path / "old.txt"
    path.write_text(lines[0] + "\n" + lines[1].replace("1002|1002|", "x|1002|").replace("2024-", "1990-") + "\n")
    dataset = ingest(path, "slurm", "x", IngestOptions(sacct_fields=FIELD_LISTS["xdmod"]))
    assert dataset.meta["period"]["start"].startswith("2024-03-01")
    assert dataset.meta["quality"]["issues"]["unparsable_required"]["count"] == 1
