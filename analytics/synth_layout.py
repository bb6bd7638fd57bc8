"""Static layout of the synthetic clusters: VCs with daily GPU capacities, user and VC ids, submission calendar."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analytics import schema
from analytics.synth_dist import sample_categorical, split_counts
from analytics.synth_reference import earth_vc_gpus, period_days

PERIOD_DAYS = 181  # 2020-04-01 .. 2020-09-28
MONTHS: tuple[int, ...] = (4, 5, 6, 7, 8, 9)
WEEKDAY_FACTOR = np.array([1.0, 1.03, 1.03, 1.01, 0.96, 0.72, 0.68])  # Monday first
# Synthetic capacities: (GPUs after the first days, days at the start with one 8-GPU node fewer, number of VCs).
SYNTH_CAPACITY: dict[str, tuple[int, int, int]] = {
    "Venus": (1024, 30, 16),
    "Saturn": (2080, 0, 28),
    "Uranus": (2120, 15, 24),
}
USERS_PER_CLUSTER: dict[str, int] = {"Venus": 111, "Earth": 140, "Saturn": 262, "Uranus": 200}
SLOT_SHARES = np.array([0.8, 0.15, 0.05])  # share of a user's jobs in its first, second and third VC
_ALPHABET = np.array(list("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))


@dataclass(frozen=True)
class Capacity:
    """One cluster's VCs: names, daily GPUs (n_vcs x PERIOD_DAYS) and the long table."""

    vcs: list[str]
    gpus_by_day: np.ndarray
    table: pl.DataFrame

    def monthly_gpu_days(self) -> np.ndarray:
        """Sum over days of the cluster's total GPUs, per month of MONTHS."""
        month_of_day = np.array([d.month for d in period_days()])
        totals = self.gpus_by_day.sum(axis=0)
        return np.array([totals[month_of_day == m].sum() for m in MONTHS], dtype=float)


def random_ids(rng: np.random.Generator, prefix: str, n: int, length: int, taken: set[str]) -> list[str]:
    """n distinct random ids `prefix + length alphanumerics`, avoiding those in taken (which is updated)."""
    out: list[str] = []
    while len(out) < n:
        chars = _ALPHABET[rng.integers(0, len(_ALPHABET), size=(2 * n, length))]
        for row in chars:
            name = prefix + "".join(row)
            if name not in taken:
                taken.add(name)
                out.append(name)
                if len(out) == n:
                    break
    return out


def capacity(rng: np.random.Generator, cluster: str, taken: set[str]) -> Capacity:
    """The cluster's VC capacities: Earth's real file, or a synthetic VC set for the other clusters."""
    table = earth_vc_gpus() if cluster == "Earth" else _synthetic_table(rng, cluster, taken)
    vcs = sorted(set(table["vc"].to_list()))
    taken.update(vcs)
    table = table.sort(["vc", "date"])
    gpus = table["gpus"].to_numpy().reshape(len(vcs), PERIOD_DAYS)
    return Capacity(vcs=vcs, gpus_by_day=gpus.astype(np.int64), table=table)


def _synthetic_table(rng: np.random.Generator, cluster: str, taken: set[str]) -> pl.DataFrame:
    full_gpus, short_days, n_vcs = SYNTH_CAPACITY[cluster]
    nodes = full_gpus // schema.GPUS_PER_NODE
    weights = np.sort(rng.lognormal(0.0, 0.9, n_vcs))[::-1]
    weights[0] = max(weights[0], 0.3 * weights.sum())  # one large VC holds the biggest jobs
    vc_nodes = split_counts(nodes - n_vcs, weights) + 1
    gpus = np.repeat(vc_nodes[:, None] * schema.GPUS_PER_NODE, PERIOD_DAYS, axis=1)
    gpus[0, :short_days] -= schema.GPUS_PER_NODE
    names = random_ids(rng, "vc", n_vcs, 3, taken)
    days = period_days()
    return schema.conform_vc_gpus(
        pl.DataFrame(
            {
                "cluster": [cluster] * (n_vcs * PERIOD_DAYS),
                "vc": np.repeat(names, PERIOD_DAYS),
                "date": days * n_vcs,
                "gpus": gpus.ravel(),
            }
        )
    )


def submit_offsets_s(rng: np.random.Generator, month_counts: np.ndarray, hour_weights: np.ndarray) -> np.ndarray:
    """Submit times (s since 2020-04-01 00:00) for month_counts[i] jobs in MONTHS[i], weekly and diurnal rhythm."""
    days = period_days()
    out = []
    for month, n in zip(MONTHS, month_counts, strict=True):
        idx = np.array([i for i, d in enumerate(days) if d.month == month])
        weights = WEEKDAY_FACTOR[[days[i].weekday() for i in idx]]
        day = idx[sample_categorical(rng, weights, int(n))]
        hour = sample_categorical(rng, np.asarray(hour_weights, dtype=float), int(n))
        out.append(day * 86400 + hour * 3600 + rng.integers(0, 3600, int(n)))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def user_vcs(rng: np.random.Generator, cap: Capacity, user_gpu_time: np.ndarray) -> np.ndarray:
    """Each user's three VC slots (n_users x 3 VC indices; 1-3 distinct VCs), filling VCs in proportion to their
    GPUs: users in decreasing GPU time go to the VCs furthest below their share of the demand."""
    n_users = len(user_gpu_time)
    capacity = cap.gpus_by_day.mean(axis=1).astype(float)
    want = capacity / capacity.sum()
    got = np.zeros(len(want))
    share = user_gpu_time / max(float(user_gpu_time.sum()), 1.0)
    n_vcs = 1 + sample_categorical(rng, np.array([0.55, 0.3, 0.15]), n_users)
    by_capacity = sample_categorical(rng, capacity, n_users)
    slots = np.zeros((n_users, len(SLOT_SHARES)), dtype=np.int64)
    for u in np.argsort(-share, kind="stable"):
        chosen: list[int] = []
        for s in range(len(SLOT_SHARES)):
            if s >= n_vcs[u]:
                vc = chosen[-1]
            elif share[u] == 0:
                vc = int(by_capacity[u]) if s == 0 else int(sample_categorical(rng, capacity, 1)[0])
            else:
                deficit = want - got
                deficit[chosen] = -np.inf
                vc = int(np.argmax(deficit))
            chosen.append(vc)
            slots[u, s] = vc
            got[vc] += share[u] * SLOT_SHARES[s]
    return slots


def job_vcs(
    rng: np.random.Generator, cap: Capacity, slots: np.ndarray, user: np.ndarray, gpu_num: np.ndarray, day: np.ndarray
) -> np.ndarray:
    """Each job's VC index: one of its user's VCs, moved to the day's largest VC when it has too few GPUs."""
    slot = sample_categorical(rng, SLOT_SHARES, len(user))
    vc = slots[user, slot]
    largest = np.argmax(cap.gpus_by_day, axis=0)
    too_small = gpu_num > cap.gpus_by_day[vc, day]
    vc[too_small] = largest[day[too_small]]
    return vc
