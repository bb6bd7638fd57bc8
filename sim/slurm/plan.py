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

from typing import NamedTuple

import numpy as np

from sim.slurm.jit import NONE, compiled
from sim.slurm.nodes import place

WILL_RUN_WINDOW_S = 30  # the will-run test's first window and the clock barrier it is aligned on


class Space(NamedTuple):
    """Backfill's node-space map from now to the end of its window: slots [begin_s, end_s) in order, each with the
    nodes no pending job has reserved in it (size[0] slots in use)."""

    begin_s: np.ndarray
    end_s: np.ndarray
    avail: np.ndarray  # bool (slots x nodes)
    size: np.ndarray


def new_space(max_reservations: int, n_nodes: int) -> Space:
    """Room for a map of up to max_reservations reservations over n_nodes nodes."""
    slots = 2 * max_reservations + 1
    return Space(
        np.zeros(slots, dtype=np.int64),
        np.zeros(slots, dtype=np.int64),
        np.ones((slots, n_nodes), dtype=np.bool_),
        np.zeros(1, dtype=np.int64),
    )


@compiled
def space_open(sp, now_s, window_s):
    """The empty map: one slot from now to the end of the window, every node free."""
    sp.begin_s[0], sp.end_s[0] = now_s, now_s + window_s
    sp.avail[0, :] = True
    sp.size[0] = 1


@compiled
def avail_over(sp, start_s, end_s, out):
    """The nodes free of reservations over [start_s, end_s] into out; returns the first later second at which more
    nodes become free (NONE if none), where a later try could fare better."""
    begin, end, avail = sp.begin_s, sp.end_s, sp.avail  # NOTE: taken out of the tuple once (no count per use)
    out[:] = True
    later = NONE
    n = sp.size[0]
    n_nodes = len(out)
    k = np.searchsorted(end[:n], start_s, side="right")
    while k < n:
        if begin[k] > end_s:
            break
        if later == NONE and k + 1 < n:
            for node in range(n_nodes):
                if avail[k + 1, node] and not avail[k, node]:
                    later = end[k]
                    break
        for node in range(n_nodes):
            out[node] &= avail[k, node]
        k += 1
    return later


@compiled
def overlaps(sp, start_s, end_s, nodes, n_nodes):
    """Whether any of nodes[:n_nodes] is reserved somewhere in [start_s, end_s)."""
    begin, avail = sp.begin_s, sp.avail
    n = sp.size[0]
    for k in range(np.searchsorted(sp.end_s[:n], start_s, side="right"), n):
        if begin[k] >= end_s:
            return False
        for i in range(n_nodes):
            if not avail[k, nodes[i]]:
                return True
    return False


