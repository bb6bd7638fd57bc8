"""Refreshing a dataset: `helios ingest --append` and `helios sync slurm` (with stand-in sacct and scontrol
programs) add new jobs, update changed ones, rewrite only the months touched, and change nothing when run again."""

from __future__ import annotations

import os
import stat
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

import cli
from analytics import store
from analytics.commands.sync import since_time
from analytics.ingest import IngestError, IngestOptions, append, ingest
from tests.analytics.test_ingest_slurm import BATCH1, FIXTURES, SYNC

CAPACITY = FIXTURES / "scontrol_nodes.txt"
HEADER = "|".join(
    ["Cluster", "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "State", "Submit", "Eligible", "Start"]
    + ["End", "ElapsedRaw", "NCPUS", "AllocTRES"]
)


def month_export(path: Path, days: list[datetime], first_id: int = 1, state: str = "COMPLETED") -> Path:
    """An export with one 1-GPU job per day, submitted at noon and running one hour."""
    lines = [HEADER]
    for i, day in enumerate(days):
        submit = day.replace(hour=12).strftime("%Y-%m-%dT%H:%M:%S")
        end = day.replace(hour=13).strftime("%Y-%m-%dT%H:%M:%S")
        fields = ["c1", str(first_id + i), str(first_id + i), "j", "u1", "a", "vcA", state, submit, submit, submit]
        lines.append("|".join([*fields, end, "3600", "1", "cpu=1,gres/gpu=1"]))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_refresh_updates_running_jobs_adds_new_ones_and_a_second_run_changes_nothing(data_root):
    options = IngestOptions(cluster="heliostest", capacity=CAPACITY)
    first = ingest(BATCH1, "slurm", "mine", options)
    assert first.jobs().filter(pl.col("state") == "RUNNING").collect().height == 2
    result = append(SYNC, "slurm", "mine", IngestOptions())
    assert (result.added, result.updated, result.unchanged) == (8, 2, 27)
    jobs = result.dataset.jobs().collect()
    assert jobs.height == 37 and jobs.select("cluster", "job_id").is_unique().all()
    assert jobs.filter(pl.col("job_name") == "timeout")["state"].to_list() == ["TIMEOUT"]
    assert "RUNNING" not in jobs["state"].to_list()
    again = append(SYNC, "slurm", "mine", IngestOptions())
    assert (again.added, again.updated, again.unchanged, again.months_rewritten) == (0, 0, 37, ())
    assert again.dataset.version == result.dataset.version
    assert again.dataset.path.resolve() == result.dataset.path.resolve()
    meta = result.dataset.meta
    assert meta["row_counts"]["jobs"] == 37 and [r["jobs"] for r in meta["refreshes"]] == [37]
    assert meta["capacity_source"] == str(CAPACITY)  # kept from the first ingest: the refresh gave none


def test_append_creates_an_absent_dataset_and_refuses_sources_without_stable_ids(data_root, tmp_path):
    created = append(SYNC, "slurm", "fresh")
    assert created.added == 37 and created.dataset.jobs_path.is_dir()
    philly = tmp_path / "philly.csv"
    philly.write_text("timestamp,duration,num_gpus,cluster\n2017-10-03 00:00:00,60,1,vc1\n")
    with pytest.raises(IngestError, match="--append needs job ids that stay the same"):
        append(philly, "philly", "p")


def test_only_the_touched_months_are_rewritten_and_the_others_hard_linked(data_root, tmp_path):
    days = [datetime(2025, 1, 1) + timedelta(days=d) for d in range(0, 365, 3)]
    dataset = ingest(month_export(tmp_path / "year.txt", days), "slurm", "year")
    assert len(list(dataset.jobs_path.iterdir())) == 12
    inode = {p.name: p.stat().st_ino for p in dataset.jobs_path.iterdir()}
    late = month_export(tmp_path / "late.txt", [datetime(2025, 12, 31)], first_id=1000)
    result = append(late, "slurm", "year")
    assert result.months_rewritten == ("2025-12",) and result.added == 1
    after = {p.name: p.stat().st_ino for p in result.dataset.jobs_path.iterdir()}
    assert [m for m in after if after[m] != inode[m]] == ["2025-12.parquet"]
    assert result.dataset.jobs().collect().height == len(days) + 1


def test_capacity_grows_with_the_period_from_the_last_known_day_or_a_new_file(data_root, tmp_path):
    first = month_export(tmp_path / "a.txt", [datetime(2025, 3, 1)])
    ingest(first, "slurm", "caps", IngestOptions(capacity=CAPACITY))
    later = month_export(tmp_path / "b.txt", [datetime(2025, 3, 3)], first_id=10)
    caps = append(later, "slurm", "caps").dataset.vc_gpus()
    assert caps["date"].n_unique() == 3 and set(caps["gpus"]) == {8}
    bigger = tmp_path / "caps.csv"
    bigger.write_text("vc,gpus\nvcA,16\n*,16\n")
    latest = month_export(tmp_path / "c.txt", [datetime(2025, 3, 5)], first_id=20)
    caps = append(latest, "slurm", "caps", IngestOptions(capacity=bigger)).dataset.vc_gpus()
    by_day = dict(caps.filter(pl.col("vc") == "vcA").select("date", "gpus").iter_rows())
    assert [by_day[d] for d in sorted(by_day)] == [8, 8, 8, 16, 16]


def test_a_job_whose_submit_month_changes_moves_without_a_duplicate(data_root, tmp_path):
    ingest(month_export(tmp_path / "a.txt", [datetime(2025, 1, 31)], state="REQUEUED"), "slurm", "move")
    moved = append(month_export(tmp_path / "b.txt", [datetime(2025, 2, 1)]), "slurm", "move")
    assert moved.months_rewritten == ("2025-01", "2025-02") and moved.updated == 1
    jobs = moved.dataset.jobs().collect()
    assert jobs.select("job_id", "state").rows() == [(1, "COMPLETED")]
    assert sorted(p.name for p in moved.dataset.jobs_path.iterdir()) == ["2025-02.parquet"]


def _bad_submit_line() -> str:
    """A job line of BATCH1 (job 99) whose Submit is no time."""
    good_line = BATCH1.read_text().splitlines()[1].split("|")
    return "|".join(["99", "99", *good_line[2:8], "2026-13-02T03:50:58", *good_line[9:]])


def test_a_failed_refresh_leaves_the_dataset_as_it_was(data_root, tmp_path):
    before = ingest(BATCH1, "slurm", "keep")
    bad = tmp_path / "bad.txt"
    bad.write_text(BATCH1.read_text().splitlines()[0] + "\n" + _bad_submit_line() + "\n")
    with pytest.raises(IngestError, match=r"no valid rows left .*unparsable_required 1 .*row 2: Submit=2026-13-02"):
        append(bad, "slurm", "keep")
    assert store.open_dataset("keep").version == before.version


def test_a_refresh_rejects_a_line_that_is_no_job_keeps_the_others_and_says_why(data_root, tmp_path, capsys):
    ingest(BATCH1, "slurm", "keep")
    bad = tmp_path / "bad.txt"
    bad.write_text(BATCH1.read_text() + _bad_submit_line() + "\n")
    assert cli.main(["ingest", str(bad), "--format", "slurm", "--name", "keep", "--append", "--quiet"]) == 0
    out = capsys.readouterr().out
    row = len(BATCH1.read_text().splitlines()) + 1
    assert "dataset keep: 0 added, 0 updated, 29 unchanged" in out  # nothing changed, yet the rejection is shown
    assert f"unparsable_required: 1 dropped (e.g. {bad} row {row}: Submit=2026-13-02T03:50:58 (expected" in out


def test_the_cli_appends_and_prints_what_changed(data_root, capsys):
    assert cli.main(["ingest", str(BATCH1), "--format", "slurm", "--name", "c", "--cluster", "heliostest"]) == 0
    assert "no GPU capacity given (--capacity): disabled views: GPU utilisation" in capsys.readouterr().out
    assert cli.main(["ingest", str(SYNC), "--format", "slurm", "--name", "c", "--append", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "dataset c: 8 added, 2 updated, 27 unchanged" in out and "months rewritten: 2026-12; now 37 jobs" in out


def test_anonymise_needs_the_salt_in_the_environment(data_root, monkeypatch, capsys):
    argv = ["ingest", str(SYNC), "--format", "slurm", "--name", "anon", "--anonymise", "--quiet"]
    monkeypatch.delenv("HELIOS_ANON_SALT", raising=False)
    assert cli.main(argv) == 2
    assert "--anonymise needs a secret salt in $HELIOS_ANON_SALT" in capsys.readouterr().err
    monkeypatch.setenv("HELIOS_ANON_SALT", "s3cret")
    assert cli.main(argv) == 0
    users = store.open_dataset("anon").jobs().select("user").unique().collect()["user"].to_list()
    assert len(users) == 2 and all(u.startswith("u-") for u in users)


def _program(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch) -> Path:
    """A PATH with stand-ins for sacct (prints the sync fixture, logs its arguments) and scontrol."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _program(bin_dir, "sacct", f'echo "$@" > {bin_dir}/sacct.args; echo "$SLURM_TIME_FORMAT" >> {bin_dir}/sacct.args; '
             f"cat {SYNC}")  # fmt: skip
    _program(bin_dir, "scontrol", f"cat {CAPACITY}")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def test_sync_runs_sacct_with_the_right_flags_and_refreshes(data_root, fake_slurm, capsys):
    assert cli.main(["sync", "slurm", "--name", "live", "--since", "2d", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "dataset live: 37 added, 0 updated, 0 unchanged" in out and "disabled views" not in out
    args, time_format = (fake_slurm / "sacct.args").read_text().splitlines()
    assert args.startswith("--allusers --allocations --parsable2 --starttime=") and time_format == "standard"
    assert "--endtime=now+7days --format=Cluster,JobID,JobIDRaw,JobName,User,Account,Partition,State" in args
    dataset = store.open_dataset("live")
    assert dataset.meta["source"].startswith("sacct --starttime=") and set(dataset.vc_gpus()["gpus"]) == {8}
    assert cli.main(["sync", "slurm", "--name", "live", "--quiet"]) == 0
    assert "0 added, 0 updated, 37 unchanged" in capsys.readouterr().out


def test_sync_says_when_sacct_is_missing_or_fails(data_root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert cli.main(["sync", "slurm", "--name", "x", "--quiet"]) == 2
    assert "sacct not found on PATH" in capsys.readouterr().err
    _program(tmp_path, "sacct", "echo 'sacct: error: Problem talking to the database' >&2; exit 1")
    assert cli.main(["sync", "slurm", "--name", "x", "--quiet"]) == 2
    assert "exited with 1: sacct: error: Problem talking to the database" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2d", datetime(2026, 3, 8, 12)), ("12h", datetime(2026, 3, 10)), ("30m", datetime(2026, 3, 10, 11, 30))],
)
def test_since_accepts_durations_and_dates(text, expected):
    now = datetime(2026, 3, 10, 12)
    assert since_time(text, now) == expected
    assert since_time("2026-01-02", now) == datetime(2026, 1, 2)
    with pytest.raises(IngestError, match="--since 'yesterday'"):
        since_time("yesterday", now)


def test_a_refresh_without_capacity_is_checked_against_the_stored_one(data_root):
    ingest(BATCH1, "slurm", "checked", IngestOptions(cluster="heliostest", capacity=CAPACITY))
    issues = append(SYNC, "slurm", "checked").dataset.meta["quality"]["issues"]
    assert issues["vc_without_capacity"]["count"] == 0
    fresh = append(SYNC, "slurm", "fresh").dataset.meta["quality"]["issues"]
    assert fresh["vc_without_capacity"]["count"] == 37


def test_an_export_without_jobs_changes_nothing(data_root, tmp_path):
    quiet = tmp_path / "quiet.txt"
    quiet.write_text(SYNC.read_text().splitlines()[0] + "\n")
    with pytest.raises(IngestError, match="no jobs, and dataset 'q' does not exist yet"):
        append(quiet, "slurm", "q")
    before = ingest(SYNC, "slurm", "q")
    result = append(quiet, "slurm", "q")
    assert (result.added, result.updated, result.unchanged) == (0, 0, 0) and result.dataset.version == before.version
    with pytest.raises(IngestError, match=r"no valid rows left after validation \(0 rows read\)"):
        ingest(quiet, "slurm", "q2")
