"""The scheduler twin against the real Slurm's recordings: each recording replayed with its own captured
configuration, on the path a user takes (the sacct export read by analytics.ingest.slurm, the five scheduler dumps
by read_slurm_config, the `slurm` policy's simulate_slurm), and the issue's figures and targets.

The sacct reader does not yet carry Account, Partition, QOS and Timelimit into the job schema, so `recorded_frame`
adds them from the export itself (TimelimitRaw is in minutes).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from analytics.ingest.slurm import SlurmOptions, read_export
from analytics.ingest.slurm_conf import read_slurm_config
from sim.model import SimConfig
from sim.slurm.workload import simulate_slurm
from sim.workload import select_window, to_workload
from tests.slurm.contention import kendall_tau_b, read_sacct

CLUSTER = "contention"
# The targets (item 4).
MEAN_TOLERANCE = 0.10  # or the measured run-to-run spread, whichever is larger
MEDIAN_TOLERANCE = 0.15
ACCOUNT_TOLERANCE = 0.25
MIN_TAU = 0.7
CHANGE_TOLERANCE = 0.25
BASELINE = "fairshare-1"
REPEAT = "fairshare-2"
CHANGES = (("fairshare-1", "age-1"), ("fairshare-1", "builtin-1"))  # (from, to): age-weighted, no backfill


@dataclass(frozen=True)
class Starts:
    """One run's jobs by name: account, submit and start (epoch seconds); the record's or the twin's."""

    name: str
    account: dict[str, str]
    submit_s: dict[str, float]
    start_s: dict[str, float]

    def queues_s(self) -> dict[str, float]:
        """Start minus submit of every job that started."""
        return {job: self.start_s[job] - self.submit_s[job] for job in self.start_s}


@dataclass(frozen=True)
class Figures:
    """Mean and median queue over the jobs that started, and each account's mean queue (seconds)."""

    mean_s: float
    median_s: float
    account_mean_s: dict[str, float]


def figures(run: Starts) -> Figures:
    """The queue figures of one run."""
    queues = run.queues_s()
    accounts = sorted({run.account[j] for j in queues})
    per_account = {a: statistics.fmean(q for j, q in queues.items() if run.account[j] == a) for a in accounts}
    return Figures(statistics.fmean(queues.values()), statistics.median(queues.values()), per_account)


def recorded_frame(folder: Path) -> pl.DataFrame:
    """The export's jobs as the ingest reads them (VC = account), with account, partition, QOS and timelimit_s
    taken from sacct.txt (the reader does not carry them yet)."""
    path = folder / "sacct.txt"
    jobs = read_export(path, SlurmOptions(cluster=CLUSTER, vc_from="account")).jobs
    rows = read_sacct(path)
    extra = pl.DataFrame(
        {
            "job_id": [int(r["JobIDRaw"]) for r in rows],
            "account": [r["Account"] for r in rows],
            "partition": [r["Partition"] for r in rows],
            "qos": [r["QOS"] for r in rows],
            "timelimit_s": [int(r["TimelimitRaw"]) * 60 if r["TimelimitRaw"].isdigit() else None for r in rows],
        },
        schema_overrides={"job_id": jobs.schema["job_id"]},
    )
    return jobs.join(extra, on="job_id", how="left")


def _epoch_s(frame: pl.DataFrame, col: str) -> list[float | None]:
    return [None if t is None else t.timestamp() for t in frame.get_column(col).to_list()]


def record_starts(folder: Path) -> Starts:
    """What the real Slurm did, as the ingest reads it."""
    frame = recorded_frame(folder)
    names = frame.get_column("job_name").to_list()
    submit, start = _epoch_s(frame, "submit_time"), _epoch_s(frame, "start_time")
    return Starts(
        folder.name,
        dict(zip(names, frame.get_column("account").to_list(), strict=True)),
        dict(zip(names, submit, strict=True)),
        {n: s for n, s in zip(names, start, strict=True) if s is not None},
    )


