"""Backfill's will-run test as Slurm 22.05's cons_common does it, on hand-worked cases: running jobs are freed in
groups (ends up to the next 30-second clock boundary plus a window that doubles), and the expected start is the
end of the last job freed, not the first moment the job would fit."""

from analytics.slurm_config import NodeSpec, PartitionSpec, SlurmConfig
from sim.slurm.nodes import NodePool
from sim.slurm.plan import WillRun

ALL = 1  # the one node


def _busy(running: list[tuple[int, int]]) -> tuple[NodePool, list]:
    """A one-node pool of 8 GPUs with the running jobs (expected end, GPUs) allocated; their sorted ends."""
    pool = NodePool(SlurmConfig(nodes=(NodeSpec("n1", 8, 32),), partitions=(PartitionSpec("a", (0,)),)))
    ends = []
    for end_s, gpus in running:
        held = ((0, gpus, gpus),)
        pool.allocate(held)
        ends.append((end_s, held, 1))
    return pool, sorted(ends)


def earliest_start(pool: NodePool, job, allowed, ends, now_s: int, epoch_s: int):
    """The will-run test of one backfill pass over the running jobs ends."""
    return WillRun(pool, lambda part: ends, epoch_s).earliest_start(job, allowed, now_s)


def test_the_first_group_reaches_the_next_clock_boundary_plus_30_s():
    pool, ends = _busy([(135, 1), (144, 4), (189, 2), (249, 1)])  # the node is full
    # replay second 135 is clock second 153: boundary 162, window to 192 -> 135, 144 and 189 freed together
    start, _ = earliest_start(pool, (0, 1, 1, 1), ALL, ends, now_s=98, epoch_s=18)
    assert start == 189  # one end at a time would say 135
    # on another clock the boundary of 135 is 150, the window ends at 180: 135 and 144 are freed, 189 is not
    start, _ = earliest_start(pool, (0, 1, 1, 1), ALL, ends, now_s=98, epoch_s=0)
    assert start == 144


def test_the_window_doubles_until_it_holds_the_next_end_and_past_ends_count_from_their_time():
    # a job past its limit (end 161 at second 168) sets the boundary (162); 1 GPU freed is too few for 4 GPUs;
    # the window doubles to 120 s (227 <= 162 + 120), so 227, 254 and 273 are freed together
    pool, ends = _busy([(161, 1), (227, 2), (254, 2), (273, 2), (333, 1)])
    start, _ = earliest_start(pool, (0, 4, 4, 1), ALL, ends, now_s=168, epoch_s=18)
    assert start == 273  # one end at a time would say 254


def test_a_job_that_fits_now_starts_now_and_one_freed_only_by_a_past_end_starts_next_second():
    pool, ends = _busy([(100, 4), (300, 4)])  # full; the first job is past its limit, not yet stopped
    assert earliest_start(pool, (0, 2, 2, 1), ALL, ends, now_s=120, epoch_s=0)[0] == 121
    pool.release(((0, 4, 4),))
    assert earliest_start(pool, (0, 2, 2, 1), ALL, ends, now_s=120, epoch_s=0)[0] == 120
