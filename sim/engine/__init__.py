"""Event-driven scheduling core: one independent run per VC over a heap of (time, kind, job) events.

Integer-second semantics identical to the Helios artifact's 1-second ticks (spec §4.1.5): the full per-tick procedure
(release, arrivals, order, allocate or preempt) runs only at ticks with an arrival or a completion in the VC.
"""

from __future__ import annotations

import gc
import heapq
import time
from bisect import bisect_left, insort
from itertools import accumulate

import numpy as np

from sim import placers as placer_registry
from sim import policies as policy_registry
from sim.cluster import Allocation, VCNodes
from sim.model import SimConfig, SimResult, VCResult, Workload, checkpoint_overhead_s
from sim.policies import NO_PRIORITY, VCJobs

_NEVER = np.iinfo(np.int64).max
_WAITING, _RUNNING, _DONE = 0, 1, 2
_COMPLETION, _KEY_CHANGE = 0, 1


class _Outcome:
    """Mutable per-job outcome lists of one VC run (converted to a VCResult at the end)."""

    def __init__(self, n: int):
        self.start_s = [-1] * n
        self.end_s = [-1] * n
        self.queue_s = [0] * n
        self.preemptions = [0] * n
        self.priority = [NO_PRIORITY] * n
        self.alloc: list[Allocation] = [()] * n
        self.tl_t: list[int] = []
        self.tl_used: list[int] = []
        self.tl_queued: list[int] = []

    def sample(self, now_s: int, used_gpus: int, queued: int) -> None:
        """Record the VC state just after the event at now_s."""
        self.tl_t.append(now_s)
        self.tl_used.append(used_gpus)
        self.tl_queued.append(queued)

    def to_result(self, rows: np.ndarray, placeable: np.ndarray) -> VCResult:
        """Freeze the lists into a VCResult (unplaceable jobs keep start = end = -1)."""
        start = np.asarray(self.start_s, dtype=np.int64)
        end = np.asarray(self.end_s, dtype=np.int64)
        queue = np.where(placeable, np.asarray(self.queue_s, dtype=np.int64), -1)
        return VCResult(
            rows=rows,
            start_s=start,
            end_s=end,
            queue_s=queue,
            preemptions=np.asarray(self.preemptions, dtype=np.int64),
            priority=np.asarray(self.priority, dtype=np.float64),
            nodes=[tuple(n for n, _ in a) for a in self.alloc],
            timeline_t_s=np.asarray(self.tl_t, dtype=np.int64),
            timeline_used_gpus=np.asarray(self.tl_used, dtype=np.int64),
            timeline_queued_jobs=np.asarray(self.tl_queued, dtype=np.int64),
        )


def placeable_mask(gpu_num: np.ndarray, n_nodes: int, gpus_per_node: int, placer: str) -> np.ndarray:
    """Which GPU counts can be placed at all on an empty VC of n_nodes nodes with this placer."""
    empty = VCNodes(n_nodes, gpus_per_node)
    check = placer_registry.consolidate if placer == "consolidate" else placer_registry.first_fit
    ok = {int(g): check(empty, int(g)) is not None for g in np.unique(gpu_num)}
    return np.array([ok[int(g)] for g in gpu_num], dtype=bool)


def run(config: SimConfig, workload: Workload) -> SimResult:
    """Simulate every VC of workload under config and return the per-job outcomes."""
    gc_was_enabled = gc.isenabled()
    gc.disable()  # NOTE: the run allocates millions of acyclic tuples; cyclic GC passes only cost time
    try:
        return _run(config, workload)
    finally:
        if gc_was_enabled:
            gc.enable()


def _run(config: SimConfig, workload: Workload) -> SimResult:
    t0 = time.perf_counter()
    policy = policy_registry.get(config.policy, config.las_threshold_gpu_s)
    vcs: dict[str, VCResult] = {}
    unplaceable = 0
    for v, name in enumerate(workload.vc_names):
        placer = placer_registry.get(config.placer, config.seed + v)
        rows = workload.vc_rows(v)
        nodes = VCNodes(workload.vc_nodes[v], config.gpus_per_node)
        ok = placeable_mask(workload.gpu_num[rows], nodes.n_nodes, nodes.gpus_per_node, config.placer)
        unplaceable += int((~ok).sum())
        jobs = VCJobs(
            duration_s=workload.duration_s[rows],
            gpu_num=workload.gpu_num[rows],
            predicted_s=workload.predicted_s[rows],
        )
        submit = np.where(ok, workload.submit_s[rows], _NEVER)
        if policy.preemptive:
            out = _run_preemptive(jobs, submit, policy, placer, nodes)
        else:
            out = _run_nonpreemptive(jobs, submit, policy, placer, nodes, config)
        vcs[name] = out.to_result(rows, ok)
    return SimResult(workload, config, vcs, unplaceable, time.perf_counter() - t0)


