"""Capacity-consistent start times for a trace: a Slurm-like FIFO queue with EASY backfill on each VC's daily GPU
capacity.

Jobs wait first come first served: in one queue per VC when each job runs in its own VC (slurm_like_schedule, and
ClusterQueues with per_vc, as the synthetic trace uses), or in one queue per cluster when jobs may run in several VCs
(ClusterQueues with a placer choosing among them).
A job starts at once in an allowed VC that holds it now, else it waits; the head of the queue blocks the jobs behind
it except where they backfill without delaying it (EASY: they end before its reservation, run in another VC, or
use GPUs spare at the reservation; at most BACKFILL_DEPTH waiting jobs are looked at). A job starts only if, for
every day of its run, the GPUs in use plus its own fit that day's capacity, so by induction over start times the
GPUs in use never exceed the capacity of the day. Placement is by GPU count (no node fragmentation). A job that
can never run — more GPUs than any allowed VC has on any day from now on — is never started: its start, end and
queue are null. VCs with no capacity rows are treated as unlimited. CPU jobs pass through with queue 0.

Time is walked by the simulator's event loop (sim.engine.loop) and backfilling is its EASY backfill
(sim.engine.backfill), with each VC as a site and the daily capacity over the head's run as the site's capacity.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from datetime import datetime
from itertools import chain, repeat

import numpy as np
import polars as pl

from sim.engine.backfill import NO_SITE, Reservation, Scope, backfill, reservation
from sim.engine.loop import NEVER, drive

DAY_S = 86_400
BACKFILL_DEPTH = 256  # queue entries looked at behind the blocked head (like Slurm's bf_max_job_test)
_UNRESERVED = Reservation(NO_SITE, NEVER, 0)
_OUT_SCHEMA = {
    "job_id": pl.Int64,
    "cluster": pl.String,
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "queue": pl.Int64,
}
# place(j, t_s, among) -> VC index where job j starts now, or -1: one of fits[j] (only those in among unless among is
# None), the first that holds j now in an order of preference fixed at t_s, so that leaving out a VC it did not choose
# does not change its choice (EASY backfilling relies on this to keep a late job off the head's reserved VC)
Placer = Callable[[int, int, Sequence[int] | None], int]


class DailyCapacity:
    """GPUs of one VC per day index (clamped to the first/last known day), with range minima."""

    def __init__(self, gpus_by_day: Sequence[int]):
        self.gpus = [int(g) for g in gpus_by_day]
        self.last = len(self.gpus) - 1
        self.max_from = np.maximum.accumulate(np.asarray(self.gpus[::-1], dtype=np.int64))[::-1].tolist()

    def day(self, t_s: int) -> int:
        """Clamped day index of second t_s."""
        d = t_s // DAY_S
        return d if 0 <= d <= self.last else (0 if d < 0 else self.last)

    def min_over(self, start_s: int, end_s: int) -> int:
        """Smallest capacity over the days of [start_s, end_s]."""
        d0, d1, last = start_s // DAY_S, end_s // DAY_S, self.last  # NOTE: day() inlined, for the hottest call here
        d0 = d0 if 0 <= d0 <= last else (0 if d0 < 0 else last)
        d1 = d1 if 0 <= d1 <= last else (0 if d1 < 0 else last)
        return self.gpus[d0] if d0 == d1 else min(self.gpus[d0 : d1 + 1])

    def ever_fits(self, gpus: int, t_s: int) -> bool:
        """Whether `gpus` GPUs fit the VC on some day from second t_s on."""
        return gpus <= self.max_from[self.day(t_s)]


class VcState:
    """Running jobs of one VC (jobs are indices into per-job lists of GPUs, durations and start seconds)."""

    def __init__(self, cap: DailyCapacity, need: list[int], dur_s: list[int], start: list[int]):
        self.cap, self.need, self.dur_s, self.start = cap, need, dur_s, start
        self.used = 0
        self.done: list[tuple[int, int]] = []  # (end second, job)

    def next_end_s(self) -> int:
        """Second of the next completion, or NEVER."""
        return self.done[0][0] if self.done else NEVER

    def finish_until(self, t_s: int) -> None:
        """Complete every job ending at or before second t_s."""
        done = self.done
        while done and done[0][0] <= t_s:
            j = heapq.heappop(done)[1]
            self.used -= self.need[j]

    def fits_now(self, j: int, t_s: int) -> bool:
        """Whether job j started at t_s fits the GPUs free on every day of its run."""
        return self.used + self.need[j] <= self.cap.min_over(t_s, t_s + self.dur_s[j])

    def free_gpus(self, t_s: int) -> int:
        """GPUs not in use at second t_s."""
        return self.cap.gpus[self.cap.day(t_s)] - self.used

    def run(self, j: int, t_s: int) -> None:
        """Start job j at second t_s."""
        self.start[j] = t_s
        self.used += self.need[j]
        heapq.heappush(self.done, (t_s + self.dur_s[j], j))

    def reserve(self, h: int, site: int) -> Reservation:
        """Job h's EASY reservation in this VC (numbered site), on the fewest GPUs over the days of its run."""
        need = self.need
        return reservation(site, self.used, need[h], self.dur_s[h], sorted(self.done), need, self.cap.min_over)


