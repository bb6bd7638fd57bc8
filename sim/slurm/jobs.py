"""The jobs one Slurm replay runs, as parallel arrays in submit order, resolved against the configuration: each
job's partition, association, QOS and effective time limit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analytics.slurm_config import SlurmConfig, SlurmConfigError
from sim.slurm.fairshare import AssocTree, build_tree

YEAR_S = 365 * 86_400  # Slurm's stand-in for an unlimited time limit in backfill
NO_QOS = -1


@dataclass(frozen=True, eq=False)
class SlurmJobs:
    """Jobs of a replay (index = submit order); times in seconds since the replay's t0."""

    submit_s: np.ndarray  # int64, eligible time (submit, or --begin)
    duration_s: np.ndarray  # int64, how long the job runs if no limit stops it (NEVER_S: until its limit)
    gpus: np.ndarray  # int64
    cpus: np.ndarray  # int64
    nodes: np.ndarray  # int64, nodes asked (0: as few as hold the job)
    partition: np.ndarray  # int64, index into config.partitions
    user_assoc: np.ndarray  # int64, index into tree.users
    user: np.ndarray  # int64, index into user_names (for per-user QOS limits)
    qos: np.ndarray  # int64, index into config.qos, NO_QOS when none
    limit_s: np.ndarray  # int64, effective time limit (partition MaxTime/DefaultTime applied; YEAR_S unlimited)
    tree: AssocTree
    user_names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.submit_s.shape[0])


NEVER_S = 1 << 60  # duration of a job that runs until its time limit stops it (recorded TIMEOUT)


def effective_limit_s(asked_s: int | None, max_time_s: int | None, default_time_s: int | None) -> int:
    """A job's time limit as Slurm applies it: its own (capped at MaxTime), else DefaultTime, else MaxTime."""
    if asked_s is None or asked_s <= 0:
        asked_s = default_time_s if default_time_s is not None else max_time_s
    if asked_s is None:
        return YEAR_S
    return min(asked_s, max_time_s) if max_time_s is not None else asked_s


def build_jobs(
    config: SlurmConfig,
    *,
    submit_s: np.ndarray,
    duration_s: np.ndarray,
    gpus: np.ndarray,
    cpus: np.ndarray,
    partition: list[str],
    account: list[str],
    user: list[str],
    timelimit_s: list[int | None],
    qos: list[str] | None = None,
    nodes: np.ndarray | None = None,
) -> tuple[SlurmJobs, list[str]]:
    """SlurmJobs from per-job columns (names resolved against config; jobs without an association get one of 1
    share), and the notes on what was added or assumed."""
    n = len(submit_s)
    order = np.argsort(np.asarray(submit_s, dtype=np.int64), kind="stable")
    if not np.array_equal(order, np.arange(n)):
        raise ValueError("jobs must be given in submit order")
    tree, notes = build_tree(config.assocs, list(zip(account, user, strict=True)))
    part_index = {p.name: i for i, p in enumerate(config.partitions)}
    qos_index = {q.name: i for i, q in enumerate(config.qos)}
    unknown = sorted(set(partition) - set(part_index))
    if unknown:
        names = ", ".join(part_index)
        raise SlurmConfigError(f"jobs ran in partition(s) {', '.join(unknown)} the configuration lacks ({names})")
    parts = np.array([part_index[p] for p in partition], dtype=np.int64)
    user_names = tuple(dict.fromkeys(user))
    user_ix = {u: i for i, u in enumerate(user_names)}
    limits = [
        effective_limit_s(t, config.partitions[p].max_time_s, config.partitions[p].default_time_s)
        for t, p in zip(timelimit_s, parts, strict=True)
    ]
    jobs = SlurmJobs(
        submit_s=np.asarray(submit_s, dtype=np.int64),
        duration_s=np.asarray(duration_s, dtype=np.int64),
        gpus=np.asarray(gpus, dtype=np.int64),
        cpus=np.maximum(np.asarray(cpus, dtype=np.int64), 1),
        nodes=np.zeros(n, dtype=np.int64) if nodes is None else np.asarray(nodes, dtype=np.int64),
        partition=parts,
        user_assoc=np.array([tree.user_index(a, u) for a, u in zip(account, user, strict=True)], dtype=np.int64),
        user=np.array([user_ix[u] for u in user], dtype=np.int64),
        qos=np.array([qos_index.get(q, NO_QOS) for q in (qos or [""] * n)], dtype=np.int64),
        limit_s=np.asarray(limits, dtype=np.int64),
        tree=tree,
        user_names=user_names,
    )
    return jobs, notes
