"""The contention experiment: its job list and figures without Slurm, the committed recordings complete and
readable, and one short preset run end to end on a real Slurm 22.05 (14 jobs, about 60 s; runs as root where Slurm
is installed, skips elsewhere, fails with REQUIRE_SLURM=1 when it cannot run)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.slurm import contention as ct
from tests.slurm.cluster import SlurmMissing, check_can_start
from tests.system import require

RECORDINGS = Path(__file__).parent / "recordings"
RECORDED_RUNS = ("fairshare-1", "fairshare-2", "age-1", "builtin-1")


def test_the_job_list_is_the_seeds_and_follows_the_design():
    jobs = ct.make_jobs()
    assert jobs == ct.make_jobs() and jobs != ct.make_jobs(seed=ct.SEED + 1)
    assert len(jobs) >= 60 and len({j.name for j in jobs}) == len(jobs)
    assert all(10 <= j.duration_s <= 90 and j.gpus in (1, 2, 4) for j in jobs)
    assert sum(j.gpus <= 2 for j in jobs) > 0.7 * len(jobs)
    assert len({j.user for j in jobs}) >= 3 and len({j.account for j in jobs}) >= 3
    max_time = {p.name: p.max_time_min for p in ct.CONTENTION_CLUSTER.partitions}
    assert {j.partition for j in jobs} == set(max_time)
    assert all(1 <= j.timelimit_min <= max_time[j.partition] for j in jobs)
    short = [j for j in jobs if j.timelimit_min * 60 < j.duration_s]
    assert 0.07 * len(jobs) <= len(short) <= 0.13 * len(jobs)
    assert all(j.timelimit_min * 60 >= j.duration_s + 5 for j in jobs if j not in short)  # the others: loose
    assert 2.0 <= ct.oversubscription(jobs, ct.CONTENTION_CLUSTER.gpus) <= 3.0
    assert [j.offset_s for j in jobs] == sorted(j.offset_s for j in jobs)


def test_presets_differ_only_where_they_say():
    fair, age, builtin = (ct.PRESETS[p] for p in ("fairshare", "age", "builtin"))
    assert {k for k in fair if fair[k] != age[k]} == {"PriorityWeightFairshare", "PriorityWeightAge"}
    assert {k for k in fair if fair[k] != builtin[k]} == {"SchedulerType"}
    spec = ct.preset_cluster("age")
    assert spec.slurm_settings()["PriorityWeightAge"] == "10000" and spec.cpus == 32
    with pytest.raises(ValueError, match="unknown preset"):
        ct.preset_cluster("fifo")


def test_kendall_tau_b_counts_ties_as_tau_b_does():
    assert ct.kendall_tau_b([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert ct.kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    # x = 1,2,2,3 and y = 1,3,2,3: 4 concordant, 0 discordant, one tie in x only, one in y only: 4 / sqrt(5 * 5)
    assert ct.kendall_tau_b([1, 2, 2, 3], [1, 3, 2, 3]) == pytest.approx(0.8)


def test_a_short_sacct_row_names_its_file_and_line(tmp_path):
    path = tmp_path / "sacct.txt"
    path.write_text("JobID|JobName|Submit\n1|c000|2026-12-04T20:51:46\n2|c001\n")
    with pytest.raises(ValueError, match=r"sacct.txt, line 3: 2 fields, the header has 3"):
        ct.read_sacct(path)


def _check_recording(folder: Path, expected_jobs: int) -> list[ct.Recorded]:
    """Every file of a recording is there and reads back; returns its jobs."""
    missing = [name for name in ct.RECORDING_FILES if not (folder / name).is_file()]
    assert not missing, f"{folder}: missing {missing}"
    recorded = ct.load_recording(folder)
    assert len(recorded) == expected_jobs == len(ct.read_sacct(folder / "sacct.txt"))
    assert all(r.state in ("COMPLETED", "TIMEOUT") and r.start_s is not None for r in recorded)
    assert all(r.timelimit_min == r.job.timelimit_min and r.priority is not None for r in recorded)
    for r in recorded:
        expected = "TIMEOUT" if r.job.timelimit_min * 60 < r.job.duration_s else "COMPLETED"
        assert r.state == expected, (folder.name, r.job.name)
    submitted = {row.split(",")[0]: int(row.split(",")[1]) for row in (folder / "submit.csv").read_text().split()[1:]}
    assert submitted == {r.job.name: r.job_id for r in recorded}
    for name in ct.SNAPSHOTS:
        blocks = ct.read_blocks(folder / name)
        epochs = [epoch for epoch, _ in blocks]
        assert len(blocks) >= 5 and epochs == sorted(epochs), name
    assert "Account|User|RawShares" in ct.read_blocks(folder / "sshare.txt")[-1][1][0]
    assert "PriorityType            = priority/multifactor" in (folder / "config.txt").read_text()
    assert "gres/gpu=8" in (folder / "nodes.txt").read_text()
    rows = [row.split("|") for row in (folder / "assoc.txt").read_text().splitlines()[1:]]
    shares = {row[1]: row[5] for row in rows if not row[2]}  # the accounts' own rows (no User)
    assert {a.name: str(a.fairshare) for a in ct.CONTENTION_CLUSTER.accounts}.items() <= shares.items()
    return recorded


@pytest.mark.parametrize("run", RECORDED_RUNS)
def test_each_committed_recording_is_complete_and_readable(run):
    recorded = _check_recording(RECORDINGS / run, len(ct.make_jobs()))
    assert [r.job for r in recorded] == ct.make_jobs()  # every preset ran the same job list


def test_the_committed_recordings_report_their_comparisons():
    text = ct.report([RECORDINGS / run for run in RECORDED_RUNS])
    assert text.count(" vs fairshare-1: ") == 3 and "builtin-1: 66 jobs" in text


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    """One short fairshare run on a fresh cluster (skipped where Slurm cannot start, failed then with
    REQUIRE_SLURM=1)."""
    try:
        check_can_start()
    except SlurmMissing as exc:
        require("Slurm", str(exc))
    out = tmp_path_factory.mktemp("contention") / "fairshare-1"
    return ct.run_preset("fairshare", ct.make_jobs(design=ct.SMALL_DESIGN), out, interval_s=2.0)


@pytest.mark.slow
def test_a_short_run_on_a_real_slurm_records_a_complete_readable_folder(small_run):
    jobs = ct.make_jobs(design=ct.SMALL_DESIGN)
    recorded = _check_recording(small_run, len(jobs))
    assert not (small_run.parent / ".fairshare-1.partial").exists()
    summary = ct.summarize(small_run.name, recorded)
    assert summary.states == {"COMPLETED": len(jobs)}
    assert summary.mean_queue_s > 0, "2.2x oversubscribed: some jobs must have waited"
    assert set(summary.account_mean_queue_s) == {j.account for j in jobs}
    sprio = [line for _, lines in ct.read_blocks(small_run / "sprio.txt") for line in lines]
    assert any(line.split()[2] in {j.user for j in jobs} for line in sprio), "no pending job seen by sprio"


@pytest.mark.slow
def test_a_recording_is_never_overwritten(small_run):
    with pytest.raises(FileExistsError):
        ct.run_preset("fairshare", ct.make_jobs(design=ct.SMALL_DESIGN), small_run)
    assert Counter(p.name for p in small_run.parent.iterdir()) == {"fairshare-1": 1}
