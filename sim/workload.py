"""Dataset frames -> simulation input: GPU jobs of a cluster, VCs and window; VC sizes; capacity and load scaling."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

import numpy as np
import polars as pl

from analytics.schema import GPUS_PER_NODE, UNFINISHED_STATES, WHOLE_CLUSTER_VC
from sim.model import SchedulerColumns, Workload

_US_PER_S = 1_000_000


class WorkloadError(ValueError):
    """Bad simulation input (unknown cluster or VC, empty window, malformed VC-size file)."""


@dataclass(frozen=True)
class Window:
    """The simulated window: GPU jobs submitted in [start, end] (both inclusive) and the training jobs before it."""

    jobs: pl.DataFrame  # window jobs sorted by (submit_time, job_id)
    history: pl.DataFrame  # GPU jobs of the same cluster submitted before start
    start: datetime
    end: datetime
    vcs: tuple[str, ...]


def day_end(moment: datetime) -> datetime:
    """The last second of moment's day."""
    return datetime.combine(moment.date(), datetime.max.time()).replace(microsecond=0)


def select_window(
    jobs: pl.DataFrame,
    cluster: str,
    vcs: list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> Window:
    """GPU jobs of cluster (and vcs) submitted in [start, end]; defaults span the cluster's whole trace, to the end of
    its last submission's day (as an end day given inclusive: the window's figures count what ran that day). A job with
    an unfinished state is left out unless both its start and end were recorded (an Alibaba pod deleted while
    running): otherwise its duration is not known yet."""
    known = "state" in jobs.columns
    occupied = pl.col("start_time").is_not_null() & pl.col("end_time").is_not_null() if known else pl.lit(True)
    final = pl.col("state").is_null() | ~pl.col("state").is_in(UNFINISHED_STATES) if known else pl.lit(True)
    ended = final | occupied
    gpu_jobs = jobs.filter((pl.col("cluster") == cluster) & (pl.col("gpu_num") > 0) & ended)
    if gpu_jobs.is_empty():
        known = ", ".join(sorted(jobs.get_column("cluster").unique().to_list())) or "none"
        raise WorkloadError(f"cluster {cluster!r} has no GPU jobs (clusters: {known})")
    if vcs:
        unknown = sorted(set(vcs) - set(gpu_jobs.get_column("vc").unique().to_list()))
        if unknown:
            raise WorkloadError(f"VC(s) {', '.join(unknown)} have no GPU jobs in cluster {cluster!r}")
        gpu_jobs = gpu_jobs.filter(pl.col("vc").is_in(vcs))
    start = start or gpu_jobs.get_column("submit_time").min()
    end = end or day_end(gpu_jobs.get_column("submit_time").max())
    window = gpu_jobs.filter(pl.col("submit_time").is_between(start, end)).sort(["submit_time", "job_id"])
    if window.is_empty():
        raise WorkloadError(f"no GPU jobs of {cluster!r} submitted between {start} and {end}")
    history = gpu_jobs.filter(pl.col("submit_time") < start).sort(["submit_time", "job_id"])
    chosen = tuple(vcs) if vcs else tuple(sorted(window.get_column("vc").unique().to_list()))
    return Window(window, history, start, end, chosen)


def vc_nodes_on(vc_gpus: pl.DataFrame, cluster: str, on: date, gpus_per_node: int = GPUS_PER_NODE) -> dict[str, int]:
    """Nodes per VC of cluster on date `on` (GPUs // gpus_per_node); the latest earlier date if `on` is missing."""
    rows = vc_gpus.filter((pl.col("cluster") == cluster) & (pl.col("date") <= on))
    if rows.is_empty():
        rows = vc_gpus.filter(pl.col("cluster") == cluster)
        if rows.is_empty():
            return {}
        on = rows.get_column("date").min()
        rows = rows.filter(pl.col("date") == on)
    latest = rows.sort("date").group_by("vc").agg(pl.col("gpus").last())
    return {vc: int(g) // gpus_per_node for vc, g in latest.iter_rows()}


def _daily_gpus(vc_gpus: pl.DataFrame, cluster: str, first: date, last: date) -> pl.DataFrame | None:
    """Each VC of cluster's GPUs on every day first..last (vc, date, gpus; a day without a row the latest earlier
    day's, none before a VC's first row), None when no day of the window has a row."""
    rows = vc_gpus.filter(pl.col("cluster") == cluster).select("vc", "date", pl.col("gpus").cast(pl.Float64))
    if rows.filter(pl.col("date").is_between(first, last)).is_empty():
        return None
    days = pl.date_range(first, last, "1d", eager=True).alias("date").to_frame()
    grid = rows.select("vc").unique().join(days, how="cross").join(rows, on=["vc", "date"], how="full", coalesce=True)
    grid = grid.sort("vc", "date").with_columns(pl.col("gpus").forward_fill().over("vc").fill_null(0))
    return grid.filter(pl.col("date").is_between(first, last) & pl.col("vc").is_not_null())


def _nodes(gpus: float, gpus_per_node: int) -> int:
    """GPUs over gpus_per_node, rounded, at least 1 when there are GPUs."""
    return max(1, round(gpus / gpus_per_node)) if gpus > 0 else 0


def vc_nodes_mean(
    vc_gpus: pl.DataFrame, cluster: str, first: date, last: date, gpus_per_node: int = GPUS_PER_NODE
) -> dict[str, int]:
    """Nodes per VC of cluster: its mean GPUs over the days first..last (both included; _daily_gpus) over
    gpus_per_node (_nodes; vc_nodes_on's when no day of the window has rows)."""
    grid = _daily_gpus(vc_gpus, cluster, first, last)
    if grid is None:
        return vc_nodes_on(vc_gpus, cluster, first, gpus_per_node)
    mean = grid.group_by("vc").agg(pl.col("gpus").mean())
    return {vc: _nodes(g, gpus_per_node) for vc, g in mean.iter_rows()}


def vc_node_steps(
    vc_gpus: pl.DataFrame, cluster: str, start: datetime, end: datetime, gpus_per_node: int = GPUS_PER_NODE
) -> dict[str, tuple[tuple[int, int], ...]]:
    """Per VC of cluster, its nodes over [start, end] as steps (second since start, nodes from then on): the first
    at second 0, then one at each midnight where the day's nodes change (the days vc_nodes_mean averages, _nodes;
    vc_nodes_on's at second 0 when no day of the window has rows)."""
    grid = _daily_gpus(vc_gpus, cluster, start.date(), end.date())
    if grid is None:
        return {vc: ((0, n),) for vc, n in vc_nodes_on(vc_gpus, cluster, start.date(), gpus_per_node).items()}
    out: dict[str, tuple[tuple[int, int], ...]] = {}
    for (vc,), part in grid.group_by(["vc"], maintain_order=True):
        steps: list[tuple[int, int]] = []
        for day, gpus in part.select("date", "gpus").iter_rows():
            nodes = _nodes(gpus, gpus_per_node)
            if not steps or steps[-1][1] != nodes:
                since = datetime.combine(day, datetime.min.time()) - start
                steps.append((max(0, int(since.total_seconds())), nodes))
        out[vc] = tuple(steps)
    return out


def pool_whole_cluster(window: Window, vc_nodes: dict[str, int]) -> Window:
    """When only the whole cluster's capacity is known (VC `*`, e.g. Alibaba), every VC's jobs share that one pool."""
    if WHOLE_CLUSTER_VC not in vc_nodes or any(vc in vc_nodes for vc in window.vcs if vc != WHOLE_CLUSTER_VC):
        return window
    pooled = (WHOLE_CLUSTER_VC,)
    jobs, history = (df.with_columns(pl.lit(WHOLE_CLUSTER_VC).alias("vc")) for df in (window.jobs, window.history))
    return Window(jobs, history, window.start, window.end, pooled)


def carried_in(window: Window) -> Workload:
    """The jobs submitted before the window that were running or waiting when it opened, as a replay starts from
    them: those running from second 0 for what was left of their run (and of their time limit), then those waiting,
    in submit order, submitted at second 0 (their recorded start kept)."""
    jobs = window.history.filter(
        pl.col("vc").is_in(window.vcs) & pl.col("start_time").is_not_null() & (pl.col("end_time") > window.start)
    )
    w = to_workload(Window(jobs, jobs.clear(), window.start, window.end, window.vcs), {})
    running = w.recorded_start_s < 0
    order = np.concatenate([np.flatnonzero(running), np.flatnonzero(~running)])  # each part in submit order
    left_s = np.maximum(w.duration_s + w.recorded_start_s, 1)  # NOTE: whole seconds: at least one is left
    w = dataclasses.replace(
        w,
        submit_s=np.zeros(len(w), dtype=np.int64),
        duration_s=np.where(running, left_s, w.duration_s),
        recorded_start_s=np.maximum(w.recorded_start_s, 0),
        scheduler=_limits_left(w.scheduler, running, w.recorded_start_s),
    )
    return w.take(order)


def _limits_left(cols: SchedulerColumns | None, running: np.ndarray, start_s: np.ndarray) -> SchedulerColumns | None:
    """The scheduler columns with each running job's time limit what was left of it (at least one second)."""
    if cols is None or cols.timelimit_s is None:
        return cols
    limit_s = cols.timelimit_s
    left_s = np.where(running & (limit_s > 0), np.maximum(limit_s + start_s, 1), limit_s)
    return dataclasses.replace(cols, timelimit_s=left_s)


def read_vc_nodes_csv(path: str | Path) -> dict[str, int]:
    """Read a `vc,nodes` CSV (the artifact's `vc,node num` header is accepted too) into {vc: nodes}."""
    try:
        df = pl.read_csv(path, infer_schema=False)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise WorkloadError(f"{path}: cannot read VC sizes: {exc}") from exc
    nodes_col = next((c for c in ("nodes", "node num", "node_num") if c in df.columns), None)
    if "vc" not in df.columns or nodes_col is None:
        raise WorkloadError(f"{path}: expected columns 'vc,nodes', found {','.join(df.columns)}")
    out = {}
    for row, (vc, raw) in enumerate(df.select("vc", nodes_col).iter_rows(), start=2):
        if not raw or not raw.strip().isdigit():
            raise WorkloadError(f"{path}: row {row}, column {nodes_col!r}: expected a whole number, got {raw!r}")
        out[vc] = int(raw)
    return out


def scale_nodes(vc_nodes: dict[str, int], factor: float) -> dict[str, int]:
    """Multiply every VC's node count by factor (rounded, at least one node for a non-empty VC)."""
    if factor <= 0:
        raise WorkloadError(f"capacity scale must be > 0, got {factor}")
    return {vc: _scaled(n, factor) for vc, n in vc_nodes.items()}


def scale_steps(
    steps: tuple[tuple[int, int], ...], load_factor: float, capacity_factor: float
) -> tuple[tuple[int, int], ...]:
    """A VC's node steps (vc_node_steps) on a scenario's time axis, compressed by the load factor as its submissions
    are (to_workload), with each step's nodes scaled as scale_nodes scales them."""
    if capacity_factor <= 0:
        raise WorkloadError(f"capacity scale must be > 0, got {capacity_factor}")
    return tuple((int(_compressed(t, load_factor)), _scaled(n, capacity_factor)) for t, n in steps)


def _scaled(nodes: int, factor: float) -> int:
    """nodes times factor, rounded, at least one when there are nodes."""
    return max(1, round(nodes * factor)) if nodes > 0 else 0


def _compressed(t_s, load_factor: float):
    """Seconds (a number or an array) on a time axis compressed by the load factor."""
    return t_s if load_factor == 1.0 else np.floor(np.asarray(t_s) / load_factor).astype(np.int64)


def _seconds_since(col: str, t0: datetime) -> pl.Expr:
    return ((pl.col(col) - pl.lit(t0)).dt.total_microseconds() // _US_PER_S).cast(pl.Int64)


def _ended(df: pl.DataFrame) -> np.ndarray | None:
    """Per job: whether it had ended when the trace was cut (None when the trace has no states)."""
    if "state" not in df.columns:
        return None
    return (~df.get_column("state").is_in(UNFINISHED_STATES)).fill_null(True).to_numpy()


def _strings(df: pl.DataFrame, col: str) -> np.ndarray | None:
    return df.get_column(col).fill_null("").to_numpy().astype(object) if col in df.columns else None


def _ints(df: pl.DataFrame, col: str, missing: int) -> np.ndarray | None:
    if col not in df.columns:
        return None
    return df.get_column(col).fill_null(missing).to_numpy().astype(np.int64)


def scheduler_columns(df: pl.DataFrame) -> SchedulerColumns:
    """The per-job columns a Slurm replay reads, from the jobs frame (None for those the trace lacks)."""
    timed_out = None
    if "state" in df.columns:
        timed_out = (df.get_column("state") == "TIMEOUT").fill_null(False).to_numpy()
    user = _strings(df, "user")
    return SchedulerColumns(
        user=user if user is not None else np.full(df.height, "", dtype=object),
        account=_strings(df, "account"),
        partition=_strings(df, "partition"),
        qos=_strings(df, "qos"),
        timelimit_s=_ints(df, "timelimit_s", -1),
        cpus=None if "cpu_num" not in df.columns else np.ceil(df.get_column("cpu_num").fill_null(1).to_numpy()),
        nodes=_ints(df, "node_num", 0),
        timed_out=timed_out,
    )


def to_workload(
    window: Window,
    vc_nodes: dict[str, int],
    predicted_s: np.ndarray | None = None,
    load_factor: float = 1.0,
) -> Workload:
    """Arrays for the engine; VCs absent from vc_nodes get 0 nodes (their jobs are reported unplaceable)."""
    if load_factor <= 0 or not math.isfinite(load_factor):
        raise WorkloadError(f"load factor must be a positive number, got {load_factor}")
    names = window.vcs
    df = window.jobs.with_columns(
        _seconds_since("submit_time", window.start).alias("_submit_s"),
        pl.when(pl.col("start_time").is_not_null())
        .then(_seconds_since("start_time", window.start))
        .otherwise(-1)
        .alias("_start_s"),
        pl.col("vc").replace_strict(names, list(range(len(names))), default=-1).cast(pl.Int32).alias("_vc"),
    ).filter(pl.col("_vc") >= 0)
    submit_s = df.get_column("_submit_s").to_numpy()
    submit_s = _compressed(submit_s, load_factor)  # compress inter-arrival times
    n = df.height
    pred = np.asarray(predicted_s, dtype=np.float64) if predicted_s is not None else np.zeros(n)
    return Workload(
        job_id=df.get_column("job_id").to_numpy().astype(np.int64),
        vc_index=df.get_column("_vc").to_numpy(),
        submit_s=submit_s.astype(np.int64),
        duration_s=df.get_column("duration").fill_null(0).clip(lower_bound=0).to_numpy().astype(np.int64),
        gpu_num=df.get_column("gpu_num").to_numpy().astype(np.int64),
        predicted_s=pred,
        vc_names=names,
        vc_nodes=tuple(int(vc_nodes.get(v, 0)) for v in names),
        t0_us=int(pl.Series([window.start]).dt.epoch("us")[0]),
        recorded_start_s=df.get_column("_start_s").to_numpy().astype(np.int64),
        recorded_ended=_ended(df),
        scheduler=scheduler_columns(df),
    )
