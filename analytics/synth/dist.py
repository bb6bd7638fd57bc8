"""Vectorised sampling tools of the synthetic trace: CDF sampling, rank coupling, block assignment, calibration."""

from __future__ import annotations

import numpy as np

ZERO_SHARE_OF_FIRST_BIN = 0.3  # share of the "<= 1 s" mass that lasts 0 s (the rest lasts exactly 1 s)
TAIL_FROM_BIN = 10  # bins at or above 2^10 s get the tail shape exponent


def _bin_probs(cdf_pct: list[float]) -> np.ndarray:
    """Probabilities of [0,1], (1,2], (2,4], ... from CDF points at 2^0..2^K (monotone, ending at 1)."""
    cdf = np.maximum.accumulate(np.clip(np.asarray(cdf_pct, dtype=float), 0.0, 100.0))
    cdf = cdf / cdf[-1]
    return np.diff(np.concatenate([[0.0], cdf]))


def _quantile_values(u: np.ndarray, probs: np.ndarray, tail_gamma: float) -> np.ndarray:
    """Durations (s) for uniforms u under log-uniform-within-bin shape, tail bins shaped by tail_gamma."""
    edges = np.concatenate([[0.0], np.cumsum(probs)])
    k = np.clip(np.searchsorted(edges, u, side="right") - 1, 0, len(probs) - 1)
    width = np.where(probs[k] > 0, probs[k], 1.0)
    v = np.clip((u - edges[k]) / width, 0.0, 1.0)
    gamma = np.where(k >= TAIL_FROM_BIN, tail_gamma, 1.0)
    log2_s = (k - 1) + v**gamma
    out = np.ceil(np.exp2(log2_s) - 1e-9)
    first = k == 0
    out[first] = np.where(v[first] < ZERO_SHARE_OF_FIRST_BIN, 0.0, 1.0)
    return out


def _mean_s(probs: np.ndarray, tail_gamma: float) -> float:
    """Mean duration (s) of the CDF-interpolated distribution (ceil to whole seconds adds about 0.5 s per bin)."""
    v = (np.arange(4000) + 0.5) / 4000
    k = np.arange(1, len(probs))
    within = np.where(k >= TAIL_FROM_BIN, np.mean(np.exp2(v**tail_gamma)), np.mean(np.exp2(v)))
    return float((probs[1:] * (np.exp2(k - 1) * within + 0.5)).sum() + probs[0] * (1 - ZERO_SHARE_OF_FIRST_BIN))


def fit_tail_gamma(cdf_pct: list[float], target_mean_s: float) -> float:
    """Tail shape exponent that makes the CDF-interpolated duration distribution have the target mean."""
    probs = _bin_probs(cdf_pct)
    lo, hi = 0.05, 20.0  # larger gamma -> smaller mean
    for _ in range(60):
        mid = np.sqrt(lo * hi)
        if _mean_s(probs, mid) > target_mean_s:
            lo = mid
        else:
            hi = mid
    return float(np.sqrt(lo * hi))


def sample_sorted_durations(rng: np.random.Generator, n: int, cdf_pct: list[float], tail_gamma: float) -> np.ndarray:
    """n durations (s) drawn from the published CDF points, returned sorted ascending."""
    u = np.sort(rng.random(n))
    return _quantile_values(u, _bin_probs(cdf_pct), tail_gamma).astype(np.int64)


