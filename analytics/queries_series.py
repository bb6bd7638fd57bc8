"""Time-series study queries (spec helios.md §2): per-minute utilisation by sweep line, 10-minute throughput, and
what is averaged from them (monthly, diurnal, per VC). The window bounds the series; other filters select the jobs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from analytics import schema
from analytics.filters import NO_FILTER, JobFilter
from analytics.queries_base import (
    CAPACITY_SCHEMA,
    WHOLE_CLUSTER_VC,
    daily_capacity,
    dataset_clusters,
    empty,
    period_bounds,
)
from analytics.store import Dataset

MINUTE = timedelta(minutes=1)
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
EVENT_KINDS: tuple[str, ...] = ("submit", "start", "end")
THROUGHPUT_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(),
    "time": schema.TIMESTAMP,
    **{f"{k}_{c}": pl.Int64() for k in EVENT_KINDS for c in ("job_all", "gpu_job", "gpu_num")},
}
VC_UTIL_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(),
    "vc": pl.String(),
    "gpus": pl.Int64(),
    **dict.fromkeys(
        ("mean_pct", "median_pct", "q1_pct", "q3_pct", "whisker_low_pct", "whisker_high_pct"), pl.Float64()
    ),
    **dict.fromkeys(("avg_gpus_per_job", "avg_duration_s", "avg_queue_s"), pl.Float64()),
}
_EVERY_RE = re.compile(r"^[1-9][0-9]{0,3}(m|h|d|w|mo)$")


def job_end_expr() -> pl.Expr:
    """A job's end: end_time, or start_time + duration when end_time is unknown."""
    return pl.coalesce(pl.col("end_time"), pl.col("start_time") + pl.duration(seconds=pl.col("duration")))


def _minute_spans(jobs: pl.LazyFrame, start: datetime, n_minutes: int, by: list[str | pl.Expr]) -> pl.LazyFrame:
    """Started GPU jobs of `jobs` running in the grid: first minute index (clipped to 0), stop index (last + 1,
    clipped to n) and gpus g."""
    origin = int(start.replace(tzinfo=UTC).timestamp()) // 60
    # NOTE: integer minute arithmetic (floor division of microseconds) is faster than dt.truncate and equal to it.
    first = pl.col("start_time").cast(pl.Int64) // 60_000_000 - origin
    last = job_end_expr().cast(pl.Int64) // 60_000_000 - origin
    return (
        jobs.filter((pl.col("gpu_num") > 0) & pl.col("start_time").is_not_null())
        .select(*by, pl.col("gpu_num").cast(pl.Int64).alias("g"), first.alias("first"), last.alias("last"))
        .filter((pl.col("last") >= pl.col("first")) & (pl.col("last") >= 0) & (pl.col("first") < n_minutes))
        .with_columns(pl.col("first").clip(0, None), (pl.col("last") + 1).clip(None, n_minutes).alias("stop"))
        .drop("last")
    )


def _job_minutes(ds: Dataset, flt: JobFilter, start: datetime, n_minutes: int, by: list[str | pl.Expr]) -> pl.DataFrame:
    """The selected GPU jobs of ds as minute spans of the grid (see `_minute_spans`)."""
    return _minute_spans(ds.jobs().filter(flt.expr(window=False)), start, n_minutes, by).collect()


def sweep(
    first: np.ndarray, stop: np.ndarray, weights: np.ndarray | None, n_minutes: int, groups: int = 1
) -> np.ndarray:
    """Diff array + cumulative sum: per group and minute, the total weight of intervals [first, stop) covering it;
    first and stop are already offset by group * (n_minutes + 1)."""
    size = groups * (n_minutes + 1)
    diff = np.bincount(first, weights, minlength=size) - np.bincount(stop, weights, minlength=size)
    running = np.cumsum(diff.reshape(groups, n_minutes + 1)[:, :n_minutes], axis=1)
    return running if weights is None else np.rint(running).astype(np.int64)


