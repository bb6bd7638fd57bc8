"""Dataset storage: names, atomic replacement, metadata and schema conformance."""

from __future__ import annotations

import datetime as dt
import errno
import json
import time

import polars as pl
import pytest

from analytics import schema, store


def _jobs(n: int = 3) -> pl.DataFrame:
    t0 = dt.datetime(2020, 4, 1)
    return pl.DataFrame(
        {
            "cluster": ["Venus"] * n,
            "job_id": list(range(n, 0, -1)),
            "vc": ["vcA"] * n,
            "gpu_num": [1] * n,
            "submit_time": [t0 + dt.timedelta(seconds=10 * i) for i in range(n)],
            "duration": [5] * n,
        }
    )


def _caps() -> pl.DataFrame:
    return pl.DataFrame({"cluster": ["Venus"], "vc": ["vcA"], "date": [dt.date(2020, 4, 1)], "gpus": [8]})


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "a b", "-x", "x" * 65, "a..b"])
def test_bad_names_rejected(name):
    with pytest.raises(store.DatasetError):
        store.check_name(name)


def test_write_then_open_round_trip(data_root):
    ds = store.write_dataset("t1", _jobs(), _caps(), {"source": "test"})
    assert ds.path == (data_root / "t1").resolve() and ds.path.name.startswith(".t1.v-")  # the version's folder
    jobs = ds.jobs().collect()
    assert jobs.columns == list(schema.JOB_COLUMNS)
    assert jobs.schema["submit_time"] == schema.TIMESTAMP
    assert jobs["job_id"].to_list() == [3, 2, 1]  # sorted by submit time, not by id
    assert jobs["user"].null_count() == 3
    meta = json.loads((ds.path / schema.META_FILE).read_text())
    assert meta["source"] == "test" and meta["schema_version"] == schema.SCHEMA_VERSION
    assert [d.name for d in store.list_datasets()] == ["t1"]


def test_rewrite_replaces_and_changes_version(data_root):
    v1 = store.write_dataset("t1", _jobs(3), _caps(), {}).version
    ds = store.write_dataset("t1", _jobs(5), _caps(), {})
    assert ds.version != v1
    assert ds.jobs().collect().height == 5
    assert sorted(p.name for p in data_root.iterdir() if not p.name.startswith(".t1.v-")) == ["t1"]
    copies = sorted(data_root.glob(".t1.v-*"))
    assert len(copies) == 2, "the new copy and the replaced one (kept for its readers), no temp folders left behind"
    store.sweep_stale(data_root, now_s=time.time() + store.RETIRED_GRACE_S + 1)
    assert list(data_root.glob(".t1.v-*")) == [ds.path], "the replaced copy goes after its grace period"


def test_failed_write_keeps_existing_dataset(data_root):
    store.write_dataset("t1", _jobs(3), _caps(), {})
    bad = _jobs(2).with_columns(pl.lit("not a number").alias("gpu_num"))
    with pytest.raises(pl.exceptions.InvalidOperationError):
        store.write_dataset("t1", bad, _caps(), {})
    assert store.open_dataset("t1").jobs().collect().height == 3
    assert len(list(data_root.iterdir())) == 2  # the t1 link and its one stored copy


def test_open_missing_dataset_names_alternatives(data_root):
    store.write_dataset("there", _jobs(), _caps(), {})
    with pytest.raises(store.DatasetError, match="'nope' not found.*there"):
        store.open_dataset("nope")


@pytest.mark.parametrize("meta_text", ["{ not json", "[1, 2]", "\udcff"])
def test_a_dataset_whose_metadata_cannot_be_read_is_named_not_a_crash(data_root, meta_text):
    store.write_dataset("good", _jobs(), _caps(), {})
    bad = store.write_dataset("bad", _jobs(), _caps(), {})
    (bad.path / schema.META_FILE).write_bytes(meta_text.encode("utf-8", "surrogateescape"))
    assert [d.name for d in store.list_datasets()] == ["good"]  # the listing (every page's drop-down) still works
    with pytest.raises(store.DatasetError, match=f"'bad' cannot be read: {bad.path / schema.META_FILE}"):
        store.open_dataset("bad")


def test_identical_rewrite_in_one_process(data_root):
    first = store.write_dataset("t1", _jobs(3), _caps(), {})
    again = store.write_dataset("t1", _jobs(3), _caps(), {})
    assert again.version == first.version
    assert again.jobs().collect().height == 3


def test_stale_staging_left_by_a_killed_writer_is_swept(data_root):
    import os
    import time

    live = store.write_dataset("t1", _jobs(3), _caps(), {})
    old_tmp = data_root / ".t1.tmp-abc123"
    orphan = data_root / ".t2.v-0123456789ab-1-deadbeef"
    fresh_tmp = data_root / ".t3.tmp-fresh"
    for p in (old_tmp, orphan, fresh_tmp):
        p.mkdir()
    hour_ago = time.time() - 2 * store.STALE_AFTER_S
    for p in (old_tmp, orphan, live.path.resolve()):
        os.utime(p, (hour_ago, hour_ago))
    removed = store.sweep_stale(data_root)
    assert sorted(p.name for p in removed) == sorted([old_tmp.name, orphan.name])
    assert fresh_tmp.exists(), "a staging folder still being written is kept"
    assert store.open_dataset("t1").jobs().collect().height == 3, "the live copy is never swept"


def test_delete_never_follows_a_link_out_of_the_data_folder(tmp_path):
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "meta.json").write_text("{}")
    (outside / "keep.txt").write_text("mine")
    root = tmp_path / "data"
    root.mkdir()
    (root / "evil").symlink_to(outside)
    store.delete_dataset("evil", root)
    assert not (root / "evil").exists() and (outside / "keep.txt").read_text() == "mine"


def test_delete_only_touches_folders_that_are_datasets(tmp_path):
    root = tmp_path / "data"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "todo.txt").write_text("x")
    with pytest.raises(store.DatasetError, match="no meta.json"):
        store.delete_dataset("notes", root)
    assert (root / "notes" / "todo.txt").exists()


def test_a_derived_part_that_finds_the_disk_full_is_computed_without(data_root):
    ds = store.write_dataset("t1", _jobs(3), _caps(), {})

    def no_room(folder):
        (folder / "part.bin").write_bytes(b"x")
        raise OSError(errno.ENOSPC, "No space left on device")

    def broken(folder):
        raise OSError(errno.EIO, "Input/output error")

    assert store.derived_part(ds, "x", no_room) is None  # the queries compute without it
    assert not list((ds.path / store.DERIVED_DIR).glob(".x*tmp*")) and not store.derived_path(ds, "x").exists()
    with pytest.raises(OSError, match="Input/output error"):
        store.derived_part(ds, "y", broken)  # any other failure is an error


def test_disk_full_is_recognised_however_the_writer_reports_it(tmp_path):
    polars_style = RuntimeError("parquet: underlying IO error: No space left on device (os error 28)")
    assert store.disk_full(OSError(errno.ENOSPC, "No space left on device"), tmp_path)
    assert store.disk_full(polars_style, tmp_path)
    assert not store.disk_full(OSError("500 requested and 131 written"), tmp_path)  # room left here: not full
    assert not store.disk_full(ValueError("bad value"), tmp_path)
