"""Frozen inputs and outputs of a simulation: the workload as numpy arrays, the config and the result."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from analytics.schema import GPUS_PER_NODE

CHECKPOINT_OVERHEAD_S = {1: 7, 8: 30}  # 1 GPU -> 7 s, <= 8 GPUs -> 30 s, larger -> 60 s (spec §4 SRTF)
LARGE_CHECKPOINT_OVERHEAD_S = 60


def checkpoint_overhead_s(gpu_num: int) -> int:
    """The artifact's checkpoint overhead in seconds for a preempted job of gpu_num GPUs."""
    if gpu_num <= 1:
        return CHECKPOINT_OVERHEAD_S[1]
    if gpu_num <= 8:
        return CHECKPOINT_OVERHEAD_S[8]
    return LARGE_CHECKPOINT_OVERHEAD_S


@dataclass(frozen=True, eq=False)
class SchedulerColumns:
    """What a Slurm replay reads beside the engine's arrays, per job (None where the trace lacks the column)."""

    user: np.ndarray  # str objects ("" unknown)
    account: np.ndarray | None  # str objects
    partition: np.ndarray | None  # str objects
    qos: np.ndarray | None  # str objects
    timelimit_s: np.ndarray | None  # int64, -1 when the job set none
    cpus: np.ndarray | None  # int64
    nodes: np.ndarray | None  # int64, 0 unknown
    timed_out: np.ndarray | None  # bool: the record says its time limit stopped it (its true length is unknown)


@dataclass(frozen=True, eq=False)
class Workload:
    """GPU jobs of one simulation as parallel arrays, sorted by (submit_s, trace order); times in s from t0."""

    job_id: np.ndarray  # int64, the trace's job id
    vc_index: np.ndarray  # int32, index into vc_names
    submit_s: np.ndarray  # int64, seconds since the window start (after the load factor)
    duration_s: np.ndarray  # int64, true run time
    gpu_num: np.ndarray  # int64
    predicted_s: np.ndarray  # float64, the estimator's duration prediction (input column)
    vc_names: tuple[str, ...]
    vc_nodes: tuple[int, ...]  # nodes per VC
    t0_us: int = 0  # window start as a naive-datetime epoch in microseconds (to map results back to dates)
    recorded_start_s: np.ndarray | None = None  # int64 seconds since t0 of the real start, -1 when unknown
    recorded_ended: np.ndarray | None = None  # bool, False for jobs unfinished when the trace was cut (no real JCT)
    scheduler: SchedulerColumns | None = None  # user, account, partition, limits (what the slurm policy reads)
    # per VC, its nodes as steps (second since t0, nodes from then on) where the capacity is known by day; the
    # Slurm twin follows them, the other policies run on vc_nodes
    vc_node_steps: tuple[tuple[tuple[int, int], ...], ...] | None = None

    def __len__(self) -> int:
        return int(self.job_id.shape[0])

    def vc_rows(self, vc: int) -> np.ndarray:
        """Row indices of VC number vc, in submit order."""
        return np.flatnonzero(self.vc_index == vc)

    def after(self, first: int) -> Workload:
        """The workload without its first `first` jobs."""
        return map_jobs(self, lambda _, values: values[first:])

    def take(self, rows: np.ndarray) -> Workload:
        """The workload of the jobs at rows, in that order."""
        return map_jobs(self, lambda _, values: values[rows])


def digest(*parts) -> str:
    """A digest of parts' content (Workloads, dataclasses, arrays and plain values), equal for equal content."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        _feed(h, part)
    return h.hexdigest()


def _feed(h, value) -> None:
    """Feed value's content to the hash h, tagged so that different shapes and types do not collide."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        h.update(type(value).__name__.encode())
        for f in dataclasses.fields(value):
            _feed(h, getattr(value, f.name))
    elif isinstance(value, np.ndarray):
        h.update(f"{value.dtype}{value.shape}".encode())
        h.update("\x1f".join(map(str, value.tolist())).encode() if value.dtype == object else value.tobytes())
    else:
        h.update(repr(value).encode())
    h.update(b"\x1e")


def joined(head: Workload, tail: Workload) -> Workload:
    """tail's workload (its VCs, capacity and t0) with head's jobs before its own (the same VCs and columns)."""
    return map_jobs(tail, lambda name, values: np.concatenate([_column(head, name), values]))


def map_jobs(w: Workload, change: Callable[[str, np.ndarray], np.ndarray]) -> Workload:
    """w with each per-job array, its scheduler columns' too ("scheduler.user", ...), replaced by change(name, it)."""
    n = len(w)
    fields = {}
    for f in dataclasses.fields(w):
        values = getattr(w, f.name)
        if isinstance(values, np.ndarray) and values.shape[:1] == (n,):
            fields[f.name] = change(f.name, values)
    if w.scheduler is not None:
        columns = {
            f.name: change(f"scheduler.{f.name}", getattr(w.scheduler, f.name))
            for f in dataclasses.fields(w.scheduler)
            if getattr(w.scheduler, f.name) is not None
        }
        fields["scheduler"] = dataclasses.replace(w.scheduler, **columns)
    return dataclasses.replace(w, **fields)


def _column(w: Workload, name: str) -> np.ndarray:
    """w's per-job array called name by map_jobs."""
    owner, _, column = name.rpartition(".")
    return getattr(w.scheduler if owner else w, column)


@dataclass(frozen=True)
class SimConfig:
    """How to run: policy, placer, node size, backfilling and the random seed."""

    policy: str = "fifo"
    placer: str = "consolidate"
    gpus_per_node: int = GPUS_PER_NODE
    backfill: bool = False
    seed: int = 0
    las_threshold_gpu_s: float = 3600.0
    backfill_depth: int = 100


@dataclass(frozen=True, eq=False)
class VCResult:
    """Per-job outcome arrays of one VC (row order = the VC's jobs in submit order) plus its timelines."""

    rows: np.ndarray  # indices into the Workload
    start_s: np.ndarray  # int64, first start (-1 when unplaceable)
    end_s: np.ndarray  # int64 (-1 when unplaceable)
    queue_s: np.ndarray  # int64, total waiting time including waits after preemption
    preemptions: np.ndarray  # int64
    priority: np.ndarray  # float64, the priority the policy used (-1 when none was assigned)
    nodes: list[tuple[int, ...]]  # node indices of the (last) placement
    timeline_t_s: np.ndarray  # event times
    timeline_used_gpus: np.ndarray  # GPUs busy just after each event
    timeline_queued_jobs: np.ndarray  # jobs waiting just after each event


@dataclass(frozen=True, eq=False)
class SimResult:
    """A whole simulation: the workload, the config and one VCResult per VC."""

    workload: Workload
    config: SimConfig
    vcs: dict[str, VCResult] = field(default_factory=dict)
    unplaceable: int = 0
    wall_s: float = 0.0
