"""JobFilter (SQL predicate, Polars expression, validation, round trip) and the db.run choke point."""

from __future__ import annotations

import json
import threading
from datetime import datetime

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics import db
from analytics.filters import NO_FILTER, JobFilter
from tests.analytics.polars_ref import filter_expr


def test_empty_filter_is_true():
    assert JobFilter().where() == ("TRUE", [])
    assert JobFilter() == NO_FILTER


def test_where_binds_every_value_and_quotes_identifiers():
    flt = JobFilter(
        clusters=("Earth",),
        users=("u1", "x' OR 1=1 --"),
        states=("FAILED",),
        start=datetime(2020, 5, 1),
        end="2020-06-01",
        job_kind="gpu",
        gpu_min=2,
        gpu_max=8,
    )
    sql, params = flt.where("j")
    assert sql == (
        'j."cluster" IN (?) AND j."user" IN (?, ?) AND j."state" IN (?) AND j."submit_time" >= ? '
        'AND j."submit_time" < ? AND j."gpu_num" > 0 AND j."gpu_num" >= ? AND j."gpu_num" <= ?'
    )
    assert params == ["Earth", "u1", "x' OR 1=1 --", "FAILED", datetime(2020, 5, 1), datetime(2020, 6, 1), 2, 8]
    assert "OR 1=1" not in sql
    assert "submit_time" not in flt.where(window=False)[0]


def test_where_rejects_a_bad_alias():
    with pytest.raises(ValueError, match="alias"):
        JobFilter().where("j; DROP TABLE jobs")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"states": ("DONE",)}, "unknown DONE"),
        ({"job_kind": "tpu"}, "job_kind"),
        ({"start": "2020-05-02", "end": "2020-05-01"}, "must be before"),
        ({"gpu_min": 8, "gpu_max": 2}, "gpu_min 8 > gpu_max 2"),
        ({"gpu_min": -1}, "must be >= 0"),
        ({"gpu_max": "many"}, "whole number"),
        ({"start": "yesterday"}, "not an ISO date"),
        ({"clusters": ("",)}, "non-empty string"),
        ({"users": (3,)}, "non-empty string"),
    ],
)
def test_invalid_filters_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        JobFilter(**kwargs)


def test_round_trip_and_normalisation():
    flt = JobFilter(clusters=["Venus", "Earth", "Venus"], start="2020-04-01 12:00", gpu_min="2", states="FAILED")
    assert flt.clusters == ("Venus", "Earth") and flt.gpu_min == 2 and flt.states == ("FAILED",)
    d = flt.to_dict()
    assert (
        json.loads(json.dumps(d))
        == d
        == {
            "clusters": ["Venus", "Earth"],
            "start": "2020-04-01 12:00:00",
            "states": ["FAILED"],
            "gpu_min": 2,
        }
    )
    assert JobFilter(**d) == flt


def test_cache_key_is_stable_and_ignores_value_order():
    a = JobFilter(clusters=("Venus", "Earth"), users=("u2", "u1"))
    b = JobFilter(clusters=("Earth", "Venus"), users=("u1", "u2"))
    assert a.cache_key() == b.cache_key() != JobFilter().cache_key()
    assert a.cache_key() == JobFilter(**a.to_dict()).cache_key()
    assert JobFilter(gpu_min=1).cache_key() != JobFilter(gpu_max=1).cache_key()


_filters = st.builds(
    JobFilter,
    clusters=st.lists(st.sampled_from(["Alpha", "Beta", "Gamma"]), max_size=2).map(tuple),
    vcs=st.lists(st.sampled_from(["vcA1", "vcA2", "vcB1", "*"]), max_size=2).map(tuple),
    users=st.lists(st.sampled_from(["u1", "u2", "u3", "u4", "u5", "o'hara"]), max_size=3).map(tuple),
    states=st.lists(st.sampled_from(["COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL"]), max_size=3).map(
        tuple
    ),
    job_kind=st.sampled_from(["all", "gpu", "cpu"]),
    gpu_min=st.none() | st.integers(0, 8),
    gpu_max=st.none() | st.integers(8, 20),
    end=st.none() | st.datetimes(datetime(2020, 4, 1), datetime(2020, 4, 4)),
    time_mode=st.sampled_from(["submitted", "running"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=_filters)
def test_sql_predicate_and_polars_expression_select_the_same_jobs(small_ds, flt):
    where, params = flt.where()
    via_sql = db.run(f"SELECT job_id FROM jobs WHERE {where} ORDER BY job_id", params, ds=small_ds)["job_id"]
    via_polars = small_ds.jobs().filter(filter_expr(flt)).select("job_id").sort("job_id").collect()["job_id"]
    assert via_sql.to_list() == via_polars.to_list()
    assert JobFilter(**json.loads(json.dumps(flt.to_dict()))) == flt


def test_run_exposes_dataset_views_and_binds_params(small_ds):
    out = db.run("SELECT count(*) AS n FROM jobs WHERE cluster = ? AND gpu_num >= ?", ["Alpha", 2], ds=small_ds)
    assert out["n"].to_list() == [3]
    caps = db.run("SELECT sum(gpus)::BIGINT AS g FROM vc_gpus WHERE vc = $vc", {"vc": "*"}, ds=small_ds)
    assert caps["g"].to_list() == [48]


def test_run_without_rows_keeps_columns(small_ds):
    out = db.run("SELECT cluster, gpu_num FROM jobs WHERE cluster = ?", ["nowhere"], ds=small_ds)
    assert out.is_empty() and out.columns == ["cluster", "gpu_num"]


def test_run_row_cap_and_errors_are_one_line(small_ds):
    with pytest.raises(db.QueryError, match="more than 5 rows"):
        db.run("SELECT * FROM jobs", ds=small_ds, max_rows=5)
    with pytest.raises(db.QueryError, match="query failed") as info:
        db.run("SELECT no_such_column FROM jobs", ds=small_ds)
    assert "\n" not in str(info.value)
    with pytest.raises(db.QueryError, match="cancelled after"):
        db.run("SELECT count(*) FROM range(10000000000) a", timeout_s=0.2)


def test_run_is_safe_from_many_threads(small_ds):
    results: list[int] = []

    def work(cluster: str) -> None:
        for _ in range(10):
            out = db.run("SELECT count(*) AS n FROM jobs WHERE cluster = ?", [cluster], ds=small_ds)
            results.append(int(out["n"][0]))

    threads = [threading.Thread(target=work, args=(c,)) for c in ("Alpha", "Beta") * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(set(results)) == [5, 6] and len(results) == 60


def test_filter_expression_matches_on_frames():
    df = pl.DataFrame({"gpu_num": [0, 1, 8], "cluster": ["a", "a", "b"]})
    assert df.filter(filter_expr(JobFilter(job_kind="gpu", clusters=("a",)), window=False))["gpu_num"].to_list() == [1]
