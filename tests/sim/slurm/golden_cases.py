"""Random Slurm configurations and workloads (nodes, partitions, accounts, QOS, limits, both fair-share algorithms,
backfill and builtin) whose replays by the Python model of commit 34bb988 are recorded in data/slurm_goldens.json:
the compiled model must replay them to the same second."""

import random

import numpy as np

from analytics.slurm_config import AssocSpec, NodeSpec, PartitionSpec, PrioritySpec, QosSpec, SchedSpec, SlurmConfig
from sim.slurm.jobs import build_jobs


def case(seed: int):
    """Configuration, jobs and slurmctld boot second of random case seed."""
    r = random.Random(seed)
    n_nodes = r.randint(1, 6)
    nodes = tuple(NodeSpec(f"n{i}", r.choice([2, 4, 8]), r.choice([8, 16, 32])) for i in range(n_nodes))
    parts = []
    for p in range(r.randint(1, 3)):
        ns = tuple(sorted(r.sample(range(n_nodes), r.randint(1, n_nodes))))
        parts.append(
            PartitionSpec(
                f"p{p}",
                ns,
                max_time_s=r.choice([None, 3000, 20000]),
                max_nodes=r.choice([None, None, 1, 2]),
                priority_job_factor=r.randint(1, 5),
                priority_tier=r.choice([1, 1, 2]),
            )
        )
    accounts = [f"a{i}" for i in range(r.randint(1, 4))]
    users = [f"u{i}" for i in range(r.randint(1, 6))]
    assocs = [
        AssocSpec(
            a, shares=r.randint(1, 10), grp_gpus=r.choice([None, None, 4, 8, 16]), grp_jobs=r.choice([None, None, 3])
        )
        for a in accounts
    ]
    ua = {u: r.choice(accounts) for u in users}
    assocs += [AssocSpec(ua[u], user=u, shares=r.randint(1, 5), max_jobs=r.choice([None, None, 2])) for u in users]
    qos = (
        QosSpec("normal"),
        QosSpec(
            "high",
            priority=r.randint(0, 100),
            max_gpus_per_user=r.choice([None, 4]),
            max_jobs_per_user=r.choice([None, 2]),
        ),
    )
    pr = PrioritySpec(
        multifactor=r.random() < 0.85,
        weight_age=r.choice([0, 1000, 10000]),
        weight_fairshare=r.choice([0, 1000, 100000]),
        weight_job_size=r.choice([0, 500]),
        weight_partition=r.choice([0, 1000]),
        weight_qos=r.choice([0, 2000]),
        max_age_s=r.choice([3600, 86400]),
        decay_half_life_s=r.choice([0, 600, 86400]),
        calc_period_s=r.choice([60, 300]),
        favor_small=r.random() < 0.5,
        fair_tree=r.random() < 0.6,
        dampening=r.choice([1, 2]),
    )
    sc = SchedSpec(
        backfill=r.random() < 0.8,
        sched_interval_s=r.choice([10, 60]),
        default_queue_depth=r.choice([5, 100]),
        bf_interval_s=r.choice([1, 30]),
        bf_window_s=r.choice([600, 86400]),
        bf_max_job_test=r.choice([3, 500]),
        bf_resolution_s=r.choice([1, 60]),
        bf_continue=r.random() < 0.5,
    )
    config = SlurmConfig(
        nodes=nodes,
        partitions=tuple(parts),
        assocs=tuple(assocs),
        qos=qos,
        priority=pr,
        sched=sc,
        over_time_limit_s=r.choice([0, 60]),
        kill_wait_s=r.choice([0, 30]),
        billing_gpu_weight=r.choice([0.0, 1.0]),
    )
    n = r.randint(5, 300)
    submit = np.sort(np.array([r.randint(0, 20000) for _ in range(n)]))
    dur = np.array([r.randint(1, 5000) for _ in range(n)])
    maxg = max(nd.gpus for nd in nodes)
    gpus = np.array([r.choice([0, 1, 1, 2, 4, maxg, 2 * maxg]) for _ in range(n)])
    cpus = np.array([r.choice([1, 2, 4]) for _ in range(n)])
    us = [r.choice(users) for _ in range(n)]
    jobs, _ = build_jobs(
        config,
        submit_s=submit,
        duration_s=dur,
        gpus=gpus,
        cpus=cpus,
        partition=[r.choice(parts).name for _ in range(n)],
        account=[ua[u] for u in us],
        user=us,
        timelimit_s=[r.choice([None, int(d * r.uniform(0.5, 3)) + 1]) for d in dur],
        qos=[r.choice(["normal", "high"]) for _ in range(n)],
    )
    return config, jobs, r.randint(-500, 0)
