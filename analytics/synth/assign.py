"""Which VC each synthetic GPU job runs in: a multinomial logit over the VCs that hold the job, calibrated so that
every VC gets its share of each month's GPU time (the envelope of analytics.synth.profiles) and Earth's ten VCs of
Fig 4 their published mean GPUs per job and (min-max normalised) mean durations.

A job may go to the VCs where it needs at most JOB_SHARE of the fewest GPUs over its month and run (else those that
hold it, else the largest). Score of a job in VC v: a[v, month] + b[v] * log2 GPUs + c[v] * log duration; the month
terms set the GPU time, the slopes (fitted for the named VCs only, on the jobs of the month Fig 4 shows) their job
mix. Only the normalised mean durations
are published, so at each round the named VCs' mean durations are held to a line through the published values (an
affine map of them: min-max normalisation cannot tell it from them) placed where the current means put it. The fit
runs on the jobs grouped into cells (month, GPUs, power-of-two duration), every job counted. The heaviest jobs are
then drawn against the GPU time their VCs still lack; given each job's GPU time per calendar month (Earth, Saturn and
Uranus: analytics.synth.build.CALENDAR_CLUSTERS), in the calendar months they run in and relative to what the jobs
left are expected to bring (_draw_heavy_in_months). The named VCs' drawn job mix is then held to the fitted one
by moving short jobs of the month Fig 4 shows between them and the other VCs (hold_named_mix).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

JOB_SHARE = 0.5
ROUNDS = 300
FINAL_ROUNDS = 30  # month terms alone at the end: the GPU time per VC and month is the first aim
HEAVY_SHARE = 0.5  # the largest jobs holding this share of the GPU time are drawn against their VCs' budget
# ... when drawn against the lack in the months they run in: the jobs level.py levels (drawn independently, the
# lightest half of the GPU time moved a small VC's May by up to 13 % on Saturn and Uranus, the lightest fifth by 3 %)
CALENDAR_HEAVY_SHARE = 0.8
SLOPE_STEP = 0.3
MAX_SLOPE = 6.0
_CHUNK = 100_000


@dataclass(frozen=True)
class Targets:
    """What the assignment aims at: GPU-time share of each VC in each month (VCs x months, columns sum to 1), and
    for the named VCs (True in `named`) their mean GPUs per job and normalised mean duration (%) among the jobs
    submitted in month `mix_month` (an index)."""

    gpu_time_share: np.ndarray
    named: np.ndarray
    gpus_per_job: np.ndarray
    norm_duration_pct: np.ndarray
    mix_month: int


def fitting_vcs(min_gpus: np.ndarray, gpu_num: np.ndarray) -> np.ndarray:
    """VCs (jobs x VCs) a job may go to, from each VC's fewest GPUs over the job's month and run (see the module)."""
    fits = min_gpus * JOB_SHARE >= gpu_num[:, None]
    loose = ~fits.any(axis=1)
    fits[loose] = min_gpus[loose] >= gpu_num[loose, None]
    none = ~fits.any(axis=1)
    fits[none, np.argmax(min_gpus[none], axis=1)] = True
    return fits


@dataclass(frozen=True)
class _Cells:
    """The jobs grouped by (month, GPUs, log2 duration, VCs that hold them): per cell its month, log2 GPUs, mean log
    duration, jobs, GPUs, seconds and GPU-seconds, and the VCs that hold its jobs (cells x VCs)."""

    month: np.ndarray
    log_g: np.ndarray
    log_d: np.ndarray
    jobs: np.ndarray
    gpus: np.ndarray
    seconds: np.ndarray
    work: np.ndarray
    fits: np.ndarray


def _cells(month: np.ndarray, gpus: np.ndarray, dur: np.ndarray, fits: np.ndarray) -> tuple[_Cells, np.ndarray]:
    """The cells of the jobs and each job's cell (jobs of a cell may go to the same VCs)."""
    d = np.maximum(dur, 1).astype(float)
    mask = fits.astype(np.int64) @ (np.int64(1) << np.arange(fits.shape[1], dtype=np.int64))
    key = np.stack([month, gpus, np.floor(np.log2(d)).astype(np.int64), mask], axis=1)
    _, cell, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    cell = cell.ravel()
    n = len(counts)

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(cell, weights=values, minlength=n)

    first = np.unique(cell, return_index=True)[1]
    cells = _Cells(
        month=month[first],
        log_g=np.log2(gpus[first].astype(float)),
        log_d=total(np.log(d)) / counts,
        jobs=counts.astype(float),
        gpus=total(gpus.astype(float)),
        seconds=total(d),
        work=total(gpus * d),
        fits=fits[first],
    )
    return cells, cell


