"""The cluster's nodes as one pool with free GPUs and CPUs per node; partitions are views over it (a node may be in
several), and a job is placed on whole-job shares of nodes with enough free GPUs and CPUs (cons_tres-like).

A job of n nodes takes gpus/n GPUs and cpus/n CPUs of each (rounded up for the first nodes when they do not
divide), on the lowest-numbered nodes of its partition that hold that share, among those the caller allows.
"""

from __future__ import annotations

import numpy as np

from analytics.slurm_config import SlurmConfig

Placement = tuple[tuple[int, int, int], ...]  # (node, gpus, cpus) per node of an allocation


def shares(total: int, parts: int) -> list[int]:
    """total split over parts as evenly as whole numbers allow, the larger shares first."""
    base, extra = divmod(total, parts)
    return [base + 1] * extra + [base] * (parts - extra)


class NodePool:
    """Free GPUs and CPUs of every node, and each partition's node indices."""

    def __init__(self, config: SlurmConfig):
        self.gpus = np.array([n.gpus for n in config.nodes], dtype=np.int64)
        self.cpus = np.array([n.cpus for n in config.nodes], dtype=np.int64)
        self.free_gpus = self.gpus.copy()
        self.free_cpus = self.cpus.copy()
        self.partition_nodes = [np.array(sorted(p.nodes), dtype=np.int64) for p in config.partitions]
        self.total_gpus = int(self.gpus.sum())

    @property
    def used_gpus(self) -> int:
        """GPUs allocated now."""
        return self.total_gpus - int(self.free_gpus.sum())

    def nodes_needed(self, partition: int, gpus: int, cpus: int, nodes: int) -> int:
        """The job's node count: as asked, else the fewest of the partition's largest nodes that hold its GPUs."""
        if nodes > 0:
            return nodes
        part = self.partition_nodes[partition]
        most = int(self.gpus[part].max()) if gpus > 0 else int(self.cpus[part].max())
        need = gpus if gpus > 0 else cpus
        return max(1, -(-need // max(most, 1)))

    def fits_empty(self, partition: int, gpus: int, cpus: int, nodes: int) -> bool:
        """Whether the job could run on its partition when every node is free."""
        return self.choose(self.partition_nodes[partition], self.gpus, self.cpus, gpus, cpus, nodes) is not None

    def place(self, partition: int, gpus: int, cpus: int, nodes: int, allowed: np.ndarray | None = None):
        """The placement of a job on the free resources of its partition (only the allowed nodes when given, a
        boolean mask over all nodes), or None."""
        part = self.partition_nodes[partition]
        if allowed is not None:
            part = part[allowed[part]]
        return self.choose(part, self.free_gpus, self.free_cpus, gpus, cpus, nodes)

    @staticmethod
    def choose(part: np.ndarray, free_g: np.ndarray, free_c: np.ndarray, gpus: int, cpus: int, nodes: int):
        """The first-fit placement of a job on nodes part given free GPUs and CPUs per node, or None."""
        if len(part) < nodes:
            return None
        g_each, c_each = shares(gpus, nodes), shares(cpus, nodes)
        ok = part[(free_g[part] >= g_each[0]) & (free_c[part] >= c_each[0])]
        if len(ok) < nodes:
            return None
        if g_each[0] != g_each[-1] or c_each[0] != c_each[-1]:
            small = part[(free_g[part] >= g_each[-1]) & (free_c[part] >= c_each[-1])]
            return _uneven(ok, small, g_each, c_each)
        return tuple((int(n), g_each[0], c_each[0]) for n in ok[:nodes])

    def allocate(self, placement: Placement) -> None:
        """Take a placement's GPUs and CPUs."""
        for node, g, c in placement:
            self.free_gpus[node] -= g
            self.free_cpus[node] -= c

    def release(self, placement: Placement) -> None:
        """Give a placement's GPUs and CPUs back."""
        for node, g, c in placement:
            self.free_gpus[node] += g
            self.free_cpus[node] += c


def _uneven(big: np.ndarray, small: np.ndarray, g_each: list[int], c_each: list[int]) -> Placement | None:
    """Larger shares on the lowest-numbered nodes that hold them, the rest on the next ones that hold theirs."""
    n_big = sum(1 for g, c in zip(g_each, c_each, strict=True) if (g, c) == (g_each[0], c_each[0]))
    first = [int(n) for n in big[:n_big]]
    rest = [int(n) for n in small if int(n) not in first][: len(g_each) - n_big]
    if len(first) < n_big or len(rest) < len(g_each) - n_big:
        return None
    return tuple((n, g, c) for n, g, c in zip(first + rest, g_each, c_each, strict=True))
