"""Static layout of the synthetic clusters: VCs with daily GPU capacities, user and VC ids, submission calendar."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analytics import schema
from analytics.reference import earth_vc_gpus, period_days
from analytics.synth.dist import sample_categorical, split_counts

PERIOD_DAYS = 181  # 2020-04-01 .. 2020-09-28
MONTHS: tuple[int, ...] = (4, 5, 6, 7, 8, 9)
WEEKDAY_FACTOR = np.array([1.0, 1.03, 1.03, 1.01, 0.96, 0.72, 0.68])  # Monday first
# Synthetic capacities: (GPUs after the first days, days at the start with one 8-GPU node fewer, number of VCs). The
# means (1022.7, 2080.7, 2119.3) truncate to the published GPUs and, with Earth's 997.7, sum to Helios' 6,220.
SYNTH_CAPACITY: dict[str, tuple[int, int, int]] = {
    "Venus": (1024, 30, 16),
    "Saturn": (2088, 165, 28),
    "Uranus": (2120, 15, 24),
}
LARGEST_VC_SHARE = 0.4  # of a synthetic cluster's GPUs: one large VC holds the biggest jobs
USERS_PER_CLUSTER: dict[str, int] = {"Venus": 111, "Earth": 140, "Saturn": 262, "Uranus": 200}
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
    gpus = repair_isolated_days(table["gpus"].to_numpy().reshape(len(vcs), PERIOD_DAYS).astype(np.int64))
    table = table.with_columns(pl.Series("gpus", gpus.ravel()).cast(table.schema["gpus"]))
    return Capacity(vcs=vcs, gpus_by_day=gpus, table=table)


def repair_isolated_days(gpus_by_day: np.ndarray) -> np.ndarray:
    """Capacities (VCs x days) where a single day differing from two equal neighbours takes their value: Earth's
    file books every GPU on one VC on 2020-05-09 only, which no job running that day could respect."""
    out = gpus_by_day.copy()
    inner = out[:, 1:-1]
    isolated = (out[:, :-2] == out[:, 2:]) & (inner != out[:, :-2])
    inner[isolated] = out[:, :-2][isolated]
    return out


def _synthetic_table(rng: np.random.Generator, cluster: str, taken: set[str]) -> pl.DataFrame:
    full_gpus, short_days, n_vcs = SYNTH_CAPACITY[cluster]
    nodes = full_gpus // schema.GPUS_PER_NODE
    weights = np.sort(rng.lognormal(0.0, 0.9, n_vcs))[::-1]
    weights[0] = max(weights[0], LARGEST_VC_SHARE * weights[1:].sum() / (1 - LARGEST_VC_SHARE))
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


def range_min_table(gpus_by_day: np.ndarray) -> list[np.ndarray]:
    """Sparse table: level k holds, per VC and day d, the smallest capacity over days d .. d + 2^k - 1."""
    levels = [gpus_by_day]
    while 2 ** len(levels) <= gpus_by_day.shape[1]:
        prev, half = levels[-1], 2 ** (len(levels) - 1)
        levels.append(np.minimum(prev[:, :-half], prev[:, half:]))
    return levels


def min_capacity(levels: list[np.ndarray], day0: np.ndarray, day1: np.ndarray) -> np.ndarray:
    """Smallest GPUs of every VC over each job's days day0..day1 (jobs x VCs, int32)."""
    k = np.floor(np.log2(day1 - day0 + 1)).astype(np.int64)
    out = np.empty((len(day0), levels[0].shape[0]), dtype=np.int32)
    for level in np.unique(k):
        rows = np.flatnonzero(k == level)
        table = levels[level]
        out[rows] = np.minimum(table[:, day0[rows]], table[:, day1[rows] - 2**level + 1]).T
    return out