class _Logit:
    """Scores of the VCs and their probabilities over the VCs allowed."""

    def __init__(self, n_vcs: int, n_months: int):
        self.a = np.zeros((n_vcs, n_months))
        self.b = np.zeros(n_vcs)
        self.c = np.zeros(n_vcs)

    def probs(self, month: np.ndarray, log_g: np.ndarray, log_d: np.ndarray, fits: np.ndarray) -> np.ndarray:
        """Probability of each VC (rows: jobs or cells) among those fits allows."""
        score = self.a[:, month].T + log_g[:, None] * self.b[None, :] + log_d[:, None] * self.c[None, :]
        score = np.where(fits, score, -np.inf)
        score -= score.max(axis=1, keepdims=True)
        p = np.exp(score)
        return p / p.sum(axis=1, keepdims=True)


def _line_targets(norm_pct: np.ndarray, mean_s: np.ndarray, has: np.ndarray) -> np.ndarray:
    """The mean durations the named VCs should have for their min-max normalisation to be the published one: on the
    line from the shortest VC's current mean (at 0 %) to the longest's, placed where the VCs in between put it (the
    median of what each of them implies), at least twice the shortest."""
    low = mean_s[np.argmin(norm_pct)]
    middle = has & (norm_pct > norm_pct.min()) & (norm_pct < norm_pct.max())
    implied = low + (mean_s[middle] - low) * 100 / np.maximum(norm_pct[middle], 1e-9)
    high = max(float(np.median(implied)) if middle.any() else 0.0, 2 * low)
    return low + norm_pct / 100 * (high - low)


def _fit(targets: Targets, cells: _Cells) -> _Logit:
    """Calibrate the logit on the cells: GPU time per VC and month, and the named VCs' job mix."""
    n_vcs, n_months = targets.gpu_time_share.shape
    model = _Logit(n_vcs, n_months)
    model.a[targets.gpu_time_share == 0] = -50.0
    month_work = np.bincount(cells.month, weights=cells.work, minlength=n_months)
    named = targets.named
    in_mix = cells.month == targets.mix_month
    for k in range(ROUNDS + FINAL_ROUNDS):
        p = model.probs(cells.month, cells.log_g, cells.log_d, cells.fits)
        got = np.stack(
            [np.bincount(cells.month, weights=p[:, v] * cells.work, minlength=n_months) for v in range(n_vcs)]
        )
        share = got / np.maximum(month_work, 1e-9)
        ok = (targets.gpu_time_share > 0) & (share > 0)
        model.a[ok] += np.log(targets.gpu_time_share[ok] / share[ok])
        if not named.any() or k >= ROUNDS:
            continue
        p_mix = p[in_mix][:, named].T
        jobs = p_mix @ cells.jobs[in_mix]
        has = jobs > 1e-6
        mean_g = (p_mix @ cells.gpus[in_mix]) / np.maximum(jobs, 1e-9)
        mean_d = (p_mix @ cells.seconds[in_mix]) / np.maximum(jobs, 1e-9)
        want_d = _line_targets(targets.norm_duration_pct[named], mean_d, has)
        step_b = np.log(targets.gpus_per_job[named] / np.maximum(mean_g, 1e-9))
        step_d = np.log(want_d / np.maximum(mean_d, 1e-9))
        model.b[named] = np.clip(model.b[named] + np.where(has, SLOPE_STEP * step_b, 0.0), -MAX_SLOPE, MAX_SLOPE)
        model.c[named] = np.clip(model.c[named] + np.where(has, SLOPE_STEP * step_d, 0.0), -MAX_SLOPE, MAX_SLOPE)
    return model


def _draw_heavy(
    rng: np.random.Generator,
    heavy: np.ndarray,
    p_job: np.ndarray,
    work: np.ndarray,
    month: np.ndarray,
    budget: np.ndarray,
) -> np.ndarray:
    """VCs of the heavy jobs (largest first): each drawn in proportion to its probability times the GPU time its VC
    still lacks that month (budget, VCs x months, updated), so a few huge jobs cannot overfill a VC."""
    out = np.empty(len(heavy), dtype=np.int64)
    for i, j in enumerate(heavy.tolist()):
        m = month[j]
        weight = p_job[i] * np.maximum(budget[:, m], 0.0)
        if weight.sum() <= 0:
            weight = p_job[i]
        v = int(np.searchsorted(np.cumsum(weight), rng.random() * weight.sum(), side="right"))
        v = min(v, len(weight) - 1)
        out[i] = v
        budget[v, m] -= work[j]
    return out


