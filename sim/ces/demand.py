"""Busy nodes over time from a schedule: replay each GPU job's start and end on the simulator's nodes.

Every VC is a set of homogeneous nodes (`sim.cluster.VCNodes`); jobs are placed by the simulator's
consolidate placer (first-fit across nodes when fragmentation blocks it) and released at their end. The
busy-node count is the number of nodes running at least one job; each 10-minute bin takes its maximum, like
the artifact's per-minute `Used Node` resampled with `max`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analytics.schema import GPUS_PER_NODE
from sim.ces.series import STEP, NodeSeries
from sim.cluster import VCNodes
from sim.placers import consolidate, first_fit

_END, _START = 0, 1


@dataclass(frozen=True)
class Schedule:
    """GPU jobs as parallel arrays (VC index, GPUs, start, end as datetime64[us]) and nodes per VC."""

    vc_index: np.ndarray
    gpu_num: np.ndarray
    start: np.ndarray
    end: np.ndarray
    vc_nodes: tuple[int, ...]


@dataclass(frozen=True)
class BusyTimeline:
    """The busy-node count just after each event, and the jobs that could not be placed."""

    time: np.ndarray  # datetime64[us]
    busy: np.ndarray  # int64
    unplaced_jobs: int


def _events(schedule: Schedule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keep = np.flatnonzero(schedule.end > schedule.start)
    times = np.concatenate([schedule.end[keep], schedule.start[keep]])
    kinds = np.concatenate([np.full(len(keep), _END), np.full(len(keep), _START)])
    jobs = np.concatenate([keep, keep])
    order = np.lexsort((jobs, kinds, times))  # ends before starts at the same time, then trace order
    return times[order], kinds[order], jobs[order]


def replay(schedule: Schedule, gpus_per_node: int = GPUS_PER_NODE) -> BusyTimeline:
    """Place and release every job at its recorded times and count busy nodes after each event."""
    vcs = [VCNodes(n, gpus_per_node) for n in schedule.vc_nodes]
    times, kinds, jobs = _events(schedule)
    allocs: dict[int, tuple] = {}
    busy = np.zeros(len(times), dtype=np.int64)
    vc_l, gpu_l = schedule.vc_index.tolist(), schedule.gpu_num.tolist()
    total_busy, unplaced = 0, 0
    for k, (kind, job) in enumerate(zip(kinds.tolist(), jobs.tolist(), strict=True)):
        vc = vcs[vc_l[job]]
        if kind == _END:
            alloc = allocs.pop(job, None)
            if alloc:
                vc.release(alloc)
                total_busy -= sum(1 for node, _ in alloc if vc.job_count[node] == 0)  # NOTE: incremental
        else:
            alloc = consolidate(vc, gpu_l[job]) or first_fit(vc, gpu_l[job])
            if alloc:
                total_busy += sum(1 for node, _ in alloc if vc.job_count[node] == 0)
                vc.allocate(alloc)
                allocs[job] = alloc
            else:
                unplaced += 1
        busy[k] = total_busy
    return BusyTimeline(time=times, busy=busy, unplaced_jobs=unplaced)


def bin_max(timeline: BusyTimeline, grid: np.ndarray) -> np.ndarray:
    """Maximum busy count over each 10-minute bin of grid, including the count carried into the bin."""
    step = np.timedelta64(STEP)
    carried_idx = np.searchsorted(timeline.time, grid, side="left") - 1
    carried = np.where(carried_idx >= 0, timeline.busy[np.maximum(carried_idx, 0)], 0)
    inside = (timeline.time >= grid[0]) & (timeline.time < grid[-1] + step)
    bins = ((timeline.time[inside] - grid[0]) // step).astype(np.int64)
    peak = np.zeros(len(grid), dtype=np.int64)
    np.maximum.at(peak, bins, timeline.busy[inside])
    return np.maximum(carried, peak)


def node_series(schedule: Schedule, grid: np.ndarray, total_nodes: np.ndarray) -> tuple[NodeSeries, int]:
    """The 10-minute busy/total node series of a schedule on grid, and the number of unplaced jobs."""
    timeline = replay(schedule)
    busy = bin_max(timeline, grid).astype(np.float64)
    total = np.maximum(total_nodes.astype(np.float64), busy)
    return NodeSeries(time=grid, active=busy, total=total), timeline.unplaced_jobs


def _peak_gpus(vc_index: np.ndarray, gpu_num: np.ndarray, start: np.ndarray, end: np.ndarray, n_vcs: int):
    """Peak concurrent GPUs of each VC under the schedule (a sweep over start and end events)."""
    peak = np.zeros(n_vcs, dtype=np.int64)
    for v in range(n_vcs):
        rows = np.flatnonzero(vc_index == v)
        times = np.concatenate([end[rows], start[rows]])
        deltas = np.concatenate([-gpu_num[rows], gpu_num[rows]])
        order = np.lexsort((deltas, times))  # releases first at equal times
        peak[v] = max(int(np.cumsum(deltas[order]).max(initial=0)), 0)
    return peak


def schedule_from_jobs(jobs: pl.DataFrame, vc_gpus: pl.DataFrame, gpus_per_node: int = GPUS_PER_NODE) -> Schedule:
    """A Schedule from GPU jobs (vc, gpu_num, start_time, end_time); VC nodes cover capacity and peak."""
    vc_names = sorted(set(jobs["vc"].unique().to_list()) | set(vc_gpus["vc"].unique().to_list()))
    lookup = {name: i for i, name in enumerate(vc_names)}
    vc_index = np.array([lookup[v] for v in jobs["vc"].to_list()], dtype=np.int64)
    gpu_num = jobs["gpu_num"].to_numpy().astype(np.int64)
    start = jobs["start_time"].cast(pl.Datetime("us")).to_numpy()
    end = jobs["end_time"].cast(pl.Datetime("us")).to_numpy()
    capacity = dict(vc_gpus.group_by("vc").agg(pl.col("gpus").max()).iter_rows())
    peak = _peak_gpus(vc_index, gpu_num, start, end, len(vc_names))
    nodes = tuple(
        max(int(capacity.get(name, 0)) // gpus_per_node, -(-int(peak[i]) // gpus_per_node))
        for i, name in enumerate(vc_names)
    )
    return Schedule(vc_index=vc_index, gpu_num=gpu_num, start=start, end=end, vc_nodes=nodes)


def daily_total_nodes(grid: np.ndarray, vc_gpus: pl.DataFrame, fallback: int, gpus_per_node: int = GPUS_PER_NODE):
    """Total nodes of each bin: the day's sum over VCs of GPUs // gpus_per_node, else fallback."""
    per_day = vc_gpus.group_by("date").agg((pl.col("gpus") // gpus_per_node).sum().alias("nodes"))
    days = dict(zip(per_day["date"].to_list(), per_day["nodes"].to_list(), strict=True))
    bin_days = grid.astype("datetime64[D]").astype(object)
    return np.array([days.get(d, fallback) for d in bin_days], dtype=np.float64)


def dataset_node_series(jobs: pl.DataFrame, vc_gpus: pl.DataFrame) -> tuple[NodeSeries, int]:
    """Busy and total nodes per 10-minute bin of one cluster's GPU jobs replayed at their recorded times."""
    ran = pl.col("start_time").is_not_null() & (pl.col("end_time") > pl.col("start_time"))
    timed = jobs.filter((pl.col("gpu_num") > 0) & ran)
    if timed.height == 0:
        raise ValueError("no GPU job with a recorded start and end time")
    schedule = schedule_from_jobs(timed, vc_gpus)
    first = timed["start_time"].min().replace(second=0, microsecond=0)
    first = first.replace(minute=first.minute - first.minute % 10)
    last = timed["start_time"].max()  # the trace's end: later bins only hold jobs draining
    grid = pl.datetime_range(first, last, "10m", time_unit="us", eager=True).to_numpy()
    total = daily_total_nodes(grid, vc_gpus, fallback=sum(schedule.vc_nodes))
    return node_series(schedule, grid, total)
