"""Per-user study queries (spec helios.md §2 cluster_user fields, §3 Figs 8-9), in DuckDB."""

from __future__ import annotations

import polars as pl

from analytics import db, schema
from analytics.filters import NO_FILTER, JobFilter
from analytics.queries_base import empty
from analytics.store import Dataset

HIST_BINS: tuple[str, ...] = tuple(f"{10 * i}-{10 * i + 10}" for i in range(10))
CONCENTRATION_METRICS: dict[str, str] = {
    "gpu_time": "total_gpu_time",
    "cpu_only_time": "total_cpu_only_time",
    "gpu_queue_time": "total_gpu_pend_time",
}
USER_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(),
    "user": pl.String(),
    "cpu_only": pl.Boolean(),
    "vc_list": pl.List(pl.String()),
    "vc_num": pl.Int64(),
    "vc_list_gpu": pl.List(pl.String()),
    "vc_num_gpu": pl.Int64(),
    "job_num": pl.Int64(),
    "gpu_job_num": pl.Int64(),
    "cpu_job_num": pl.Int64(),
    **dict.fromkeys(
        (
            "avg_run_time", "avg_gpu_run_time", "avg_cpu_run_time", "avg_pend_time", "avg_gpu_pend_time",
            "avg_cpu_pend_time", "avg_gpu_num", "avg_cpu_num", "total_gpu_time", "total_cpu_time",
            "total_cpu_only_time", "total_gpu_pend_time", "completed_percent", "completed_gpu_percent",
            "completed_cpu_percent", "cancelled_percent", "cancelled_gpu_percent", "cancelled_cpu_percent",
            "failed_percent", "failed_gpu_percent", "failed_cpu_percent",
        ),
        pl.Float64(),
    ),
}  # fmt: skip

_GPU, _CPU = "WHERE gpu_num > 0", "WHERE gpu_num = 0"


def _ratio(num: str, den: str, mask: str = "") -> str:
    flt = f" FILTER (WHERE {mask})" if mask else ""
    return f"(sum({num}){flt} / nullif(sum({den}){flt}, 0))::DOUBLE"


def _user_sql(where: str) -> str:
    """Two-level aggregation: per (cluster, user, vc, GPU or not) sums, then per (cluster, user) fields."""
    per_part = ", ".join(
        (
            "count(*) AS n",
            "sum(duration)::DOUBLE AS s_dur",
            "count(queue) AS n_q",
            "sum(queue)::DOUBLE AS s_q",
            "sum(gpu_num)::DOUBLE AS s_gpu",
            "count(cpu_num) AS n_cpu",
            "sum(cpu_num)::DOUBLE AS s_cpu",
            "sum(gpu_num::BIGINT * duration)::DOUBLE AS s_gpu_time",
            "sum(cpu_num * duration)::DOUBLE AS s_cpu_time",
            "count(*) FILTER (WHERE state = ?) AS n_completed",
            "count(*) FILTER (WHERE state = ?) AS n_cancelled",
            "count(*) FILTER (WHERE state = ?) AS n_failed",
        )
    )
    fields = [
        "coalesce(sum(n) FILTER (WHERE g), 0) = 0 AS cpu_only",
        "list_sort(list(DISTINCT vc)) AS vc_list",
        "count(DISTINCT vc) AS vc_num",
        "coalesce(list_sort(list(DISTINCT vc) FILTER (WHERE g)), []::VARCHAR[]) AS vc_list_gpu",
        "count(DISTINCT vc) FILTER (WHERE g) AS vc_num_gpu",
        "sum(n)::BIGINT AS job_num",
        "coalesce(sum(n) FILTER (WHERE g), 0)::BIGINT AS gpu_job_num",
        "coalesce(sum(n) FILTER (WHERE NOT g), 0)::BIGINT AS cpu_job_num",
        f"{_ratio('s_dur', 'n')} AS avg_run_time",
        f"coalesce({_ratio('s_dur', 'n', 'g')}, 0) AS avg_gpu_run_time",
        f"coalesce({_ratio('s_dur', 'n', 'NOT g')}, 0) AS avg_cpu_run_time",
        f"{_ratio('s_q', 'n_q')} AS avg_pend_time",
        f"coalesce({_ratio('s_q', 'n_q', 'g')}, 0) AS avg_gpu_pend_time",
        f"coalesce({_ratio('s_q', 'n_q', 'NOT g')}, 0) AS avg_cpu_pend_time",
        f"{_ratio('s_gpu', 'n')} AS avg_gpu_num",
        f"{_ratio('s_cpu', 'n_cpu')} AS avg_cpu_num",
        "coalesce(sum(s_gpu_time) FILTER (WHERE g), 0)::DOUBLE AS total_gpu_time",
        "coalesce(sum(s_cpu_time), 0)::DOUBLE AS total_cpu_time",
        "coalesce(sum(s_cpu_time) FILTER (WHERE NOT g), 0)::DOUBLE AS total_cpu_only_time",
        "coalesce(sum(s_q) FILTER (WHERE g), 0)::DOUBLE AS total_gpu_pend_time",
    ]
    for name in ("completed", "cancelled", "failed"):
        fields.append(f"{_ratio(f'n_{name}', 'n')} AS {name}_percent")
        fields.append(f"coalesce({_ratio(f'n_{name}', 'n', 'g')}, 0) AS {name}_gpu_percent")
        fields.append(f"coalesce({_ratio(f'n_{name}', 'n', 'NOT g')}, 0) AS {name}_cpu_percent")
    return f"""
        WITH p AS (
          SELECT cluster, "user", vc, gpu_num > 0 AS g, {per_part}
          FROM jobs WHERE {where} AND "user" IS NOT NULL GROUP BY ALL)
        SELECT cluster, "user", {", ".join(fields)} FROM p GROUP BY cluster, "user"
    """


