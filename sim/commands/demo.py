"""`helios demo`: build the calibrated synthetic Helios trace, its GPU-job start times from the synthetic queue."""

from __future__ import annotations

import argparse

from analytics import store
from analytics.commands.common import derive, fail, parsed_number
from analytics.progress import Progress
from analytics.synth.build import BUILD_STAGES, MAX_SCALE, MIN_SCALE, SynthParams, build_dataset
from sim.synthetic_queue.calibration import slurm_schedule

QUEUE_MODELS = ("slurm", "sampled")
DEFAULT_QUEUE = "slurm"


def run_demo(args: argparse.Namespace) -> int:
    """Run `helios demo`: generate the synthetic Helios trace and write it as a dataset."""
    scheduler = slurm_schedule if args.queue == "slurm" else None
    progress = Progress(BUILD_STAGES + (scheduler is not None), quiet=args.quiet)
    try:
        params = SynthParams(scale=args.scale, seed=args.seed)
        ds = build_dataset(params, name=args.name, progress=progress, scheduler=scheduler)
        derive(ds, progress)
    except (store.DatasetError, OSError) as exc:
        return fail(str(exc))
    progress.done("built")
    counts = ds.meta["row_counts"]
    print(f"dataset {ds.name}: {counts['jobs']} jobs, clusters {', '.join(ds.meta['clusters'])}")
    print(f"period {ds.meta['period']['start']} .. {ds.meta['period']['end']}; written to {ds.path.parent / ds.name}")
    return 0


def _scale(text: str) -> float:
    value = parsed_number(text, float, "a number")
    if not MIN_SCALE <= value <= MAX_SCALE:
        raise argparse.ArgumentTypeError(f"must be between {MIN_SCALE:g} and {MAX_SCALE:g}, got {value:g}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `demo` sub-command."""
    p = subparsers.add_parser(
        "demo",
        help="build the calibrated synthetic Helios trace (the bundled default dataset)",
        description=(
            "Generate a synthetic trace of Helios' Venus, Earth, Saturn and Uranus clusters (Apr-Sep 2020), calibrated "
            "to the published summary and figures, and write it atomically as dataset NAME."
        ),
    )
    p.add_argument("--scale", type=_scale, default=1.0, help="fraction of the 3,362,981 published jobs (default 1)")
    p.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives the same jobs (default 0)")
    p.add_argument("--name", default=store.DEFAULT_DATASET, help=f"dataset name (default {store.DEFAULT_DATASET})")
    p.add_argument(
        "--queue",
        choices=QUEUE_MODELS,
        default=DEFAULT_QUEUE,
        help=(
            "GPU-job start times: 'slurm' runs each job through the Slurm model the What-if's twin replays (each VC a "
            "partition on a pool of its GPUs, first come first served with backfill, never above capacity), users "
            "submitting again when their VC is full, with the queueing delays drawn to match the published ones and "
            "dealt to the jobs that found no room; 'sampled' draws the delays only (faster, not capacity-bound); "
            f"CPU jobs are always sampled (default {DEFAULT_QUEUE})"
        ),
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run_demo)
