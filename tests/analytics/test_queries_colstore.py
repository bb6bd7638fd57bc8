"""The in-memory column store behind the fast study queries: filter masks, reloading, bounds, and the fallback paths
for very many distinct values (checked against the independent Polars reference)."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from analytics import db, queries, store
from analytics.filters import JobFilter
from analytics.queries import colstore
from analytics.queries import jobs as queries_jobs
from analytics.queries import users as queries_users
from tests.analytics import polars_ref


def _random_jobs(seed: int, n_jobs: int = 300) -> pl.DataFrame:
    """Random jobs of clusters Alpha/Beta over 2020-04-01..03 with some null users, states, queues and starts."""
    rng = np.random.default_rng(seed)
    submit = [datetime(2020, 3, 31, 22) + timedelta(seconds=int(s)) for s in rng.integers(0, 70 * 3600, n_jobs)]
    queue = rng.choice([0, 5, 60, 3600], n_jobs)
    duration = rng.choice([0, 1, 59, 61, 600, 7200, 50000], n_jobs)
    start = [s + timedelta(seconds=int(q)) for s, q in zip(submit, queue, strict=True)]
    jobs = pl.DataFrame(
        {
            "cluster": rng.choice(["Alpha", "Beta"], n_jobs),
            "job_id": np.arange(n_jobs),
            "user": rng.choice([f"u{i}" for i in range(9)], n_jobs),
            "vc": rng.choice(["vcA1", "vcA2", "vcB1"], n_jobs),
            "gpu_num": rng.choice([0, 0, 1, 2, 4, 8, 64], n_jobs),
            "cpu_num": rng.choice([0.5, 1.0, 2.25, 16.0], n_jobs),
            "state": rng.choice(["COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "RUNNING", "PENDING"], n_jobs),
            "submit_time": submit,
            "start_time": start,
            "end_time": [s + timedelta(seconds=int(d)) for s, d in zip(start, duration, strict=True)],
            "duration": duration,
            "queue": queue,
        }
    )
    unknown = pl.Series(rng.random(n_jobs) < 0.08)
    return jobs.with_columns(
        *[pl.when(unknown).then(None).otherwise(pl.col(c)).alias(c) for c in ("user", "state", "queue", "cpu_num")],
        *[pl.when(unknown).then(None).otherwise(pl.col(c)).alias(c) for c in ("start_time", "end_time")],
    )


def _capacity() -> pl.DataFrame:
    rows = [
        (c, vc, date(2020, 4, d), gpus)
        for d in (1, 2, 3)
        for c, vc, gpus in (("Alpha", "vcA1", 8), ("Alpha", "vcA2", 16 * (d % 2)), ("Beta", "vcB1", 24))
    ]
    return pl.DataFrame(rows, schema=["cluster", "vc", "date", "gpus"], orient="row")


@pytest.fixture(scope="module")
def random_ds(tmp_path_factory):
    """A random trace with nulls as a dataset in its own folder (module scope: written once)."""
    return store.write_dataset("random", _random_jobs(seed=5), _capacity(), {}, root=tmp_path_factory.mktemp("data"))


_filters = st.builds(
    JobFilter,
    clusters=st.lists(st.sampled_from(["Alpha", "Beta", "Nowhere"]), max_size=2).map(tuple),
    vcs=st.lists(st.sampled_from(["vcA1", "vcA2", "vcB1"]), max_size=2).map(tuple),
    users=st.lists(st.sampled_from([f"u{i}" for i in range(11)]), max_size=3).map(tuple),
    states=st.lists(st.sampled_from(["COMPLETED", "CANCELLED", "FAILED", "TIMEOUT"]), max_size=2).map(tuple),
    job_kind=st.sampled_from(["all", "gpu", "cpu"]),
    gpu_min=st.none() | st.integers(0, 9),
    gpu_max=st.none() | st.integers(9, 70),
    start=st.none() | st.datetimes(datetime(2020, 3, 31), datetime(2020, 4, 1, 12)),
    end=st.none() | st.datetimes(datetime(2020, 4, 1, 13), datetime(2020, 4, 4)),
    time_mode=st.sampled_from(["submitted", "running"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=_filters)
def test_sql_predicate_is_the_filters_polars_predicate_with_nulls(random_ds, flt):
    where, params = flt.where()
    via_sql = db.run(f"SELECT job_id FROM jobs WHERE {where} ORDER BY job_id", params, ds=random_ds)["job_id"]
    via_polars = random_ds.jobs().filter(polars_ref.filter_expr(flt)).select("job_id").sort("job_id").collect()
    assert via_sql.to_list() == via_polars["job_id"].to_list()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=_filters, window=st.booleans())
def test_mask_is_the_filters_polars_predicate(random_ds, flt, window):
    want = (
        random_ds.jobs()
        .with_columns(keep=polars_ref.filter_expr(flt, window=window).fill_null(False))
        .collect()["keep"]
    )
    got = colstore.columns(random_ds).mask(flt, window=window)
    assert got.tolist() == want.to_list()


def test_columns_are_loaded_once_per_dataset_version(data_root):
    jobs, caps = _random_jobs(seed=1), _capacity()
    first = store.write_dataset("trace", jobs, caps, {})
    assert colstore.columns(first) is colstore.columns(first)
    assert queries.cluster_summary(first)["job_num"][-1] == jobs.height
    second = store.write_dataset("trace", jobs.head(100), caps, {})
    assert second.version != first.version
    assert queries.cluster_summary(second)["job_num"][-1] == 100


def test_at_most_max_datasets_stay_loaded(tmp_path):
    datasets = [
        store.write_dataset(f"d{i}", _random_jobs(seed=i, n_jobs=20 + i), _capacity(), {}, root=tmp_path)
        for i in range(colstore.MAX_DATASETS + 1)
    ]
    kept = colstore.columns(datasets[0])
    for ds in datasets[1:]:
        colstore.columns(ds)
    assert colstore.columns(datasets[0]) is not kept  # dropped as the least recently used, then reloaded
    assert colstore.columns(datasets[-1]) is colstore.columns(datasets[-1])


def test_a_null_in_a_required_column_names_file_and_column(data_root):
    jobs = _random_jobs(seed=2).with_columns(duration=pl.when(pl.col("job_id") == 3).then(None).otherwise("duration"))
    ds = store.write_dataset("broken", jobs, _capacity(), {})
    with pytest.raises(store.DatasetError, match=r"jobs\.parquet column duration has 1 null values"):
        queries.cluster_summary(ds)


def test_clear_drops_loaded_datasets(random_ds):
    loaded = colstore.columns(random_ds)
    colstore.clear()
    assert colstore.columns(random_ds) is not loaded


@pytest.mark.parametrize("seed", range(6))
def test_histogram_medians_equal_polars_medians(seed):
    rng = np.random.default_rng(seed)
    values = pl.Series(rng.integers(0, 40, int(rng.integers(1, 60))) ** 2)
    ranked = colstore._ranked(values)
    counts = np.bincount(ranked.ranks, minlength=ranked.values.size)[None, :]
    assert queries_jobs._histogram_medians(counts, ranked.values)[0] == values.median()


FILTERS = [JobFilter(), JobFilter(vcs=("vcA2",), job_kind="gpu"), JobFilter(start=datetime(2020, 4, 1, 6))]


@pytest.mark.parametrize("flt", FILTERS, ids=["none", "vc_gpu", "window"])
def test_summary_medians_by_polars_match_reference(random_ds, monkeypatch, flt):
    monkeypatch.setattr(queries_jobs, "MAX_HISTOGRAM_BINS", 0)  # the path meant for very many distinct values
    want = polars_ref.REFERENCES["cluster_summary"](random_ds, flt)
    assert_frame_equal(queries.cluster_summary(random_ds, flt), want, check_exact=False, rel_tol=1e-9)


@pytest.mark.parametrize("flt", FILTERS, ids=["none", "vc_gpu", "window"])
def test_user_table_by_sorted_keys_matches_reference(random_ds, monkeypatch, flt):
    monkeypatch.setattr(queries_users, "MAX_DENSE_KEYS", 0)  # the path meant for very many users and VCs
    want = polars_ref.REFERENCES["user_table"](random_ds, flt)
    assert_frame_equal(queries.user_table(random_ds, flt), want, check_exact=False, rel_tol=1e-9)


@pytest.mark.parametrize("name", sorted(queries.QUERIES))
def test_random_trace_with_fractional_cpus_matches_reference(random_ds, name):
    want = polars_ref.REFERENCES[name](random_ds, JobFilter())
    assert_frame_equal(queries.QUERIES[name](random_ds), want, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)


def _overlap_jobs() -> pl.DataFrame:
    """Jobs around the window 2020-04-02 00:00 - 12:00, each named by whether it runs in it (id 1-9: yes); a job's
    end is its end_time, else start_time + duration (how long an unfinished one had run when the trace was cut)."""
    t = datetime(2020, 4, 2)
    h = timedelta(hours=1)
    rows = [  # job_id, state, submit, start, end, duration (s)
        (1, "COMPLETED", t - 5 * h, t - 4 * h, t + h, 5 * 3600),  # started before, ended inside
        (2, "RUNNING", t - 5 * h, t - 4 * h, None, 6 * 3600),  # unfinished, had run 6 h by the cut: t + 2 h
        (3, "COMPLETED", t + h, t + 2 * h, t + 20 * h, 18 * 3600),  # started inside, ended after
        (4, "FAILED", t - 30 * h, t - 29 * h, None, 30 * 3600),  # no end_time: start + duration is after t
        (16, "RUNNING", t - 50 * h, t - 40 * h, t - 39 * h, 3600),  # unfinished, but its recorded end is before t
        (11, "COMPLETED", t - 5 * h, t - 4 * h, t, 4 * 3600),  # ended exactly at the window's start
        (12, "COMPLETED", t + 12 * h, t + 12 * h, t + 13 * h, 3600),  # started at the window's end
        (13, "PENDING", t - h, None, None, 0),  # never started
        (14, "COMPLETED", t - 30 * h, t - 29 * h, None, 3600),  # no end_time: start + duration before t
        (15, None, t - 30 * h, t - 29 * h, None, 3600),  # unknown state, ended before t
    ]
    ids, states, submit, start, end, duration = zip(*rows, strict=True)
    n = len(rows)
    return pl.DataFrame(
        {
            "cluster": ["Alpha"] * n,
            "job_id": list(ids),
            "user": ["u1"] * n,
            "vc": ["vcA1"] * n,
            "gpu_num": [1] * n,
            "cpu_num": [1.0] * n,
            "state": list(states),
            "submit_time": list(submit),
            "start_time": list(start),
            "end_time": list(end),
            "duration": list(duration),
            "queue": [3600] * n,
        }
    )


def test_running_during_selects_the_jobs_that_overlap_the_window_in_all_three_paths(data_root):
    ds = store.write_dataset("overlap", _overlap_jobs(), _capacity(), {}, root=data_root)
    flt = JobFilter(start=datetime(2020, 4, 2), end=datetime(2020, 4, 2, 12), time_mode="running")
    want = [1, 2, 3, 4]
    where, params = flt.where()
    assert db.run(f"SELECT job_id FROM jobs WHERE {where} ORDER BY job_id", params, ds=ds)["job_id"].to_list() == want
    assert polars_ref.ref_jobs(ds, flt)["job_id"].sort().to_list() == want
    cols = colstore.columns(ds)
    stored_ids = ds.jobs().collect()["job_id"]  # the column store's row order
    assert sorted(stored_ids.gather(np.flatnonzero(cols.mask(flt))).to_list()) == want
    submitted = JobFilter(start=datetime(2020, 4, 2), end=datetime(2020, 4, 2, 12))
    assert polars_ref.ref_jobs(ds, submitted)["job_id"].sort().to_list() == [3]
