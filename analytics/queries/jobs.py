"""Per-job study queries (spec helios.md §3): summary table, monthly counts, CDFs and final-state shares."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

from analytics import capabilities, db, schema
from analytics.filters import NO_FILTER, JobFilter
from analytics.queries import colstore
from analytics.queries.base import dataset_clusters, empty, job_predicate, mean_capacity, period_bounds
from analytics.reference import STATE_GPU_BUCKETS
from analytics.store import Dataset

SUMMARY_COLUMNS: tuple[str, ...] = (
    "id", "gpu_num", "job_num", "cpu_job_num", "gpu_job_num", "avg_run_time_cpu", "avg_run_time_gpu",
    "avg_que_time_cpu", "avg_que_time_gpu", "avg_gpu_num", "med_run_time_cpu", "med_run_time_gpu",
    "med_que_time_cpu", "med_que_time_gpu", "med_gpu_num", "complete_rate", "cancel_rate", "fail_rate",
    "complete_rate_cpu", "cancel_rate_cpu", "fail_rate_cpu", "complete_rate_gpu", "cancel_rate_gpu",
    "fail_rate_gpu", "complete_gpu_time", "cancel_gpu_time", "fail_gpu_time",
)  # fmt: skip
SUMMARY_INT_COLUMNS: tuple[str, ...] = ("gpu_num", "job_num", "cpu_job_num", "gpu_job_num")
# The summary columns made of a feature a dataset may lack (analytics.capabilities.FEATURES): empty where it does.
SUMMARY_NEEDS: dict[str, tuple[str, ...]] = {
    "cpu_jobs": tuple(c for c in SUMMARY_COLUMNS if c.endswith("_cpu") or c == "cpu_job_num"),
    "queueing": tuple(c for c in SUMMARY_COLUMNS if "_que_" in c),
    "final_states": tuple(c for c in SUMMARY_COLUMNS if "_rate" in c or c.endswith("_gpu_time")),
}
# Per query answered on any dataset, the columns of each feature it may lack: null there, never a 0.
LEFT_EMPTY: dict[str, dict[str, tuple[str, ...]]] = {
    "cluster_summary": SUMMARY_NEEDS,
    "monthly_jobs": {"cpu_jobs": ("cpu_job_num",)},
}
SUMMARY_ROUNDED_COLUMNS: tuple[str, ...] = tuple(
    c for c in SUMMARY_COLUMNS if c.startswith("avg_") or c.endswith("_rate") or "_rate_" in c
)
SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    c: pl.String() if c == "id" else pl.Int64() if c in SUMMARY_INT_COLUMNS else pl.Float64() for c in SUMMARY_COLUMNS
}
TOTAL_ID = "total"
POW2_X_S: tuple[int, ...] = tuple(2**k for k in range(22))
GPU_NUM_X: tuple[str, ...] = ("1", "2", "4", "8", "12", "16", "24", "32", "40", "48", "56", "64", ">64")
STATE_BUCKETS: tuple[str, ...] = (*(str(g) for g in STATE_GPU_BUCKETS[:-1]), f">={STATE_GPU_BUCKETS[-1]}")  # Fig 7b
# Jobs that are not unfinished (the states are schema constants, not user values).
ENDED_SQL = "(state IS NULL OR state NOT IN ({}))".format(", ".join(f"'{s}'" for s in schema.UNFINISHED_STATES))
KINDS: dict[str, str] = {"gpu": "gpu_num > 0", "cpu": "gpu_num = 0"}
CDF_SCHEMA = {"cluster": pl.String(), "x_s": pl.Int64(), "pct": pl.Float64()}
STATE_PCT_SCHEMA = {"completed_pct": pl.Float64(), "cancelled_pct": pl.Float64(), "failed_pct": pl.Float64()}

# State groups: the final ones, then unfinished jobs. A job whose state is unknown (null, e.g. Philly) is in no
# group; unfinished and unknown jobs are left out of the final-state shares, unfinished ones also out of durations.
_SUMMARY_GROUPS = (*schema.STATE_GROUPS, schema.UNFINISHED)
_N_GROUPS = len(_SUMMARY_GROUPS) + 1  # the last slot holds unknown states
_UNFINISHED_GROUP = _SUMMARY_GROUPS.index(schema.UNFINISHED)

POOLED_HELIOS, POOLED_OTHERS = "Helios", "all clusters"  # the pooled curve of a CDF (Fig 1a's "Helios")


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return KINDS[kind]


def _state_groups(states: colstore.Category) -> np.ndarray:
    """Lookup state code -> group index in _SUMMARY_GROUPS (the last slot, also the null code's, = unknown)."""
    unknown = len(_SUMMARY_GROUPS)
    groups = [schema.state_group(name) for name in states.names]
    table = [_SUMMARY_GROUPS.index(g) if g is not None else unknown for g in groups]
    return np.array([*table, unknown], dtype=np.int64)


def _ended(states: colstore.Category, rows: colstore.Rows) -> np.ndarray:
    """Per selected row: whether the job is not unfinished (its duration and end count)."""
    return _state_groups(states)[states.codes[rows]] != _UNFINISHED_GROUP


def _summary_parts(cols: colstore.JobColumns, rows: colstore.Rows) -> pl.DataFrame:
    """Sums per cluster, job kind and final-state group, from which every non-median summary column follows."""
    cluster, states = cols.cats["cluster"], cols.cats["state"]
    gpu, duration = cols.gpu_num[rows], cols.duration_s[rows]
    # Flat key (cluster code, is GPU job, state group): one bincount per sum instead of a group-by.
    key = (cluster.codes[rows] * 2 + (gpu > 0)) * _N_GROUPS + _state_groups(states)[states.codes[rows]]
    size = len(cluster.names) * 2 * _N_GROUPS

    def total(weights: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(key, weights, minlength=size)

    n = total()
    hit = np.flatnonzero(n)
    parts = {
        "id": pl.Series(cluster.names, dtype=pl.String).gather(hit // (2 * _N_GROUPS)),
        "is_gpu": hit // _N_GROUPS % 2 == 1,
        "grp": pl.Series([*_SUMMARY_GROUPS, None], dtype=pl.String).gather(hit % _N_GROUPS),
        "n": n[hit],
        "sum_dur": total(duration.astype(np.float64))[hit],
        "n_queue": total(cols.has_queue[rows].astype(np.float64))[hit].astype(np.int64),
        "sum_queue": total(cols.queue_s[rows].astype(np.float64))[hit],
        "sum_gpu": total(gpu.astype(np.float64))[hit],
        "gpu_s": total((gpu * duration).astype(np.float64))[hit],
    }
    return pl.DataFrame(parts)


def _ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    return pl.when(den > 0).then(num / den)


def _summary_columns() -> list[pl.Expr]:
    """Aggregations over the parts of one group (a cluster or all of them) giving the non-median columns."""
    gpu, cpu = pl.col("is_gpu"), ~pl.col("is_gpu")
    n = pl.col("n")
    ended = pl.col("grp").ne_missing(schema.UNFINISHED)  # unfinished jobs have no final duration
    out = [n.sum().alias("job_num"), n.filter(cpu).sum().alias("cpu_job_num"), n.filter(gpu).sum().alias("gpu_job_num")]
    for kind, mask in (("cpu", cpu), ("gpu", gpu)):
        run_time = _ratio(pl.col("sum_dur").filter(mask & ended).sum(), n.filter(mask & ended).sum())
        out.append(run_time.alias(f"avg_run_time_{kind}"))
        queue = _ratio(pl.col("sum_queue").filter(mask).sum(), pl.col("n_queue").filter(mask).sum())
        out.append(queue.alias(f"avg_que_time_{kind}"))
    out.append(_ratio(pl.col("sum_gpu").filter(gpu).sum(), n.filter(gpu).sum()).alias("avg_gpu_num"))
    known = pl.col("grp").is_in(schema.STATE_GROUPS)  # a final state: unfinished and unknown jobs are left out
    for short, grp in zip(("complete", "cancel", "fail"), schema.STATE_GROUPS, strict=True):
        in_grp = pl.col("grp") == grp
        out.append(_ratio(n.filter(in_grp).sum(), n.filter(known).sum()).alias(f"{short}_rate"))
        for kind, mask in (("cpu", cpu), ("gpu", gpu)):
            rate = _ratio(n.filter(in_grp & mask).sum(), n.filter(known & mask).sum())
            out.append(rate.alias(f"{short}_rate_{kind}"))
        gpu_time = pl.when(n.filter(known).sum() > 0).then(pl.col("gpu_s").filter(in_grp).sum())
        out.append(gpu_time.alias(f"{short}_gpu_time"))  # like the rates: none without a job in a final state
    return out


MAX_HISTOGRAM_BINS = 20_000_000  # above this many (group, distinct value) bins, medians fall back to Polars
# (column, is GPU job) -> summary median column
_MEDIANS: dict[tuple[str, int], str] = {
    ("duration", 0): "med_run_time_cpu",
    ("duration", 1): "med_run_time_gpu",
    ("queue", 0): "med_que_time_cpu",
    ("queue", 1): "med_que_time_gpu",
    ("gpu_num", 1): "med_gpu_num",
}


def _value_counts(ranked: colstore.Ranked, group: np.ndarray, rows: colstore.Rows, n_groups: int) -> np.ndarray:
    """Matrix [group, rank]: how many selected rows of each group hold each distinct value (nulls left out)."""
    n_values = ranked.values.size
    ranks = ranked.ranks[rows]
    key = group * n_values + ranks
    if ranked.has_null:
        key = key[ranks >= 0]
    # NOTE: counting integer values is exact and much faster than sorting millions of rows.
    return np.bincount(key, minlength=n_groups * n_values).reshape(n_groups, n_values)


def _histogram_medians(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per row of counts [group, rank]: the exact median of the counted values (NaN when none), like Polars'."""
    out = np.full(counts.shape[0], np.nan)
    if not values.size:
        return out
    cum = np.cumsum(counts, axis=1)
    for g in np.flatnonzero(cum[:, -1]):
        n = cum[g, -1]
        lo, hi = np.searchsorted(cum[g], [(n - 1) // 2, n // 2], side="right")
        out[g] = (float(values[lo]) + float(values[hi])) / 2
    return out


def _polars_medians(ranked: colstore.Ranked, group: np.ndarray, rows: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, the median of the ranked column by a Polars group-by (for very many distinct values)."""
    ranks = ranked.ranks[rows]
    known = ranks >= 0
    frame = pl.DataFrame({"group": group[known], "value": ranked.values[ranks[known]]})
    medians = frame.group_by("group").agg(pl.col("value").median())
    out = np.full(n_groups, np.nan)
    out[medians["group"].to_numpy()] = medians["value"].to_numpy()
    return out


def _kind_medians(
    ranked: colstore.Ranked, cluster_kind: np.ndarray, rows: colstore.Rows, n_clusters: int
) -> np.ndarray:
    """Matrix [each cluster, then all clusters; CPU or GPU job] of the ranked column's medians over `rows`, whose
    group is cluster_kind = 2 * cluster code + is GPU job."""
    n_groups = 2 * n_clusters
    if n_groups * ranked.values.size <= MAX_HISTOGRAM_BINS:
        counts = _value_counts(ranked, cluster_kind, rows, n_groups)
        overall = counts.reshape(n_clusters, 2, -1).sum(axis=0)
        return _histogram_medians(np.concatenate([counts, overall]), ranked.values).reshape(-1, 2)
    indices = np.arange(ranked.ranks.size)[rows]
    group = np.concatenate([cluster_kind, n_groups + cluster_kind % 2])
    return _polars_medians(ranked, group, np.concatenate([indices, indices]), n_groups + 2).reshape(-1, 2)


def _summary_medians(cols: colstore.JobColumns, rows: colstore.Rows) -> pl.DataFrame:
    """Per cluster and over all (id null), the five median columns (durations of ended jobs only)."""
    cluster = cols.cats["cluster"]
    out: dict[str, list | np.ndarray] = {"id": [*cluster.names, None]}
    for column in ("duration", "queue", "gpu_num"):
        use = rows
        if column == "duration":
            use = _ended_rows(cols, rows)
        cluster_kind = cluster.codes[use] * 2 + (cols.gpu_num[use] > 0)
        by_kind = _kind_medians(cols.ranked[column], cluster_kind, use, len(cluster.names))
        out.update({name: by_kind[:, gpu] for (col, gpu), name in _MEDIANS.items() if col == column})
    frame = pl.DataFrame(out, schema_overrides={"id": pl.String})
    return frame.with_columns(pl.exclude("id").fill_nan(None))


def _ended_rows(cols: colstore.JobColumns, rows: colstore.Rows) -> colstore.Rows:
    """The selected rows whose job is not unfinished (all of them when the dataset has no unfinished job)."""
    ended = _ended(cols.cats["state"], rows)
    if ended.all():
        return rows
    return np.arange(cols.gpu_num.size)[rows][ended]


def _cluster_order(ds: Dataset, clusters: list[str]) -> dict[str, int]:
    known = [c for c in ds.clusters if c in clusters]
    return {c: i for i, c in enumerate(known + sorted(set(clusters) - set(known)))}


def cluster_summary(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """One row per cluster plus id="total", with exactly the columns and rounding of helios_cluster_summary.csv."""
    cols = colstore.columns(ds)
    rows = colstore.selected(cols.mask(flt))
    if rows is None:
        return empty(SUMMARY_SCHEMA)
    parts = _summary_parts(cols, rows)
    clusters = parts["id"].unique().to_list()
    both = pl.concat([parts, parts.with_columns(id=pl.lit(None, dtype=pl.String))])
    raw = both.group_by("id").agg(_summary_columns())
    raw = raw.join(_summary_medians(cols, rows), on="id", how="left", nulls_equal=True)
    caps = mean_capacity(ds, flt, clusters)
    order = _cluster_order(ds, clusters)
    per_cluster = raw.filter(pl.col("id").is_not_null()).join(caps, left_on="id", right_on="cluster", how="left")
    per_cluster = per_cluster.sort(pl.col("id").replace_strict(order, return_dtype=pl.Int64))
    # The total is the sum of the clusters' mean capacities, truncated once (Helios: 6,220, not 6,218).
    total_gpus = int(caps["mean_gpu_num"].sum()) if caps["mean_gpu_num"].is_not_null().any() else None
    total = raw.filter(pl.col("id").is_null()).with_columns(
        id=pl.lit(TOTAL_ID), gpu_num=pl.lit(total_gpus, dtype=pl.Int64)
    )
    out = pl.concat([per_cluster.select(SUMMARY_COLUMNS), total.select(SUMMARY_COLUMNS)], how="vertical_relaxed")
    out = out.cast(SUMMARY_SCHEMA).with_columns(pl.col(SUMMARY_ROUNDED_COLUMNS).round(3))  # type: ignore[arg-type]
    return _without_lacking(out, ds, "cluster_summary")


def lacking_columns(ds: Dataset, name: str) -> dict[str, tuple[str, ...]]:
    """Per reason a feature is not in ds's trace ("the Philly job list has GPU jobs only"), the columns query name
    leaves empty for it (LEFT_EMPTY; none when ds has every feature they need)."""
    features = capabilities.capabilities(ds.meta)["features"]
    return {features[f]: cols for f, cols in LEFT_EMPTY.get(name, {}).items() if features.get(f)}


def _without_lacking(frame: pl.DataFrame, ds: Dataset, name: str) -> pl.DataFrame:
    """The answer of query name with the columns of every feature ds lacks set to null (never a 0 for what the
    trace lacks)."""
    lacking = {c for cols in lacking_columns(ds, name).values() for c in cols}
    return frame.with_columns(pl.lit(None, frame.schema[c]).alias(c) for c in frame.columns if c in lacking)


def monthly_jobs(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster and submit month (first day of the month): all, CPU, GPU, single- and multi-GPU job counts."""
    out_schema = {
        "cluster": pl.String(),
        "month": pl.Date(),
        **dict.fromkeys(("job_num", "cpu_job_num", "gpu_job_num", "single_gpu_jobs", "multi_gpu_jobs"), pl.Int64()),
    }
    cols = colstore.columns(ds)
    rows = colstore.selected(cols.mask(flt))
    if rows is None:
        return empty(out_schema)
    cluster, gpu, month = cols.cats["cluster"], cols.gpu_num[rows], cols.submit_month[rows]
    first, n_months = int(month.min()), int(month.max() - month.min()) + 1
    # Class of each job: 0 CPU, 1 single-GPU, 2 multi-GPU, 3 anything else (a negative gpu_num).
    kind = np.select([gpu == 0, gpu == 1, gpu > 1], [0, 1, 2], 3)
    key = (cluster.codes[rows] * n_months + (month - first)) * 4 + kind
    counts = np.bincount(key, minlength=len(cluster.names) * n_months * 4).reshape(-1, 4)
    hit = np.flatnonzero(counts.sum(axis=1))
    counts = counts[hit]
    months = (first + hit % n_months).astype("datetime64[M]").astype("datetime64[D]")
    frame = pl.DataFrame(
        {
            "cluster": pl.Series(cluster.names, dtype=pl.String).gather(hit // n_months),
            "month": months,
            "job_num": counts.sum(axis=1),
            "cpu_job_num": counts[:, 0],
            "gpu_job_num": counts[:, 1] + counts[:, 2],
            "single_gpu_jobs": counts[:, 1],
            "multi_gpu_jobs": counts[:, 2],
        }
    )
    return _without_lacking(frame.cast(out_schema), ds, "monthly_jobs")  # type: ignore[arg-type]


US_PER_HOUR = 3_600_000_000
US_PER_DAY = 24 * US_PER_HOUR


def hour_weekday_submissions(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster, weekday (0 = Monday) and hour of day: the number of submitted jobs (zeros included)."""
    out_schema = {"cluster": pl.String(), "weekday": pl.Int64(), "hour": pl.Int64(), "jobs": pl.Int64()}
    cols = colstore.columns(ds)
    rows = colstore.selected(cols.mask(flt))
    if rows is None:
        return empty(out_schema)
    cluster, submit_us = cols.cats["cluster"], cols.submit_us[rows]
    # 1970-01-01 was a Thursday (weekday 3); floor division keeps earlier times on their calendar hour and day.
    weekday, hour = (submit_us // US_PER_DAY + 3) % 7, submit_us // US_PER_HOUR % 24
    counts = np.bincount((cluster.codes[rows] * 7 + weekday) * 24 + hour, minlength=len(cluster.names) * 168)
    present = np.flatnonzero(counts.reshape(-1, 168).sum(axis=1))
    cells = (present[:, None] * 168 + np.arange(168)[None, :]).ravel()
    frame = pl.DataFrame(
        {
            "cluster": pl.Series(cluster.names, dtype=pl.String).gather(cells // 168),
            "weekday": cells // 24 % 7,
            "hour": cells % 24,
            "jobs": counts[cells],
        }
    )
    return frame.cast(out_schema)  # type: ignore[arg-type]


def clock_hours(start: datetime, end: datetime) -> pl.DataFrame:
    """For each hour of day, how many clock hours of [start, end) start at that hour (hourly bins like a resample)."""
    hours = pl.datetime_range(start.replace(minute=0, second=0, microsecond=0), end, "1h", closed="left", eager=True)
    return (
        pl.DataFrame({"t": hours})
        .group_by(pl.col("t").dt.hour().cast(pl.Int64).alias("hour"))
        .len("n_hours")
        .sort("hour")
    )


def diurnal_submissions(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster and hour of day: mean GPU-job submissions per clock hour over the period (Fig 2b)."""
    bounds = period_bounds(ds, flt)
    clusters = dataset_clusters(ds, flt)
    schema_out = {"cluster": pl.String(), "hour": pl.Int64(), "gpu_jobs_per_hour": pl.Float64()}
    if bounds is None or not clusters:
        return empty(schema_out)
    cols = colstore.columns(ds)
    submit_us = cols.submit_us
    keep = (
        cols.mask(flt, window=False)
        & (submit_us >= colstore.to_us(bounds[0]))
        & (submit_us < colstore.to_us(bounds[1]))
    )
    rows = colstore.selected(keep)
    if rows is None:
        return empty(schema_out)
    cluster = cols.cats["cluster"]
    gpu = cols.gpu_num[rows] > 0
    key = cluster.codes[rows][gpu] * 24 + submit_us[rows][gpu] // US_PER_HOUR % 24
    cells = np.arange(len(cluster.names) * 24)
    counts = pl.DataFrame(
        {
            "cluster": pl.Series(cluster.names, dtype=pl.String).gather(cells // 24),
            "hour": cells % 24,
            "n_jobs": np.bincount(key, minlength=cells.size),
        }
    )
    grid = pl.DataFrame({"cluster": clusters}).join(clock_hours(*bounds), how="cross")
    out = grid.join(counts, on=["cluster", "hour"], how="left").with_columns(pl.col("n_jobs").fill_null(0))
    out = out.with_columns(gpu_jobs_per_hour=pl.col("n_jobs") / pl.col("n_hours"))
    return out.select(schema_out.keys()).sort("cluster", "hour")


def _log2_cdf(ds: Dataset, flt: JobFilter, column: str, kind: str, *extra: str, pooled: str = "") -> pl.DataFrame:
    col = schema.check_identifier(column)
    where, params = job_predicate(flt, _check_kind(kind), f"{col} IS NOT NULL", *extra)
    sql = f"""
        SELECT cluster, least(CASE WHEN {col} <= 1 THEN 0 ELSE ceil(log2({col}))::BIGINT END, 22) AS k, count(*) AS n
        FROM jobs WHERE {where} GROUP BY ALL
    """
    counts = db.run(sql, params, ds=ds)
    if counts.is_empty():
        return empty(CDF_SCHEMA)
    if pooled:
        every = counts.group_by("k").agg(pl.col("n").sum()).with_columns(pl.lit(pooled).alias("cluster"))
        counts = pl.concat([counts, every.select(counts.columns)], how="vertical_relaxed")
    grid = pl.DataFrame({"k": list(range(22)), "x_s": list(POW2_X_S)}, schema={"k": pl.Int64(), "x_s": pl.Int64()})
    full = counts.select(pl.col("cluster").unique()).join(grid, how="cross")
    full = (
        full.join(counts, on=["cluster", "k"], how="left").with_columns(pl.col("n").fill_null(0)).sort("cluster", "k")
    )
    totals = counts.group_by("cluster").agg(pl.col("n").sum().alias("total"))
    full = full.join(totals, on="cluster").with_columns(
        pct=100 * pl.col("n").cum_sum().over("cluster") / pl.col("total")
    )
    return full.select(CDF_SCHEMA.keys())


def duration_cdf(ds: Dataset, flt: JobFilter = NO_FILTER, kind: str = "gpu", pooled: str = "") -> pl.DataFrame:
    """Per cluster, % of GPU (or CPU) jobs that ended with duration <= x_s for x_s = 2^0..2^21 s (Fig 5), and with
    pooled (a label, e.g. Helios) the selected clusters' jobs together under that name (Fig 1a)."""
    return _log2_cdf(ds, flt, "duration", kind, ENDED_SQL, pooled=pooled)


def queue_cdf(ds: Dataset, flt: JobFilter = NO_FILTER, kind: str = "gpu") -> pl.DataFrame:
    """Per cluster, % of GPU (or CPU) jobs with a known queue delay <= x_s for x_s = 2^0..2^21 s."""
    return _log2_cdf(ds, flt, "queue", kind)


def gpu_num_cdf(ds: Dataset, flt: JobFilter = NO_FILTER, weight: str = "jobs") -> pl.DataFrame:
    """Per cluster, % of GPU jobs (weight="jobs") or GPU time (weight="gpu_time") with gpu_num <= x_gpus (Fig 6)."""
    weights = {"jobs": "count(*)::DOUBLE", "gpu_time": "sum(gpu_num::BIGINT * duration)::DOUBLE"}
    if weight not in weights:
        raise ValueError(f"weight must be one of {', '.join(weights)}, got {weight!r}")
    where, params = job_predicate(flt, "gpu_num > 0")
    sql = f"SELECT cluster, gpu_num::BIGINT AS g, {weights[weight]} AS w FROM jobs WHERE {where} GROUP BY ALL"
    per_gpu = db.run(sql, params, ds=ds)
    out_schema = {"cluster": pl.String(), "x_gpus": pl.String(), "pct": pl.Float64()}
    if per_gpu.is_empty():
        return empty(out_schema)
    limits = [int(x) if x.isdigit() else None for x in GPU_NUM_X]
    exprs = [
        (pl.col("w").filter(pl.col("g") <= lim).sum() if lim is not None else pl.col("w").sum()).alias(label)
        for label, lim in zip(GPU_NUM_X, limits, strict=True)
    ]
    wide = per_gpu.group_by("cluster").agg(exprs)
    long = wide.unpivot(index="cluster", variable_name="x_gpus", value_name="w")
    total = pl.col("w").filter(pl.col("x_gpus") == GPU_NUM_X[-1]).first().over("cluster")
    long = long.with_columns(pct=pl.when(total > 0).then(100 * pl.col("w") / total))
    order = pl.col("x_gpus").replace_strict({x: i for i, x in enumerate(GPU_NUM_X)}, return_dtype=pl.Int64)
    return long.sort(pl.col("cluster"), order).select(out_schema.keys())


def _state_shares(ds: Dataset, flt: JobFilter, bucket_of_gpus: np.ndarray, labels: tuple[str, ...]) -> pl.DataFrame:
    """Per bucket label (bucket_of_gpus[gpu_num] indexes labels; -1 = left out): % of the selected jobs with a final
    state that completed, were cancelled or failed (unfinished and unknown states are left out)."""
    cols = colstore.columns(ds)
    states = cols.cats["state"]
    group_of = _state_groups(states)
    keep = cols.mask(flt) & (group_of[states.codes] < len(schema.STATE_GROUPS))
    gpu = cols.gpu_num[keep]
    bucket = bucket_of_gpus[np.clip(gpu, 0, bucket_of_gpus.size - 1)]
    group = group_of[states.codes[keep]]
    counts = np.bincount((bucket * 3 + group)[bucket >= 0], minlength=3 * len(labels)).reshape(-1, 3)
    hit = np.flatnonzero(counts.sum(axis=1))
    share = {name: 100 * (counts[hit, i] / counts[hit].sum(axis=1)) for i, name in enumerate(STATE_PCT_SCHEMA)}
    return pl.DataFrame({"label": pl.Series(labels, dtype=pl.String).gather(hit), **share})


def final_state_by_gpu_num(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """% completed/cancelled/failed of GPU jobs with exactly 1, 2, 4, 8, 16, 32 and >= 64 GPUs (Fig 7b)."""
    bucket_of_gpus = np.full(65, -1, dtype=np.int64)  # gpu_num 64 and more share the last slot
    for i, label in enumerate(STATE_BUCKETS):
        bucket_of_gpus[64 if label == ">=64" else int(label)] = i
    out = _state_shares(ds, flt, bucket_of_gpus, STATE_BUCKETS)
    return out.rename({"label": "gpu_num"})


def final_state_cpu_vs_gpu(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """% completed/cancelled/failed of CPU jobs and of GPU jobs (Fig 7a)."""
    out = _state_shares(ds, flt, np.array([0, 1]), ("CPU", "GPU"))
    return out.rename({"label": "job_type"})


def gpu_time_share_by_state(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """GPU time (GPU-seconds) and its % by state group COMPLETED/CANCELLED/FAILED (Fig 1b), plus UNFINISHED (the
    GPU time of jobs still running when the trace was cut) when there are any."""
    out_schema = {"state_group": pl.String(), "gpu_time": pl.Float64(), "pct": pl.Float64()}
    cols = colstore.columns(ds)
    states = cols.cats["state"]
    group_of = _state_groups(states)
    rows = colstore.selected(cols.mask(flt) & (group_of[states.codes] < len(_SUMMARY_GROUPS)))
    if rows is None:
        return empty(out_schema)
    group = group_of[states.codes[rows]]
    weights = (cols.gpu_num[rows] * cols.duration_s[rows]).astype(np.float64)
    gpu_s = np.bincount(group, weights, minlength=len(_SUMMARY_GROUPS))
    shown = len(schema.STATE_GROUPS) + bool(np.any(group == _UNFINISHED_GROUP))
    gpu_s = gpu_s[:shown]
    total = gpu_s.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(total > 0, 100 * gpu_s / total, np.nan)
    frame = pl.DataFrame({"state_group": list(_SUMMARY_GROUPS[:shown]), "gpu_time": gpu_s, "pct": pct})
    return frame.with_columns(pl.col("pct").fill_nan(None)).cast(out_schema)  # type: ignore[arg-type]


JOB_STATES_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(),
    **{f"{g.lower()}_jobs": pl.Int64() for g in _SUMMARY_GROUPS},
    "unknown_state_jobs": pl.Int64(),
    "gpu_time": pl.Float64(),
}


def job_states(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster: jobs per state group (completed, cancelled, failed, unfinished, unknown) and GPU-seconds of all."""
    cols = colstore.columns(ds)
    rows = colstore.selected(cols.mask(flt))
    if rows is None:
        return empty(JOB_STATES_SCHEMA)
    cluster, states = cols.cats["cluster"], cols.cats["state"]
    key = cluster.codes[rows] * _N_GROUPS + _state_groups(states)[states.codes[rows]]
    counts = np.bincount(key, minlength=len(cluster.names) * _N_GROUPS).reshape(-1, _N_GROUPS)
    weights = (cols.gpu_num[rows] * cols.duration_s[rows]).astype(np.float64)
    gpu_s = np.bincount(cluster.codes[rows], weights, minlength=len(cluster.names))
    hit = np.flatnonzero(counts.sum(axis=1))
    names = [*(f"{g.lower()}_jobs" for g in _SUMMARY_GROUPS), "unknown_state_jobs"]
    frame = pl.DataFrame(
        {
            "cluster": pl.Series(cluster.names, dtype=pl.String).gather(hit),
            **{name: counts[hit, i] for i, name in enumerate(names)},
            "gpu_time": gpu_s[hit],
        }
    )
    return frame.cast(JOB_STATES_SCHEMA)  # type: ignore[arg-type]