class ClusterQueues:
    """One cluster's VCs and its queue, driven in time order (see the module docstring); fits[j] lists the VCs job
    j may run in and place picks one where it starts now. With per_vc, every job has one VC and waits in that VC's
    own queue (one Slurm partition per VC), so a VC's blocked head holds back only its own VC's jobs."""

    def __init__(self, vcs: list[VcState], fits: list[list[int]], place: Placer, per_vc: bool = False):
        self.vcs, self.fits, self.place = vcs, fits, place
        self.need = vcs[0].need if vcs else []
        self.dur_s = vcs[0].dur_s if vcs else []
        # the queue of each job (its VC with per_vc, else the one cluster queue) and the queues' waiting jobs
        self.part = [f[0] for f in fits] if per_vc else [0] * len(fits)
        self.queues: list[list[int]] = [[] for _ in range(len(vcs) if per_vc else 1)]
        self.waiting = 0
        self.blocked = self.queues[0] if self.queues else []  # the queue being backfilled
        self.vc = [-1] * len(fits)
        self.events: list[tuple[int, int]] = []  # (next completion second, VC); stale entries are skipped
        self.day = -1

    def run(self, submit_s: list[int]) -> list[int]:
        """Submit every job (given in submit order) and run until all have ended; returns each job's VC (-1 if it
        never started); start seconds are written to the shared start list."""
        drive(submit_s, self._on_time)
        return self.vc

    def _on_time(self, now_s: int, arrivals: range) -> int:
        """Before each job arriving at now_s (submitted in order) and after the last, process the completions and
        (while jobs wait) midnights up to now_s one at a time, so that a job of zero duration ends before the next
        arrives; returns the second of the next event: a completion (possibly stale) or, while jobs wait, midnight."""
        events, j = self.events, arrivals.start
        while True:
            end_s = events[0][0] if events else NEVER
            midnight = (self.day + 1) * DAY_S if self.waiting else NEVER
            next_s = midnight if midnight < end_s else end_s  # NOTE: cheaper than min() once per event
            if next_s <= now_s:
                if midnight < end_s:
                    self.day = midnight // DAY_S
                    self._drop_hopeless(midnight)
                    for q in range(len(self.queues)):
                        if self.queues[q]:
                            self._pass(q, midnight, None)
                    continue
                when, v = heapq.heappop(events)
                if self.vcs[v].next_end_s() == when:
                    self.day = max(self.day, when // DAY_S)
                    self.vcs[v].finish_until(when)
                    self._release(when, [v])
                continue
            if j == arrivals.stop:
                return next_s
            self.day = max(self.day, now_s // DAY_S)
            self._submit(j, now_s)
            j += 1

    def _submit(self, j: int, t_s: int) -> None:
        if self._hopeful(j, t_s):
            queue = self.queues[self.part[j]]
            queue.append(j)
            self.waiting += 1
            self._pass(self.part[j], t_s, None, first=len(queue) - 1)

    def _hopeful(self, j: int, t_s: int) -> bool:
        """Whether some allowed VC holds job j on some day from t_s on."""
        return any(self.vcs[v].cap.ever_fits(self.need[j], t_s) for v in self.fits[j])

    def _drop_hopeless(self, t_s: int) -> None:
        self.queues = [[j for j in queue if self._hopeful(j, t_s)] for queue in self.queues]
        self.waiting = sum(len(queue) for queue in self.queues)

    def _start(self, j: int, t_s: int, v: int) -> None:
        self.vc[j] = v
        self.vcs[v].run(j, t_s)

    def _pass(self, q: int, t_s: int, among: Sequence[int] | None, first: int = 1, new_from: int = 0) -> None:
        """Start jobs of queue q at t_s: heads in order while they fit anywhere, then backfill from position `first`;
        jobs before position new_from are tried only in the VCs `among` (None = all) unless the head changed."""
        queue, touched = self.queues[q], []
        k = 0
        while k < len(queue) and (v := self.place(queue[k], t_s, None)) >= 0:
            self._start(queue[k], t_s, v)
            touched.append(v)
            k += 1
        del queue[:k]
        self.waiting -= k
        if queue:
            limit = max(new_from - k, 0) if k == 0 else 0
            self._backfill(queue, t_s, among, max(first - k, 1), limit, touched)
        for v in touched:
            heapq.heappush(self.events, (self.vcs[v].next_end_s(), v))

    def _backfill(
        self, queue: list[int], t_s: int, among: Sequence[int] | None, first: int, new_from: int, touched: list[int]
    ) -> None:
        """EASY backfilling (sim.engine.backfill) of the jobs at positions first .. BACKFILL_DEPTH behind the blocked
        head of queue, those before new_from only in the VCs among (None = all)."""
        stop = min(len(queue), 1 + BACKFILL_DEPTH)
        if first >= stop:
            return
        scopes = repeat(None) if among is None else chain(repeat(among, min(new_from, stop) - first), repeat(None))
        candidates = zip(queue[first:stop], scopes, strict=False)
        self.blocked = queue
        started = backfill(
            t_s, candidates, self.need, self.dur_s, self._reserve, self.place, self._start, self._without, True
        )
        for j in started:
            touched.append(self.vc[j])
            del queue[queue.index(j, first)]  # NOTE: a scan in C; few jobs start per pass
        self.waiting -= len(started)

    def _reserve(self) -> Reservation:
        """The earliest reservation of the blocked queue's head over its allowed VCs (the first of them on ties)."""
        h, best = self.blocked[0], _UNRESERVED
        for v in self.fits[h]:
            held = self.vcs[v].reserve(h, v)
            if held.shadow_s < best.shadow_s:
                best = held
        return best

    def _without(self, j: int, scope: Scope, v: int) -> list[int]:
        """The VCs of scope (None = all of job j's) other than v."""
        return [w for w in (scope if scope is not None else self.fits[j]) if w != v]

    def _release(self, t_s: int, freed: list[int]) -> None:
        """After jobs ended in the VCs freed, start the jobs of the queues that may use them (in those VCs only: the
        others did not change)."""
        for q, queue in enumerate(self.queues):
            if queue and (len(self.queues) == 1 or q in freed):
                self._pass(q, t_s, freed, new_from=len(queue))
        for v in freed:
            if self.vcs[v].done:
                heapq.heappush(self.events, (self.vcs[v].next_end_s(), v))


def fixed_placer(vcs: list[VcState], vc_of: list[int]) -> Placer:
    """Placement in each job's own VC only."""

    def place(j: int, t_s: int, among: Sequence[int] | None) -> int:
        v = vc_of[j]
        ok = among is None or v in among
        return v if ok and vcs[v].fits_now(j, t_s) else -1

    return place


def schedule_vc(submit_s: list[int], dur_s: list[int], gpus: list[int], cap: DailyCapacity) -> list[int]:
    """Start second of each job (in submit order) of one VC without quotas; -1 = never."""
    n = len(submit_s)
    start = [-1] * n
    vcs = [VcState(cap, list(gpus), list(dur_s), start)]
    ClusterQueues(vcs, [[0]] * n, fixed_placer(vcs, [0] * n)).run(list(submit_s))
    return start


def daily_capacities(vc_gpus: pl.DataFrame, cluster: str, t0: datetime) -> dict[str, DailyCapacity]:
    """Each VC of the cluster with its GPUs per day counted from t0's date (a day without a row keeps the last)."""
    rows = vc_gpus.filter(pl.col("cluster") == cluster).sort("date")
    out = {}
    for (vc,), part in rows.group_by(["vc"], maintain_order=True):
        day = np.array([(d - t0.date()).days for d in part.get_column("date").to_list()], dtype=np.int64)
        gpus = part.get_column("gpus").to_numpy()
        grid = np.zeros(max(int(day.max()), 0) + 1, dtype=np.int64)
        for d, g in zip(day.tolist(), gpus.tolist(), strict=True):
            grid[max(d, 0) :] = g
        out[vc] = DailyCapacity(grid.tolist())
    return out


def cluster_origin(jobs: pl.DataFrame) -> datetime:
    """Midnight of the first submission: second 0 of the schedule."""
    return datetime.combine(jobs.get_column("submit_time").min().date(), datetime.min.time())


def seconds_columns(t0: datetime) -> list[pl.Expr]:
    """Columns _dur (duration, null or negative as 0) and _sub (submit second from t0) that the schedulers use."""
    return [
        pl.col("duration").fill_null(0).clip(lower_bound=0).alias("_dur"),
        ((pl.col("submit_time") - pl.lit(t0)).dt.total_seconds()).alias("_sub"),
    ]


def slurm_like_schedule(jobs: pl.DataFrame, vc_gpus: pl.DataFrame) -> pl.DataFrame:
    """Start/end times and queue (s) for every job of jobs, each GPU job queued in its own VC (one queue per VC, no
    quotas); see the module docstring."""
    parts = [_schedule_cluster(jobs.filter(pl.col("cluster") == c), vc_gpus, c) for c in jobs["cluster"].unique()]
    if not parts:
        return pl.DataFrame(schema=_OUT_SCHEMA)
    return pl.concat(parts).sort(["cluster", "job_id"])


def _schedule_cluster(jobs: pl.DataFrame, vc_gpus: pl.DataFrame, cluster: str) -> pl.DataFrame:
    t0 = cluster_origin(jobs)
    caps = daily_capacities(vc_gpus, cluster, t0)
    df = jobs.select("job_id", "gpu_num", "vc", *seconds_columns(t0)).sort(["_sub", "job_id"])
    start_s = df.get_column("_sub").to_numpy().copy()
    gpu = df.with_row_index("_row").filter((pl.col("gpu_num") > 0) & pl.col("vc").is_in(list(caps)))
    for (vc,), part in gpu.group_by(["vc"]):
        starts = schedule_vc(part["_sub"].to_list(), part["_dur"].to_list(), part["gpu_num"].to_list(), caps[vc])
        start_s[part["_row"].to_numpy()] = starts
    return schedule_frame(df, cluster, t0, pl.Series("_s", start_s))


def schedule_frame(df: pl.DataFrame, cluster: str, t0: datetime, start_s: pl.Series) -> pl.DataFrame:
    """Output rows (job_id, cluster, start_time, end_time, queue) of df (with _sub and _dur) given start seconds
    (-1 = never started)."""
    started = start_s.replace(-1, None)
    start = pl.lit(t0) + pl.duration(seconds=started)
    return df.select(
        pl.col("job_id").cast(pl.Int64),
        pl.lit(cluster).alias("cluster"),
        start.alias("start_time"),
        (start + pl.duration(seconds=pl.col("_dur"))).alias("end_time"),
        (started - pl.col("_sub")).cast(pl.Int64).alias("queue"),
    ).cast(_OUT_SCHEMA)
