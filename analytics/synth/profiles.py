"""Per-VC load of the synthetic trace, drawn from Fig 4 (Earth, May 2020, its 10 largest VCs).

Each VC takes the shape of one of the ten VCs the paper draws: Earth's ten their own, the other VCs (in a random order)
the ten in turn, evenly spread over them. A shape is a per-minute utilisation distribution: the box's whisker ends,
quartiles and median joined linearly, below them the share of idle time that makes its mean the published one. Each
month moves the log-odds of the shapes' values by one shift per cluster (idle and full time stay so) so that the
cluster's GPU time is Fig 3's utilisation of its GPUs; in the figure's month Earth's ten keep their published shapes and
its other VCs share what is left. The envelope is the resulting busy GPUs of every VC and day: for Earth's ten, each
month's days take the shape's quantiles; once the jobs have their VCs, the days are ordered along a smooth random curve
over stretches about as long as the jobs that hold the VC's GPU time that month, plus the share of the VC that jobs
running past their month's end (which cannot move) already hold (order_days), so the VC is busy, idle or full for whole
stretches its jobs fit in, as the figure's boxes say, and a full day asks for all its GPUs (the figure's 100 % is every
GPU busy: the queue keeps it so); every other VC is as busy every day as its shape's mean, at most HEADROOM_PCT below
its GPUs (its box is not published, and the jobs that overflow a full VC would queue).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import numpy as np

from analytics.reference import FIG4, reference

_PROBS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
_GRID = (np.arange(2000) + 0.5) / 2000  # probabilities the means are taken over
MAX_SHIFT = 8.0  # log-odds a month may move the shapes by
REST_MAX_PCT = 95.0  # the smaller VCs of a cluster are at most this busy in a month, its largest keep Fig 4's spread
HEADROOM_PCT = 3.0  # a saturated day of a VC without a published box asks for this much less than its GPUs


@dataclass(frozen=True)
class Profile:
    """One published VC's utilisation shape (%, at the probabilities 0, .25, .5, .75, 1 above the idle share) and
    its job statistics (mean GPUs per job, min-max normalised mean duration and queue, %)."""

    name: str
    points_pct: np.ndarray
    idle_share: float
    gpus_per_job: float
    norm_duration_pct: float
    norm_queue_pct: float

    def quantiles(self, p: np.ndarray, shift: float = 0.0, full_pct: float = 100 - HEADROOM_PCT) -> np.ndarray:
        """Utilisation (%) at probabilities p of the shape with its log-odds moved by shift (idle and full time stay
        so), at most full_pct."""
        above = np.clip((p - self.idle_share) / (1.0 - self.idle_share), 0.0, 1.0)
        values = np.where(p < self.idle_share, 0.0, np.interp(above, _PROBS, self.points_pct)) / 100
        inner = (values > 0) & (values < 1)
        odds = np.log(np.where(inner, values, 0.5) / np.where(inner, 1 - values, 0.5)) + shift
        moved = np.where(inner, 1 / (1 + np.exp(-odds)), values)
        return np.minimum(100 * moved, full_pct)

    def mean_pct(self, shift: float = 0.0) -> float:
        """Mean utilisation (%) of the shape with its log-odds moved by shift."""
        return float(self.quantiles(_GRID, shift).mean())


def _profile(name: str, box: dict) -> Profile:
    """The shape of a published box, with the idle share (bisection) that brings its mean down to the published one."""
    points = np.array(
        [box["whisker_low_pct"], box["q1_pct"], box["median_pct"], box["q3_pct"], box["whisker_high_pct"]]
    )
    lo, hi = 0.0, 0.9
    for _ in range(40):
        mid = (lo + hi) / 2
        trial = Profile(name, points, mid, 0.0, 0.0, 0.0)
        lo, hi = (mid, hi) if trial.mean_pct() > box["mean_pct"] else (lo, mid)
    idle = lo if lo > 1e-6 else 0.0
    return Profile(name, points, idle, box["avg_gpus_per_job"], box["norm_avg_duration_pct"], box["norm_avg_queue_pct"])


def published_profiles() -> dict[str, Profile]:
    """The shapes of the published VCs, largest first (the figure's order)."""
    return {name: _profile(name, box) for name, box in reference()["earth_may_vc_utilization"].items()}


def figure_vcs(cluster: str) -> list[str]:
    """The VCs of a cluster that Fig 4 draws and the generator gives their own shapes: Earth's published ten."""
    return list(reference()["earth_may_vc_utilization"]) if cluster == FIG4.cluster else []


def vc_profiles(
    rng: np.random.Generator, cluster: str, vcs: list[str], top: np.ndarray | None = None, busy_first: bool = False
) -> tuple[list[Profile], np.ndarray]:
    """Each VC's shape and whether it is one of the figure's (named): Earth's published VCs their own; the others,
    in a random order, the published ones in turn (evenly spread over them), so size and load are independent. On
    the other clusters the largest VCs (top >= 0, see largest_vcs) take the ten shapes once each, in that random
    order (the largest VC first, with the shape of the figure's largest) or, with busy_first, the busiest shapes on the
    largest VCs; the rest the ten in turn."""
    shapes = published_profiles()
    ordered = list(shapes.values())
    named = np.isin(vcs, figure_vcs(cluster))
    others = rng.permutation(np.flatnonzero(~named)).tolist()
    out = {i: shapes[v] for i, v in enumerate(vcs) if named[i]}
    if top is not None and cluster != FIG4.cluster and (top >= 0).sum() >= len(ordered):
        # one shape each, largest VC first (ties in the random order); VCs tied for the last places share the shapes
        # left, so whichever the figure takes has one
        last = max(top)
        if busy_first:  # the busiest shapes on the largest VCs: the cluster's level needs the least move
            tops = sorted([i for i in others if top[i] >= 0], key=lambda i: top[i])
            ranked = sorted(ordered, key=lambda p: -p.mean_pct())
        else:  # the largest VC the figure's largest's shape (only it holds the cluster's largest jobs), the others in
            # the random order, the VCs tied for the last place last
            tops = sorted([i for i in others if top[i] >= 0], key=lambda i: (top[i] > 0, top[i] == last))
            ranked = ordered
        n_in = sum(top[i] < last for i in tops)  # the VCs surely among the largest; the tied ones share the rest
        for rank, i in enumerate(tops):
            out[i] = ranked[rank if rank < n_in else n_in + (rank - n_in) % max(len(ranked) - n_in, 1)]
        others = [i for i in others if top[i] < 0]
    for rank, i in enumerate(others):
        out[i] = ordered[round(rank * (len(ordered) - 1) / max(len(others) - 1, 1))]
    return [out[i] for i in range(len(vcs))], named


def largest_vcs(gpus_by_day: np.ndarray, days: list[date]) -> np.ndarray:
    """Per VC, its rank by mean GPUs over the figure's window (its days left out; 0 = the largest, VCs of the same
    size the same rank) if it is one of the FIG4.top_vcs largest, the VCs the figure's spread is held to on every
    cluster, or ties for the last of those places (the figure takes the one with more jobs, unknown here), else -1."""
    window = np.array(
        [FIG4.start.date() <= d < FIG4.end.date() and d not in FIG4.excluded_days for d in days], dtype=bool
    )
    size = gpus_by_day[:, window].mean(axis=1) if window.any() else gpus_by_day.mean(axis=1)
    ranked = np.sort(size)[::-1]
    rank = np.searchsorted(-ranked, -size - 1e-9)  # VCs of the same size share the rank of the first of them
    last = ranked[min(FIG4.top_vcs, len(size)) - 1]
    return np.where(size >= last - 1e-9, rank, -1)


def top_levels(profiles: list[Profile], top: np.ndarray, gpu_days: np.ndarray, level_pct: np.ndarray) -> np.ndarray:
    """Mean utilisation (%) per VC and month (VCs x months; NaN off top) of a cluster's largest VCs (top >= 0): their
    shapes' published means moved by as few points as lets the other VCs make up Fig 3's level (at most REST_MAX_PCT
    busy, at least as their shapes can be), so their spread is the figure's (Fig 4) while the cluster keeps its level;
    when the others' shapes cannot get as busy as that (their idle time stays idle), they all get that level too."""
    top = np.asarray(top) >= 0
    out = np.full(gpu_days.shape, np.nan)
    if not top.any() or top.all():
        return out
    means = np.array([p.mean_pct() for p, t in zip(profiles, top, strict=True) if t])
    rest = [p for p, t in zip(profiles, top, strict=True) if not t]
    for m in range(gpu_days.shape[1]):
        w_top, w_rest = gpu_days[top, m], gpu_days[~top, m]
        if w_top.sum() <= 0 or w_rest.sum() <= 0:
            continue
        rest_min, reach = (
            sum(w * p.mean_pct(shift) for p, w in zip(rest, w_rest, strict=True)) / w_rest.sum()
            for shift in (-MAX_SHIFT, MAX_SHIFT)
        )
        rest_max = REST_MAX_PCT
        total = level_pct[m] * gpu_days[:, m].sum()
        need = _rest_need(means, 0.0, w_top, w_rest, total)
        delta, lo, hi = 0.0, -100.0, 100.0  # the rest's need falls as delta grows: the smallest |delta| that fits
        if not rest_min <= need <= rest_max:
            want = rest_max if need > rest_max else rest_min
            for _ in range(50):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if _rest_need(means, mid, w_top, w_rest, total) > want else (lo, mid)
            delta = (lo + hi) / 2
        out[top, m] = np.clip(means + delta, 0.0, 100 - HEADROOM_PCT)
        need = _rest_need(means, delta, w_top, w_rest, total)
        if need > reach:  # beyond what shifting their shapes reaches (idle time stays idle): all as busy as that
            out[~top, m] = need
    return out


def _rest_need(means: np.ndarray, delta: float, w_top: np.ndarray, w_rest: np.ndarray, total: float) -> float:
    """Mean utilisation (%) the smaller VCs need for the cluster's busy GPU-days total when the largest VCs' means
    move by delta points."""
    top_busy = (np.clip(means + delta, 0.0, 100 - HEADROOM_PCT) * w_top).sum()
    return float((total - top_busy) / w_rest.sum())


def _shift(profiles: list[Profile], weights: np.ndarray, target: float) -> float:
    """The log-odds shift by which the shapes' means, weighted by the VCs' GPU-days, reach target (bisection)."""
    total = weights.sum()
    if total <= 0 or target <= 0:
        return -MAX_SHIFT
    lo, hi = -MAX_SHIFT, MAX_SHIFT
    for _ in range(40):
        mid = (lo + hi) / 2
        got = sum(w * p.mean_pct(mid) for p, w in zip(profiles, weights, strict=True)) / total
        lo, hi = (mid, hi) if got < target else (lo, mid)
    return (lo + hi) / 2


def monthly_shifts(
    cluster: str,
    profiles: list[Profile],
    named: np.ndarray,
    gpu_days: np.ndarray,
    level_pct: np.ndarray,
    months: tuple[int, ...],
    held_pct: np.ndarray | None = None,
) -> np.ndarray:
    """Log-odds shift per VC and month (VCs x months) bringing the cluster to level_pct (Fig 3's utilisation) in each
    month, gpu_days = VCs x months; Earth's named VCs keep their published shapes (shift 0) in the figure's month,
    and VCs with a level in held_pct (VCs x months, NaN = free; see top_levels) keep it, the others making up the
    rest."""
    out = np.zeros(gpu_days.shape)
    for m, month in enumerate(months):
        target = level_pct[m] * gpu_days[:, m].sum()
        held = np.isfinite(held_pct[:, m]) if held_pct is not None else np.zeros(len(profiles), dtype=bool)
        if held.any() and not held.all():
            free = [p for p, h in zip(profiles, held, strict=True) if not h]
            busy = (held_pct[held, m] * gpu_days[held, m]).sum()
            rest = max(target - busy, 0.0) / max(gpu_days[~held, m].sum(), 1e-9)
            out[~held, m] = _shift(free, gpu_days[~held, m], rest)
        elif cluster == FIG4.cluster and month == FIG4.start.month and named.any():
            fixed = sum(p.mean_pct() * w for p, w, n in zip(profiles, gpu_days[:, m], named, strict=True) if n)
            free = [p for p, n in zip(profiles, named, strict=True) if not n]
            rest = max(target - fixed, 0.0) / max(gpu_days[~named, m].sum(), 1e-9)
            out[~named, m] = _shift(free, gpu_days[~named, m], rest)
        else:
            out[:, m] = _shift(profiles, gpu_days[:, m], level_pct[m])
    return out


def order_days(
    rng: np.random.Generator,
    busy: np.ndarray,
    unmovable: np.ndarray,
    gpus_by_day: np.ndarray,
    named: np.ndarray,
    month_of_day: np.ndarray,
    run_days: np.ndarray,
) -> np.ndarray:
    """The envelope (VCs x days) with each named VC's days of each month reordered: the month's levels (% of the
    day's GPUs) in the order of a smooth random curve (see smooth_curve; run_days = VCs x months, in month order) plus
    the share of the VC held by jobs that cannot move (unmovable: mean GPUs per VC and day), so the VC is busy or idle
    for stretches its jobs fit in, idle days fall where no job must run, and the month's box stays."""
    out = busy.copy()
    for v in np.flatnonzero(named).tolist():
        for m, month in enumerate(np.unique(month_of_day).tolist()):
            idx = np.flatnonzero((month_of_day == month) & (gpus_by_day[v] > 0))
            if len(idx) < 2:
                continue
            gpus = gpus_by_day[v, idx]
            curve = smooth_curve(rng, len(idx), int(run_days[v, m]))
            rank = np.argsort(np.argsort(curve + unmovable[v, idx] / gpus, kind="stable"), kind="stable")
            out[v, idx] = np.sort(busy[v, idx] / gpus)[rank] * gpus
    return out


def smooth_curve(rng: np.random.Generator, n_days: int, run_days: int) -> np.ndarray:
    """The ranks (0 to 1) over n_days days of white noise smoothed twice over run_days days: a random order in which
    days within about run_days of each other get near ranks."""
    width = max(1, run_days)
    kernel = np.ones(width) / width
    noise = rng.standard_normal(n_days + 2 * width)
    smooth = np.convolve(np.convolve(noise, kernel, mode="same"), kernel, mode="same")[width : width + n_days]
    return np.argsort(np.argsort(smooth, kind="stable"), kind="stable") / max(n_days - 1, 1)


def envelope(
    rng: np.random.Generator,
    profiles: list[Profile],
    named: np.ndarray,
    shifts: np.ndarray,
    gpus_by_day: np.ndarray,
    days: list[date],
    months: tuple[int, ...],
    fixed: np.ndarray | None = None,
) -> np.ndarray:
    """Busy GPUs each VC should have on each day (VCs x days), times the day's GPUs: for the figure's named VCs, per
    month the shape at evenly spread probabilities in ascending order (order_days orders them once the jobs have
    their VCs), moved by the month's shift, full days at 100 % (their boxes are published); for the others the
    shape's mean every day of the month (only their spread of means is held to the figure, and even days queue
    least)."""
    month_of_day = np.array([d.month for d in days])
    out = np.zeros(gpus_by_day.shape)
    for v, profile in enumerate(profiles):
        for m, month in enumerate(months):
            idx = np.flatnonzero(month_of_day == month)
            if named[v]:
                p = (np.arange(len(idx)) + rng.random(len(idx))) / len(idx)
                level = profile.quantiles(p, shifts[v, m], full_pct=100.0)
            elif fixed is not None and np.isfinite(fixed[v, m]):
                level = np.full(len(idx), fixed[v, m])
            else:
                level = np.full(len(idx), profile.mean_pct(shifts[v, m]))
            out[v, idx] = level / 100 * gpus_by_day[v, idx]
    return out
