"""Per-user study queries (spec helios.md §2 cluster_user fields, §3 Figs 8-9) and the active users of a selection."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analytics import db, schema
from analytics.filters import NO_FILTER, JobFilter
from analytics.queries import colstore
from analytics.queries.base import empty
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

_GPU = "WHERE gpu_num > 0"


MAX_DENSE_KEYS = 50_000_000  # above this many (cluster, user, vc, kind) keys, distinct keys come from a sort
_PERCENT_STATES = {"completed": schema.COMPLETED, "cancelled": schema.CANCELLED, "failed": schema.FAILED}


@dataclass(frozen=True)
class _UserParts:
    """Selected jobs with a user: (cluster, user) code `key` (0..size-1) and kind_key = 2 * key + is GPU job."""

    cols: colstore.JobColumns
    rows: colstore.Rows
    key: np.ndarray
    is_gpu: np.ndarray
    kind_key: np.ndarray
    size: int

    def sums(self, weights: np.ndarray | None = None) -> np.ndarray:
        """Matrix [key, kind (0 CPU, 1 GPU)] of the count (weights None) or the sum of the selected weights."""
        return np.bincount(self.kind_key, weights, minlength=2 * self.size).reshape(self.size, 2)


def _user_parts(cols: colstore.JobColumns, flt: JobFilter) -> _UserParts | None:
    users, cluster = cols.cats["user"], cols.cats["cluster"]
    rows = colstore.selected(cols.mask(flt) & (users.codes >= 0))
    if rows is None:
        return None
    key = cluster.codes[rows].astype(np.int64) * len(users.names) + users.codes[rows]
    is_gpu = cols.gpu_num[rows] > 0
    return _UserParts(cols, rows, key, is_gpu, key * 2 + is_gpu, len(cluster.names) * len(users.names))


def _names(cols: colstore.JobColumns, keys: np.ndarray) -> dict[str, pl.Series]:
    """Columns cluster and user of (cluster, user) codes `keys` of _UserParts."""
    n_users = len(cols.cats["user"].names)
    return {
        "cluster": pl.Series(cols.cats["cluster"].names, dtype=pl.String).gather(keys // n_users),
        "user": pl.Series(cols.cats["user"].names, dtype=pl.String).gather(keys % n_users),
    }


def _ratio_of(num: np.ndarray, den: np.ndarray, default: float) -> np.ndarray:
    """num / den where den > 0, else default (NaN = null)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, default)


