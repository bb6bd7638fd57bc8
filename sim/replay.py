"""Capacity-consistent start times for a trace: FIFO + EASY backfill on each VC's daily GPU capacity (Slurm-like).

Used by the synthetic dataset generator so that recorded utilisation never exceeds capacity. A GPU job starts only
if, for every day of its run, the GPUs in use plus its own fit that day's capacity; by induction over start times
the GPUs in use never exceed the capacity of the day. Placement is by GPU count (no node fragmentation). A job
that can never run — more GPUs than its VC has on any day from its submission on, or still waiting when its VC
shrinks for good — is never started: its start, end and queue are null. VCs with no capacity rows are treated as
unlimited. CPU jobs pass through with queue 0 (start = submit).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from datetime import datetime

import numpy as np
import polars as pl

DAY_S = 86_400
BACKFILL_DEPTH = 256  # queue entries looked at behind the blocked head
_NEVER = 1 << 62
_OUT_SCHEMA = {
    "job_id": pl.Int64,
    "cluster": pl.String,
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "queue": pl.Int64,
}


class _DailyCapacity:
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
        d0, d1 = self.day(start_s), self.day(end_s)
        return self.gpus[d0] if d0 == d1 else min(self.gpus[d0 : d1 + 1])

    def ever_fits(self, gpus: int, t_s: int) -> bool:
        """Whether `gpus` GPUs fit the VC on some day from second t_s on."""
        return gpus <= self.max_from[self.day(t_s)]

    def next_midnight_s(self, t_s: int) -> int:
        """The first midnight after t_s up to the last known day (after it the capacity is constant), or _NEVER."""
        d = t_s // DAY_S
        return (d + 1) * DAY_S if d < self.last else _NEVER


def schedule_vc(submit_s: list[int], dur_s: list[int], gpus: list[int], cap: _DailyCapacity) -> list[int]:
    """Start second of each job (in submit order) by FIFO + EASY backfill on the daily capacity; -1 = never."""
    n = len(submit_s)
    need = list(gpus)
    start = [-1] * n
    done: list[tuple[int, int]] = []
    waiting: list[int] = []
    head = 0  # waiting[head:] holds the queue in FIFO order (started ones are skipped lazily)
    used, i = 0, 0
    last_s = submit_s[0] if n else 0

    def fits(j: int, now: int) -> bool:
        return used + need[j] <= cap.min_over(now, now + dur_s[j])

    while i < n or done or head < len(waiting):
        now = submit_s[i] if i < n else _NEVER
        if done and done[0][0] < now:
            now = done[0][0]
        if head < len(waiting):
            now = min(now, cap.next_midnight_s(last_s))
        if now >= _NEVER:
            break  # only jobs that can never fit are left waiting
        changed = now // DAY_S != last_s // DAY_S or (bool(done) and done[0][0] <= now)
        last_s, old_head, first_new = now, head, len(waiting)
        while done and done[0][0] <= now:
            used -= need[heapq.heappop(done)[1]]
        while i < n and submit_s[i] <= now:
            if cap.ever_fits(need[i], submit_s[i]):
                waiting.append(i)
            i += 1
        while head < len(waiting) and (start[waiting[head]] >= 0 or fits(waiting[head], now)):
            j = waiting[head]
            head += 1
            if start[j] < 0:
                start[j], used = now, used + need[j]
                heapq.heappush(done, (now + dur_s[j], j))
        if head < len(waiting):
            # NOTE: with no GPUs freed, no new day and the same head, only the new arrivals can newly fit
            scan_from = head + 1 if changed or head != old_head else max(head + 1, first_new)
            used = _backfill(now, waiting, head, scan_from, start, done, need, dur_s, cap, used)
        if head > 4096 and head * 2 > len(waiting):
            del waiting[:head]
            head = 0
    return start


def _backfill(now, waiting, head, scan_from, start, done, need, dur_s, cap, used) -> int:
    """EASY backfill of waiting[scan_from:] behind the blocked head; returns the GPUs in use afterwards."""
    reservation = None  # (shadow_s, spare GPUs at shadow), computed when first needed
    cap_now = cap.gpus[cap.day(now)]
    stop = min(len(waiting), head + 1 + BACKFILL_DEPTH)  # NOTE: bounded scan, like Slurm's bf_max_job_test
    for k in range(scan_from, stop):
        if used >= cap_now:
            break
        j = waiting[k]
        if start[j] >= 0:
            continue
        if used + need[j] > cap.min_over(now, now + dur_s[j]):
            continue
        if reservation is None:
            reservation = _reservation(waiting[head], done, need, dur_s, cap, used)
        shadow_s, extra = reservation
        in_time = now + dur_s[j] <= shadow_s
        if in_time or need[j] <= extra:
            start[j], used = now, used + need[j]
            heapq.heappush(done, (now + dur_s[j], j))
            if not in_time:
                reservation = (shadow_s, extra - need[j])
    return used


def _reservation(h, done, need, dur_s, cap, used) -> tuple[int, int]:
    """The blocked head h's shadow time (when enough GPUs will be free) and the GPUs spare then."""
    after = used
    for end_s, j in sorted(done):
        after -= need[j]
        room = cap.min_over(end_s, end_s + dur_s[h]) - after - need[h]
        if room >= 0:
            return end_s, room
    return _NEVER, 0


