"""How the one Slurm model (sim/slurm) queues the demo generator's GPU jobs as drawn, before the generator's closed
loop moves any of them, for one cluster and six months, under variants of the model (issue #39: what a generator on
the twin's model must change; docs/benchmarks.md, the #39 item 3 section):

    .venv/bin/python bench/first_run.py [--cluster Venus] [--scale 1] [--seed 0] [--variants nodes,pools,...]

Variants (each VC a partition, priority/basic, sched/backfill):
  nodes         the VC's nodes of 8 GPUs in service as its capacity of each day, Slurm's default depths and intervals,
                no time limits (as the calibrated twin replays)
  nodes+limits  the same, each job's limit its duration rounded up to a minute
  pools         each VC one node of its most GPUs (placement by GPU count), defaults, no limits
  pools+limits  pools with those limits
  pools+deep    pools, no limits, default_queue_depth and bf_max_job_test 100,000, both passes every second
Prints per variant the replay's seconds, the mean wait, the share of jobs that wait and the mean wait of jobs of 8
GPUs or more.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # this folder's name would shadow the `sim` package

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from analytics.slurm_config import NodeSpec, PartitionSpec, SchedSpec, SlurmConfig  # noqa: E402
from analytics.synth.build import SynthParams, generate  # noqa: E402
from sim import workload  # noqa: E402
from sim.model import GPUS_PER_NODE, SchedulerColumns, SimConfig, Workload  # noqa: E402
from sim.slurm import warm  # noqa: E402
from sim.slurm.calibrate import CPUS_PER_NODE, node_changes, vc_cluster  # noqa: E402
from sim.slurm.workload import simulate_slurm  # noqa: E402

VARIANTS = ("nodes", "nodes+limits", "pools", "pools+limits", "pools+deep")
DEEP = SchedSpec(default_queue_depth=100_000, bf_max_job_test=100_000, sched_interval_s=1, bf_interval_s=1)
BIG_GPUS = 8


def drawn_workload(cluster: str, scale: float, seed: int) -> Workload:
    """The cluster's GPU jobs as the generator draws them (submit order), with its VCs' daily node steps."""
    jobs, vc_gpus = generate(SynthParams(scale=scale, seed=seed))
    gpu = jobs.filter((pl.col("cluster") == cluster) & (pl.col("gpu_num") > 0)).sort("submit_time", "job_id")
    t0 = datetime.combine(gpu["submit_time"].min().date(), datetime.min.time())
    submit_s = (gpu["submit_time"] - t0).dt.total_seconds().to_numpy().astype(np.int64)
    steps = workload.vc_node_steps(vc_gpus, cluster, t0, t0 + timedelta(seconds=int(submit_s.max())))
    names = tuple(sorted(set(steps) | set(gpu["vc"].to_list())))
    index = {v: i for i, v in enumerate(names)}
    users = np.asarray(gpu["user"].to_list(), dtype=object)
    return Workload(
        job_id=gpu["job_id"].to_numpy(),
        vc_index=np.array([index[v] for v in gpu["vc"].to_list()], dtype=np.int32),
        submit_s=submit_s,
        duration_s=gpu["duration"].fill_null(0).clip(lower_bound=0).to_numpy().astype(np.int64),
        gpu_num=gpu["gpu_num"].to_numpy().astype(np.int64),
        predicted_s=np.zeros(gpu.height),
        vc_names=names,
        vc_nodes=tuple(0 for _ in names),
        scheduler=SchedulerColumns(users, None, None, None, None, None, None, None),
        vc_node_steps=tuple(steps.get(v, ((0, 0),)) for v in names),
    )


def with_limits(w: Workload) -> Workload:
    """w with each job's time limit its duration rounded up to a minute (at least one)."""
    limit_s = np.maximum((w.duration_s + 59) // 60 * 60, 60).astype(np.int64)
    cols = w.scheduler
    scheduler = SchedulerColumns(cols.user, None, None, None, limit_s, None, None, None)
    return Workload(**{**w.__dict__, "scheduler": scheduler})


def pools(w: Workload, sched: SchedSpec | None = None) -> SlurmConfig:
    """Each VC one node of its most GPUs over the steps."""
    most = [max((n for _, n in steps), default=0) * GPUS_PER_NODE for steps in w.vc_node_steps]
    nodes = tuple(NodeSpec(f"{v}-pool", g, CPUS_PER_NODE * max(g, 1)) for v, g in zip(w.vc_names, most, strict=True))
    parts = tuple(PartitionSpec(v, (i,)) for i, v in enumerate(w.vc_names))
    return SlurmConfig(nodes=nodes, partitions=parts, sched=sched or SchedSpec())


def run_variant(name: str, w: Workload) -> str:
    """One variant's replay of w, as a line of figures."""
    on_nodes = name.startswith("nodes")
    replayed = with_limits(w) if name.endswith("+limits") else w
    config = vc_cluster(w, GPUS_PER_NODE) if on_nodes else pools(w, DEEP if name == "pools+deep" else None)
    t = time.perf_counter()
    out = simulate_slurm(config, SimConfig(policy="slurm"), replayed, node_changes(w) if on_nodes else ())
    wall_s = time.perf_counter() - t
    start_s = np.full(len(w), -1, dtype=np.int64)
    for vc in out.vcs.values():
        start_s[vc.rows] = vc.start_s
    ran = start_s >= 0
    wait_s = (start_s - w.submit_s)[ran]
    big = (w.gpu_num >= BIG_GPUS)[ran]
    return (
        f"{name:13s} {wall_s:7.1f} s  mean wait {wait_s.mean():9.0f} s  waiting {100 * (wait_s > 0).mean():5.1f} %  "
        f"jobs of >= {BIG_GPUS} GPUs {wait_s[big].mean() if big.any() else 0:9.0f} s  never started {(~ran).sum()}"
    )


def main(argv: list[str] | None = None) -> int:
    """Print each variant's figures."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", default="Venus")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    args = p.parse_args(argv)
    chosen = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(chosen) - set(VARIANTS))
    if unknown:
        p.error(f"unknown variants {', '.join(unknown)}; choose among {', '.join(VARIANTS)}")
    warm.main()
    w = drawn_workload(args.cluster, args.scale, args.seed)
    print(f"{args.cluster}, scale {args.scale:g}, seed {args.seed}: {len(w):,} GPU jobs as drawn", flush=True)
    for name in chosen:
        print(run_variant(name, w), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
