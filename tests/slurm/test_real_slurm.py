"""Against a real Slurm 22.05: a single-node cluster with 3 partitions and 8 fake GPUs runs two batches of jobs as
two users; the first export is ingested while two jobs still run, `helios sync slurm` refreshes the dataset after
the second, and every number is checked against what was submitted (about 2 minutes)."""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest

from tests.slurm import workload
from tests.slurm.cluster import CLUSTER, GPUS, PARTITIONS, require_slurm, slurm_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def outcome(tmp_path_factory) -> workload.Outcome:
    """The scenario's outcome on a fresh cluster (skipped without REQUIRE_SLURM=1, failed when Slurm is missing)."""
    require_slurm()
    folder = tmp_path_factory.mktemp("slurm")
    with slurm_cluster() as cluster:
        return workload.run_scenario(cluster, folder / "exports", folder / "data")


def _by_label(jobs: pl.DataFrame) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in jobs.iter_rows(named=True):
        out.setdefault(row["job_name"].split(" [")[0], []).append(row)
    return out


def test_every_submitted_job_is_one_row_with_its_user_vc_gpus_and_state(outcome):
    specs = list(outcome.submitted.specs.values())
    jobs = outcome.final
    assert jobs.height == sum(s.elements for s in specs) == 37
    assert jobs.select("cluster", "job_id").is_unique().all()
    expected = workload.expected_counts(specs)
    assert Counter(jobs["state"].to_list()) == expected["state"]
    assert Counter(jobs["user"].to_list()) == expected["user"]
    assert Counter(jobs["gpu_num"].to_list()) == expected["gpus"]
    rows = _by_label(jobs)
    for label, spec in outcome.submitted.specs.items():
        assert len(rows[label]) == spec.elements, label
        for row in rows[label]:
            assert row["state"] == spec.state and row["user"] == spec.user and row["gpu_num"] == spec.gpus, label
            assert row["vc"] in spec.partition.split(","), label


def test_steps_arrays_and_special_jobs_are_read_as_slurm_reports_them(outcome):
    rows = _by_label(outcome.final)
    ids = outcome.submitted.ids
    assert [r["job_id"] for r in rows["steps"]] == [ids["steps"]]  # its .batch, .0 and .1 steps are not jobs
    assert sorted(r["job_name"] for r in rows["arr"]) == [f"arr [{ids['arr']}_{i}]" for i in range(4)]
    timeout = rows["timeout"][0]
    assert timeout["duration"] >= 60 and timeout["end_time"] is not None
    for label in ("cancel-pending", "cancel-begin"):  # cancelled while waiting: never started
        row = rows[label][0]
        assert row["start_time"] is None and row["queue"] is None and row["duration"] == 0, label
    assert rows["cancel-pending"][0]["gpu_num"] == 8  # from ReqTRES: it never had an allocation
    cancelled_running = rows["cancel-running"][0]
    assert cancelled_running["start_time"] is not None and cancelled_running["duration"] >= 1
    queued = outcome.final.filter(pl.col("queue") >= 3)
    assert queued.height >= 5, "jobs should have queued behind others for GPUs"


def test_the_first_export_had_the_running_jobs_that_the_refresh_updated(outcome):
    first = outcome.first
    assert first.height == sum(s.elements for s in workload.BATCH_1) == 29
    running = first.filter(pl.col("state") == "RUNNING")["job_name"].sort().to_list()
    assert running == sorted(workload.STILL_RUNNING_AT_FIRST_EXPORT)
    assert first.filter(pl.col("state") == "RUNNING")["end_time"].null_count() == 2
    final = _by_label(outcome.final)
    assert final["long"][0]["state"] == "COMPLETED" and final["timeout"][0]["state"] == "TIMEOUT"
    assert "8 added, 2 updated, 27 unchanged" in outcome.outputs[1]
    assert "0 added, 0 updated, 37 unchanged" in outcome.outputs[2] and "months rewritten: none" in outcome.outputs[2]
    assert outcome.versions[0] != outcome.versions[1] == outcome.versions[2]


def test_the_summary_matches_what_was_submitted(outcome):
    specs = list(outcome.submitted.specs.values())
    states = workload.expected_counts(specs)["state"]
    n = sum(states.values())
    gpu_jobs = sum(s.elements for s in specs if s.gpus)
    row = outcome.summary.filter(pl.col("id") == CLUSTER).row(0, named=True)
    assert row["job_num"] == n and row["gpu_job_num"] == gpu_jobs and row["cpu_job_num"] == n - gpu_jobs
    assert row["gpu_num"] == GPUS
    assert row["complete_rate"] == pytest.approx(states["COMPLETED"] / n, abs=1e-3)
    assert row["cancel_rate"] == pytest.approx(states["CANCELLED"] / n, abs=1e-3)
    assert row["fail_rate"] == pytest.approx((states["FAILED"] + states["TIMEOUT"]) / n, abs=1e-3)


def test_capacity_comes_from_scontrol_for_each_partition_and_the_whole_node(outcome):
    last = outcome.vc_gpus.filter(pl.col("date") == pl.col("date").max())
    assert dict(last.select("vc", "gpus").iter_rows()) == {**dict.fromkeys(PARTITIONS, GPUS), "*": GPUS}


def test_the_scenario_stays_within_its_time_budget(outcome):
    assert outcome.seconds < 240


def test_sync_captures_the_clusters_own_scheduler_configuration(outcome):
    settings = "backfill (bf_interval 5 s, bf_window 1440 min, bf_resolution 60 s, bf_max_job_test 500), sched_interval"
    pool = f"{len(PARTITIONS)} partitions on 1 node, {GPUS} GPUs"
    for out in outcome.outputs[1:]:  # cluster.py's slurm.conf: priority/basic, SchedulerParameters=bf_interval=5
        assert f"scheduler: basic priority (first submitted, first considered); {settings} 60 s; {pool};" in out, out
