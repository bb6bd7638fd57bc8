"""Start times of the synthetic trace: its GPU jobs run through the Slurm-like queue of cluster_queues, each cluster
one queue over its VCs, with per-user GPU quotas calibrated so that users wait as long as the trace's target queueing
times say (the `queue` column the generator drew to match the published means and Fig 9a).

A job may run in the VCs where it needs at most JOB_SHARE of the fewest GPUs over its run (else those that hold it,
else the largest); it starts in its preferred VC (the `vc` column) when that holds it now, else in the allowed VC
that holds it with the fewest GPUs to spare (best fit). A first run without quotas finds who waits anyway: the
users' targets (the same values, so the shares of the curve are kept) go largest first to those users. A user whose
target is at least MIN_USER_SHARE of the cluster's gets a quota: first the one under which the user's own jobs alone,
first come first served, would wait the target; then PASSES - 1 corrections from the waits the whole cluster
produced (inside a bracket: bisection on the user's own waits scaled by the ratio the cluster showed; else secant
steps), with the targets rescaled so that the users without quota keep their own waits; the last run uses, per
user, the quota tried that came closest. See docs/synthetic-queueing.md.
"""

from __future__ import annotations

import heapq
import math
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import polars as pl

from sim.synthetic_queue.cluster_queues import (
    DAY_S,
    QUOTA_CAP_GPUS,
    ClusterQueues,
    DailyCapacity,
    Placer,
    VcState,
    cluster_origin,
    daily_capacities,
    schedule_frame,
    seconds_columns,
)

JOB_SHARE = 0.5  # a job goes only to VCs where it needs at most this share of the GPUs, unless none is that big
MIN_USER_SHARE = 0.0002  # users whose target is a smaller share of the cluster's queueing time get no quota
_GOLDEN = (math.sqrt(5) - 1) / 2
PASSES = 5  # cluster runs: the first with quotas from each user's own jobs, the others correcting them
_OUT_SCHEMA = {
    "job_id": pl.Int64,
    "cluster": pl.String,
    "vc": pl.String,
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "queue": pl.Int64,
    "user": pl.String,
    "user_gpu_quota": pl.Float64,
}


def calibrated_schedule(jobs: pl.DataFrame, vc_gpus: pl.DataFrame, workers: int | None = None) -> pl.DataFrame:
    """GPU-job start times by a Slurm-like FIFO + EASY backfill queue per cluster on the daily VC capacities, with
    per-user GPU quotas calibrated to the target waits (jobs: cluster, job_id, user, vc = preferred VC, gpu_num,
    submit_time, duration, queue = target wait in s; per job out: the VC it ran in, start and end time, queue in s,
    user and the user's GPU quota, null = none)."""
    clusters = sorted(set(jobs["cluster"].to_list()))
    parts = [jobs.filter(pl.col("cluster") == c) for c in clusters]
    n = min(len(parts), workers or os.cpu_count() or 1)
    if n <= 1:
        out = [_schedule_cluster(p, vc_gpus, c) for p, c in zip(parts, clusters, strict=True)]
    else:
        # NOTE: spawned, not forked: Polars' thread pool does not survive a fork
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
            out = list(pool.map(_schedule_cluster, parts, [vc_gpus] * len(parts), clusters))
    if not out:
        return pl.DataFrame(schema=_OUT_SCHEMA)
    return pl.concat(out).sort(["cluster", "job_id"])


def own_wait_s(submit_s: Sequence[int], dur_s: Sequence[int], units: Sequence[int], quota: float) -> int:
    """Total wait (s) of one user's jobs (in submit order) started first come first served within a quota of units
    (a job alone always starts; jobs of zero units run at once)."""
    running: list[tuple[int, int]] = []
    used = total = 0
    prev = -1
    for s, d, n in zip(submit_s, dur_s, units, strict=True):
        if n == 0:
            continue  # runs outside the quota
        t = max(s, prev)
        while running and running[0][0] <= t:
            used -= heapq.heappop(running)[1]
        while running and used + n > quota:
            end, m = heapq.heappop(running)
            used -= m
            t = max(t, end)
        heapq.heappush(running, (t + d, n))
        used += n
        total += t - s
        prev = t
    return total


