"""Calibrated synthetic Helios trace (Venus, Earth, Saturn, Uranus; Apr-Sep 2020), the bundled default dataset.

Every distribution is drawn from the published numbers (helios_cluster_summary.csv, helios_reference.json):
job counts, monthly single/multi GPU-job counts, diurnal and weekly submission rhythm, GPU-count mix, duration
CDFs with their means, GPU time per GPU-count bucket and per month, final states (rates, by GPU count, GPU-time
shares, per-user completion), user concentration of GPU, CPU and queueing time, and queueing means with median 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from analytics import schema, store
from analytics.progress import Progress
from analytics.reference import CLUSTERS, reference, summary_rows
from analytics.synth.dist import (
    assign_blocks,
    couple_by_rank,
    fit_tail_gamma,
    sample_categorical,
    sample_sorted_durations,
    shares_from_curve,
    split_counts,
    stratified_noise,
)
from analytics.synth.layout import (
    MONTHS,
    USERS_PER_CLUSTER,
    Capacity,
    LoadTargets,
    balanced_vcs,
    capacity,
    preferred_vcs,
    random_ids,
    submit_offsets_s,
    user_vcs,
)
from analytics.synth.level import level_heavy_jobs
from analytics.synth.states import StateInputs, StateTargets, calibrate, sample_groups

PERIOD_START = datetime(2020, 4, 1)
PERIOD_END = datetime(2020, 9, 28, 23, 59, 59)
GPU_VALUES = np.array([1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64])  # Fig 6 steps; jobs sit on the step values
BIG_LADDER = np.array([72, 80, 96, 128, 192, 256, 512])  # values of the "> 64 GPUs" bucket
CPU_CORES = np.array([1, 2, 4, 8, 16, 32, 64])
CPU_CORE_PROBS = np.array([0.34, 0.2, 0.16, 0.12, 0.1, 0.05, 0.03])
QUEUE_CAP_S = 7 * 86400  # longest synthetic queueing delay
QUEUE_POSITIVE = {"gpu": 0.3, "cpu": 0.12}  # share of jobs that wait at all (keeps the median at 0)
CALIBRATION_JOBS = 60_000
CPU_ONLY_USERS = 0.08  # share of users without GPU jobs (the bottom of the GPU-time ranking)
MIN_SCALE, MAX_SCALE = 1e-4, 10.0  # 336 jobs .. 33.6 M jobs
GENERATE_STAGES = 4  # progress stages of generate()
BUILD_STAGES = GENERATE_STAGES + 1  # ... plus writing
# How GPU jobs spread over each cluster's VCs (see layout.LoadTargets); spare is the per-cluster headroom knob.
LOAD_TARGETS: dict[str, LoadTargets] = {
    "Venus": LoadTargets(spare=0.4),
    "Earth": LoadTargets(spare=0.4),
    "Saturn": LoadTargets(spare=0.4),
    "Uranus": LoadTargets(spare=0.4),
}
FULL_PASSES = 3  # calibration passes on all jobs after the sample
ATTRIBUTION = (
    "Synthetic trace calibrated to the published Helios summary and figures (HeliosArtifact / HeliosData, "
    "Hu et al., 'Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU Datacenters', "
    "SC'21; data CC BY 4.0, artifact MIT) and to cluster Earth's real daily VC capacity file "
    "(Earth_gpu_number.csv; its one-day glitch on 2020-05-09, every GPU booked on one VC, is replaced by the "
    "neighbouring days' values). No job in it is real."
)


# scheduler(gpu_jobs, vc_gpus) -> frame (cluster, job_id, start_time, queue[, vc][, user_gpu_quota]): capacity-
# consistent start times; gpu_jobs carries the preferred VC in `vc` and the sampled target wait in `queue`
Scheduler = Callable[[pl.DataFrame, pl.DataFrame], pl.DataFrame]
VC_NOTE = (
    "each job has a preferred VC: its user's while it has room (busy GPUs as if jobs started at submit, spare GPUs by "
    "square-root staffing and for jobs few VCs can hold), else the one with most room; with scheduled start times a "
    "GPU job runs in its preferred VC when that holds it at its start, else in the allowed VC with the fewest spare "
    "GPUs (see sim.synthetic_queue.calibration); capacities are full size at every scale"
)
QUOTA_NOTE = (
    "per cluster and user, quota x: a job waits in its user's queue while its GPUs (at most 8 counted per job) and "
    "those of the user's running jobs exceed floor(x); the share x - floor(x) of the user's jobs runs outside the "
    "quota; see docs/synthetic-queueing.md"
)
SAMPLED_START_TIMES = "sampled: queueing delay drawn to match the published means (median 0); not capacity-bound"


@dataclass(frozen=True)
class SynthParams:
    """Generator parameters: scale (1 = the full 3,362,981 jobs) and random seed."""

    scale: float = 1.0
    seed: int = 0


@dataclass
class _Cluster:
    """Arrays of one cluster under construction (GPU jobs first, then CPU jobs)."""

    name: str
    cap: Capacity
    users: list[str]
    submit_s: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gpu_num: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    duration_s: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    user: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cpu_cores: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    n_gpu: int = 0


def generate(params: SynthParams, progress: Progress | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Build the synthetic jobs (start times from the sampled queueing delays) and VC-capacity tables for the given
    scale and seed."""
    if not MIN_SCALE <= params.scale <= MAX_SCALE:
        raise ValueError(f"scale must be between {MIN_SCALE:g} and {MAX_SCALE:g}, got {params.scale:g}")
    prog = progress or Progress(GENERATE_STAGES, quiet=True)
    rng = np.random.default_rng(params.seed)
    with prog.stage("VC capacities and users"):
        clusters = _layout(rng)
    with prog.stage("submit times, GPU counts and durations"):
        for c in clusters:
            _gpu_jobs(rng, c, params.scale)
            _cpu_jobs(rng, c, params.scale)
    with prog.stage("final states"):
        states = _states(rng, clusters)
    with prog.stage("queueing, VCs and tables"):
        jobs = schema.conform_jobs(pl.concat([_table(rng, c, s) for c, s in zip(clusters, states, strict=True)]))
        vc_gpus = pl.concat([c.cap.table for c in clusters])
    return jobs, vc_gpus


