"""Per-job study queries (spec helios.md §3): summary table, monthly counts, CDFs and final-state shares, in DuckDB."""

from __future__ import annotations

from datetime import datetime

import polars as pl

from analytics import db, schema
from analytics.filters import NO_FILTER, JobFilter
from analytics.queries_base import dataset_clusters, empty, job_predicate, mean_capacity, period_bounds
from analytics.store import Dataset

SUMMARY_COLUMNS: tuple[str, ...] = (
    "id", "gpu_num", "job_num", "cpu_job_num", "gpu_job_num", "avg_run_time_cpu", "avg_run_time_gpu",
    "avg_que_time_cpu", "avg_que_time_gpu", "avg_gpu_num", "med_run_time_cpu", "med_run_time_gpu",
    "med_que_time_cpu", "med_que_time_gpu", "med_gpu_num", "complete_rate", "cancel_rate", "fail_rate",
    "complete_rate_cpu", "cancel_rate_cpu", "fail_rate_cpu", "complete_rate_gpu", "cancel_rate_gpu",
    "fail_rate_gpu", "complete_gpu_time", "cancel_gpu_time", "fail_gpu_time",
)  # fmt: skip
SUMMARY_INT_COLUMNS: tuple[str, ...] = ("gpu_num", "job_num", "cpu_job_num", "gpu_job_num")
SUMMARY_ROUNDED_COLUMNS: tuple[str, ...] = tuple(
    c for c in SUMMARY_COLUMNS if c.startswith("avg_") or c.endswith("_rate") or "_rate_" in c
)
SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    c: pl.String() if c == "id" else pl.Int64() if c in SUMMARY_INT_COLUMNS else pl.Float64() for c in SUMMARY_COLUMNS
}
TOTAL_ID = "total"
POW2_X_S: tuple[int, ...] = tuple(2**k for k in range(22))
GPU_NUM_X: tuple[str, ...] = ("1", "2", "4", "8", "12", "16", "24", "32", "40", "48", "56", "64", ">64")
STATE_BUCKETS: tuple[str, ...] = ("1", "2", "4", "8", "16", "32", ">=64")
KINDS: dict[str, str] = {"gpu": "gpu_num > 0", "cpu": "gpu_num = 0"}
CDF_SCHEMA = {"cluster": pl.String(), "x_s": pl.Int64(), "pct": pl.Float64()}
STATE_PCT_SCHEMA = {"completed_pct": pl.Float64(), "cancelled_pct": pl.Float64(), "failed_pct": pl.Float64()}

# Final-state group; a job whose state is unknown (null, e.g. Philly) is in no group and left out of the shares.
_GROUP_SQL = (
    "CASE WHEN state IS NULL THEN NULL WHEN state = ? THEN 'COMPLETED' "
    "WHEN state = ? THEN 'CANCELLED' ELSE 'FAILED' END"
)
_GROUP_PARAMS = [schema.COMPLETED, schema.CANCELLED]
_STATE_PCT_SQL = (
    "100 * avg((grp = 'COMPLETED')::DOUBLE) AS completed_pct, 100 * avg((grp = 'CANCELLED')::DOUBLE) AS cancelled_pct, "
    "100 * avg((grp = 'FAILED')::DOUBLE) AS failed_pct"
)


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return KINDS[kind]


def _summary_parts(ds: Dataset, flt: JobFilter) -> pl.DataFrame:
    """Sums per cluster, job kind and final-state group, from which every non-median summary column follows."""
    where, params = flt.where()
    sql = f"""
        WITH j AS (SELECT cluster, gpu_num > 0 AS is_gpu, gpu_num, duration, queue, {_GROUP_SQL} AS grp
                   FROM jobs WHERE {where})
        SELECT cluster AS id, is_gpu, grp, count(*) AS n, sum(duration)::DOUBLE AS sum_dur, count(queue) AS n_queue,
          sum(queue)::DOUBLE AS sum_queue, sum(gpu_num)::DOUBLE AS sum_gpu,
          sum(gpu_num::BIGINT * duration)::DOUBLE AS gpu_s
        FROM j GROUP BY ALL
    """
    return db.run(sql, [*_GROUP_PARAMS, *params], ds=ds)


