"""Fidelity checks of the time figures: monthly utilisation levels (all, multi- and single-GPU jobs) and monthly
single-/multi-GPU job counts (Fig 3), the diurnal curves' mean, amplitude and phase (Fig 2), and their shapes."""

from __future__ import annotations

import numpy as np
import polars as pl

from analytics import queries
from analytics.fidelity.base import (
    READ_FLOOR_PP,
    REL_PCT,
    Check,
    absolute,
    by_cluster,
    dataset_scale,
    pearson,
    percentage,
    relative,
)
from analytics.reference import CLUSTERS, reference
from analytics.store import Dataset

UTIL_REL_PCT = 5.0  # the 24-hour mean utilisation (Fig 2a)
PHASE_TOL_H = 2.0  # hours the peak of the diurnal curve's 24-hour harmonic may move
# a curve whose 24-hour harmonic, relative to its mean, is below this share of the published one's has no daily
# rhythm to time: its peak hour is noise (a flattened trace's lands within PHASE_TOL_H by chance one time in six)
PHASE_MIN_SWING_SHARE = 0.25
AMPLITUDE_FLOOR_PP = 2 * READ_FLOOR_PP  # a difference of two read values
_UTIL_COLUMNS = (
    ("GPU", "gpu_utilization_pct"),
    ("multi-GPU-job", "multi_gpu_utilization_pct"),
    ("single-GPU-job", "single_gpu_utilization_pct"),
)
_MONTH_NAMES = ("", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _monthly(ds: Dataset) -> tuple[pl.DataFrame, pl.DataFrame]:
    jobs = queries.monthly_jobs(ds).with_columns(pl.col("month").dt.month().alias("m"))
    util = queries.monthly_utilization(ds).with_columns(pl.col("month").dt.month().alias("m"))
    return jobs, util


def monthly_level_checks(ds: Dataset) -> list[Check]:
    """Fig 3, month by month: utilisation of all GPUs and of multi- and single-GPU jobs (±3 pp, or 15 % of small
    values; x scale) and single- and multi-GPU jobs submitted (±15 % of published x scale)."""
    ref, scale = reference()["monthly"], dataset_scale(ds)
    jobs, util = _monthly(ds)
    got_util = {col: by_cluster(util, "m", col) for _, col in _UTIL_COLUMNS}
    got_jobs = {col: by_cluster(jobs, "m", col) for col in ("single_gpu_jobs", "multi_gpu_jobs")}
    out = []
    for c in [c for c in CLUSTERS if c in got_util["gpu_utilization_pct"]]:
        for i, m in enumerate(ref["month"]):
            for label, col in _UTIL_COLUMNS:
                stat = f"{_MONTH_NAMES[m]} {label} utilisation %"
                out.append(percentage("Fig 3", c, stat, ref[c][col][i], got_util[col][c].get(m), scale=scale))
            for col, values in got_jobs.items():
                stat = f"{_MONTH_NAMES[m]} {col.replace('_', ' ')} (published x {scale:g})"
                out.append(relative("Fig 3", c, stat, ref[c][col][i] * scale, values.get(c, {}).get(m), REL_PCT))
    return out


def harmonic_peak_hour(values: list[float]) -> float | None:
    """Hour of day (0-24) where the 24-hour Fourier component of an hourly curve peaks (None for a flat curve)."""
    component = _daily_component(values)
    if component is None or abs(component) < 1e-9 * max(float(np.abs(values).sum()), 1.0):
        return None
    return float(np.angle(component) * 24 / (2 * np.pi)) % 24


def relative_daily_swing(values: list[float]) -> float | None:
    """Size of an hourly curve's 24-hour Fourier component relative to the curve's mean (None if it has none)."""
    component = _daily_component(values)
    if component is None or np.mean(values) <= 0:
        return None
    return abs(component) / 24 / float(np.mean(values))


def _daily_component(values: list[float]) -> complex | None:
    """The 24-hour Fourier component of a curve of 24 finite hourly values, else None."""
    v = np.asarray(values, dtype=float)
    if len(v) != 24 or not np.isfinite(v).all():
        return None
    return complex(np.sum(v * np.exp(-2j * np.pi * np.arange(24) / 24)))


def _phase_check(source: str, cluster: str, stat: str, published: list[float], values: list[float]) -> Check:
    """The curve's harmonic peak hour within PHASE_TOL_H hours (on the 24-hour circle) of the published one; a curve
    without a daily swing (below PHASE_MIN_SWING_SHARE of the published one's) has no peak hour and fails."""
    want, got = harmonic_peak_hour(published), harmonic_peak_hour(values)
    want_swing, got_swing = relative_daily_swing(published), relative_daily_swing(values)
    if want_swing is not None and (got_swing is None or got_swing < PHASE_MIN_SWING_SHARE * want_swing):
        got = None
    diff = None if got is None or want is None else (got - want + 12) % 24 - 12
    ok = diff is not None and abs(diff) <= PHASE_TOL_H
    return Check(cluster, stat, want or 0.0, got, diff, f"±{PHASE_TOL_H:g} h", ok, source)


def diurnal_checks(ds: Dataset) -> list[Check]:
    """Fig 2: per cluster, the 24-hour mean utilisation, the amplitude (max - min over the hours, 15 % of it; x scale)
    and phase (peak of the 24-hour harmonic, ±2 h) of the hourly utilisation and submission curves."""
    ref, scale = reference(), dataset_scale(ds)
    curves = (
        (
            "Fig 2a",
            "utilisation",
            queries.diurnal_utilization(ds),
            "gpu_utilization_pct",
            "diurnal_gpu_utilization_pct",
        ),
        (
            "Fig 2b",
            "GPU-job submissions per hour",
            queries.diurnal_submissions(ds),
            "gpu_jobs_per_hour",
            "diurnal_gpu_job_submissions_per_hour",
        ),
    )
    out = []
    for source, label, df, col, key in curves:
        got = by_cluster(df, "hour", col)
        for c in [c for c in CLUSTERS if c in got]:
            published = list(ref[key][c])
            values = [got[c].get(h) for h in range(24)]
            complete = None not in values
            if source == "Fig 2a":
                mean = float(np.mean(values)) if complete else None
                stat = f"diurnal mean utilisation % (published x {scale:g})"
                out.append(relative(source, c, stat, float(np.mean(published)) * scale, mean, UTIL_REL_PCT))
            amplitude = float(max(values) - min(values)) if complete else None
            out.append(_amplitude_check(source, c, label, published, amplitude, scale))
            out.append(_phase_check(source, c, f"diurnal {label}: hour of the daily peak", published, values))
    return out


def _amplitude_check(
    source: str, cluster: str, label: str, published: list[float], value: float | None, scale: float
) -> Check:
    want = (max(published) - min(published)) * scale
    stat = f"diurnal {label}: max - min over the hours (published x {scale:g})"
    if source == "Fig 2a":
        tol = max(want * REL_PCT / 100, AMPLITUDE_FLOOR_PP * scale)
        return absolute(source, cluster, stat, want, value, tol, "pp")
    return relative(source, cluster, stat, want, value, REL_PCT)


def shape_checks(ds: Dataset) -> list[Check]:
    """Pearson r of the diurnal curves (Fig 2) and of the monthly job counts and utilisation (Fig 3) against the
    published series: the shapes, whose levels the checks above hold."""
    ref = reference()
    monthly_jobs, monthly_util = _monthly(ds)
    series = [
        ("Fig 2a", "diurnal GPU utilisation", queries.diurnal_utilization(ds), "hour", "gpu_utilization_pct", None),
        ("Fig 2b", "diurnal GPU-job submissions", queries.diurnal_submissions(ds), "hour", "gpu_jobs_per_hour", None),
        ("Fig 3", "monthly single-GPU jobs", monthly_jobs, "m", "single_gpu_jobs", "single_gpu_jobs"),
        ("Fig 3", "monthly multi-GPU jobs", monthly_jobs, "m", "multi_gpu_jobs", "multi_gpu_jobs"),
        *[("Fig 3", f"monthly {label} utilisation", monthly_util, "m", col, col) for label, col in _UTIL_COLUMNS],
    ]
    out = []
    for source, stat, df, key, col, field in series:
        got = by_cluster(df, key, col)
        published_key = "monthly" if field else _DIURNAL_KEYS[col]
        xs = ref["monthly"]["month"] if field else list(range(24))
        for c in [c for c in CLUSTERS if c in got]:
            pub = ref[published_key][c][field] if field else ref[published_key][c]
            values = [got[c].get(x) for x in xs]
            out.append(pearson(source, c, f"{stat} (shape)", pub, [v for v in values if v is not None]))
    return out


_DIURNAL_KEYS = {
    "gpu_utilization_pct": "diurnal_gpu_utilization_pct",
    "gpu_jobs_per_hour": "diurnal_gpu_job_submissions_per_hour",
}