def _state_params() -> list[str]:
    return [schema.COMPLETED, schema.CANCELLED, schema.FAILED]


def user_table(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per (cluster, user): the cluster_user.pkl fields of spec §2 (failed = FAILED only; shares are fractions)."""
    where, params = flt.where()
    out = db.run(_user_sql(where), [*_state_params(), *params], ds=ds)
    if out.is_empty():
        return empty(USER_SCHEMA)
    return (
        out.cast(USER_SCHEMA)
        .select(USER_SCHEMA.keys())
        .sort(  # type: ignore[arg-type]
            ["cluster", "job_num", "user"], descending=[False, True, False]
        )
    )


def _user_totals(ds: Dataset, flt: JobFilter, metric: str) -> pl.DataFrame:
    where, params = flt.where()
    sums = {
        "gpu_time": f"coalesce(sum(gpu_num::BIGINT * duration) FILTER ({_GPU}), 0)::DOUBLE",
        "cpu_only_time": f"coalesce(sum(cpu_num * duration) FILTER ({_CPU}), 0)::DOUBLE",
        "gpu_queue_time": f"coalesce(sum(queue) FILTER ({_GPU}), 0)::DOUBLE",
    }
    sql = f'SELECT cluster, "user", {sums[metric]} AS v FROM jobs WHERE {where} AND "user" IS NOT NULL GROUP BY ALL'
    return db.run(sql, params, ds=ds)


def user_concentration(ds: Dataset, flt: JobFilter = NO_FILTER, metric: str = "gpu_time") -> pl.DataFrame:
    """Per cluster, % of the metric's total held by the top user_pct % of users (0..100; Figs 8, 9a construction)."""
    if metric not in CONCENTRATION_METRICS:
        raise ValueError(f"metric must be one of {', '.join(CONCENTRATION_METRICS)}, got {metric!r}")
    out_schema = {"cluster": pl.String(), "user_pct": pl.Int64(), "share_pct": pl.Float64()}
    per_user = _user_totals(ds, flt, metric)
    ranked = (
        per_user.sort(["cluster", "v"], descending=[False, True])
        .with_columns(
            i=pl.int_range(pl.len()).over("cluster"),
            n=pl.len().over("cluster"),
            y=100 * pl.col("v").cum_sum().over("cluster") / pl.col("v").sum().over("cluster"),
        )
        .filter(pl.col("v").sum().over("cluster") > 0)
    )
    if ranked.is_empty():
        return empty(out_schema)
    # Curve points x_i = 100 i / (n - 1) (linspace) interpolated linearly at integer x.
    sizes = ranked.group_by("cluster").agg(pl.col("n").first())
    grid = sizes.join(pl.DataFrame({"user_pct": range(101)}), how="cross").with_columns(
        pos=pl.col("user_pct") * (pl.col("n") - 1) / 100
    )
    grid = grid.with_columns(lo=pl.col("pos").floor().cast(pl.Int64)).with_columns(
        hi=pl.min_horizontal(pl.col("lo") + 1, pl.col("n") - 1), frac=pl.col("pos") - pl.col("lo")
    )
    points = ranked.select("cluster", "i", "y")
    grid = grid.join(points.rename({"i": "lo", "y": "y_lo"}), on=["cluster", "lo"]).join(
        points.rename({"i": "hi", "y": "y_hi"}), on=["cluster", "hi"]
    )
    share = pl.col("y_lo") + pl.col("frac") * (pl.col("y_hi") - pl.col("y_lo"))
    return grid.select("cluster", "user_pct", share.alias("share_pct")).cast(out_schema).sort("cluster", "user_pct")  # type: ignore[arg-type]


def user_completion_histogram(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Number of users (over all selected clusters) per 10-point bin of their GPU-job completion % (Fig 9b)."""
    where, params = flt.where()
    sql = f"""
        WITH u AS (
          SELECT count(*) FILTER ({_GPU}) AS n_gpu, count(*) FILTER ({_GPU} AND state = ?) AS n_done
          FROM jobs WHERE {where} AND "user" IS NOT NULL GROUP BY "user")
        SELECT CASE WHEN n_gpu = 0 THEN 0 ELSE least((10 * n_done) // n_gpu, 9) END AS b, count(*) AS users
        FROM u GROUP BY b
    """
    counts = db.run(sql, [schema.COMPLETED, *params], ds=ds)
    out_schema = {"bin": pl.String(), "users": pl.Int64()}
    if counts.is_empty():
        return empty(out_schema)
    bins = pl.DataFrame({"b": range(10), "bin": HIST_BINS}, schema={"b": pl.Int64(), "bin": pl.String()})
    out = bins.join(counts, on="b", how="left").with_columns(pl.col("users").fill_null(0))
    return out.sort("b").select(out_schema.keys()).cast(out_schema)  # type: ignore[arg-type]
