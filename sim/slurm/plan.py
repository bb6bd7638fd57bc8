"""sched/backfill's plan: the node-space map of reservations that pending jobs hold on whole nodes over their time
limits, and each job's earliest start on given nodes as cons_tres's will-run test finds it (running jobs end at
their start plus time limit).

The will-run test of Slurm 22.05 (select/cons_common `_will_run_test`) does not free the running jobs one end at a
time: it frees them in groups, the first group being every job that ends by the first end rounded up to the next
30-second boundary of the clock plus 30 s, and each later group reaching a window twice as wide (doubled until it
holds at least the next end). The job's expected start is the end of the last job freed in the group that makes
room for it, so it can be later than the first moment it would fit, and lower jobs can be backfilled before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.slurm.nodes import NodePool, Placement


@dataclass
class Slot:
    """A stretch of time [begin_s, end_s) and the nodes no pending job has reserved in it."""

    begin_s: int
    end_s: int
    avail: np.ndarray  # bool per node


class NodeSpace:
    """Backfill's node-space map from now to the end of its window, at bf_resolution."""

    def __init__(self, now_s: int, window_s: int, n_nodes: int, resolution_s: int):
        self.resolution_s = resolution_s
        self.slots = [Slot(now_s, now_s + window_s, np.ones(n_nodes, dtype=bool))]

    @property
    def end_s(self) -> int:
        """The end of the window."""
        return self.slots[-1].end_s

    def avail_over(self, start_s: int, end_s: int) -> tuple[np.ndarray, int | None]:
        """The nodes free of reservations over [start_s, end_s], and the first later second at which more nodes
        become free (None if none), where a later try could fare better."""
        avail = np.ones_like(self.slots[0].avail)
        later = None
        for k, slot in enumerate(self.slots):
            if slot.end_s <= start_s:
                continue
            if slot.begin_s > end_s:
                break
            if later is None and k + 1 < len(self.slots) and (self.slots[k + 1].avail & ~slot.avail).any():
                later = slot.end_s
            avail &= slot.avail
        return avail, later

    def overlaps(self, start_s: int, end_s: int, nodes: list[int]) -> bool:
        """Whether any of nodes is reserved somewhere in [start_s, end_s)."""
        return any(not slot.avail[nodes].all() for slot in self.slots if slot.end_s > start_s and slot.begin_s < end_s)

    def reserve(self, start_s: int, end_s: int, nodes: list[int]) -> None:
        """Take nodes out of every slot within [start_s, end_s) (rounded out to the resolution)."""
        r = self.resolution_s
        start_s, end_s = (start_s // r) * r, -(-end_s // r) * r
        self._split(start_s)
        self._split(end_s)
        for slot in self.slots:
            if start_s <= slot.begin_s and slot.end_s <= end_s:
                slot.avail[nodes] = False

    def _split(self, t_s: int) -> None:
        for k, slot in enumerate(self.slots):
            if slot.begin_s < t_s < slot.end_s:
                self.slots.insert(k + 1, Slot(t_s, slot.end_s, slot.avail.copy()))
                slot.end_s = t_s
                return


WILL_RUN_WINDOW_S = 30  # the will-run test's first window and the clock barrier it is aligned on


def earliest_start(
    pool: NodePool,
    job: tuple[int, int, int, int],
    allowed: np.ndarray,
    ends: list[tuple[int, Placement]],
    now_s: int,
    epoch_s: int = 0,
) -> tuple[int, Placement] | None:
    """When and where job (partition, gpus, cpus, nodes) can first start on the allowed nodes as the will-run test
    finds it, freeing the running jobs (sorted (expected end, placement)) in its windowed groups, or None if never;
    epoch_s is the clock's second at replay second 0 (the windows are aligned on the clock)."""
    part, gpus, cpus, n_nodes = job
    placement = pool.place(part, gpus, cpus, n_nodes, allowed)
    if placement is not None:
        return now_s, placement
    nodes = pool.partition_nodes[part]
    nodes = nodes[allowed[nodes]]
    if len(nodes) < n_nodes:
        return None
    usable = set(int(n) for n in nodes)
    relevant = [(end_s, held) for end_s, held in ends if any(node in usable for node, _, _ in held)]
    free_g, free_c = pool.free_gpus.copy(), pool.free_cpus.copy()
    window_s, barrier_s, k = WILL_RUN_WINDOW_S, None, 0
    while k < len(relevant):
        while True:  # one group: free every job that ends within the barrier plus the window
            end_s, held = relevant[k]
            if barrier_s is None:
                barrier_s = end_s + WILL_RUN_WINDOW_S - (end_s + epoch_s) % WILL_RUN_WINDOW_S
            for node, g, c in held:
                free_g[node] += g
                free_c[node] += c
            k += 1
            if k == len(relevant) or relevant[k][0] > barrier_s + window_s:
                break
        window_s *= 2
        while k < len(relevant) and relevant[k][0] > barrier_s + window_s:
            window_s *= 2
        placement = pool.choose(nodes, free_g, free_c, gpus, cpus, n_nodes)
        if placement is not None:
            return max(end_s, now_s + 1), placement
    return None
