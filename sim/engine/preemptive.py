"""Preemptive VC runs (SRTF, LAS) with the artifact's tick semantics: at each tick with an arrival, a completion or a
key change, walk waiting and running jobs in key order against the GPU quota, preempt the running jobs beyond it and
start the waiting ones within it.

Time is walked by sim.engine.loop, as in the non-preemptive runs.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from itertools import accumulate

import numpy as np

from sim.cluster import VCNodes
from sim.engine.loop import NEVER, drive
from sim.engine.outcome import Outcome
from sim.model import checkpoint_overhead_s
from sim.policies import VCJobs

_WAITING, _RUNNING, _DONE = 0, 1, 2
_COMPLETION, _KEY_CHANGE = 0, 1


class _Preemptive:
    """State of one VC under a preemptive policy (SRTF, LAS) with the artifact's tick semantics (spec §4.1.3-4).

    Running jobs are kept sorted by a key that stays fixed while they run (SRTF: their end tick, which orders them
    by remaining time), with prefix sums of their GPUs, so that a walk skips whole runs of running jobs that fit.
    """

    def __init__(self, jobs: VCJobs, submit: np.ndarray, order: list[int], policy, placer, nodes: VCNodes):
        n = submit.shape[0]
        self.jobs, self.order, self.policy, self.placer, self.nodes = jobs, order, policy, placer, nodes
        self.submit_l, self.dur_l, self.gpu_l = submit.tolist(), jobs.duration_s.tolist(), jobs.gpu_num.tolist()
        self.out = Outcome(n)
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

    def on_time(self, now: int, positions: range) -> int:
        """The artifact's tick at now (release and re-key, queue the arrivals order[positions], walk, act); returns the
        tick of the next completion or key change (possibly stale; NEVER if none)."""
        self.pop_events(now)
        for j in self.order[positions.start : positions.stop]:
            self.enqueue(j)
        prerun, preempt = self.walk(now)
        for j in preempt:
            self.preempt(j, now)
        for j in prerun:
            self.try_start(j, now)
        self.out.sample(now, self.nodes.used_gpus, len(self.waiting))
        return self.events[0][0] if self.events else NEVER

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


def run_preemptive(jobs: VCJobs, submit: np.ndarray, policy, placer, nodes: VCNodes) -> Outcome:
    """SRTF/LAS on one VC (submit = NEVER for jobs that can never be placed)."""
    n_real = int(np.count_nonzero(submit != NEVER))
    order = np.argsort(submit, kind="stable")[:n_real]
    st = _Preemptive(jobs, submit, order.tolist(), policy, placer, nodes)
    drive(submit[order].tolist(), st.on_time)
    return st.out
