"""The published Helios reference curves (analytics.reference) as long Polars frames for figure overlays."""

from __future__ import annotations

from typing import Any

import polars as pl

from analytics.queries.jobs import POOLED_HELIOS
from analytics.reference import CLUSTERS, reference
from components.charts.figures import COLOR_KEY

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


# Figure name -> (JSON key, series) of a published curve of all Helios clusters pooled (Fig 1a's "Helios").
POOLED: dict[str, tuple[str, str]] = {"duration_gpu": ("helios_vs_philly_gpu_duration_cdf", "Helios")}
FIG4_COLUMNS: tuple[str, ...] = (
    "mean_pct",
    "median_pct",
    "q1_pct",
    "q3_pct",
    "whisker_low_pct",
    "whisker_high_pct",
    "avg_gpus_per_job",
    "norm_avg_duration_pct",
    "norm_avg_queue_pct",
)


def reference_curve(figure: str) -> pl.DataFrame:
    """The published curve(s) matching a figure as columns cluster, color_key (the cluster whose colour it takes),
    <x>, <y> (empty when there is none): one per Helios cluster, and all of them pooled where the paper draws that
    (Fig 1a)."""
    if figure not in CURVES:
        return pl.DataFrame()
    key, x_key, x_col, y_col = CURVES[figure]
    ref = load_reference()
    block = ref.get(key)
    if not block:
        return pl.DataFrame()
    xs = [str(x) for x in block[x_key]] if x_col == "x_gpus" else list(block[x_key])
    series = [(f"Helios {c}", c, block[c]) for c in CLUSTERS if c in block]
    pooled_key, pooled = POOLED.get(figure, ("", ""))
    if pooled and pooled in ref.get(pooled_key, {}):
        series.append((f"{pooled} (Fig 1a)", POOLED_HELIOS, ref[pooled_key][pooled]))
    frames = [
        pl.DataFrame({"cluster": [n] * len(xs), COLOR_KEY: [key] * len(xs), x_col: xs, y_col: [float(v) for v in ys]})
        for n, key, ys in series
    ]
    return pl.concat(frames) if frames else pl.DataFrame()


def fig4_published() -> pl.DataFrame:
    """The published Fig 4 values per VC (Earth, May 2020) as columns vc, pub_order (the figure's order) and
    pub_<column>; empty without the file."""
    block = load_reference().get("earth_may_vc_utilization") or {}
    rows = [
        {"vc": vc, "pub_order": i, **{f"pub_{c}": float(v[c]) for c in FIG4_COLUMNS}}
        for i, (vc, v) in enumerate(block.items())
    ]
    schema = {"vc": pl.String(), "pub_order": pl.Int64(), **{f"pub_{c}": pl.Float64() for c in FIG4_COLUMNS}}
    return pl.DataFrame(rows, schema=schema)
