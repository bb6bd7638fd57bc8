"""Per-VC load of the synthetic trace, drawn from Fig 4 (Earth, May 2020, its 10 largest VCs).

Each VC takes the shape of one of the ten VCs the paper draws: Earth's ten their own, the other VCs (in a random
order) the ten in turn, evenly spread over them. A shape is a per-minute utilisation distribution: the box's
whisker ends, quartiles and median joined linearly, below them the share of idle time that makes its mean the
published one. Each month moves the log-odds of the shapes' values by one shift per cluster (idle and full time stay
so) so that the cluster's GPU time is Fig 3's utilisation of its GPUs; in the figure's month Earth's ten keep their
published shapes and its other VCs share what is left. The envelope is the resulting busy GPUs of every VC and day:
for Earth's ten, each month's days take the shape's quantiles in a random order, so the VC is busy, idle or full for
whole days as the figure's boxes say (a full day asks for HEADROOM_PCT less than the VC's GPUs: the jobs that
overflow it would queue); every other VC is as busy every day as its shape's mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import numpy as np

from analytics.reference import FIG4, reference

_PROBS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
_GRID = (np.arange(2000) + 0.5) / 2000  # probabilities the means are taken over
MAX_SHIFT = 8.0  # log-odds a month may move the shapes by
HEADROOM_PCT = 3.0  # a saturated day asks for this much less than the VC's GPUs: jobs that overflow would queue


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

    def quantiles(self, p: np.ndarray, shift: float = 0.0) -> np.ndarray:
        """Utilisation (%) at probabilities p of the shape with its log-odds moved by shift (idle and full time stay
        so), at most 100 - HEADROOM_PCT."""
        above = np.clip((p - self.idle_share) / (1.0 - self.idle_share), 0.0, 1.0)
        values = np.where(p < self.idle_share, 0.0, np.interp(above, _PROBS, self.points_pct)) / 100
        inner = (values > 0) & (values < 1)
        odds = np.log(np.where(inner, values, 0.5) / np.where(inner, 1 - values, 0.5)) + shift
        moved = np.where(inner, 1 / (1 + np.exp(-odds)), values)
        return np.minimum(100 * moved, 100 - HEADROOM_PCT)

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


def vc_profiles(rng: np.random.Generator, cluster: str, vcs: list[str]) -> tuple[list[Profile], np.ndarray]:
    """Each VC's shape and whether it is one of the figure's (named): Earth's published VCs their own; the others,
    in a random order, the published ones in turn (evenly spread over them), so size and load are independent."""
    shapes = published_profiles()
    ordered = list(shapes.values())
    named = np.array([cluster == FIG4.cluster and v in shapes for v in vcs])
    others = rng.permutation(np.flatnonzero(~named)).tolist()
    out = {i: shapes[v] for i, v in enumerate(vcs) if named[i]}
    for rank, i in enumerate(others):
        out[i] = ordered[round(rank * (len(ordered) - 1) / max(len(others) - 1, 1))]
    return [out[i] for i in range(len(vcs))], named


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
) -> np.ndarray:
    """Log-odds shift per VC and month (VCs x months) bringing the cluster to level_pct (Fig 3's utilisation) in each
    month, gpu_days = VCs x months; Earth's named VCs keep their published shapes (shift 0) in the figure's month."""
    out = np.zeros(gpu_days.shape)
    for m, month in enumerate(months):
        target = level_pct[m] * gpu_days[:, m].sum()
        if cluster == FIG4.cluster and month == FIG4.start.month and named.any():
            fixed = sum(p.mean_pct() * w for p, w, n in zip(profiles, gpu_days[:, m], named, strict=True) if n)
            free = [p for p, n in zip(profiles, named, strict=True) if not n]
            rest = max(target - fixed, 0.0) / max(gpu_days[~named, m].sum(), 1e-9)
            out[~named, m] = _shift(free, gpu_days[~named, m], rest)
        else:
            out[:, m] = _shift(profiles, gpu_days[:, m], level_pct[m])
    return out


def envelope(
    rng: np.random.Generator,
    profiles: list[Profile],
    named: np.ndarray,
    shifts: np.ndarray,
    gpus_by_day: np.ndarray,
    days: list[date],
    months: tuple[int, ...],
) -> np.ndarray:
    """Busy GPUs each VC should have on each day (VCs x days), times the day's GPUs: for the figure's named VCs, per
    month the shape at evenly spread probabilities in a random order, moved by the month's shift (their boxes are
    published); for the others the shape's mean every day of the month (only their spread of means is held to the
    figure, and even days queue least)."""
    month_of_day = np.array([d.month for d in days])
    out = np.zeros(gpus_by_day.shape)
    for v, profile in enumerate(profiles):
        for m, month in enumerate(months):
            idx = np.flatnonzero(month_of_day == month)
            if named[v]:
                p = (rng.permutation(len(idx)) + rng.random(len(idx))) / len(idx)
                level = profile.quantiles(p, shifts[v, m])
            else:
                level = np.full(len(idx), profile.mean_pct(shifts[v, m]))
            out[v, idx] = level / 100 * gpus_by_day[v, idx]
    return out
