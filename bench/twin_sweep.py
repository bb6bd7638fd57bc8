"""A 64-point sweep of the scheduler twin's knobs on Dask (issue #38 item 5): the `slurm` policy over a month of
Earth with every combination of PriorityWeightFairshare and PriorityWeightAge (0, 1,000, 10,000, 100,000),
backfill on or off and bf_window (1 h, 1 day), as `helios sweep --grid twin.<knob>=...` runs it.

    .venv/bin/python bench/twin_sweep.py [--dataset helios-synth] [--workers 2]

The captured configuration is the one bench/twin_speed.py replays (each VC a partition over its own 8-GPU nodes,
sim.slurm.calibrate.vc_cluster); each grid point is one Dask task on a local cluster of --workers processes.
Prints the sweep's wall time, seconds per point, the Dask workers' peak memory and the spread of the mean queue
over the grid.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # this folder's name would shadow the `sim` package

import polars as pl  # noqa: E402

from analytics.slurm_config import SchedSpec  # noqa: E402
from analytics.store import open_dataset  # noqa: E402
from bench.twin_speed import PRIORITY, load_workload  # noqa: E402
from sim.model import GPUS_PER_NODE  # noqa: E402
from sim.scenario import ScenarioConfig, config_inputs  # noqa: E402
from sim.slurm import warm  # noqa: E402
from sim.slurm.calibrate import vc_cluster  # noqa: E402
from sim.sweep import dask_client, grid_points, run_sweep  # noqa: E402

CLUSTER, START, END = "Earth", "2020-07-01", "2020-07-31"
GRID = {
    "twin.weight_fairshare": [0, 1_000, 10_000, 100_000],
    "twin.weight_age": [0, 1_000, 10_000, 100_000],
    "twin.backfill": [0, 1],
    "twin.bf_window_s": [3_600, 86_400],
}


def _worker_peak_mb() -> float:
    """This process's peak resident memory in MiB (run on each Dask worker)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    """Run the 64-point sweep on a local Dask cluster and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="helios-synth")
    parser.add_argument("--workers", type=int, default=2, help="Dask worker processes (default 2)")
    args = parser.parse_args(argv)
    warm.main()
    w = load_workload(args.dataset, CLUSTER, datetime.fromisoformat(START), datetime(2020, 8, 1))
    scheduler = vc_cluster(w, GPUS_PER_NODE, PRIORITY, SchedSpec())
    base = ScenarioConfig(dataset=args.dataset, cluster=CLUSTER, start=START, end=END, policies=("slurm",))
    jobs, vc_gpus = config_inputs(open_dataset(args.dataset), base)
    n_points = len(grid_points(GRID))
    with dask_client(args.workers) as client:
        began = time.perf_counter()
        frame = run_sweep(base, GRID, jobs, vc_gpus, client=client, scheduler=scheduler)
        wall_s = time.perf_counter() - began
        worker_mb = client.run(_worker_peak_mb)
    twin = frame.filter(pl.col("scheme") == "slurm").sort("avg_queue_s")
    print(
        f"{n_points} grid points ({len(w):,} GPU jobs each, {CLUSTER} {START}..{END}) on {args.workers} Dask workers: "
        f"{wall_s:.1f} s wall, {wall_s * args.workers / n_points:.2f} worker-s per point; "
        f"worker peak RSS {max(worker_mb.values()):,.0f} MiB"
    )
    names = list(GRID)
    for label, row in (("lowest", twin.row(0, named=True)), ("highest", twin.row(-1, named=True))):
        knobs = ", ".join(f"{n.removeprefix('twin.')}={row[n]:g}" for n in names)
        print(f"{label} mean queue {row['avg_queue_s']:,.0f} s ({knobs})")
    return 0 if twin.height == n_points else 1


if __name__ == "__main__":
    raise SystemExit(main())
