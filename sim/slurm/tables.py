"""The Slurm replay's inputs as flat arrays, the form its compiled passes read: the cluster's nodes and partitions,
the jobs with everything fixed before the replay (node counts, priorities' static part, usage rates, whether they
can ever run), the association tree, the limits' caps and the scheduler's settings.

A cap of -1 means none. Lists of lists are stored as CSR pairs: the items of row r are items[ptr[r]:ptr[r + 1]].
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from analytics.slurm_config import SlurmConfig
from sim.slurm.fairshare import AssocTree, decay_per_s
from sim.slurm.jobs import NO_QOS, SlurmJobs

NO_CAP = -1


def csr(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """The CSR pair (ptr, items) of a list of integer lists."""
    ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(r) for r in rows])
    items = np.array([x for r in rows for x in r], dtype=np.int64)
    return ptr, items


class Cluster(NamedTuple):
    """Nodes (GPUs, CPUs) and each partition's nodes, lowest first, and whether each node takes jobs now."""

    node_gpus: np.ndarray
    node_cpus: np.ndarray
    part_ptr: np.ndarray
    part_nodes: np.ndarray
    node_ptr: np.ndarray  # the partitions each node is in
    node_parts: np.ndarray
    node_on: np.ndarray  # bool per node: in service (see Membership)


class Membership(NamedTuple):
    """When nodes leave and join during a replay (run.NodeChange): at second t_s[k] node node[k] goes out of service
    (drained: its running jobs stay) or back in; next[0] is the first change not yet applied."""

    t_s: np.ndarray
    node: np.ndarray
    on: np.ndarray
    next: np.ndarray


class JobTable(NamedTuple):
    """Per job (index = submit order): what the passes read of it."""

    submit_s: np.ndarray
    duration_s: np.ndarray  # NEVER_S: runs until its limit stops it
    gpus: np.ndarray
    cpus: np.ndarray
    nodes: np.ndarray  # nodes it takes
    partition: np.ndarray
    group: np.ndarray  # its timeline group
    limit_s: np.ndarray
    tier: np.ndarray  # its partition's PriorityTier
    user_assoc: np.ndarray  # index into the tree's user associations
    user: np.ndarray  # index into the user names (per-user QOS limits)
    qos: np.ndarray  # NO_QOS when none
    rate: np.ndarray  # usage it adds per second it runs (billing x QOS UsageFactor)
    static: np.ndarray  # its job-size, partition and QOS priority (weighted)
    runnable: np.ndarray  # bool: its partition can hold it and no cap is below it
    place_ptr: np.ndarray  # its placement's rows in the replay's placement arrays


class TreeTable(NamedTuple):
    """The association tree (node 0 is root, parents numbered before children)."""

    parent: np.ndarray
    is_user: np.ndarray
    shares: np.ndarray
    sibling_shares: np.ndarray
    child_ptr: np.ndarray
    children: np.ndarray
    users: np.ndarray  # the node of each user association
    chain_ptr: np.ndarray  # each user association and every account above it, up to root
    chains: np.ndarray


class Caps(NamedTuple):
    """The limits' caps (NO_CAP: none) per tree node and per QOS."""

    node_gpus: np.ndarray  # GrpTRES=gres/gpu
    node_jobs: np.ndarray  # GrpJobs
    user_jobs: np.ndarray  # MaxJobs of a user association (its account's when it sets none)
    qos_gpus: np.ndarray
    qos_jobs: np.ndarray
    qos_user_gpus: np.ndarray  # MaxTRESPerUser=gres/gpu
    qos_user_jobs: np.ndarray  # MaxJobsPerUser


class Settings(NamedTuple):
    """The scheduler's settings and the replay's clock, as plain numbers."""

    multifactor: bool
    weight_age: int
    weight_fairshare: int
    max_age_s: int
    calc_period_s: int
    fair_tree: bool
    dampening: int
    decay: float
    charge_at_end: bool  # an ending job's seconds since the last pass are charged (limits enforced)
    limits_active: bool
    backfill: bool
    sched_interval_s: int
    default_queue_depth: int
    bf_interval_s: int
    bf_window_s: int
    bf_max_job_test: int
    bf_resolution_s: int
    over_time_limit_s: int
    boot_s: int  # slurmctld's start in replay seconds: the periodic passes count from it
    epoch_s: int  # the clock's second at replay second 0 (the will-run test aligns its windows on it)
    n_groups: int


def cluster_table(config: SlurmConfig) -> Cluster:
    """The nodes and partitions of config."""
    ptr, nodes = csr([sorted(p.nodes) for p in config.partitions])
    in_parts: list[list[int]] = [[] for _ in config.nodes]
    for k, p in enumerate(config.partitions):
        for node in sorted(p.nodes):
            in_parts[node].append(k)
    node_ptr, node_parts = csr(in_parts)
    return Cluster(
        np.array([n.gpus for n in config.nodes], dtype=np.int64),
        np.array([n.cpus for n in config.nodes], dtype=np.int64),
        ptr,
        nodes,
        node_ptr,
        node_parts,
        np.ones(len(config.nodes), dtype=np.bool_),
    )


