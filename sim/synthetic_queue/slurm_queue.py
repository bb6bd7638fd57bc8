"""The synthetic trace's queue on the one Slurm model (sim.slurm), the model the What-if's twin replays (issue #39):
`helios demo --queue slurm`.

Each VC is a partition on one pool of its GPUs (jobs placed by GPU count; a VC whose capacity steps is made of
one-GPU nodes that join and are drained at the day's midnight, sim.slurm.calibrate.pool_of), priority/basic (first
come, first served), sched/backfill with GENERATOR_SCHED and no time limits, as the calibrated twin replays a trace
without a configuration. Slurm lets a drained node's jobs run on, so a VC's GPUs of a day count the GPUs its drained
nodes still hold that day (held_capacity), as Slurm keeps a draining node in its partition until its jobs end.

Each job's recorded wait is one of the generator's drawn waits (their published mean, median and shares), placed
where the model had no room: within each user's jobs of a VC and month of submission, the longest drawn wait goes to
the job whose VC had no room for it the longest before it started (roomless_s), and so on down (jobs with as long
keep their drawn waits' order), so that a replay of the record meets full VCs where the record waited.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

from analytics.fidelity.capacity import daily_peak_gpus
from analytics.slurm_config import SchedSpec
from sim.model import SchedulerColumns, SimConfig, Workload
from sim.slurm.calibrate import node_changes, pool_of, pool_sizes, vc_cluster
from sim.slurm.workload import simulate_slurm
from sim.synthetic_queue.capacity import DAY_S, DailyCapacity
from sim.synthetic_queue.room import MINUTE_S, free_minutes

# Slurm's SchedulerParameters default_queue_depth and bf_max_job_test raised so that every pass looks at the whole
# queue (the defaults, 100 and 500, over one cluster-wide queue of thousands of jobs leave most VCs' jobs unseen for
# passes on end: 99.4 % of Saturn's first-run GPU jobs wait, 23.4 h on average, against 78 % and 4.2 h with the whole
# queue; docs/synthetic-queueing.md, "On the Slurm model")
GENERATOR_SCHED = SchedSpec(default_queue_depth=100_000, bf_max_job_test=100_000)


class SlurmQueue:
    """One cluster's GPU jobs in submit order (columns _sub, _dur, gpu_num, _vc, job_id) through sim.slurm, each in
    its own VC's partition; called, the start second of each job (-1 = never)."""

    def __init__(self, df: pl.DataFrame, caps: dict[str, DailyCapacity], names: list[str]):
        self.submit_s = df["_sub"].to_numpy().astype(np.int64)
        self.duration_s = df["_dur"].to_numpy().astype(np.int64)
        self.gpus = df["gpu_num"].to_numpy().astype(np.int64)
        self.vc = df["_vc"].to_numpy().astype(np.int32)
        self.job_id = df["job_id"].to_numpy()
        self.steps = tuple(gpu_steps(caps[v]) for v in names)
        self.names = tuple(names)

    def __call__(self) -> list[int]:
        """Start second of each job (-1 = never)."""
        w = self.workload()
        placed = pool_of(w, 1)
        config = vc_cluster(placed, pool_sizes(w, 1), sched=GENERATOR_SCHED)
        out = simulate_slurm(config, SimConfig(policy="slurm"), placed, node_changes(placed))
        start_s = np.full(len(self.submit_s), -1, dtype=np.int64)
        for vc in out.vcs.values():
            start_s[vc.rows] = vc.start_s
        return start_s.tolist()

    def workload(self) -> Workload:
        """The jobs as a Workload of one-GPU nodes per VC (no users, limits or accounts)."""
        n = len(self.submit_s)
        cols = SchedulerColumns(np.full(n, "", dtype=object), None, None, None, None, None, None, None)
        return Workload(
            job_id=self.job_id,
            vc_index=self.vc,
            submit_s=self.submit_s,
            duration_s=self.duration_s,
            gpu_num=self.gpus,
            predicted_s=np.zeros(n),
            vc_names=self.names,
            vc_nodes=tuple(steps[0][1] for steps in self.steps),
            scheduler=cols,
            vc_node_steps=self.steps,
        )


