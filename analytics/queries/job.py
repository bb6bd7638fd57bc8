"""One job in its context, for the job page: its record, the jobs of its VC that held GPUs while it waited, its
user's jobs around it and its VC's queue length over time; values are bound parameters."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

from analytics import db, schema
from analytics.filters import RUNNING, JobFilter
from analytics.queries import colstore
from analytics.store import Dataset

MAX_RECORDS = 50  # clusters a job id is looked up in at most
MAX_HOLDERS = 20
MAX_AROUND = 20
_JOB_END = 'coalesce("end_time", "start_time" + to_seconds("duration"))'


def job_records(ds: Dataset, job_id: int, cluster: str | None = None) -> pl.DataFrame:
    """Every column of the jobs with this id (of one cluster when given), ordered by cluster."""
    where, params = JobFilter(clusters=(cluster,) if cluster else ()).where()
    sql = f"SELECT * FROM jobs WHERE job_id = ? AND {where} ORDER BY cluster LIMIT ?"
    return db.run(sql, [job_id, *params, MAX_RECORDS], ds=ds)


def wait_holders(ds: Dataset, job: dict, limit: int = MAX_HOLDERS) -> pl.DataFrame:
    """The GPU jobs of a job's cluster and VC running while it waited (submit to start; to its end when it left the
    queue unstarted, to the trace's end when it is still queued), most GPUs first: their id, user, GPUs, state, start,
    end, seconds held during the wait, and n_holders / holders_gpu_num (all of them, not only the listed)."""
    wait_end = job["start_time"] or job["end_time"] or colstore.from_us(int(colstore.columns(ds).end_us.max()))
    if wait_end <= job["submit_time"]:
        return pl.DataFrame()
    flt = JobFilter(
        clusters=(job["cluster"],),
        vcs=(job["vc"],),
        start=job["submit_time"],
        end=wait_end,
        job_kind="gpu",
        time_mode=RUNNING,
    )
    where, params = flt.where()
    sql = f"""
        SELECT job_id, "user", gpu_num, state, start_time, {_JOB_END} AS end_time,
               date_diff('second', greatest(start_time, ?), least({_JOB_END}, ?)) AS held_s,
               count(*) OVER () AS n_holders, sum(gpu_num) OVER () AS holders_gpu_num
        FROM jobs WHERE {where} AND NOT (job_id = ? AND cluster = ?)
        ORDER BY gpu_num DESC, held_s DESC, job_id LIMIT ?"""
    bound = [job["submit_time"], wait_end, *params, job["job_id"], job["cluster"], limit]
    return db.run(sql, bound, ds=ds)


def user_jobs_around(ds: Dataset, job: dict, limit: int = MAX_AROUND) -> pl.DataFrame:
    """The job's user's other jobs on its cluster nearest to it in submit time (at most limit), in submit order."""
    if job.get("user") is None:
        return pl.DataFrame()
    where, params = JobFilter(clusters=(job["cluster"],), users=(job["user"],)).where()
    sql = f"""
        SELECT * FROM (
            SELECT job_id, vc, gpu_num, state, submit_time, start_time, end_time, duration, queue
            FROM jobs WHERE {where} AND job_id <> ?
            ORDER BY abs(epoch(submit_time) - epoch(CAST(? AS TIMESTAMP))), job_id LIMIT ?
        ) ORDER BY submit_time, job_id"""
    return db.run(sql, [*params, job["job_id"], job["submit_time"], limit], ds=ds)


def _at_or_before(events_us: np.ndarray, at_us: np.ndarray) -> np.ndarray:
    """For each of the times at_us, how many of events_us are at or before it (events binned by time: no sort of
    the events, which outnumber the times)."""
    # NOTE: binned rather than sorted and searched: the events are hundreds of thousands, the times a few hundred
    order = np.argsort(at_us, kind="stable")
    first_after = np.searchsorted(at_us[order], events_us, side="left")  # the first time at or after each event
    counts = np.empty(len(at_us), dtype=np.int64)
    counts[order] = np.cumsum(np.bincount(first_after, minlength=len(at_us) + 1))[: len(at_us)]
    return counts


def queued_jobs(ds: Dataset, cluster: str, vc: str, times: list[datetime]) -> pl.DataFrame:
    """At each time, the jobs of a cluster's VC that were submitted and had not left the queue: by starting, or by
    ending unstarted (a job that never started and has no end counts as queued to the trace's end when unfinished,
    and is left out when final)."""
    cols = colstore.columns(ds)
    rows = np.flatnonzero(cols.mask(JobFilter(clusters=(cluster,), vcs=(vc,))))  # the VC's jobs only, from here on
    state = cols.cats["state"]
    unfinished = state.table(schema.UNFINISHED_STATES)[state.codes[rows]]
    has_start, has_end = cols.has_start[rows], cols.has_end[rows]
    # Without a start, end_us is the recorded end_time (has_end tells whether there is one).
    left_us = np.where(has_start, cols.start_us[rows], cols.end_us[rows])
    leaves = has_start | has_end
    counted = leaves | unfinished
    at = np.array([colstore.to_us(t) for t in times], dtype=np.int64)
    queued = _at_or_before(cols.submit_us[rows][counted], at) - _at_or_before(left_us[counted & leaves], at)
    return pl.DataFrame(
        {"time": times, "queued_jobs": queued.astype(np.int64)}, schema_overrides={"time": schema.TIMESTAMP}
    )
