"""Scheduling policies, each a small registered class giving the queue order (spec §4, §4.1).

Non-preemptive policies (`fifo`, `sjf`, `qssf`) give a sort key per waiting job; the engine starts jobs in that
order and stops at the first that cannot be placed. Preemptive policies (`srtf`, `las`) give keys for waiting and
running jobs; each event the engine walks all of them in key order against the VC's GPU quota.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

NO_PRIORITY = -1.0


@dataclass(frozen=True)
class VCJobs:
    """Read-only per-VC job arrays the policies look at (index = position in the VC's submit order)."""

    duration_s: np.ndarray
    gpu_num: np.ndarray
    predicted_s: np.ndarray


class Fifo:
    """First come, first served (trace order among equal submit seconds)."""

    name = "fifo"
    preemptive = False

    def queue_key(self, jobs: VCJobs, j: int) -> tuple:
        """Sort key of waiting job j: its trace position."""
        return (j,)

    def idle_key(self, jobs: VCJobs, j: int) -> tuple | None:
        """Key for jobs arriving into an empty queue, or None when it is the queue key."""
        return None

    def priority(self, jobs: VCJobs, j: int) -> float:
        """The priority value reported for waiting job j (none for FIFO and SJF)."""
        return NO_PRIORITY


class Sjf(Fifo):
    """Shortest (true) job first, non-preemptive; ties keep trace order."""

    name = "sjf"

    def queue_key(self, jobs: VCJobs, j: int) -> tuple:
        """Sort key of waiting job j: its true duration, then trace position."""
        return (int(jobs.duration_s[j]), j)


class Qssf(Fifo):
    """Quasi-shortest-service-first: predicted duration × GPUs, smallest first, non-preemptive.

    As in the artifact, jobs arriving into an empty queue are first tried in GPU-count order without a priority
    (it stays -1 for those that start at once); every job still waiting afterwards is ordered by priority.
    """

    name = "qssf"

    def queue_key(self, jobs: VCJobs, j: int) -> tuple:
        """Sort key of waiting job j: priority, then GPUs, then trace position."""
        return (self.priority(jobs, j), int(jobs.gpu_num[j]), j)

    def idle_key(self, jobs: VCJobs, j: int) -> tuple | None:
        """Key for jobs arriving into an empty queue: GPUs, then trace position."""
        return (int(jobs.gpu_num[j]), j)

    def priority(self, jobs: VCJobs, j: int) -> float:
        """Predicted GPU time of job j."""
        return float(jobs.predicted_s[j]) * int(jobs.gpu_num[j])


class Srtf:
    """Shortest remaining time first (oracle), preemptive with checkpoint overheads (artifact rules).

    A running job's remaining time at tick t is end_tick - 1 - t, so ordering running jobs by end tick orders them
    by remaining time; on equal remaining time waiting jobs come first (queue-entry order), then running ones
    (start/resume order), as in the artifact's stable sort of queue + running (spec §4.1.3).
    """

    name = "srtf"
    preemptive = True

    def waiting_key(self, jobs: VCJobs, j: int, remain_s: int, entry_seq: int, attained_gpu_s: int) -> tuple:
        """Walk key of a waiting job: remaining time, then queue-entry order."""
        return (remain_s, entry_seq)

    def running_key(self, jobs: VCJobs, j: int, end_tick: int, run_seq: int, attained_gpu_s: int) -> tuple:
        """Fixed key of a running job: its end tick, then start/resume order."""
        return (end_tick, run_seq)

    def boundary(self, waiting_key: tuple, now_s: int) -> tuple:
        """Running keys below this come before the waiting job in the walk at tick now_s."""
        return (waiting_key[0] + now_s + 1,)

    def next_change_s(self, jobs: VCJobs, j: int, now_s: int, attained_gpu_s: int) -> int | None:
        """Tick at which a running job's key changes (never for SRTF)."""
        return None


class Las:
    """Least attained GPU service, two queues (Tiresias-style): below the threshold first, FIFO within a queue."""

    name = "las"
    preemptive = True

    def __init__(self, threshold_gpu_s: float = 3600.0):
        self.threshold_gpu_s = threshold_gpu_s

    def _level(self, attained_gpu_s: int) -> int:
        return 0 if attained_gpu_s < self.threshold_gpu_s else 1

    def waiting_key(self, jobs: VCJobs, j: int, remain_s: int, entry_seq: int, attained_gpu_s: int) -> tuple:
        """Walk key of a waiting job: its queue level, then trace position."""
        return (self._level(attained_gpu_s), j)

    def running_key(self, jobs: VCJobs, j: int, end_tick: int, run_seq: int, attained_gpu_s: int) -> tuple:
        """Key of a running job (changes when it is demoted): its queue level, then trace position."""
        return (self._level(attained_gpu_s), j)

    def boundary(self, waiting_key: tuple, now_s: int) -> tuple:
        """Running keys below this come before the waiting job in the walk."""
        return waiting_key

    def next_change_s(self, jobs: VCJobs, j: int, now_s: int, attained_gpu_s: int) -> int | None:
        """Tick at which a running job is demoted to the second queue (None when it already is)."""
        if attained_gpu_s >= self.threshold_gpu_s:
            return None
        gpus = int(jobs.gpu_num[j])
        return now_s + int(np.ceil((self.threshold_gpu_s - attained_gpu_s) / gpus))


class SlurmTwin:
    """The cluster's own Slurm scheduler, replayed over all partitions at once by sim.slurm (not a VC queue order)."""

    name = "slurm"
    preemptive = False
    cluster_wide = True


POLICIES = {"fifo": Fifo, "sjf": Sjf, "qssf": Qssf, "srtf": Srtf, "las": Las, "slurm": SlurmTwin}
CLUSTER_WIDE = tuple(name for name, cls in POLICIES.items() if getattr(cls, "cluster_wide", False))


def split_names(names: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The registered policy names among names in the registry's order, and the unknown ones as given."""
    given = list(names)
    return tuple(p for p in POLICIES if p in given), tuple(n for n in given if n not in POLICIES)


def check_names(names: Iterable[str]) -> tuple[str, ...]:
    """The policy names in the registry's order, or ValueError naming the first unknown one and the choices."""
    known, unknown = split_names(names)
    if unknown:
        raise ValueError(f"unknown policy {unknown[0]!r}; expected one of {', '.join(POLICIES)}")
    return known


def get(name: str, las_threshold_gpu_s: float = 3600.0):
    """An instance of the policy registered as name, or ValueError naming the choices."""
    check_names([name])
    return Las(las_threshold_gpu_s) if name == "las" else POLICIES[name]()