def _run_nonpreemptive(jobs: VCJobs, submit: np.ndarray, policy, placer, nodes: VCNodes, config: SimConfig):
    """FIFO/SJF/QSSF: start jobs in policy order at each event, stopping at the first that cannot be placed."""
    n_real = int(np.count_nonzero(submit != _NEVER))
    order = np.argsort(submit, kind="stable")[:n_real]
    submit_l, dur_l, gpu_l = submit.tolist(), jobs.duration_s.tolist(), jobs.gpu_num.tolist()
    out = _Outcome(len(submit_l))
    done: list[tuple[int, int]] = []
    waiting: list[tuple] = []
    i = 0
    while i < n_real or done:
        now = submit_l[order[i]] if i < n_real else _NEVER
        if done and done[0][0] < now:
            now = done[0][0]
        while done and done[0][0] == now:
            nodes.release(out.alloc[heapq.heappop(done)[1]])
        first = i
        while i < n_real and submit_l[order[i]] == now:
            i += 1
        arrivals = order[first:i].tolist()

        def start(j: int, alloc: Allocation, now: int = now) -> None:
            out.start_s[j], out.end_s[j], out.queue_s[j], out.alloc[j] = now, now + dur_l[j], now - submit_l[j], alloc
            if dur_l[j] > 0:  # a zero-length job ends at once and holds nothing
                nodes.allocate(alloc)
                heapq.heappush(done, (now + dur_l[j], j))

        if arrivals and not waiting and policy.idle_key(jobs, arrivals[0]) is not None:
            arrivals = _start_idle_batch(jobs, arrivals, policy, placer, nodes, gpu_l, start)
        for j in arrivals:
            out.priority[j] = policy.priority(jobs, j)
            heapq.heappush(waiting, policy.queue_key(jobs, j))
        _start_in_order(waiting, placer, nodes, gpu_l, start, out)
        if config.backfill and waiting:
            _easy_backfill(now, waiting, done, placer, nodes, gpu_l, dur_l, start, out, config.backfill_depth)
        out.sample(now, nodes.used_gpus, len(waiting))
    return out


def _start_idle_batch(jobs, arrivals, policy, placer, nodes, gpu_l, start) -> list[int]:
    """QSSF's first pass over jobs arriving into an empty queue (no priority yet); returns those left waiting."""
    batch = sorted(arrivals, key=lambda j: policy.idle_key(jobs, j))
    for pos, j in enumerate(batch):
        alloc = placer(nodes, gpu_l[j])
        if alloc is None:
            return sorted(batch[pos:])
        start(j, alloc)
    return []


def _start_in_order(waiting, placer, nodes, gpu_l, start, out) -> None:
    """Start waiting jobs from the head of the order until one cannot be placed (strict head-of-line blocking)."""
    while waiting:
        j = waiting[0][-1]
        if out.start_s[j] >= 0:  # started earlier by backfilling
            heapq.heappop(waiting)
            continue
        alloc = placer(nodes, gpu_l[j])
        if alloc is None:
            return
        heapq.heappop(waiting)
        start(j, alloc)


def _easy_backfill(now, waiting, done, placer, nodes, gpu_l, dur_l, start, out, depth) -> None:
    """EASY backfilling: start later jobs that fit now and do not delay the blocked head's reservation."""
    head = waiting[0][-1]
    shadow_s, extra_gpus = _reservation(now, gpu_l[head], done, nodes, gpu_l)
    for key in heapq.nsmallest(depth + 1, waiting)[1:]:
        j = key[-1]
        if out.start_s[j] >= 0:
            continue
        ends_in_time = now + dur_l[j] <= shadow_s
        if not ends_in_time and gpu_l[j] > extra_gpus:
            continue
        alloc = placer(nodes, gpu_l[j])
        if alloc is None:
            continue
        start(j, alloc)
        if not ends_in_time:
            extra_gpus -= gpu_l[j]


def _reservation(now, head_gpus, done, nodes, gpu_l) -> tuple[int, int]:
    """The head job's shadow time (GPU count basis) and the GPUs spare at that time."""
    free = nodes.free_gpus
    for end_s, j in sorted(done):
        free += gpu_l[j]
        if free >= head_gpus:
            return end_s, free - head_gpus
    return _NEVER, 0


