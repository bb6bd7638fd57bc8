"""Refreshable (monthly) datasets: every reader sees the same jobs as in a single file, upserts are keyed by
(cluster, job_id), a single-file dataset is converted on its first upsert, and two upserts never interleave."""

from __future__ import annotations

import datetime as dt
import json
import threading

import polars as pl

from analytics import capabilities, db, schema, store
from analytics.ingest import IngestOptions, append, ingest
from analytics.queries import colstore
from tests.analytics.test_ingest_slurm import BATCH1, SYNC
from tests.components.conftest import make_jobs, make_vc_gpus


def _meta_for(jobs: pl.LazyFrame) -> dict:
    return {"jobs_seen": jobs.select(pl.len()).collect().item()}


def _plan(vc_gpus: pl.DataFrame):
    """A plan that keeps vc_gpus as the capacity and counts the jobs in meta.json."""
    return lambda _current: (vc_gpus, _meta_for)


def test_a_monthly_dataset_reads_like_a_single_file_one(data_root):
    jobs = make_jobs(2000)
    single = store.write_dataset("single", jobs, make_vc_gpus(), {})
    monthly = store.write_dataset("monthly", jobs, make_vc_gpus(), {}, monthly=True)
    assert monthly.jobs_path.is_dir() and monthly.jobs_glob.endswith("jobs/*.parquet")
    assert sorted(monthly.meta[store.MONTHLY_PARTS]) == ["2020-04"]
    order = ["cluster", "job_id"]
    assert monthly.jobs().collect().sort(order).equals(single.jobs().collect().sort(order))
    assert colstore.load(monthly).n_rows == 2000
    sql = "SELECT count(*) AS n, sum(gpu_num) AS g FROM jobs"
    assert db.run(sql, ds=monthly).rows() == db.run(sql, ds=single).rows()


def test_upsert_replaces_by_key_and_reports_counts(data_root):
    jobs = make_jobs(300)
    first = store.upsert_jobs("u", jobs.head(200), _plan(make_vc_gpus()))
    assert (first.added, first.updated, first.unchanged) == (200, 0, 0) and first.dataset.meta["jobs_seen"] == 200
    changed = jobs.slice(150, 150).with_columns(
        pl.when(pl.col("job_id") <= 160).then(pl.lit("COMPLETED")).otherwise(pl.col("state")).alias("state")
    )
    second = store.upsert_jobs("u", changed, _plan(make_vc_gpus()))
    n_changed = jobs.slice(150, 10).filter(pl.col("state") != "COMPLETED").height
    assert (second.added, second.updated, second.unchanged) == (100, n_changed, 50 - n_changed)
    stored = second.dataset.jobs().collect()
    assert stored.height == 300 and stored["job_id"].is_unique().all()
    assert second.dataset.meta["jobs_seen"] == 300


def test_an_upsert_that_changes_nothing_writes_nothing(data_root):
    jobs = make_jobs(100)
    first = store.upsert_jobs("same", jobs, _plan(make_vc_gpus()))
    listing = sorted(p.name for p in data_root.iterdir())
    again = store.upsert_jobs("same", jobs.sample(fraction=1.0, shuffle=True, seed=1), _plan(make_vc_gpus()))
    assert again.months_rewritten == () and again.dataset.version == first.dataset.version
    assert sorted(p.name for p in data_root.iterdir()) == listing


def test_new_capacity_alone_is_a_change(data_root):
    jobs = make_jobs(50)
    first = store.upsert_jobs("caps", jobs, _plan(make_vc_gpus()))
    more = make_vc_gpus().with_columns(pl.col("gpus") * 2)
    second = store.upsert_jobs("caps", jobs, _plan(more))
    assert second.dataset.version != first.dataset.version and second.months_rewritten == ()
    assert set(second.dataset.vc_gpus()["gpus"]) == {128}


