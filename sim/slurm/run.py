"""The `slurm` policy's event loop: submissions, ends, the decay thread's passes, the main scheduler (at each
submission and end, and every sched_interval) and the backfill scheduler (every bf_interval when something
changed), over one pool of nodes shared by the partitions, second by second as sim.engine.loop drives it.

Timing as slurmctld 22.05 keeps it: the periodic passes count from its start (BOOT_TIME; the replay's start when
unknown), a job past its time limit is stopped at the next limit check (every 30 s) after start + limit +
OverTimeLimit, and within one second ends come first, then submissions, the decay pass, the main pass and backfill.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass

import numpy as np

from analytics.slurm_config import SlurmConfig
from sim.engine.loop import NEVER, drive
from sim.slurm.jobs import NEVER_S, SlurmJobs
from sim.slurm.limits import Limits
from sim.slurm.nodes import NodePool, NodeSet, Placement, node_set, placement_set
from sim.slurm.plan import NodeSpace, RunningEnd, WillRun
from sim.slurm.priority import PriorityModel
from sim.slurm.usage import UsageLedger

LIMIT_CHECK_S = 30  # slurmctld checks time limits every PERIODIC_TIMEOUT seconds


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


def _last_tick(boot_s: int, period_s: int) -> int | None:
    """The decay thread's last pass at or before the replay's start, None if slurmctld starts later."""
    return None if boot_s > 0 else next_tick(1, boot_s, period_s) - period_s


def next_tick(now_s: int, origin_s: int, period_s: int) -> int:
    """The first second >= now_s of the ticks origin_s + k * period_s."""
    return origin_s + -(-(now_s - origin_s) // period_s) * period_s


class Replay:
    """The state of one replay: pool, queue, running jobs, usage, limits and the passes' clocks."""

    def __init__(
        self,
        config: SlurmConfig,
        jobs: SlurmJobs,
        boot_s: int = 0,
        groups: tuple[np.ndarray, int] | None = None,
        epoch_s: int = 0,
    ):
        self.config, self.jobs, self.boot_s, self.epoch_s = config, jobs, boot_s, epoch_s
        self.group, n_groups = (jobs.partition, len(config.partitions)) if groups is None else groups
        self.pool = NodePool(config)
        n = len(jobs)
        self.job_nodes = np.array(
            [self.pool.nodes_needed(int(p), int(g), int(c), int(k)) for p, g, c, k in self._shapes()], dtype=np.int64
        )
        self.limits = Limits(config, jobs)
        self.runnable = np.array([self._runnable(j) and self.limits.can_ever_start(j) for j in range(n)], dtype=bool)
        self.prio_model = PriorityModel(config, jobs, self.job_nodes)
        self.usage = UsageLedger(config, jobs, _last_tick(boot_s, config.priority.calc_period_s))
        self.priority = np.zeros(n)
        self.queue: list[int] = []  # pending jobs in Slurm's order (see queue_key)
        self.part_pending = [0] * len(config.partitions)
        self.running: dict[int, int] = {}  # job -> start second, in start order
        self.held: dict[int, Placement] = {}
        self.held_set: dict[int, NodeSet] = {}
        self.all_nodes = node_set(range(len(config.nodes)))
        self.placed: list[Placement] = [()] * n
        self.ends: list[tuple[int, int]] = []  # heap of (end second, job)
        self.part_ends: list[list[tuple[int, int]]] = [[] for _ in config.partitions]  # (start + limit, job) of
        # the running jobs on each partition's nodes, sorted
        self.start_s = np.full(n, -1, dtype=np.int64)
        self.end_s = np.full(n, -1, dtype=np.int64)
        self.timed_out = np.zeros(n, dtype=bool)
        self.dirty = False
        s = config.sched
        self.next_calc = next_tick(0, boot_s, config.priority.calc_period_s)
        self.next_sched = next_tick(1, boot_s, s.sched_interval_s)
        self.next_bf = next_tick(1, boot_s, s.bf_interval_s)
        self.part_used = np.zeros(n_groups, dtype=np.int64)  # GPUs held and jobs waiting per timeline group
        self.part_queued = np.zeros(n_groups, dtype=np.int64)
        self.timeline: tuple[list[int], list[np.ndarray], list[np.ndarray]] = ([], [], [])

    def _shapes(self):
        j = self.jobs
        return zip(j.partition, j.gpus, j.cpus, j.nodes, strict=True)

    def _runnable(self, job: int) -> bool:
        part = int(self.jobs.partition[job])
        spec = self.config.partitions[part]
        n_nodes = int(self.job_nodes[job])
        if spec.max_nodes is not None and n_nodes > spec.max_nodes:
            return False
        return self.pool.fits_empty(part, int(self.jobs.gpus[job]), int(self.jobs.cpus[job]), n_nodes)

    def shape(self, job: int) -> tuple[int, int, int, int]:
        """(partition, gpus, cpus, nodes) of job."""
        j = self.jobs
        return int(j.partition[job]), int(j.gpus[job]), int(j.cpus[job]), int(self.job_nodes[job])

    def queue_key(self, job: int) -> tuple[int, float, int]:
        """A pending job's place in Slurm's order: partition tier, then priority (highest first), then submission."""
        return -int(self.prio_model.tier[job]), -float(self.priority[job]), job

    def on_time(self, now_s: int, arrivals: range) -> int:
        """Advance the replay through second now_s; returns its next own event second."""
        event = self._end_jobs(now_s)
        for job in arrivals:
            if self.runnable[job]:
                self.priority[job] = self._priorities(now_s, np.array([job]))[0]
                bisect.insort(self.queue, job, key=self.queue_key)
                self.part_pending[self.jobs.partition[job]] += 1
                self.part_queued[self.group[job]] += 1
                event = self.dirty = True
        if now_s == self.next_calc:
            self._calc_pass(now_s)
        if event:
            self.main_pass(now_s, self.config.sched.default_queue_depth)
        if now_s == self.next_sched:
            self.main_pass(now_s, len(self.queue))
            self.next_sched += self.config.sched.sched_interval_s
        if self.config.sched.backfill and now_s == self.next_bf:
            if self.dirty and self.queue:
                self.backfill_pass(now_s)
            self.next_bf += self.config.sched.bf_interval_s
        self._sample(now_s)
        return self._next_event(now_s)

    def _priorities(self, now_s: int, rows: np.ndarray) -> np.ndarray:
        return self.prio_model.at(now_s, rows, self.jobs.submit_s, self.usage.job_factors(rows))

    def _end_jobs(self, now_s: int) -> bool:
        ended = False
        while self.ends and self.ends[0][0] == now_s:
            _, job = heapq.heappop(self.ends)
            for part in self._partitions_of(job):
                self.part_ends[part].remove((self._expected_end(job), job))
            self.pool.release(self.held.pop(job))
            del self.held_set[job]
            self.part_used[self.group[job]] -= self.jobs.gpus[job]
            self.limits.end(job)
            self.usage.job_end(job, self.running.pop(job), now_s)
            ended = self.dirty = True
        return ended

    def _partitions_of(self, job: int) -> set[int]:
        """The partitions that hold a node of a running job."""
        return {p for node, _, _ in self.held[job] for p in self.pool.node_partitions[node]}

    def _expected_end(self, job: int) -> int:
        """When slurmctld expects a running job to end: its start plus its time limit."""
        return int(self.start_s[job] + self.jobs.limit_s[job])

    def _calc_pass(self, now_s: int) -> None:
        self.usage.calc_pass(now_s, self.running)
        if self.queue:
            rows = np.array(self.queue)
            self.priority[rows] = self._priorities(now_s, rows)
            keys = (rows, -self.priority[rows], -self.prio_model.tier[rows])
            self.queue = rows[np.lexsort(keys)].tolist()
            self.dirty = True
        self.next_calc += self.config.priority.calc_period_s

    def _next_event(self, now_s: int) -> int:
        nxt = self.ends[0][0] if self.ends else NEVER
        if self.queue or self.running:
            self._skip_ticks(now_s)
            nxt = min(nxt, self.next_calc)
        if self.queue:
            nxt = min(nxt, self.next_sched)
            if self.config.sched.backfill and self.dirty:
                nxt = min(nxt, self.next_bf)
        return nxt

    def _skip_ticks(self, now_s: int) -> None:
        """Move clocks that fell behind while the replay was idle to their next tick after now_s."""
        s, period = self.config.sched, self.config.priority.calc_period_s
        if self.next_calc <= now_s:
            self.next_calc = next_tick(now_s + 1, self.boot_s, period)
        if self.next_sched <= now_s:
            self.next_sched = next_tick(now_s + 1, self.boot_s, s.sched_interval_s)
        if self.next_bf <= now_s:
            self.next_bf = next_tick(now_s + 1, self.boot_s, s.bf_interval_s)

    def start(self, job: int, now_s: int, placement: Placement) -> None:
        """Start job at now_s on placement: its end is its true end or the limit check that stops it (the pass
        that starts it takes it off the queue)."""
        self.pool.allocate(placement)
        self.limits.start(job)
        self.held[job] = placement
        self.held_set[job] = placement_set(placement)
        self.placed[job] = placement
        self.running[job] = now_s
        self.part_pending[self.jobs.partition[job]] -= 1
        self.part_queued[self.group[job]] -= 1
        self.part_used[self.group[job]] += self.jobs.gpus[job]
        self.start_s[job] = now_s
        for part in self._partitions_of(job):
            bisect.insort(self.part_ends[part], (self._expected_end(job), job))
        stop_s = now_s + int(self.jobs.limit_s[job]) + self.config.over_time_limit_s
        kill_s = next_tick(stop_s, self.boot_s, LIMIT_CHECK_S)
        true_end_s = now_s + int(self.jobs.duration_s[job]) if self.jobs.duration_s[job] < NEVER_S else NEVER
        end_s = min(true_end_s, kill_s)
        self.timed_out[job] = end_s == kill_s and true_end_s > kill_s
        self.end_s[job] = end_s
        heapq.heappush(self.ends, (end_s, job))
        self.dirty = True

    def _dequeue_started(self) -> None:
        self.queue = [job for job in self.queue if self.start_s[job] < 0]

    def main_pass(self, now_s: int, depth: int) -> None:
        """The main scheduler: jobs in order, each started if it fits; one blocked for resources takes its
        partition's nodes out of the pass; one over a limit is passed over."""
        if not self.queue:
            return
        gate = _PartitionGate(self.pool, self.part_pending)
        started = False
        for job in self.queue[:depth]:
            part = int(self.jobs.partition[job])
            if gate.closed[part]:
                continue  # NOTE: no node of its partition is left in this pass: it could not be placed
            if self.limits.blocked(job) is not None:
                continue
            part, gpus, cpus, n_nodes = self.shape(job)
            placement = self.pool.place(part, gpus, cpus, n_nodes, gate.allowed)
            if placement is None:
                if gate.close(part):
                    break
            else:
                self.start(job, now_s, placement)
                started = True
                if gate.started(part):
                    break
        if started:
            self._dequeue_started()

    def backfill_pass(self, now_s: int) -> None:
        """sched/backfill: each job in order (up to bf_max_job_test) starts now if it fits without delaying the
        reservations of the jobs before it, else reserves whole nodes from its earliest start over its limit.

        A job that does not fit the free nodes now cannot start in this pass (it only reserves), so its reservation
        is made only when a later job that fits comes, in order, and a pass in which no job fits reserves nothing."""
        s = self.config.sched
        space: NodeSpace | None = None
        # expected ends as slurmctld keeps them (start + limit), past ones too: the will-run test's windows are
        # placed from them, and only the start it reports is moved to now + 1
        will_run = WillRun(self.pool, self._running_on, self.epoch_s)
        unfit: set[tuple[int, int, int, int]] = set()  # shapes the free nodes cannot hold now (nor later in the pass)
        deferred: list[int] = []
        started = False
        for job in self.queue[: s.bf_max_job_test]:
            if self.limits.blocked(job) is not None:
                continue
            shape = self.shape(job)
            if shape in unfit or self.pool.place(*shape) is None:
                unfit.add(shape)
                deferred.append(job)
                continue
            if space is None:
                space = NodeSpace(now_s, s.bf_window_s, self.all_nodes, s.bf_resolution_s)
            for earlier in deferred:
                self._backfill_job(earlier, now_s, space, will_run)
            deferred = []
            if self._backfill_job(job, now_s, space, will_run) is not None:
                will_run.forget()
                started = True
        self.dirty = False
        if started:
            self._dequeue_started()

    def _running_on(self, part: int) -> list[RunningEnd]:
        """The running jobs on part's nodes: expected end, placement and nodes, by expected end."""
        return [(end_s, self.held[j], self.held_set[j]) for end_s, j in self.part_ends[part]]

    def _backfill_job(self, job: int, now_s: int, space: NodeSpace, will_run: WillRun) -> Placement | None:
        part, gpus, cpus, n_nodes = shape = self.shape(job)
        limit_s = int(self.jobs.limit_s[job])
        start_res = now_s
        for _ in range(space.n_slots + 2):
            avail, later = space.avail_over(start_res, max(start_res, now_s) + limit_s)
            found = will_run.earliest_start(shape, avail, now_s)
            if found is None:
                if later is None:
                    return None
                start_res = later
                continue
            start, placement = found
            start = max(start, start_res)
            if start <= now_s:
                self.start(job, now_s, placement)
                return placement
            nodes = placement_set(placement)
            if later is not None and start > later:
                start_res = later
                continue
            if start > space.end_s:
                return None
            if space.overlaps(start, start + limit_s, nodes):
                start_res = start + (1 if start == start_res else 0)
                continue
            space.reserve(start, start + limit_s, nodes)
            return None
        return None

    def _sample(self, now_s: int) -> None:
        t, used, queued = self.timeline
        t.append(now_s)
        used.append(self.part_used.copy())
        queued.append(self.part_queued.copy())

    def outcome(self) -> SlurmOutcome:
        """The frozen per-job results."""
        t, used, queued = self.timeline
        return SlurmOutcome(
            start_s=self.start_s,
            end_s=self.end_s,
            priority=self.priority,
            timed_out=self.timed_out,
            runnable=self.runnable,
            placement=self.placed,
            timeline_t_s=np.asarray(t, dtype=np.int64),
            timeline_used_gpus=_stack(used, len(self.part_used)),
            timeline_queued_jobs=_stack(queued, len(self.part_used)),
        )


