"""The `slurm` policy's event loop: submissions, ends, the decay thread's passes, the main scheduler (at each
submission and end, and every sched_interval) and the backfill scheduler (every bf_interval when something
changed), over one pool of nodes shared by the partitions, second by second in its own compiled loop (within a
second in sim.engine.loop's order: ends, then submissions, then the passes).

Timing as slurmctld 22.05 keeps it: the periodic passes count from its start (BOOT_TIME; the replay's start when
unknown), a job past its time limit is stopped at the next limit check (every 30 s) after start + limit +
OverTimeLimit, and within one second ends come first, then submissions, the decay pass, the main pass and backfill.
The loop and its passes are compiled (sim.slurm.jit); `replay` builds their tables and returns the outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba.typed import List

from analytics.slurm_config import SlurmConfig
from sim.slurm import limits, tables
from sim.slurm.jit import NEVER, NONE, compiled
from sim.slurm.jobs import NEVER_S, SlurmJobs
from sim.slurm.limits import Held, blocked, count, new_held
from sim.slurm.nodes import fits_empty, nodes_needed, place
from sim.slurm.plan import (
    Space,
    WillRunScratch,
    avail_over,
    earliest_start,
    new_space,
    new_will_run,
    overlaps,
    reserve,
    space_open,
)
from sim.slurm.priority import priorities_at, priority_at
from sim.slurm.tables import Caps, Cluster, JobTable, Membership, Settings, TreeTable
from sim.slurm.usage import Ledger, calc_pass, factor_of, factors, job_end, new_ledger

LIMIT_CHECK_S = 30  # slurmctld checks time limits every PERIODIC_TIMEOUT seconds
CHUNK = 4096  # timeline rows per chunk
Placement = tuple[tuple[int, int, int], ...]  # (node, gpus, cpus) per node of an allocation
# (second, node, in service from then on): a node leaving is drained (it takes no new job, the jobs running on it
# stay: `scontrol update NodeName=... State=DRAIN`), one joining takes jobs from then on (`State=RESUME`)
NodeChange = tuple[int, int, bool]


@dataclass(frozen=True, eq=False)
class SlurmOutcome:
    """Per-job results of a replay (index = the jobs' order) and the cluster's timeline."""

    start_s: np.ndarray  # int64, -1 when the job never started (or cannot run on its partition)
    end_s: np.ndarray  # int64, -1 when it never started
    priority: np.ndarray  # float64, the priority it had when it started (or last had)
    timed_out: np.ndarray  # bool, stopped by its time limit
    runnable: np.ndarray  # bool, False when its partition can never hold it or a limit never lets it start
    placement: list[Placement]
    timeline_t_s: np.ndarray
    timeline_used_gpus: np.ndarray  # (events x groups) GPUs held by each group's jobs after each event
    timeline_queued_jobs: np.ndarray  # (events x groups) jobs waiting in each group (groups: partitions by default)


def next_tick(now_s: int, origin_s: int, period_s: int) -> int:
    """The first second >= now_s of the ticks origin_s + k * period_s."""
    return origin_s + -(-(now_s - origin_s) // period_s) * period_s


_next_tick = compiled(next_tick)


class Placements(NamedTuple):
    """Where each started job runs: its rows ptr[j] .. ptr[j] + size[j] of node, gpus and cpus."""

    ptr: np.ndarray
    size: np.ndarray
    node: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray


class Queue(NamedTuple):
    """The pending jobs in Slurm's order, the running ones (in start order, -1 once ended; and by expected end),
    the heap of ends, and the counters of the timeline groups and partitions."""

    pending: np.ndarray
    running: np.ndarray
    slot: np.ndarray  # each running job's index in running
    expected_end: np.ndarray  # (start + limit) of the running jobs, sorted with expected_job
    expected_job: np.ndarray
    heap_end: np.ndarray
    heap_job: np.ndarray
    part_pending: np.ndarray
    group_used: np.ndarray
    group_queued: np.ndarray
    size: np.ndarray  # [pending, running slots, running jobs, expected, heap, timeline rows]


class Clock(NamedTuple):
    """The passes' next seconds, whether something changed since the last backfill pass and when the cluster last
    changed (a job started, ended or arrived, a node left or joined)."""

    ticks: np.ndarray  # [next decay pass, next main pass, next backfill pass, dirty, last change]


class Outcome(NamedTuple):
    """The per-job results the loop writes."""

    start_s: np.ndarray
    end_s: np.ndarray
    priority: np.ndarray
    timed_out: np.ndarray


class Pass(NamedTuple):
    """Working arrays of one pass: the nodes it leaves open, its partitions' state and a placement found."""

    allowed: np.ndarray
    every: np.ndarray  # all True
    first_end: np.ndarray  # per partition, the first expected end of a job running on its nodes
    avail: np.ndarray
    closed: np.ndarray
    pending: np.ndarray
    deferred: np.ndarray
    out_node: np.ndarray
    out_g: np.ndarray
    out_c: np.ndarray
    unfit: np.ndarray  # per partition, [GPUs, CPUs per node, nodes] of an even job that did not fit in this pass


P_PENDING, R_SLOTS, R_JOBS, X_SIZE, H_SIZE, T_SIZE = 0, 1, 2, 3, 4, 5
NEXT_CALC, NEXT_SCHED, NEXT_BF, DIRTY, LAST_CHANGE = 0, 1, 2, 3, 4


class Model(NamedTuple):
    """Everything one replay reads and writes."""

    cl: Cluster
    free_g: np.ndarray  # free GPUs per node
    free_c: np.ndarray  # free CPUs per node
    jt: JobTable
    tt: TreeTable
    caps: Caps
    st: Settings
    held: Held
    lg: Ledger
    q: Queue
    clock: Clock
    out: Outcome
    pl: Placements
    sp: Space
    wr: WillRunScratch
    ps: Pass
    mb: Membership


# ---------------------------------------------------------------- the queue


@compiled
def _ahead(tier_a, priority_a, job_a, tier_b, priority_b, job_b):
    """Whether job a comes before job b in the queue: higher partition tier, then higher priority, then the job
    submitted first."""
    if tier_a != tier_b:
        return tier_a > tier_b
    if priority_a != priority_b:
        return priority_a > priority_b
    return job_a < job_b


@compiled
def _enqueue(m, job):
    """Put an arriving job in its place in the queue."""
    pending, tier, priority, size = m.q.pending, m.jt.tier, m.out.priority, m.q.size
    n = size[P_PENDING]
    t, p = tier[job], priority[job]
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        other = pending[mid]
        if _ahead(tier[other], priority[other], other, t, p, job):
            lo = mid + 1
        else:
            hi = mid
    _shift_right(pending, lo, n)
    pending[lo] = job
    size[P_PENDING] = n + 1


@compiled
def _shift_right(a, lo, n):
    """a[lo + 1 : n + 1] = a[lo:n] in place (a slice copy would allocate at every arrival)."""
    for k in range(n, lo, -1):
        a[k] = a[k - 1]


@compiled
def _shift_left(a, lo, n):
    """a[lo : n - 1] = a[lo + 1 : n] in place."""
    for k in range(lo, n - 1):
        a[k] = a[k + 1]


@compiled
def _dequeue_started(m, first):
    """Take the started jobs off the queue (none before position first)."""
    pending, start_s, size = m.q.pending, m.out.start_s, m.q.size
    k = first
    for i in range(first, size[P_PENDING]):
        if start_s[pending[i]] < 0:
            pending[k] = pending[i]
            k += 1
    size[P_PENDING] = k


@compiled
def _resort(m):
    """Put the queue back in order after a priority pass: the jobs still in order are kept, the few that moved are
    sorted and merged in (a full sort of a deep queue at every PriorityCalcPeriod dominated long replays); the keys
    are read once into arrays in queue order, so that the comparisons do not jump about the job table."""
    n = m.q.size[P_PENDING]
    pending = m.q.pending
    job = pending[:n].copy()
    tier, priority = m.jt.tier[job], m.out.priority[job]
    kept = np.empty(n, dtype=np.int64)  # positions in job
    moved = np.empty(n, dtype=np.int64)
    n_kept = n_moved = 0
    last = -1
    for i in range(n):
        if last < 0 or _ahead(tier[last], priority[last], job[last], tier[i], priority[i], job[i]):
            kept[n_kept] = i
            last = i
            n_kept += 1
        else:
            moved[n_moved] = i
            n_moved += 1
    if n_moved == 0:
        return
    rows = _sorted(moved[:n_moved], tier, priority, job)
    i = j = 0  # NOTE: the same merge as _sorted's, written out: a shared function taking the arrays made six months
    # of Saturn 60 % slower (a call per pair of runs, each counting references to its arrays)
    for k in range(n):
        a = kept[i] if i < n_kept else -1
        b = rows[j] if j < n_moved else -1
        if b < 0 or (a >= 0 and _ahead(tier[a], priority[a], job[a], tier[b], priority[b], job[b])):
            pending[k] = job[a]
            i += 1
        else:
            pending[k] = job[b]
            j += 1


@compiled
def _sorted(rows, tier, priority, job):
    """rows (positions in the key arrays) in queue order: a bottom-up merge sort on _ahead."""
    n = len(rows)
    a, b = rows.copy(), np.empty(n, dtype=np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j = lo, mid
            for k in range(lo, hi):
                x = a[i] if i < mid else -1
                y = a[j] if j < hi else -1
                if y < 0 or (x >= 0 and not _ahead(tier[y], priority[y], job[y], tier[x], priority[x], job[x])):
                    b[k] = x
                    i += 1
                else:
                    b[k] = y
                    j += 1
        a, b = b, a
        width *= 2
    return a


# ---------------------------------------------------------------- running jobs


@compiled
def _heap_push(q, end_s, job):
    k = q.size[H_SIZE]
    q.size[H_SIZE] = k + 1
    while k > 0:
        parent = (k - 1) // 2
        if (q.heap_end[parent], q.heap_job[parent]) <= (end_s, job):
            break
        q.heap_end[k], q.heap_job[k] = q.heap_end[parent], q.heap_job[parent]
        k = parent
    q.heap_end[k], q.heap_job[k] = end_s, job


@compiled
def _heap_pop(q):
    job = q.heap_job[0]
    n = q.size[H_SIZE] - 1
    q.size[H_SIZE] = n
    end_s, last = q.heap_end[n], q.heap_job[n]
    k = 0
    while True:
        child = 2 * k + 1
        if child >= n:
            break
        if child + 1 < n and (q.heap_end[child + 1], q.heap_job[child + 1]) < (q.heap_end[child], q.heap_job[child]):
            child += 1
        if (end_s, last) <= (q.heap_end[child], q.heap_job[child]):
            break
        q.heap_end[k], q.heap_job[k] = q.heap_end[child], q.heap_job[child]
        k = child
    q.heap_end[k], q.heap_job[k] = end_s, last
    return job


@compiled
def _expect(q, end_s, job, sign):
    """Add (sign 1) or remove (-1) a running job's expected end, kept sorted by (end, job)."""
    n = q.size[X_SIZE]
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if (q.expected_end[mid], q.expected_job[mid]) < (end_s, job):
            lo = mid + 1
        else:
            hi = mid
    if sign > 0:
        _shift_right(q.expected_end, lo, n)
        _shift_right(q.expected_job, lo, n)
        q.expected_end[lo], q.expected_job[lo] = end_s, job
        q.size[X_SIZE] = n + 1
    else:
        _shift_left(q.expected_end, lo, n)
        _shift_left(q.expected_job, lo, n)
        q.size[X_SIZE] = n - 1


@compiled
def _compact_running(q):
    k = 0
    for i in range(q.size[R_SLOTS]):
        if q.running[i] >= 0:
            q.running[k] = q.running[i]
            q.slot[q.running[k]] = k
            k += 1
    q.size[R_SLOTS] = k


@compiled
def start(m, job, now_s):
    """Start job at now_s on the placement in m.ps.out_*: its end is its true end or the limit check that stops it
    (the pass that starts it takes it off the queue)."""
    jt, q, pl, ps = m.jt, m.q, m.pl, m.ps
    n = jt.nodes[job]
    base = pl.ptr[job]
    for i in range(n):
        node = ps.out_node[i]
        pl.node[base + i], pl.gpus[base + i], pl.cpus[base + i] = node, ps.out_g[i], ps.out_c[i]
        m.free_g[node] -= ps.out_g[i]
        m.free_c[node] -= ps.out_c[i]
    pl.size[job] = n
    if m.st.limits_active:
        count(m.held, m.tt, jt.user_assoc[job], jt.user[job], jt.qos[job], jt.gpus[job], np.int64(1))
    if q.size[R_SLOTS] == len(q.running) or q.size[R_SLOTS] > 2 * q.size[R_JOBS] + 64:
        _compact_running(q)  # NOTE: ended jobs' slots are reclaimed once they outnumber the running ones
    q.slot[job] = q.size[R_SLOTS]
    q.running[q.size[R_SLOTS]] = job
    q.size[R_SLOTS] += 1
    q.size[R_JOBS] += 1
    q.part_pending[jt.partition[job]] -= 1
    q.group_queued[jt.group[job]] -= 1
    q.group_used[jt.group[job]] += jt.gpus[job]
    m.out.start_s[job] = now_s
    _expect(q, now_s + jt.limit_s[job], job, np.int64(1))
    stop_s = now_s + jt.limit_s[job] + m.st.over_time_limit_s
    kill_s = _next_tick(stop_s, m.st.boot_s, LIMIT_CHECK_S)
    true_end_s = now_s + jt.duration_s[job] if jt.duration_s[job] < NEVER_S else NEVER
    end_s = min(true_end_s, kill_s)
    m.out.timed_out[job] = end_s == kill_s and true_end_s > kill_s
    m.out.end_s[job] = end_s
    _heap_push(q, end_s, job)
    _changed(m, now_s)


@compiled
def _end_jobs(m, now_s):
    jt, q, pl = m.jt, m.q, m.pl
    ended = False
    while q.size[H_SIZE] > 0 and q.heap_end[0] == now_s:
        job = _heap_pop(q)
        started = m.out.start_s[job]
        _expect(q, started + jt.limit_s[job], job, np.int64(-1))
        for i in range(pl.ptr[job], pl.ptr[job] + pl.size[job]):
            m.free_g[pl.node[i]] += pl.gpus[i]
            m.free_c[pl.node[i]] += pl.cpus[i]
        q.group_used[jt.group[job]] -= jt.gpus[job]
        if m.st.limits_active:
            count(m.held, m.tt, jt.user_assoc[job], jt.user[job], jt.qos[job], jt.gpus[job], np.int64(-1))
        q.running[q.slot[job]] = -1
        q.size[R_JOBS] -= 1
        job_end(m.lg, m.st, jt, job, started, now_s)
        ended = True
        _changed(m, now_s)
    return ended


# ---------------------------------------------------------------- the passes


@compiled
def _priority(m, job, now_s):
    fs = factor_of(m.lg, m.st, m.tt, m.jt.user_assoc[job]) if m.st.multifactor else 0.0
    return priority_at(m.st, m.jt, job, now_s, fs)


@compiled
def _calc_pass(m, now_s):
    q = m.q
    calc_pass(m.lg, m.st, m.jt, now_s, q.running, q.size[R_SLOTS], m.out.start_s)
    n = q.size[P_PENDING]
    if n:
        priorities_at(m.st, m.jt, q.pending[:n], now_s, factors(m.lg, m.st, m.tt), m.out.priority)
        _resort(m)
        m.clock.ticks[DIRTY] = 1
    m.clock.ticks[NEXT_CALC] += m.st.calc_period_s


@compiled
def _blocked(m, job):
    jt = m.jt
    return blocked(m.caps, m.held, m.tt, jt.user_assoc[job], jt.user[job], jt.qos[job], jt.gpus[job]) != 0


@compiled
def _close(cl, allowed, closed, waiting, part):
    """Take part's nodes out of the main pass and mark the partitions left without an open node; returns how many
    partitions with jobs waiting are still open."""
    part_ptr, part_nodes, node_on = cl.part_ptr, cl.part_nodes, cl.node_on
    for i in range(part_ptr[part], part_ptr[part + 1]):
        allowed[part_nodes[i]] = False
    open_waiting = 0
    for p in range(len(closed)):
        shut = True
        for i in range(part_ptr[p], part_ptr[p + 1]):
            if node_on[part_nodes[i]] and allowed[part_nodes[i]]:
                shut = False
                break
        closed[p] = shut
        open_waiting += waiting[p] > 0 and not shut
    return open_waiting


@compiled
def main_pass(m, now_s, depth):
    """The main scheduler: jobs in order, each started if it fits; one blocked for resources takes its partition's
    nodes out of the pass (the pass stops once every partition with jobs waiting is closed); one over a limit is
    passed over."""
    n = min(depth, m.q.size[P_PENDING])
    if n == 0:
        return
    # NOTE: every array taken out of its tuple once, not at each use in the loop
    cl, free_g, free_c, limited = m.cl, m.free_g, m.free_c, m.st.limits_active
    pending, partition, gpus, cpus, nodes = m.q.pending, m.jt.partition, m.jt.gpus, m.jt.cpus, m.jt.nodes
    allowed, closed, waiting = m.ps.allowed, m.ps.closed, m.ps.pending
    out_node, out_g, out_c = m.ps.out_node, m.ps.out_g, m.ps.out_c
    allowed[:] = True
    closed[:] = False
    waiting[:] = m.q.part_pending
    open_waiting = 0
    for p in range(len(waiting)):
        open_waiting += waiting[p] > 0
    first_started = -1
    for i in range(n):
        job = pending[i]
        part = partition[job]
        if closed[part] or (limited and _blocked(m, job)):
            continue
        if place(cl, free_g, free_c, part, gpus[job], cpus[job], nodes[job], allowed, out_node, out_g, out_c):
            start(m, job, now_s)
            if first_started < 0:
                first_started = i
            waiting[part] -= 1
            if waiting[part] == 0 and not closed[part]:
                open_waiting -= 1
        else:
            open_waiting = _close(cl, allowed, closed, waiting, part)
        if open_waiting == 0:
            break
    if first_started >= 0:
        _dequeue_started(m, first_started)


@compiled
def backfill_pass(m, now_s):
    """sched/backfill: each job in order (up to bf_max_job_test) starts now if it fits without delaying the
    reservations of the jobs before it, else reserves whole nodes from its earliest start over its limit.

    A job that does not fit the free nodes now cannot start in this pass (it only reserves), so its reservation is
    made only when a later job that fits comes, in order, and a pass in which no job fits reserves nothing."""
    n = min(m.st.bf_max_job_test, m.q.size[P_PENDING])
    cl, free_g, free_c, limited = m.cl, m.free_g, m.free_c, m.st.limits_active
    pending, partition, gpus, cpus, nodes = m.q.pending, m.jt.partition, m.jt.gpus, m.jt.cpus, m.jt.nodes
    every, deferred, first_end, unfit = m.ps.every, m.ps.deferred, m.ps.first_end, m.ps.unfit
    out_node, out_g, out_c = m.ps.out_node, m.ps.out_g, m.ps.out_c
    window_end = now_s + m.st.bf_window_s
    opened = False
    n_deferred = 0
    first_started = -1
    unfit[:] = NEVER
    for i in range(n):
        job = pending[i]
        if limited and _blocked(m, job):
            continue
        part, g, c, n_nodes = partition[job], gpus[job], cpus[job], nodes[job]
        fits = False
        if not _known_unfit(unfit, part, g, c, n_nodes):
            fits = place(cl, free_g, free_c, part, g, c, n_nodes, every, out_node, out_g, out_c)
            if not fits:
                _note_unfit(unfit, part, g, c, n_nodes)
        if not fits:
            deferred[n_deferred] = job
            n_deferred += 1
            continue
        if not opened:
            space_open(m.sp, now_s, m.st.bf_window_s)
            _first_ends(m)
            opened = True
        for k in range(n_deferred):
            # NOTE: a job that cannot start now starts after the first expected end on its nodes: past the window,
            # it reserves nothing (a trace without time limits: every running job ends a year on)
            if first_end[partition[deferred[k]]] <= window_end:
                _backfill_job(m, deferred[k], now_s)
        n_deferred = 0
        if _backfill_job(m, job, now_s):
            if first_started < 0:
                first_started = i
            _first_ends_after(m, job)
    m.clock.ticks[DIRTY] = 0
    if first_started >= 0:
        _dequeue_started(m, first_started)


@compiled
def _known_unfit(unfit, part, gpus, cpus, n_nodes):
    """Whether an even job cannot fit now because one needing no more per node on no more nodes did not (nodes only
    fill up during a pass, so the answer place() would give is known)."""
    if gpus % n_nodes or cpus % n_nodes:
        return False
    return gpus // n_nodes >= unfit[part, 0] and cpus // n_nodes >= unfit[part, 1] and n_nodes >= unfit[part, 2]


@compiled
def _note_unfit(unfit, part, gpus, cpus, n_nodes):
    """Remember an even job that did not fit (one that _known_unfit did not already cover)."""
    if gpus % n_nodes == 0 and cpus % n_nodes == 0:
        unfit[part, 0], unfit[part, 1], unfit[part, 2] = gpus // n_nodes, cpus // n_nodes, n_nodes


@compiled
def _first_ends(m):
    """Each partition's first expected end of a job running on its nodes (NEVER if none)."""
    first, expected_job, expected_end = m.ps.first_end, m.q.expected_job, m.q.expected_end
    pl_ptr, pl_size, pl_node = m.pl.ptr, m.pl.size, m.pl.node
    node_ptr, node_parts = m.cl.node_ptr, m.cl.node_parts
    first[:] = NEVER
    for k in range(m.q.size[X_SIZE]):
        job = expected_job[k]
        for i in range(pl_ptr[job], pl_ptr[job] + pl_size[job]):
            node = pl_node[i]
            for j in range(node_ptr[node], node_ptr[node + 1]):
                first[node_parts[j]] = min(first[node_parts[j]], expected_end[k])


@compiled
def _first_ends_after(m, job):
    """The first expected ends once job started."""
    cl, pl, first = m.cl, m.pl, m.ps.first_end
    end_s = m.out.start_s[job] + m.jt.limit_s[job]
    for i in range(pl.ptr[job], pl.ptr[job] + pl.size[job]):
        node = pl.node[i]
        for j in range(cl.node_ptr[node], cl.node_ptr[node + 1]):
            first[cl.node_parts[j]] = min(first[cl.node_parts[j]], end_s)


@compiled
def _backfill_job(m, job, now_s):
    """Start job now if it fits without touching earlier reservations, else reserve its nodes; whether it started."""
    jt, ps, sp = m.jt, m.ps, m.sp
    shape = (jt.partition[job], jt.gpus[job], jt.cpus[job], jt.nodes[job])
    n_nodes = jt.nodes[job]
    limit_s = jt.limit_s[job]
    running = (m.q.expected_end, m.q.expected_job, m.q.size[X_SIZE])
    start_res = now_s
    for _ in range(sp.size[0] + 2):
        later = avail_over(sp, start_res, max(start_res, now_s) + limit_s, ps.avail)
        found = earliest_start(
            m.cl, m.free_g, m.free_c, running, m.pl, shape, ps.avail, now_s, m.st.epoch_s, m.wr, ps.out_node,
            ps.out_g, ps.out_c,
        )  # fmt: skip
        if found == NONE:
            if later == NONE:
                return False
            start_res = later
            continue
        begin = max(found, start_res)
        if begin <= now_s:
            start(m, job, now_s)
            return True
        if later != NONE and begin > later:
            start_res = later
            continue
        if begin > sp.end_s[sp.size[0] - 1]:
            return False
        if overlaps(sp, begin, begin + limit_s, ps.out_node, n_nodes):
            start_res = begin + (1 if begin == start_res else 0)
            continue
        reserve(sp, begin, begin + limit_s, ps.out_node, n_nodes, m.st.bf_resolution_s)
        return False
    return False


# ---------------------------------------------------------------- the loop


@compiled
def _arrive(m, now_s, first, stop):
    jt, q = m.jt, m.q
    arrived = False
    for job in range(first, stop):
        if jt.runnable[job]:
            m.out.priority[job] = _priority(m, job, now_s)
            _enqueue(m, job)
            q.part_pending[jt.partition[job]] += 1
            q.group_queued[jt.group[job]] += 1
            arrived = True
            _changed(m, now_s)
    return arrived


@compiled
def _change_nodes(m, now_s):
    """Apply the nodes' changes due by now_s; whether there were any."""
    mb, node_on = m.mb, m.cl.node_on
    k = mb.next[0]
    while k < len(mb.t_s) and mb.t_s[k] <= now_s:
        node_on[mb.node[k]] = mb.on[k]
        k += 1
    changed = k > mb.next[0]
    mb.next[0] = k
    if changed:
        _changed(m, now_s)
    return changed


@compiled
def _changed(m, now_s):
    """Note that the cluster changed at now_s (the next backfill pass has work)."""
    m.clock.ticks[DIRTY] = 1
    m.clock.ticks[LAST_CHANGE] = now_s


@compiled
def on_time(m, now_s, first, stop, tl_t, tl_used, tl_queued):
    """Advance the replay through second now_s (jobs first .. stop arrive); returns its next own event second."""
    st, ticks = m.st, m.clock.ticks
    event = _end_jobs(m, now_s)
    event |= _change_nodes(m, now_s)
    event |= _arrive(m, now_s, first, stop)
    if now_s == ticks[NEXT_CALC]:
        _calc_pass(m, now_s)
    if event:
        main_pass(m, now_s, st.default_queue_depth)
    if now_s == ticks[NEXT_SCHED]:
        main_pass(m, now_s, m.q.size[P_PENDING])
        ticks[NEXT_SCHED] += st.sched_interval_s
    if st.backfill and now_s == ticks[NEXT_BF]:
        if ticks[DIRTY] and m.q.size[P_PENDING]:
            backfill_pass(m, now_s)
        ticks[NEXT_BF] += st.bf_interval_s
    _sample(m, now_s, tl_t, tl_used, tl_queued)
    return _next_event(m, now_s)


@compiled
def _settled(m, now_s):
    """Whether the jobs still waiting can never start: nothing runs, no node is left to change, and none of them fits
    the nodes in service, or the passes have long seen them and their order no longer changes (the main and the
    backfill pass since the cluster's last change; under multifactor, also the age factor's growth to its maximum
    and two priority passes: a fair-share factor moving on after that is not followed)."""
    q, st = m.q, m.st
    if q.size[R_JOBS] or m.mb.next[0] < len(m.mb.t_s):
        return False
    settle_s = 2 * max(st.sched_interval_s, st.bf_interval_s)
    if st.multifactor:
        settle_s += st.max_age_s + 2 * st.calc_period_s
    if now_s > m.clock.ticks[LAST_CHANGE] + settle_s:
        return True
    jt, ps = m.jt, m.ps
    for i in range(q.size[P_PENDING]):
        job = q.pending[i]
        g, c, k = jt.gpus[job], jt.cpus[job], jt.nodes[job]
        if place(m.cl, m.free_g, m.free_c, jt.partition[job], g, c, k, ps.every, ps.out_node, ps.out_g, ps.out_c):
            return False
    return True


@compiled
def _next_event(m, now_s):
    """The replay's next own event second (NEVER once the jobs still waiting can never start: _settled)."""
    q, st, ticks = m.q, m.st, m.clock.ticks
    if q.size[P_PENDING] and _settled(m, now_s):
        return NEVER
    nxt = q.heap_end[0] if q.size[H_SIZE] else NEVER
    if q.size[P_PENDING] or q.size[R_JOBS]:
        if ticks[NEXT_CALC] <= now_s:  # clocks that fell behind while the replay was idle
            ticks[NEXT_CALC] = _next_tick(now_s + 1, st.boot_s, st.calc_period_s)
        if ticks[NEXT_SCHED] <= now_s:
            ticks[NEXT_SCHED] = _next_tick(now_s + 1, st.boot_s, st.sched_interval_s)
        if ticks[NEXT_BF] <= now_s:
            ticks[NEXT_BF] = _next_tick(now_s + 1, st.boot_s, st.bf_interval_s)
        nxt = min(nxt, ticks[NEXT_CALC])
    if q.size[P_PENDING]:
        nxt = min(nxt, ticks[NEXT_SCHED])
        if st.backfill and ticks[DIRTY]:
            nxt = min(nxt, ticks[NEXT_BF])
        if m.mb.next[0] < len(m.mb.t_s):  # NOTE: with nothing waiting, a change waits for the next event
            nxt = min(nxt, m.mb.t_s[m.mb.next[0]])
    return nxt


@compiled
def _sample(m, now_s, tl_t, tl_used, tl_queued):
    k = m.q.size[T_SIZE]
    if k == len(tl_t) * CHUNK:
        tl_t.append(np.zeros(CHUNK, dtype=np.int64))
        tl_used.append(np.zeros((CHUNK, m.st.n_groups), dtype=np.int64))
        tl_queued.append(np.zeros((CHUNK, m.st.n_groups), dtype=np.int64))
    c, r = divmod(k, CHUNK)
    tl_t[c][r] = now_s
    tl_used[c][r] = m.q.group_used
    tl_queued[c][r] = m.q.group_queued
    m.q.size[T_SIZE] = k + 1


@compiled
def run(m, tl_t, tl_used, tl_queued):
    """Drive the replay over the arrivals and its own events, in time order, until neither is left."""
    submit = m.jt.submit_s
    none = np.int64(0)  # typed values, not literals: numba would compile the passes again for each constant
    n, i, own_s = len(submit), none, np.int64(NEVER)
    next_s = submit[0] if n else own_s
    while True:
        if own_s < next_s:
            own_s = on_time(m, own_s, none, none, tl_t, tl_used, tl_queued)
            continue
        if next_s >= NEVER:
            return
        first, now_s = i, next_s
        while i < n and submit[i] == now_s:
            i += 1
        next_s = submit[i] if i < n else NEVER
        own_s = on_time(m, now_s, first, i, tl_t, tl_used, tl_queued)


# ---------------------------------------------------------------- the tables and the outcome


def _last_tick(boot_s: int, period_s: int) -> int | None:
    """The decay thread's last pass at or before the replay's start, None if slurmctld starts later."""
    return None if boot_s > 0 else next_tick(1, boot_s, period_s) - period_s


def _runnable(config: SlurmConfig, cl: Cluster, tt: TreeTable, caps: Caps, active: bool, jobs: SlurmJobs, job_nodes):
    """Whether each job can ever start: within its partition's MaxNodes, on its empty nodes, within its caps
    (worked out once per distinct job shape: a month of a cluster has a few hundred)."""
    max_nodes = [p.max_nodes for p in config.partitions]
    known: dict[tuple, bool] = {}
    out = np.zeros(len(jobs), dtype=np.bool_)
    cols = (jobs.partition, jobs.gpus, jobs.cpus, job_nodes, jobs.user_assoc, jobs.qos)
    for j, shape in enumerate(zip(*(c.tolist() for c in cols), strict=True)):
        if shape not in known:
            p, g, c, k, a, qos = shape
            known[shape] = (
                (max_nodes[p] is None or k <= max_nodes[p])
                and fits_empty(cl, p, g, c, k)
                and (not active or limits.can_ever_start(caps, tt, a, qos, g))
            )
        out[j] = known[shape]
    return out


def _job_table(config: SlurmConfig, jobs: SlurmJobs, cl: Cluster, tt: TreeTable, caps: Caps, groups, active):
    shapes = list(
        zip(jobs.partition.tolist(), jobs.gpus.tolist(), jobs.cpus.tolist(), jobs.nodes.tolist(), strict=True)
    )
    job_nodes = np.array([nodes_needed(cl, p, g, c, k) for p, g, c, k in shapes], dtype=np.int64)
    runnable = _runnable(config, cl, tt, caps, active, jobs, job_nodes)
    place_ptr = np.zeros(len(jobs) + 1, dtype=np.int64)
    place_ptr[1:] = np.cumsum(job_nodes)
    tiers = np.array([p.priority_tier for p in config.partitions], dtype=np.int64)
    return tables.JobTable(
        jobs.submit_s.astype(np.int64),
        jobs.duration_s.astype(np.int64),
        jobs.gpus.astype(np.int64),
        jobs.cpus.astype(np.int64),
        job_nodes,
        jobs.partition.astype(np.int64),
        np.asarray(groups, dtype=np.int64),
        jobs.limit_s.astype(np.int64),
        tiers[jobs.partition] if len(jobs) else np.zeros(0, dtype=np.int64),
        jobs.user_assoc.astype(np.int64),
        jobs.user.astype(np.int64),
        jobs.qos.astype(np.int64),
        np.asarray(tables.usage_rates(config, jobs), dtype=np.float64),
        np.asarray(tables.static_priority(config, jobs, job_nodes), dtype=np.float64),
        runnable,
        place_ptr,
    )


def _ints(k: int) -> np.ndarray:
    return np.zeros(k, dtype=np.int64)


def _queue(n: int, n_parts: int, n_groups: int) -> Queue:
    return Queue(*(_ints(n) for _ in range(7)), _ints(n_parts), _ints(n_groups), _ints(n_groups), _ints(6))


def _pass(n_nodes: int, n_parts: int, deferred: int, widest: int) -> Pass:
    allowed, every, avail = (np.ones(n_nodes, dtype=np.bool_) for _ in range(3))
    closed = np.zeros(n_parts, dtype=np.bool_)
    placement = (_ints(widest) for _ in range(3))
    unfit = np.zeros((n_parts, 3), dtype=np.int64)
    return Pass(allowed, every, _ints(n_parts), avail, closed, _ints(n_parts), _ints(deferred), *placement, unfit)


def build_model(
    config: SlurmConfig, jobs: SlurmJobs, boot_s: int = 0, groups=None, epoch_s: int = 0, changes=()
) -> Model:
    """The tables and the empty state of a replay of jobs on config (the arguments as replay's)."""
    group, n_groups = (jobs.partition, len(config.partitions)) if groups is None else groups
    cl, tt = tables.cluster_table(config), tables.tree_table(jobs.tree)
    mb = tables.membership_table(changes)
    caps = tables.caps_table(config, jobs.tree)
    active = tables.limits_active(config, caps)
    jt = _job_table(config, jobs, cl, tt, caps, group, active)
    n, n_nodes, n_parts = len(jobs), len(config.nodes), len(config.partitions)
    s, p = config.sched, config.priority
    tested = max(min(s.bf_max_job_test, n), 1)
    ticks = [next_tick(0, boot_s, p.calc_period_s), next_tick(1, boot_s, s.sched_interval_s)]
    ticks += [next_tick(1, boot_s, s.bf_interval_s), 0, 0]
    rows = int(jt.place_ptr[-1])
    return Model(
        cl,
        cl.node_gpus.copy(),
        cl.node_cpus.copy(),
        jt,
        tt,
        caps,
        tables.settings(config, active, boot_s, epoch_s, n_groups),
        new_held(len(jobs.tree.names), len(config.qos), len(jobs.user_names)),
        new_ledger(len(jobs.tree.users), _last_tick(boot_s, p.calc_period_s)),
        _queue(n, n_parts, n_groups),
        Clock(np.array(ticks, dtype=np.int64)),
        Outcome(np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64), np.zeros(n), np.zeros(n, np.bool_)),
        Placements(jt.place_ptr, _ints(n), _ints(rows), _ints(rows), _ints(rows)),
        new_space(tested, n_nodes),
        new_will_run(n_nodes, n),
        _pass(n_nodes, n_parts, tested, int(jt.nodes.max(initial=1))),
        mb,
    )


def _placements(m: Model) -> list[Placement]:
    pl = m.pl
    nodes, gpus, cpus = pl.node.tolist(), pl.gpus.tolist(), pl.cpus.tolist()
    out: list[Placement] = []
    for lo, k in zip(pl.ptr[:-1].tolist(), pl.size.tolist(), strict=True):
        out.append(tuple(zip(nodes[lo : lo + k], gpus[lo : lo + k], cpus[lo : lo + k], strict=True)))
    return out


def _timeline(chunks, rows: int, width: int) -> np.ndarray:
    if not rows:
        return np.zeros((0, width), dtype=np.int64) if width else np.zeros(0, dtype=np.int64)
    return np.concatenate(list(chunks))[:rows]


def replay(
    config: SlurmConfig,
    jobs: SlurmJobs,
    boot_s: int = 0,
    groups: tuple[np.ndarray, int] | None = None,
    epoch_s: int = 0,
    changes: Sequence[NodeChange] = (),
) -> SlurmOutcome:
    """Replay jobs on the cluster of config with its scheduler (boot_s: slurmctld's start in replay seconds; groups:
    each job's timeline group and the number of groups, partitions by default; epoch_s: the clock's second at
    replay second 0, on which the will-run test aligns its windows; changes: nodes joining and leaving)."""
    m = build_model(config, jobs, boot_s, groups, epoch_s, changes)
    width = m.st.n_groups
    tl_t, tl_used, tl_queued = (
        List([np.zeros(CHUNK, dtype=np.int64)]),
        List([np.zeros((CHUNK, width), dtype=np.int64)]),
        List([np.zeros((CHUNK, width), dtype=np.int64)]),
    )
    run(m, tl_t, tl_used, tl_queued)
    rows = int(m.q.size[T_SIZE])
    return SlurmOutcome(
        start_s=m.out.start_s,
        end_s=m.out.end_s,
        priority=m.out.priority,
        timed_out=m.out.timed_out,
        runnable=m.jt.runnable,
        placement=_placements(m),
        timeline_t_s=_timeline(tl_t, rows, 0),
        timeline_used_gpus=_timeline(tl_used, rows, width),
        timeline_queued_jobs=_timeline(tl_queued, rows, width),
    )
