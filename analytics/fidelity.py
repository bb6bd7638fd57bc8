"""Compare a dataset with the published Helios statistics: one check per statistic with tolerance and verdict.

Dataset values come from analytics.queries; published values from helios_cluster_summary.csv and
helios_reference.json (analytics.reference). Job counts are compared after scaling the published counts by
the dataset's generator scale (1 for real traces).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

from analytics import queries, schema
from analytics.reference import CLUSTERS, reference, summary_rows
from analytics.store import Dataset

COUNT_REL_PCT = 2.0
MOMENT_REL_PCT = 15.0
ZERO_ABS_S = 5.0  # absolute tolerance (s) where the published value is 0 (median queues)
RATE_ABS_PP = 3.0
MIN_PEARSON = 0.8
UTIL_REL_PCT = 5.0
GPU_TIME_REL_PCT = 5.0
CONCENTRATION_POINTS: tuple[int, ...] = (1, 5, 10, 20)
_CONCENTRATION_REF = {
    "gpu_time": "user_gpu_time_cdf",
    "cpu_only_time": "user_cpu_time_cdf",
    "gpu_queue_time": "user_gpu_queue_time_cdf",
}
_MOMENTS = (
    "avg_run_time_gpu",
    "med_run_time_gpu",
    "avg_run_time_cpu",
    "med_run_time_cpu",
    "avg_que_time_gpu",
    "med_que_time_gpu",
    "avg_que_time_cpu",
    "med_que_time_cpu",
    "avg_gpu_num",
    "med_gpu_num",
)
_RATES = tuple(f"{k}_rate{s}" for s in ("", "_cpu", "_gpu") for k in ("complete", "cancel", "fail"))
_STATE_TIME = ("complete_gpu_time", "cancel_gpu_time", "fail_gpu_time")


@dataclass(frozen=True)
class Check:
    """One published statistic beside the dataset's value."""

    cluster: str
    statistic: str
    published: float
    value: float | None
    difference: float | None
    tolerance: str
    passed: bool


def _relative(cluster: str, stat: str, published: float, value: float | None, pct: float) -> Check:
    if published == 0:
        return _absolute(cluster, stat, published, value, ZERO_ABS_S, "s")
    diff = None if value is None else value - published
    ok = diff is not None and abs(diff) <= abs(published) * pct / 100
    return Check(cluster, stat, published, value, diff, f"±{pct:g} %", ok)


def _absolute(cluster: str, stat: str, published: float, value: float | None, tol: float, unit: str) -> Check:
    diff = None if value is None else value - published
    ok = diff is not None and abs(diff) <= tol
    return Check(cluster, stat, published, value, diff, f"±{tol:g} {unit}", ok)


def _pearson(cluster: str, stat: str, published: list[float], values: list[float]) -> Check:
    r = None
    if len(values) == len(published) and len(values) > 2 and np.std(values) > 0 and np.std(published) > 0:
        r = float(np.corrcoef(np.asarray(published, float), np.asarray(values, float))[0, 1])
    return Check(
        cluster, stat, 1.0, r, None if r is None else r - 1.0, f"r ≥ {MIN_PEARSON:g}", bool(r and r >= MIN_PEARSON)
    )


def _worst_point(cluster: str, stat: str, xs: list, published: list[float], values: dict) -> Check:
    """The curve point with the largest absolute difference, against the percentage-point tolerance."""
    diffs = [(abs(values[x] - p), x, p) for x, p in zip(xs, published, strict=True) if x in values]
    if len(diffs) < len(xs):
        return _absolute(cluster, f"{stat} (points missing)", published[0], None, RATE_ABS_PP, "pp")
    _, x, p = max(diffs, key=lambda d: d[0])
    return _absolute(cluster, f"{stat}, worst point x={x}", p, values[x], RATE_ABS_PP, "pp")


def dataset_scale(ds: Dataset) -> float:
    """The generator scale recorded in a synthetic dataset's meta.json (1 for real traces)."""
    return float((ds.meta.get("generator") or {}).get("scale", 1.0))