def _ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    return pl.when(den > 0).then(num / den)


def _summary_columns() -> list[pl.Expr]:
    """Aggregations over the parts of one group (a cluster or all of them) giving the non-median columns."""
    gpu, cpu = pl.col("is_gpu"), ~pl.col("is_gpu")
    n = pl.col("n")
    out = [n.sum().alias("job_num"), n.filter(cpu).sum().alias("cpu_job_num"), n.filter(gpu).sum().alias("gpu_job_num")]
    for kind, mask in (("cpu", cpu), ("gpu", gpu)):
        out.append(_ratio(pl.col("sum_dur").filter(mask).sum(), n.filter(mask).sum()).alias(f"avg_run_time_{kind}"))
        queue = _ratio(pl.col("sum_queue").filter(mask).sum(), pl.col("n_queue").filter(mask).sum())
        out.append(queue.alias(f"avg_que_time_{kind}"))
    out.append(_ratio(pl.col("sum_gpu").filter(gpu).sum(), n.filter(gpu).sum()).alias("avg_gpu_num"))
    known = pl.col("grp").is_not_null()
    for short, grp in (("complete", "COMPLETED"), ("cancel", "CANCELLED"), ("fail", "FAILED")):
        in_grp = pl.col("grp") == grp
        out.append(_ratio(n.filter(in_grp).sum(), n.filter(known).sum()).alias(f"{short}_rate"))
        for kind, mask in (("cpu", cpu), ("gpu", gpu)):
            rate = _ratio(n.filter(in_grp & mask).sum(), n.filter(known & mask).sum())
            out.append(rate.alias(f"{short}_rate_{kind}"))
        out.append(pl.col("gpu_s").filter(in_grp).sum().alias(f"{short}_gpu_time"))
    return out


def _summary_medians(ds: Dataset, flt: JobFilter) -> pl.DataFrame:
    """Per cluster and over all (id null), the five median columns; in Polars, which sorts faster than DuckDB here."""
    medians = [pl.col(c).median().cast(pl.Float64).alias(c) for c in ("duration", "queue", "gpu_num")]
    jobs = ds.jobs().filter(flt.expr()).select("cluster", "duration", "queue", "gpu_num", is_gpu=pl.col("gpu_num") > 0)
    # NOTE: one scan shared by both aggregations (collect_all), and split by job kind rather than filtered, for speed.
    per_cluster, overall = pl.collect_all(
        [jobs.group_by("cluster", "is_gpu").agg(medians), jobs.group_by("is_gpu").agg(medians)]
    )
    both = pl.concat([per_cluster, overall.with_columns(cluster=pl.lit(None, dtype=pl.String))], how="diagonal")
    cpu, gpu = ~pl.col("is_gpu"), pl.col("is_gpu")
    return both.group_by(pl.col("cluster").alias("id")).agg(
        med_run_time_cpu=pl.col("duration").filter(cpu).first(),
        med_run_time_gpu=pl.col("duration").filter(gpu).first(),
        med_que_time_cpu=pl.col("queue").filter(cpu).first(),
        med_que_time_gpu=pl.col("queue").filter(gpu).first(),
        med_gpu_num=pl.col("gpu_num").filter(gpu).first(),
    )


def _cluster_order(ds: Dataset, clusters: list[str]) -> dict[str, int]:
    known = [c for c in ds.clusters if c in clusters]
    return {c: i for i, c in enumerate(known + sorted(set(clusters) - set(known)))}


