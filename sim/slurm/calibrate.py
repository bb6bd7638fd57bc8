"""A Slurm configuration for a trace that recorded none, calibrated from what the trace records (docs/twin.md,
"A trace without a configuration"):

- partitions: each VC a partition over its own nodes of gpus_per_node GPUs, as many in service as its capacity of
  each day where the trace records it by day (a VC that shrinks at midnight drains its highest-numbered nodes, one
  that grows brings nodes in), else the VC capacities the other policies use;
- limits: each user of a VC capped (GrpTRES=gres/gpu on the user's association) at the most GPUs their jobs held at
  once in the record, at least their largest job's, so that a cap never keeps a job from ever starting;
- time limits: the trace's own where it records them, else none (a job runs to its recorded end, and backfill, which
  plans on limits, starts whatever fits now, as Slurm does on partitions whose MaxTime is UNLIMITED);
- ordering: priority/basic (first submitted, first considered) and sched/backfill with Slurm's defaults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from analytics.slurm_config import AssocSpec, NodeSpec, PartitionSpec, PrioritySpec, SchedSpec, SlurmConfig
from sim.model import Workload, joined

if TYPE_CHECKING:
    from sim.slurm.run import NodeChange

CPUS_PER_NODE = 64  # the trace records no CPUs per node; the replay asks one CPU per GPU, so CPUs never bind
CAPTURED, CALIBRATED = "captured", "calibrated"
PARTITIONS = "each VC a partition on its own nodes, as many in service as its capacity of each day"
USER_CAPS = "each user capped in their VC at the most GPUs their jobs held at once in the record"
LIMITS = "time limits: the trace's own where it records them, else none (backfill then starts whatever fits now)"
ORDERING = "priority/basic (first submitted, first considered) with sched/backfill at Slurm's defaults"
PLACEMENT = (
    "each VC's nodes, or each VC one pool of its GPUs (jobs placed by GPU count, the replay starting from the jobs "
    "running or waiting when the window opened), whichever replays the window's record nearer"
)
RULES = (PARTITIONS, USER_CAPS, LIMITS, ORDERING, f"placement: {PLACEMENT}")  # in words, without a window's numbers


@dataclass(frozen=True)
class Calibration:
    """The configuration a twin replays, where it came from (CAPTURED or CALIBRATED) and its rules in words."""

    config: SlurmConfig
    source: str
    rules: tuple[str, ...]
    gpus_per_node: int = 0  # a calibrated twin's node size (the trace's; with pooled, its nodes are split in GPUs)
    pooled: bool = False  # a calibrated twin placing by GPU count on each VC's pool (pool_of)
    carried: Workload | None = None  # a pooled twin's jobs running or waiting when its window opened

    @property
    def placement(self) -> str:
        """Where the twin places jobs, in a word: "pools" or "nodes"."""
        return "pools" if self.pooled else "nodes"

    def with_fit(self, fits: list[tuple[str, float]]) -> Calibration:
        """The twin with a rule saying how its placement was chosen: fits = (placement, distance to the record)."""
        told = ", ".join(f"{placement} {d:.3f}" for placement, d in fits)
        rule = f"placement: {self.placement} — {PLACEMENT}; distance to the record: {told}"
        return dataclasses.replace(self, rules=(*self.rules, rule))

    @property
    def n_carried(self) -> int:
        """How many jobs the replay carries in ahead of the window's (not reported)."""
        return len(self.carried) if self.carried is not None else 0

    def as_dict(self) -> dict:
        """The calibration as plain values (for JSON and the pages)."""
        return {"source": self.source, "rules": list(self.rules)}

    def placed(self, w: Workload) -> Workload:
        """w on the twin's nodes: on each VC's pool for a pooled twin, else as it is."""
        return pool_of(w, self.gpus_per_node) if self.pooled else w

    def jobs_of(self, w: Workload) -> Workload:
        """w as this twin replays it: for a calibrated twin, each job's partition and account are its VC."""
        if self.source != CALIBRATED:
            return w
        w = self.placed(joined(self.carried, w) if self.carried is not None else w)
        if w.scheduler is None:
            return w
        return dataclasses.replace(w, scheduler=dataclasses.replace(w.scheduler, partition=None, account=None))

    def on_nodes_of(self, w: Workload) -> SlurmConfig:
        """A calibrated twin's configuration on w's VC capacities (its caps kept)."""
        size = pool_sizes(w, self.gpus_per_node) if self.pooled else self.gpus_per_node
        nodes = vc_cluster(self.placed(w), size)
        return dataclasses.replace(self.config, nodes=nodes.nodes, partitions=nodes.partitions)

    def changes_of(self, w: Workload) -> list[NodeChange]:
        """A calibrated twin's nodes leaving and joining as w's VC capacities step by day (none for a captured one)."""
        return node_changes(self.placed(w)) if self.source == CALIBRATED else []


