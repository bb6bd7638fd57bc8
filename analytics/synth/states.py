"""Final states of synthetic GPU jobs: a multinomial logit calibrated to the published state statistics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analytics.reference import STATE_GPU_BUCKETS

CALIBRATION_JOBS = 200_000
GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0
USER_PASSES = 3  # refinement passes over all jobs after the sample fit
HEAVY_JOBS = 0.02  # share of jobs (largest GPU time) sampled first, in GPU-time order


@dataclass(frozen=True)
class StateTargets:
    """Published state statistics for the calibration: rates are fractions (completed, cancelled, failed)."""

    cluster_rates: np.ndarray  # (n_clusters, 3) GPU-job state rates
    cluster_gpu_time_shares: np.ndarray  # (n_clusters, 3) GPU-time shares by state
    bucket_rates: np.ndarray  # (len(STATE_GPU_BUCKETS), 3) Helios-wide rates by exact GPU count


@dataclass(frozen=True)
class StateInputs:
    """Per GPU job: cluster code, GPU count, duration (s), GPU time (GPU s) and user code."""

    cluster: np.ndarray
    gpu_num: np.ndarray
    duration_s: np.ndarray
    user: np.ndarray


def bucket_codes(gpu_num: np.ndarray) -> np.ndarray:
    """Fig 7b bucket index of each GPU count (len(STATE_GPU_BUCKETS) for counts outside the plotted buckets)."""
    codes = np.full(len(gpu_num), len(STATE_GPU_BUCKETS), dtype=np.int64)
    for i, g in enumerate(STATE_GPU_BUCKETS[:-1]):
        codes[gpu_num == g] = i
    codes[gpu_num >= STATE_GPU_BUCKETS[-1]] = len(STATE_GPU_BUCKETS) - 1
    return codes


class _Logit:
    """Log-odds of cancelled and failed against completed: cluster + bucket + per-cluster duration slope + user."""

    def __init__(self, n_clusters: int, n_users: int):
        self.a = np.zeros((n_clusters, 2))
        self.b = np.zeros((len(STATE_GPU_BUCKETS) + 1, 2))
        self.d = np.zeros((n_clusters, 2))
        self.e = np.zeros(n_users)

    def probs(self, cluster: np.ndarray, bucket: np.ndarray, z: np.ndarray, user: np.ndarray) -> np.ndarray:
        eta = self.a[cluster] + self.b[bucket] + self.d[cluster] * z[:, None] - self.e[user][:, None]
        expo = np.exp(np.clip(eta, -30, 30))
        denom = 1.0 + expo.sum(axis=1)
        return np.column_stack([1.0 / denom, expo[:, 0] / denom, expo[:, 1] / denom])


def _odds_step(target: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Change of the two log-odds (vs completed) that moves rates `got` towards `target` (last axis = 3 states)."""
    t = np.clip(target, 1e-4, None)
    g = np.clip(got, 1e-6, None)
    ratio = np.log(t / g)
    return ratio[..., 1:] - ratio[..., :1]


def _grouped_mean(codes: np.ndarray, values: np.ndarray, k: int, weights: np.ndarray | None = None) -> np.ndarray:
    w = np.ones(len(codes)) if weights is None else weights
    count = np.bincount(codes, weights=w, minlength=k)
    cols = [np.bincount(codes, weights=values[:, s] * w, minlength=k) for s in range(values.shape[1])]
    return np.column_stack(cols) / np.maximum(count, 1e-12)[:, None]


