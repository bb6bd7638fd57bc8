"""The CES part of a scenario: replay the recorded or a simulated schedule on nodes and run the energy policy."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

from sim import workload
from sim.ces.demand import dataset_node_series
from sim.ces.energy import EnergyParams
from sim.ces.forecast_artifact import feature_set_for
from sim.ces.policy import PRESETS, PolicyParams
from sim.ces.run import CesConfig, run_ces
from sim.scenario.config import RECORDED, CesOptions


def _ces_config(ces: CesOptions, window: workload.Window) -> CesConfig:
    policy = dataclasses.replace(PRESETS[ces.preset], **{k: _as_field(PolicyParams, k, v) for k, v in ces.policy})
    energy = dataclasses.replace(EnergyParams(), **{k: _as_field(EnergyParams, k, v) for k, v in ces.energy})
    end = window.end.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    start = window.start.replace(hour=0, minute=0, second=0, microsecond=0)
    features = feature_set_for(ces.preset)
    return CesConfig(mode=ces.mode, start=start, end=end, policy=policy, energy=energy, artifact_features=features)


def _as_field(cls: type, name: str, value: float):
    default = next(f.default for f in dataclasses.fields(cls) if f.name == name)
    return int(value) if isinstance(default, int) and not isinstance(default, bool) else float(value)


def _ces_jobs(jobs: pl.DataFrame, window: workload.Window, simulated: pl.DataFrame | None) -> pl.DataFrame:
    """Recorded GPU jobs up to the window end, the window's jobs at simulated times when given."""
    cols = ["job_id", "vc", "gpu_num", "start_time", "end_time"]
    gpu = jobs.filter(
        (pl.col("cluster") == window.jobs["cluster"][0])
        & (pl.col("gpu_num") > 0)
        & (pl.col("submit_time") <= window.end)
    ).select(cols)
    if simulated is None:
        return gpu
    before = gpu.filter(~pl.col("job_id").is_in(simulated["job_id"].implode()))
    return pl.concat([before, simulated.select(cols)], how="vertical_relaxed")


def _simulated_times(records: pl.DataFrame, t0: datetime) -> pl.DataFrame:
    placed = records.filter(pl.col("placed"))
    base = pl.lit(t0)
    return placed.select(
        "job_id",
        "vc",
        "gpu_num",
        (base + pl.duration(seconds=pl.col("start_s"))).alias("start_time"),
        (base + pl.duration(seconds=pl.col("end_s"))).alias("end_time"),
    )


def run_ces_part(
    ces: CesOptions, jobs: pl.DataFrame, vc_gpus: pl.DataFrame, window: workload.Window, records: dict
) -> dict[str, Any]:
    """Replay the chosen schedule on nodes and run CES over the window days: metrics and timeline."""
    simulated = None
    if ces.schedule != RECORDED:
        simulated = _simulated_times(records[ces.schedule], window.start)
    cluster = window.jobs["cluster"][0]
    series, unplaced = dataset_node_series(
        _ces_jobs(jobs, window, simulated), vc_gpus.filter(pl.col("cluster") == cluster)
    )
    result = run_ces(series, _ces_config(ces, window))
    out = {k: v for k, v in result.metrics.items() if not isinstance(v, float) or np.isfinite(v)}
    out["unplaced_jobs"] = unplaced
    return {"metrics": out, "timeline": result.timeline}