def twin_starts(folder: Path) -> Starts:
    """The twin's replay of the recording: the export's jobs on the captured configuration."""
    frame = recorded_frame(folder)
    config = read_slurm_config(folder)
    window = select_window(frame, CLUSTER)
    workload = to_workload(window, {vc: 1 for vc in window.vcs})
    result = simulate_slurm(config, SimConfig(policy="slurm"), workload)
    names = np.array(window.jobs.get_column("job_name").to_list(), dtype=object)
    t0_s = workload.t0_us / 1_000_000
    account, submit, start = {}, {}, {}
    for vc, out in result.vcs.items():
        for row, start_s in zip(out.rows, out.start_s, strict=True):
            name = names[row]
            account[name], submit[name] = vc, t0_s + float(workload.submit_s[row])
            if start_s >= 0:
                start[name] = t0_s + float(start_s)
    return Starts(folder.name, account, submit, start)


def start_order_tau(a: Starts, b: Starts) -> float:
    """Kendall tau-b of the start times of the jobs that started in both runs."""
    common = sorted(set(a.start_s) & set(b.start_s))
    return kendall_tau_b([a.start_s[j] for j in common], [b.start_s[j] for j in common])


def relative(value: float, reference: float) -> float:
    """value / reference - 1 (0 when both are 0)."""
    if reference == 0:
        return 0.0 if value == 0 else float("inf")
    return value / reference - 1


@dataclass(frozen=True)
class Spread:
    """The real Slurm against itself (the same preset twice): mean-queue spread, per-account spread, tau."""

    mean: float
    median: float
    account: dict[str, float]
    tau: float


def spread(first: Starts, second: Starts) -> Spread:
    """How far two runs of one preset are apart (relative to the first's figures)."""
    f, s = figures(first), figures(second)
    accounts = {a: abs(relative(s.account_mean_s[a], q)) for a, q in f.account_mean_s.items()}
    return Spread(abs(relative(s.mean_s, f.mean_s)), abs(relative(s.median_s, f.median_s)), accounts,
                  start_order_tau(first, second))  # fmt: skip


@dataclass(frozen=True)
class Check:
    """One target: what is measured, the record's and the twin's values, the error, the bound and the verdict."""

    what: str
    record: float
    twin: float
    error: float
    bound: float
    passed: bool


def _within(what: str, record: float, twin: float, bound: float) -> Check:
    error = abs(relative(twin, record))
    return Check(what, record, twin, error, bound, error <= bound)


def replay_checks(name: str, record: Starts, twin: Starts, run_spread: Spread | None) -> list[Check]:
    """The per-run targets: mean (within max(10 %, spread)), median, each account's mean, start-order tau."""
    r, t = figures(record), figures(twin)
    mean_bound = max(MEAN_TOLERANCE, run_spread.mean if run_spread else 0.0)
    checks = [
        _within(f"{name} mean queue (s)", r.mean_s, t.mean_s, mean_bound),
        _within(f"{name} median queue (s)", r.median_s, t.median_s, MEDIAN_TOLERANCE),
    ]
    checks += [
        _within(f"{name} {a} mean queue (s)", q, t.account_mean_s.get(a, float("nan")), ACCOUNT_TOLERANCE)
        for a, q in r.account_mean_s.items()
    ]
    tau = start_order_tau(record, twin)
    checks.append(Check(f"{name} start-order tau", 1.0, tau, 1 - tau, 1 - MIN_TAU, tau >= MIN_TAU))
    return checks