def _draw_heavy_in_months(
    rng: np.random.Generator, heavy: np.ndarray, p_job: np.ndarray, run_work: np.ndarray, budget: np.ndarray
) -> np.ndarray:
    """VCs of the heavy jobs (largest first), each drawn in proportion to its probability times the GPU time its VC
    still lacks in the calendar months the job runs in (budget, VCs x months, updated; run_work = jobs x months, the
    job's GPU time in each) over what the heavy jobs left are expected to bring it there: 1 while the draws keep to
    the expectation, so no VC is favoured for its size (weighting by the lack alone sent the flexible jobs, drawn
    first, to the largest VCs, and the jobs only those hold then overfilled them), and a job running into the next
    month counts there (by its submit month alone, such jobs moved a VC's month by up to 15 points)."""
    out = np.empty(len(heavy), dtype=np.int64)
    work = run_work[heavy]
    expected = p_job.T @ work  # VCs x months
    for i in range(len(heavy)):
        share = work[i] / max(work[i].sum(), 1e-9)
        lack = (np.maximum(budget, 0.0) / np.maximum(expected, 1e-9 * work[i].sum())) @ share
        weight = p_job[i] * lack
        if weight.sum() <= 0:
            weight = p_job[i]
        v = int(np.searchsorted(np.cumsum(weight), rng.random() * weight.sum(), side="right"))
        v = min(v, len(weight) - 1)
        out[i] = v
        budget[v] -= work[i]
        expected -= p_job[i][:, None] * work[i][None, :]
    return out


def assign_vcs(
    rng: np.random.Generator,
    targets: Targets,
    month: np.ndarray,
    gpu_num: np.ndarray,
    duration_s: np.ndarray,
    fits: np.ndarray,
    run_work: np.ndarray | None = None,
) -> np.ndarray:
    """The VC index of each GPU job (month = index of its submit month; fits = jobs x VCs the job may go to,
    fitting_vcs), drawn from the logit calibrated to targets: the jobs holding HEAVY_SHARE of the
    GPU time against what their VCs still lack (largest first), the others independently. With run_work (jobs x
    months, each job's GPU time in each calendar month), the jobs holding CALENDAR_HEAVY_SHARE of it are drawn
    against their VCs' lack in the months they run in (_draw_heavy_in_months)."""
    cells, cell = _cells(month, gpu_num, duration_s, fits)
    model = _fit(targets, cells)
    p_cell = model.probs(cells.month, cells.log_g, cells.log_d, cells.fits)
    n, n_months = len(gpu_num), targets.gpu_time_share.shape[1]
    work = gpu_num * np.maximum(duration_s, 1).astype(float)
    order = np.argsort(-work, kind="stable")
    heavy_share = HEAVY_SHARE if run_work is None else CALENDAR_HEAVY_SHARE
    heavy = order[: np.searchsorted(np.cumsum(work[order]), heavy_share * work.sum()) + 1]
    light = np.ones(n, dtype=bool)
    light[heavy] = False
    out = np.empty(n, dtype=np.int64)
    if run_work is None:
        light_work = np.bincount(cell[light], weights=work[light], minlength=len(cells.jobs))
        expected = np.stack(
            [np.bincount(cells.month, p_cell[:, v] * light_work, n_months) for v in range(p_cell.shape[1])]
        )
        month_work = np.bincount(month, weights=work, minlength=n_months)
        budget = targets.gpu_time_share * month_work[None, :] - expected
        out[heavy] = _draw_heavy(rng, heavy, p_cell[cell[heavy]], work, month, budget)
    else:
        light_run = np.stack([np.bincount(cell[light], run_work[light, m], len(cells.jobs)) for m in range(n_months)])
        budget = targets.gpu_time_share * run_work.sum(axis=0)[None, :] - p_cell.T @ light_run.T
        out[heavy] = _draw_heavy_in_months(rng, heavy, p_cell[cell[heavy]], run_work, budget)
    rows = np.flatnonzero(light)
    u = rng.random(len(rows))
    for lo in range(0, len(rows), _CHUNK):
        part = rows[lo : lo + _CHUNK]
        cum = np.cumsum(p_cell[cell[part]], axis=1)
        pick = (cum < u[lo : lo + _CHUNK, None] * cum[:, -1:]).sum(axis=1)
        out[part] = np.minimum(pick, cum.shape[1] - 1)
    return out


