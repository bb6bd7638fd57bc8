"""The cluster's nodes as one pool with free GPUs and CPUs per node; partitions are views over it (a node may be in
several), and a job is placed on whole-job shares of nodes with enough free GPUs and CPUs (cons_tres-like).

A job of n nodes takes gpus/n GPUs and cpus/n CPUs of each (rounded up for the first nodes when they do not
divide), on the lowest-numbered nodes of its partition that hold that share, among those the caller allows.
Sets of nodes are Python ints used as bit sets (bit k: node k), so that a partition, the nodes a pass leaves open
and the nodes free of reservations combine in one operation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from analytics.slurm_config import SlurmConfig

Placement = tuple[tuple[int, int, int], ...]  # (node, gpus, cpus) per node of an allocation
NodeSet = int  # bit k set: node k is in the set
FreeOf = Callable[[int], int]  # a node's free GPUs (or CPUs)


def shares(total: int, parts: int) -> list[int]:
    """total split over parts as evenly as whole numbers allow, the larger shares first."""
    base, extra = divmod(total, parts)
    return [base + 1] * extra + [base] * (parts - extra)


def node_set(nodes) -> NodeSet:
    """The set of the given node indices."""
    out = 0
    for node in nodes:
        out |= 1 << node
    return out


def members(nodes: NodeSet) -> Iterator[int]:
    """The node indices of a set, lowest first."""
    while nodes:
        low = nodes & -nodes
        yield low.bit_length() - 1
        nodes ^= low


def placement_set(placement: Placement) -> NodeSet:
    """The nodes of a placement."""
    return node_set(node for node, _, _ in placement)


class NodePool:
    """Free GPUs and CPUs of every node, each partition's nodes, and the nodes with at least k GPUs free."""

    def __init__(self, config: SlurmConfig):
        self.gpus = [n.gpus for n in config.nodes]
        self.cpus = [n.cpus for n in config.nodes]
        self.free_gpus = list(self.gpus)
        self.free_cpus = list(self.cpus)
        self.partition_nodes = [sorted(p.nodes) for p in config.partitions]
        self.partition_set = [node_set(p.nodes) for p in config.partitions]
        self.node_partitions: list[list[int]] = [[] for _ in config.nodes]  # the partitions each node is in
        for p, nodes in enumerate(self.partition_nodes):
            for node in nodes:
                self.node_partitions[node].append(p)
        self.total_gpus = sum(self.gpus)
        top = max(self.gpus, default=0)
        # NOTE: with_gpus[k] is the set of nodes with at least k GPUs free, so a first fit tests few nodes
        self.with_gpus = [node_set(n for n, g in enumerate(self.gpus) if g >= k) for k in range(top + 1)]

    @property
    def used_gpus(self) -> int:
        """GPUs allocated now."""
        return self.total_gpus - sum(self.free_gpus)

    def nodes_needed(self, partition: int, gpus: int, cpus: int, nodes: int) -> int:
        """The job's node count: as asked, else the fewest of the partition's largest nodes that hold its GPUs."""
        if nodes > 0:
            return nodes
        part = self.partition_nodes[partition]
        most = max((self.gpus[n] if gpus > 0 else self.cpus[n]) for n in part) if part else 0
        need = gpus if gpus > 0 else cpus
        return max(1, -(-need // max(most, 1)))

    def fits_empty(self, partition: int, gpus: int, cpus: int, nodes: int) -> bool:
        """Whether the job could run on its partition when every node is free."""
        part = self.partition_set[partition]
        return choose(part, self.gpus.__getitem__, self.cpus.__getitem__, gpus, cpus, nodes) is not None

    def place(self, partition: int, gpus: int, cpus: int, nodes: int, allowed: NodeSet = -1) -> Placement | None:
        """The placement of a job on the free resources of its partition (only the allowed nodes when given), or
        None."""
        least = gpus // nodes  # the smallest share of GPUs a node of the job takes
        if least >= len(self.with_gpus):
            return None
        candidates = self.partition_set[partition] & allowed & self.with_gpus[least]
        return choose(candidates, self.free_gpus.__getitem__, self.free_cpus.__getitem__, gpus, cpus, nodes)

    def allocate(self, placement: Placement) -> None:
        """Take a placement's GPUs and CPUs."""
        for node, g, c in placement:
            self._set_gpus(node, self.free_gpus[node] - g)
            self.free_cpus[node] -= c

    def release(self, placement: Placement) -> None:
        """Give a placement's GPUs and CPUs back."""
        for node, g, c in placement:
            self._set_gpus(node, self.free_gpus[node] + g)
            self.free_cpus[node] += c

    def _set_gpus(self, node: int, free: int) -> None:
        was, bit = self.free_gpus[node], 1 << node
        for k in range(free + 1, was + 1):
            self.with_gpus[k] &= ~bit
        for k in range(was + 1, free + 1):
            self.with_gpus[k] |= bit
        self.free_gpus[node] = free


def choose(candidates: NodeSet, free_g: FreeOf, free_c: FreeOf, gpus: int, cpus: int, nodes: int) -> Placement | None:
    """The first-fit placement of a job on the candidate nodes given their free GPUs and CPUs, or None."""
    if candidates.bit_count() < nodes:
        return None
    g_each, c_each = shares(gpus, nodes), shares(cpus, nodes)
    if g_each[0] == g_each[-1] and c_each[0] == c_each[-1]:
        g, c = g_each[0], c_each[0]
        picked = []
        for node in members(candidates):
            if free_g(node) >= g and free_c(node) >= c:
                picked.append((node, g, c))
                if len(picked) == nodes:
                    return tuple(picked)
        return None
    return _uneven(candidates, free_g, free_c, g_each, c_each)


def _uneven(
    candidates: NodeSet,
    free_g: Callable[[int], int],
    free_c: Callable[[int], int],
    g_each: list[int],
    c_each: list[int],
) -> Placement | None:
    """Larger shares on the lowest-numbered nodes that hold them, the rest on the next ones that hold theirs (when as
    many nodes as the job's hold the larger share)."""
    n_big = sum(1 for g, c in zip(g_each, c_each, strict=True) if (g, c) == (g_each[0], c_each[0]))
    big = [n for n in members(candidates) if free_g(n) >= g_each[0] and free_c(n) >= c_each[0]]
    if len(big) < len(g_each):
        return None  # every node must hold the larger share (as the model has always asked)
    small = [n for n in members(candidates) if free_g(n) >= g_each[-1] and free_c(n) >= c_each[-1]]
    first = big[:n_big]
    rest = [n for n in small if n not in first][: len(g_each) - n_big]
    if len(first) < n_big or len(rest) < len(g_each) - n_big:
        return None
    return tuple((n, g, c) for n, g, c in zip(first + rest, g_each, c_each, strict=True))