def pool_of(w: Workload, gpus_per_node: int) -> Workload:
    """w with each VC one pool of its GPUs and no job's node count kept, so that a job is placed by its GPU count: a
    VC whose capacity holds through the window one node of all its GPUs, one that steps its nodes split into nodes of
    one GPU (and their steps), so that it can shrink and grow by GPUs (pool_sizes)."""
    sizes = pool_sizes(w, gpus_per_node)
    steps = w.vc_node_steps
    if steps is not None:
        steps = tuple(
            tuple((t_s, _pool_nodes(n, size, gpus_per_node)) for t_s, n in vc_steps)
            for vc_steps, size in zip(steps, sizes, strict=True)
        )
    scheduler = None if w.scheduler is None else dataclasses.replace(w.scheduler, nodes=None)
    vc_nodes = tuple(_pool_nodes(n, size, gpus_per_node) for n, size in zip(w.vc_nodes, sizes, strict=True))
    return dataclasses.replace(w, vc_nodes=vc_nodes, vc_node_steps=steps, scheduler=scheduler)


def pool_sizes(w: Workload, gpus_per_node: int) -> tuple[int, ...]:
    """Each VC's node size in pool_of: all its GPUs where its capacity holds through the window, else one GPU."""
    if w.vc_node_steps is None:
        return tuple(max(n * gpus_per_node, 1) for n in w.vc_nodes)
    return tuple(
        max(steps[0][1] * gpus_per_node, 1) if len({n for _, n in steps}) == 1 else 1 for steps in w.vc_node_steps
    )


def _pool_nodes(nodes: int, size: int, gpus_per_node: int) -> int:
    """How many nodes of size GPUs hold a VC's nodes of gpus_per_node GPUs."""
    return nodes * gpus_per_node // size


def vc_cluster(
    w: Workload,
    gpus_per_node: int | tuple[int, ...],
    priority: PrioritySpec | None = None,
    sched: SchedSpec | None = None,
) -> SlurmConfig:
    """One partition per VC of w on that VC's nodes of gpus_per_node GPUs, or of each VC's own node size (a pool's:
    CPUS_PER_NODE per GPU) (vc_node_counts; priority/basic and sched/backfill with Slurm's defaults unless given)."""
    nodes: list[NodeSpec] = []
    partitions: list[PartitionSpec] = []
    sizes = gpus_per_node if isinstance(gpus_per_node, tuple) else (gpus_per_node,) * len(w.vc_names)
    cpus_per_gpu = isinstance(gpus_per_node, tuple)
    for name, n_nodes, size in zip(w.vc_names, vc_node_counts(w), sizes, strict=True):
        first = len(nodes)
        cpus = CPUS_PER_NODE * size if cpus_per_gpu else CPUS_PER_NODE
        nodes += [NodeSpec(f"{name}-{k}", size, cpus) for k in range(n_nodes)]
        partitions.append(PartitionSpec(name, tuple(range(first, len(nodes)))))
    return SlurmConfig(
        nodes=tuple(nodes),
        partitions=tuple(partitions),
        priority=priority or PrioritySpec(),
        sched=sched or SchedSpec(),
    )


def vc_node_counts(w: Workload) -> tuple[int, ...]:
    """Each VC's nodes in vc_cluster: the most it has at any step when its capacity steps by day, else vc_nodes."""
    if w.vc_node_steps is None:
        return w.vc_nodes
    return tuple(max((n for _, n in steps), default=0) for steps in w.vc_node_steps)


def node_changes(w: Workload) -> list[NodeChange]:
    """vc_cluster's nodes leaving and joining as w's VC capacities step: at each step a VC's first n nodes are in
    service and the others drained (the highest-numbered go first, as first-fit fills the lowest)."""
    if w.vc_node_steps is None:
        return []
    out: list[NodeChange] = []
    first = 0
    for steps, size in zip(w.vc_node_steps, vc_node_counts(w), strict=True):
        on = [True] * size
        for t_s, n_nodes in steps:
            for k in range(size):
                if on[k] != (k < n_nodes):
                    on[k] = k < n_nodes
                    out.append((t_s, first + k, on[k]))
        first += size
    return out


