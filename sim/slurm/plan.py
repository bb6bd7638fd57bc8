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

import bisect
from collections.abc import Callable

from sim.slurm.nodes import NodePool, NodeSet, Placement, choose, members

RunningEnd = tuple[int, Placement, NodeSet]  # a running job's expected end, placement and nodes


class NodeSpace:
    """Backfill's node-space map from now to the end of its window, at bf_resolution: consecutive slots
    [begin_s, end_s) with the nodes no pending job has reserved in each."""

    def __init__(self, now_s: int, window_s: int, all_nodes: NodeSet, resolution_s: int):
        self.resolution_s = resolution_s
        self.all_nodes = all_nodes
        self.begin_s = [now_s]
        self.slot_end_s = [now_s + window_s]
        self.avail = [all_nodes]

    @property
    def end_s(self) -> int:
        """The end of the window."""
        return self.slot_end_s[-1]

    @property
    def n_slots(self) -> int:
        """How many slots the map has."""
        return len(self.avail)

    def avail_over(self, start_s: int, end_s: int) -> tuple[NodeSet, int | None]:
        """The nodes free of reservations over [start_s, end_s], and the first later second at which more nodes
        become free (None if none), where a later try could fare better."""
        avail, later = self.all_nodes, None
        slots = self.avail
        for k in range(bisect.bisect_right(self.slot_end_s, start_s), len(slots)):
            if self.begin_s[k] > end_s:
                break
            if later is None and k + 1 < len(slots) and slots[k + 1] & ~slots[k]:
                later = self.slot_end_s[k]
            avail &= slots[k]
        return avail, later

    def overlaps(self, start_s: int, end_s: int, nodes: NodeSet) -> bool:
        """Whether any of nodes is reserved somewhere in [start_s, end_s)."""
        for k in range(bisect.bisect_right(self.slot_end_s, start_s), len(self.avail)):
            if self.begin_s[k] >= end_s:
                return False
            if nodes & ~self.avail[k]:
                return True
        return False

    def reserve(self, start_s: int, end_s: int, nodes: NodeSet) -> None:
        """Take nodes out of every slot within [start_s, end_s) (rounded out to the resolution)."""
        r = self.resolution_s
        start_s, end_s = (start_s // r) * r, -(-end_s // r) * r
        self._split(start_s)
        self._split(end_s)
        for k in range(bisect.bisect_left(self.begin_s, start_s), len(self.avail)):
            if self.slot_end_s[k] > end_s:
                break
            self.avail[k] &= ~nodes

    def _split(self, t_s: int) -> None:
        k = bisect.bisect_right(self.slot_end_s, t_s)
        if k < len(self.avail) and self.begin_s[k] < t_s:
            self.begin_s.insert(k + 1, t_s)
            self.slot_end_s.insert(k, t_s)
            self.avail.insert(k + 1, self.avail[k])


WILL_RUN_WINDOW_S = 30  # the will-run test's first window and the clock barrier it is aligned on
# A group of running jobs freed together by the will-run test: the last one's expected end, and the free GPUs and
# CPUs of each usable node it changes, as they are once the group and every earlier one is freed.
FreedGroup = tuple[int, tuple[tuple[int, int, int], ...]]


def freed_groups(pool: NodePool, usable: NodeSet, ends: list[RunningEnd], epoch_s: int) -> list[FreedGroup]:
    """The will-run test's groups for jobs that may use the usable nodes: the running jobs on them (sorted by
    expected end) freed in windowed groups aligned on the clock (epoch_s: its second at replay second 0)."""
    relevant = [(end_s, held) for end_s, held, nodes in ends if nodes & usable]
    free_g: dict[int, int] = {}
    free_c: dict[int, int] = {}
    groups: list[FreedGroup] = []
    window_s, barrier_s, k = WILL_RUN_WINDOW_S, None, 0
    while k < len(relevant):
        touched: dict[int, None] = {}
        while True:  # one group: free every job that ends within the barrier plus the window
            end_s, held = relevant[k]
            if barrier_s is None:
                barrier_s = end_s + WILL_RUN_WINDOW_S - (end_s + epoch_s) % WILL_RUN_WINDOW_S
            for node, g, c in held:
                if usable >> node & 1:
                    free_g[node] = free_g.get(node, pool.free_gpus[node]) + g
                    free_c[node] = free_c.get(node, pool.free_cpus[node]) + c
                    touched[node] = None
            k += 1
            if k == len(relevant) or relevant[k][0] > barrier_s + window_s:
                break
        window_s *= 2
        while k < len(relevant) and relevant[k][0] > barrier_s + window_s:
            window_s *= 2
        groups.append((end_s, tuple((node, free_g[node], free_c[node]) for node in touched)))
    return groups


class WillRun:
    """The will-run test within one backfill pass: each job's earliest start, the running jobs' groups computed once
    per set of usable nodes until a job starts (forget)."""

    def __init__(self, pool: NodePool, running_on: Callable[[int], list[RunningEnd]], epoch_s: int = 0):
        self.pool, self.running_on, self.epoch_s = pool, running_on, epoch_s
        self.groups: dict[NodeSet, list[FreedGroup]] = {}

    def forget(self) -> None:
        """Drop the groups: a job started, so the running jobs changed."""
        self.groups.clear()

    def earliest_start(self, job: tuple[int, int, int, int], allowed: NodeSet, now_s: int):
        """When and where job (partition, gpus, cpus, nodes) can first start on the allowed nodes, freeing the
        running jobs in the will-run test's groups (a start after now is the end of the last job freed, and at
        least now + 1), or None if never."""
        pool = self.pool
        part, gpus, cpus, n_nodes = job
        placement = pool.place(part, gpus, cpus, n_nodes, allowed)
        if placement is not None:
            return now_s, placement
        usable = pool.partition_set[part] & allowed
        if usable.bit_count() < n_nodes:
            return None
        groups = self.groups.get(usable)
        if groups is None:
            groups = self.groups[usable] = freed_groups(pool, usable, self.running_on(part), self.epoch_s)
        even = gpus % n_nodes == 0 and cpus % n_nodes == 0
        fit = _EvenFit(pool, usable, gpus, cpus, n_nodes) if even else _UnevenFit(pool, job, usable)
        for end_s, changes in groups:
            placement = fit.after(changes)
            if placement is not None:
                return max(end_s, now_s + 1), placement
        return None


class _EvenFit:
    """First fit of a job whose GPUs and CPUs split evenly over its nodes, as groups free nodes: only the nodes a
    group changes are tested again (free resources only grow)."""

    def __init__(self, pool: NodePool, usable: NodeSet, gpus: int, cpus: int, n_nodes: int):
        self.g, self.c, self.n_nodes = gpus // n_nodes, cpus // n_nodes, n_nodes
        self.fitting = 0  # usable nodes that hold one share
        if self.g < len(pool.with_gpus):
            for node in members(usable & pool.with_gpus[self.g]):
                if pool.free_cpus[node] >= self.c:
                    self.fitting |= 1 << node

    def after(self, changes: tuple[tuple[int, int, int], ...]) -> Placement | None:
        """The placement once a group's changes are freed, or None."""
        for node, free_g, free_c in changes:
            if free_g >= self.g and free_c >= self.c:
                self.fitting |= 1 << node
        if self.fitting.bit_count() < self.n_nodes:
            return None
        picked = []
        for node in members(self.fitting):
            picked.append((node, self.g, self.c))
            if len(picked) == self.n_nodes:
                break
        return tuple(picked)


class _UnevenFit:
    """First fit of a job whose shares differ between its nodes, on the free resources as groups free them."""

    def __init__(self, pool: NodePool, job: tuple[int, int, int, int], usable: NodeSet):
        self.pool, self.job, self.usable = pool, job, usable
        self.free_g: dict[int, int] = {}
        self.free_c: dict[int, int] = {}

    def after(self, changes: tuple[tuple[int, int, int], ...]) -> Placement | None:
        """The placement once a group's changes are freed, or None."""
        for node, free_g, free_c in changes:
            self.free_g[node], self.free_c[node] = free_g, free_c
        _, gpus, cpus, n_nodes = self.job
        free_g, free_c, pool = self.free_g, self.free_c, self.pool
        return choose(
            self.usable,
            lambda n: free_g.get(n, pool.free_gpus[n]),
            lambda n: free_c.get(n, pool.free_cpus[n]),
            gpus,
            cpus,
            n_nodes,
        )
