"""Per-job outcome lists of one VC run, filled by the VC runs and frozen into a VCResult at the end."""

from __future__ import annotations

import numpy as np

from sim.cluster import Allocation
from sim.model import VCResult
from sim.policies import NO_PRIORITY


class Outcome:
    """Mutable per-job outcome lists of one VC run (converted to a VCResult at the end)."""

    def __init__(self, n: int):
        self.start_s = [-1] * n
        self.end_s = [-1] * n
        self.queue_s = [0] * n
        self.preemptions = [0] * n
        self.priority = [NO_PRIORITY] * n
        self.alloc: list[Allocation] = [()] * n
        self.tl_t: list[int] = []
        self.tl_used: list[int] = []
        self.tl_queued: list[int] = []

    def sample(self, now_s: int, used_gpus: int, queued: int) -> None:
        """Record the VC state just after the event at now_s."""
        self.tl_t.append(now_s)
        self.tl_used.append(used_gpus)
        self.tl_queued.append(queued)

    def to_result(self, rows: np.ndarray, placeable: np.ndarray) -> VCResult:
        """Freeze the lists into a VCResult (unplaceable jobs keep start = end = -1)."""
        start = np.asarray(self.start_s, dtype=np.int64)
        end = np.asarray(self.end_s, dtype=np.int64)
        queue = np.where(placeable, np.asarray(self.queue_s, dtype=np.int64), -1)
        return VCResult(
            rows=rows,
            start_s=start,
            end_s=end,
            queue_s=queue,
            preemptions=np.asarray(self.preemptions, dtype=np.int64),
            priority=np.asarray(self.priority, dtype=np.float64),
            nodes=[tuple(n for n, _ in a) for a in self.alloc],
            timeline_t_s=np.asarray(self.tl_t, dtype=np.int64),
            timeline_used_gpus=np.asarray(self.tl_used, dtype=np.int64),
            timeline_queued_jobs=np.asarray(self.tl_queued, dtype=np.int64),
        )