def summary_checks(ds: Dataset) -> list[Check]:
    """Counts, GPU-job share, duration/queue/GPU-count moments, state rates and GPU-time shares per cluster."""
    published, scale = summary_rows(), dataset_scale(ds)
    got = {row["id"]: row for row in queries.cluster_summary(ds).iter_rows(named=True)}
    out: list[Check] = []
    for cid in [c for c in (*CLUSTERS, "total") if c in got and c in published]:
        pub, row = published[cid], got[cid]
        for stat in ("job_num", "gpu_job_num"):
            out.append(_relative(cid, f"{stat} (published x {scale:g})", pub[stat] * scale, row[stat], COUNT_REL_PCT))
        share = 100 * row["gpu_job_num"] / row["job_num"] if row["job_num"] else None
        out.append(
            _absolute(cid, "gpu_job_share_pct", 100 * pub["gpu_job_num"] / pub["job_num"], share, RATE_ABS_PP, "pp")
        )
        out.extend(_relative(cid, stat, pub[stat], row[stat], MOMENT_REL_PCT) for stat in _MOMENTS)
        out.extend(_absolute(cid, f"{s}_pct", 100 * pub[s], _pct(row[s]), RATE_ABS_PP, "pp") for s in _RATES)
        out.extend(_state_time_checks(cid, pub, row))
        gpu_time = sum(row[k] or 0 for k in _STATE_TIME)
        stat = f"gpu_time, all states (published x {scale:g})"
        out.append(_relative(cid, stat, sum(pub[k] for k in _STATE_TIME) * scale, gpu_time, GPU_TIME_REL_PCT))
    return out


def _pct(fraction: float | None) -> float | None:
    return None if fraction is None else 100 * fraction


def _state_time_checks(cid: str, pub: dict[str, float], row: dict[str, Any]) -> list[Check]:
    pub_total = sum(pub[k] for k in _STATE_TIME)
    got_total = sum(row[k] or 0 for k in _STATE_TIME)
    return [
        _absolute(
            cid,
            f"{k}_share_pct",
            100 * pub[k] / pub_total,
            100 * (row[k] or 0) / got_total if got_total else None,
            RATE_ABS_PP,
            "pp",
        )
        for k in _STATE_TIME
    ]


