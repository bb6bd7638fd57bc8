"""Speed of the scheduler twin (issue #38 item 5): the `slurm` policy replaying a month of Earth and six months of
Saturn, with the ratio against slurm_sim (the XDMoD team's Slurm simulator: about 100x real time, 20 days of an
8,000-core cluster in 5 h).

    .venv/bin/python bench/twin_speed.py [--dataset helios-synth] [--repeat 3]

Both clusters run under a site-like scheduler: priority/multifactor (fair-share 10000, age 1000, job size 100,
PriorityCalcPeriod 5 min, a 7-day half-life) and sched/backfill with Slurm's defaults (bf_interval 30 s,
bf_window 1 day, bf_max_job_test 500, bf_resolution 60 s), each VC a partition over its own nodes of 8 GPUs
(sim.slurm.calibrate.vc_cluster). A 10x Helios trace (bench/scale_trace.py) is the demo's 26 weeks repeated ten
times over the same clusters, so six months of Saturn in it is the same size as the demo's six months replayed here.
Prints the compile-cache load, the replay's wall and CPU time (medians of --repeat), jobs/s, simulated time per
wall time and peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # this folder's name would shadow the `sim` package

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from analytics.slurm_config import PrioritySpec, SchedSpec  # noqa: E402
from analytics.store import open_dataset  # noqa: E402
from sim import workload  # noqa: E402
from sim.model import GPUS_PER_NODE, SimConfig  # noqa: E402
from sim.slurm import warm  # noqa: E402
from sim.slurm.calibrate import vc_cluster  # noqa: E402
from sim.slurm.workload import simulate_slurm  # noqa: E402

SLURM_SIM_X_REAL_TIME = 100.0  # slurm_sim's published speed (XDMoD team), simulated seconds per wall second
BUDGETS_S = {"Earth": 5.0, "Saturn": 120.0}
CASES = (("Earth", datetime(2020, 7, 1), datetime(2020, 8, 1)), ("Saturn", None, None))
PRIORITY = PrioritySpec(
    multifactor=True, weight_fairshare=10_000, weight_age=1_000, weight_job_size=100, calc_period_s=300
)


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_workload(dataset: str, cluster: str, start: datetime | None, end: datetime | None):
    """The cluster's GPU jobs in [start, end) (the whole trace when None) as the what-if builds them."""
    ds = open_dataset(dataset)
    jobs = ds.jobs().filter(pl.col("cluster") == cluster).collect()
    win = workload.select_window(jobs, cluster, start=start, end=end)
    nodes = workload.vc_nodes_mean(ds.vc_gpus(), cluster, win.start.date(), win.end.date())
    return workload.to_workload(win, nodes, None)


def bench_case(dataset: str, cluster: str, start, end, repeat: int) -> bool:
    """Replay one cluster's window repeat times; print its figures and return whether it met its budget."""
    w = load_workload(dataset, cluster, start, end)
    config = vc_cluster(w, GPUS_PER_NODE, PRIORITY, SchedSpec())
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        began, began_cpu = time.perf_counter(), time.process_time()
        result = simulate_slurm(config, SimConfig(policy="slurm"), w)
        walls.append(time.perf_counter() - began)
        cpus.append(time.process_time() - began_cpu)
    wall_s, cpu_s = statistics.median(walls), statistics.median(cpus)
    span_s = int(w.submit_s.max()) if len(w) else 0
    queue = np.concatenate([v.queue_s[v.start_s >= 0] for v in result.vcs.values()])
    x_real = span_s / wall_s
    met = wall_s <= BUDGETS_S[cluster]
    print(
        f"{cluster:<7} {len(w):>9,} GPU jobs  {sum(w.vc_nodes):>4} nodes  {len(w.vc_names):>3} partitions  "
        f"{span_s / 86_400:5.1f} days  replay {wall_s:6.2f} s, CPU {cpu_s:6.2f} s (budget {BUDGETS_S[cluster]:.0f} s, "
        f"{'met' if met else 'MISSED'})  {len(w) / wall_s:>9,.0f} jobs/s  {x_real:>9,.0f}x real time "
        f"({x_real / SLURM_SIM_X_REAL_TIME:,.0f}x slurm_sim)  mean queue {queue.mean():,.0f} s  "
        f"peak RSS {peak_rss_mb():,.0f} MiB",
        flush=True,
    )
    return met


def main(argv: list[str] | None = None) -> int:
    """Load the compiled model, replay each case and print the table; exit 1 when a budget is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="helios-synth")
    parser.add_argument("--repeat", type=int, default=3, help="replays per case (the median is printed)")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    warm.main()
    print(f"compiled model loaded (or compiled) in {time.perf_counter() - began:.1f} s", flush=True)
    met = [bench_case(args.dataset, cluster, start, end, args.repeat) for cluster, start, end in CASES]
    return 0 if all(met) else 1


if __name__ == "__main__":
    raise SystemExit(main())
