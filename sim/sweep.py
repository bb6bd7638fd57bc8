"""Grid sweeps of what-if scenarios on Dask distributed (a local cluster, or DASK_SCHEDULER_ADDRESS when set).

A grid maps parameter names to value lists, e.g. {"load_factor": [0.8, 1.0, 1.2], "policy": ["fifo", "qssf"]},
{"ces.buffer": [5, 10, 20], "ces.keep": [6, 12]} or the Slurm twin's knobs {"twin.weight_fairshare": [0, 10000],
"twin.backfill": [0, 1]} (policy `slurm`, on the captured configuration). Every combination is one scenario, one
Dask task on the scattered jobs; the answer is one row per (grid point, scheme) with the comparison metrics (and
one `ces` row per point when CES runs).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import polars as pl

from analytics.scheduler import HasMeta
from analytics.slurm_config import SlurmConfig
from sim.ces.energy import ENERGY_PARAMS
from sim.ces.policy import POLICY_PARAMS
from sim.policies import CLUSTER_WIDE
from sim.scenario import ProgressCallback, ScenarioConfig, ScenarioError, run_scenario, validate, wants_scheduler
from sim.scenario.run import twin_scheduler
from sim.slurm.knobs import KNOBS, param_of

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
TOP_LEVEL: dict[str, type] = {
    "load_factor": float,
    "capacity_scale": float,
    "noise_level": float,
    "policy": str,
    "placer": str,
    "estimator": str,
    "backfill": bool,
}
CES_METRICS: tuple[str, ...] = (
    "original_used_pct",
    "optimized_used_pct",
    "poweroff_mean_nodes",
    "energy_saved_kwh",
    "energy_saved_pct",
    "cost_saved",
    "co2_saved_kg",
    "lack_node_steps",
    "daily_change_times",
)


def sweepable() -> tuple[str, ...]:
    """Every parameter name a grid may use."""
    ces = [f"ces.{name}" for name in (*POLICY_PARAMS, *ENERGY_PARAMS)]
    twin = [f"twin.{name}" for name in KNOBS]
    return (*TOP_LEVEL, *ces, *twin)


def _parse_value(name: str, text: str) -> Any:
    kind = TOP_LEVEL.get(name, float)
    if kind is str:
        return text
    if kind is bool:
        if text.lower() not in ("true", "false", "on", "off", "1", "0"):
            raise ScenarioError(f"grid {name}: {text!r} is not on/off")
        return text.lower() in ("true", "on", "1")
    try:
        return float(text)
    except ValueError as exc:
        raise ScenarioError(f"grid {name}: {text!r} is not a number") from exc


def _grid_name(text: str) -> str:
    """A grid parameter's name as typed, '-' read as '_' (but not in the account or partitions a twin knob names)."""
    text = text.strip()
    param = param_of(text.removeprefix("twin.")) if text.startswith("twin.") else None
    return text if param is not None else text.replace("-", "_")


def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    """Parse 'name=v1,v2,...' items into a grid, rejecting unknown names and empty or bad values."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = _grid_name(name)
        if not sep or not values.strip():
            raise ScenarioError(f"grid item {item!r}: expected name=v1,v2,...")
        if name not in sweepable() and param_of(name.removeprefix("twin.")) is None:
            raise ScenarioError(f"grid parameter {name!r} unknown; expected one of {', '.join(sweepable())}")
        grid[name] = [_parse_value(name, v.strip()) for v in values.split(",") if v.strip()]
    return grid


def apply_point(base: ScenarioConfig, point: dict[str, Any]) -> ScenarioConfig:
    """The scenario of one grid point: base with the point's values set (ces.* values enable CES)."""
    top = {k: v for k, v in point.items() if not k.startswith(("ces.", "twin.")) and k != "policy"}
    if "policy" in point:
        top["policies"] = (point["policy"],)
    twin = {k.removeprefix("twin."): float(v) for k, v in point.items() if k.startswith("twin.")}
    if twin:
        top["twin"] = tuple(sorted((dict(base.twin) | twin).items()))
    config = dataclasses.replace(base, **top)
    ces_values = {k.removeprefix("ces."): float(v) for k, v in point.items() if k.startswith("ces.")}
    if ces_values:
        policy = dict(config.ces.policy) | {k: v for k, v in ces_values.items() if k in POLICY_PARAMS}
        energy = dict(config.ces.energy) | {k: v for k, v in ces_values.items() if k not in POLICY_PARAMS}
        ces = dataclasses.replace(
            config.ces,
            enabled=True,
            policy=tuple(sorted(policy.items())),
            energy=tuple(sorted(energy.items())),
        )
        config = dataclasses.replace(config, ces=ces)
    return validate(config)