def _change(what: str, rec: tuple[float, float], twin: tuple[float, float], noise: float) -> Check:
    """A configuration's change as the ratio to/from; the twin's ratio within 25 % of the record's, and the same
    direction where the record's change is larger than the real Slurm's own spread (noise)."""
    rec_ratio, twin_ratio = rec[1] / rec[0], twin[1] / twin[0]
    error = abs(relative(twin_ratio, rec_ratio))
    measurable = abs(rec_ratio - 1) > noise
    same_direction = not measurable or (rec_ratio - 1) * (twin_ratio - 1) > 0
    return Check(what, rec_ratio, twin_ratio, error, CHANGE_TOLERANCE, error <= CHANGE_TOLERANCE and same_direction)


def change_checks(base: str, other: str, runs: Mapping[str, tuple[Starts, Starts]], noise: Spread) -> list[Check]:
    """Each configuration change (base -> other), overall and per account: record's and twin's ratio."""
    (rb, tb), (ro, to) = (tuple(figures(s) for s in runs[n]) for n in (base, other))
    label = f"{other}/{base}"
    checks = [_change(f"{label} mean queue", (rb.mean_s, ro.mean_s), (tb.mean_s, to.mean_s), noise.mean)]
    checks += [
        _change(
            f"{label} {a} mean queue",
            (rb.account_mean_s[a], ro.account_mean_s[a]),
            (tb.account_mean_s[a], to.account_mean_s[a]),
            noise.account.get(a, 0.0),
        )  # fmt: skip
        for a in rb.account_mean_s
    ]
    return checks


@dataclass(frozen=True)
class Comparison:
    """Every run's record and replay, the real spread, and every target's check."""

    runs: dict[str, tuple[Starts, Starts]]  # name -> (record, twin)
    spread: Spread | None
    checks: list[Check]


def compare_recordings(folders: Sequence[Path]) -> Comparison:
    """Replay every recording and check the targets (the spread needs fairshare-1 and fairshare-2, the changes
    their two presets)."""
    runs = {f.name: (record_starts(f), twin_starts(f)) for f in folders}
    noise = spread(runs[BASELINE][0], runs[REPEAT][0]) if {BASELINE, REPEAT} <= set(runs) else None
    checks = [c for name, (rec, twin) in runs.items() for c in replay_checks(name, rec, twin, noise)]
    for base, other in CHANGES:
        if {base, other} <= set(runs):
            checks += change_checks(base, other, runs, noise or Spread(0.0, 0.0, {}, 1.0))
    return Comparison(runs, noise, checks)


def format_comparison(c: Comparison) -> str:
    """The table: each run's figures (record | twin), the spread, and every check with its verdict."""
    lines = ["run           account    record mean / median (s)   twin mean / median (s)   tau"]
    for name, (rec, twin) in c.runs.items():
        r, t = figures(rec), figures(twin)
        tau = start_order_tau(rec, twin)
        lines.append(f"{name:<13} {'all':<10} {r.mean_s:>9.1f} / {r.median_s:<9.1f}     "
                     f"{t.mean_s:>9.1f} / {t.median_s:<9.1f}    {tau:.2f}")  # fmt: skip
        lines += [
            f"{'':<13} {a:<10} {q:>9.1f}                 {t.account_mean_s.get(a, float('nan')):>9.1f}"
            for a, q in r.account_mean_s.items()
        ]
    if c.spread:
        accounts = ", ".join(f"{a} {v:.1%}" for a, v in c.spread.account.items())
        lines.append(f"\nreal run-to-run spread ({REPEAT} vs {BASELINE}): mean {c.spread.mean:.1%}, median "
                     f"{c.spread.median:.1%}, per account {accounts}; start-order tau {c.spread.tau:.2f}")  # fmt: skip
    lines.append("\ncheck                                   record      twin    error   bound  verdict")
    for k in c.checks:
        verdict = "pass" if k.passed else "FAIL"
        lines.append(f"{k.what:<38} {k.record:>8.2f} {k.twin:>9.2f} {k.error:>7.1%} {k.bound:>7.1%}  {verdict}")
    passed = sum(k.passed for k in c.checks)
    lines.append(f"\n{passed} of {len(c.checks)} targets met")
    return "\n".join(lines)
