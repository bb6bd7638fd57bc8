"""The published Helios reference curves (analytics.reference) as long Polars frames for figure overlays."""

from __future__ import annotations

from typing import Any

import polars as pl

from analytics.reference import CLUSTERS, reference

# Figure name -> (JSON key, x key in the JSON, x column of the query frame, y column of the query frame).
CURVES: dict[str, tuple[str, str, str, str]] = {
    "duration_gpu": ("gpu_job_duration_cdf", "x_s", "x_s", "pct"),
    "duration_cpu": ("cpu_job_duration_cdf", "x_s", "x_s", "pct"),
    "gpu_num_jobs": ("gpu_num_cdf_jobs", "x_gpus", "x_gpus", "pct"),
    "gpu_num_time": ("gpu_num_cdf_gpu_time", "x_gpus", "x_gpus", "pct"),
    "diurnal_util": ("diurnal_gpu_utilization_pct", "hour", "hour", "gpu_utilization_pct"),
    "diurnal_submit": ("diurnal_gpu_job_submissions_per_hour", "hour", "hour", "gpu_jobs_per_hour"),
    "conc_gpu": ("user_gpu_time_cdf", "user_pct", "user_pct", "share_pct"),
    "conc_cpu": ("user_cpu_time_cdf", "user_pct", "user_pct", "share_pct"),
    "conc_queue": ("user_gpu_queue_time_cdf", "user_pct", "user_pct", "share_pct"),
}


def load_reference() -> dict[str, Any]:
    """The published reference values, or {} when the file cannot be read."""
    try:
        return reference()
    except (OSError, ValueError):
        return {}


def reference_curve(figure: str) -> pl.DataFrame:
    """The published curve(s) matching a figure as columns cluster, <x>, <y> (empty when there is none)."""
    if figure not in CURVES:
        return pl.DataFrame()
    key, x_key, x_col, y_col = CURVES[figure]
    block = load_reference().get(key)
    if not block:
        return pl.DataFrame()
    xs = [str(x) for x in block[x_key]] if x_col == "x_gpus" else list(block[x_key])
    frames = [
        pl.DataFrame({"cluster": [f"Helios {c}"] * len(xs), x_col: xs, y_col: [float(v) for v in block[c]]})
        for c in CLUSTERS
        if c in block
    ]
    return pl.concat(frames) if frames else pl.DataFrame()
