"""Static layout of the synthetic clusters: VCs with daily GPU capacities, user and VC ids, submission calendar."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import polars as pl

from analytics import schema
from analytics.reference import earth_vc_gpus, period_days
from analytics.synth.dist import sample_categorical, split_counts

PERIOD_DAYS = 181  # 2020-04-01 .. 2020-09-28
MONTHS: tuple[int, ...] = (4, 5, 6, 7, 8, 9)
WEEKDAY_FACTOR = np.array([1.0, 1.03, 1.03, 1.01, 0.96, 0.72, 0.68])  # Monday first
# Synthetic capacities: (GPUs after the first days, days at the start with one 8-GPU node fewer, number of VCs).
SYNTH_CAPACITY: dict[str, tuple[int, int, int]] = {
    "Venus": (1024, 30, 16),
    "Saturn": (2080, 0, 28),
    "Uranus": (2120, 15, 24),
}
LARGEST_VC_SHARE = 0.4  # of a synthetic cluster's GPUs: one large VC holds the biggest jobs
FEW_VCS = 3  # jobs that fit at most this many VCs get GPUs reserved for them there
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


def preferred_vcs(rng: np.random.Generator, slots: np.ndarray, user: np.ndarray) -> np.ndarray:
    """Each job's preferred VC index: one of its user's three VC slots, drawn with SLOT_SHARES."""
    return slots[user, sample_categorical(rng, SLOT_SHARES, len(user))]


def _range_min_table(gpus_by_day: np.ndarray) -> list[np.ndarray]:
    """Sparse table: level k holds, per VC and day d, the smallest capacity over days d .. d + 2^k - 1."""
    levels = [gpus_by_day]
    while 2 ** len(levels) <= gpus_by_day.shape[1]:
        prev, half = levels[-1], 2 ** (len(levels) - 1)
        levels.append(np.minimum(prev[:, :-half], prev[:, half:]))
    return levels


def _min_capacity(levels: list[np.ndarray], day0: np.ndarray, day1: np.ndarray) -> np.ndarray:
    """Smallest GPUs of every VC over each job's days day0..day1 (jobs x VCs)."""
    k = np.floor(np.log2(day1 - day0 + 1)).astype(np.int64)
    out = np.empty((len(day0), levels[0].shape[0]), dtype=np.int64)
    for level in np.unique(k):
        rows = np.flatnonzero(k == level)
        table = levels[level]
        out[rows] = np.minimum(table[:, day0[rows]], table[:, day1[rows] - 2**level + 1]).T
    return out


@dataclass(frozen=True)
class LoadTargets:
    """How jobs spread over VCs: a job stays in its preferred VC while the GPUs busy there (if jobs started at
    submit) leave spare x sqrt(GPUs x typical job size) free (square-root staffing: small VCs and big jobs need
    more room), plus, for jobs many VCs can hold, the typical size of the jobs only a few VCs can hold (so those
    need not wait for the VC to drain); else it goes to the fitting VC with most room. A job asks at most
    job_share of a VC's GPUs unless no VC is big enough."""

    spare: float
    job_share: float = 0.5


