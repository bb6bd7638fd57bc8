"""Time-series study queries (spec helios.md §2): per-minute utilisation by sweep line, 10-minute throughput, and
what is averaged from them (monthly, diurnal, per VC). The window bounds the series; other filters select the jobs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import numpy as np
import polars as pl

from analytics import schema
from analytics.filters import NO_FILTER, JobFilter
from analytics.queries import colstore
from analytics.queries.base import (
    CAPACITY_SCHEMA,
    daily_capacity,
    dataset_clusters,
    empty,
    period_bounds,
)
from analytics.store import Dataset

MINUTE = timedelta(minutes=1)
_US_PER_DAY = 1440 * colstore.US_PER_MINUTE
COUNT_COLUMNS: tuple[str, ...] = ("running_gpujob_num", "running_gpu_num", "running_gpu_multi", "running_gpu_single")
UTIL_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(),
    "time": schema.TIMESTAMP,
    **dict.fromkeys(COUNT_COLUMNS, pl.Int64()),
    "total_gpu_num": pl.Int64(),
    "gpu_utilization": pl.Float64(),
    "gpu_utilization_multi": pl.Float64(),
    "gpu_utilization_single": pl.Float64(),
}
# dequeue: a job leaves the queue when it starts, or when it ends without having started (cancelled while pending).
EVENT_KINDS: tuple[str, ...] = ("submit", "start", "end", "dequeue")
THROUGHPUT_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(),
    "time": schema.TIMESTAMP,
    **{f"{k}_{c}": pl.Int64() for k in EVENT_KINDS for c in ("job_all", "gpu_job", "gpu_num")},
}
VC_UTIL_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(),
    "vc": pl.String(),
    "mean_gpus": pl.Float64(),
    **dict.fromkeys(
        ("mean_pct", "median_pct", "q1_pct", "q3_pct", "whisker_low_pct", "whisker_high_pct"), pl.Float64()
    ),
    "gpu_jobs": pl.Int64(),
    **dict.fromkeys(("avg_gpus_per_job", "avg_duration_s", "avg_queue_s"), pl.Float64()),
    **dict.fromkeys(("norm_avg_duration_pct", "norm_avg_queue_pct"), pl.Float64()),
}
_EVERY_RE = re.compile(r"^[1-9][0-9]{0,3}(m|h|d|w|mo)$")


@dataclass(frozen=True)
class Spans:
    """Started GPU jobs running in the minute grid: their rows in the column store, first minute index (clipped
    to 0), stop index (last + 1, clipped to n) and GPUs g."""

    rows: np.ndarray
    first: np.ndarray
    stop: np.ndarray
    g: np.ndarray


def _minute_spans(cols: colstore.JobColumns, keep: np.ndarray, start: datetime, n_minutes: int) -> Spans:
    """The GPU jobs of `keep` that started and run in the n_minutes of the grid from start, as Spans."""
    origin = _epoch_minutes(start)
    rows = np.flatnonzero(keep & (cols.gpu_num > 0) & cols.has_start)
    first, last = cols.start_min[rows] - origin, cols.end_min[rows] - origin
    inside = (last >= first) & (last >= 0) & (first < n_minutes)
    rows, first, last = rows[inside], first[inside], last[inside]
    return Spans(rows, np.maximum(first, 0), np.minimum(last + 1, n_minutes), cols.gpu_num[rows])


def sweep(
    first: np.ndarray, stop: np.ndarray, weights: np.ndarray | None, n_minutes: int, groups: int = 1
) -> np.ndarray:
    """Diff array + cumulative sum: per group and minute, the total weight of intervals [first, stop) covering it;
    first and stop are already offset by group * (n_minutes + 1)."""
    size = groups * (n_minutes + 1)
    diff = np.bincount(first, weights, minlength=size) - np.bincount(stop, weights, minlength=size)
    running = np.cumsum(diff.reshape(groups, n_minutes + 1)[:, :n_minutes], axis=1)
    return running if weights is None else np.rint(running).astype(np.int64)


def _running_columns(spans: Spans, group: np.ndarray, n_minutes: int, groups: int) -> dict[str, np.ndarray]:
    """Per group (row) and minute: running GPU jobs, GPUs, GPUs of multi- and of single-GPU jobs."""
    offset = group * (n_minutes + 1)
    first, stop, g = spans.first + offset, spans.stop + offset, spans.g
    single = sweep(first, stop, (g == 1).astype(np.float64), n_minutes, groups)
    multi = sweep(first, stop, np.where(g > 1, g, 0).astype(np.float64), n_minutes, groups)
    return {
        "running_gpujob_num": sweep(first, stop, None, n_minutes, groups),
        "running_gpu_num": single + multi,  # every spanned job has g >= 1 GPUs
        "running_gpu_multi": multi,
        "running_gpu_single": single,
    }


def _minute_capacity(caps: pl.DataFrame, start: datetime, n_minutes: int) -> np.ndarray:
    """Per minute of the grid, that day's capacity as float (NaN where the capacity table has no row)."""
    day0 = start.date()
    n_days = (start - datetime.combine(day0, datetime.min.time()) + n_minutes * MINUTE).days + 1
    by_day = np.full(n_days, np.nan)
    idx = np.array([(d - day0).days for d in caps["date"].to_list()], dtype=np.int64)
    keep = (idx >= 0) & (idx < n_days)
    by_day[idx[keep]] = caps["total_gpu_num"].to_numpy()[keep]
    offset = start.hour * 60 + start.minute
    return by_day[(np.arange(n_minutes) + offset) // 1440]


@dataclass(frozen=True)
class Selection:
    """The minute grid of a query: selected clusters, first minute, number of minutes, and the selected jobs
    (`keep`, window ignored) of the dataset's column store."""

    clusters: list[str]
    start: datetime
    n_minutes: int
    cols: colstore.JobColumns
    keep: np.ndarray


def _grid(ds: Dataset, flt: JobFilter) -> Selection | None:
    bounds, clusters = period_bounds(ds, flt), dataset_clusters(ds, flt)
    if bounds is None or not clusters:
        return None
    cols = colstore.columns(ds)
    keep = cols.mask(flt, window=False)
    if not keep.any():
        return None
    start, end = _grid_start(bounds[0]), bounds[1]
    return Selection(clusters, start, -(-(end - start) // MINUTE), cols, keep)


def _grid_start(start: datetime) -> datetime:
    return start.replace(second=0, microsecond=0)


@dataclass(frozen=True)
class MinuteGrid:
    """Per-minute arrays [cluster, minute] of the period: running counts, capped GPUs, capacity and shares."""

    clusters: list[str]
    start: datetime
    n_minutes: int
    counts: dict[str, np.ndarray]
    total: np.ndarray  # float, NaN where the capacity table has no row
    shares: dict[str, np.ndarray]  # float rounded to 3 decimals, NaN where the capacity is unknown or 0


# (dataset folder, version, filter) -> its MinuteGrid, while shared_grids() is active (never in a web worker: a
# multi-year grid takes hundreds of megabytes).
_SHARED_GRIDS: ContextVar[dict | None] = ContextVar("shared_grids", default=None)


@contextmanager
def shared_grids() -> Iterator[None]:
    """Within the block, the minute grid of a dataset version and filter is swept once for every query asking for
    it (the rollups ask four times)."""
    token = _SHARED_GRIDS.set({})
    try:
        yield
    finally:
        _SHARED_GRIDS.reset(token)


def _minute_grid(ds: Dataset, flt: JobFilter) -> MinuteGrid | None:
    """The MinuteGrid of ds and flt (shared within shared_grids())."""
    shared = _SHARED_GRIDS.get()
    if shared is None:
        return _sweep_grid(ds, flt)
    key = (str(ds.path.absolute()), ds.version, flt)
    if key not in shared:
        shared[key] = _sweep_grid(ds, flt)
    return shared[key]


def _sweep_grid(ds: Dataset, flt: JobFilter) -> MinuteGrid | None:
    """Sweep the selected GPU jobs over the period's minutes for every selected cluster (spec §2 rules)."""
    grid = _grid(ds, flt)
    if grid is None:
        return None
    clusters, start, n_minutes = grid.clusters, grid.start, grid.n_minutes
    spans = _minute_spans(grid.cols, grid.keep, start, n_minutes)
    cluster = grid.cols.cats["cluster"]
    counts = _running_columns(spans, cluster.codes_of(clusters)[cluster.codes[spans.rows]], n_minutes, len(clusters))
    caps = daily_capacity(ds, flt, clusters).partition_by("cluster", as_dict=True, include_key=False)
    total = np.stack([_minute_capacity(caps.get((c,), empty(CAPACITY_SCHEMA)), start, n_minutes) for c in clusters])
    known = ~np.isnan(total)
    counts["running_gpu_num"] = np.where(
        known, np.minimum(counts["running_gpu_num"], np.nan_to_num(total)), counts["running_gpu_num"]
    ).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        denominator = np.where(known & (total > 0), total, np.nan)
        shares = {
            "gpu_utilization": np.round(counts["running_gpu_num"] / denominator, 3),
            "gpu_utilization_multi": np.round(counts["running_gpu_multi"] / denominator, 3),
            "gpu_utilization_single": np.round(counts["running_gpu_single"] / denominator, 3),
        }
    return MinuteGrid(clusters, start, n_minutes, counts, total, shares)


def utilization_minutes(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster and minute of the period: running GPU jobs/GPUs (start..end minute inclusive), capacity, use."""
    grid = _minute_grid(ds, flt)
    if grid is None:
        return empty(UTIL_SCHEMA)
    n_clusters, n = len(grid.clusters), grid.n_minutes
    times = _minute_times(grid)
    frame = pl.DataFrame(
        {
            "cluster": pl.Series(grid.clusters).gather(np.repeat(np.arange(n_clusters), n)),
            "time": pl.concat([times] * n_clusters),
            **{name: values.ravel() for name, values in grid.counts.items()},
            "total_gpu_num": pl.Series(grid.total.ravel(), nan_to_null=True).cast(pl.Int64),
            **{name: pl.Series(v.ravel(), nan_to_null=True) for name, v in grid.shares.items()},
        }
    )
    return frame.select(UTIL_SCHEMA.keys())


def _minute_times(grid: MinuteGrid) -> pl.Series:
    return pl.datetime_range(
        grid.start, grid.start + (grid.n_minutes - 1) * MINUTE, "1m", eager=True, time_unit="us"
    ).alias("time")


EXTREMES: tuple[str, ...] = ("gpu_utilization_min", "gpu_utilization_max")  # of the minutes in a bucket


def utilization_resampled(ds: Dataset, flt: JobFilter = NO_FILTER, every: str = "1h") -> pl.DataFrame:
    """The per-minute utilisation columns averaged per cluster over buckets of `every` (10m, 1h, 1d...), with the
    lowest and highest minute's GPU utilisation of each bucket (so that a chart drawing the bucket keeps its peaks)."""
    if not _EVERY_RE.match(every):
        raise ValueError(f"every must look like 10m, 1h, 1d, 1w or 1mo, got {every!r}")
    value_cols = [c for c in UTIL_SCHEMA if c not in ("cluster", "time")] + list(EXTREMES)
    out_schema = {"cluster": pl.String(), "time": schema.TIMESTAMP, **dict.fromkeys(value_cols, pl.Float64())}
    grid = _minute_grid(ds, flt)
    if grid is None:
        return empty(out_schema)
    labels = _minute_times(grid).dt.truncate(every)
    stamps = labels.to_numpy()
    # Labels never decrease along the minutes: a new bucket starts wherever the label changes.
    group = np.concatenate([[0], np.cumsum(stamps[1:] != stamps[:-1])])
    arrays = {**grid.counts, "total_gpu_num": grid.total, **grid.shares}
    out = _grouped_means(grid.clusters, group, labels.unique(maintain_order=True), arrays, "time", scale=1.0)
    starts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]]))
    share = grid.shares["gpu_utilization"]
    with np.errstate(invalid="ignore"):  # fmin/fmax skip unknown (NaN) minutes; a bucket of only those stays NaN
        extremes = {
            EXTREMES[0]: np.fmin.reduceat(share, starts, axis=1).ravel(),
            EXTREMES[1]: np.fmax.reduceat(share, starts, axis=1).ravel(),
        }
    out = out.with_columns(pl.Series(k, v, nan_to_null=True) for k, v in extremes.items())
    return out.select(out_schema.keys()).cast(out_schema)  # type: ignore[arg-type]