def calibrate_quota(submit_s: Sequence[int], dur_s: Sequence[int], units: Sequence[int], target_s: float) -> int:
    """The quota (≥ 1) whose own_wait_s is closest to target_s (doubling, then bisection: waits fall as it grows)."""
    lo, hi = 0, 1
    while own_wait_s(submit_s, dur_s, units, hi) > target_s:
        lo, hi = hi, 2 * hi
    if lo == 0:
        return hi
    waits = {lo: own_wait_s(submit_s, dur_s, units, lo), hi: own_wait_s(submit_s, dur_s, units, hi)}
    while hi - lo > 1:
        mid = (lo + hi) // 2
        waits[mid] = own_wait_s(submit_s, dur_s, units, mid)
        lo, hi = (mid, hi) if waits[mid] > target_s else (lo, mid)
    return lo if waits[lo] - target_s < target_s - waits[hi] else hi


class QuotaCalibration:
    """Quotas of the users with a noticeable target: from their own jobs first, then corrected by cluster runs."""

    def __init__(self, user: Sequence[int], submit_s, dur_s, gpus, target: np.ndarray):
        n_users = self.n_users = len(target)
        units = np.minimum(np.asarray(gpus), QUOTA_CAP_GPUS)
        self.total = float(target.sum())
        by_user = np.argsort(np.asarray(user), kind="stable")
        edges = np.searchsorted(np.asarray(user)[by_user], np.arange(n_users + 1))
        self.jobs: dict[int, tuple[list, list, list]] = {}
        self.rows: dict[int, np.ndarray] = {}
        self.target: dict[int, float] = {}
        for u in np.flatnonzero(target >= MIN_USER_SHARE * max(self.total, 1.0)).tolist():
            rows = by_user[edges[u] : edges[u + 1]]
            self.jobs[u] = (np.asarray(submit_s)[rows].tolist(), np.asarray(dur_s)[rows].tolist(), units[rows].tolist())
            self.rows[u] = rows
            self.target[u] = float(target[u])
        self.units = units
        self.history: dict[int, list[tuple[float, float]]] = {u: [] for u in self.jobs}

    def limits(self, quota: list[float]) -> tuple[list[float], list[int]]:
        """Whole quotas and per-job quota units for real quotas x: quota floor(x), and a share x - floor(x) of the
        user's jobs, evenly spread in submit order, count zero (they run unlimited)."""
        whole = [q if math.isinf(q) else float(math.floor(q)) for q in quota]
        units = self.units.copy()
        for u, rows in self.rows.items():
            if not math.isinf(quota[u]):
                units[rows] = _exempt(units[rows], quota[u])
        return whole, units.tolist()

    def _own(self, u: int, x: float) -> int:
        s, d, n = self.jobs[u]
        return own_wait_s(s, d, _exempt(np.asarray(n), x).tolist(), math.floor(x))

    def _solve_own(self, u: int, lo: float, hi: float, target_s: float) -> float:
        """Real quota in [lo, hi] whose own wait is about target_s (bisection)."""
        for _ in range(12):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self._own(u, mid) > target_s else (lo, mid)
        return (lo + hi) / 2

    def initial(self) -> list[float]:
        """Quotas from each user's own jobs, targets scaled to the cluster total."""
        scale = self.total / max(sum(self.target.values()), 1.0)
        quota = [math.inf] * self.n_users
        for u, (s, d, n) in self.jobs.items():
            quota[u] = calibrate_quota(s, d, n, self.target[u] * scale)
        return quota

    def refine(self, quota: list[float], wait_by_user: np.ndarray, last: bool = False) -> list[float]:
        """Quotas corrected by the waits (s) per user of a cluster run with `quota`; for the last run each user gets
        the quota tried that came closest."""
        limited = np.zeros(self.n_users, bool)
        limited[list(self.jobs)] = True
        others = float(wait_by_user[~limited].sum())
        scale = max(self.total - others, 0.0) / max(sum(self.target.values()), 1.0)
        out = list(quota)
        for u, (s, d, n) in self.jobs.items():
            want = self.target[u] * scale
            self.history[u].append((quota[u], float(wait_by_user[u])))
            if last:
                out[u] = self._final_quota(u, want)
            else:
                out[u] = self._next_quota(u, want, quota[u], float(wait_by_user[u]), s, d, n)
        return out

    def _final_quota(self, u: int, want: float) -> float:
        """The quota tried whose wait came closest to want (in log wait): near saturation a user's wait swings with
        small changes, so the last run uses only quotas already seen to work."""
        return min(self.history[u], key=lambda p: abs(math.log1p(p[1]) - math.log1p(want)))[0]

    def _next_quota(self, u: int, want: float, q: float, got: float, s, d, n) -> float:
        """The next quota of user u: within the bracket of quotas tried when there is one, else a step in the right
        direction (larger when the user waited too long) by the secant through the last two quotas, or by the
        user's own waits when those give no slope; no quota when the user waits too long without being held."""
        grow = got > want
        if math.isinf(q):
            return q if grow else calibrate_quota(s, d, n, want)
        points = sorted((a, w) for a, w in dict(self.history[u]).items() if not math.isinf(a))
        above = [p for p in points if p[1] > want]  # quotas too small: waits too long
        below = [p for p in points if p[1] <= want]
        if above and below and below[0][0] > above[-1][0]:
            (q1, w1), (q2, w2) = above[-1], below[0]
            own = self._own(u, q1)
            ratio = w1 / own if own > 0 else 1.0
            return self._solve_own(u, q1, q2, want / ratio)
        lo, hi = (q + 1, 2 * q) if grow else (max(q / 2, 1), q - 1)
        if len(points) >= 2:
            (q1, w1), (q2, w2) = points[-2:] if grow else points[:2]
            if math.log1p(w2) < math.log1p(w1):  # waits fall as the quota grows: trust the slope
                return _bounded(_secant(q1, w1, q2, w2, want), lo, hi)
        own = own_wait_s(s, d, n, math.floor(q))
        if grow and own < 0.05 * got:
            return math.inf  # the quota hardly holds this user: the waits come from the cluster
        ratio = got / own if own > 0 and got > 0 else 1.0
        return _bounded(calibrate_quota(s, d, n, want / ratio), lo, hi)


