"""The job page's queries (one job's record, who held its VC's GPUs while it waited, its user's jobs around it, its
VC's queue length) against the independent Polars reference."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest

from analytics import store
from analytics.queries import job as job_queries
from tests.analytics import polars_ref
from tests.analytics.test_queries_colstore import _capacity, _random_jobs


@pytest.fixture(scope="module")
def random_ds(tmp_path_factory):
    """A random trace with nulls (module scope: written once)."""
    return store.write_dataset("random", _random_jobs(seed=11), _capacity(), {}, root=tmp_path_factory.mktemp("d"))


def _waiters(ds, n: int = 25) -> list[dict]:
    """Jobs that waited at least a minute, a spread of them."""
    jobs = ds.jobs().collect().filter(pl.col("queue") >= 60).sort("cluster", "job_id")
    return jobs.gather_every(max(1, jobs.height // n)).to_dicts()


def test_a_job_id_finds_its_whole_record_in_each_cluster(random_ds):
    jobs = random_ds.jobs().collect()
    row = jobs.row(7, named=True)
    found = job_queries.job_records(random_ds, row["job_id"])
    assert found.to_dicts() == jobs.filter(pl.col("job_id") == row["job_id"]).sort("cluster").to_dicts()
    assert job_queries.job_records(random_ds, row["job_id"], "Nowhere").is_empty()
    assert job_queries.job_records(random_ds, 10**9).is_empty()


def test_the_jobs_holding_gpus_during_a_wait_match_the_reference(random_ds):
    waiters = _waiters(random_ds)
    assert waiters
    for job in waiters:
        got = job_queries.wait_holders(random_ds, job, limit=1000)
        want = polars_ref.ref_wait_holders(random_ds, job).sort("job_id")
        assert sorted(got["job_id"].to_list()) == want["job_id"].to_list()
        if got.height:
            assert got["n_holders"][0] == want.height and got["holders_gpu_num"][0] == want["gpu_num"].sum()
            assert got["gpu_num"].to_list() == sorted(got["gpu_num"].to_list(), reverse=True)
            held = dict(zip(want["job_id"], want["held_s"], strict=True))
            assert all(held[j] == s for j, s in zip(got["job_id"], got["held_s"], strict=True))


def test_the_holders_list_is_cut_to_its_limit_but_counts_them_all(random_ds):
    job = max(_waiters(random_ds), key=lambda j: polars_ref.ref_wait_holders(random_ds, j).height)
    every = polars_ref.ref_wait_holders(random_ds, job).height
    assert every > 2
    top = job_queries.wait_holders(random_ds, job, limit=2)
    assert top.height == 2 and top["n_holders"][0] == every


def test_the_users_jobs_around_are_the_nearest_in_submit_time(random_ds):
    job = random_ds.jobs().collect().filter(pl.col("user").is_not_null()).row(20, named=True)
    got = job_queries.user_jobs_around(random_ds, job, limit=5)
    others = (
        random_ds.jobs()
        .collect()
        .filter((pl.col("cluster") == job["cluster"]) & (pl.col("user") == job["user"]))
        .filter(pl.col("job_id") != job["job_id"])
    )
    gaps = sorted(abs((t - job["submit_time"]).total_seconds()) for t in others["submit_time"])
    assert got.height == min(5, others.height)
    assert max(abs((t - job["submit_time"]).total_seconds()) for t in got["submit_time"]) == gaps[got.height - 1]
    assert got["submit_time"].to_list() == sorted(got["submit_time"].to_list())


def test_queue_length_matches_the_reference(random_ds):
    times = [datetime(2020, 3, 31, 22) + timedelta(minutes=37 * i) for i in range(120)]
    for cluster, vc in (("Alpha", "vcA1"), ("Beta", "vcB1")):
        got = job_queries.queued_jobs(random_ds, cluster, vc, times)
        assert got["queued_jobs"].to_list() == polars_ref.ref_queued_jobs(random_ds, cluster, vc, times)
    assert max(job_queries.queued_jobs(random_ds, "Alpha", "vcA1", times)["queued_jobs"]) > 0
    shuffled = times[::-1][:40] + times[:80][::3]  # any order, repeats
    got = job_queries.queued_jobs(random_ds, "Alpha", "vcA1", shuffled)
    assert got["queued_jobs"].to_list() == polars_ref.ref_queued_jobs(random_ds, "Alpha", "vcA1", shuffled)


def test_queue_length_by_hand_counts_jobs_leaving_the_queue_unstarted(data_root):
    t, h = datetime(2020, 4, 2), timedelta(hours=1)
    rows = [  # job_id, state, submit, start, end
        (1, "COMPLETED", t, t + 2 * h, t + 5 * h),  # queued t .. t+2h
        (2, "PENDING", t + h, None, t + 3 * h),  # left the queue unstarted at t+3h
        (3, "PENDING", t + h, None, None),  # still queued at the trace's end
        (4, "CANCELLED", t, None, None),  # no start, no end: when it left is not recorded
    ]
    ids, states, submit, start, end = zip(*rows, strict=True)
    jobs = pl.DataFrame(
        {
            "cluster": ["Alpha"] * 4,
            "job_id": list(ids),
            "vc": ["vcA1"] * 4,
            "gpu_num": [1] * 4,
            "state": list(states),
            "submit_time": list(submit),
            "start_time": list(start),
            "end_time": list(end),
            "duration": [3 * 3600, 0, 0, 0],
        }
    )
    ds = store.write_dataset("queue", jobs, _capacity(), {}, root=data_root)
    times = [t + timedelta(minutes=m) for m in (30, 90, 150, 240)]
    assert job_queries.queued_jobs(ds, "Alpha", "vcA1", times)["queued_jobs"].to_list() == [1, 3, 2, 1]
    assert polars_ref.ref_queued_jobs(ds, "Alpha", "vcA1", times) == [1, 3, 2, 1]
    left = ds.jobs().collect().filter(pl.col("job_id") == 2).row(0, named=True)
    held = job_queries.wait_holders(ds, left)  # its wait: t+1h (submit) to t+3h (it left unstarted)
    assert held["job_id"].to_list() == [1] and held["held_s"].to_list() == [3600]