def couple_by_rank(sorted_values: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Give the i-th smallest value to the job with the i-th smallest score (keeps the marginal exactly)."""
    out = np.empty_like(sorted_values)
    out[np.argsort(score, kind="stable")] = sorted_values
    return out


def stratified_noise(rng: np.random.Generator, codes: np.ndarray, scale: float = 0.6) -> np.ndarray:
    """Logistic noise whose values are evenly spread quantiles within each group (less tail luck than iid)."""
    n = len(codes)
    order = np.lexsort((rng.random(n), codes))
    sizes = np.bincount(codes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.arange(n) - np.repeat(starts, sizes)
    p = (rank + rng.random(n)) / np.repeat(sizes, sizes)
    out = np.empty(n)
    out[order] = scale * np.log(p / (1.0 - p))
    return out


def shares_from_curve(curve_pct: list[float], n_users: int, rounds: int = 40) -> np.ndarray:
    """Per-user shares (descending, summing to 1) whose cumulative curve, read at each whole percent of users by
    linear interpolation over linspace(0, 100, n_users) (as the study's figures and our fidelity checks read it),
    follows curve_pct: the curve sampled at the users, then corrected where the chords fall below it (the best of
    `rounds` damped corrections at the whole percents from 1 on)."""
    x = np.linspace(0.0, 100.0, n_users)
    points = np.arange(len(curve_pct), dtype=float)
    want = np.maximum.accumulate(np.asarray(curve_pct, dtype=float))
    cum = np.interp(x, points, want)
    pos = points * (n_users - 1) / 100.0
    lo = np.minimum(np.floor(pos).astype(np.int64), n_users - 1)
    hi = np.minimum(lo + 1, n_users - 1)
    frac = pos - lo
    best, best_err = _descending_cumulative(cum), np.inf
    for _ in range(rounds):
        cum = _descending_cumulative(cum)
        err = want - np.interp(points, x, cum)
        worst = np.abs(err[1:]).max()
        if worst < best_err:
            best, best_err = cum, worst
        step = np.bincount(lo, err * (1 - frac), n_users) + np.bincount(hi, err * frac, n_users)
        weight = np.bincount(lo, 1 - frac, n_users) + np.bincount(hi, frac, n_users)
        cum = cum + 0.5 * np.where(weight > 0, step / np.maximum(weight, 1e-12), 0.0)
    shares = np.diff(np.concatenate([[0.0], best]))
    return shares / shares.sum()


def _descending_cumulative(cum: np.ndarray) -> np.ndarray:
    """The cumulative curve of the non-negative steps of cum sorted in descending order, ending at least at 100."""
    capped = np.minimum(np.maximum.accumulate(cum), 100.0)
    steps = np.sort(np.clip(np.diff(np.concatenate([[0.0], capped])), 0.0, None))[::-1]
    out = np.cumsum(steps)
    out[-1] = max(out[-1], 100.0)
    return out


def assign_blocks(
    rng: np.random.Generator,
    weights: np.ndarray,
    shares: np.ndarray,
    count_mix: float = 0.0,
    floor: np.ndarray | None = None,
    heavy_first: float | None = None,
    group: np.ndarray | None = None,
) -> np.ndarray:
    """Assign items to owners (index into shares) so each owner's weight total is close to its share, with a
    fraction count_mix of the items spread by count over owners in proportion to floor (default: equally), items
    taken in random order, or group by group (in increasing group, random within; owners then keep to few groups),
    or, with heavy_first = noise scale, roughly heaviest first (biggest owners first)."""
    n = len(weights)
    if group is not None:
        perm = np.lexsort((rng.random(n), group))
    elif heavy_first is None:
        perm = rng.permutation(n)
    else:
        perm = np.argsort(-(np.log1p(weights.astype(float)) + heavy_first * rng.standard_normal(n)), kind="stable")
    w = weights[perm].astype(float)
    total = w.sum()
    measure = (1.0 - count_mix) * (w / total if total > 0 else np.full(n, 1.0 / n)) + count_mix / n
    mid = np.cumsum(measure) - measure / 2
    base = np.ones(len(shares)) if floor is None else np.asarray(floor, dtype=float)
    owner_measure = (1.0 - count_mix) * shares + count_mix * base / base.sum()
    bounds = np.cumsum(owner_measure)
    owner = np.minimum(np.searchsorted(bounds, mid, side="right"), len(shares) - 1)
    out = np.empty(n, dtype=np.int64)
    out[perm] = owner
    return out


def sample_categorical(rng: np.random.Generator, probs: np.ndarray, n: int) -> np.ndarray:
    """n draws of category indices with the given probabilities."""
    cum = np.cumsum(probs / probs.sum())
    return np.minimum(np.searchsorted(cum, rng.random(n), side="right"), len(probs) - 1)


def split_counts(total: int, weights: np.ndarray) -> np.ndarray:
    """Integer counts summing to total, proportional to weights (largest remainder)."""
    raw = total * np.asarray(weights, dtype=float) / np.sum(weights)
    counts = np.floor(raw).astype(np.int64)
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[: total - counts.sum()]] += 1
    return counts
