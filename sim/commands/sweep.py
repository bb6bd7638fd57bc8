"""`helios sweep`: a grid of what-if scenarios on Dask (local cluster or DASK_SCHEDULER_ADDRESS)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import polars as pl

from analytics.commands.common import fail, print_json
from analytics.store import DatasetError, open_dataset
from sim.commands.scenario_options import add_scenario_arguments, base_config
from sim.scenario import ScenarioError, check_applicable, config_inputs
from sim.sweep import SCHEDULER_ENV, parse_grid, run_sweep, sweep_scheduler, sweepable


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
    add_scenario_arguments(p)
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
        dataset = open_dataset(args.dataset)
        check_applicable(base, dataset)
        jobs, vc_gpus = config_inputs(dataset, base)
        scheduler = sweep_scheduler(dataset, base, grid)
        frame = run_sweep(base, grid, jobs, vc_gpus, progress=_stderr_progress, scheduler=scheduler)
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
