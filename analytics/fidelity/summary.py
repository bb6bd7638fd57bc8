"""Fidelity checks of the summary table and the job and user figures: counts, moments, state rates and GPU-time
shares (summary, Fig 1b), duration and GPU-count CDFs (Figs 5, 6), states by GPU count (Fig 7b), user concentration
(Figs 8, 9a), the completion-ratio histogram and the number of users (Fig 9b)."""

from __future__ import annotations

from typing import Any

from analytics import queries, schema
from analytics.fidelity.base import (
    READ_FLOOR_PP,
    REL_PCT,
    Check,
    by_cluster,
    dataset_scale,
    percentage,
    relative,
    worst_point,
)
from analytics.reference import CLUSTERS, reference, summary_rows
from analytics.store import Dataset

COUNT_REL_PCT = 2.0  # job and user counts: the generator makes them exactly, up to rounding
GPU_TIME_REL_PCT = 5.0
EXACT_FLOOR_PP = 0.1  # exact published rates (the summary table): no reading error, only sampling noise
USERS_FLOOR = 3  # a histogram bin of Fig 9b may differ by 3 users even when 15 % of it is less
CONCENTRATION_POINTS: tuple[int, ...] = (1, 5, 10, 20)
_CONCENTRATION_REF = {
    "gpu_time": ("user_gpu_time_cdf", "Fig 8a"),
    "cpu_only_time": ("user_cpu_time_cdf", "Fig 8b"),
    "gpu_queue_time": ("user_gpu_queue_time_cdf", "Fig 9a"),
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
SUMMARY = "summary"


def summary_checks(ds: Dataset) -> list[Check]:
    """Counts, GPU-job share, duration/queue/GPU-count moments, state rates and GPU-time shares per cluster."""
    published, scale = summary_rows(), dataset_scale(ds)
    got = {row["id"]: row for row in queries.cluster_summary(ds).iter_rows(named=True)}
    out: list[Check] = []
    for cid in [c for c in (*CLUSTERS, "total") if c in got and c in published]:
        pub, row = published[cid], got[cid]
        for stat in ("job_num", "gpu_job_num"):
            out.append(
                relative(SUMMARY, cid, f"{stat} (published x {scale:g})", pub[stat] * scale, row[stat], COUNT_REL_PCT)
            )
        share = 100 * row["gpu_job_num"] / row["job_num"] if row["job_num"] else None
        share_pub = 100 * pub["gpu_job_num"] / pub["job_num"]
        out.append(percentage(SUMMARY, cid, "gpu_job_share_pct", share_pub, share, EXACT_FLOOR_PP))
        out.extend(relative(SUMMARY, cid, stat, pub[stat], row[stat], REL_PCT) for stat in _MOMENTS)
        out.extend(percentage(SUMMARY, cid, f"{s}_pct", 100 * pub[s], _pct(row[s]), EXACT_FLOOR_PP) for s in _RATES)
        out.extend(_state_time_checks(cid, pub, row))
        gpu_time = sum(row[k] or 0 for k in _STATE_TIME)
        stat = f"gpu_time, all states (published x {scale:g})"
        out.append(relative(SUMMARY, cid, stat, sum(pub[k] for k in _STATE_TIME) * scale, gpu_time, GPU_TIME_REL_PCT))
    return out


def _pct(fraction: float | None) -> float | None:
    return None if fraction is None else 100 * fraction


def _state_time_checks(cid: str, pub: dict[str, float], row: dict[str, Any]) -> list[Check]:
    """GPU-time shares by final state (summary; Helios-wide they are Fig 1b)."""
    pub_total = sum(pub[k] for k in _STATE_TIME)
    got_total = sum(row[k] or 0 for k in _STATE_TIME)
    return [
        percentage(
            "summary, Fig 1b",
            cid,
            f"{k}_share_pct",
            100 * pub[k] / pub_total,
            100 * (row[k] or 0) / got_total if got_total else None,
            EXACT_FLOOR_PP,
        )
        for k in _STATE_TIME
    ]


def curve_checks(ds: Dataset) -> list[Check]:
    """Duration CDFs (GPU, CPU) and GPU-count CDFs (jobs, GPU time): the worst point per cluster."""
    ref = reference()
    curves = [
        ("Fig 5a", "GPU-job duration CDF %", queries.duration_cdf(ds, kind="gpu"), "x_s", "gpu_job_duration_cdf"),
        ("Fig 5b", "CPU-job duration CDF %", queries.duration_cdf(ds, kind="cpu"), "x_s", "cpu_job_duration_cdf"),
        ("Fig 6a", "GPU-count CDF % of jobs", queries.gpu_num_cdf(ds, weight="jobs"), "x_gpus", "gpu_num_cdf_jobs"),
        (
            "Fig 6b",
            "GPU-count CDF % of GPU time",
            queries.gpu_num_cdf(ds, weight="gpu_time"),
            "x_gpus",
            "gpu_num_cdf_gpu_time",
        ),
    ]
    out = []
    for source, stat, df, key, ref_key in curves:
        published = ref[ref_key]
        got = by_cluster(df, key, "pct")
        xs = [str(x) for x in published[key]] if key == "x_gpus" else list(published[key])
        out.extend(worst_point(source, c, stat, xs, published[c], got[c], READ_FLOOR_PP) for c in CLUSTERS if c in got)
    return out


def state_checks(ds: Dataset) -> list[Check]:
    """Final state by exact GPU count over all clusters (Fig 7b): the worst bucket per state."""
    ref = reference()["final_state_by_gpu_num"]
    df = queries.final_state_by_gpu_num(ds)
    out = []
    for state, col in zip(schema.STATE_GROUPS, ("completed_pct", "cancelled_pct", "failed_pct"), strict=True):
        got = dict(zip(df["gpu_num"].to_list(), df[col].to_list(), strict=True))
        out.append(
            worst_point("Fig 7b", "all", f"{state} % by GPU count", ref["gpu_num"], ref[state], got, READ_FLOOR_PP)
        )
    return out


def user_checks(ds: Dataset) -> list[Check]:
    """User concentration (Figs 8a, 8b, 9a) at the top 1/5/10/20 % of users, Fig 9b's users per completion-ratio bin
    and the number of users (the histogram's total; users are not scaled with the jobs)."""
    ref = reference()
    out = []
    for metric, (key, source) in _CONCENTRATION_REF.items():
        got = by_cluster(queries.user_concentration(ds, metric=metric), "user_pct", "share_pct")
        for c in [c for c in CLUSTERS if c in got]:
            out.extend(
                percentage(source, c, f"top {p} % users: % of {metric}", ref[key][c][p], got[c].get(p))
                for p in CONCENTRATION_POINTS
            )
    hist = queries.user_completion_histogram(ds)
    published = ref["user_completion_ratio_histogram"]
    got = dict(zip(hist["bin"].to_list(), hist["users"].to_list(), strict=True))
    for label, users in zip(published["bins_pct"], published["users"], strict=True):
        out.append(_users(f"users with {label} % of GPU jobs completed", users, got.get(label), REL_PCT))
    out.append(_users("users, all clusters", sum(published["users"]), sum(got.values()) if got else None, None))
    return out


def _users(stat: str, published: int, value: int | None, pct: float | None) -> Check:
    """A count of users (Fig 9b): within pct % (at least USERS_FLOOR users), or COUNT_REL_PCT when pct is None."""
    if pct is None:
        return relative("Fig 9b", "all", stat, float(published), value, COUNT_REL_PCT)
    tol = max(published * pct / 100, USERS_FLOOR)
    diff = None if value is None else value - published
    ok = diff is not None and abs(diff) <= tol
    return Check("all", stat, float(published), value, diff, f"±{pct:g} % (≥ {USERS_FLOOR} users)", ok, "Fig 9b")