def test_a_single_file_dataset_becomes_monthly_on_its_first_upsert(data_root):
    jobs = make_jobs(500).with_columns(
        (pl.col("submit_time") + pl.duration(days=pl.col("job_id") % 3 * 31)).alias("submit_time")
    )
    store.write_dataset("old", jobs, make_vc_gpus(), {})
    extra = jobs.head(1).with_columns(pl.lit(10_000).alias("job_id"))
    result = store.upsert_jobs("old", extra, _plan(make_vc_gpus()))
    assert result.dataset.jobs_path.is_dir() and result.months_rewritten == ("2020-04", "2020-05", "2020-06")
    assert result.dataset.jobs().collect().height == 501


def test_two_upserts_at_once_both_land(data_root):
    jobs = make_jobs(400)
    store.upsert_jobs("race", jobs.head(100), _plan(make_vc_gpus()))
    halves = (jobs.slice(100, 150), jobs.slice(250, 150))
    threads = [threading.Thread(target=store.upsert_jobs, args=("race", h, _plan(make_vc_gpus()))) for h in halves]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.open_dataset("race").jobs().collect().height == 400


def test_an_empty_month_file_is_never_written(data_root):
    t0 = dt.datetime(2020, 1, 31, 23)
    one = pl.DataFrame({"cluster": ["c"], "job_id": [1], "vc": ["v"], "gpu_num": [1], "submit_time": [t0]})
    store.upsert_jobs("e", one.with_columns(pl.lit(5).alias("duration")), _plan(schema.empty_vc_gpus()))
    moved = one.with_columns(pl.lit(t0 + dt.timedelta(hours=2)).alias("submit_time"), pl.lit(5).alias("duration"))
    result = store.upsert_jobs("e", moved, _plan(schema.empty_vc_gpus()))
    assert sorted(p.name for p in result.dataset.jobs_path.iterdir()) == ["2020-02.parquet"]


def _without_gpu_type(ds: store.Dataset) -> store.Dataset:
    """ds as a dataset ingested before the gpu_type column existed: its files and meta.json without it."""
    for path in ds.jobs_path.glob("*.parquet"):
        pl.read_parquet(path).drop("gpu_type").write_parquet(path)
    meta_path = ds.path / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta.get("quality", {}).get("null_counts", {}).pop("gpu_type", None)
    meta.get("capabilities", {}).get("columns", {}).pop("gpu_type", None)
    meta_path.write_text(json.dumps(meta))
    return store.open_dataset(ds.name)


def test_a_dataset_written_before_a_column_existed_reads_it_as_absent_and_gets_it_on_refresh(data_root):
    old = _without_gpu_type(ingest(BATCH1, "slurm", "old", IngestOptions(cluster="heliostest")))
    assert old.stored_job_columns() == [c for c in schema.JOB_COLUMNS if c != "gpu_type"]
    assert old.jobs().collect()["gpu_type"].null_count() == 29
    assert db.run("SELECT count(gpu_type) AS n, count(*) AS jobs FROM jobs", ds=old).row(0) == (0, 29)
    status = capabilities.column_status(old.meta)["gpu_type"]
    assert status == {
        "status": "absent",
        "note": "this Slurm export has no GPU types (ingested before helios kept them)",
    }
    refreshed = append(SYNC, "slurm", "old").dataset
    assert refreshed.stored_job_columns() == list(schema.JOB_COLUMNS)


def test_a_refresh_of_one_month_writes_the_missing_column_into_every_month(data_root):
    jobs = make_jobs(400)
    may = pl.col("job_id") % 2 == 0
    jobs = jobs.with_columns(
        pl.when(may).then(pl.col(c) + dt.timedelta(days=30)).otherwise(pl.col(c)).alias(c)
        for c in ("submit_time", "start_time", "end_time")
    )
    _without_gpu_type(store.write_dataset("old", jobs, make_vc_gpus(), {}, monthly=True))
    april_job = jobs.filter(~may).head(1).with_columns(pl.col("duration") + 1)
    result = store.upsert_jobs("old", april_job, _plan(make_vc_gpus()))
    assert result.updated == 1 and result.months_rewritten == ("2020-04", "2020-05")
    assert all("gpu_type" in pl.read_parquet_schema(p) for p in result.dataset.jobs_path.glob("*.parquet"))