def _by_cluster(df: pl.DataFrame, key: str, value: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for row in df.iter_rows(named=True):
        out.setdefault(row["cluster"], {})[row[key]] = row[value]
    return out


def curve_checks(ds: Dataset) -> list[Check]:
    """Duration CDFs (GPU, CPU) and GPU-count CDFs (jobs, GPU time): worst point per cluster within 3 pp."""
    ref = reference()
    curves = [
        ("GPU-job duration CDF %", queries.duration_cdf(ds, kind="gpu"), "x_s", ref["gpu_job_duration_cdf"]),
        ("CPU-job duration CDF %", queries.duration_cdf(ds, kind="cpu"), "x_s", ref["cpu_job_duration_cdf"]),
        ("GPU-count CDF % of jobs", queries.gpu_num_cdf(ds, weight="jobs"), "x_gpus", ref["gpu_num_cdf_jobs"]),
        (
            "GPU-count CDF % of GPU time",
            queries.gpu_num_cdf(ds, weight="gpu_time"),
            "x_gpus",
            ref["gpu_num_cdf_gpu_time"],
        ),
    ]
    out = []
    for stat, df, key, published in curves:
        got = _by_cluster(df, key, "pct")
        xs = [str(x) for x in published[key]] if key == "x_gpus" else list(published[key])
        out.extend(_worst_point(c, stat, xs, published[c], got[c]) for c in CLUSTERS if c in got)
    return out


def state_checks(ds: Dataset) -> list[Check]:
    """Final state by exact GPU count over all clusters (Fig 7b): worst bucket per state within 3 pp."""
    ref = reference()["final_state_by_gpu_num"]
    df = queries.final_state_by_gpu_num(ds)
    out = []
    for state, col in zip(schema.STATE_GROUPS, ("completed_pct", "cancelled_pct", "failed_pct"), strict=True):
        got = dict(zip(df["gpu_num"].to_list(), df[col].to_list(), strict=True))
        out.append(_worst_point("all", f"{state} % by GPU count", ref["gpu_num"], ref[state], got))
    return out


def user_checks(ds: Dataset) -> list[Check]:
    """User concentration (Figs 8a, 8b, 9a) at the top 1/5/10/20 % of users (3 pp) and Fig 9b's histogram shape."""
    ref = reference()
    out = []
    for metric, key in _CONCENTRATION_REF.items():
        got = _by_cluster(queries.user_concentration(ds, metric=metric), "user_pct", "share_pct")
        for c in [c for c in CLUSTERS if c in got]:
            out.extend(
                _absolute(c, f"top {p} % users: % of {metric}", ref[key][c][p], got[c].get(p), RATE_ABS_PP, "pp")
                for p in CONCENTRATION_POINTS
            )
    hist = queries.user_completion_histogram(ds)
    published = ref["user_completion_ratio_histogram"]["users"]
    out.append(_pearson("all", "users per GPU completion-ratio bin (Fig 9b)", published, hist["users"].to_list()))
    return out


def shape_checks(ds: Dataset) -> list[Check]:
    """Diurnal utilisation and submissions, monthly single/multi GPU jobs and monthly utilisation (all, multi- and
    single-GPU jobs): Pearson r, plus the 24-hour mean utilisation."""
    ref = reference()
    diurnal_util = _by_cluster(queries.diurnal_utilization(ds), "hour", "gpu_utilization_pct")
    diurnal_subm = _by_cluster(queries.diurnal_submissions(ds), "hour", "gpu_jobs_per_hour")
    monthly = queries.monthly_jobs(ds).with_columns(pl.col("month").dt.month().alias("m"))
    monthly_util = queries.monthly_utilization(ds).with_columns(pl.col("month").dt.month().alias("m"))
    series = [
        ("diurnal GPU utilisation", diurnal_util, ref["diurnal_gpu_utilization_pct"], "hour", None),
        ("diurnal GPU-job submissions", diurnal_subm, ref["diurnal_gpu_job_submissions_per_hour"], "hour", None),
        (
            "monthly single-GPU jobs",
            _by_cluster(monthly, "m", "single_gpu_jobs"),
            ref["monthly"],
            "month",
            "single_gpu_jobs",
        ),
        (
            "monthly multi-GPU jobs",
            _by_cluster(monthly, "m", "multi_gpu_jobs"),
            ref["monthly"],
            "month",
            "multi_gpu_jobs",
        ),
        *[
            (f"monthly {label} utilisation", _by_cluster(monthly_util, "m", col), ref["monthly"], "month", col)
            for label, col in (
                ("GPU", "gpu_utilization_pct"),
                ("multi-GPU-job", "multi_gpu_utilization_pct"),
                ("single-GPU-job", "single_gpu_utilization_pct"),
            )
        ],
    ]
    out = _mean_utilization_checks(ds, diurnal_util)
    for stat, got, published, key, field in series:
        for c in [c for c in CLUSTERS if c in got]:
            pub = published[c][field] if field else published[c]
            values = [got[c].get(x) for x in published[key]]
            out.append(_pearson(c, stat, pub, [v for v in values if v is not None]))
    return out


def _mean_utilization_checks(ds: Dataset, diurnal_util: dict[str, dict]) -> list[Check]:
    """24-hour mean GPU utilisation (Fig 2a) against the published mean times the dataset scale."""
    ref, scale = reference()["diurnal_gpu_utilization_pct"], dataset_scale(ds)
    out = []
    for c in [c for c in CLUSTERS if c in diurnal_util]:
        hours = list(diurnal_util[c].values())
        published = float(np.mean(ref[c])) * scale
        value = float(np.mean(hours)) if len(hours) == 24 else None
        out.append(_relative(c, f"mean GPU utilisation % (published x {scale:g})", published, value, UTIL_REL_PCT))
    return out


def claims_capacity_consistency(ds: Dataset) -> bool:
    """Whether the dataset's meta.json says its GPU-job start times respect the VC capacities."""
    return bool((ds.meta.get("start_times") or {}).get("capacity_consistent"))


def peak_excess_gpus(jobs: pl.LazyFrame, vc_gpus: pl.DataFrame) -> pl.DataFrame:
    """Per cluster, the largest excess (GPUs) of GPUs in use in a VC over its capacity that day, at any second:
    a sweep over job starts and ends (ends first at equal times) and each day's midnight; VCs without capacity rows
    are not checked, times after the last capacity day use that day."""
    gpu = jobs.filter(pl.col("gpu_num") > 0).select("cluster", "vc", "gpu_num", "start_time", "end_time").collect()
    caps = vc_gpus.select("cluster", "vc", "date", pl.col("gpus").cast(pl.Int64))
    first, last = caps["date"].min(), caps["date"].max()
    events = pl.concat(
        [
            gpu.select("cluster", "vc", pl.col("start_time").alias("t"), pl.col("gpu_num").cast(pl.Int64).alias("d")),
            gpu.select("cluster", "vc", pl.col("end_time").alias("t"), -pl.col("gpu_num").cast(pl.Int64).alias("d")),
            caps.select(
                "cluster", "vc", pl.col("date").cast(pl.Datetime("us")).alias("t"), pl.lit(0, pl.Int64).alias("d")
            ),
        ]
    ).sort("cluster", "vc", "t", "d")
    swept = events.with_columns(
        pl.col("d").cum_sum().over("cluster", "vc").alias("busy"),
        pl.col("t").dt.date().clip(first, last).alias("date"),
    ).join(caps, on=["cluster", "vc", "date"], how="inner")
    return swept.group_by("cluster").agg((pl.col("busy") - pl.col("gpus")).max().alias("excess_gpus")).sort("cluster")


def capacity_checks(ds: Dataset) -> list[Check]:
    """GPUs in use never above the VC's capacity of the day (for datasets whose start times claim it)."""
    df = peak_excess_gpus(ds.jobs(), ds.vc_gpus())
    out = []
    for cluster, excess in df.iter_rows():
        value = None if excess is None else float(excess)
        ok = value is not None and value <= 0
        out.append(Check(cluster, "peak GPUs in use minus VC capacity", 0.0, value, value, "≤ 0 GPUs", ok))
    return out


def fidelity_checks(ds: Dataset) -> list[Check]:
    """Every fidelity check of the dataset against the published Helios numbers (plus the capacity check when the
    dataset's start times claim capacity consistency)."""
    capacity = capacity_checks(ds) if claims_capacity_consistency(ds) else []
    return [
        *summary_checks(ds),
        *curve_checks(ds),
        *state_checks(ds),
        *user_checks(ds),
        *shape_checks(ds),
        *capacity,
    ]


def checks_to_json(ds: Dataset, checks: list[Check]) -> dict[str, Any]:
    """JSON-ready report: dataset, overall verdict, counts and every check."""
    failed = [c for c in checks if not c.passed]
    return {
        "dataset": ds.name,
        "scale": dataset_scale(ds),
        "passed": not failed,
        "checks_total": len(checks),
        "checks_failed": len(failed),
        "checks": [asdict(c) for c in checks],
    }


def format_table(checks: list[Check]) -> str:
    """Plain-text table of the checks: cluster, statistic, published, dataset, difference, tolerance, verdict."""
    header = ("cluster", "statistic", "published", "dataset", "diff", "tolerance", "ok")
    rows = [header] + [
        (c.cluster, c.statistic, _num(c.published), _num(c.value), _num(c.difference), c.tolerance, _verdict(c))
        for c in checks
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    failed = sum(not c.passed for c in checks)
    lines.append(f"{len(checks) - failed} of {len(checks)} checks pass" + (f"; {failed} FAIL" if failed else ""))
    return "\n".join(lines)


def _verdict(check: Check) -> str:
    return "pass" if check.passed else "FAIL"


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1e6:
        return f"{value:.4g}"
    return f"{value:.3f}".rstrip("0").rstrip(".") if value != int(value) else f"{int(value)}"
