"""Where in its month each synthetic GPU job runs: jobs move by whole days within their month so that each VC's
load follows its envelope (analytics.synth.profiles: busy, idle or saturated days as Fig 4's boxes say), and the
jobs holding most GPU time are then levelled against it, as teams spread their big runs instead of submitting them
blindly. The placement is made again against what a queue would run beyond the envelope (place_against_spill), as
a day asking more than the GPUs runs its excess on the days after it.

Independent submissions make the as-if-started-at-submit demand of big multi-day jobs pile up above the VC's GPUs
for days, which no scheduler can serve with the short published queues. Moving jobs only by whole days and never out
of their calendar month (jobs spanning two months stay) keeps every published statistic the generator matches: job
counts per month, submissions per hour of day, durations, GPU counts and GPU time per month.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HOUR_S = 3600
DAY_S = 86_400
HEAVY_SHARE = 0.8  # the biggest jobs (by GPU time) holding this share of the GPU time are levelled
SHORT_RHYTHM_FLOOR = 0.1  # the short jobs' rhythm keeps at least this share of the published one in every hour
SPILL_ROUNDS = 2  # placements re-aimed at the envelope minus what a queue would run beyond it (place_against_spill)
SPILL_MAX_ASK = 1.25  # ... asking at most this many times a VC's GPUs on a day, so that a queue keeps full days full


@dataclass(frozen=True)
class Jobs:
    """One cluster's GPU jobs: submit second, duration (s), GPUs and VC index."""

    submit_s: np.ndarray
    duration_s: np.ndarray
    gpus: np.ndarray
    vc: np.ndarray


def place_against_spill(
    u: np.ndarray,
    jobs: Jobs,
    envelope: np.ndarray,
    weekday: np.ndarray,
    gpus_by_day: np.ndarray,
    month_start_day: np.ndarray,
) -> np.ndarray:
    """New submit seconds: the jobs placed on the envelope (VCs x days, place_on), then SPILL_ROUNDS times placed
    again on it minus what a queue would run beyond it each day (run_by_day), at most SPILL_MAX_ASK x the GPUs."""
    target, placed = envelope, place_on(u, jobs, envelope * weekday[None, :], envelope, month_start_day)
    seconds = np.maximum(jobs.duration_s, 1)
    for _ in range(SPILL_ROUNDS):
        spill = run_by_day(placed, seconds, jobs.gpus, jobs.vc, gpus_by_day) - envelope
        target = np.clip(target - spill, 0.0, SPILL_MAX_ASK * gpus_by_day)
        placed = place_on(u, jobs, target * weekday[None, :], target, month_start_day)
    return placed


def place_on(
    u: np.ndarray, jobs: Jobs, weight_by_day: np.ndarray, busy_by_day: np.ndarray, month_start_day: np.ndarray
) -> np.ndarray:
    """New submit seconds: every job drawn to a day of its month by its VC's weight (follow_envelope at quantiles u),
    then each VC's heavy jobs levelled against its busy GPUs by day (level_heavy_jobs)."""
    placed = follow_envelope(u, jobs.submit_s, jobs.duration_s, jobs.vc, weight_by_day, month_start_day)
    for v in np.unique(jobs.vc).tolist():
        rows = np.flatnonzero(jobs.vc == v)
        d, g = jobs.duration_s[rows], jobs.gpus[rows]
        placed[rows] = level_heavy_jobs(placed[rows], d, g, busy_by_day[v], month_start_day)
    return placed


def follow_envelope(
    u: np.ndarray,
    submit_s: np.ndarray,
    duration_s: np.ndarray,
    vc: np.ndarray,
    weight_by_day: np.ndarray,
    month_start_day: np.ndarray,
) -> np.ndarray:
    """New submit seconds: each job that runs within its submit month moves, at the same time of day, to the day of
    that month (on which it still ends inside the month) at its uniform quantile u of its VC's weight over those days
    (weight_by_day = VCs x days, the envelope times the weekday rhythm); jobs of a VC without weight there keep their
    time."""
    out = np.asarray(submit_s, dtype=np.int64).copy()
    tod = out % DAY_S
    movable, first, last = start_days(out, duration_s, month_start_day)
    cum = np.concatenate([np.zeros((weight_by_day.shape[0], 1)), np.cumsum(weight_by_day, axis=1)], axis=1)
    for v in np.unique(vc[movable]).tolist():
        jobs = np.flatnonzero(movable & (vc == v))
        low, high = cum[v, first[jobs]], cum[v, np.minimum(last[jobs], weight_by_day.shape[1] - 1) + 1]
        ok = high > low
        jobs, low, high = jobs[ok], low[ok], high[ok]
        new_day = np.searchsorted(cum[v], low + u[jobs] * (high - low), side="right") - 1
        out[jobs] = new_day * DAY_S + tod[jobs]
    return out