def _calibration_sample(rng: np.random.Generator, gpu_time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices and inverse-probability weights: every heavy job (by GPU time) plus a uniform sample of the rest."""
    n = len(gpu_time)
    if n <= CALIBRATION_JOBS:
        return np.arange(n), np.ones(n)
    heavy = np.argsort(-gpu_time, kind="stable")[: CALIBRATION_JOBS // 4]
    rest = np.setdiff1d(np.arange(n), heavy)
    light = rng.choice(rest, CALIBRATION_JOBS - len(heavy), replace=False)
    idx = np.concatenate([heavy, light])
    return idx, np.concatenate([np.ones(len(heavy)), np.full(len(light), len(rest) / len(light))])


def calibrate(
    rng: np.random.Generator, jobs: StateInputs, targets: StateTargets, user_completion: np.ndarray
) -> _Logit:
    """Fit the logit on a sample of jobs so rates, GPU-time shares and per-user completion ratios match."""
    idx, sw = _calibration_sample(rng, jobs.gpu_num * jobs.duration_s.astype(float))
    cl, g, user = jobs.cluster[idx], jobs.gpu_num[idx], jobs.user[idx]
    dur = jobs.duration_s[idx].astype(float)
    bucket, z = bucket_codes(g), _standard_log(dur)
    weight = sw * g * dur
    n_cl, n_b, n_u = targets.cluster_rates.shape[0], len(STATE_GPU_BUCKETS), len(user_completion)
    model = _Logit(n_cl, n_u)
    model.e[:] = _logit(user_completion)
    has_user = np.bincount(user, minlength=n_u) > 0
    user_cluster = np.zeros(n_u, dtype=np.int64)
    user_cluster[user] = cl
    for _ in range(60):
        p = model.probs(cl, bucket, z, user)
        model.a += _odds_step(targets.cluster_rates, _grouped_mean(cl, p, n_cl, sw))
        p = model.probs(cl, bucket, z, user)
        model.b[:n_b] += _odds_step(targets.bucket_rates, _grouped_mean(bucket, p, n_b + 1, sw)[:n_b])
        p = model.probs(cl, bucket, z, user)
        model.d += 0.5 * _odds_step(targets.cluster_gpu_time_shares, _grouped_mean(cl, p, n_cl, weight))
        p = model.probs(cl, bucket, z, user)
        got_user = _grouped_mean(user, p, n_u, sw)[:, 0]
        step = _logit(user_completion) - _logit(np.clip(got_user, 1e-3, 1 - 1e-3))
        job_mean = np.bincount(cl, weights=sw * step[user], minlength=n_cl) / np.bincount(
            cl, weights=sw, minlength=n_cl
        )
        model.e[has_user] += 0.5 * (step - job_mean[user_cluster])[has_user]
    _refine_users(model, jobs, targets, user_completion)
    return model


def _refine_users(model: _Logit, jobs: StateInputs, targets: StateTargets, user_completion: np.ndarray) -> None:
    """A few passes over all jobs moving each user towards its completion ratio, centred per cluster by job count
    so cluster rates stay put (users missing from the sample are fitted here)."""
    bucket, z = bucket_codes(jobs.gpu_num), _standard_log(jobs.duration_s)
    n_cl, n_u = targets.cluster_rates.shape[0], len(user_completion)
    jobs_per_user = np.bincount(jobs.user, minlength=n_u)
    user_cluster = np.zeros(n_u, dtype=np.int64)
    user_cluster[jobs.user] = jobs.cluster
    for _ in range(USER_PASSES):
        p = model.probs(jobs.cluster, bucket, z, jobs.user)
        got_user = _grouped_mean(jobs.user, p, n_u)[:, 0]
        step = np.where(jobs_per_user > 0, _logit(user_completion) - _logit(np.clip(got_user, 1e-3, 1 - 1e-3)), 0.0)
        centre = np.bincount(user_cluster, weights=step * jobs_per_user, minlength=n_cl)
        centre /= np.maximum(np.bincount(user_cluster, weights=jobs_per_user, minlength=n_cl), 1)
        model.e += 0.7 * np.where(jobs_per_user > 0, step - centre[user_cluster], 0.0)


def sample_groups(rng: np.random.Generator, model: _Logit, jobs: StateInputs) -> np.ndarray:
    """Draw each job's state group (0 completed, 1 cancelled, 2 failed) with one low-discrepancy sequence that
    runs over the heaviest jobs by GPU time, then over each user's jobs, so GPU-time shares by state and per-user
    completion ratios come out close to their expectation."""
    p = model.probs(jobs.cluster, bucket_codes(jobs.gpu_num), _standard_log(jobs.duration_s), jobs.user)
    gpu_time = jobs.gpu_num * jobs.duration_s.astype(float)
    heavy = gpu_time >= np.quantile(gpu_time, 1.0 - HEAVY_JOBS) if len(gpu_time) else gpu_time > 0
    order = np.lexsort((-gpu_time, np.where(heavy, -1, jobs.user), ~heavy))
    u = np.empty(len(p))
    u[order] = np.mod(rng.random() + np.arange(len(p)) * GOLDEN, 1.0)
    return (u >= p[:, 0]).astype(np.int8) + (u >= p[:, 0] + p[:, 1]).astype(np.int8)


def _standard_log(duration_s: np.ndarray) -> np.ndarray:
    # NOTE: a fixed centre/scale (not the sample's) so the calibration sample and the full set agree.
    return (np.log1p(duration_s.astype(float)) - 6.0) / 3.0


def _logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 0.01, 0.99)
    return np.log(q / (1 - q))
