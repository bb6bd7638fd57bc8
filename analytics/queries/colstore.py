"""Per-process in-memory column store of a dataset's INPUT tables (never of query results): the jobs table as numpy
columns with category codes, ranks and minute indices, loaded once per dataset version and selected with masks."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from analytics import schema
from analytics.filters import JobFilter
from analytics.store import Dataset, DatasetError

MAX_DATASETS = 2  # datasets kept in memory per process (least recently used dropped first)
US_PER_MINUTE = 60_000_000
EPOCH = datetime(1970, 1, 1)
_NULL_TIME = np.iinfo(np.int64).min  # placeholder of a null timestamp; always paired with a validity mask
_CATEGORIES = ("cluster", "vc", "user", "state")
_REQUIRED: tuple[str, ...] = ("cluster", "vc", "gpu_num", "submit_time", "duration")
_LOADED_COLUMNS = (*_CATEGORIES, "gpu_num", "cpu_num", "submit_time", "start_time", "end_time", "duration", "queue")
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
    """The jobs table of one dataset version in memory; times in epoch microseconds, `end_us` is the job's end
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
        if window and flt.start is not None:
            keep &= self.submit_us >= to_us(flt.start)
        if window and flt.end is not None:
            keep &= self.submit_us < to_us(flt.end)
        low, high = _gpu_bounds(flt)
        if low is not None:
            keep &= self.gpu_num >= low
        if high is not None:
            keep &= self.gpu_num <= high
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


def _times(jobs: pl.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    column = jobs[name].cast(pl.Int64)
    return column.fill_null(_NULL_TIME).to_numpy(), column.is_not_null().to_numpy()


def _check_required(ds: Dataset, jobs: pl.DataFrame) -> None:
    for name in _REQUIRED:
        nulls = jobs[name].null_count()
        if nulls:
            raise DatasetError(f"dataset {ds.name!r}: {ds.jobs_path} column {name} has {nulls} null values")


def _time_range(codes: Category, submit_us: np.ndarray, last_us: np.ndarray) -> dict[str, tuple[int, int]]:
    """Per cluster: min submit and max last time (end_time, else submit_time), in epoch microseconds."""
    out = {}
    for code, name in enumerate(codes.names):
        rows = codes.codes == code
        out[name] = (int(submit_us[rows].min()), int(last_us[rows].max()))
    return out


def _gpu_events(
    pair: np.ndarray, gpu_num: np.ndarray, has_start: np.ndarray, start_min: np.ndarray, end_min: np.ndarray
) -> GpuEvents:
    """The GpuEvents of the jobs with GPUs and a start time."""
    jobs = np.flatnonzero((gpu_num > 0) & has_start & (end_min >= start_min))
    job = np.concatenate([jobs, jobs])
    minute = np.concatenate([start_min[jobs], end_min[jobs] + 1])
    delta = np.concatenate([gpu_num[jobs], -gpu_num[jobs]])
    if not job.size:
        return GpuEvents(job, pair[job], minute, delta)
    # NOTE: sorted once here, so that every query's VC sweep only selects events and never sorts them.
    order = np.argsort(pair[job] * (minute.max() - minute.min() + 1) + (minute - minute.min()), kind="stable")
    return GpuEvents(job[order], pair[job[order]], minute[order], delta[order])


def load(ds: Dataset) -> JobColumns:
    """Read ds's jobs and capacity tables into a JobColumns (no caching; see `columns`)."""
    jobs = pl.read_parquet(ds.jobs_glob, columns=list(_LOADED_COLUMNS))
    _check_required(ds, jobs)
    duration = jobs["duration"].to_numpy()
    start_us, has_start = _times(jobs, "start_time")
    end_raw, has_end_raw = _times(jobs, "end_time")
    end_us = np.where(has_end_raw, end_raw, start_us + duration * 1_000_000)
    has_end = has_end_raw | has_start
    end_us[~has_end] = _NULL_TIME
    queue = jobs["queue"]
    submit_us = jobs["submit_time"].cast(pl.Int64).to_numpy()
    cats = {name: _category(jobs[name]) for name in _CATEGORIES}
    gpu_num = jobs["gpu_num"].cast(pl.Int64).to_numpy()
    start_min, end_min = start_us // US_PER_MINUTE, end_us // US_PER_MINUTE
    pair = cats["cluster"].codes.astype(np.int64) * len(cats["vc"].names) + cats["vc"].codes
    return JobColumns(
        n_rows=jobs.height,
        cats=cats,
        gpu_num=gpu_num,
        cpu_num=jobs["cpu_num"].fill_null(0.0).to_numpy(),
        has_cpu=jobs["cpu_num"].is_not_null().to_numpy(),
        duration_s=duration,
        queue_s=queue.fill_null(0).to_numpy(),
        has_queue=queue.is_not_null().to_numpy(),
        submit_us=submit_us,
        submit_month=submit_us.astype("datetime64[us]").astype("datetime64[M]").astype(np.int64),
        start_us=start_us,
        has_start=has_start,
        end_us=end_us,
        has_end=has_end,
        start_min=start_min,
        end_min=end_min,
        ranked={name: _ranked(jobs[name]) for name in ("duration", "queue", "gpu_num")},
        pair_code=pair,
        gpu_events=_gpu_events(pair, gpu_num, has_start, start_min, end_min),
        time_range=_time_range(cats["cluster"], submit_us, np.where(has_end_raw, end_raw, submit_us)),
        vc_gpus=schema.conform_vc_gpus(ds.vc_gpus()),
    )


_lock = threading.Lock()
_cache: OrderedDict[tuple[str, str], JobColumns] = OrderedDict()


def _reset_after_fork() -> None:
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def columns(ds: Dataset) -> JobColumns:
    """The in-memory columns of ds, loaded on first use and kept per (folder, version), at most MAX_DATASETS."""
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


def clear() -> None:
    """Drop every loaded dataset (frees the memory; the next query reloads)."""
    with _lock:
        _cache.clear()
