"""Where a job that found its VC full is submitted again in the closed loop of sim.synthetic_queue.calibration.

A light job (at most MOVABLE_MAX_GPU_S GPU-seconds) moves by whole days, at its own time of day, to the nearest day
of its submit month on which its VC has room for it through its run, so the users' daily rhythm of submissions (Fig
2b) stays; a heavier job, a light one that no day has room for, or one of a VC that keeps its backlog that started on
the day it was submitted, is submitted at the second it started, since the heavy jobs make each VC's daily load (Fig
4's boxes) and a VC full for whole days stays so only while its waiting jobs stay. Room is counted per minute (a job
holds its GPUs in every minute it touches) from the last run's start times, a moved job freeing its own minutes and
taking the new ones, so the next run starts the moved jobs on time.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from sim.synthetic_queue.capacity import DAY_S, DailyCapacity

MINUTE_S = 60
DAY_MIN = DAY_S // MINUTE_S
MOVABLE_MAX_GPU_S = 14_400  # heavier jobs that waited are submitted again when they started
TAIL_DAYS = 40  # days after the last capacity row that keep its GPUs (jobs running past it)


def resubmit_seconds(
    submit_s: np.ndarray,
    start_s: np.ndarray,
    duration_s: np.ndarray,
    gpus: np.ndarray,
    vc: np.ndarray,
    caps: list[DailyCapacity],
    t0: datetime,
    keeps_backlog: np.ndarray | None = None,
) -> np.ndarray:
    """New submit second of every job (arrays in any order; vc indexes caps; t0 = second 0; keeps_backlog = whether
    the job's VC keeps its backlog, default none): a job that waited in the last run (start_s after submit_s) moves as
    the module docstring says; the others keep theirs."""
    out = np.asarray(submit_s, dtype=np.int64).copy()
    late = np.flatnonzero(start_s > submit_s)
    if len(late) == 0:
        return out
    ran = start_s >= 0
    stays = np.zeros(len(out), dtype=bool) if keeps_backlog is None else np.asarray(keeps_backlog, dtype=bool)
    stays &= start_s // DAY_S == submit_s // DAY_S
    first_day, next_day = month_days(submit_s[late], t0)
    for v in np.unique(vc[late]).tolist():
        mine = vc[late] == v
        own = ran & (vc == v)
        free = free_minutes(caps[v], start_s[own], duration_s[own], gpus[own])
        for k, first, following in zip(
            late[mine].tolist(), first_day[mine].tolist(), next_day[mine].tolist(), strict=True
        ):
            if stays[k]:
                out[k] = start_s[k]
                continue
            out[k] = _take_room(
                free, int(submit_s[k]), int(start_s[k]), int(duration_s[k]), int(gpus[k]), first, following
            )
    return out


def _take_room(
    free: np.ndarray, submit_s: int, start_s: int, duration_s: int, gpus: int, first: int, following: int
) -> int:
    """The new submit second of one job that waited (see resubmit_seconds), its minutes taken from free."""
    if gpus * duration_s > MOVABLE_MAX_GPU_S:
        return start_s
    held = slice(start_s // MINUTE_S, (start_s + duration_s) // MINUTE_S + 1)
    free[held] += gpus  # its GPUs in the last run are free to itself
    tod = submit_s % DAY_S
    days = _days_nearest_first(submit_s, duration_s, first, following)
    width = (tod + duration_s) // MINUTE_S - tod // MINUTE_S + 1
    lo = days * DAY_MIN + tod // MINUTE_S
    days, lo = days[lo + width <= len(free)], lo[lo + width <= len(free)]
    room = free[lo[:, None] + np.arange(width)[None, :]].min(axis=1) >= gpus
    if room.any():
        i = int(np.argmax(room))
        free[lo[i] : lo[i] + width] -= gpus
        return int(days[i]) * DAY_S + tod
    free[held] -= gpus
    return start_s


def _days_nearest_first(submit_s: int, duration_s: int, first: int, following: int) -> np.ndarray:
    """The days of [first, following) on which the job, at its time of day, ends by the later of the month's end and
    its own end, nearest its submit day first (a later day before an earlier one as near)."""
    day0, tod = divmod(submit_s, DAY_S)
    days = np.arange(max(first, 0), following)
    days = days[days * DAY_S + tod + duration_s <= max(following * DAY_S, submit_s + duration_s)]
    return days[np.argsort(np.abs(days - day0) * 2 + (days < day0), kind="stable")]


def month_days(submit_s: np.ndarray, t0: datetime) -> tuple[np.ndarray, np.ndarray]:
    """Day index (from t0's date) of the first day of each submit second's calendar month and of the next month."""
    day = np.asarray(submit_s, dtype=np.int64) // DAY_S
    base = np.datetime64(t0.date(), "D")
    month = (base + day).astype("datetime64[M]")
    first = (month.astype("datetime64[D]") - base).astype(np.int64)
    following = ((month + 1).astype("datetime64[D]") - base).astype(np.int64)
    return first, following


def free_minutes(cap: DailyCapacity, start_s: np.ndarray, duration_s: np.ndarray, gpus: np.ndarray) -> np.ndarray:
    """GPUs of the VC free in each minute of its capacity's days (and TAIL_DAYS more) beside the jobs started at
    start_s."""
    days = cap.last + 1 + TAIL_DAYS
    gpus_by_day = np.asarray(cap.gpus + [cap.gpus[-1]] * TAIL_DAYS, dtype=np.int32)
    n = days * DAY_MIN
    first = np.clip(start_s // MINUTE_S, 0, n)
    stop = np.clip((start_s + duration_s) // MINUTE_S + 1, 0, n)
    held = np.zeros(n + 1, dtype=np.int64)
    np.add.at(held, first, gpus)
    np.add.at(held, stop, -gpus)
    return np.repeat(gpus_by_day, DAY_MIN) - np.cumsum(held)[:n].astype(np.int32)
