"""Node and GPU bookkeeping of one VC: homogeneous nodes, free GPUs and job counts per node.

Usable on its own (e.g. by CES to turn a recorded schedule into busy nodes): build `VCNodes(n_nodes, 8)`, ask a
placer for an allocation (`sim.placers.get("consolidate")(vc, gpu_num)`), then `allocate` and later `release` it.
An allocation is a tuple of (node_index, gpus) pairs.
"""

from __future__ import annotations

from bisect import bisect_left, insort

import numpy as np

from analytics.schema import GPUS_PER_NODE

Allocation = tuple[tuple[int, int], ...]


class VCNodes:
    """Free GPUs and running-job counts of the homogeneous nodes of one VC."""

    def __init__(self, n_nodes: int, gpus_per_node: int = GPUS_PER_NODE):
        if n_nodes < 0 or gpus_per_node < 1:
            raise ValueError(f"bad VC size: {n_nodes} nodes of {gpus_per_node} GPUs")
        self.n_nodes = n_nodes
        self.gpus_per_node = gpus_per_node
        self.free = np.full(n_nodes, gpus_per_node, dtype=np.int64)
        self.job_count = np.zeros(n_nodes, dtype=np.int64)
        self.capacity_gpus = n_nodes * gpus_per_node
        self.free_gpus = self.capacity_gpus
        # by_free[f]: sorted indices of the nodes with exactly f free GPUs (lets placers find best fits quickly)
        self.by_free: list[list[int]] = [[] for _ in range(gpus_per_node)] + [list(range(n_nodes))]

    @property
    def used_gpus(self) -> int:
        """GPUs currently allocated."""
        return self.capacity_gpus - self.free_gpus

    def allocate(self, alloc: Allocation) -> None:
        """Take the GPUs of alloc from their nodes."""
        for node, gpus in alloc:
            self._set_free(node, int(self.free[node]) - gpus)
            self.job_count[node] += 1
            self.free_gpus -= gpus

    def release(self, alloc: Allocation) -> None:
        """Give the GPUs of alloc back to their nodes."""
        for node, gpus in alloc:
            self._set_free(node, int(self.free[node]) + gpus)
            self.job_count[node] -= 1
            self.free_gpus += gpus

    def _set_free(self, node: int, free: int) -> None:
        old = self.by_free[int(self.free[node])]
        del old[bisect_left(old, node)]
        insort(self.by_free[free], node)
        self.free[node] = free
