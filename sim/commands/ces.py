"""`helios ces`: Cluster Energy Saving on a node-demand series or on busy nodes derived from a dataset."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from analytics.commands.common import fail, print_json
from analytics.store import DatasetError, open_dataset
from sim import engine, workload
from sim.ces.demand import dataset_node_series
from sim.ces.energy import EnergyParams
from sim.ces.forecast_artifact import FEATURE_SETS, feature_set_for
from sim.ces.policy import PRESETS, PolicyParams
from sim.ces.run import MODES, CesConfig, run_ces
from sim.ces.series import SeriesError, load_node_series
from sim.model import SimConfig
from sim.policies import POLICIES

JSON_KEYS = (
    "original_used_pct",
    "optimized_used_pct",
    "poweroff_mean_nodes",
    "daily_change_times",
    "daily_increase_times",
    "rmse",
    "smape",
    "node_hours_off",
    "energy_saved_kwh",
    "cost_saved",
    "co2_saved_kg",
    "lack_node_steps",
    "wall_s",
)
TIMELINE_FILE = "ces_timeline.parquet"


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _add_dataclass_options(group: argparse._ArgumentGroup, cls: type, what: str) -> None:
    for f in dataclasses.fields(cls):
        kind = int if isinstance(f.default, int) and not isinstance(f.default, bool) else float
        helptext = f"{f.metadata['help']} (default {f.default}{what})"
        group.add_argument(_option(f.name), dest=f.name, type=kind, metavar="X", help=helptext)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `ces` sub-command."""
    p = subparsers.add_parser(
        "ces",
        help="forecast busy nodes, power idle nodes off and account for energy saved (CES)",
        description="Cluster Energy Saving: forecast busy nodes, run the power policy, account for energy.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--node-sequence", type=Path, metavar="CSV", help="per-minute CSV: time, active, total")
    src.add_argument("--dataset", metavar="NAME", help="dataset whose GPU jobs are replayed on nodes")
    p.add_argument("--cluster", help="cluster of --dataset")
    p.add_argument(
        "--schedule",
        choices=("recorded", *sorted(POLICIES)),
        default="recorded",
        help="job times replayed on nodes: recorded, or simulated with this policy (oracle durations)",
    )
    p.add_argument("--preset", choices=sorted(PRESETS), help="policy preset (default: cluster's or philly)")
    p.add_argument(
        "--mode",
        choices=MODES,
        default="honest",
        help="honest (default): forecasts from data up to each decision; artifact: the artifact's exact, "
        "leaky forecast; recursive: the artifact's model fed its own forecasts",
    )
    p.add_argument(
        "--artifact-features",
        choices=sorted(FEATURE_SETS),
        help="feature set of the artifact and recursive modes: philly (CES_Philly.py's 16 columns) or helios "
        "(+ holiday, event); default: helios for the venus/earth/saturn/uranus presets, else philly",
    )
    p.add_argument("--predictions", type=Path, metavar="CSV", help="time, active forecast to use instead")
    p.add_argument("--start", type=datetime.fromisoformat, help="window start (default: --end - 14 days)")
    p.add_argument("--end", type=datetime.fromisoformat, help="window end, exclusive (default: last day)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")
    p.add_argument("--out", type=Path, metavar="DIR", help=f"write the timeline to DIR/{TIMELINE_FILE}")
    policy_group = p.add_argument_group("power policy (10-minute steps)")
    _add_dataclass_options(policy_group, PolicyParams, ", or the preset's")
    _add_dataclass_options(p.add_argument_group("energy accounting"), EnergyParams, "")
    p.set_defaults(func=run)


def _params(cls: type, base, args: argparse.Namespace):
    names = [f.name for f in dataclasses.fields(cls)]
    given = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    return dataclasses.replace(base, **given)


def _check_policy(params: PolicyParams) -> None:
    for name in ("history", "future", "warmup"):
        if getattr(params, name) < 1:
            raise ValueError(f"--{name} must be at least 1, got {getattr(params, name)}")
    for name in ("buffer", "keep"):
        if getattr(params, name) < 0:
            raise ValueError(f"--{name} must not be negative, got {getattr(params, name)}")


def read_predictions(path: Path) -> pl.DataFrame:
    """Read a `time, active` forecast CSV, with a one-line error naming the file, row and column."""
    if not path.is_file():
        raise SeriesError(f"{path}: file not found")
    raw = pl.read_csv(path, infer_schema_length=0)
    for col in ("time", "active"):
        if col not in raw.columns:
            raise SeriesError(f"{path}: missing column {col}; expected time, active")
    out = raw.select(
        pl.col("time").str.to_datetime(strict=False, time_unit="us"),
        pl.col("active").cast(pl.Float64, strict=False),
    )
    for col in ("time", "active"):
        bad = np.flatnonzero(out[col].is_null().to_numpy())
        if len(bad):
            row = int(bad[0])
            value = raw[col][row]
            shown = "an empty value" if value is None else repr(value)
            raise SeriesError(f"{path}: row {row + 2}, column {col}: cannot parse {shown}")
    return out