def _vc_lists(parts: _UserParts, hit: np.ndarray) -> pl.DataFrame:
    """Per key of hit (row i = hit[i]): sorted distinct VCs of all its jobs and of its GPU jobs."""
    vcs = parts.cols.cats["vc"]
    n_vcs = len(vcs.names)
    keys = (parts.key * n_vcs + vcs.codes[parts.rows]) * 2 + parts.is_gpu  # (cluster, user, vc, kind)
    size = parts.size * n_vcs * 2
    found = np.flatnonzero(np.bincount(keys, minlength=size)) if size <= MAX_DENSE_KEYS else np.unique(keys)
    slot = np.full(parts.size, -1, dtype=np.int64)
    slot[hit] = np.arange(hit.size)
    names = pl.Series(vcs.names, dtype=pl.String)
    out = pl.DataFrame({"i": np.arange(hit.size)})
    for column, chosen in (("vc_list", np.unique(found // 2)), ("vc_list_gpu", found[found % 2 == 1] // 2)):
        frame = pl.DataFrame({"i": slot[chosen // n_vcs], column: names.gather(chosen % n_vcs)})
        out = out.join(
            frame.group_by("i", maintain_order=True).agg(pl.col(column)), on="i", how="left", maintain_order="left"
        )
    return out.select(pl.col("vc_list", "vc_list_gpu").fill_null(pl.lit([], dtype=pl.List(pl.String))))


def _state_counts(parts: _UserParts) -> dict[str, np.ndarray]:
    """Per name of _PERCENT_STATES: matrix [key, kind] of the jobs that ended in exactly that state."""
    states = parts.cols.cats["state"]
    # State class per code: the index of its state in _PERCENT_STATES, else (and for null) the spare class 3.
    index = {state: i for i, state in enumerate(_PERCENT_STATES.values())}
    classes = np.array([index.get(name, 3) for name in states.names] + [3], dtype=np.int64)
    key = parts.kind_key * 4 + classes[states.codes[parts.rows]]
    counts = np.bincount(key, minlength=8 * parts.size).reshape(parts.size, 2, 4)
    return {name: counts[:, :, i] for i, name in enumerate(_PERCENT_STATES)}


def _user_fields(parts: _UserParts) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The keys present and their numeric cluster_user fields, as DuckDB's two-level aggregation computed them."""
    cols, rows = parts.cols, parts.rows
    n = parts.sums()
    hit = np.flatnonzero(n.sum(axis=1))
    n = n[hit]
    duration = cols.duration_s[rows]
    dur, queue = parts.sums(duration)[hit], parts.sums(cols.queue_s[rows])[hit]
    n_queue, n_cpu = parts.sums(cols.has_queue[rows])[hit], parts.sums(cols.has_cpu[rows])[hit]
    gpu, cpu = cols.gpu_num[rows], cols.cpu_num[rows]
    cpu_time = parts.sums(cpu * duration)[hit]
    total, nan = n.sum(axis=1), np.nan
    fields = {
        "cpu_only": n[:, 1] == 0,
        "job_num": total,
        "gpu_job_num": n[:, 1],
        "cpu_job_num": n[:, 0],
        "avg_run_time": _ratio_of(dur.sum(axis=1), total, nan),
        "avg_gpu_run_time": _ratio_of(dur[:, 1], n[:, 1], 0.0),
        "avg_cpu_run_time": _ratio_of(dur[:, 0], n[:, 0], 0.0),
        "avg_pend_time": _ratio_of(queue.sum(axis=1), n_queue.sum(axis=1), nan),
        "avg_gpu_pend_time": _ratio_of(queue[:, 1], n_queue[:, 1], 0.0),
        "avg_cpu_pend_time": _ratio_of(queue[:, 0], n_queue[:, 0], 0.0),
        "avg_gpu_num": _ratio_of(parts.sums(gpu)[hit].sum(axis=1), total, nan),
        "avg_cpu_num": _ratio_of(parts.sums(cpu)[hit].sum(axis=1), n_cpu.sum(axis=1), nan),
        "total_gpu_time": parts.sums(gpu * duration)[hit][:, 1],
        "total_cpu_time": cpu_time[:, 0] + cpu_time[:, 1],
        "total_cpu_only_time": cpu_time[:, 0],
        "total_gpu_pend_time": queue[:, 1],
    }
    for name, counts in _state_counts(parts).items():
        fields[f"{name}_percent"] = _ratio_of(counts[hit].sum(axis=1), total, nan)
        fields[f"{name}_gpu_percent"] = _ratio_of(counts[hit][:, 1], n[:, 1], 0.0)
        fields[f"{name}_cpu_percent"] = _ratio_of(counts[hit][:, 0], n[:, 0], 0.0)
    return hit, fields


def user_table(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per (cluster, user): the cluster_user.pkl fields of spec §2 (failed = FAILED only; shares are fractions)."""
    cols = colstore.columns(ds)
    parts = _user_parts(cols, flt)
    if parts is None:
        return empty(USER_SCHEMA)
    hit, fields = _user_fields(parts)
    frame = pl.DataFrame({**_names(cols, hit), **fields}).hstack(_vc_lists(parts, hit))
    frame = frame.with_columns(vc_num=pl.col("vc_list").list.len(), vc_num_gpu=pl.col("vc_list_gpu").list.len())
    float_columns = [c for c, t in USER_SCHEMA.items() if t == pl.Float64()]
    return (
        frame.with_columns(pl.col(float_columns).fill_nan(None))
        .cast(USER_SCHEMA)  # type: ignore[arg-type]
        .select(USER_SCHEMA.keys())
        .sort(["cluster", "job_num", "user"], descending=[False, True, False])
    )


def _user_totals(ds: Dataset, flt: JobFilter, metric: str) -> pl.DataFrame:
    """Per (cluster, user) with selected jobs: the metric's total `v` (0 when none of its jobs count)."""
    cols = colstore.columns(ds)
    parts = _user_parts(cols, flt)
    if parts is None:
        return pl.DataFrame(schema={"cluster": pl.String(), "user": pl.String(), "v": pl.Float64()})
    rows = parts.rows
    if metric == "gpu_time":
        weights, kind = cols.gpu_num[rows] * cols.duration_s[rows], 1
    elif metric == "cpu_only_time":
        weights, kind = cols.cpu_num[rows] * cols.duration_s[rows], 0
    else:
        weights, kind = cols.queue_s[rows], 1
    hit = np.flatnonzero(parts.sums().sum(axis=1))
    return pl.DataFrame({**_names(cols, hit), "v": parts.sums(weights.astype(np.float64))[hit, kind]})


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


USER_JOBS_SAMPLE = 5_000


def active_users(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Distinct users per cluster among the selected jobs (columns cluster, active_users)."""
    where, params = flt.where()
    sql = f'SELECT cluster, count(DISTINCT "user")::BIGINT AS active_users FROM jobs WHERE {where} GROUP BY cluster'
    return db.run(sql, params, ds=ds)


def user_jobs_sample(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """The selected jobs (a repeatable random sample of USER_JOBS_SAMPLE when there are more) in submit order, with
    their total count in column of_jobs."""
    where, params = flt.where()
    sql = (
        "WITH mine AS (SELECT cluster, job_id, vc, gpu_num, state, submit_time, duration, queue, "
        f"count(*) OVER () AS of_jobs FROM jobs WHERE {where}) "
        f"SELECT * FROM mine USING SAMPLE reservoir({USER_JOBS_SAMPLE:d} ROWS) REPEATABLE (7) ORDER BY submit_time"
    )
    return db.run(sql, params, ds=ds)