def user_gpu_caps(w: Workload) -> dict[tuple[str, str], int]:
    """Per (VC, user) the most GPUs the user's jobs held at once in the record, at least their largest job's (empty
    when the trace records no users or no start times)."""
    return {key: max(peak, largest, 1) for key, (peak, largest) in user_gpu_peaks(w).items()}


def user_gpu_peaks(w: Workload) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (VC, user) the most GPUs the user's jobs held at once in the record (0 when none ran) and their largest
    job's GPUs (empty when the trace records no users or no start times)."""
    rec = w.recorded_start_s
    if w.scheduler is None or rec is None or not len(w):
        return {}
    users = np.asarray([str(u) for u in w.scheduler.user], dtype=object)
    if not any(users):
        return {}
    vc = np.asarray(w.vc_names, dtype=object)[w.vc_index]
    jobs = pl.DataFrame(
        {"vc": vc.tolist(), "user": users.tolist(), "gpus": w.gpu_num, "start": rec, "end": rec + w.duration_s}
    )
    ran = jobs.filter((pl.col("start") >= 0) & (pl.col("user") != ""))
    steps = pl.concat(
        [
            ran.select("vc", "user", pl.col("start").alias("t"), pl.col("gpus").alias("delta")),
            ran.select("vc", "user", pl.col("end").alias("t"), (-pl.col("gpus")).alias("delta")),
        ]
    ).sort("vc", "user", "t", "delta")  # at one second, ends (negative) before starts
    held = steps.with_columns(pl.col("delta").cum_sum().over("vc", "user").alias("held"))
    peak = held.group_by("vc", "user").agg(pl.col("held").max().alias("peak"))
    largest = jobs.filter(pl.col("user") != "").group_by("vc", "user").agg(pl.col("gpus").max().alias("largest"))
    both = largest.join(peak, on=["vc", "user"], how="left").with_columns(pl.col("peak").fill_null(0))
    return {(v, u): (int(p), int(g)) for v, u, p, g in both.select("vc", "user", "peak", "largest").iter_rows()}


def capped(config: SlurmConfig, caps: dict[tuple[str, str], int]) -> SlurmConfig:
    """config with an account per VC of caps and each (VC, user) of caps capped at its GPUs (GrpTRES=gres/gpu)."""
    accounts = tuple(AssocSpec(account=vc) for vc in sorted({vc for vc, _ in caps}))
    users = tuple(AssocSpec(account=vc, user=user, grp_gpus=cap) for (vc, user), cap in sorted(caps.items()))
    return dataclasses.replace(config, assocs=accounts + users)


def calibrated(w: Workload, gpus_per_node: int, pooled: bool = False, carried: Workload | None = None) -> Calibration:
    """The twin of a trace without a captured configuration, calibrated from w's record and the carried jobs
    (sim.workload.carried_in; the module's rules): pooled, each VC one pool of its GPUs starting from them, else its
    nodes of gpus_per_node GPUs starting empty."""
    carried = carried if carried is not None and len(carried) else None
    caps = user_gpu_caps(joined(carried, w) if carried is not None else w)
    carried = carried if pooled else None
    placed = pool_of(w, gpus_per_node) if pooled else w
    size = pool_sizes(w, gpus_per_node) if pooled else gpus_per_node
    config = capped(vc_cluster(placed, size), caps)
    steps = sum(len(s) - 1 for s in w.vc_node_steps) if w.vc_node_steps is not None else 0
    changed = f", {steps:,} changes of a VC's capacity in the window" if steps else ", none changing in the window"
    gpus = sum(node.gpus for node in config.nodes)
    held = f"each one pool of its GPUs, up to {gpus:,} GPUs in all" if pooled else None
    held = held or f"up to {len(config.nodes):,} nodes of {gpus_per_node} GPUs"
    nodes = f"{len(w.vc_names)} VCs, {held}{changed}"
    users = f"{len(caps):,} users" if caps else "none: the trace records no users or no start times"
    limits = w.scheduler.timelimit_s if w.scheduler is not None else None
    limited = int((limits > 0).sum()) if limits is not None else 0
    recorded = f"{limited:,} of {len(w):,} jobs with a recorded limit" if limited else "none recorded"
    rules = (f"{PARTITIONS}: {nodes}", f"{USER_CAPS}: {users}", f"{LIMITS}: {recorded}", ORDERING)
    return Calibration(config, CALIBRATED, rules, gpus_per_node, pooled, carried)


def captured(config: SlurmConfig, summary: str) -> Calibration:
    """The twin of a dataset with a captured configuration (summary: the configuration in one line)."""
    return Calibration(config, CAPTURED, (f"the captured configuration: {summary}",))