def needs_scheduler(base: ScenarioConfig, grid: dict[str, list[Any]]) -> bool:
    """Whether a point of the sweep replays the cluster's own scheduler (and so needs its configuration)."""
    return wants_scheduler(base) or any(p in CLUSTER_WIDE for p in grid.get("policy", ()))


def sweep_scheduler(dataset: HasMeta, base: ScenarioConfig, grid: dict[str, list[Any]]) -> SlurmConfig | None:
    """The captured Slurm configuration the sweep's twin replays, when a point needs it (sim.scenario's
    twin_scheduler)."""
    return twin_scheduler(dataset) if needs_scheduler(base, grid) else None


MAX_GRID_POINTS = 64  # the most scenarios one sweep may run


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in row-major order of the grid's keys (at most MAX_GRID_POINTS)."""
    size = math.prod(len(values) for values in grid.values()) if grid else 0
    if size > MAX_GRID_POINTS:
        raise ScenarioError(f"the grid has {size} points; a sweep runs at most {MAX_GRID_POINTS}")
    names = list(grid)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(grid[n] for n in names))]


def point_rows(
    point: dict[str, Any],
    config: ScenarioConfig,
    jobs: pl.DataFrame,
    vc_gpus: pl.DataFrame,
    scheduler: SlurmConfig | None = None,
) -> list:
    """Run one grid point and return its result rows (one per scheme, plus one for CES)."""
    result = run_scenario(config, jobs, vc_gpus, heartbeat_s=0, keep_records=False, scheduler=scheduler)
    rows = [{**point, **row} for row in result.summary.iter_rows(named=True)]
    if result.ces is not None:
        metrics = result.ces["metrics"]
        rows.append({**point, "scheme": "ces", **{k: metrics.get(k) for k in CES_METRICS}})
    return rows


@contextmanager
def dask_client(n_workers: int = 2) -> Iterator[Any]:
    """A Dask client: to DASK_SCHEDULER_ADDRESS when set, else to a LocalCluster created (and closed) here."""
    from dask.distributed import Client, LocalCluster

    address = os.environ.get(SCHEDULER_ENV)
    if address:
        with Client(address, timeout="10s") as client:
            yield client
        return
    workers = max(1, min(n_workers, os.cpu_count() or 1))
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def run_sweep(
    base: ScenarioConfig,
    grid: dict[str, list[Any]],
    jobs: pl.DataFrame,
    vc_gpus: pl.DataFrame,
    client: Any = None,
    progress: ProgressCallback | None = None,
    scheduler: SlurmConfig | None = None,
) -> pl.DataFrame:
    """Run every grid point as a Dask task (on client, or a fresh dask_client()) and stack their rows (scheduler:
    the captured Slurm configuration the `slurm` policy replays, with each point's twin knobs)."""
    points = grid_points(grid)
    if not points:
        raise ScenarioError("the grid is empty")
    configs = [apply_point(base, p) for p in points]  # validates every point before anything runs
    cluster_jobs = jobs.filter(pl.col("cluster") == base.cluster)
    inputs = (cluster_jobs, vc_gpus, scheduler)
    if client is None:
        with dask_client() as own:
            return _run_on(own, points, configs, inputs, progress)
    return _run_on(client, points, configs, inputs, progress)


def _run_on(client, points, configs, inputs, progress) -> pl.DataFrame:
    from dask.distributed import as_completed

    jobs, vc_gpus, scheduler = inputs
    jobs_f, vc_f = client.scatter([jobs, vc_gpus], broadcast=True)
    futures = [
        client.submit(point_rows, p, c, jobs_f, vc_f, scheduler, pure=False)
        for p, c in zip(points, configs, strict=True)
    ]
    rows: list[dict] = []
    for done, future in enumerate(as_completed(futures), start=1):
        rows.extend(future.result())
        if progress is not None:
            progress(done / len(futures), f"{done}/{len(futures)} grid points done")
    order = {tuple(sorted(p.items())): k for k, p in enumerate(points)}
    frame = pl.DataFrame(rows, infer_schema_length=None)
    keys = list(points[0])
    rank = [order[tuple(sorted({k: r[k] for k in keys}.items()))] for r in rows]
    return frame.with_columns(pl.Series("_point", rank)).sort("_point", maintain_order=True).drop("_point")
