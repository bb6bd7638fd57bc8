"""Compile the Slurm model once, at install (`make install` runs `python -m sim.slurm.warm`): tiny replays under
each scheduler setting that takes its own code path, so that numba's on-disk cache holds every pass and the first
what-if, test or page that replays the scheduler loads machine code instead of compiling it."""

from __future__ import annotations

import sys
import time
from dataclasses import replace

import numpy as np

from analytics.slurm_config import AssocSpec, NodeSpec, PartitionSpec, PrioritySpec, QosSpec, SchedSpec, SlurmConfig
from sim.slurm.jobs import build_jobs
from sim.slurm.run import replay

_BASE = SlurmConfig(
    nodes=(NodeSpec("n1", 4, 8), NodeSpec("n2", 4, 8)),
    partitions=(PartitionSpec("a", (0, 1), max_time_s=600), PartitionSpec("b", (1,))),
    assocs=(AssocSpec("x", shares=2, grp_gpus=6), AssocSpec("y", grp_jobs=3), AssocSpec("x", user="u1", max_jobs=2)),
    qos=(QosSpec("normal", max_gpus_per_user=6, max_jobs_per_user=3),),
    priority=PrioritySpec(
        multifactor=True,
        weight_age=1000,
        weight_fairshare=10000,
        weight_job_size=100,
        decay_half_life_s=600,
        calc_period_s=60,
        favor_small=True,
    ),
    sched=SchedSpec(backfill=True, sched_interval_s=10, bf_interval_s=5, bf_resolution_s=5, bf_max_job_test=4),
)


def _variants() -> list[SlurmConfig]:
    """The settings whose passes differ: Fair Tree and classic fair-share, backfill and builtin, basic priority."""
    return [
        _BASE,
        replace(_BASE, priority=replace(_BASE.priority, fair_tree=False, dampening=2)),
        replace(_BASE, sched=replace(_BASE.sched, backfill=False)),
        replace(_BASE, priority=PrioritySpec(), sched=replace(_BASE.sched, bf_continue=True)),
    ]


def _jobs(config: SlurmConfig, n_jobs: int = 40):
    """n_jobs deterministic jobs over both partitions, accounts and users, some past their time limits."""
    rng = np.random.default_rng(7)
    users = ["u1", "u2", "u3"]
    user = [users[i % 3] for i in range(n_jobs)]
    jobs, _ = build_jobs(
        config,
        submit_s=np.sort(rng.integers(0, 900, n_jobs)),
        duration_s=rng.integers(10, 400, n_jobs),
        gpus=rng.choice([0, 1, 2, 4, 8], n_jobs),
        cpus=rng.choice([1, 2], n_jobs),
        partition=["a" if i % 4 else "b" for i in range(n_jobs)],
        account=["x" if u == "u1" else "y" for u in user],
        user=user,
        timelimit_s=[None if i % 5 == 0 else 200 for i in range(n_jobs)],
        qos=["normal"] * n_jobs,
    )
    return jobs


def main() -> int:
    """Replay each variant once and say how long compiling (or loading) the model took."""
    began = time.perf_counter()
    for config in _variants():
        replay(config, _jobs(config), boot_s=-7)
    print(f"Slurm model compiled and cached in {time.perf_counter() - began:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