class _PartitionGate:
    """The main pass's nodes still open: a partition whose job was blocked for resources closes its nodes, and the
    pass can stop once every partition with jobs waiting is closed."""

    def __init__(self, pool: NodePool, pending: list[int]):
        self.partition_set = pool.partition_set
        self.allowed: NodeSet = -1  # every node open
        self.pending = list(pending)
        self.closed = [False] * len(pending)
        self.open_waiting = sum(1 for waiting in pending if waiting)  # open partitions with jobs waiting

    def close(self, part: int) -> bool:
        """Take part's nodes out of the pass; True when no partition with jobs waiting is open."""
        self.allowed &= ~self.partition_set[part]
        self.closed = [not nodes & self.allowed for nodes in self.partition_set]
        self.open_waiting = sum(1 for c, waiting in zip(self.closed, self.pending, strict=True) if waiting and not c)
        return self.open_waiting == 0

    def started(self, part: int) -> bool:
        """Count a job of part started; True when no partition with jobs waiting is open."""
        self.pending[part] -= 1
        if self.pending[part] == 0 and not self.closed[part]:
            self.open_waiting -= 1
        return self.open_waiting == 0


def _stack(rows: list[np.ndarray], width: int) -> np.ndarray:
    return np.vstack(rows).astype(np.int64) if rows else np.zeros((0, width), dtype=np.int64)


def replay(
    config: SlurmConfig,
    jobs: SlurmJobs,
    boot_s: int = 0,
    groups: tuple[np.ndarray, int] | None = None,
    epoch_s: int = 0,
) -> SlurmOutcome:
    """Replay jobs on the cluster of config with its scheduler (boot_s: slurmctld's start in replay seconds; groups:
    each job's timeline group and the number of groups, partitions by default; epoch_s: the clock's second at
    replay second 0, on which the will-run test aligns its windows)."""
    state = Replay(config, jobs, boot_s, groups, epoch_s)
    drive(jobs.submit_s, state.on_time)
    return state.outcome()