def balanced_vcs(
    cap: Capacity,
    preferred: np.ndarray,
    gpu_num: np.ndarray,
    submit_s: np.ndarray,
    duration_s: np.ndarray,
    targets: LoadTargets,
) -> np.ndarray:
    """Each job's VC by the rule of LoadTargets (GPU jobs in submit order, room against the VC's fewest GPUs over
    the job's days and the last day); CPU jobs keep their preferred VC."""
    last_day = cap.gpus_by_day.shape[1] - 1
    gpu = np.flatnonzero(gpu_num > 0)
    gpu = gpu[np.lexsort((gpu, submit_s[gpu]))]
    day0 = np.minimum(submit_s[gpu] // 86400, last_day)
    day1 = np.minimum((submit_s[gpu] + duration_s[gpu]) // 86400 + 1, last_day)
    levels = _range_min_table(cap.gpus_by_day)
    min_gpus = np.concatenate(
        [
            _min_capacity(levels, day0[k], day1[k]).astype(np.int32)
            for k in np.array_split(np.arange(len(gpu)), max(1, len(gpu) // 50_000))
        ]
    )
    # the scheduler counts a job as at most the VC's GPUs on the last day: never rely on more than that
    min_gpus = np.minimum(min_gpus, cap.gpus_by_day[:, -1][None, :].astype(np.int32))
    fits = _fitting(min_gpus, gpu_num[gpu], targets.job_share)
    size = _typical_size(fits, gpu_num[gpu], duration_s[gpu], empty=1.0)
    limit = (min_gpus - targets.spare * np.sqrt(min_gpus * size[None, :])).astype(np.float32)
    few = fits.sum(axis=1) <= FEW_VCS
    limit[~few] -= _typical_size(fits[few], gpu_num[gpu[few]], duration_s[gpu[few]], empty=0.0).astype(np.float32)
    vc = preferred.copy()
    vc[gpu] = _dispatch(limit, min_gpus, preferred[gpu], fits, gpu_num[gpu], submit_s[gpu], duration_s[gpu])
    return vc


def _typical_size(fits: np.ndarray, gpu_num: np.ndarray, duration_s: np.ndarray, empty: float) -> np.ndarray:
    """GPU-time-weighted mean GPU count of the jobs each VC can hold (each job spread over the VCs it fits; empty
    where none)."""
    gpu_time = gpu_num * duration_s.astype(float) / np.maximum(fits.sum(axis=1), 1)
    weight = gpu_time @ fits
    size = (gpu_time * gpu_num) @ fits
    return np.where(weight > 0, size / np.maximum(weight, 1.0), empty)


def _dispatch(
    limit: np.ndarray,
    gpus_of: np.ndarray,
    preferred: np.ndarray,
    fits: np.ndarray,
    gpu_num: np.ndarray,
    submit_s: np.ndarray,
    dur_s: np.ndarray,
) -> np.ndarray:
    """VC of each job (given in submit order; limit and gpus_of = jobs x VCs) by the rule of LoadTargets: when the
    preferred VC is full, the VC whose room under its limit is largest relative to its GPUs, or when every VC is
    past its limit, the one with most free GPUs relative to its GPUs."""
    busy = np.zeros(limit.shape[1])
    busy_list = [0.0] * limit.shape[1]
    running: list[tuple[int, int, int]] = []
    out = np.empty(len(preferred), dtype=np.int64)
    # NOTE: plain Python lists inside the per-job loop (numpy scalar access is several times slower)
    pref, gpus, subs, durs = preferred.tolist(), gpu_num.tolist(), submit_s.tolist(), dur_s.tolist()
    for j in range(len(pref)):
        t, g, v = subs[j], gpus[j], pref[j]
        while running and running[0][0] <= t:
            _, w, h = heapq.heappop(running)
            busy_list[w] -= h
        if not (fits[j, v] and busy_list[v] + g <= limit[j, v]):
            busy[:] = busy_list
            room = np.where(fits[j], (limit[j] - busy - g) / np.maximum(gpus_of[j], 1.0), -np.inf)
            if room.max() < 0:
                room = np.where(fits[j], (gpus_of[j] - busy - g) / np.maximum(gpus_of[j], 1.0), -np.inf)
            v = int(np.argmax(room))
        busy_list[v] += g
        out[j] = v
        heapq.heappush(running, (t + durs[j], v, g))
    return out


def _fitting(min_gpus: np.ndarray, gpu_num: np.ndarray, job_share: float) -> np.ndarray:
    """VCs (jobs x VCs) a job may go to: job_share of their GPUs holds it, else they hold it, else the largest."""
    fits = min_gpus * job_share >= gpu_num[:, None]
    loose = ~fits.any(axis=1)
    fits[loose] = min_gpus[loose] >= gpu_num[loose, None]
    none = ~fits.any(axis=1)
    fits[none, np.argmax(min_gpus[none], axis=1)] = True
    return fits