def _running_columns(jobs: pl.DataFrame, n_minutes: int, groups: int) -> dict[str, np.ndarray]:
    """Per group (row) and minute: running GPU jobs, GPUs, GPUs of multi- and of single-GPU jobs."""
    offset = jobs["group"].to_numpy().astype(np.int64) * (n_minutes + 1)
    first, stop, g = jobs["first"].to_numpy() + offset, jobs["stop"].to_numpy() + offset, jobs["g"].to_numpy()
    return {
        "running_gpujob_num": sweep(first, stop, None, n_minutes, groups),
        "running_gpu_num": sweep(first, stop, g.astype(np.float64), n_minutes, groups),
        "running_gpu_multi": sweep(first, stop, np.where(g > 1, g, 0).astype(np.float64), n_minutes, groups),
        "running_gpu_single": sweep(first, stop, np.where(g == 1, g, 0).astype(np.float64), n_minutes, groups),
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


def _grid(ds: Dataset, flt: JobFilter) -> tuple[list[str], datetime, datetime, int] | None:
    bounds, clusters = period_bounds(ds, flt), dataset_clusters(ds, flt)
    if bounds is None or not clusters or not _has_jobs(ds, flt):
        return None
    start, end = _grid_start(bounds[0]), bounds[1]
    return clusters, start, end, -(-(end - start) // MINUTE)


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


def _minute_grid(ds: Dataset, flt: JobFilter) -> MinuteGrid | None:
    """Sweep the selected GPU jobs over the period's minutes for every selected cluster (spec §2 rules)."""
    grid = _grid(ds, flt)
    if grid is None:
        return None
    clusters, start, _, n_minutes = grid
    jobs = _job_minutes(ds, flt, start, n_minutes, [cluster_code(clusters).alias("group")])
    counts = _running_columns(jobs, n_minutes, len(clusters))
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


def utilization_resampled(ds: Dataset, flt: JobFilter = NO_FILTER, every: str = "1h") -> pl.DataFrame:
    """The per-minute utilisation columns averaged per cluster over buckets of `every` (10m, 1h, 1d...), for charts."""
    if not _EVERY_RE.match(every):
        raise ValueError(f"every must look like 10m, 1h, 1d, 1w or 1mo, got {every!r}")
    value_cols = [c for c in UTIL_SCHEMA if c not in ("cluster", "time")]
    out_schema = {"cluster": pl.String(), "time": schema.TIMESTAMP, **dict.fromkeys(value_cols, pl.Float64())}
    grid = _minute_grid(ds, flt)
    if grid is None:
        return empty(out_schema)
    labels = _minute_times(grid).dt.truncate(every)
    stamps = labels.to_numpy()
    # Labels never decrease along the minutes: a new bucket starts wherever the label changes.
    group = np.concatenate([[0], np.cumsum(stamps[1:] != stamps[:-1])])
    arrays = {**grid.counts, "total_gpu_num": grid.total, **grid.shares}
    out = _grouped_means(grid.clusters, group, labels.unique(maintain_order=True).to_list(), arrays, "time", scale=1.0)
    return out.select(out_schema.keys()).cast(out_schema)  # type: ignore[arg-type]


def _grouped_means(
    clusters: list[str], group: np.ndarray, labels: list, arrays: dict[str, np.ndarray], key: str, scale: float
) -> pl.DataFrame:
    """Per cluster and group label: scale x the mean of each [cluster, minute] array over the group's minutes,
    NaN (unknown) minutes skipped; a label is listed when any minute falls in it."""
    present = np.bincount(group, minlength=len(labels)) > 0
    kept = [label for label, ok in zip(labels, present, strict=True) if ok]
    columns: dict[str, list] = {"cluster": [c for c in clusters for _ in kept], key: kept * len(clusters)}
    for name, values in arrays.items():
        means = []
        for row in values.astype(np.float64):
            valid = ~np.isnan(row)
            sums = np.bincount(group[valid], weights=row[valid], minlength=len(labels))
            counts = np.bincount(group[valid], minlength=len(labels))
            with np.errstate(invalid="ignore", divide="ignore"):
                means.append(np.where(counts > 0, scale * sums / counts, np.nan)[present])
        columns[name] = list(np.concatenate(means))
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
    months = pl.date_range(grid.start.date().replace(day=1), last.date(), "1mo", eager=True).to_list()
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
    return _grouped_means(grid.clusters, group, list(range(24)), arrays, "hour", scale=100.0)


def cluster_code(clusters: list[str]) -> pl.Expr:
    """Column `code`: the index of each job's cluster in `clusters` (which must hold every cluster present)."""
    # NOTE: an Enum cast is several times faster than joining a code table on the cluster strings.
    return pl.col("cluster").cast(pl.Enum(clusters)).to_physical().alias("code")


def _epoch_minutes(t: datetime) -> int:
    return int(t.replace(tzinfo=UTC).timestamp()) // 60


def throughput_10min(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster and 10-minute bin of the period: jobs, GPU jobs and GPUs submitted, started and ended in the bin."""
    bounds, clusters = period_bounds(ds, flt), dataset_clusters(ds, flt)
    if bounds is None or not clusters or not _has_jobs(ds, flt):
        return empty(THROUGHPUT_SCHEMA)
    first_bin = _epoch_minutes(bounds[0]) // 10
    n_bins = _epoch_minutes(bounds[1] - timedelta(microseconds=1)) // 10 + 1 - first_bin
    size = len(clusters) * n_bins
    code = cluster_code(clusters).cast(pl.Int64)
    times = {"submit": pl.col("submit_time"), "start": pl.col("start_time"), "end": job_end_expr()}
    # Flat bin index code * n_bins + bin; events outside the window (or without a time) go to the spare index `size`.
    bins = {
        kind: pl.when(t.is_between(bounds[0], bounds[1], closed="left"))
        .then(code * n_bins + t.cast(pl.Int64) // 600_000_000 - first_bin)
        .otherwise(size)
        .alias(kind)
        for kind, t in times.items()
    }
    gpu = pl.col("gpu_num").cast(pl.Float64)
    jobs = (
        ds.jobs()
        .filter(flt.expr(window=False))
        .select(gpu.alias("g"), (gpu > 0).cast(pl.Float64).alias("is_gpu"), *bins.values())
        .collect()
    )
    g, is_gpu = jobs["g"].to_numpy(), jobs["is_gpu"].to_numpy()
    columns: dict[str, np.ndarray] = {}
    for kind in EVENT_KINDS:
        # NOTE: one bincount per measure over all clusters at once instead of a group-by.
        idx = jobs[kind].to_numpy()
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


def _has_jobs(ds: Dataset, flt: JobFilter) -> bool:
    return bool(ds.jobs().filter(flt.expr(window=False)).select(pl.len()).collect().item())


def _vc_capacity(ds: Dataset, flt: JobFilter, clusters: list[str]) -> pl.DataFrame:
    """Per cluster, VC and day: the VC's GPUs (VC-level rows only)."""
    caps = ds.vc_gpus().filter(pl.col("cluster").is_in(clusters) & (pl.col("vc") != WHOLE_CLUSTER_VC))
    if flt.vcs:
        caps = caps.filter(pl.col("vc").is_in(list(flt.vcs)))
    return caps.select("cluster", "vc", "date", pl.col("gpus").cast(pl.Int64))


def _vc_codes(caps: pl.DataFrame) -> tuple[pl.DataFrame, pl.Expr, np.ndarray]:
    """The VCs with capacity rows numbered v = 0..V-1, an expression `pair` coding each job's (cluster, vc) (null
    when either name has no capacity row), and the lookup array pair -> v (-1 for pairs without capacity)."""
    vcs = caps.select("cluster", "vc").unique().sort("cluster", "vc").with_row_index("v")
    clusters, names = vcs["cluster"].unique().sort().to_list(), vcs["vc"].unique().sort().to_list()
    cluster_idx = pl.col("cluster").cast(pl.Enum(clusters)).to_physical().cast(pl.Int64)
    pair = cluster_idx * len(names) + pl.col("vc").cast(pl.Enum(names)).to_physical().cast(pl.Int64)
    lookup = np.full(len(clusters) * len(names), -1, dtype=np.int64)
    for v, cluster, vc in vcs.rows():
        lookup[clusters.index(cluster) * len(names) + names.index(vc)] = v
    known = pl.col("cluster").is_in(clusters) & pl.col("vc").is_in(names)
    return vcs, pl.when(known).then(pair).alias("pair"), lookup


def _vc_capacity_by_day(caps: pl.DataFrame, vcs: pl.DataFrame, start: datetime, n_days: int) -> np.ndarray:
    """Matrix [VC, day since the grid's first day] of GPUs; NaN where the capacity table has no row."""
    out = np.full((vcs.height, n_days), np.nan)
    numbered = caps.join(vcs, on=["cluster", "vc"]).with_columns(day=(pl.col("date") - start.date()).dt.total_days())
    numbered = numbered.filter((pl.col("day") >= 0) & (pl.col("day") < n_days))
    out[numbered["v"].to_numpy(), numbered["day"].to_numpy()] = numbered["gpus"].to_numpy()
    return out


def _change_points(
    starts: np.ndarray, stops: np.ndarray, g: np.ndarray, marks: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct positions of events and marks, and the running total (sum of g since start) from each."""
    pos = np.concatenate([starts, stops, marks])
    delta = np.concatenate([g, -g, np.zeros(marks.size, dtype=np.int64)])
    # NOTE: sorting the 2 events per job is cheaper in memory than a dense diff array over every VC-minute.
    order = np.argsort(pos)
    pos, delta = pos[order], delta[order]
    first = np.flatnonzero(np.diff(pos, prepend=-1))
    return pos[first], np.cumsum(np.add.reduceat(delta, first))


MAX_PAIR_KEYS = 50_000_000  # above this many (VC, used GPUs, capacity) keys, group with Polars instead


def _count_pairs(
    v: np.ndarray, used: np.ndarray, code: np.ndarray, cap_values: np.ndarray, weight: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Total weight per distinct (v, used, capacity cap_values[code]), returned as v, used, capacity, weight."""
    n_used, n_caps = int(cap_values.max()) + 1, cap_values.size
    if (int(v.max()) + 1) * n_used * n_caps > MAX_PAIR_KEYS:
        frame = (
            pl.DataFrame({"v": v, "used": used, "code": code, "w": weight})
            .group_by("v", "used", "code")
            .agg(pl.col("w").sum())
        )
        return (
            frame["v"].to_numpy(),
            frame["used"].to_numpy(),
            cap_values[frame["code"].to_numpy()],
            frame["w"].to_numpy(),
        )
    # NOTE: few distinct (used, capacity) pairs per VC: one bincount over a compact key instead of a group-by.
    totals = np.bincount((v * n_used + used) * n_caps + code, weights=weight)
    hit = np.flatnonzero(totals)
    return (
        hit // n_caps // n_used,
        hit // n_caps % n_used,
        cap_values[hit % n_caps],
        np.rint(totals[hit]).astype(np.int64),
    )


def _vc_segments(
    jobs: dict[str, np.ndarray], n_vcs: int, n_minutes: int, caps: np.ndarray, offset: int
) -> dict[str, np.ndarray]:
    """Minutes per (VC, used GPUs, capacity): runs of constant running GPUs and capacity, merged by value."""
    block = n_minutes + 1
    base = jobs["v"] * block
    # Boundaries: each VC's first minute, each midnight (capacity may change) and its end sentinel.
    midnights = np.arange((1440 - offset) % 1440 or 1440, n_minutes, 1440)
    marks = (np.arange(n_vcs)[:, None] * block + np.concatenate([[0], midnights, [n_minutes]])[None, :]).ravel()
    pos, running = _change_points(base + jobs["first"], base + jobs["stop"], jobs["g"], marks)
    weight = np.diff(pos, append=n_vcs * block)
    keep = (weight > 0) & (pos % block < n_minutes)
    pos, running, weight = pos[keep], running[keep], weight[keep]
    v, day = pos // block, (pos % block + offset) // 1440
    # Capacities coded on the small [VC, day] matrix: code -1 where unknown or 0 GPUs.
    cap_values = np.unique(caps[np.nan_to_num(caps) > 0]).astype(np.int64)
    codes = np.where(np.nan_to_num(caps) > 0, np.searchsorted(cap_values, np.nan_to_num(caps)), -1)
    code = codes[v, day]
    ok = code >= 0
    cap = cap_values[code[ok]]
    v, used, cap, w = _count_pairs(v[ok], np.minimum(running[ok], cap), code[ok], cap_values, weight[ok])
    util = 100.0 * used / cap
    order = np.lexsort((util, v))
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


def _vc_job_stats(gpu_jobs: pl.DataFrame, flt: JobFilter) -> pl.DataFrame:
    """Per VC pair code: mean GPUs, duration and queue delay of the GPU jobs submitted in the filter's window."""
    window = [pl.col("submit_time") >= flt.start] if flt.start else []
    window += [pl.col("submit_time") < flt.end] if flt.end else []
    return (
        gpu_jobs.filter(*window)
        .group_by("pair")
        .agg(
            avg_gpus_per_job=pl.col("gpu_num").cast(pl.Float64).mean(),
            avg_duration_s=pl.col("duration").cast(pl.Float64).mean(),
            avg_queue_s=pl.col("queue").cast(pl.Float64).mean(),
        )
    )


def vc_utilization(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per VC: GPUs on the period's first day and box-plot statistics of its per-minute utilisation (%), plus the
    mean GPUs, duration and queue delay of its GPU jobs (Fig 4)."""
    grid = _grid(ds, flt)
    if grid is None:
        return empty(VC_UTIL_SCHEMA)
    clusters, start, _, n_minutes = grid
    caps = _vc_capacity(ds, flt, clusters)
    if caps.is_empty():
        return empty(VC_UTIL_SCHEMA)
    vcs, pair, lookup = _vc_codes(caps)
    columns = ("gpu_num", "submit_time", "start_time", "end_time", "duration", "queue")
    gpu_jobs = (
        ds.jobs().filter(flt.expr(window=False) & (pl.col("gpu_num") > 0)).select(pair, *columns).drop_nulls("pair")
    ).collect()  # one scan for both the minute spans and the job means
    frame = _minute_spans(gpu_jobs.lazy(), start, n_minutes, ["pair"]).collect()
    job_stats = _vc_job_stats(gpu_jobs, flt)
    jobs = {c: frame[c].to_numpy() for c in ("first", "stop", "g")}
    jobs["v"] = lookup[frame["pair"].to_numpy()]
    jobs = {c: values[jobs["v"] >= 0] for c, values in jobs.items()}
    offset = start.hour * 60 + start.minute
    by_day = _vc_capacity_by_day(caps, vcs, start, (offset + n_minutes - 1) // 1440 + 1)
    if not (np.nan_to_num(by_day) > 0).any():
        return empty(VC_UTIL_SCHEMA)
    stats = _box_stats(_vc_segments(jobs, vcs.height, n_minutes, by_day, offset))
    job_stats = job_stats.with_columns(v=pl.Series(lookup).gather(job_stats["pair"])).filter(pl.col("v") >= 0)
    keys = ["cluster", "vc"]
    first_day = caps.filter(pl.col("date") == start.date()).select(*keys, "gpus")
    out = (
        stats.join(job_stats.drop("pair"), on="v", how="left")
        .with_columns(pl.col("v").cast(pl.UInt32))
        .join(vcs, on="v")
        .join(first_day, on=keys, how="left")
    )
    return out.select(VC_UTIL_SCHEMA.keys()).cast(VC_UTIL_SCHEMA).sort(keys)  # type: ignore[arg-type]