class _Preemptive:
    """State of one VC under a preemptive policy (SRTF, LAS) with the artifact's tick semantics (spec §4.1.3-4).

    Running jobs are kept sorted by a key that stays fixed while they run (SRTF: their end tick, which orders them
    by remaining time), with prefix sums of their GPUs, so that a walk skips whole runs of running jobs that fit.
    """

    def __init__(self, jobs: VCJobs, submit: np.ndarray, policy, placer, nodes: VCNodes):
        n = submit.shape[0]
        self.jobs, self.policy, self.placer, self.nodes = jobs, policy, placer, nodes
        self.submit_l, self.dur_l, self.gpu_l = submit.tolist(), jobs.duration_s.tolist(), jobs.gpu_num.tolist()
        self.out = _Outcome(n)
        self.remain = list(self.dur_l)  # remaining time while waiting (at the last stop while running)
        self.attained = [0] * n  # GPU-seconds of service at the last stop
        self.run_start = [0] * n
        self.run_seq = [0] * n
        self.end_tick = [0] * n
        self.status = [_WAITING] * n
        self.version = [0] * n
        self.last_ckpt_s = [0] * n
        self.wkey: list[tuple] = [()] * n
        self.rkey: list[tuple] = [()] * n
        self.waiting: list[tuple] = []  # sorted (waiting key, j)
        self.waiting_by_gpu: dict[int, list[tuple]] = {}  # the waiting list split by GPU count
        self.running: list[tuple] = []  # sorted (running key, j)
        self.running_gpus: list[int] = []  # GPUs of running[k]
        self.prefix_gpus: list[int] | None = None  # GPUs of running[:k], rebuilt when running changes
        self.events: list[tuple[int, int, int, int]] = []  # (tick, kind, j, version)
        self.seq = 0

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def attained_at(self, j: int, now: int) -> int:
        """GPU-seconds of service of job j up to tick now."""
        if self.status[j] != _RUNNING:
            return self.attained[j]
        return self.attained[j] + (now - self.run_start[j]) * self.gpu_l[j]

    def enqueue(self, j: int) -> None:
        """Append job j to the waiting list (new entry order)."""
        key = self.policy.waiting_key(self.jobs, j, self.remain[j], self._next_seq(), self.attained[j])
        self.wkey[j] = (key, j)
        insort(self.waiting, self.wkey[j])
        insort(self.waiting_by_gpu.setdefault(self.gpu_l[j], []), self.wkey[j])

    def _run_insert(self, j: int, now: int) -> None:
        key = self.policy.running_key(self.jobs, j, self.end_tick[j], self.run_seq[j], self.attained_at(j, now))
        self.rkey[j] = (key, j)
        k = bisect_left(self.running, self.rkey[j])
        self.running.insert(k, self.rkey[j])
        self.running_gpus.insert(k, self.gpu_l[j])
        self.prefix_gpus = None

    def _run_remove(self, j: int) -> None:
        k = bisect_left(self.running, self.rkey[j])
        del self.running[k]
        del self.running_gpus[k]
        self.prefix_gpus = None

    def pop_events(self, now: int) -> None:
        """Release the jobs completing at tick now and re-key the running jobs whose key changes at now."""
        while self.events and self.events[0][0] == now:
            _, kind, j, version = heapq.heappop(self.events)
            if version != self.version[j]:
                continue
            self._run_remove(j)
            if kind == _KEY_CHANGE:
                self._run_insert(j, now)
                continue
            self.out.end_s[j] = now
            self.status[j] = _DONE
            self.nodes.release(self.out.alloc[j])

    def _prefix(self) -> list[int]:
        if self.prefix_gpus is None:
            self.prefix_gpus = list(accumulate(self.running_gpus, initial=0))
        return self.prefix_gpus

    def walk(self, now: int) -> tuple[list[int], list[int]]:
        """Walk waiting + running jobs in key order against the GPU quota: (jobs to start, jobs to preempt)."""
        quota, pos, prerun, preempt = self.nodes.capacity_gpus, 0, [], []
        boundary = self.policy.boundary
        smallest = min(self.waiting_by_gpu) if self.waiting_by_gpu else 0
        n_running, gpu_l = len(self.running), self.gpu_l
        for wkey, j in self.waiting:
            if pos >= n_running:
                self._take_fitting((wkey, j), quota, smallest, prerun)
                break
            nxt = bisect_left(self.running, (boundary(wkey, now),), lo=pos)
            if nxt > pos:
                quota = self._walk_running(pos, nxt, quota, preempt)
                pos = nxt
            if gpu_l[j] <= quota:
                quota -= gpu_l[j]
                prerun.append(j)
            if quota < smallest:  # no waiting job can fit any more: only running jobs are left to walk
                break
        self._walk_running(pos, len(self.running), quota, preempt)
        return prerun, preempt

    def _take_fitting(self, first: tuple, quota: int, smallest: int, prerun: list[int]) -> None:
        """Finish the walk once no running job is left: take, in walk order from first, each job that fits."""
        heads = []
        for gpus, jobs in self.waiting_by_gpu.items():
            k = bisect_left(jobs, first)
            if gpus <= quota and k < len(jobs):
                heads.append((jobs[k], gpus, k))
        heapq.heapify(heads)  # NOTE: merges the per-GPU-count lists instead of scanning the whole queue
        while heads and quota >= smallest:
            item, gpus, k = heapq.heappop(heads)
            if gpus > quota:
                continue
            prerun.append(item[1])
            quota -= gpus
            jobs = self.waiting_by_gpu[gpus]
            if gpus <= quota and k + 1 < len(jobs):
                heapq.heappush(heads, (jobs[k + 1], gpus, k + 1))

    def _walk_running(self, lo: int, hi: int, quota: int, preempt: list[int]) -> int:
        """Walk running[lo:hi] against quota (adding those that do not fit to preempt); returns the quota left."""
        if lo >= hi:
            return quota
        prefix = self._prefix()
        if prefix[hi] - prefix[lo] <= quota:  # NOTE: the common case, all fit: skip them in one step
            return quota - (prefix[hi] - prefix[lo])
        for _, j in self.running[lo:hi]:
            if self.gpu_l[j] <= quota:
                quota -= self.gpu_l[j]
            else:
                preempt.append(j)
        return quota

    def preempt(self, j: int, now: int) -> None:
        """Checkpoint running job j at tick now and put it back in the waiting list."""
        self._run_remove(j)
        self.nodes.release(self.out.alloc[j])
        self.attained[j] = self.attained_at(j, now)
        self.remain[j] = self.end_tick[j] - 1 - now + checkpoint_overhead_s(self.gpu_l[j])
        self.status[j] = _WAITING
        self.version[j] += 1
        self.out.preemptions[j] += 1
        self.last_ckpt_s[j] = now
        self.enqueue(j)

    def try_start(self, j: int, now: int) -> None:
        """Start or resume waiting job j at tick now if the placer finds room."""
        alloc = self.placer(self.nodes, self.gpu_l[j])
        if alloc is None:
            return
        del self.waiting[bisect_left(self.waiting, self.wkey[j])]
        same_gpus = self.waiting_by_gpu[self.gpu_l[j]]
        del same_gpus[bisect_left(same_gpus, self.wkey[j])]
        if not same_gpus:
            del self.waiting_by_gpu[self.gpu_l[j]]
        out = self.out
        if out.start_s[j] < 0:
            out.start_s[j], out.queue_s[j] = now, now - self.submit_l[j]
        else:
            out.queue_s[j] += now - self.last_ckpt_s[j]
        out.alloc[j] = alloc
        self.nodes.allocate(alloc)
        self.status[j] = _RUNNING
        self.run_start[j] = now
        self.version[j] += 1
        self.end_tick[j] = now + self.remain[j] + 1
        self.run_seq[j] = self._next_seq()
        self._run_insert(j, now)
        heapq.heappush(self.events, (self.end_tick[j], _COMPLETION, j, self.version[j]))
        change = self.policy.next_change_s(self.jobs, j, now, self.attained[j])
        if change is not None and change < self.end_tick[j]:
            heapq.heappush(self.events, (change, _KEY_CHANGE, j, self.version[j]))


def _run_preemptive(jobs: VCJobs, submit: np.ndarray, policy, placer, nodes: VCNodes) -> _Outcome:
    """SRTF/LAS: at each event re-walk all jobs by key, preempt running ones beyond the quota, start the rest."""
    st = _Preemptive(jobs, submit, policy, placer, nodes)
    n_real = int(np.count_nonzero(submit != _NEVER))
    order = np.argsort(submit, kind="stable")[:n_real].tolist()
    i = 0
    while i < n_real or st.events:
        now = st.submit_l[order[i]] if i < n_real else _NEVER
        if st.events and st.events[0][0] < now:
            now = st.events[0][0]
        st.pop_events(now)
        while i < n_real and st.submit_l[order[i]] == now:
            st.enqueue(order[i])
            i += 1
        prerun, preempt = st.walk(now)
        for j in preempt:
            st.preempt(j, now)
        for j in prerun:
            st.try_start(j, now)
        st.out.sample(now, nodes.used_gpus, len(st.waiting))
    return st.out
