"""Non-preemptive VC runs (FIFO, SJF, QSSF): at each second with an arrival or a completion, start waiting jobs in
policy order until one cannot be placed (strict head-of-line blocking), then optionally EASY-backfill behind it.

Time is walked by sim.engine.loop and backfilling is sim.engine.backfill's.
"""

from __future__ import annotations

import heapq
from itertools import repeat

import numpy as np

from sim.cluster import Allocation, VCNodes
from sim.engine.backfill import NO_SITE, Reservation, Scope, backfill, reservation
from sim.engine.loop import NEVER, drive
from sim.engine.outcome import Outcome
from sim.model import SimConfig
from sim.policies import VCJobs

_SITE = 0  # the VC's one site, as sim.engine.backfill sees it


class _Ordered:
    """State of one VC under a non-preemptive policy: running jobs by end second, waiting jobs by policy key."""

    def __init__(self, jobs: VCJobs, submit: np.ndarray, order: list[int], policy, placer, nodes: VCNodes, depth):
        self.jobs, self.order, self.policy, self.placer, self.nodes = jobs, order, policy, placer, nodes
        self.depth = depth  # candidates looked at behind the head when backfilling, None = no backfilling
        self.submit_l, self.dur_l, self.gpu_l = submit.tolist(), jobs.duration_s.tolist(), jobs.gpu_num.tolist()
        self.out = Outcome(len(self.submit_l))
        self.done: list[tuple[int, int]] = []  # heap of (end second, job) of the running jobs
        self.waiting: list[tuple] = []  # heap of queue keys (job last); jobs started by backfilling stay until popped
        self.now_s = 0
        self.placed: Allocation | None = None  # the allocation found by the last _place

    def on_time(self, now_s: int, positions: range) -> int:
        """Release the jobs ending at now_s, queue the arrivals (order[positions]) and start what can start; returns
        the second of the next completion (NEVER if none)."""
        self.now_s = now_s
        done, nodes, out, waiting, policy, jobs = self.done, self.nodes, self.out, self.waiting, self.policy, self.jobs
        while done and done[0][0] == now_s:
            nodes.release(out.alloc[heapq.heappop(done)[1]])
        arrivals = self.order[positions.start : positions.stop]
        if arrivals and not waiting and policy.idle_key(jobs, arrivals[0]) is not None:
            arrivals = self._start_idle_batch(arrivals)
        for j in arrivals:
            out.priority[j] = policy.priority(jobs, j)
            heapq.heappush(waiting, policy.queue_key(jobs, j))
        self._start_in_order()
        if self.depth is not None and waiting:
            self._backfill()
        out.sample(now_s, nodes.used_gpus, len(waiting))
        return done[0][0] if done else NEVER

    def _start(self, j: int, alloc: Allocation) -> None:
        now_s, dur_s, out = self.now_s, self.dur_l[j], self.out
        out.start_s[j], out.end_s[j], out.alloc[j] = now_s, now_s + dur_s, alloc
        out.queue_s[j] = now_s - self.submit_l[j]
        if dur_s > 0:  # a zero-length job ends at once and holds nothing
            self.nodes.allocate(alloc)
            heapq.heappush(self.done, (now_s + dur_s, j))

    def _start_idle_batch(self, arrivals: list[int]) -> list[int]:
        """QSSF's first pass over jobs arriving into an empty queue (no priority yet); returns those left waiting."""
        batch = sorted(arrivals, key=lambda j: self.policy.idle_key(self.jobs, j))
        for pos, j in enumerate(batch):
            alloc = self.placer(self.nodes, self.gpu_l[j])
            if alloc is None:
                return sorted(batch[pos:])
            self._start(j, alloc)
        return []

    def _start_in_order(self) -> None:
        """Start waiting jobs from the head of the order until one cannot be placed (strict head-of-line blocking)."""
        waiting, start_s = self.waiting, self.out.start_s
        while waiting:
            j = waiting[0][-1]
            if start_s[j] >= 0:  # started earlier by backfilling
                heapq.heappop(waiting)
                continue
            alloc = self.placer(self.nodes, self.gpu_l[j])
            if alloc is None:
                return
            heapq.heappop(waiting)
            self._start(j, alloc)

    def _backfill(self) -> None:
        """EASY backfilling behind the blocked head over the next `depth` waiting jobs not started yet."""
        start_s, gpus, dur_s, free = self.out.start_s, self.gpu_l, self.dur_l, self.nodes.free_gpus
        keys = heapq.nsmallest(self.depth + 1, self.waiting)[1:]
        # NOTE: jobs needing more GPUs than are free now cannot start in this pass (backfilling only takes GPUs), and
        # every placer refuses them before drawing a random number: leaving them out saves a placer call each
        candidates = zip([key[-1] for key in keys if start_s[key[-1]] < 0 and gpus[key[-1]] <= free], repeat(None))
        backfill(self.now_s, candidates, gpus, dur_s, self._reservation, self._place, self._start_placed, _without)

    def _reservation(self) -> Reservation:
        """The blocked head's reservation on the VC's constant capacity."""
        nodes, gpus, head = self.nodes, self.gpu_l, self.waiting[0][-1]
        capacity = nodes.capacity_gpus
        head_s, running = self.dur_l[head], sorted(self.done)
        return reservation(_SITE, nodes.used_gpus, gpus[head], head_s, running, gpus, lambda start_s, end_s: capacity)

    def _place(self, j: int, now_s: int, scope: Scope) -> int:
        """The VC's site if the placer finds room for job j (kept for _start_placed), else NO_SITE."""
        self.placed = self.placer(self.nodes, self.gpu_l[j])
        return NO_SITE if self.placed is None else _SITE

    def _start_placed(self, j: int, now_s: int, site: int) -> None:
        self._start(j, self.placed)


def _without(j: int, scope: Scope, site: int) -> Scope:
    """No site is left to a job kept off the VC's one site."""
    return ()


def run_ordered(jobs: VCJobs, submit: np.ndarray, policy, placer, nodes: VCNodes, config: SimConfig) -> Outcome:
    """FIFO/SJF/QSSF on one VC (submit = NEVER for jobs that can never be placed)."""
    n_real = int(np.count_nonzero(submit != NEVER))
    order = np.argsort(submit, kind="stable")[:n_real]
    depth = config.backfill_depth if config.backfill else None
    st = _Ordered(jobs, submit, order.tolist(), policy, placer, nodes, depth)
    drive(submit[order].tolist(), st.on_time)
    return st.out
