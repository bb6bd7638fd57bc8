"""A Slurm configuration for a trace that recorded none: the workload's VCs as partitions over their own nodes
(the VC capacities the other policies use), and a scheduler with Slurm's stock settings unless told otherwise.
This is the start of the calibrated twin (docs/twin.md); caps and limits estimated from the record come next."""

from __future__ import annotations

from analytics.slurm_config import NodeSpec, PartitionSpec, PrioritySpec, SchedSpec, SlurmConfig
from sim.model import Workload

CPUS_PER_NODE = 64  # the trace records no CPUs per node; the replay asks one CPU per GPU, so CPUs never bind


def vc_cluster(
    w: Workload,
    gpus_per_node: int,
    priority: PrioritySpec | None = None,
    sched: SchedSpec | None = None,
) -> SlurmConfig:
    """One partition per VC of w on that VC's nodes of gpus_per_node GPUs (priority/basic and sched/backfill with
    Slurm's defaults unless given)."""
    nodes: list[NodeSpec] = []
    partitions: list[PartitionSpec] = []
    for name, n_nodes in zip(w.vc_names, w.vc_nodes, strict=True):
        first = len(nodes)
        nodes += [NodeSpec(f"{name}-{k}", gpus_per_node, CPUS_PER_NODE) for k in range(n_nodes)]
        partitions.append(PartitionSpec(name, tuple(range(first, len(nodes)))))
    return SlurmConfig(
        nodes=tuple(nodes),
        partitions=tuple(partitions),
        priority=priority or PrioritySpec(),
        sched=sched or SchedSpec(),
    )