@compiled
def reserve(sp, start_s, end_s, nodes, n_nodes, resolution_s):
    """Take nodes[:n_nodes] out of every slot within [start_s, end_s) (rounded out to the resolution)."""
    start_s = (start_s // resolution_s) * resolution_s
    end_s = -(-end_s // resolution_s) * resolution_s
    _split(sp, start_s)
    _split(sp, end_s)
    end, avail = sp.end_s, sp.avail
    n = sp.size[0]
    for k in range(np.searchsorted(sp.begin_s[:n], start_s, side="left"), n):
        if end[k] > end_s:
            break
        for i in range(n_nodes):
            avail[k, nodes[i]] = False


@compiled
def _split(sp, t_s):
    begin, end, avail = sp.begin_s, sp.end_s, sp.avail
    n = sp.size[0]
    k = np.searchsorted(end[:n], t_s, side="right")
    if k < n and begin[k] < t_s:
        begin[k + 2 : n + 1] = begin[k + 1 : n].copy()
        end[k + 1 : n + 1] = end[k:n].copy()
        avail[k + 2 : n + 1] = avail[k + 1 : n].copy()
        begin[k + 1] = t_s
        end[k] = t_s
        avail[k + 1] = avail[k]
        sp.size[0] = n + 1


class WillRunScratch(NamedTuple):
    """Working arrays of the will-run test (per node, and per running job)."""

    usable: np.ndarray  # bool per node
    fitting: np.ndarray  # bool per node
    free_g: np.ndarray
    free_c: np.ndarray
    touched: np.ndarray  # nodes a group changed
    relevant: np.ndarray  # positions in the running list of the jobs on usable nodes


def new_will_run(n_nodes: int, n_jobs: int) -> WillRunScratch:
    """Working arrays for a cluster of n_nodes nodes and a replay of n_jobs jobs."""
    return WillRunScratch(
        np.zeros(n_nodes, dtype=np.bool_),
        np.zeros(n_nodes, dtype=np.bool_),
        np.zeros(n_nodes, dtype=np.int64),
        np.zeros(n_nodes, dtype=np.int64),
        np.zeros(n_nodes, dtype=np.int64),
        np.zeros(max(n_jobs, 1), dtype=np.int64),
    )


@compiled
def earliest_start(cl, free_g, free_c, running, pl, job, allowed, now_s, epoch_s, wr, out_node, out_g, out_c):
    """When job (partition, gpus, cpus, nodes) can first start on the allowed nodes as the will-run test finds it,
    freeing the running jobs (running: expected end, job, by expected end; pl: their placements) in its windowed
    groups aligned on the clock (epoch_s: its second at replay second 0): now, else the end of the last job freed in
    the group that makes room and at least now + 1, or NONE if never; the placement is written to out_*."""
    part, gpus, cpus, n_nodes = job
    if place(cl, free_g, free_c, part, gpus, cpus, n_nodes, allowed, out_node, out_g, out_c):
        return now_s
    part_nodes, node_on, lo, hi = cl.part_nodes, cl.node_on, cl.part_ptr[part], cl.part_ptr[part + 1]
    usable, fitting = wr.usable, wr.fitting
    n_usable = 0
    for i in range(lo, hi):
        node = part_nodes[i]
        usable[node] = allowed[node] and node_on[node]
        n_usable += usable[node]
    start = NONE
    if n_usable >= n_nodes:
        start = _freed_start(cl, free_g, free_c, running, pl, job, now_s, epoch_s, wr, out_node, out_g, out_c)
    for i in range(lo, hi):
        usable[part_nodes[i]] = False
        fitting[part_nodes[i]] = False
    return start


@compiled
def _freed_start(cl, free_g, free_c, running, pl, job, now_s, epoch_s, wr, out_node, out_g, out_c):
    part, gpus, cpus, n_nodes = job
    end_at, job_at, n_running = running
    usable, fitting, freed_g, freed_c, touched, relevant = wr
    pl_ptr, pl_size, pl_node, pl_gpus, pl_cpus = pl
    part_nodes, lo, hi = cl.part_nodes, cl.part_ptr[part], cl.part_ptr[part + 1]
    n_rel = 0
    for k in range(n_running):
        j = job_at[k]
        for i in range(pl_ptr[j], pl_ptr[j] + pl_size[j]):
            if usable[pl_node[i]]:
                relevant[n_rel] = k
                n_rel += 1
                break
    if n_rel == 0:
        return NONE
    freed_g[:] = free_g
    freed_c[:] = free_c
    even = gpus % n_nodes == 0 and cpus % n_nodes == 0
    g, c = gpus // n_nodes, cpus // n_nodes
    n_fit = 0
    if even:
        for i in range(lo, hi):
            node = part_nodes[i]
            if usable[node] and free_g[node] >= g and free_c[node] >= c:
                fitting[node] = True
                n_fit += 1
    window_s, barrier_s, k = WILL_RUN_WINDOW_S, NONE, 0
    room = len(touched)
    while k < n_rel:
        n_touched = 0
        while True:  # one group: free every job that ends within the barrier plus the window
            end_s, j = end_at[relevant[k]], job_at[relevant[k]]
            if barrier_s == NONE:
                barrier_s = end_s + WILL_RUN_WINDOW_S - (end_s + epoch_s) % WILL_RUN_WINDOW_S
            for i in range(pl_ptr[j], pl_ptr[j] + pl_size[j]):
                node = pl_node[i]
                if usable[node]:
                    freed_g[node] += pl_gpus[i]
                    freed_c[node] += pl_cpus[i]
                    touched[n_touched % room] = node
                    n_touched += 1
            k += 1
            if k == n_rel or end_at[relevant[k]] > barrier_s + window_s:
                break
        window_s *= 2
        while k < n_rel and end_at[relevant[k]] > barrier_s + window_s:
            window_s *= 2
        if even:
            if n_touched > room:  # NOTE: more changes than nodes: test every usable node again
                n_fit = 0
                for i in range(lo, hi):
                    node = part_nodes[i]
                    fitting[node] = usable[node] and freed_g[node] >= g and freed_c[node] >= c
                    n_fit += fitting[node]
            else:
                for t in range(n_touched):
                    node = touched[t]
                    if not fitting[node] and freed_g[node] >= g and freed_c[node] >= c:
                        fitting[node] = True
                        n_fit += 1
            if n_fit >= n_nodes:
                f = 0
                for i in range(lo, hi):
                    node = part_nodes[i]
                    if fitting[node]:
                        out_node[f], out_g[f], out_c[f] = node, g, c
                        f += 1
                        if f == n_nodes:
                            break
                return max(end_s, now_s + 1)
        elif place(cl, freed_g, freed_c, part, gpus, cpus, n_nodes, usable, out_node, out_g, out_c):
            return max(end_s, now_s + 1)
    return NONE