def _exempt(units: np.ndarray, x: float) -> np.ndarray:
    """Units with the share x - floor(x) of jobs (evenly spread in order, golden-ratio sequence) set to zero."""
    out = units.copy()
    share = x - math.floor(x)
    if share > 0:
        out[np.modf((np.arange(len(out)) + 1) * _GOLDEN)[0] < share] = 0
    return out


def _secant(q1: float, w1: float, q2: float, w2: float, want: float) -> float:
    """Quota where the line through (q1, log wait1) and (q2, log wait2) reaches log want."""
    l1, l2 = math.log1p(w1), math.log1p(w2)
    return (q1 + q2) / 2 if l1 == l2 else q1 + (math.log1p(want) - l1) * (q2 - q1) / (l2 - l1)


def _bounded(q: float, lo: float, hi: float) -> int:
    return max(int(round(min(max(q, lo), max(hi, lo)))), 1)


def waiters_first(target: np.ndarray, base_wait: np.ndarray) -> np.ndarray:
    """The per-user targets given again, largest first, to users in decreasing order of the larger of their target
    and the wait they had without quotas (users who wait anyway take the large targets)."""
    out = np.empty_like(target, dtype=float)
    order = np.argsort(-np.maximum(target, base_wait), kind="stable")
    out[order] = np.sort(target)[::-1]
    return out


