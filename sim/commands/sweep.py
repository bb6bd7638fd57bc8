"""`helios sweep`: a grid of what-if scenarios on Dask (local cluster or DASK_SCHEDULER_ADDRESS)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import polars as pl

from analytics.commands.common import fail, print_json
from analytics.store import DatasetError, open_dataset
from sim import placers, policies
from sim.ces.policy import PRESETS
from sim.ces.run import MODES
from sim.estimators import ESTIMATORS
from sim.scenario import CesOptions, ScenarioConfig, ScenarioError, scenario_inputs, validate
from sim.sweep import SCHEDULER_ENV, parse_grid, run_sweep, sweepable

DEFAULTS = ScenarioConfig()  # the flags' defaults


def register(subparsers) -> None:
    """Add the `sweep` sub-command to subparsers."""
    p = subparsers.add_parser(
        "sweep",
        help="grid sweep of what-if scenarios (e.g. load factor x policy, CES buffer x keep) on Dask",
        description=(
            "Run every combination of --grid values as one scenario on Dask distributed: a local cluster by "
            f"default, or the scheduler at ${SCHEDULER_ENV} when it is set."
        ),
    )
    p.add_argument("--dataset", required=True, help="dataset name under $HELIOS_DATA_DIR")
    p.add_argument("--cluster", required=True)
    p.add_argument("--vc", nargs="+", default=[], help="only these VCs (default: all)")
    p.add_argument("--start", help="first submit day YYYY-MM-DD (default: first job)")
    p.add_argument("--end", help="last submit day YYYY-MM-DD, inclusive (default: last job)")
    p.add_argument(
        "--policies",
        default=",".join(DEFAULTS.policies),
        help=f"policies run at every point, comma-separated ({', '.join(policies.POLICIES)}; none: CES only)",
    )
    p.add_argument("--placer", choices=list(placers.PLACERS), default=DEFAULTS.placer)
    p.add_argument("--backfill", action="store_true")
    p.add_argument("--estimator", choices=list(ESTIMATORS), default=DEFAULTS.estimator)
    p.add_argument(
        "--noise-level", type=float, default=DEFAULTS.noise_level, help="noisy-oracle error level (1 = artifact's)"
    )
    p.add_argument("--load-factor", type=float, default=DEFAULTS.load_factor)
    p.add_argument("--capacity-scale", type=float, default=DEFAULTS.capacity_scale)
    p.add_argument("--seed", type=int, default=DEFAULTS.seed)
    p.add_argument("--ces", action="store_true", help="run CES at every point (ces.* grid values imply it)")
    p.add_argument("--ces-preset", choices=sorted(PRESETS), default=DEFAULTS.ces.preset)
    p.add_argument("--ces-mode", choices=MODES, default=DEFAULTS.ces.mode)
    p.add_argument(
        "--ces-schedule", default=DEFAULTS.ces.schedule, help="recorded, or a policy whose schedule CES replays"
    )
    p.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="NAME=V1,V2",
        help=f"a swept parameter (repeatable); names: {', '.join(sweepable())}",
    )
    p.add_argument("--metric", default="avg_jct_s", help="column shown in the text table (default avg_jct_s)")
    p.add_argument("--json", action="store_true", help="print all rows as JSON")
    p.add_argument("--out", type=Path, help="write all rows to this CSV file")
    p.set_defaults(func=run_command)


def base_config(args: argparse.Namespace) -> ScenarioConfig:
    """The scenario every grid point starts from, built from the command-line options."""
    names = [p.strip() for p in args.policies.split(",") if p.strip()]
    chosen = () if names == ["none"] else tuple(names)
    ces = CesOptions(enabled=args.ces, preset=args.ces_preset, mode=args.ces_mode, schedule=args.ces_schedule)
    config = ScenarioConfig(
        dataset=args.dataset,
        cluster=args.cluster,
        vcs=tuple(args.vc),
        start=args.start,
        end=args.end,
        policies=chosen,
        placer=args.placer,
        backfill=args.backfill,
        estimator=args.estimator,
        noise_level=args.noise_level,
        load_factor=args.load_factor,
        capacity_scale=args.capacity_scale,
        seed=args.seed,
        ces=ces,
    )
    if chosen or args.ces:
        validate(config)
    return config


def _print_table(frame: pl.DataFrame, grid_names: list[str], metric: str) -> None:
    if metric not in frame.columns:
        print(f"helios: warning: no column {metric!r}; columns: {', '.join(frame.columns)}", file=sys.stderr)
        return
    shown = frame.select(*grid_names, "scheme", metric)
    widths = [max(len(c), *(len(str(v)) for v in shown[c].to_list())) + 2 for c in shown.columns]
    print("".join(c.rjust(w) for c, w in zip(shown.columns, widths, strict=True)))
    for row in shown.iter_rows():
        print("".join(str(v).rjust(w) for v, w in zip(row, widths, strict=True)))


def run_command(args: argparse.Namespace) -> int:
    """Entry point of `helios sweep`."""
    started = time.perf_counter()
    try:
        grid = parse_grid(args.grid)
        base = base_config(args)
        jobs, vc_gpus = scenario_inputs(open_dataset(args.dataset), args.cluster)
        frame = run_sweep(base, grid, jobs, vc_gpus, progress=_stderr_progress)
    except (ScenarioError, DatasetError, ValueError, OSError) as exc:
        return fail(str(exc))
    if args.out:
        frame.write_csv(args.out)
    if args.json:
        print_json({"grid": grid, "wall_s": round(time.perf_counter() - started, 3), "rows": frame.to_dicts()})
    else:
        _print_table(frame, list(grid), args.metric)
        print(f"{frame.height} rows in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


def _stderr_progress(fraction: float, message: str) -> None:
    print(f"[{fraction * 100:5.1f} %] {message}", file=sys.stderr, flush=True)
