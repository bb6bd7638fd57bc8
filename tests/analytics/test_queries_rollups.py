"""Derived files (column files, rollups, catalog): written once per dataset version under a lock, read by every
process, and giving exactly the answers computed from the jobs (and so the independent Polars reference's)."""

from __future__ import annotations

import threading
import time

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analytics import queries, store
from analytics.filters import JobFilter
from analytics.queries import catalog, colstore, rollups
from tests.analytics import polars_ref
from tests.analytics.conftest import small_jobs, small_vc_gpus
from tests.analytics.test_queries_crosscheck import random_trace

PAGE_CASES = [(name, options) for name, options in rollups.PAGE_QUERIES if name in polars_ref.REFERENCES]
CLUSTER_CASES = [(name, options) for name, options in rollups.PAGE_QUERIES if name in queries.COMPUTED]


@pytest.fixture(scope="module", params=["small", "random"])
def derived_ds(request, tmp_path_factory):
    """The hand-checked and a random trace, each with its derived files written (module scope: once)."""
    jobs, caps = (small_jobs(), small_vc_gpus()) if request.param == "small" else random_trace(seed=3)
    ds = store.write_dataset(request.param, jobs, caps, {}, root=tmp_path_factory.mktemp("data"))
    queries.derive(ds)
    colstore.clear()
    return ds


def _no_scans(monkeypatch) -> None:
    """Make any read of the jobs (column store or DuckDB) fail."""

    def scan(*_args, **_kwargs):
        raise AssertionError("the jobs were read")

    monkeypatch.setattr(colstore, "columns", scan)
    monkeypatch.setattr("analytics.db.run", scan)


@pytest.mark.parametrize(("name", "options"), PAGE_CASES, ids=[f"{n}{sorted(o.items())}" for n, o in PAGE_CASES])
def test_rollups_are_the_computed_frames_and_match_the_reference(derived_ds, monkeypatch, name, options):
    computed = queries.COMPUTED[name](derived_ds, JobFilter(), **options)
    _no_scans(monkeypatch)
    answered = queries.QUERIES[name](derived_ds, JobFilter(), **options)
    assert_frame_equal(answered, computed, check_exact=True)
    want = polars_ref.REFERENCES[name](derived_ds, JobFilter(), **options)
    assert_frame_equal(answered, want, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)


def test_defaults_find_their_rollup_and_active_users_has_one(derived_ds, monkeypatch):
    want_cdf = queries.COMPUTED["duration_cdf"](derived_ds, JobFilter(), kind="gpu")
    want_users = queries.users.active_users(derived_ds)
    _no_scans(monkeypatch)
    assert_frame_equal(queries.QUERIES["duration_cdf"](derived_ds), want_cdf)  # kind="gpu" by default
    assert_frame_equal(queries.active_users(derived_ds), want_users, check_row_order=False)  # SQL: any row order


def test_a_filtered_view_is_computed_from_the_jobs(derived_ds):
    flt = JobFilter(job_kind="gpu")
    rollup = rollups.stored(derived_ds, queries.COMPUTED["cluster_summary"], {})
    assert rollup is not None
    answered = queries.QUERIES["cluster_summary"](derived_ds, flt)
    assert_frame_equal(answered, queries.COMPUTED["cluster_summary"](derived_ds, flt))
    assert not answered.equals(rollup)


@pytest.mark.parametrize(("name", "options"), CLUSTER_CASES, ids=[f"{n}{sorted(o.items())}" for n, o in CLUSTER_CASES])
def test_each_cluster_alone_is_answered_from_its_own_rollup(derived_ds, monkeypatch, name, options):
    flts = [JobFilter(clusters=(c,)) for c in ("Alpha", "Beta")]  # both traces' clusters
    computed = [queries.COMPUTED[name](derived_ds, flt, **options) for flt in flts]
    _no_scans(monkeypatch)
    for flt, want in zip(flts, computed, strict=True):
        assert_frame_equal(queries.QUERIES[name](derived_ds, flt, **options), want, check_exact=True)


def test_a_cluster_with_another_filter_field_is_computed(derived_ds):
    summary = queries.COMPUTED["cluster_summary"]
    assert rollups.stored(derived_ds, summary, {}, JobFilter(clusters=("Alpha",))) is not None
    for flt in (JobFilter(clusters=("Alpha",), job_kind="gpu"), JobFilter(clusters=("Alpha", "Beta"))):
        assert rollups.stored(derived_ds, summary, {}, flt) is None


def test_a_one_cluster_dataset_has_no_per_cluster_rollups(tmp_path):
    jobs = small_jobs()
    one = jobs["cluster"][0]
    ds = store.write_dataset("one", jobs.filter(pl.col("cluster") == one), small_vc_gpus(), {}, root=tmp_path)
    queries.derive(ds)
    assert not any(store.derived_path(ds, rollups.CLUSTER_ROLLUPS_PART).iterdir())
    assert rollups.stored(ds, queries.COMPUTED["cluster_summary"], {}, JobFilter(clusters=(one,))) is None


