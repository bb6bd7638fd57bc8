"""Which users hold the large shares of a cluster's GPU queueing time (Fig 9a) so that the mean queue of Fig 4's VCs,
min-max normalised over them, is the published one in the figure's window.

A user's share of the queueing time is spread over the user's jobs in proportion to their drawn (lognormal) waits,
so a VC's mean wait in a window is a sum over its users: share x (the user's drawn wait in that VC and window) /
(all of the user's drawn wait) / (the VC's jobs there). The shares are whole users' and a VC of Fig 4 has three to
six users in May, so the greedy hand-out (analytics.synth.build) leaves some VCs far from their normalised queue; here
pairs of users swap their shares while that brings the normalised means nearer the published ones. Swapping keeps the
multiset of shares, hence Fig 9a; a swap that would push one job past the longest wait (cap_s) is not made.
"""

from __future__ import annotations

import numpy as np

SWEEPS = 20  # passes over the users of the window's VCs
OUTER = 3  # times the window's jobs are taken again (a job's recorded submit is its start minus its wait)
REL_TOL, FLOOR = 0.25, 5.0  # the check's tolerance of a normalised mean queue: the weights of the misfit


def _misfit(mean: np.ndarray, published: np.ndarray) -> np.ndarray:
    """Squared distance, in tolerances, of the min-max normalised means (rows: trials) from the published ones."""
    low, spread = mean.min(axis=-1, keepdims=True), np.ptp(mean, axis=-1, keepdims=True)
    norm = 100 * (mean - low) / np.where(spread > 0, spread, 1.0)
    tol = np.maximum(REL_TOL * published, FLOOR)
    return np.where(spread[..., 0] > 0, (((norm - published) / tol) ** 2).sum(axis=-1), np.inf)


def fit_window_shares(
    target: np.ndarray,
    user: np.ndarray,
    raw_s: np.ndarray,
    vc: np.ndarray,
    submit_s: np.ndarray,
    window: tuple[int, int, tuple[int, ...]],
    named: dict[int, float],
    cap_s: float,
) -> np.ndarray:
    """Users' queueing-time totals (target, per user) with pairs of shares swapped so the mean wait of the named VCs
    (index -> published normalised mean queue %) over the GPU jobs submitted in window (first and end second,
    excluded days) is nearest the published one. user, raw_s (the drawn waits), vc, submit_s: per GPU job."""
    out = np.asarray(target, dtype=float).copy()
    k = len(out)
    vcs = np.array(sorted(named))
    published = np.array([named[v] for v in vcs])
    if len(vcs) < 2 or k < 2:
        return out
    raw_by_user = np.bincount(user, weights=raw_s, minlength=k)
    top_raw = np.zeros(k)
    np.maximum.at(top_raw, user, raw_s)
    reach = np.where(raw_by_user > 0, top_raw / np.maximum(raw_by_user, 1e-12), 1e30)  # longest wait per unit share
    holds = raw_by_user > 0
    slot = np.full(int(vc.max()) + 1, -1)
    slot[vcs] = np.arange(len(vcs))
    start, end, excluded = window
    for _ in range(OUTER):
        wait = out[user] * raw_s / np.maximum(raw_by_user[user], 1e-12)
        recorded = submit_s - wait
        inside = (recorded >= start) & (recorded < end) & (slot[vc] >= 0)
        for day in excluded:
            inside &= (recorded < day) | (recorded >= day + 86_400)
        jobs = np.bincount(slot[vc[inside]], minlength=len(vcs)).astype(float)
        if (jobs == 0).any():
            return out
        per = np.zeros((k, len(vcs)))
        np.add.at(per, (user[inside], slot[vc[inside]]), raw_s[inside])
        m = per / np.maximum(raw_by_user, 1e-12)[:, None] / jobs[None, :]  # mean wait of each VC per unit share
        movers = np.flatnonzero(m.sum(axis=1) > 0)
        mean = out @ m
        best = float(_misfit(mean, published))
        for _ in range(SWEEPS):
            improved = False
            for a in movers.tolist():
                delta = (out[None, :] - out[a]).T  # b's share minus a's, per candidate b
                trial = mean[None, :] + delta * m[a][None, :] - delta * m
                ok = holds & (out * reach[a] <= cap_s) & (out[a] * reach <= cap_s) & (out != out[a])
                ok[a] = False
                if not ok.any():
                    continue
                cand = np.flatnonzero(ok)
                scores = _misfit(trial[cand], published)
                i = int(np.argmin(scores))
                if scores[i] < best - 1e-9:
                    b = int(cand[i])
                    out[a], out[b] = out[b], out[a]
                    mean, best, improved = trial[b], float(scores[i]), True
            if not improved:
                break
    return out
