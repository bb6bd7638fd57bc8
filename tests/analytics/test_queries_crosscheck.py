"""Every study query against its independent Polars reference (tests.analytics.polars_ref), under many filters and on a
random trace as well as the hand-checked one."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from analytics import queries, store
from analytics.filters import JobFilter
from analytics.queries import series as queries_series
from tests.analytics import polars_ref

FILTERS = {
    "none": JobFilter(),
    "vc": JobFilter(vcs=("vcB1", "vcA2")),
    "window": JobFilter(start=datetime(2020, 4, 2, 8), end=datetime(2020, 4, 2, 10)),
    "odd_window": JobFilter(start=datetime(2020, 4, 1, 0, 2, 30), end=datetime(2020, 4, 3, 23, 1, 15)),
    "users_gpu": JobFilter(users=("u1", "u5"), job_kind="gpu"),
    "cpu": JobFilter(job_kind="cpu"),
    "states": JobFilter(states=("FAILED", "NODE_FAIL", "TIMEOUT")),
    "gpu_range": JobFilter(clusters=("Beta",), gpu_min=2, gpu_max=4),
    "nobody": JobFilter(users=("nobody",)),
    "unknown_cluster": JobFilter(clusters=("Nowhere",)),
}
OPTIONS = {
    "duration_cdf": [{"kind": "gpu"}, {"kind": "cpu"}, {"kind": "gpu", "pooled": "all clusters"}],
    "queue_cdf": [{"kind": "gpu"}, {"kind": "cpu"}],
    "gpu_num_cdf": [{"weight": "jobs"}, {"weight": "gpu_time"}],
    "user_concentration": [{"metric": m} for m in queries.CONCENTRATION_METRICS],
    "utilization_resampled": [{"every": "1h"}, {"every": "10m"}, {"every": "1d"}],
    "vc_utilization": [{}, {"exclude_days": "2020-04-02", "top": "1"}],
}
CASES = [(name, opts) for name in sorted(queries.QUERIES) for opts in OPTIONS.get(name, [{}])]


def test_every_query_has_a_reference():
    assert set(polars_ref.REFERENCES) == set(queries.QUERIES)


def _check(ds: store.Dataset, name: str, flt: JobFilter, opts: dict) -> None:
    got = queries.QUERIES[name](ds, flt, **opts)
    want = polars_ref.REFERENCES[name](ds, flt, **opts)
    assert_frame_equal(got, want, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("flt_name", sorted(FILTERS))
@pytest.mark.parametrize(("name", "opts"), CASES, ids=[f"{n}-{'-'.join(map(str, o.values()))}" for n, o in CASES])
def test_small_trace_matches_reference(small_ds, name, opts, flt_name):
    _check(small_ds, name, FILTERS[flt_name], opts)


def random_trace(seed: int, n_jobs: int = 400) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A random 2-cluster trace over 2020-04-01..03 with capacities, some nulls, some jobs crossing the edges."""
    rng = np.random.default_rng(seed)
    t0 = datetime(2020, 3, 31, 20)
    submit = [t0 + timedelta(seconds=int(s)) for s in rng.integers(0, 80 * 3600, n_jobs)]
    queue = rng.choice([0, 0, 5, 59, 60, 61, 3600], n_jobs)
    duration = rng.choice([0, 1, 30, 59, 60, 61, 600, 7200, 40000], n_jobs)
    start = [s + timedelta(seconds=int(q)) for s, q in zip(submit, queue, strict=True)]
    jobs = pl.DataFrame(
        {
            "cluster": rng.choice(["Alpha", "Beta"], n_jobs),
            "job_id": np.arange(n_jobs),
            "user": rng.choice([f"u{i}" for i in range(12)], n_jobs),
            "vc": rng.choice(["vcA1", "vcA2", "vcB1"], n_jobs),
            "gpu_num": rng.choice([0, 0, 1, 1, 2, 4, 8, 16, 64], n_jobs),
            "cpu_num": rng.integers(1, 64, n_jobs).astype(float),
            "state": rng.choice(
                ["COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "RUNNING", "OUT_OF_MEMORY"], n_jobs
            ),
            "submit_time": submit,
            "start_time": start,
            "end_time": [s + timedelta(seconds=int(d)) for s, d in zip(start, duration, strict=True)],
            "duration": duration,
            "queue": queue,
        }
    )
    caps = [
        (c, vc, date(2020, 4, d), int(rng.integers(0, 3) * 8))
        for d in (1, 2, 3)
        for c, vc in (("Alpha", "vcA1"), ("Alpha", "vcA2"), ("Beta", "vcB1"), ("Beta", "vcA1"))
    ]
    unknown = pl.Series(rng.random(n_jobs) < 0.05)  # a few jobs with unknown state, user, queue or start
    never_started = pl.Series(rng.random(n_jobs) < 0.03)
    jobs = jobs.with_columns(
        *[pl.when(unknown).then(None).otherwise(pl.col(c)).alias(c) for c in ("state", "user", "queue")],
        *[pl.when(never_started).then(None).otherwise(pl.col(c)).alias(c) for c in ("start_time", "end_time")],
    )
    return jobs, pl.DataFrame(caps, schema=["cluster", "vc", "date", "gpus"], orient="row")


@pytest.fixture(scope="module")
def random_ds(tmp_path_factory):
    """A random trace as a dataset in its own folder (module scope: written once)."""
    jobs, caps = random_trace(seed=11)
    return store.write_dataset("random", jobs, caps, {}, root=tmp_path_factory.mktemp("data"))


@pytest.mark.parametrize("flt_name", ["none", "vc", "odd_window", "states"])
@pytest.mark.parametrize(("name", "opts"), CASES, ids=[f"{n}-{'-'.join(map(str, o.values()))}" for n, o in CASES])
def test_random_trace_matches_reference(random_ds, name, opts, flt_name):
    _check(random_ds, name, FILTERS[flt_name], opts)


_FAST = ["cluster_summary", "monthly_jobs", "duration_cdf", "gpu_num_cdf", "final_state_by_gpu_num", "user_table"]
_filters = st.builds(
    JobFilter,
    clusters=st.lists(st.sampled_from(["Alpha", "Beta"]), max_size=2).map(tuple),
    vcs=st.lists(st.sampled_from(["vcA1", "vcA2", "vcB1"]), max_size=2).map(tuple),
    users=st.lists(st.sampled_from([f"u{i}" for i in range(12)]), max_size=4).map(tuple),
    states=st.lists(st.sampled_from(["COMPLETED", "CANCELLED", "FAILED", "TIMEOUT"]), max_size=2).map(tuple),
    job_kind=st.sampled_from(["all", "gpu", "cpu"]),
    gpu_min=st.none() | st.integers(0, 16),
    start=st.none() | st.datetimes(datetime(2020, 3, 31), datetime(2020, 4, 2)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=_filters, name=st.sampled_from(_FAST))
@example(flt=JobFilter(vcs=("vcA1",), users=("u2",)), name="cluster_summary")  # a cluster with no job ended yet
def test_random_filters_match_reference(random_ds, flt, name):
    _check(random_ds, name, flt, {})


@pytest.mark.parametrize("flt_name", ["none", "odd_window", "users_gpu"])
def test_vc_utilization_many_keys_path_matches_reference(random_ds, monkeypatch, flt_name):
    monkeypatch.setattr(queries_series, "MAX_PAIR_KEYS", 0)  # take the path meant for very many distinct keys
    _check(random_ds, "vc_utilization", FILTERS[flt_name], {})