def simulated_times(jobs: pl.DataFrame, vc_gpus: pl.DataFrame, cluster: str, policy: str):
    """The cluster's GPU jobs with start and end times of a simulated schedule, and the unplaceable count."""
    window = workload.select_window(jobs, cluster)
    nodes = workload.vc_nodes_on(vc_gpus, cluster, window.end.date())
    oracle = window.jobs["duration"].fill_null(0).to_numpy().astype(np.float64)
    wl = workload.to_workload(window, nodes, predicted_s=oracle)
    result = engine.run(SimConfig(policy=policy), wl)
    rows = np.concatenate([r.rows for r in result.vcs.values()])
    start_s = np.concatenate([r.start_s for r in result.vcs.values()])
    end_s = np.concatenate([r.end_s for r in result.vcs.values()])
    ok = start_s >= 0
    t0 = np.datetime64(window.start, "us")
    frame = pl.DataFrame(
        {
            "vc": [wl.vc_names[v] for v in wl.vc_index[rows[ok]].tolist()],
            "gpu_num": wl.gpu_num[rows[ok]],
            "start_time": t0 + start_s[ok].astype("timedelta64[s]"),
            "end_time": t0 + end_s[ok].astype("timedelta64[s]"),
        }
    )
    return frame, int((~ok).sum())


def load_dataset_series(name: str, cluster: str | None, schedule: str = "recorded"):
    """Busy nodes of one cluster of a dataset, the GPU jobs' start times and the number of unplaced jobs."""
    ds = open_dataset(name)
    clusters = ds.clusters or ds.jobs().select("cluster").unique().collect()["cluster"].to_list()
    if cluster is None or cluster not in clusters:
        raise ValueError(f"--cluster must name a cluster of {name!r}: {', '.join(sorted(clusters))}")
    columns = ["vc", "gpu_num", "start_time", "end_time"]
    if schedule != "recorded":
        columns += ["cluster", "job_id", "submit_time", "duration"]
    gpu_jobs = (pl.col("cluster") == cluster) & (pl.col("gpu_num") > 0)
    jobs = ds.jobs().filter(gpu_jobs).select(columns).collect()
    vc_gpus = ds.vc_gpus().filter(pl.col("cluster") == cluster)
    unplaceable = 0
    if schedule != "recorded":
        jobs, unplaceable = simulated_times(jobs, vc_gpus, cluster, schedule)
    series, unplaced = dataset_node_series(jobs, vc_gpus)
    starts = jobs.filter(pl.col("gpu_num") > 0)["start_time"].drop_nulls().cast(pl.Datetime("us")).to_numpy()
    return series, starts, unplaced + unplaceable


def _config(args: argparse.Namespace, preset: str) -> CesConfig:
    policy = _params(PolicyParams, PRESETS[preset], args)
    _check_policy(policy)
    predictions = read_predictions(args.predictions) if args.predictions else None
    energy = _params(EnergyParams, EnergyParams(), args)
    features = args.artifact_features or feature_set_for(preset)
    return CesConfig(args.mode, args.start, args.end, policy, energy, predictions, features)


def _default_preset(cluster: str | None) -> str:
    name = (cluster or "").lower()
    return name if name in PRESETS else "philly"


def _print_text(metrics: dict) -> None:
    for key, value in metrics.items():
        shown = f"{value:.4f}" if isinstance(value, float) else value
        print(f"{key:>24}: {shown}")


def run(args: argparse.Namespace) -> int:
    """Run one CES experiment and print its metrics (text or JSON)."""
    t0 = time.perf_counter()
    try:
        if args.dataset:
            series, starts, unplaced = load_dataset_series(args.dataset, args.cluster, args.schedule)
        else:
            series, starts, unplaced = load_node_series(args.node_sequence), None, 0
        preset = args.preset or _default_preset(args.cluster)
        result = run_ces(series, _config(args, preset), job_starts=starts)
    except (SeriesError, DatasetError, ValueError) as exc:
        return fail(str(exc))
    metrics = {"preset": preset, **result.metrics, "wall_s": time.perf_counter() - t0}
    if args.dataset:
        metrics["unplaced_jobs"] = unplaced
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        result.timeline.write_parquet(args.out / TIMELINE_FILE)
        (args.out / "ces_metrics.json").write_text(json.dumps(metrics, indent=2, default=str) + "\n")
    if args.json:
        print_json({k: metrics[k] for k in JSON_KEYS} | metrics)
    else:
        _print_text(metrics)
    sys.stdout.flush()
    return 0