def membership_table(changes: Sequence[tuple[int, int, bool]]) -> Membership:
    """The nodes' changes (second, node, in service from then on) in time order (a change at second 0 or before
    holds from the replay's start)."""
    rows = sorted(((int(t), int(n), bool(on)) for t, n, on in changes), key=lambda r: r[0])
    return Membership(
        np.array([r[0] for r in rows], dtype=np.int64),
        np.array([r[1] for r in rows], dtype=np.int64),
        np.array([r[2] for r in rows], dtype=np.bool_),
        np.zeros(1, dtype=np.int64),
    )


def tree_table(tree: AssocTree) -> TreeTable:
    """The arrays of an association tree."""
    child_ptr, children = csr([list(c) for c in tree.children])
    chain_ptr, chains = csr([list(c) for c in tree.chains])
    return TreeTable(
        np.array(tree.parent, dtype=np.int64),
        np.array(tree.is_user, dtype=np.bool_),
        np.array(tree.shares, dtype=np.int64),
        np.array(tree.sibling_shares, dtype=np.int64),
        child_ptr,
        children,
        np.array(tree.users, dtype=np.int64),
        chain_ptr,
        chains,
    )


def caps_table(config: SlurmConfig, tree: AssocTree) -> Caps:
    """The caps of the associations and QOS of config on tree."""
    by_name = {(a.account if not a.user else f"{a.account}/{a.user}"): a for a in config.assocs}

    def cap(name: str, field: str) -> int:
        value = getattr(by_name[name], field) if name in by_name else None
        return NO_CAP if value is None else value

    def user_jobs(name: str, is_user: bool) -> int:
        if not is_user:
            return NO_CAP
        own = cap(name, "max_jobs")
        return own if own != NO_CAP else cap(name.split("/", 1)[0], "max_jobs")

    def qos(field: str) -> np.ndarray:
        return np.array(
            [NO_CAP if getattr(q, field) is None else getattr(q, field) for q in config.qos], dtype=np.int64
        )

    return Caps(
        np.array([cap(name, "grp_gpus") for name in tree.names], dtype=np.int64),
        np.array([cap(name, "grp_jobs") for name in tree.names], dtype=np.int64),
        np.array([user_jobs(name, u) for name, u in zip(tree.names, tree.is_user, strict=True)], dtype=np.int64),
        qos("grp_gpus"),
        qos("grp_jobs"),
        qos("max_gpus_per_user"),
        qos("max_jobs_per_user"),
    )


def limits_active(config: SlurmConfig, caps: Caps) -> bool:
    """Whether any limit applies: enforced (AccountingStorageEnforce with limits) and some cap set."""
    arrays = (caps.node_gpus, caps.node_jobs, caps.user_jobs, caps.qos_gpus, caps.qos_jobs)
    qos_user = (caps.qos_user_gpus, caps.qos_user_jobs)
    return config.limits_enforced and any(bool((a != NO_CAP).any()) for a in arrays + qos_user)


def usage_rates(config: SlurmConfig, jobs: SlurmJobs) -> np.ndarray:
    """Usage each job adds per second it runs: billed CPUs (or TRESBillingWeights) times its QOS UsageFactor."""
    qos_factor = np.array([q.usage_factor for q in config.qos] + [1.0])
    billing = config.billing_cpu_weight * jobs.cpus + config.billing_gpu_weight * jobs.gpus
    return billing * qos_factor[np.where(jobs.qos == NO_QOS, len(config.qos), jobs.qos)]


def static_priority(config: SlurmConfig, jobs: SlurmJobs, job_nodes: np.ndarray) -> np.ndarray:
    """The weighted job-size, partition and QOS factors of every job (multifactor; zeros for basic)."""
    s = config.priority
    if not s.multifactor:
        return np.zeros(len(jobs))
    n_nodes = len(config.nodes)
    n_cpus = sum(n.cpus for n in config.nodes)
    nodes_f, cpus_f = job_nodes / n_nodes, jobs.cpus / n_cpus
    if s.favor_small:
        nodes_f, cpus_f = 1.0 - nodes_f, 1.0 - cpus_f
    size = np.clip((nodes_f + cpus_f) / 2.0, 0.0, 1.0)
    top_part = max(p.priority_job_factor for p in config.partitions) or 1
    part = np.array([config.partitions[p].priority_job_factor for p in jobs.partition]) / top_part
    top_qos = max((q.priority for q in config.qos), default=0)
    qos_prio = np.array([config.qos[q].priority if q != NO_QOS else 0 for q in jobs.qos], dtype=np.float64)
    qos = qos_prio / top_qos if top_qos > 0 else np.zeros(len(jobs))
    return s.weight_job_size * size + s.weight_partition * part + s.weight_qos * qos


def settings(config: SlurmConfig, active: bool, boot_s: int, epoch_s: int, n_groups: int) -> Settings:
    """The settings of config as the passes read them."""
    p, s = config.priority, config.sched
    return Settings(
        p.multifactor,
        p.weight_age,
        p.weight_fairshare,
        p.max_age_s,
        p.calc_period_s,
        p.fair_tree,
        p.dampening,
        decay_per_s(p.decay_half_life_s),
        config.limits_enforced,
        active,
        s.backfill,
        s.sched_interval_s,
        s.default_queue_depth,
        s.bf_interval_s,
        s.bf_window_s,
        s.bf_max_job_test,
        s.bf_resolution_s,
        config.over_time_limit_s,
        boot_s,
        epoch_s,
        n_groups,
    )