def gpu_steps(cap: DailyCapacity) -> tuple[tuple[int, int], ...]:
    """A VC's daily GPUs as steps (second, GPUs from then on): day 0's, then each midnight where they change."""
    steps = [(0, cap.gpus[0])]
    for day, gpus in enumerate(cap.gpus[1:], start=1):
        if gpus != steps[-1][1]:
            steps.append((day * DAY_S, gpus))
    return tuple(steps)


def roomless_s(
    start_s: np.ndarray, duration_s: np.ndarray, gpus: np.ndarray, vc: np.ndarray, caps: list[DailyCapacity]
) -> np.ndarray:
    """Per job, how long (s, by whole minutes) before its start its VC had fewer GPUs free than it needs, beside the
    jobs started at start_s (0 for a job that never started or found room the minute before)."""
    out = np.zeros(len(start_s), dtype=np.int64)
    ran = start_s >= 0
    for v, cap in enumerate(caps):
        rows = np.flatnonzero(ran & (vc == v))
        if not len(rows):
            continue
        free = free_minutes(cap, start_s[rows], duration_s[rows], gpus[rows])
        minute = np.arange(len(free))
        for need in np.unique(gpus[rows]).tolist():
            last_room = np.maximum.accumulate(np.where(free >= need, minute, -1))
            mine = rows[gpus[rows] == need]
            before = np.minimum(start_s[mine] // MINUTE_S, len(free)) - 1
            out[mine] = np.where(before >= 0, before - last_room[np.maximum(before, 0)], 0) * MINUTE_S
    return out


def placed_waits(df: pl.DataFrame, start_s: np.ndarray, caps: list[DailyCapacity], t0: datetime) -> pl.Series:
    """The drawn waits (_target) of df's jobs (columns job_id, _vc, user, _dur, gpu_num, _target, _sub) dealt out
    within each user's jobs of a VC and month of submission as drawn (start minus the job's own drawn wait) by how
    long each had no room before its start (see the module)."""
    start = np.asarray(start_s, dtype=np.int64)
    target = df["_target"].to_numpy()
    submit = np.where(start >= 0, start - target, df["_sub"].to_numpy())
    month = (np.datetime64(t0.date(), "D") + submit // DAY_S).astype("datetime64[M]").astype(np.int64)
    waited_s = roomless_s(start, df["_dur"].to_numpy(), df["gpu_num"].to_numpy(), df["_vc"].to_numpy(), caps)
    groups = ["_vc", "user", "_month"]
    dealt = (
        df.select("_vc", "user", "job_id", "_target")
        .with_columns(
            pl.Series("_month", month), pl.Series("_roomless_s", waited_s), pl.int_range(pl.len()).alias("_row")
        )
        .sort([*groups, "_roomless_s", "_target", "job_id"])
        .with_columns(pl.col("_target").sort().over(groups))
        .sort("_row")
    )
    return dealt["_target"]


def held_capacity(jobs: pl.DataFrame, vc_gpus: pl.DataFrame) -> pl.DataFrame:
    """vc_gpus with each VC's GPUs of a day at least those its jobs (cluster, vc, gpu_num, start_time, end_time) held
    at any moment of it, midnight included (daily_peak_gpus): a drained node's GPUs count while its jobs run on."""
    keys = ["cluster", "vc", "date"]
    held = vc_gpus.join(daily_peak_gpus(jobs.lazy(), vc_gpus), on=keys, how="left")
    raised = pl.max_horizontal(pl.col("gpus").cast(pl.Int64), pl.col("peak_gpus").fill_null(0))
    return held.with_columns(raised.cast(vc_gpus.schema["gpus"]).alias("gpus")).select(vc_gpus.columns)
