"""Backfill's will-run test as Slurm 22.05's cons_common does it, on hand-worked cases: running jobs are freed in
groups (ends up to the next 30-second clock boundary plus a window that doubles), and the expected start is the
end of the last job freed, not the first moment the job would fit."""

import numpy as np

from analytics.slurm_config import NodeSpec, PartitionSpec, SlurmConfig
from sim.slurm.jit import NONE
from sim.slurm.plan import earliest_start as will_run
from sim.slurm.plan import new_will_run
from sim.slurm.run import Placements
from sim.slurm.tables import cluster_table

ALL = np.ones(1, dtype=np.bool_)  # the one node


class _Busy:
    """A one-node cluster of 8 GPUs with running jobs (expected end, GPUs), each on the node with its GPUs."""

    def __init__(self, running: list[tuple[int, int]]):
        self.cl = cluster_table(SlurmConfig(nodes=(NodeSpec("n1", 8, 32),), partitions=(PartitionSpec("a", (0,)),)))
        gpus = np.array([g for _, g in running], dtype=np.int64)
        n = len(running)
        self.pl = Placements(np.arange(n + 1), np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64), gpus, gpus)
        order = sorted(range(n), key=lambda j: (running[j][0], j))
        self.running = (np.array([running[j][0] for j in order]), np.array(order), n)
        self.free_g = self.cl.node_gpus - gpus.sum()
        self.free_c = self.cl.node_cpus - gpus.sum()

    def release(self, gpus: int) -> None:
        self.free_g += gpus
        self.free_c += gpus


def earliest_start(busy: _Busy, job, allowed, now_s: int, epoch_s: int):
    """The will-run test's start for job (partition, gpus, cpus, nodes), None if never."""
    out = [np.zeros(job[3], dtype=np.int64) for _ in range(3)]
    wr = new_will_run(1, len(busy.running[1]))
    args = (busy.cl, busy.free_g, busy.free_c, busy.running, busy.pl, job, allowed, now_s, epoch_s, wr)
    start = will_run(*args, *out)
    return None if start == NONE else start


def test_the_first_group_reaches_the_next_clock_boundary_plus_30_s():
    busy = _Busy([(135, 1), (144, 4), (189, 2), (249, 1)])  # the node is full
    # replay second 135 is clock second 153: boundary 162, window to 192 -> 135, 144 and 189 freed together
    start = earliest_start(busy, (0, 1, 1, 1), ALL, now_s=98, epoch_s=18)
    assert start == 189  # one end at a time would say 135
    # on another clock the boundary of 135 is 150, the window ends at 180: 135 and 144 are freed, 189 is not
    start = earliest_start(busy, (0, 1, 1, 1), ALL, now_s=98, epoch_s=0)
    assert start == 144


def test_the_window_doubles_until_it_holds_the_next_end_and_past_ends_count_from_their_time():
    # a job past its limit (end 161 at second 168) sets the boundary (162); 1 GPU freed is too few for 4 GPUs;
    # the window doubles to 120 s (227 <= 162 + 120), so 227, 254 and 273 are freed together
    busy = _Busy([(161, 1), (227, 2), (254, 2), (273, 2), (333, 1)])
    start = earliest_start(busy, (0, 4, 4, 1), ALL, now_s=168, epoch_s=18)
    assert start == 273  # one end at a time would say 254


def test_a_job_that_fits_now_starts_now_and_one_freed_only_by_a_past_end_starts_next_second():
    busy = _Busy([(100, 4), (300, 4)])  # full; the first job is past its limit, not yet stopped
    assert earliest_start(busy, (0, 2, 2, 1), ALL, now_s=120, epoch_s=0) == 121
    busy.release(4)
    assert earliest_start(busy, (0, 2, 2, 1), ALL, now_s=120, epoch_s=0) == 120