def test_the_catalog_is_written_once_and_read_back(derived_ds, monkeypatch):
    want = catalog._compute(derived_ds)
    monkeypatch.setattr(catalog, "_compute", lambda ds: pytest.fail("the catalog was computed again"))
    assert catalog.filter_options(derived_ds) == want["options"]
    assert catalog.submit_days(derived_ds) == (want["first_day"], want["last_day"])
    assert catalog.newest_record(derived_ds) == want["newest"]
    assert catalog.gpu_vcs(derived_ds, "Beta") == want["gpu_vcs"]["Beta"] and catalog.gpu_vcs(derived_ds, "Nope") == []


def _catalog_by_scans(ds: store.Dataset) -> dict:
    """The catalog as Polars scans of the jobs give it (the reference)."""
    jobs = ds.jobs()
    pairs = jobs.select("cluster", "vc").unique().collect()
    times = jobs.select(
        pl.col("submit_time").min().alias("first"),
        pl.col("submit_time").max().alias("last"),
        pl.max_horizontal(pl.col(c).max() for c in ("submit_time", "start_time", "end_time")).alias("newest"),
    )
    first, last, newest = times.collect().row(0)
    gpu = jobs.filter(pl.col("gpu_num") > 0).select("cluster", "vc").unique().collect()
    return {
        "options": {
            "clusters": sorted(pairs["cluster"].unique().to_list()),
            "cluster_vcs": [[c, v] for c, v in pairs.drop_nulls().sort(["cluster", "vc"]).iter_rows()],
            "users": jobs.select("user").drop_nulls().unique().collect()["user"].sort().to_list(),
        },
        "first_day": first.date().isoformat(),
        "last_day": last.date().isoformat(),
        "newest": newest.strftime("%Y-%m-%d %H:%M"),
        "gpu_vcs": {c: sorted(gpu.filter(pl.col("cluster") == c)["vc"].to_list()) for c in gpu["cluster"].unique()},
    }


def test_the_catalog_from_the_columns_is_what_scans_of_the_jobs_give(derived_ds):
    got = catalog._compute(derived_ds)
    assert {k: got[k] for k in ("options", "first_day", "last_day", "newest", "gpu_vcs")} == _catalog_by_scans(
        derived_ds
    )


def test_a_new_version_gets_its_own_derived_files(tmp_path):
    first = store.write_dataset("d", small_jobs(), small_vc_gpus(), {}, root=tmp_path)
    queries.derive(first)
    second = store.write_dataset("d", small_jobs().head(5), small_vc_gpus(), {}, root=tmp_path)
    assert rollups.stored(second, queries.COMPUTED["cluster_summary"], {}) is None  # not derived yet: computed
    assert queries.QUERIES["cluster_summary"](second)["job_num"][-1] == 5
    queries.derive(second)
    assert rollups.stored(second, queries.COMPUTED["cluster_summary"], {})["job_num"][-1] == 5


def test_a_read_only_dataset_is_computed_in_memory(tmp_path, monkeypatch):
    ds = store.write_dataset("ro", small_jobs(), small_vc_gpus(), {}, root=tmp_path)
    monkeypatch.setattr(store, "derived_part", lambda *_args: None)
    colstore.clear()
    queries.derive(ds)
    assert not store.derived_path(ds, colstore.COLUMNS_PART).exists()
    assert queries.QUERIES["cluster_summary"](ds)["job_num"][-1] == small_jobs().height
    assert catalog.filter_options(ds)["clusters"] == ["Alpha", "Beta"]


def test_a_part_is_built_once_by_concurrent_callers(tmp_path):
    ds = store.write_dataset("c", small_jobs(), small_vc_gpus(), {}, root=tmp_path)
    builds = []

    def build(folder):
        builds.append(folder)
        time.sleep(0.3)
        (folder / "x.txt").write_text("x")

    found = []
    threads = [threading.Thread(target=lambda: found.append(store.derived_part(ds, "part", build))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and len(set(found)) == 1 and (found[0] / "x.txt").read_text() == "x"
    assert [p.name for p in found[0].parent.iterdir() if p.name.startswith(".part-")] == []


def test_a_failed_build_leaves_nothing_behind(tmp_path):
    ds = store.write_dataset("f", small_jobs(), small_vc_gpus(), {}, root=tmp_path)

    def build(folder):
        (folder / "half.npy").write_bytes(b"x")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        store.derived_part(ds, "part", build)
    base = store.derived_path(ds, "part").parent
    assert sorted(p.name for p in base.iterdir()) == [".part.lock"]


def test_column_files_are_shared_read_only_maps(derived_ds):
    cols = colstore.columns(derived_ds)
    assert not cols.gpu_num.flags.writeable and cols.mappings
    with pytest.raises(ValueError, match="read-only"):
        cols.duration_s[:1] = 0
    want = queries.COMPUTED["user_table"](derived_ds, JobFilter(job_kind="gpu"))
    colstore.release(derived_ds)  # pages dropped from this process: read in again on the next use
    assert_frame_equal(queries.COMPUTED["user_table"](derived_ds, JobFilter(job_kind="gpu")), want)


def test_an_older_formats_derived_files_are_removed(tmp_path):
    ds = store.write_dataset("d", small_jobs(), small_vc_gpus(), {}, root=tmp_path)
    (ds.path / "derived-0" / "rollups").mkdir(parents=True)
    queries.derive(ds)
    assert sorted(p.name for p in ds.path.glob("derived-*")) == [store.DERIVED_DIR]
