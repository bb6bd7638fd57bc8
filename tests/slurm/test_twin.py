"""The scheduler twin against the committed real-Slurm recordings (no Slurm needed): each recording replayed with
its own captured configuration meets issue 38's targets, and the figures it is judged by are computed right."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.slurm import twin
from tests.slurm.contention import make_jobs

RECORDINGS = Path(__file__).parent / "recordings"
RUNS = ("fairshare-1", "fairshare-2", "age-1", "builtin-1")


@pytest.fixture(scope="module")
def comparison() -> twin.Comparison:
    return twin.compare_recordings([RECORDINGS / run for run in RUNS])


def _starts(starts: dict[str, float], accounts: dict[str, str] | None = None) -> twin.Starts:
    accounts = accounts or dict.fromkeys(starts, "a")
    return twin.Starts("x", accounts, dict.fromkeys(starts, 0.0), starts)


def test_figures_are_over_the_jobs_that_started():
    run = twin.Starts("x", {"j1": "a", "j2": "a", "j3": "b"}, {"j1": 0.0, "j2": 10.0, "j3": 5.0},
                      {"j1": 4.0, "j2": 30.0})  # fmt: skip
    f = twin.figures(run)
    assert (f.mean_s, f.median_s, f.account_mean_s) == (12.0, 12.0, {"a": 12.0})


def test_a_change_needs_the_records_direction_only_beyond_the_spread():
    noise = 0.05
    assert twin._change("c", (100.0, 200.0), (100.0, 190.0), noise).passed
    assert not twin._change("c", (100.0, 200.0), (100.0, 140.0), noise).passed  # too small
    assert not twin._change("c", (100.0, 120.0), (100.0, 95.0), noise).passed  # wrong way round
    assert twin._change("c", (100.0, 102.0), (100.0, 99.0), noise).passed  # within the spread: size only


def test_the_twin_reads_every_recorded_job_with_its_account_partition_and_limit():
    frame = twin.recorded_frame(RECORDINGS / "fairshare-1")
    jobs = {j.name: j for j in make_jobs()}
    assert frame.height == len(jobs)
    for row in frame.iter_rows(named=True):
        job = jobs[row["job_name"]]
        assert (row["account"], row["partition"], row["timelimit_s"]) == (job.account, job.partition,
                                                                          job.timelimit_min * 60)  # fmt: skip


def test_every_recorded_job_is_replayed(comparison):
    for name, (record, replayed) in comparison.runs.items():
        assert set(replayed.start_s) == set(record.start_s) == set(record.submit_s), name
        assert replayed.account == record.account, name


def test_the_real_slurm_repeats_itself(comparison):
    assert comparison.spread is not None and comparison.spread.tau >= 0.7


@pytest.mark.parametrize("run", RUNS)
def test_the_replay_of_each_run_meets_the_targets(comparison, run):
    missed = [c for c in comparison.checks if c.what.startswith(f"{run} ") and not c.passed]
    assert not missed, "\n".join(f"{c.what}: record {c.record:.2f}, twin {c.twin:.2f}" for c in missed)


@pytest.mark.parametrize("base, other", twin.CHANGES)
def test_the_twin_predicts_each_configuration_change(comparison, base, other):
    missed = [c for c in comparison.checks if c.what.startswith(f"{other}/{base} ") and not c.passed]
    assert not missed, "\n".join(f"{c.what}: record {c.record:.2f}x, twin {c.twin:.2f}x" for c in missed)