def hold_named_mix(
    targets: Targets, vc: np.ndarray, month: np.ndarray, gpus: np.ndarray, duration_s: np.ndarray, fits: np.ndarray
) -> np.ndarray:
    """The VCs of the jobs with short jobs of the mix month moved between each named VC and the others until its
    drawn jobs' mean duration is on the line through the published normalised ones (_mix_line), as far as short jobs
    allow, each move taking the GPU count that brings its mean GPUs per job nearest the published one: the few long
    jobs that hold most of a VC's seconds make the drawn mean stray from the fitted one by 10-25 % (fits = jobs x VCs
    a job may go to)."""
    out = np.asarray(vc, dtype=np.int64).copy()
    if targets.named.sum() < 3:
        return out
    in_mix = np.asarray(month) == targets.mix_month
    seconds = np.asarray(duration_s, dtype=float)
    want_s = _mix_line(targets, out, in_mix, seconds)
    spare = in_mix & ~targets.named[out]
    for v in np.flatnonzero(~np.isnan(want_s)).tolist():
        own = np.flatnonzero(in_mix & (out == v))
        mix = _Mix(len(own), float(gpus[own].sum()), float(seconds[own].sum()), targets.gpus_per_job[v])
        if mix.mean_s > want_s[v]:
            taken = mix.moves(np.flatnonzero(spare & fits[:, v]), gpus, seconds, want_s[v], +1)
            out[taken], spare[taken] = v, False
        else:
            movable = own[fits[own][:, ~targets.named].any(axis=1)]  # jobs some VC not named may hold
            given = mix.moves(movable, gpus, seconds, want_s[v], -1)
            out[given] = _receivers(given, out, spare, fits, targets.named)
    return out


def _mix_line(targets: Targets, vc: np.ndarray, in_mix: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Per VC, the mean duration (s) its mix-month jobs should have (NaN for the VCs not held): the named VC with the
    lowest published value keeps its drawn mean (0 %), the others lie on the line from it whose 100 % is the median
    of what each of them implies."""
    n_vcs = len(targets.named)
    jobs = np.bincount(vc[in_mix], minlength=n_vcs)
    mean_s = np.bincount(vc[in_mix], weights=seconds[in_mix], minlength=n_vcs) / np.maximum(jobs, 1)
    pct = targets.norm_duration_pct
    low_vc = np.flatnonzero(targets.named)[np.argmin(pct[targets.named])]
    held = targets.named & (pct > pct[low_vc]) & (jobs > 0)
    out = np.full(n_vcs, np.nan)
    if held.any():
        low = mean_s[low_vc]
        high = float(np.median(low + (mean_s[held] - low) * 100 / pct[held]))
        out[held] = low + pct[held] / 100 * (high - low)
    return out


def _receivers(given: np.ndarray, vc: np.ndarray, spare: np.ndarray, fits: np.ndarray, named: np.ndarray) -> np.ndarray:
    """For each given job (one that some VC not named may hold), the VC it goes to: of those, the one with the most
    spare mix-month jobs."""
    size = np.where(named, -1, np.bincount(vc[spare], minlength=len(named)))
    return np.argmax(np.where(fits[given], size[None, :], -2), axis=1)


@dataclass
class _Mix:
    """A VC's mix-month jobs as sums (jobs, GPUs, seconds) and its published mean GPUs per job."""

    jobs: int
    gpus: float
    seconds: float
    gpus_per_job: float

    @property
    def mean_s(self) -> float:
        """Mean duration (s)."""
        return self.seconds / max(self.jobs, 1)

    def moves(self, rows: np.ndarray, gpus: np.ndarray, seconds: np.ndarray, want_s: float, sign: int) -> np.ndarray:
        """Jobs of rows added (sign +1) or given away (-1), shortest first with the GPU count that brings the mean
        GPUs per job nearest the published one, while the mean duration is still on the wrong side of want_s and a
        move brings it closer (at most half the VC's jobs given away)."""
        order = rows[np.argsort(seconds[rows], kind="stable")]  # rows ascend: ties stay in job order
        queues = {g: order[gpus[order] == g].tolist()[::-1] for g in np.unique(gpus[order]).tolist()}
        moved: list[int] = []
        limit = self.jobs // 2 if sign < 0 else self.jobs
        while queues and len(moved) < limit and sign * (self.mean_s - want_s) > 0:
            need = sign * (self.gpus_per_job * (self.jobs + sign) - self.gpus)
            g = min(queues, key=lambda k: (abs(k - need), seconds[queues[k][-1]]))
            if seconds[queues[g][-1]] >= self.mean_s:  # the rest of its queue is longer still
                del queues[g]
                continue
            j = queues[g].pop()
            if not queues[g]:
                del queues[g]
            self.jobs, self.gpus, self.seconds = (
                self.jobs + sign,
                self.gpus + sign * g,
                self.seconds + sign * seconds[j],
            )
            moved.append(j)
        return np.array(moved, dtype=np.int64)
