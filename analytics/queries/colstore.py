"""The column store of a dataset's INPUT tables (never of query results): the jobs table as numpy columns with
category codes, ranks and minute indices, selected with masks.

The arrays are computed once per dataset version, a column at a time, into `.npy` files of the dataset's derived
`columns` part, and every process maps those files read-only: all workers of a host share one copy through the page
cache, and a process only holds the pages its queries touch. A dataset whose folder cannot be written (and that has no
column files yet) is computed into this process's memory instead.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from analytics import schema, store
from analytics.filters import RUNNING, JobFilter
from analytics.store import Dataset, DatasetError

MAX_DATASETS = 2  # datasets kept open per process (least recently used dropped first)
COLUMNS_PART = "columns"  # the derived part holding the column files
FACTS_FILE = "columns.json"  # beside the arrays: row count, category names, null flags, per-cluster time ranges
MAX_RESIDENT_FILE_BYTES = 1 << 28  # mapped column pages a process keeps after a query before it drops them
US_PER_MINUTE = 60_000_000
EPOCH = datetime(1970, 1, 1)
_NULL_TIME = np.iinfo(np.int64).min  # placeholder of a null timestamp; always paired with a validity mask
_CATEGORIES = ("cluster", "vc", "user", "state")
_REQUIRED: tuple[str, ...] = ("cluster", "vc", "gpu_num", "submit_time", "duration")
_RANKED = ("duration", "queue", "gpu_num")
_MAX_RANK_TABLE = 1 << 23  # value ranges up to this size are ranked through a lookup table


@dataclass(frozen=True, eq=False)
class Category:
    """A string column as sorted distinct names and per-row codes into them (-1 for null)."""

    names: tuple[str, ...]
    codes: np.ndarray

    def table(self, values: Iterable[str]) -> np.ndarray:
        """Boolean table over codes (one spare last slot, so code -1 = null maps to False) marking `values`."""
        index = {name: i for i, name in enumerate(self.names)}
        out = np.zeros(len(self.names) + 1, dtype=bool)
        out[[index[v] for v in values if v in index]] = True
        return out

    def codes_of(self, names: Iterable[str]) -> np.ndarray:
        """Lookup array code -> position of the code's name in `names` (-1 when absent; spare last slot for null)."""
        position = {name: i for i, name in enumerate(names)}
        return np.array([position.get(n, -1) for n in self.names] + [-1], dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Ranked:
    """An integer column as its sorted distinct values and per-row ranks into them (-1 for null)."""

    values: np.ndarray
    ranks: np.ndarray
    has_null: bool


Rows = np.ndarray | slice  # selected row indices, or slice(None) for every row (numpy then takes views, not copies)


def selected(keep: np.ndarray) -> Rows | None:
    """The rows a mask keeps as Rows, or None when it keeps none."""
    if keep.all():
        return slice(None)
    rows = np.flatnonzero(keep)
    return rows if rows.size else None


@dataclass(frozen=True, eq=False)
class GpuEvents:
    """Start and stop events of every started GPU job that ends no earlier than it starts, sorted by the job's
    (cluster, VC) pair code and then by minute: job row, pair code, epoch minute (a stop is the end minute + 1)
    and GPU delta (+gpu_num at the start, -gpu_num at the stop)."""

    job: np.ndarray
    pair: np.ndarray
    minute: np.ndarray
    delta: np.ndarray


@dataclass(frozen=True, eq=False)
class JobColumns:
    """The jobs table of one dataset version as arrays; times in epoch microseconds, `end_us` is the job's end
    (end_time, else start_time + duration), minute columns are epoch minutes (floor)."""

    n_rows: int
    cats: dict[str, Category]
    gpu_num: np.ndarray
    cpu_num: np.ndarray  # 0 where has_cpu is False
    has_cpu: np.ndarray
    duration_s: np.ndarray
    queue_s: np.ndarray  # 0 where has_queue is False
    has_queue: np.ndarray
    submit_us: np.ndarray
    submit_month: np.ndarray  # calendar months since 1970-01
    start_us: np.ndarray
    has_start: np.ndarray
    end_us: np.ndarray
    has_end: np.ndarray
    start_min: np.ndarray
    end_min: np.ndarray
    ranked: dict[str, Ranked]
    pair_code: np.ndarray  # cluster code * number of VC names + VC code
    gpu_events: GpuEvents
    time_range: dict[str, tuple[int, int]]  # per cluster: min submit, max coalesce(end_time, submit_time) (us)
    vc_gpus: pl.DataFrame
    mappings: tuple[mmap.mmap, ...] = ()  # the column files' read-only mappings (none when computed in memory)

    def mask(self, flt: JobFilter, *, window: bool = True) -> np.ndarray:
        """Boolean row mask of the jobs the filter keeps: the same predicate as `flt.where(window=window)`."""
        keep = np.ones(self.n_rows, dtype=bool)
        for name, values in (
            ("cluster", flt.clusters),
            ("vc", flt.vcs),
            ("user", flt.users),
            ("state", flt.states),
        ):
            if values:
                cat = self.cats[name]
                keep &= cat.table(values)[cat.codes]
        if window:
            keep &= self.window_mask(flt)
        low, high = _gpu_bounds(flt)
        if low is not None:
            keep &= self.gpu_num >= low
        if high is not None:
            keep &= self.gpu_num <= high
        return keep

    def window_mask(self, flt: JobFilter) -> np.ndarray:
        """Boolean row mask of the jobs in the filter's time window, in its time mode (as `JobFilter.where`)."""
        keep = np.ones(self.n_rows, dtype=bool)
        if flt.time_mode == RUNNING:
            keep &= self.has_start
            if flt.start is not None:
                keep &= self.has_end & (self.end_us > to_us(flt.start))
            if flt.end is not None:
                keep &= self.start_us < to_us(flt.end)
            return keep
        if flt.start is not None:
            keep &= self.submit_us >= to_us(flt.start)
        if flt.end is not None:
            keep &= self.submit_us < to_us(flt.end)
        return keep

    def clusters(self) -> list[str]:
        """Names of the clusters present in the jobs or capacity table."""
        return sorted(set(self.cats["cluster"].names) | set(self.vc_gpus["cluster"].drop_nulls().to_list()))


def _gpu_bounds(flt: JobFilter) -> tuple[int | None, int | None]:
    """The filter's job kind and GPU range as one inclusive range [low, high] of gpu_num (None = open)."""
    low, high = flt.gpu_min, flt.gpu_max
    if flt.job_kind == "gpu":
        low = max(low or 0, 1)
    elif flt.job_kind == "cpu":
        low, high = max(low or 0, 0), min(0 if high is None else high, 0)
    return low, high


def to_us(t: datetime) -> int:
    """A naive datetime as integer microseconds since the epoch (exact)."""
    return (t - EPOCH) // timedelta(microseconds=1)


def from_us(us: int) -> datetime:
    """Integer microseconds since the epoch as a naive datetime."""
    return EPOCH + timedelta(microseconds=us)


def _category(series: pl.Series) -> Category:
    names = series.drop_nulls().unique().sort()
    codes = series.cast(pl.Enum(names.to_list())).to_physical().cast(pl.Int32).fill_null(-1).to_numpy()
    return Category(tuple(names.to_list()), codes)


def _ranked(series: pl.Series) -> Ranked:
    values = series.drop_nulls().unique().sort().to_numpy()
    raw = series.fill_null(values[0] if values.size else 0).to_numpy()
    if values.size and values[-1] - values[0] < _MAX_RANK_TABLE:
        # NOTE: a lookup table over the value range is ~10x faster than a binary search per row.
        table = np.zeros(values[-1] - values[0] + 1, dtype=np.int32)
        table[values - values[0]] = np.arange(values.size, dtype=np.int32)
        ranks = table[raw - values[0]]
    else:
        ranks = np.searchsorted(values, raw).astype(np.int32)
    nulls = series.is_null().to_numpy()
    ranks[nulls] = -1
    return Ranked(values, ranks, bool(nulls.any()))


def _compact(values: np.ndarray) -> np.ndarray:
    """Integer values as int32 when they all fit (half the bytes to map and share), else unchanged."""
    info = np.iinfo(np.int32)
    if values.size == 0 or (values.min() >= info.min and values.max() <= info.max):
        return values.astype(np.int32)
    return values


class _Reader:
    """Reads a dataset's jobs one column at a time, so that the whole table never sits in memory at once."""

    def __init__(self, ds: Dataset):
        self.ds = ds

    def series(self, name: str) -> pl.Series:
        """One jobs column, rows in the dataset's order."""
        return pl.read_parquet(self.ds.jobs_glob, columns=[name])[name]

    def times(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A timestamp column as epoch microseconds (_NULL_TIME where null) and where it is known."""
        column = self.series(name).cast(pl.Int64)
        return column.fill_null(_NULL_TIME).to_numpy(), column.is_not_null().to_numpy()

    def row_count(self) -> int:
        """The number of jobs, after raising DatasetError when a required column holds nulls."""
        counts = pl.scan_parquet(self.ds.jobs_glob).select(
            pl.len().alias("_rows"), *(pl.col(c).null_count() for c in _REQUIRED)
        )
        found = counts.collect().row(0, named=True)
        for name in _REQUIRED:
            if found[name]:
                raise DatasetError(
                    f"dataset {self.ds.name!r}: {self.ds.jobs_path} column {name} has {found[name]} null values"
                )
        return int(found["_rows"])


Put = Callable[[str, np.ndarray], np.ndarray]  # keeps a named array; returns the copy to read from then on


def _time_range(
    codes: np.ndarray, names: list[str], submit_us: np.ndarray, last_us: np.ndarray
) -> dict[str, tuple[int, int]]:
    """Per cluster: min submit and max last time (end_time, else submit_time), in epoch microseconds."""
    out = {}
    for code, name in enumerate(names):
        rows = codes == code
        out[name] = (int(submit_us[rows].min()), int(last_us[rows].max()))
    return out


def _minutes(us: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Epoch minutes (floor) of the known times; 0 where unknown (never read: every use checks the mask)."""
    return _compact(np.where(known, us, 0) // US_PER_MINUTE)


def _gpu_events(
    pair: np.ndarray, gpu_num: np.ndarray, has_start: np.ndarray, start_min: np.ndarray, end_min: np.ndarray
) -> dict[str, np.ndarray]:
    """The GpuEvents arrays (named events_<field>) of the jobs with GPUs and a start time."""
    jobs = np.flatnonzero((gpu_num > 0) & has_start & (end_min >= start_min))
    job = np.concatenate([jobs, jobs])
    minute = np.concatenate([start_min[jobs], end_min[jobs].astype(np.int64) + 1])
    delta = np.concatenate([gpu_num[jobs], -gpu_num[jobs]])
    if job.size:
        # NOTE: sorted once here, so that every query's VC sweep only selects events and never sorts them.
        key = pair[job].astype(np.int64) * (minute.max() - minute.min() + 1) + (minute - minute.min())
        order = np.argsort(key, kind="stable")
        job, minute, delta = job[order], minute[order], delta[order]
    return {
        "events_job": _compact(job),
        "events_pair": pair[job],
        "events_minute": _compact(minute),
        "events_delta": delta,
    }


def _build(ds: Dataset, put: Put) -> dict[str, Any]:
    """Compute every array of ds's JobColumns a column at a time, handing each to put, and return the facts that
    are not arrays (row count, category names, null flags, per-cluster time ranges, dataset version)."""
    reader = _Reader(ds)
    facts: dict[str, Any] = {"version": ds.version, "n_rows": reader.row_count(), "names": {}, "has_null": {}}
    codes = {}
    for name in _CATEGORIES:
        cat = _category(reader.series(name))
        facts["names"][name] = list(cat.names)
        codes[name] = put(f"codes_{name}", cat.codes)
    for name in _RANKED:
        ranked = _ranked(reader.series(name))
        put(f"ranks_{name}", ranked.ranks)
        put(f"values_{name}", ranked.values)
        facts["has_null"][name] = ranked.has_null
    gpu_num = put("gpu_num", reader.series("gpu_num").cast(pl.Int32).to_numpy())
    for name, values, known in (("cpu_num", "cpu_num", "has_cpu"), ("queue", "queue_s", "has_queue")):
        column = reader.series(name)
        put(values, column.fill_null(0).to_numpy())
        put(known, column.is_not_null().to_numpy())
    duration = put("duration_s", reader.series("duration").cast(pl.Int64).to_numpy())
    submit = reader.series("submit_time")
    submit_us = put("submit_us", submit.cast(pl.Int64).to_numpy())
    month = (submit.dt.year().cast(pl.Int32) - 1970) * 12 + submit.dt.month().cast(pl.Int32) - 1
    put("submit_month", month.to_numpy())
    del submit, month
    start_us, has_start = reader.times("start_time")
    start_us, has_start = put("start_us", start_us), put("has_start", has_start)
    end_raw, has_end_raw = reader.times("end_time")
    last_us = np.where(has_end_raw, end_raw, submit_us)
    facts["time_range"] = _time_range(codes["cluster"], facts["names"]["cluster"], submit_us, last_us)
    end_us = np.where(has_end_raw, end_raw, start_us + duration * 1_000_000)
    has_end = has_end_raw | has_start
    end_us[~has_end] = _NULL_TIME
    del last_us, end_raw, has_end_raw
    end_us, has_end = put("end_us", end_us), put("has_end", has_end)
    start_min = put("start_min", _minutes(start_us, has_start))
    end_min = put("end_min", _minutes(end_us, has_end))
    pair = _compact(codes["cluster"].astype(np.int64) * len(facts["names"]["vc"]) + codes["vc"])
    pair = put("pair_code", pair)
    for name, values in _gpu_events(pair, gpu_num, has_start, start_min, end_min).items():
        put(name, values)
    return facts


def _map(path: Path) -> tuple[np.ndarray, mmap.mmap]:
    """A saved (.npy) array mapped read-only, and its mapping."""
    with path.open("rb") as fh:
        version = np.lib.format.read_magic(fh)
        header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = header(fh)
        offset = fh.tell()
        mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    array = np.frombuffer(mapping, dtype=dtype, count=math.prod(shape), offset=offset)
    return array.reshape(shape, order="F" if fortran else "C"), mapping


def _write_files(ds: Dataset, folder: Path) -> None:
    """Write ds's column files into folder: one .npy per array, then the facts."""

    def put(name: str, values: np.ndarray) -> np.ndarray:
        path = folder / f"{name}.npy"
        np.save(path, values)
        return _map(path)[0]

    facts = _build(ds, put)
    (folder / FACTS_FILE).write_text(json.dumps(facts))


def _assemble(
    ds: Dataset, facts: dict[str, Any], arrays: dict[str, np.ndarray], mappings: tuple[mmap.mmap, ...] = ()
) -> JobColumns:
    names = facts["names"]
    return JobColumns(
        n_rows=facts["n_rows"],
        cats={name: Category(tuple(names[name]), arrays[f"codes_{name}"]) for name in _CATEGORIES},
        gpu_num=arrays["gpu_num"],
        cpu_num=arrays["cpu_num"],
        has_cpu=arrays["has_cpu"],
        duration_s=arrays["duration_s"],
        queue_s=arrays["queue_s"],
        has_queue=arrays["has_queue"],
        submit_us=arrays["submit_us"],
        submit_month=arrays["submit_month"],
        start_us=arrays["start_us"],
        has_start=arrays["has_start"],
        end_us=arrays["end_us"],
        has_end=arrays["has_end"],
        start_min=arrays["start_min"],
        end_min=arrays["end_min"],
        ranked={
            name: Ranked(arrays[f"values_{name}"], arrays[f"ranks_{name}"], facts["has_null"][name]) for name in _RANKED
        },
        pair_code=arrays["pair_code"],
        gpu_events=GpuEvents(
            arrays["events_job"], arrays["events_pair"], arrays["events_minute"], arrays["events_delta"]
        ),
        time_range={cluster: (lo, hi) for cluster, (lo, hi) in facts["time_range"].items()},
        vc_gpus=schema.conform_vc_gpus(ds.vc_gpus()),
        mappings=mappings,
    )


def column_files(ds: Dataset) -> Path | None:
    """The folder of ds's column files, written first when absent; None when they cannot be written."""
    return store.derived_part(ds, COLUMNS_PART, lambda folder: _write_files(ds, folder))


def load(ds: Dataset) -> JobColumns:
    """ds's JobColumns mapped from its column files (written first when absent), or computed in memory when the
    dataset's folder cannot hold them (no caching; see `columns`)."""
    folder = column_files(ds)
    if folder is not None:
        facts = json.loads((folder / FACTS_FILE).read_text())
        if facts["version"] == ds.version:
            mapped = {path.stem: _map(path) for path in folder.glob("*.npy")}
            files = {name: array for name, (array, _) in mapped.items()}
            return _assemble(ds, facts, files, tuple(mapping for _, mapping in mapped.values()))
    arrays: dict[str, np.ndarray] = {}
    facts = _build(ds, lambda name, values: arrays.setdefault(name, values))
    return _assemble(ds, facts, arrays)


_lock = threading.Lock()
_cache: OrderedDict[tuple[str, str], JobColumns] = OrderedDict()


def _reset_after_fork() -> None:
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def columns(ds: Dataset) -> JobColumns:
    """The columns of ds, opened on first use and kept per (folder, version), at most MAX_DATASETS."""
    key = (str(ds.path.absolute()), ds.version)
    with _lock:
        found = _cache.get(key)
        if found is None:
            found = load(ds)
            _cache[key] = found
            while len(_cache) > MAX_DATASETS:
                _cache.popitem(last=False)
        _cache.move_to_end(key)
        return found


def release(ds: Dataset) -> None:
    """Drop this process's resident pages of ds's column files (they stay in the page cache, shared): after a scan
    of most columns, so that the process's resident memory shrinks back; the next query maps them in again."""
    with _lock:
        found = _cache.get((str(ds.path.absolute()), ds.version))
    for mapping in found.mappings if found is not None else ():
        mapping.madvise(mmap.MADV_DONTNEED)


def _resident_file_bytes() -> int:
    """This process's resident pages of mapped files (and shared memory), in bytes (/proc/self/statm)."""
    with open("/proc/self/statm") as fh:
        shared_pages = int(fh.read().split()[2])
    return shared_pages * mmap.PAGESIZE


def trim(ds: Dataset, max_bytes: int = MAX_RESIDENT_FILE_BYTES) -> None:
    """release(ds) when this process holds more than max_bytes of mapped file pages (a large dataset's scan)."""
    if _resident_file_bytes() > max_bytes:
        release(ds)


def clear() -> None:
    """Drop every opened dataset (unmaps its files, frees in-memory ones; the next query reopens)."""
    with _lock:
        _cache.clear()