def apply_schedule(jobs: pl.DataFrame, timed: pl.DataFrame) -> pl.DataFrame:
    """Jobs with the start time, queue and (when given) VC of every job in timed (by cluster and job_id), end = start +
    duration; a job timed without a start never ran (null start, end and queue)."""
    second = pl.duration(seconds=1)
    vc = pl.col("vc").alias("_vc") if "vc" in timed.columns else pl.lit(None, pl.String).alias("_vc")
    moved = timed.select("cluster", "job_id", pl.col("start_time").alias("_start"), pl.col("queue").alias("_queue"), vc)
    out = jobs.join(
        moved.with_columns(pl.lit(True).alias("_timed")),
        on=["cluster", "job_id"],
        how="left",
        maintain_order="left",
    ).with_columns(
        pl.when(pl.col("_timed")).then(pl.col("_start")).otherwise(pl.col("start_time")).alias("start_time"),
        pl.when(pl.col("_timed")).then(pl.col("_queue")).otherwise(pl.col("queue")).alias("queue"),
        pl.coalesce("_vc", "vc").alias("vc"),
    )
    return schema.conform_jobs(out.with_columns((pl.col("start_time") + pl.col("duration") * second).alias("end_time")))


def _layout(rng: np.random.Generator) -> list[_Cluster]:
    taken: set[str] = set()
    out = []
    for name in CLUSTERS:
        cap = capacity(rng, name, taken)
        out.append(_Cluster(name=name, cap=cap, users=random_ids(rng, "u", USERS_PER_CLUSTER[name], 4, taken)))
    return out


