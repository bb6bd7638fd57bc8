"""The published Helios reference values (helios_reference.json) as long Polars frames for figure overlays."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl

REFERENCE_FILE = "helios_reference.json"
CLUSTERS: tuple[str, ...] = ("Venus", "Earth", "Saturn", "Uranus")
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


def reference_paths() -> list[Path]:
    """Where the reference file is looked for, in order: analytics/reference/, then $HELIOS_SHARED_DIR/spec/."""
    paths = [Path(__file__).resolve().parents[1] / "analytics" / "reference" / REFERENCE_FILE]
    shared = os.environ.get("HELIOS_SHARED_DIR")
    if shared:
        paths.append(Path(shared) / "spec" / REFERENCE_FILE)
    return paths


@lru_cache(maxsize=1)
def load_reference() -> dict[str, Any]:
    """The published reference values, or {} when no copy of the file is found."""
    for path in reference_paths():
        if path.is_file():
            return json.loads(path.read_text())
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
