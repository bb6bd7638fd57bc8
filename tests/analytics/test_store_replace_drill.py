"""Readers during replacements: 1,000 reads of a dataset from another process (the pages' path: open_dataset and a
query over the derived files, or the real app's CSV download) while `helios ingest` replaces it again and again
(new version, derived files, link swapped): none fails, and each sees the old or the new version whole."""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
import zipfile
from pathlib import Path

import pytest

from analytics import queries, store
from analytics.ingest import ingest

NAME = "drill"
READS = 1_000
SIZES = (300, 500)  # jobs in the two versions written in turn
HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"


def _helios_zip(path: Path, n_jobs: int) -> Path:
    """A Helios data.zip of one cluster with n_jobs GPU jobs (each n_jobs gives other figures)."""
    rows = [
        f"{i},u{i % 7},vc{i % 3},{1 + i % 4},4,1,{'COMPLETED' if i % 5 else 'FAILED'},"
        f"2020-04-{1 + i % 20:02d} 00:{i % 60:02d}:00,2020-04-{1 + i % 20:02d} 00:{i % 60:02d}:10,"
        f"2020-04-{1 + i % 20:02d} 01:{i % 60:02d}:10,3600,10"
        for i in range(n_jobs)
    ]
    capacity = "date,vc0,vc1,vc2,total\n2020-04-01,16,16,16,48\n"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("Venus/cluster_log.csv", "\n".join([HEADER, *rows]) + "\n")
        zf.writestr("Venus/cluster_gpu_number.csv", capacity)
    return path


def _replace(source: Path, root: Path) -> None:
    """What `helios ingest` does: a new version swapped in, then its derived files written."""
    queries.derive(ingest(source, "helios", NAME, root=root))


def _read_store(root: Path) -> tuple[str, int]:
    """One read as a page makes it: open the dataset, then a whole-dataset answer (a rollup) and a filtered one
    (the column files); both must count the jobs its meta.json names."""
    from analytics.filters import JobFilter

    ds = store.open_dataset(NAME, root)
    expected = ds.meta["row_counts"]["jobs"]
    whole = queries.QUERIES["job_states"](ds, JobFilter())
    gpu = queries.QUERIES["job_states"](ds, JobFilter(gpu_min=1))
    counts = [int(frame.drop("cluster", "gpu_time").sum_horizontal().sum()) for frame in (whole, gpu)]
    if counts != [expected, expected]:
        return "mixed", expected
    return "ok", expected


def _read_web(client) -> tuple[str, int]:
    """One read through the real app: the job explorer's CSV download of the whole dataset."""
    resp = client.get(f"/download/jobs.csv?ds={NAME}")
    if resp.status_code != 200:
        return f"status {resp.status_code}", 0
    return "ok", resp.get_data(as_text=True).count("\n") - 1


def _reader(root: str, cache: str, reads: int, out) -> None:
    """READS reads from this process, alternating the store path and the web path; put (outcome, jobs) per read."""
    os.environ.update(HELIOS_DATA_DIR=root, HELIOS_CACHE_DIR=cache, HELIOS_DEFAULT_DATASET=NAME)
    logging.getLogger("helios.access").setLevel(logging.WARNING)  # a line per request is noise here
    from app import create_app

    client = create_app().server.test_client()
    results = []
    for i in range(reads):
        try:
            results.append(_read_store(Path(root)) if i % 2 == 0 else _read_web(client))
        except Exception as exc:  # a failed read is what the drill counts
            results.append((f"{type(exc).__name__}: {exc}", 0))
    out.put(results)


@pytest.mark.slow
def test_a_thousand_reads_during_repeated_replacements_all_see_one_whole_version(tmp_path):
    root, sources = tmp_path / "data", [_helios_zip(tmp_path / f"v{n}.zip", n) for n in SIZES]
    _replace(sources[0], root)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    reader = ctx.Process(target=_reader, args=(str(root), str(tmp_path / "cache"), READS, out))
    reader.start()
    replacements = 0
    try:
        while reader.is_alive() and out.empty():
            _replace(sources[(replacements + 1) % 2], root)
            replacements += 1
        results = out.get(timeout=300)
    finally:
        reader.join(timeout=60)
    failed = [r for r in results if r[0] != "ok"]
    assert len(results) == READS and not failed, f"{len(failed)} of {READS} reads failed: {failed[:5]}"
    assert {jobs for _, jobs in results} <= set(SIZES)
    assert replacements >= 10, f"only {replacements} replacements during the reads"
    print(f"{READS} reads, 0 failed, during {replacements} replacements")
    assert len({jobs for _, jobs in results}) == 2  # the reads saw both versions


def test_replaced_versions_stay_readable_for_a_grace_period_then_go(tmp_path):
    root, sources = tmp_path / "data", [_helios_zip(tmp_path / f"v{n}.zip", n) for n in SIZES]
    _replace(sources[0], root)
    held = store.open_dataset(NAME, root)
    _replace(sources[1], root)
    assert held.jobs().collect().height == SIZES[0]  # an open version is still there after the swap
    assert store.open_dataset(NAME, root).jobs().collect().height == SIZES[1]
    later = time.time() + store.RETIRED_GRACE_S + 1
    store.sweep_stale(root, now_s=later)
    assert not held.path.exists() and store.open_dataset(NAME, root).path.exists()