def _gpu_jobs(rng: np.random.Generator, c: _Cluster, scale: float) -> None:
    ref, summ = reference(), summary_rows()[c.name]
    monthly = ref["monthly"][c.name]
    n_gpu = round(summ["gpu_job_num"] * scale)
    counts = split_counts(n_gpu, np.array(monthly["single_gpu_jobs"] + monthly["multi_gpu_jobs"], dtype=float))
    single, multi = counts[: len(MONTHS)], counts[len(MONTHS) :]
    hours = ref["diurnal_gpu_job_submissions_per_hour"][c.name]
    submit = np.concatenate([submit_offsets_s(rng, single, hours), submit_offsets_s(rng, multi, hours)])
    gpu_num, bucket = _gpu_counts(rng, c.name, single.sum(), multi.sum())
    duration = _gpu_durations(rng, c, gpu_num, bucket, submit)
    month_days = (_month_edges_s() // 86400).astype(np.int64)
    submit = level_heavy_jobs(submit, duration, gpu_num, c.cap.gpus_by_day.sum(axis=0), month_days)
    shares = shares_from_curve(ref["user_gpu_time_cdf"][c.name], len(c.users))
    gpu_users = np.arange(len(c.users)) < round(len(c.users) * (1 - CPU_ONLY_USERS))
    shares = np.where(gpu_users, shares, 0.0) / shares[gpu_users].sum()
    c.submit_s, c.gpu_num, c.duration_s, c.n_gpu = submit, gpu_num, duration, n_gpu
    c.user = assign_blocks(rng, gpu_num * duration, shares, count_mix=0.003, floor=gpu_users)
    idle = np.flatnonzero(gpu_users & (np.bincount(c.user, minlength=len(c.users)) == 0))
    _hand_light_items(rng, c.user, idle, gpu_num * duration, 5)


def _gpu_counts(rng: np.random.Generator, cluster: str, n_single: int, n_multi: int) -> tuple[np.ndarray, np.ndarray]:
    """GPU counts (singles first) and their Fig 6 bucket index; the >64 bucket mixes two ladder values."""
    ref, summ = reference(), summary_rows()[cluster]
    cdf = np.array(ref["gpu_num_cdf_jobs"][cluster], dtype=float)
    probs = np.clip(np.diff(np.concatenate([[0.0], cdf])), 0.0, None)
    bucket_multi = 1 + sample_categorical(rng, probs[1:], n_multi)
    bucket = np.concatenate([np.zeros(n_single, np.int64), bucket_multi])
    big_mean = (summ["avg_gpu_num"] * cdf[-1] - (probs[:-1] * GPU_VALUES).sum()) / max(probs[-1], 1e-9)
    lo = BIG_LADDER[max(np.searchsorted(BIG_LADDER, big_mean, side="right") - 1, 0)]
    hi = BIG_LADDER[min(np.searchsorted(BIG_LADDER, big_mean, side="right"), len(BIG_LADDER) - 1)]
    p_hi = float(np.clip((big_mean - lo) / (hi - lo), 0.0, 1.0)) if hi > lo else 0.0
    big = np.where(rng.random(len(bucket)) < p_hi, hi, lo)
    values = np.concatenate([GPU_VALUES, [0]])[bucket]
    return np.where(bucket == len(GPU_VALUES), big, values).astype(np.int64), bucket


def _gpu_durations(
    rng: np.random.Generator, c: _Cluster, gpu_num: np.ndarray, bucket: np.ndarray, submit_s: np.ndarray
) -> np.ndarray:
    """GPU-job durations with the published CDF and mean, coupled to GPU count and month by calibrated ranks."""
    ref, summ = reference(), summary_rows()[c.name]
    cdf = ref["gpu_job_duration_cdf"][c.name]
    gamma = fit_tail_gamma(cdf, summ["avg_run_time_gpu"])
    n = len(gpu_num)
    month = 2 * _month_index(submit_s) + (gpu_num > 1)  # (month, single/multi-GPU) group
    noise = stratified_noise(rng, bucket)
    time_cdf = np.array(ref["gpu_num_cdf_gpu_time"][c.name], dtype=float)
    fit = _RankFit(
        bucket_share=np.clip(np.diff(np.concatenate([[0.0], time_cdf])), 0.0, None) / time_cdf[-1],
        month_share=_monthly_gpu_time_share(c),
        gpu_time_per_job=(summ["complete_gpu_time"] + summ["cancel_gpu_time"] + summ["fail_gpu_time"])
        / summ["gpu_job_num"],
    )
    sub = np.sort(rng.choice(n, CALIBRATION_JOBS, replace=False)) if n > CALIBRATION_JOBS else np.arange(n)
    passes = [(sub, 20)] + ([(np.arange(n), FULL_PASSES)] if len(sub) < n else [])
    for idx, k in passes:
        values = sample_sorted_durations(rng, len(idx), cdf, gamma)
        fit.run(values, noise[idx], bucket[idx], month[idx], gpu_num[idx], submit_s[idx], k)
    return couple_by_rank(values, fit.score(noise, bucket, month))


@dataclass
class _RankFit:
    """Score offsets per GPU-count bucket and per (submit month, single/multi-GPU) so rank-coupled durations give
    the published GPU time per bucket (Fig 6b) and per calendar month and job kind (Fig 3 utilisation x capacity)."""

    bucket_share: np.ndarray
    month_share: np.ndarray
    gpu_time_per_job: float
    bucket_offset: np.ndarray | None = None
    month_offset: np.ndarray | None = None

    def score(self, noise: np.ndarray, bucket: np.ndarray, month: np.ndarray) -> np.ndarray:
        """Coupling score of each job."""
        return noise + self.bucket_offset[bucket] + self.month_offset[month]

    def run(
        self,
        values: np.ndarray,
        noise: np.ndarray,
        bucket: np.ndarray,
        month: np.ndarray,
        gpus: np.ndarray,
        submit_s: np.ndarray,
        passes: int,
    ) -> None:
        """Refine the offsets for `passes` rounds on these jobs and sorted durations."""
        if self.bucket_offset is None:
            self.bucket_offset, self.month_offset = np.zeros(len(self.bucket_share)), np.zeros(len(self.month_share))
        target = self.bucket_share * self.gpu_time_per_job * len(values)
        for _ in range(passes):
            dur = couple_by_rank(values, self.score(noise, bucket, month))
            got = np.bincount(bucket, weights=gpus * dur.astype(float), minlength=len(target))
            ok = (target > 0) & (got > 0)
            self.bucket_offset[ok] += 0.7 * np.log(target[ok] / got[ok])
            dur = couple_by_rank(values, self.score(noise, bucket, month))
            multi = gpus > 1
            in_month = np.column_stack(
                [_gpu_time_by_month(submit_s[m], dur[m], gpus[m]) for m in (~multi, multi)]
            ).ravel()
            self.month_offset += 0.7 * np.log(self.month_share / np.maximum(in_month / in_month.sum(), 1e-9))


def _month_index(offset_s: np.ndarray) -> np.ndarray:
    """Index into MONTHS of each offset (s since the period start)."""
    return np.searchsorted(_month_edges_s(), offset_s, side="right") - 1


def _month_edges_s() -> np.ndarray:
    starts = [datetime(2020, m, 1) for m in MONTHS] + [PERIOD_END + timedelta(seconds=1)]
    return np.array([(t - PERIOD_START).total_seconds() for t in starts])


def _gpu_time_by_month(submit_s: np.ndarray, duration_s: np.ndarray, gpus: np.ndarray) -> np.ndarray:
    """GPU time (GPU s) of jobs running from submit for duration, falling inside each calendar month."""
    edges = _month_edges_s()
    end = submit_s + duration_s
    out = np.empty(len(MONTHS))
    for m in range(len(MONTHS)):
        overlap = np.minimum(end, edges[m + 1]) - np.maximum(submit_s, edges[m])
        out[m] = (np.maximum(overlap, 0) * gpus).sum()
    return out


def _monthly_gpu_time_share(c: _Cluster) -> np.ndarray:
    """Share of GPU time per (month, single/multi-GPU) group: Fig 3's utilisation times the month's GPU-days."""
    monthly = reference()["monthly"][c.name]
    util = np.column_stack([monthly["single_gpu_utilization_pct"], monthly["multi_gpu_utilization_pct"]])
    weight = (np.asarray(util, dtype=float) * c.cap.monthly_gpu_days()[:, None]).ravel()
    return weight / weight.sum()


def _cpu_jobs(rng: np.random.Generator, c: _Cluster, scale: float) -> None:
    ref, summ = reference(), summary_rows()[c.name]
    n_cpu = round(summ["job_num"] * scale) - c.n_gpu
    monthly = ref["monthly"][c.name]
    month_w = np.array(monthly["single_gpu_jobs"], dtype=float) + np.array(monthly["multi_gpu_jobs"])
    submit = submit_offsets_s(rng, split_counts(n_cpu, month_w), ref["diurnal_gpu_job_submissions_per_hour"][c.name])
    cdf = ref["cpu_job_duration_cdf"][c.name]
    gamma = fit_tail_gamma(cdf, summ["avg_run_time_cpu"])
    duration = rng.permutation(sample_sorted_durations(rng, n_cpu, cdf, gamma))
    cores = CPU_CORES[sample_categorical(rng, CPU_CORE_PROBS, n_cpu)]
    ranking = rng.permutation(len(c.users))
    shares = shares_from_curve(ref["user_cpu_time_cdf"][c.name], len(c.users))
    user = ranking[assign_blocks(rng, cores * duration, shares, count_mix=0.005, heavy_first=1.0)]
    idle = np.flatnonzero(np.bincount(np.concatenate([c.user, user]), minlength=len(c.users)) == 0)
    _hand_light_items(rng, user, idle, cores * duration, 3)
    c.submit_s = np.concatenate([c.submit_s, submit])
    c.gpu_num = np.concatenate([c.gpu_num, np.zeros(n_cpu, np.int64)])
    c.duration_s = np.concatenate([c.duration_s, duration])
    c.user = np.concatenate([c.user, user])
    c.cpu_cores = cores


def _hand_light_items(
    rng: np.random.Generator, owner: np.ndarray, idle: np.ndarray, weight: np.ndarray, per_owner: int
) -> None:
    """Move per_owner light items (weight <= median, from owners with 20+ items) to each idle owner, in place."""
    counts = np.bincount(owner)
    light = np.flatnonzero((weight <= np.median(weight)) & (counts[owner] >= 20))
    k = min(per_owner, len(light) // max(len(idle), 1))
    if len(idle) == 0 or k == 0:
        return
    picked = rng.choice(light, k * len(idle), replace=False)
    owner[picked] = np.repeat(idle, k)


def _states(rng: np.random.Generator, clusters: list[_Cluster]) -> list[np.ndarray]:
    """State group per job (0 completed, 1 cancelled, 2 failed) for every cluster."""
    user_base = np.cumsum([0] + [len(c.users) for c in clusters])
    gpu = [slice(0, c.n_gpu) for c in clusters]
    inputs = StateInputs(
        cluster=np.concatenate([np.full(c.n_gpu, i) for i, c in enumerate(clusters)]),
        gpu_num=np.concatenate([c.gpu_num[s] for c, s in zip(clusters, gpu, strict=True)]),
        duration_s=np.concatenate([c.duration_s[s] for c, s in zip(clusters, gpu, strict=True)]),
        user=np.concatenate([c.user[s] + b for c, s, b in zip(clusters, gpu, user_base[:-1], strict=True)]),
    )
    completion = _user_completion_targets(rng, inputs.user, user_base)
    model = calibrate(rng, inputs, _state_targets(), completion)
    groups = sample_groups(rng, model, inputs)
    out = []
    for i, c in enumerate(clusters):
        rates = np.array([summary_rows()[c.name][f"{k}_rate_cpu"] for k in ("complete", "cancel", "fail")])
        cpu = sample_categorical(rng, rates, len(c.gpu_num) - c.n_gpu).astype(np.int8)
        out.append(np.concatenate([groups[inputs.cluster == i], cpu]))
    return out


def _state_targets() -> StateTargets:
    ref, summ = reference(), summary_rows()
    keys = ("complete", "cancel", "fail")
    rates = np.array([[summ[c][f"{k}_rate_gpu"] for k in keys] for c in CLUSTERS])
    times = np.array([[summ[c][f"{k}_gpu_time"] for k in keys] for c in CLUSTERS])
    by_gpu = ref["final_state_by_gpu_num"]
    buckets = np.column_stack([by_gpu[s] for s in schema.STATE_GROUPS]) / 100.0
    return StateTargets(
        cluster_rates=rates / rates.sum(axis=1, keepdims=True),
        cluster_gpu_time_shares=times / times.sum(axis=1, keepdims=True),
        bucket_rates=buckets / buckets.sum(axis=1, keepdims=True),
    )


def _user_completion_targets(rng: np.random.Generator, gpu_user: np.ndarray, user_base: np.ndarray) -> np.ndarray:
    """Per-user GPU completion ratio drawn from Fig 9b (CPU-only users fill bin 0), cluster by cluster."""
    jobs = np.bincount(gpu_user, minlength=user_base[-1])
    hist = np.array(reference()["user_completion_ratio_histogram"]["users"], dtype=float)
    cpu_only = int((jobs == 0).sum())
    hist[0] = max(hist[0] - cpu_only, 1.0)
    out = np.zeros(user_base[-1])
    for i, name in enumerate(CLUSTERS):
        users = np.arange(user_base[i], user_base[i + 1])
        users = users[jobs[users] > 0]
        rate = summary_rows()[name]["complete_rate_gpu"]
        out[users] = _cluster_user_ratios(rng, jobs[users], hist, rate)
    return out


def _cluster_user_ratios(rng: np.random.Generator, jobs: np.ndarray, hist: np.ndarray, rate: float) -> np.ndarray:
    """Ratios from the histogram given to users so busier users complete more, job-weighted mean equal to rate."""
    counts = split_counts(len(jobs), hist)
    ratios = np.sort((np.repeat(np.arange(len(hist)), counts) + rng.random(counts.sum())) / len(hist))
    log_jobs, noise = np.log(jobs), rng.standard_normal(len(jobs))
    lo, hi = -10.0, 10.0
    for _ in range(40):
        mid = (lo + hi) / 2
        mean = np.average(couple_by_rank(ratios, mid * log_jobs + noise), weights=jobs)
        lo, hi = (mid, hi) if mean < rate else (lo, mid)
    return couple_by_rank(ratios, lo * log_jobs + noise)


def _queues(rng: np.random.Generator, c: _Cluster) -> np.ndarray:
    """Queueing delay (s): most jobs 0, the rest lognormal; GPU queueing time spread over users as in Fig 9a."""
    summ, n = summary_rows()[c.name], len(c.gpu_num)
    is_gpu = np.arange(n) < c.n_gpu
    p_pos = np.where(is_gpu, QUEUE_POSITIVE["gpu"], QUEUE_POSITIVE["cpu"])
    queue = np.where(rng.random(n) < p_pos, rng.lognormal(4.0, 1.8, n), 0.0)
    queue[is_gpu] *= np.maximum(c.gpu_num[is_gpu], 1) ** 0.4
    queue[is_gpu] = _spread_over_users(rng, c, queue[is_gpu], summ["avg_que_time_gpu"] * c.n_gpu)
    for mask, key in ((is_gpu, "avg_que_time_gpu"), (~is_gpu, "avg_que_time_cpu")):
        queue[mask] = _scale_capped(queue[mask], summ[key] * mask.sum(), QUEUE_CAP_S)
    return np.rint(queue).astype(np.int64)


def _scale_capped(values: np.ndarray, total: float, cap: float) -> np.ndarray:
    """Scale values to the given total while no value exceeds cap (capped values stay at cap)."""
    out = values.astype(float)
    for _ in range(10):
        capped = out >= cap
        free = out[~capped].sum()
        need = total - cap * capped.sum()
        if free <= 0 or need <= 0:
            break
        out[~capped] *= need / free
        out = np.minimum(out, cap)
    return out


def _spread_over_users(rng: np.random.Generator, c: _Cluster, queue: np.ndarray, total_s: float) -> np.ndarray:
    """Scale each user's GPU queueing delays (capped) so users' shares of total_s follow Fig 9a, busy waiters first."""
    user = c.user[: c.n_gpu]
    k = len(c.users)
    waiting_jobs = np.bincount(user, weights=(queue > 0).astype(float), minlength=k)
    rank = np.argsort(-(np.log1p(waiting_jobs) + 0.5 * rng.standard_normal(k)), kind="stable")
    target = np.zeros(k)
    target[rank] = shares_from_curve(reference()["user_gpu_queue_time_cdf"][c.name], k) * total_s
    by_user = np.argsort(user, kind="stable")
    edges = np.searchsorted(user[by_user], np.arange(k + 1))
    out = np.zeros(len(queue))
    for u in np.flatnonzero((target > 0) & (waiting_jobs > 0)):
        jobs = by_user[edges[u] : edges[u + 1]]
        out[jobs] = _scale_capped(queue[jobs], target[u], QUEUE_CAP_S)
    return out


def _table(rng: np.random.Generator, c: _Cluster, state_group: np.ndarray) -> pl.DataFrame:
    """The cluster's jobs as a canonical frame, job ids increasing in submit order."""
    n = len(c.gpu_num)
    queue = _queues(rng, c)
    user_gpu_time = np.bincount(c.user, weights=c.gpu_num * c.duration_s.astype(float), minlength=len(c.users))
    preferred = preferred_vcs(rng, user_vcs(rng, c.cap, user_gpu_time), c.user)
    vc = balanced_vcs(c.cap, preferred, c.gpu_num, c.submit_s, c.duration_s, LOAD_TARGETS[c.name])
    order = np.lexsort((rng.random(n), c.submit_s))
    job_id = np.empty(n, np.int64)
    job_id[order] = np.arange(1, n + 1)
    cpu_num = np.concatenate([c.gpu_num[: c.n_gpu] * rng.choice([2, 4, 6, 8], c.n_gpu), c.cpu_cores])
    submit = (_epoch_s(PERIOD_START) + c.submit_s) * 1_000_000
    return pl.DataFrame(
        {
            "cluster": pl.Series([c.name]).gather(np.zeros(n, np.int64)),
            "job_id": job_id,
            "user": pl.Series(c.users).gather(c.user),
            "vc": pl.Series(c.cap.vcs).gather(vc),
            "gpu_num": c.gpu_num.astype(np.int32),
            "cpu_num": cpu_num.astype(np.float64),
            "node_num": np.maximum(1, -(-c.gpu_num // schema.GPUS_PER_NODE)).astype(np.int32),
            "state": _state_names(rng, state_group, c.duration_s),
            "submit_time": pl.Series(submit).cast(schema.TIMESTAMP),
            "start_time": pl.Series(submit + queue * 1_000_000).cast(schema.TIMESTAMP),
            "end_time": pl.Series(submit + (queue + c.duration_s) * 1_000_000).cast(schema.TIMESTAMP),
            "duration": c.duration_s,
            "queue": queue,
        }
    )


def _state_names(rng: np.random.Generator, group: np.ndarray, duration_s: np.ndarray) -> pl.Series:
    """Raw Slurm states: failed jobs become FAILED, TIMEOUT (long jobs mostly) or NODE_FAIL."""
    u = rng.random(len(group))
    timeout = (group == 2) & (u < np.where(duration_s > 86400, 0.3, 0.02))
    node_fail = (group == 2) & ~timeout & (u > 0.99)
    code = group.astype(np.int64) + 2 * timeout + 3 * node_fail
    names = pl.Series([schema.COMPLETED, schema.CANCELLED, schema.FAILED, "", "TIMEOUT", "NODE_FAIL"])
    return names.gather(code)


def _epoch_s(t: datetime) -> int:
    return int((t - datetime(1970, 1, 1)).total_seconds())


def build_meta(
    params: SynthParams,
    jobs: pl.DataFrame,
    vc_gpus: pl.DataFrame,
    start_times: str | None = None,
    user_gpu_quotas: dict[str, dict[str, float]] | None = None,
) -> dict:
    """meta.json content: source, generator parameters, how start times were derived (with the users' GPU quotas of
    the scheduler), period, row counts, data-quality report, attribution."""
    per_cluster = dict(jobs.group_by("cluster").len().sort("cluster").rows())
    how = {
        "gpu_jobs": start_times or SAMPLED_START_TIMES,
        "cpu_jobs": SAMPLED_START_TIMES + " (CPU jobs use no GPUs, so the VC capacities do not bound them)",
        "capacity_consistent": start_times is not None,
        "vcs": VC_NOTE,
    }
    if user_gpu_quotas is not None:
        how["user_gpu_quotas"] = user_gpu_quotas
        how["user_gpu_quotas_note"] = QUOTA_NOTE
    return {
        "source": "synthetic",
        "format": "helios-synth",
        "generator": {"module": "analytics.synth.build", "scale": params.scale, "seed": params.seed},
        "start_times": how,
        "clusters": [c for c in CLUSTERS if c in per_cluster],
        "period": {"start": f"{PERIOD_START:%Y-%m-%d %H:%M:%S}", "end": f"{PERIOD_END:%Y-%m-%d %H:%M:%S}"},
        "row_counts": {"jobs": jobs.height, "jobs_per_cluster": per_cluster, "vc_gpus": vc_gpus.height},
        "attribution": ATTRIBUTION,
        "quality": {
            "rows_in": jobs.height,
            "rows_out": jobs.height,
            "issues": {},
            "null_counts": jobs.null_count().row(0, named=True),
            "absent_columns": ["job_name"],
        },
    }


def build_dataset(
    params: SynthParams,
    name: str = store.DEFAULT_DATASET,
    progress: Progress | None = None,
    root: Path | None = None,
    scheduler: Scheduler | None = None,
) -> store.Dataset:
    """Generate the synthetic trace and write it atomically as dataset `name` (under root, default data_dir());
    GPU-job start times come from scheduler when given, else from the sampled queueing delays."""
    store.check_name(name)
    prog = progress or Progress(BUILD_STAGES + (scheduler is not None), quiet=True)
    jobs, vc_gpus = generate(params, prog)
    how, quotas = None, None
    if scheduler is not None:
        with prog.stage("GPU-job start times by the scheduler"):
            timed = scheduler(jobs.filter(pl.col("gpu_num") > 0), vc_gpus)
            jobs = apply_schedule(jobs, timed)
        how, quotas = scheduler_description(scheduler), quota_table(timed)
    with prog.stage(f"writing dataset {name}"):
        meta = build_meta(params, jobs, vc_gpus, how, quotas)
        return store.write_dataset(name, jobs, vc_gpus, meta, root=root)


def quota_table(timed: pl.DataFrame) -> dict[str, dict[str, float]] | None:
    """{cluster: {user: GPU quota}} from a scheduler's user_gpu_quota column (None when it has none)."""
    if "user_gpu_quota" not in timed.columns or "user" not in timed.columns:
        return None
    rows = timed.filter(pl.col("user_gpu_quota").is_not_null()).select("cluster", "user", "user_gpu_quota").unique()
    out: dict[str, dict[str, float]] = {}
    for cluster, user, quota in rows.sort("cluster", "user").rows():
        out.setdefault(cluster, {})[user] = float(quota)
    return out


def scheduler_description(scheduler: Scheduler) -> str:
    """meta.json text for start times derived by scheduler: its module, name and the docstring up to its first
    parenthesis or full stop."""
    text = " ".join(line.strip() for line in (scheduler.__doc__ or "scheduler").strip().splitlines())
    return f"{scheduler.__module__}.{scheduler.__qualname__}: {text.split(' (')[0].split('. ')[0].rstrip('.')}"