def start_days(
    submit_s: np.ndarray, duration_s: np.ndarray, month_start_day: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per job: whether follow_envelope may move it (it runs within its submit month), and the first and last day it
    may start on at its time of day (its month's first day; the last on which it still ends in the month)."""
    submit_s = np.asarray(submit_s, dtype=np.int64)
    m = np.searchsorted(month_start_day, submit_s // DAY_S, side="right") - 1
    inside = (m >= 0) & (m < len(month_start_day) - 1)
    first = month_start_day[np.clip(m, 0, len(month_start_day) - 1)]
    stop = month_start_day[np.clip(m + 1, 0, len(month_start_day) - 1)]
    last = (stop * DAY_S - submit_s % DAY_S - duration_s - 1) // DAY_S
    return inside & ((submit_s + duration_s) // DAY_S < stop) & (last >= first), first, last


def level_heavy_jobs(
    submit_s: np.ndarray, duration_s: np.ndarray, gpus: np.ndarray, gpus_by_day: np.ndarray, month_start_day: np.ndarray
) -> np.ndarray:
    """New submit seconds: each heavy job (biggest first) gets the day of its month whose hours over its run have the
    lowest peak of busy GPUs (as if jobs started at submit) relative to the room that day (gpus_by_day: the GPUs, or
    the busy GPUs the envelope wants); ties go to the day nearest the original. Light jobs and jobs spanning two
    months keep their time and hold their GPUs before the first heavy job is levelled."""
    out = np.asarray(submit_s, dtype=np.int64).copy()
    work = gpus * duration_s.astype(float)
    if len(out) == 0 or work.sum() <= 0:
        return out
    order = np.argsort(-work, kind="stable")
    heavy = order[: np.searchsorted(np.cumsum(work[order]), HEAVY_SHARE * work.sum()) + 1]
    heavy = heavy[start_days(out[heavy], duration_s[heavy], month_start_day)[0]]  # the others hold their GPUs first
    light = np.ones(len(out), bool)
    light[heavy] = False
    last_s = max(int((out + duration_s).max()), int(month_start_day[-1]) * DAY_S)  # moved jobs stay in their month
    span_h = last_s // HOUR_S + 2
    busy = hourly_busy(out[light], duration_s[light], gpus[light], span_h)
    cap = np.repeat(np.maximum(np.asarray(gpus_by_day, dtype=float), 1.0), 24)
    cap = np.concatenate([cap, np.full(max(span_h - len(cap), 0), cap[-1])])[:span_h]
    for k in heavy.tolist():
        out[k] = _best_start(out[k], int(duration_s[k]), int(gpus[k]), busy, cap, month_start_day)
        busy += hourly_busy(out[k : k + 1], duration_s[k : k + 1], gpus[k : k + 1], span_h)
    return out


def hourly_busy(
    submit_s: np.ndarray, duration_s: np.ndarray, gpus: np.ndarray, hours: int, slot_s: int = HOUR_S
) -> np.ndarray:
    """Mean GPUs busy in each hour (or slot of slot_s seconds) if every job ran from its submit second for its
    duration; time after the last slot is left out."""
    start = np.asarray(submit_s, dtype=np.int64)
    end = start + np.asarray(duration_s, dtype=np.int64)
    g = np.asarray(gpus, dtype=float)
    h0, h1 = np.minimum(start // slot_s, hours), np.minimum(end // slot_s, hours)
    out = np.zeros(hours + 1)
    same = h0 == h1
    np.add.at(out, h0[same], g[same] * (end[same] - start[same]) / slot_s)
    cross = ~same
    np.add.at(out, h0[cross], g[cross] * ((h0[cross] + 1) * slot_s - start[cross]) / slot_s)
    np.add.at(out, h1[cross], g[cross] * (end[cross] - h1[cross] * slot_s) / slot_s)
    full = np.zeros(hours + 2)
    np.add.at(full, h0[cross] + 1, g[cross])
    np.add.at(full, h1[cross], -g[cross])
    return (out + np.cumsum(full)[: hours + 1])[:hours]


def unmovable_busy(
    submit_s: np.ndarray,
    duration_s: np.ndarray,
    gpus: np.ndarray,
    vc: np.ndarray,
    n_vcs: int,
    month_start_day: np.ndarray,
) -> np.ndarray:
    """Mean GPUs busy per VC and day (VCs x days of the months) in the jobs follow_envelope cannot move: those that
    run past the end of their submit month."""
    stays = ~start_days(submit_s, duration_s, month_start_day)[0]
    first, n_days = int(month_start_day[0]), int(month_start_day[-1] - month_start_day[0])
    out = np.zeros((n_vcs, n_days))
    for v in np.unique(vc[stays]).tolist():
        rows = np.flatnonzero(stays & (vc == v))
        start = np.maximum(submit_s[rows] - first * DAY_S, 0)
        end = np.maximum(submit_s[rows] + duration_s[rows] - first * DAY_S, 0)
        out[v] = hourly_busy(start, end - start, gpus[rows], n_days, DAY_S)
    return out


def fluid_run(demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Per slot, the load that runs when what is asked beyond capacity waits for the next slots with room (a fluid
    first-come-first-served queue: the backlog obeys Lindley's recursion)."""
    asked = np.asarray(demand, dtype=float)
    excess = np.cumsum(asked - capacity)
    backlog = excess - np.minimum(np.minimum.accumulate(excess), 0.0)
    return asked + np.concatenate([[0.0], backlog[:-1]]) - backlog


def run_by_day(
    submit_s: np.ndarray, duration_s: np.ndarray, gpus: np.ndarray, vc: np.ndarray, gpus_by_day: np.ndarray
) -> np.ndarray:
    """Mean GPUs running per VC and day (VCs x days) if every job is asked for at its submit second and what is
    asked beyond the VC's GPUs waits for room (fluid_run, hour by hour)."""
    n_vcs, n_days = gpus_by_day.shape
    out = np.zeros((n_vcs, n_days))
    for v in np.unique(vc).tolist():
        rows = np.flatnonzero(vc == v)
        asked = hourly_busy(submit_s[rows], duration_s[rows], gpus[rows], n_days * 24)
        out[v] = fluid_run(asked, np.repeat(gpus_by_day[v].astype(float), 24)).reshape(n_days, 24).mean(axis=1)
    return out


def _best_start(
    submit_s: int, duration_s: int, gpus: int, busy: np.ndarray, cap: np.ndarray, months: np.ndarray
) -> int:
    """The levelled submit second of one heavy job (see level_heavy_jobs)."""
    day = submit_s // DAY_S
    m = int(np.searchsorted(months, day, side="right") - 1)
    if not 0 <= m < len(months) - 1 or (submit_s + duration_s) // DAY_S >= months[m + 1]:
        return submit_s
    days = np.arange(months[m], months[m + 1])
    starts = days * DAY_S + submit_s % DAY_S
    in_month = (starts + duration_s) // DAY_S < months[m + 1]
    days, starts = days[in_month], starts[in_month]
    hours = starts[:, None] // HOUR_S + np.arange(max(1, -(-duration_s // HOUR_S)) + 1)[None, :]
    hours = np.minimum(hours, len(busy) - 1)
    peak = ((busy[hours] + gpus) / cap[hours]).max(axis=1)
    best = np.flatnonzero(peak <= peak.min() + 1e-9)
    return int(starts[best[np.argmin(np.abs(days[best] - day))]])


def split_rhythm(
    submit_s: np.ndarray, duration_s: np.ndarray, per_hour: np.ndarray, long_s: int, exponent: float
) -> np.ndarray:
    """New submit seconds on the same days: the jobs at least long_s long follow the hourly rhythm per_hour raised to
    exponent (flatter below 1, sharper above), the shorter ones the rest of per_hour, so all jobs together keep it;
    each job keeps its quantile of the time of day."""
    out = np.asarray(submit_s, dtype=np.int64).copy()
    rhythm = np.asarray(per_hour, dtype=float) / np.sum(per_hour)
    long = np.asarray(duration_s) >= long_s
    if exponent == 1.0 or not long.any() or long.all():
        return out
    share = long.mean()
    long_rhythm = rhythm**exponent / np.sum(rhythm**exponent)
    short_rhythm = np.maximum(rhythm - share * long_rhythm, SHORT_RHYTHM_FLOOR * rhythm) / (1 - share)
    for rows, target in ((long, long_rhythm), (~long, short_rhythm)):
        day, tod = out[rows] // DAY_S, out[rows] % DAY_S
        out[rows] = day * DAY_S + remap_time_of_day(tod, rhythm, target)
    return out


def remap_time_of_day(tod_s: np.ndarray, from_per_hour: np.ndarray, to_per_hour: np.ndarray) -> np.ndarray:
    """Seconds of the day moved from one hourly rhythm to another by quantile (uniform within each hour)."""
    grid_s = np.arange(25) * HOUR_S
    cdf_from = np.concatenate([[0.0], np.cumsum(from_per_hour)]) / np.sum(from_per_hour)
    cdf_to = np.concatenate([[0.0], np.cumsum(to_per_hour)]) / np.sum(to_per_hour)
    moved = np.interp(np.interp(tod_s, grid_s, cdf_from), cdf_to, grid_s)
    return np.clip(np.floor(moved), 0, DAY_S - 1).astype(np.int64)