def _capacities(vc_gpus: pl.DataFrame, cluster: str, t0: datetime) -> dict[str, _DailyCapacity]:
    rows = vc_gpus.filter(pl.col("cluster") == cluster).sort("date")
    out = {}
    for (vc,), part in rows.group_by(["vc"], maintain_order=True):
        day = np.array([(d - t0.date()).days for d in part.get_column("date").to_list()], dtype=np.int64)
        gpus = part.get_column("gpus").to_numpy()
        grid = np.zeros(max(int(day.max()), 0) + 1, dtype=np.int64)
        for d, g in zip(day.tolist(), gpus.tolist(), strict=True):
            grid[max(d, 0) :] = g
        out[vc] = _DailyCapacity(grid.tolist())
    return out


def slurm_like_schedule(jobs: pl.DataFrame, vc_gpus: pl.DataFrame, gpus_per_node: int = 8) -> pl.DataFrame:
    """Start/end times and queue (s) for every job of jobs by FIFO + EASY backfill on the daily VC capacities."""
    parts = [_schedule_cluster(jobs.filter(pl.col("cluster") == c), vc_gpus, c) for c in jobs["cluster"].unique()]
    if not parts:
        return pl.DataFrame(schema=_OUT_SCHEMA)
    return pl.concat(parts).sort(["cluster", "job_id"])


def _schedule_cluster(jobs: pl.DataFrame, vc_gpus: pl.DataFrame, cluster: str) -> pl.DataFrame:
    t0 = datetime.combine(jobs.get_column("submit_time").min().date(), datetime.min.time())
    caps = _capacities(vc_gpus, cluster, t0)
    df = jobs.select(
        "job_id",
        "vc",
        "gpu_num",
        "submit_time",
        pl.col("duration").fill_null(0).clip(lower_bound=0).alias("_dur"),
        ((pl.col("submit_time") - pl.lit(t0)).dt.total_seconds()).alias("_sub"),
    ).sort(["submit_time", "job_id"])
    start_s = df.get_column("_sub").to_numpy().copy()
    gpu_rows = df.with_row_index("_row").filter((pl.col("gpu_num") > 0) & pl.col("vc").is_in(list(caps)))
    for (vc,), part in gpu_rows.group_by(["vc"]):
        rows = part.get_column("_row").to_numpy()
        starts = schedule_vc(part["_sub"].to_list(), part["_dur"].to_list(), part["gpu_num"].to_list(), caps[vc])
        start_s[rows] = starts
    started = pl.Series("_s", start_s).replace(-1, None)
    start = pl.lit(t0) + pl.duration(seconds=started)
    return df.select(
        pl.col("job_id").cast(pl.Int64),
        pl.lit(cluster).alias("cluster"),
        start.alias("start_time"),
        (start + pl.duration(seconds=pl.col("_dur"))).alias("end_time"),
        (started - pl.col("_sub")).cast(pl.Int64).alias("queue"),
    ).cast(_OUT_SCHEMA)