def cluster_summary(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """One row per cluster plus id="total", with exactly the columns and rounding of helios_cluster_summary.csv."""
    parts = _summary_parts(ds, flt)
    if parts.is_empty():
        return empty(SUMMARY_SCHEMA)
    clusters = parts["id"].unique().to_list()
    both = pl.concat([parts, parts.with_columns(id=pl.lit(None, dtype=pl.String))])
    raw = both.group_by("id").agg(_summary_columns())
    raw = raw.join(_summary_medians(ds, flt), on="id", how="left", nulls_equal=True)
    caps = mean_capacity(ds, flt, clusters)
    order = _cluster_order(ds, clusters)
    per_cluster = raw.filter(pl.col("id").is_not_null()).join(caps, left_on="id", right_on="cluster", how="left")
    per_cluster = per_cluster.sort(pl.col("id").replace_strict(order, return_dtype=pl.Int64))
    total = raw.filter(pl.col("id").is_null()).with_columns(
        id=pl.lit(TOTAL_ID), gpu_num=pl.lit(per_cluster["gpu_num"].sum(), dtype=pl.Int64)
    )
    out = pl.concat([per_cluster.select(SUMMARY_COLUMNS), total.select(SUMMARY_COLUMNS)], how="vertical_relaxed")
    return out.cast(SUMMARY_SCHEMA).with_columns(pl.col(SUMMARY_ROUNDED_COLUMNS).round(3))  # type: ignore[arg-type]


def monthly_jobs(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster and submit month (first day of the month): all, CPU, GPU, single- and multi-GPU job counts."""
    where, params = flt.where()
    sql = f"""
        SELECT cluster, date_trunc('month', submit_time)::DATE AS month, count(*) AS job_num,
          count(*) FILTER (WHERE gpu_num = 0) AS cpu_job_num, count(*) FILTER (WHERE gpu_num > 0) AS gpu_job_num,
          count(*) FILTER (WHERE gpu_num = 1) AS single_gpu_jobs, count(*) FILTER (WHERE gpu_num > 1) AS multi_gpu_jobs
        FROM jobs WHERE {where} GROUP BY ALL ORDER BY cluster, month
    """
    return db.run(sql, params, ds=ds)


def hour_weekday_submissions(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster, weekday (0 = Monday) and hour of day: the number of submitted jobs (zeros included)."""
    where, params = flt.where()
    sql = f"""
        SELECT cluster, isodow(submit_time) - 1 AS weekday, hour(submit_time) AS hour, count(*) AS jobs
        FROM jobs WHERE {where} GROUP BY ALL
    """
    counts = db.run(sql, params, ds=ds)
    grid = pl.DataFrame({"weekday": list(range(7))}).join(pl.DataFrame({"hour": list(range(24))}), how="cross")
    grid = counts.select(pl.col("cluster").unique()).join(grid.cast(pl.Int64), how="cross")
    out = grid.join(counts, on=["cluster", "weekday", "hour"], how="left").with_columns(pl.col("jobs").fill_null(0))
    return out.sort("cluster", "weekday", "hour")


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
    where, params = job_predicate(flt, "submit_time >= ?", "submit_time < ?", window=False)
    sql = f"""
        SELECT cluster, hour(submit_time) AS hour, count(*) FILTER (WHERE gpu_num > 0) AS n_jobs
        FROM jobs WHERE {where} GROUP BY ALL
    """
    counts = db.run(sql, [*params, *bounds], ds=ds)
    if counts.is_empty():
        return empty(schema_out)
    grid = pl.DataFrame({"cluster": clusters}).join(clock_hours(*bounds), how="cross")
    out = grid.join(counts, on=["cluster", "hour"], how="left").with_columns(pl.col("n_jobs").fill_null(0))
    out = out.with_columns(gpu_jobs_per_hour=pl.col("n_jobs") / pl.col("n_hours"))
    return out.select(schema_out.keys()).sort("cluster", "hour")


def _log2_cdf(ds: Dataset, flt: JobFilter, column: str, kind: str) -> pl.DataFrame:
    col = schema.check_identifier(column)
    where, params = job_predicate(flt, _check_kind(kind), f"{col} IS NOT NULL")
    sql = f"""
        SELECT cluster, least(CASE WHEN {col} <= 1 THEN 0 ELSE ceil(log2({col}))::BIGINT END, 22) AS k, count(*) AS n
        FROM jobs WHERE {where} GROUP BY ALL
    """
    counts = db.run(sql, params, ds=ds)
    if counts.is_empty():
        return empty(CDF_SCHEMA)
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


def duration_cdf(ds: Dataset, flt: JobFilter = NO_FILTER, kind: str = "gpu") -> pl.DataFrame:
    """Per cluster, % of GPU (or CPU) jobs with duration <= x_s for x_s = 2^0..2^21 s (Figs 1a, 5)."""
    return _log2_cdf(ds, flt, "duration", kind)


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


def final_state_by_gpu_num(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """% completed/cancelled/failed of GPU jobs with exactly 1, 2, 4, 8, 16, 32 and >= 64 GPUs (Fig 7b)."""
    where, params = flt.where()
    sql = f"""
        WITH j AS (
          SELECT CASE WHEN gpu_num >= 64 THEN '>=64' WHEN gpu_num IN (1, 2, 4, 8, 16, 32) THEN gpu_num::VARCHAR END
            AS gpu_num, {_GROUP_SQL} AS grp FROM jobs WHERE {where})
        SELECT gpu_num, {_STATE_PCT_SQL} FROM j WHERE gpu_num IS NOT NULL AND grp IS NOT NULL GROUP BY gpu_num
    """
    out = db.run(sql, [*_GROUP_PARAMS, *params], ds=ds)
    if out.is_empty():
        return empty({"gpu_num": pl.String(), **STATE_PCT_SCHEMA})
    order = {b: i for i, b in enumerate(STATE_BUCKETS)}
    return out.sort(pl.col("gpu_num").replace_strict(order, return_dtype=pl.Int64))


def final_state_cpu_vs_gpu(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """% completed/cancelled/failed of CPU jobs and of GPU jobs (Fig 7a)."""
    where, params = flt.where()
    sql = f"""
        WITH j AS (SELECT CASE WHEN gpu_num > 0 THEN 'GPU' ELSE 'CPU' END AS job_type, {_GROUP_SQL} AS grp
                   FROM jobs WHERE {where})
        SELECT job_type, {_STATE_PCT_SQL} FROM j WHERE grp IS NOT NULL GROUP BY job_type ORDER BY job_type
    """
    out = db.run(sql, [*_GROUP_PARAMS, *params], ds=ds)
    return out if not out.is_empty() else empty({"job_type": pl.String(), **STATE_PCT_SCHEMA})


def gpu_time_share_by_state(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """GPU time (GPU-seconds) and its % by final-state group COMPLETED/CANCELLED/FAILED (Fig 1b)."""
    where, params = flt.where()
    sql = f"""
        WITH j AS (SELECT gpu_num::BIGINT * duration AS gpu_s, {_GROUP_SQL} AS grp FROM jobs WHERE {where}),
        g AS (SELECT unnest(?::VARCHAR[]) AS state_group, generate_subscripts(?::VARCHAR[], 1) AS pos),
        s AS (SELECT grp, sum(gpu_s)::DOUBLE AS gpu_time FROM j GROUP BY grp)
        SELECT g.state_group, coalesce(s.gpu_time, 0)::DOUBLE AS gpu_time,
          100 * coalesce(s.gpu_time, 0) / nullif(sum(coalesce(s.gpu_time, 0)) OVER (), 0) AS pct
        FROM g LEFT JOIN s ON s.grp = g.state_group
        WHERE (SELECT count(grp) FROM j) > 0 ORDER BY g.pos
    """
    groups = list(schema.STATE_GROUPS)
    return db.run(sql, [*_GROUP_PARAMS, *params, groups, groups], ds=ds)
