"""sim.engine.backfill: the head's reservation and the EASY backfill loop (hand-checked), and one engine trace."""

from __future__ import annotations

import numpy as np

from sim import engine
from sim.engine.backfill import NO_SITE, Reservation, backfill, reservation
from sim.engine.loop import NEVER
from sim.model import SimConfig, Workload

GPUS = [4, 4, 6, 2]  # GPUs of jobs 0..3


def test_the_shadow_is_the_first_end_after_which_the_head_fits_and_the_spare_is_what_is_left():
    # 8 GPUs, all used by jobs 0 and 1 (ending at 10 and 20); the 6-GPU head fits once both have ended
    held = reservation(0, 8, GPUS[2], [(10, 0), (20, 1)], GPUS, lambda end_s: 8)
    assert held == Reservation(0, 20, 2)


def test_the_capacity_at_each_end_counts():
    # capacity 12 from second 10 on: the head fits as soon as job 0 ends
    held = reservation(1, 8, GPUS[2], [(10, 0), (20, 1)], GPUS, lambda end_s: 8 if end_s < 10 else 12)
    assert held == Reservation(1, 10, 2)


def test_a_head_that_never_fits_has_no_shadow():
    assert reservation(0, 8, 16, [(10, 0), (20, 1)], GPUS, lambda end_s: 8) == Reservation(0, NEVER, 0)


class Sites:
    """Two sites; try_start records its calls and starts each job on the first site it may use."""

    def __init__(self, held):
        self.held, self.calls, self.started = held, [], []

    def reserve(self):
        self.calls.append("reserve")
        return self.held

    def try_start(self, j, scope, avoid):
        self.calls.append((j, avoid))
        site = next(s for s in (scope if scope is not None else (0, 1)) if s != avoid)
        self.started.append((j, site))
        return site


def test_a_late_job_needing_more_than_the_spare_avoids_the_reserved_site_and_one_within_it_shrinks_it():
    # head reserved on site 0 at second 100 with 2 GPUs spare; now = 0
    sites = Sites(Reservation(0, 100, 2))
    dur_s = [50, 500, 500, 500]
    gpus = [8, 4, 2, 1]
    backfill(0, [(0, None), (1, None), (2, None), (3, None)], dur_s, gpus, sites.reserve, sites.try_start)
    # job 0 ends in time: anywhere; job 1 is late and too big: not on site 0; job 2 fits the spare: site 0 allowed,
    # spare now 0; job 3 (1 GPU) is then too big for the spare
    assert sites.calls == ["reserve", (0, NO_SITE), (1, 0), (2, NO_SITE), (3, 0)]
    assert sites.started == [(0, 0), (1, 1), (2, 0), (3, 1)]
    assert sites.held.spare_gpus == 0


def test_a_late_job_started_off_the_reserved_site_leaves_the_spare_alone():
    sites = Sites(Reservation(0, 100, 2))
    backfill(0, [(0, [1]), (1, None)], [500, 500], [2, 2], sites.reserve, sites.try_start)
    assert sites.started == [(0, 1), (1, 0)]
    assert sites.held.spare_gpus == 0


def test_the_reservation_is_made_only_once_a_candidate_could_start():
    sites = Sites(Reservation(0, 100, 0))
    backfill(0, [(0, None), (1, None)], [5, 5], [1, 1], sites.reserve, sites.try_start, lambda j, scope: j == 1)
    assert sites.calls == ["reserve", (1, NO_SITE)]


def test_engine_backfill_uses_the_spare_gpus_and_keeps_late_jobs_off_the_reserved_vc():
    # one VC of two 8-GPU nodes: job 0 (8 GPUs) runs to 100; head job 1 (12 GPUs) is reserved at 100 with 4 spare;
    # job 2 (4 GPUs, late) takes the spare; job 3 (2 GPUs, late) would delay the head and waits although 4 GPUs are
    # free; job 4 (2 GPUs) ends by 100 and starts at once
    jobs = [(0, 100, 8), (1, 10, 12), (2, 500, 4), (3, 500, 2), (4, 50, 2)]
    submit, dur, gpu = (np.asarray(c, dtype=np.int64) for c in zip(*jobs, strict=True))
    w = Workload(
        job_id=np.arange(5, dtype=np.int64),
        vc_index=np.zeros(5, dtype=np.int32),
        submit_s=submit,
        duration_s=dur,
        gpu_num=gpu,
        predicted_s=dur.astype(np.float64),
        vc_names=("vc",),
        vc_nodes=(2,),
    )
    assert engine.run(SimConfig(policy="fifo", backfill=True), w).vcs["vc"].start_s.tolist() == [0, 100, 2, 110, 4]
    assert engine.run(SimConfig(policy="fifo"), w).vcs["vc"].start_s.tolist() == [0, 100, 100, 110, 110]