def allowed_vcs(caps: dict[str, DailyCapacity], names: list[str], sub_s, dur_s, gpus) -> list[list[int]]:
    """Per job, the VC indices it may run in (see the module docstring)."""
    days = max(c.last for c in caps.values()) + 1
    grid = np.array([[caps[v].gpus[min(d, caps[v].last)] for d in range(days)] for v in names], dtype=np.int64)
    d0 = np.clip(sub_s // DAY_S, 0, days - 1)
    d1 = np.clip((sub_s + dur_s) // DAY_S, 0, days - 1)
    least = np.full((len(sub_s), len(names)), np.iinfo(np.int64).max)
    for span in np.unique(d1 - d0).tolist():
        rows = np.flatnonzero(d1 - d0 == span)
        for k in range(span + 1):
            least[rows] = np.minimum(least[rows], grid[:, d0[rows] + k].T)
    ok = least * JOB_SHARE >= gpus[:, None]
    loose = ~ok.any(axis=1)
    ok[loose] = least[loose] >= gpus[loose, None]
    none = ~ok.any(axis=1)
    ok[none, np.argmax(least[none], axis=1)] = True
    return [np.flatnonzero(row).tolist() for row in ok]


def preferred_best_fit(vcs: list[VcState], fits: list[list[int]], preferred: list[int]) -> Placer:
    """Placement in the job's preferred VC when it holds the job now, else in the allowed VC with fewest spare GPUs."""

    def place(j: int, t_s: int, among: Sequence[int] | None) -> int:
        pref = preferred[j]
        allowed = fits[j] if among is None else [v for v in among if v in fits[j]]
        if pref in allowed and vcs[pref].fits_now(j, t_s):
            return pref
        best, spare = -1, 1 << 62
        for v in allowed:
            if vcs[v].fits_now(j, t_s):
                free = vcs[v].free_gpus(t_s)
                if free < spare:
                    best, spare = v, free
        return best

    return place


def _schedule_cluster(jobs: pl.DataFrame, vc_gpus: pl.DataFrame, cluster: str) -> pl.DataFrame:
    t0 = cluster_origin(jobs)
    caps = daily_capacities(vc_gpus, cluster, t0)
    names = sorted(caps)
    df = (
        jobs.filter(pl.col("gpu_num") > 0)
        .select(
            "job_id",
            pl.col("user").fill_null(""),
            pl.col("vc").replace_strict(names, list(range(len(names))), default=-1).alias("_pref"),
            "gpu_num",
            *seconds_columns(t0),
            pl.col("queue").fill_null(0).clip(lower_bound=0).alias("_target"),
        )
        .sort(["_sub", "job_id"])
    )
    users = sorted(set(df["user"].to_list()))
    user = df["user"].replace_strict(users, list(range(len(users)))).to_list() if df.height else []
    sub, dur, need = df["_sub"].to_list(), df["_dur"].to_list(), df["gpu_num"].to_list()
    fits = allowed_vcs(caps, names, df["_sub"].to_numpy(), df["_dur"].to_numpy(), df["gpu_num"].to_numpy())
    preferred = df["_pref"].to_list()

    def run(quota: list[float], units: list[int] | None) -> tuple[list[int], list[int], np.ndarray]:
        start = [-1] * len(sub)
        vcs = [VcState(caps[v], need, dur, start) for v in names]
        vc = ClusterQueues(vcs, user, quota, fits, preferred_best_fit(vcs, fits, preferred), units).run(sub)
        wait = np.maximum(np.asarray(start) - np.asarray(sub), 0)
        return start, vc, np.bincount(user, weights=wait, minlength=len(users))

    _, _, base = run([math.inf] * len(users), None)
    target = np.bincount(user, weights=df["_target"].cast(pl.Float64).to_numpy(), minlength=len(users))
    calibration = QuotaCalibration(user, sub, dur, need, waiters_first(target, base))
    quota = calibration.initial()
    for k in range(PASSES):
        whole, units = calibration.limits(quota)
        start, vc, waits = run(whole, units)
        if k + 1 < PASSES:
            quota = calibration.refine(quota, waits, last=k + 2 == PASSES)
    out = schedule_frame(df, cluster, t0, pl.Series("_s", start))
    quotas = [None if math.isinf(quota[u]) else round(float(quota[u]), 3) for u in user]
    return out.with_columns(
        pl.Series("vc", [names[v] if v >= 0 else None for v in vc], dtype=pl.String),
        df["user"],
        pl.Series("user_gpu_quota", quotas, dtype=pl.Float64),
    ).select(list(_OUT_SCHEMA))
