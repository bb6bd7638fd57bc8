"""Synthetic Slurm accounting exports (the `helios sync slurm` layout) of any length, for tests and benchmarks.

The jobs are drawn once per seed; `as_of` cuts the export at a moment (later jobs absent, jobs not yet started
PENDING, jobs not yet ended RUNNING) and `since` keeps the jobs active after a moment, as `sacct --starttime` does,
so two exports of one seed at two moments are what a cluster would have reported then.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

FIELDS = (
    "Cluster", "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "State", "ExitCode", "Submit",
    "Eligible", "Start", "End", "Elapsed", "ElapsedRaw", "Timelimit", "NNodes", "NCPUS", "ReqTRES", "AllocTRES",
    "NodeList", "QOS",
)  # fmt: skip
PARTITIONS = ("p0", "p1", "p2", "p3")
FINAL = ("COMPLETED",) * 14 + ("FAILED", "FAILED", "CANCELLED by 1001", "CANCELLED by 1002", "TIMEOUT", "OUT_OF_MEMORY")
GPU_CHOICES = (0, 0, 1, 1, 1, 2, 4, 8)
N_USERS = 150
ISO = "%Y-%m-%dT%H:%M:%S"


def draw_jobs(start: datetime, days: int, jobs_per_day: int, seed: int = 0) -> pl.DataFrame:
    """The true course of every job: ids, user, partition, GPUs, submit/start/end and final state."""
    rng = np.random.default_rng(seed)
    n = days * jobs_per_day
    submit_s = np.sort(rng.integers(0, days * 86_400, n))
    queue_s = np.where(rng.random(n) < 0.5, 0, rng.exponential(600, n).astype(np.int64))
    users = rng.integers(0, N_USERS, n)
    user_log_s = rng.normal(7, 1.5, N_USERS)  # each user's typical run time (what a predictor can learn)
    run_s = np.clip(rng.lognormal(user_log_s[users], 0.8), 1, 5 * 86_400).astype(np.int64)
    array = rng.random(n) < 0.05
    ids = np.arange(1, n + 1)
    t0 = np.datetime64(start, "us")
    element = pl.format("{}_{}", pl.col("id") // 10 * 10, pl.col("id") % 10)
    frame = pl.DataFrame(
        {
            "id": ids,
            "array": array,
            "user": [f"u{u:03d}" for u in users],
            "partition": rng.choice(PARTITIONS, n),
            "gpus": rng.choice(GPU_CHOICES, n),
            "cpus": rng.integers(1, 32, n),
            "submit": t0 + submit_s.astype("timedelta64[s]"),
            "start": t0 + (submit_s + queue_s).astype("timedelta64[s]"),
            "end": t0 + (submit_s + queue_s + run_s).astype("timedelta64[s]"),
            "final": rng.choice(FINAL, n),
        }
    )
    return frame.with_columns(pl.when("array").then(element).otherwise(pl.col("id").cast(pl.String)).alias("job"))


def _text(col: str) -> pl.Expr:
    return pl.col(col).dt.strftime(ISO)


def export_frame(jobs: pl.DataFrame, cluster: str, as_of: datetime, since: datetime | None = None) -> pl.DataFrame:
    """The sacct rows of jobs as a cluster reports them at as_of (only those active after since, if given)."""
    seen = jobs.filter(pl.col("submit") <= as_of)
    if since is not None:
        seen = seen.filter(pl.col("end") >= since)
    started, ended = pl.col("start") <= as_of, pl.col("end") <= as_of
    state = pl.when(ended).then(pl.col("final")).when(started).then(pl.lit("RUNNING")).otherwise(pl.lit("PENDING"))
    elapsed = pl.when(ended).then(pl.col("end") - pl.col("start")).when(started).then(pl.lit(as_of) - pl.col("start"))
    elapsed_s = elapsed.dt.total_seconds().fill_null(0)
    tres = pl.format("billing={},cpu={},gres/gpu={},node=1", "cpus", "cpus", "gpus")
    return seen.select(
        pl.lit(cluster).alias("Cluster"),
        pl.col("job").alias("JobID"),
        pl.col("id").cast(pl.String).alias("JobIDRaw"),
        pl.format("train-{}", pl.col("id") % 97).alias("JobName"),
        pl.col("user").alias("User"),
        pl.format("acct-{}", pl.col("user").str.slice(1, 2)).alias("Account"),
        pl.col("partition").alias("Partition"),
        state.alias("State"),
        pl.when(state.str.starts_with("FAILED")).then(pl.lit("1:0")).otherwise(pl.lit("0:0")).alias("ExitCode"),
        _text("submit").alias("Submit"),
        _text("submit").alias("Eligible"),
        pl.when(started).then(_text("start")).otherwise(pl.lit("Unknown")).alias("Start"),
        pl.when(ended).then(_text("end")).otherwise(pl.lit("Unknown")).alias("End"),
        pl.format("{}:{}", elapsed_s // 60, elapsed_s % 60).alias("Elapsed"),
        elapsed_s.cast(pl.String).alias("ElapsedRaw"),
        pl.lit("5-00:00:00").alias("Timelimit"),
        pl.lit("1").alias("NNodes"),
        pl.col("cpus").cast(pl.String).alias("NCPUS"),
        tres.alias("ReqTRES"),
        pl.when(started).then(tres).otherwise(pl.lit("")).alias("AllocTRES"),
        pl.when(started)
        .then(pl.format("gpu{}", pl.col("id") % 16))
        .otherwise(pl.lit("None assigned"))
        .alias("NodeList"),
        pl.lit("normal").alias("QOS"),
    )


def write_export(path: Path, rows: pl.DataFrame) -> Path:
    """Write sacct rows as `--parsable2` text (header line, `|` separators)."""
    rows.select(FIELDS).write_csv(path, separator="|", quote_style="never")
    return path


def write_capacity(path: Path, gpus_per_partition: int = 64) -> Path:
    """A `vc,gpus` capacity CSV: every partition gpus_per_partition GPUs, the whole cluster all of them."""
    lines = ["vc,gpus", *(f"{p},{gpus_per_partition}" for p in PARTITIONS), f"*,{gpus_per_partition * len(PARTITIONS)}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def exports(
    folder: Path, start: datetime, days: int, jobs_per_day: int, refresh_days: int = 1, seed: int = 0
) -> tuple[Path, Path]:
    """A first export covering `days` days and a later one (`refresh_days` on, its last two days) of one cluster."""
    jobs = draw_jobs(start, days + refresh_days, jobs_per_day, seed)
    first_cut = start + timedelta(days=days)
    later_cut = first_cut + timedelta(days=refresh_days)
    first = write_export(folder / "first.txt", export_frame(jobs, "synth", first_cut))
    since = later_cut - timedelta(days=2)
    later = write_export(folder / "refresh.txt", export_frame(jobs, "synth", later_cut, since))
    return first, later