def _grouped_means(
    clusters: list[str], group: np.ndarray, labels: pl.Series, arrays: dict[str, np.ndarray], key: str, scale: float
) -> pl.DataFrame:
    """Per cluster and group label: scale x the mean of each [cluster, minute] array over the group's minutes,
    NaN (unknown) minutes skipped; a label is listed when any minute falls in it."""
    n_labels, n_clusters = labels.len(), len(clusters)
    present = np.bincount(group, minlength=n_labels) > 0
    kept = labels.filter(pl.Series(present))
    # NOTE: one bincount per array over every cluster's minutes at once: flat bin cluster * n_labels + group.
    flat = (np.arange(n_clusters)[:, None] * n_labels + group[None, :]).ravel()
    size = n_clusters * n_labels
    minutes = np.bincount(flat, minlength=size)
    columns: dict[str, pl.Series | np.ndarray] = {
        "cluster": pl.Series(clusters, dtype=pl.String).gather(np.repeat(np.arange(n_clusters), kept.len())),
        key: pl.concat([kept] * n_clusters),
    }
    for name, values in arrays.items():
        flat_values = values.astype(np.float64).ravel()
        valid = ~np.isnan(flat_values)
        if valid.all():
            sums, counts = np.bincount(flat, flat_values, minlength=size), minutes
        else:
            sums = np.bincount(flat[valid], flat_values[valid], minlength=size)
            counts = np.bincount(flat[valid], minlength=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            columns[name] = np.where(counts > 0, scale * sums / counts, np.nan)[np.tile(present, n_clusters)]
    return pl.DataFrame(columns).with_columns(pl.col(list(arrays)).fill_nan(None))


def monthly_utilization(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster and calendar month of the period: mean per-minute utilisation, all/multi-/single-GPU jobs, in %."""
    names = {
        "gpu_utilization": "gpu_utilization_pct",
        "gpu_utilization_multi": "multi_gpu_utilization_pct",
        "gpu_utilization_single": "single_gpu_utilization_pct",
    }
    grid = _minute_grid(ds, flt)
    if grid is None:
        return empty({"cluster": pl.String(), "month": pl.Date(), **dict.fromkeys(names.values(), pl.Float64())})
    last = grid.start + (grid.n_minutes - 1) * MINUTE
    months = pl.date_range(grid.start.date().replace(day=1), last.date(), "1mo", eager=True)
    firsts = np.array([max(0, (datetime.combine(m, datetime.min.time()) - grid.start) // MINUTE) for m in months])
    group = np.searchsorted(firsts, np.arange(grid.n_minutes), side="right") - 1
    arrays = {out: grid.shares[share] for share, out in names.items()}
    return _grouped_means(grid.clusters, group, months, arrays, "month", scale=100.0)


def diurnal_utilization(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster and hour of day (0-23): mean per-minute GPU utilisation in % (Fig 2a)."""
    grid = _minute_grid(ds, flt)
    if grid is None:
        return empty({"cluster": pl.String(), "hour": pl.Int64(), "gpu_utilization_pct": pl.Float64()})
    offset = grid.start.hour * 60 + grid.start.minute
    group = ((np.arange(grid.n_minutes) + offset) // 60) % 24
    arrays = {"gpu_utilization_pct": grid.shares["gpu_utilization"]}
    return _grouped_means(grid.clusters, group, pl.Series(range(24), dtype=pl.Int64), arrays, "hour", scale=100.0)


def _epoch_minutes(t: datetime) -> int:
    return int(t.replace(tzinfo=UTC).timestamp()) // 60


def _event_times(cols: colstore.JobColumns) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """Per event kind: epoch microseconds of every job and where they are known (None = always)."""
    return {
        "submit": (cols.submit_us, None),
        "start": (cols.start_us, cols.has_start),
        "end": (cols.end_us, cols.has_end),
        "dequeue": (np.where(cols.has_start, cols.start_us, cols.end_us), cols.has_end),
    }


def throughput_10min(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster and 10-minute bin of the period: jobs, GPU jobs and GPUs submitted, started, ended and leaving the
    queue (started, or ended without starting) in the bin."""
    bounds, clusters = period_bounds(ds, flt), dataset_clusters(ds, flt)
    cols = colstore.columns(ds)
    rows = colstore.selected(cols.mask(flt, window=False))
    if bounds is None or not clusters or rows is None:
        return empty(THROUGHPUT_SCHEMA)
    first_bin = _epoch_minutes(bounds[0]) // 10
    n_bins = _epoch_minutes(bounds[1] - timedelta(microseconds=1)) // 10 + 1 - first_bin
    size = len(clusters) * n_bins
    cluster = cols.cats["cluster"]
    base = cluster.codes_of(clusters)[cluster.codes[rows]] * n_bins - first_bin
    g = cols.gpu_num[rows].astype(np.float64)
    is_gpu = (g > 0).astype(np.float64)
    lo_us, hi_us = colstore.to_us(bounds[0]), colstore.to_us(bounds[1])
    columns: dict[str, np.ndarray] = {}
    for kind, (times_us, known) in _event_times(cols).items():
        # Flat bin index code * n_bins + bin; events outside the window (or without a time) go to the spare `size`.
        t = times_us[rows]
        inside = (t >= lo_us) & (t < hi_us) & (known[rows] if known is not None else True)
        idx = np.where(inside, base + t // (10 * colstore.US_PER_MINUTE), size)
        # NOTE: one bincount per measure over all clusters at once instead of a group-by.
        columns[f"{kind}_job_all"] = np.bincount(idx, minlength=size + 1)[:size]
        columns[f"{kind}_gpu_job"] = np.bincount(idx, weights=is_gpu, minlength=size + 1)[:size]
        columns[f"{kind}_gpu_num"] = np.bincount(idx, weights=g, minlength=size + 1)[:size]
    first = datetime(1970, 1, 1) + timedelta(minutes=10 * first_bin)
    stamps = pl.datetime_range(first, first + timedelta(minutes=10 * (n_bins - 1)), "10m", eager=True, time_unit="us")
    frame = pl.DataFrame(
        {
            "cluster": pl.Series(clusters).gather(np.repeat(np.arange(len(clusters)), n_bins)),
            "time": pl.concat([stamps] * len(clusters)),
            **{name: np.rint(values).astype(np.int64) for name, values in columns.items()},
        }
    )
    return frame.select(THROUGHPUT_SCHEMA.keys())


def _vc_capacity(cols: colstore.JobColumns, flt: JobFilter, clusters: list[str]) -> pl.DataFrame:
    """Per cluster, VC and day: the VC's GPUs (VC-level rows only)."""
    caps = cols.vc_gpus.filter(pl.col("cluster").is_in(clusters) & (pl.col("vc") != schema.WHOLE_CLUSTER_VC))
    if flt.vcs:
        caps = caps.filter(pl.col("vc").is_in(list(flt.vcs)))
    return caps.select("cluster", "vc", "date", pl.col("gpus").cast(pl.Int64))


def _vc_codes(caps: pl.DataFrame, cols: colstore.JobColumns) -> tuple[pl.DataFrame, np.ndarray]:
    """The VCs with capacity rows numbered v = 0..V-1 in (cluster, vc) order, and the lookup array from the column
    store's pair codes to v (-1 for pairs without capacity)."""
    vcs = caps.select("cluster", "vc").unique().sort("cluster", "vc").with_row_index("v")
    cluster_index = {name: i for i, name in enumerate(cols.cats["cluster"].names)}
    vc_index = {name: i for i, name in enumerate(cols.cats["vc"].names)}
    lookup = np.full(len(cluster_index) * len(vc_index), -1, dtype=np.int64)
    for v, cluster, vc in vcs.rows():
        if cluster in cluster_index and vc in vc_index:
            lookup[cluster_index[cluster] * len(vc_index) + vc_index[vc]] = v
    return vcs, lookup


def _vc_capacity_by_day(caps: pl.DataFrame, vcs: pl.DataFrame, start: datetime, n_days: int) -> np.ndarray:
    """Matrix [VC, day since the grid's first day] of GPUs; NaN where the capacity table has no row."""
    out = np.full((vcs.height, n_days), np.nan)
    numbered = caps.join(vcs, on=["cluster", "vc"]).with_columns(day=(pl.col("date") - start.date()).dt.total_days())
    numbered = numbered.filter((pl.col("day") >= 0) & (pl.col("day") < n_days))
    out[numbered["v"].to_numpy(), numbered["day"].to_numpy()] = numbered["gpus"].to_numpy()
    return out


def _vc_events(
    cols: colstore.JobColumns, keep: np.ndarray, lookup: np.ndarray, start: datetime, n_minutes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Positions v * (n_minutes + 1) + minute index (clipped to [0, n_minutes]) and GPU deltas of the start and stop
    events of the kept jobs of VCs with capacity; sorted, as the column store keeps them in (VC, minute) order."""
    events = cols.gpu_events
    v = lookup[events.pair]
    chosen = v >= 0
    if not keep.all():
        chosen &= keep[events.job]
    # NOTE: every event chosen (the whole dataset, every VC with capacity): views instead of copies.
    rows = slice(None) if chosen.all() else chosen
    # A job wholly outside the grid has both events clipped to the same edge position: they cancel out.
    minute = np.clip(events.minute[rows] - _epoch_minutes(start), 0, n_minutes)
    return v[rows] * (n_minutes + 1) + minute, events.delta[rows]


def _change_points(pos: np.ndarray, delta: np.ndarray, marks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct positions of the sorted events and of the sorted marks, and the running total (sum of deltas up to
    and including each position)."""
    at = np.searchsorted(pos, marks)
    pos, delta = np.insert(pos, at, marks), np.insert(delta, at, 0)
    # NOTE: the running total at the last event of each position, from one cumulative sum (no reduceat).
    last = np.flatnonzero(np.append(pos[1:] != pos[:-1], True))
    return pos[last], np.cumsum(delta)[last]


MAX_PAIR_KEYS = 50_000_000  # above this many (VC, capacity, used GPUs) keys, group with Polars instead


def _capacity_combos(caps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (VC, GPUs > 0) pairs of the [VC, day] capacity matrix as combos: a matrix [VC, day] of combo
    numbers (-1 where unknown or 0 GPUs), and each combo's VC and GPUs."""
    gpus = np.nan_to_num(caps).astype(np.int64)
    known = gpus > 0
    n_gpus = int(gpus.max()) + 1
    keys = (np.arange(caps.shape[0])[:, None] * n_gpus + gpus)[known]
    combos, number = np.unique(keys, return_inverse=True)
    matrix = np.full(caps.shape, -1, dtype=np.int64)
    matrix[known] = number
    return matrix, combos // n_gpus, combos % n_gpus


def _count_pairs(
    combo: np.ndarray, used: np.ndarray, combo_v: np.ndarray, combo_gpus: np.ndarray, weight: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Total weight per distinct (combo, used), returned as v, used, capacity, weight."""
    n_used = int(combo_gpus.max()) + 1
    if combo_v.size * n_used > MAX_PAIR_KEYS:
        frame = pl.DataFrame({"c": combo, "used": used, "w": weight}).group_by("c", "used").agg(pl.col("w").sum())
        combo, used, total = frame["c"].to_numpy(), frame["used"].to_numpy(), frame["w"].to_numpy()
    else:
        # NOTE: few capacities per VC: one bincount over a compact (combo, used) key instead of a group-by.
        totals = np.bincount(combo * n_used + used, weights=weight)
        hit = np.flatnonzero(totals)
        combo, used, total = hit // n_used, hit % n_used, np.rint(totals[hit]).astype(np.int64)
    return combo_v[combo], used, combo_gpus[combo], total


def _vc_segments(
    events: tuple[np.ndarray, np.ndarray], n_vcs: int, n_minutes: int, caps: np.ndarray, offset: int
) -> dict[str, np.ndarray]:
    """Minutes per (VC, used GPUs, capacity): runs of constant running GPUs and capacity, merged by value."""
    block = n_minutes + 1
    # Marks per VC: its first minute (day 0), each midnight (day k; capacity may change) and its end sentinel.
    midnights = np.arange((1440 - offset) % 1440 or 1440, n_minutes, 1440)
    marks = (np.arange(n_vcs)[:, None] * block + np.concatenate([[0], midnights, [n_minutes]])[None, :]).ravel()
    pos, running = _change_points(*events, marks)
    weight = np.diff(pos, append=n_vcs * block)  # positive: the positions are distinct
    matrix, combo_v, combo_gpus = _capacity_combos(caps)
    # Each change point lies in the run opened by the last mark at or before it (every mark is a change point).
    mark_combo = np.concatenate([matrix, np.full((n_vcs, 1), -1)], axis=1).ravel()  # days = midnights + 1
    run = np.repeat(np.arange(marks.size), np.diff(np.searchsorted(pos, marks), append=pos.size))
    combo = mark_combo[run]
    ok = combo >= 0
    combo, running, weight = combo[ok], running[ok], weight[ok]
    v, used, cap, w = _count_pairs(combo, np.minimum(running, combo_gpus[combo]), combo_v, combo_gpus, weight)
    util = 100.0 * used / cap
    order = np.lexsort((used, util, v))
    return {"v": v[order], "util": util[order], "w": w[order]}


def _box_stats(seg: dict[str, np.ndarray]) -> pl.DataFrame:
    """Per VC: weighted mean, linear quartiles (numpy's default on the per-minute values) and 1.5 IQR whiskers;
    seg holds v, util and w sorted by (v, util)."""
    v, util, w = seg["v"], seg["util"], seg["w"]
    vcs, first = np.unique(v, return_index=True)
    n = np.add.reduceat(w, first)
    before = np.concatenate([[0], np.cumsum(n)[:-1]])
    cum = np.cumsum(w)
    out: dict[str, np.ndarray] = {"v": vcs, "mean_pct": np.add.reduceat(util * w, first) / n}
    for name, q in (("q1_pct", 0.25), ("median_pct", 0.5), ("q3_pct", 0.75)):
        h = q * (n - 1)
        lo = np.floor(h).astype(np.int64)
        v_lo = util[np.searchsorted(cum, before + lo, side="right")]
        v_hi = util[np.searchsorted(cum, before + np.minimum(lo + 1, n - 1), side="right")]
        out[name] = v_lo + (h - lo) * (v_hi - v_lo)
    iqr = out["q3_pct"] - out["q1_pct"]
    slot = np.searchsorted(vcs, v)
    inside_low = util >= (out["q1_pct"] - 1.5 * iqr)[slot]
    inside_high = util <= (out["q3_pct"] + 1.5 * iqr)[slot]
    # Sorted by util within each VC: the first value above the low fence and the last below the high fence.
    out["whisker_low_pct"] = _first_per_group(v, util, inside_low, vcs, last=False)
    out["whisker_high_pct"] = _first_per_group(v, util, inside_high, vcs, last=True)
    return pl.DataFrame(out)


def _first_per_group(v: np.ndarray, util: np.ndarray, mask: np.ndarray, groups: np.ndarray, last: bool) -> np.ndarray:
    """Per group, the first (or last) util where mask holds; util sorted within each group."""
    idx = np.flatnonzero(mask)
    if last:
        idx = idx[::-1]
    found, pos = np.unique(v[idx], return_index=True)
    out = np.full(groups.size, np.nan)
    out[np.searchsorted(groups, found)] = util[idx[pos]]
    return out


def _vc_job_stats(
    cols: colstore.JobColumns, keep: np.ndarray, job_v: np.ndarray, flt: JobFilter, excluded: tuple[date, ...]
) -> pl.DataFrame:
    """Per VC v: GPU jobs and their mean GPUs, duration and queue delay, of the kept jobs of VC v (job_v; -1 = none)
    in the filter's window (in its time mode) and not submitted on an excluded day."""
    inside = keep & (job_v >= 0) & cols.window_mask(flt)
    for day in excluded:
        first_us = colstore.to_us(datetime.combine(day, datetime.min.time()))
        inside &= (cols.submit_us < first_us) | (cols.submit_us >= first_us + _US_PER_DAY)
    rows = np.flatnonzero(inside)
    v, size = job_v[rows], int(job_v.max()) + 1

    def total(values: np.ndarray | None) -> np.ndarray:
        return np.bincount(v, None if values is None else values[rows], minlength=size)

    n_jobs, n_queue = total(None), total(cols.has_queue)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = {
            "avg_gpus_per_job": total(cols.gpu_num) / n_jobs,
            "avg_duration_s": total(cols.duration_s) / n_jobs,
            "avg_queue_s": total(cols.queue_s) / n_queue,
        }
    frame = pl.DataFrame({"v": np.arange(size, dtype=np.int64), "gpu_jobs": n_jobs.astype(np.int64), **means})
    return frame.with_columns(pl.col(list(means)).fill_nan(None))


def parse_days(text: str) -> tuple[date, ...]:
    """Comma-separated ISO days (YYYY-MM-DD) as dates; an empty text is no day."""
    try:
        return tuple(date.fromisoformat(part.strip()) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"exclude_days: {text!r} is not a comma-separated list of YYYY-MM-DD days") from None


def _top_vcs(frame: pl.DataFrame, top: int) -> pl.DataFrame:
    """Per cluster, the `top` VCs with the most mean GPUs (ties: more GPU jobs first, then by name); all if top is 0."""
    if top <= 0:
        return frame
    rank = pl.struct(-pl.col("mean_gpus"), -pl.col("gpu_jobs").fill_null(0), pl.col("vc")).rank("ordinal")
    return frame.filter(rank.over("cluster") <= top)


def _min_max_pct(column: str) -> pl.Expr:
    """The column min-max normalised over each cluster's rows, in % (null when every value is the same)."""
    col, low, high = pl.col(column), pl.col(column).min().over("cluster"), pl.col(column).max().over("cluster")
    return pl.when(high > low).then(100 * (col - low) / (high - low))


def vc_utilization(ds: Dataset, flt: JobFilter = NO_FILTER, exclude_days: str = "", top: int | str = 0) -> pl.DataFrame:
    """Per VC (per cluster, the `top` largest by mean GPUs when top > 0): its mean GPUs over the window's days,
    box-plot statistics of its per-minute utilisation (%), and its GPU jobs' count, mean GPUs, duration and queue delay
    with the last two min-max normalised over the VCs shown (Fig 4); the days of exclude_days (YYYY-MM-DD, comma-
    separated) are left out of all of them."""
    excluded, top_n = parse_days(exclude_days), int(top)
    grid = _grid(ds, flt)
    if grid is None:
        return empty(VC_UTIL_SCHEMA)
    cols, start, n_minutes = grid.cols, grid.start, grid.n_minutes
    caps = _vc_capacity(cols, flt, grid.clusters)
    if caps.is_empty():
        return empty(VC_UTIL_SCHEMA)
    vcs, lookup = _vc_codes(caps, cols)
    offset = start.hour * 60 + start.minute
    by_day = _vc_capacity_by_day(caps, vcs, start, (offset + n_minutes - 1) // 1440 + 1)
    skipped = [(d - start.date()).days for d in excluded]
    by_day[:, [d for d in skipped if 0 <= d < by_day.shape[1]]] = np.nan
    if not (np.nan_to_num(by_day) > 0).any():
        return empty(VC_UTIL_SCHEMA)
    events = _vc_events(cols, grid.keep, lookup, start, n_minutes)
    stats = _box_stats(_vc_segments(events, vcs.height, n_minutes, by_day, offset))
    job_stats = _vc_job_stats(cols, grid.keep & (cols.gpu_num > 0), lookup[cols.pair_code], flt, excluded)
    with np.errstate(invalid="ignore"):
        mean_gpus = pl.DataFrame({"v": np.arange(vcs.height, dtype=np.int64), "mean_gpus": np.nanmean(by_day, axis=1)})
    out = (
        stats.join(job_stats, on="v", how="left")
        .join(mean_gpus, on="v", how="left")
        .with_columns(pl.col("v").cast(pl.UInt32))
        .join(vcs, on="v")
    )
    out = _top_vcs(out, top_n).with_columns(
        _min_max_pct("avg_duration_s").alias("norm_avg_duration_pct"),
        _min_max_pct("avg_queue_s").alias("norm_avg_queue_pct"),
    )
    return out.select(VC_UTIL_SCHEMA.keys()).cast(VC_UTIL_SCHEMA).sort(["cluster", "vc"])  # type: ignore[arg-type]
