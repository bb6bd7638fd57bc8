"""Start times of the synthetic trace: its GPU jobs run through the one Slurm model the What-if's twin replays
(sim.synthetic_queue.slurm_queue on sim.slurm: each VC a partition on a pool of its GPUs, first come first served with
backfill), each job in its own VC (the `vc` column the generator chose), closed loop: users of a full VC submit when
it has room.

In the first run most of Venus', Saturn's and Uranus' GPU jobs wait (hours on average for the ones that wait long).
A light job that waited is submitted again at its own time of day on the nearest day of its month on which its VC
has room for it, a heavier one (or a light one with no such day) at the second it started (sim.synthetic_queue.room),
and the queue runs again; while a job still waits, it is submitted again when it started and the queue runs again
(at most RESUBMIT_ROUNDS - 1 times). The last run's start times are kept. (On the FIFO + EASY queue this generator
used before issue #39, submitting every job that waited again when it started flattened Fig 2b's daily swing of
submissions to 70-79 % of the published one; submitting it again as many whole days later as it waited, at its
usual time of day, pushed GPU time into the next months: Fig 3's April, July and September levels fell 3-8 points.)
Each job's recorded wait is then one of the target waits the generator drew (the `queue` column: the published mean,
median 0 and each user's share of the queueing time, Fig 9a), dealt within each user's jobs of a VC and month to the
jobs that had no room the longest (slurm_queue.placed_waits), its submit time the start minus that wait: the start
times are capacity-consistent (with a VC's drained GPUs counted while their jobs run on, slurm_queue.held_capacity),
the waits those of the published statistics. See docs/synthetic-queueing.md.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime

import numpy as np
import polars as pl

from sim.synthetic_queue.capacity import (
    DailyCapacity,
    cluster_origin,
    daily_capacities,
    schedule_frame,
    seconds_columns,
)
from sim.synthetic_queue.room import resubmit_seconds
from sim.synthetic_queue.slurm_queue import SlurmQueue, held_capacity, placed_waits

RESUBMIT_ROUNDS = 3  # runs after the days-with-room one; jobs that waited submitted again when they started
_OUT_SCHEMA = {
    "job_id": pl.Int64,
    "cluster": pl.String,
    "vc": pl.String,
    "submit_time": pl.Datetime("us"),
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "queue": pl.Int64,
}


def calibrated_schedule(jobs: pl.DataFrame, vc_gpus: pl.DataFrame, workers: int | None = None) -> pl.DataFrame:
    """GPU-job start times by the one Slurm model per cluster on the daily VC capacities, users submitting again
    when their VC is full, with the target waits recorded where the VCs had no room (jobs: cluster, job_id, user, vc
    = the job's VC, gpu_num, submit_time, duration, queue = target wait in s, optional backlog = its VC keeps its
    backlog (see sim.synthetic_queue.room); per job out: its VC, submit, start and end time and queue in s; a job
    that never ran has a null start, end and queue)."""
    clusters = sorted(set(jobs["cluster"].to_list()))
    parts = [jobs.filter(pl.col("cluster") == c) for c in clusters]
    n = min(len(parts), workers or os.cpu_count() or 1)
    if n <= 1:
        out = [_schedule_cluster(p, vc_gpus, c) for p, c in zip(parts, clusters, strict=True)]
    else:
        # NOTE: spawned, not forked: Polars' thread pool does not survive a fork
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
            out = list(pool.map(_schedule_cluster, parts, [vc_gpus] * len(parts), clusters))
    if not out:
        return pl.DataFrame(schema=_OUT_SCHEMA)
    return pl.concat(out).sort(["cluster", "job_id"])


def slurm_schedule(jobs: pl.DataFrame, vc_gpus: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """GPU-job start times by the one Slurm model the What-if's twin replays, each VC a partition on a pool of its
    GPUs, users submitting again when their VC is full, with the drawn waits dealt out where the VCs had no room,
    and each VC's GPUs of a day raised to those its drained nodes' jobs still held that day, Earth's real rows
    included (calibrated_schedule, sim.synthetic_queue.slurm_queue.held_capacity)."""
    timed = calibrated_schedule(jobs, vc_gpus)
    held = timed.join(jobs.select("cluster", "job_id", "gpu_num"), on=["cluster", "job_id"], how="left")
    return timed, held_capacity(held, vc_gpus)


def _to_days_with_room(
    df: pl.DataFrame, start: list[int], caps: dict[str, DailyCapacity], names: list[str], t0: datetime
) -> pl.DataFrame:
    """The jobs (in submit order again) with each job that waited submitted on a day of its month with room for it
    at its time of day (sim.synthetic_queue.room)."""
    moved = resubmit_seconds(
        df["_sub"].to_numpy(),
        np.asarray(start, dtype=np.int64),
        df["_dur"].to_numpy(),
        df["gpu_num"].to_numpy(),
        df["_vc"].to_numpy(),
        [caps[v] for v in names],
        t0,
        df["_backlog"].to_numpy(),
    )
    return df.with_columns(pl.Series("_sub", moved, dtype=pl.Int64)).sort(["_sub", "job_id"])


def _closed_loop(
    df: pl.DataFrame, caps: dict[str, DailyCapacity], names: list[str], t0: datetime
) -> tuple[pl.DataFrame, list[int]]:
    """The jobs (with _sub moved) and the start seconds of the last run: the first run, one with the jobs that
    waited moved (_to_days_with_room), then up to RESUBMIT_ROUNDS - 1 more, between which each job that still waited
    is submitted again at the second it started."""
    start = SlurmQueue(df, caps, names)()
    df = _to_days_with_room(df, start, caps, names, t0)
    start = SlurmQueue(df, caps, names)()
    for _ in range(RESUBMIT_ROUNDS - 1):
        start_s = pl.Series("_start", start, dtype=pl.Int64)
        late = (start_s > df["_sub"]).fill_null(False)
        if not late.any():
            break
        df = df.with_columns(pl.when(late).then(start_s).otherwise(pl.col("_sub")).alias("_sub"))
        start = SlurmQueue(df.sort(["_sub", "job_id"]), caps, names)()
        df = df.sort(["_sub", "job_id"])
    return df, start


def _schedule_cluster(jobs: pl.DataFrame, vc_gpus: pl.DataFrame, cluster: str) -> pl.DataFrame:
    t0 = cluster_origin(jobs)
    caps = daily_capacities(vc_gpus, cluster, t0)
    names = sorted(caps)
    df = (
        jobs.filter(pl.col("gpu_num") > 0)
        .select(
            "job_id",
            "user",
            pl.col("vc").replace_strict(names, list(range(len(names)))).alias("_vc"),
            "gpu_num",
            *seconds_columns(t0),
            pl.col("queue").fill_null(0).clip(lower_bound=0).alias("_target"),
            (pl.col("backlog").fill_null(False) if "backlog" in jobs.columns else pl.lit(False)).alias("_backlog"),
        )
        .sort(["_sub", "job_id"])
    )
    df, start = _closed_loop(df, caps, names, t0)
    df = df.with_columns(placed_waits(df, np.asarray(start), [caps[v] for v in names], t0).alias("_target"))
    started = pl.Series("_s", start, dtype=pl.Int64)
    recorded = pl.when(started >= 0).then(started - pl.col("_target")).otherwise(pl.col("_sub"))
    df = df.with_columns(recorded.alias("_sub"))
    return (
        schedule_frame(df, cluster, t0, started)
        .with_columns(
            pl.Series("vc", [names[v] for v in df["_vc"].to_list()], dtype=pl.String),
            (pl.lit(t0) + pl.duration(seconds=df["_sub"])).alias("submit_time"),
        )
        .select(list(_OUT_SCHEMA))
    )
