"""sim.engine.backfill: the head's reservation and the EASY backfill loop (hand-checked), and one engine trace."""

from __future__ import annotations

import numpy as np

from sim import engine, placers
from sim.cluster import VCNodes
from sim.engine.backfill import NO_SITE, Reservation, backfill, reservation
from sim.engine.loop import NEVER
from sim.model import SimConfig, Workload

GPUS = [4, 4, 6, 2]  # GPUs of jobs 0..3


def test_the_shadow_is_the_first_end_after_which_the_head_fits_and_the_spare_is_what_is_left():
    # 8 GPUs, all used by jobs 0 and 1 (ending at 10 and 20); the 6-GPU head fits once both have ended
    held = reservation(0, 8, GPUS[2], 30, [(10, 0), (20, 1)], GPUS, lambda start_s, end_s: 8)
    assert held == Reservation(0, 20, 2)


def test_the_capacity_over_the_heads_run_counts():
    # 12 GPUs on [0, 35), 8 from 35: the head (30 s) fits after job 0 ends at 10 only if it would end before 35
    def capacity_over(start_s, end_s):
        return 12 if end_s < 35 else 8

    assert reservation(1, 8, GPUS[2], 20, [(10, 0), (20, 1)], GPUS, capacity_over) == Reservation(1, 10, 2)
    assert reservation(1, 8, GPUS[2], 30, [(10, 0), (20, 1)], GPUS, capacity_over) == Reservation(1, 20, 2)


def test_a_head_that_never_fits_has_no_shadow():
    assert reservation(0, 8, 16, 5, [(10, 0), (20, 1)], GPUS, lambda start_s, end_s: 8) == Reservation(0, NEVER, 0)


class Sites:
    """Two sites 0 and 1; a job is placed on the first site of its scope (both if None) and calls are recorded."""

    def __init__(self, held, room=(0, 1)):
        self.held, self.room, self.calls, self.started = held, room, [], []

    def reserve(self):
        self.calls.append("reserve")
        return self.held

    def place(self, j, now_s, scope):
        self.calls.append((j, None if scope is None else tuple(scope)))
        return next((s for s in (scope if scope is not None else (0, 1)) if s in self.room), NO_SITE)

    def start(self, j, now_s, site):
        self.started.append((j, site))

    def without(self, j, scope, site):
        return [s for s in (scope if scope is not None else (0, 1)) if s != site]

    def backfill(self, now_s, candidates, gpus, duration_s, lazy=False):
        sites = self.reserve, self.place, self.start, self.without
        assert backfill(now_s, candidates, gpus, duration_s, *sites, lazy) == [j for j, _ in self.started]


def test_a_late_job_needing_more_than_the_spare_avoids_the_reserved_site_and_one_within_it_shrinks_it():
    # head reserved on site 0 at second 100 with 2 GPUs spare; now = 0
    sites = Sites(Reservation(0, 100, 2))
    sites.backfill(0, [(0, None), (1, None), (2, None), (3, None)], [8, 4, 2, 1], [50, 500, 500, 500])
    # job 0 ends in time: anywhere; job 1 is late and too big: not on site 0; job 2 fits the spare: site 0 allowed,
    # spare now 0; job 3 (1 GPU) is then too big for the spare
    assert sites.calls == ["reserve", (0, None), (1, (1,)), (2, None), (3, (1,))]
    assert sites.started == [(0, 0), (1, 1), (2, 0), (3, 1)]


def test_a_late_job_started_off_the_reserved_site_leaves_the_spare_alone_and_one_with_no_site_left_is_not_placed():
    # all late; job 0 (2 GPUs) starts on site 1, so job 2 (2 GPUs) may still take the spare on site 0, and job 3
    # (1 GPU) may not; job 1 (4 GPUs, site 0 only) is not placed at all
    sites = Sites(Reservation(0, 100, 2))
    sites.backfill(0, [(0, [1]), (1, [0]), (2, None), (3, None)], [2, 4, 2, 1], [500, 500, 500, 500])
    assert sites.calls == ["reserve", (0, (1,)), (2, None), (3, (1,))]
    assert sites.started == [(0, 1), (2, 0), (3, 1)]


def test_a_lazy_reservation_is_made_only_once_a_candidate_is_placed_and_keeps_its_placement():
    sites = Sites(Reservation(0, 100, 0), room=(1,))
    sites.backfill(0, [(0, [0]), (1, None)], [1, 1], [5, 5], lazy=True)
    assert sites.calls == [(0, (0,)), (1, None), "reserve"]
    assert sites.started == [(1, 1)]


def test_a_lazily_placed_late_job_on_the_reserved_site_is_placed_again_without_it():
    sites = Sites(Reservation(0, 100, 0))
    sites.backfill(0, [(0, None), (1, None)], [2, 2], [500, 50], lazy=True)
    assert sites.calls == [(0, None), "reserve", (0, (1,)), (1, None)]
    assert sites.started == [(0, 1), (1, 0)]


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


def test_every_placer_refuses_more_gpus_than_are_free_without_drawing_a_random_number():
    # the engine's backfilling leaves such jobs out instead of asking the placer
    vc = VCNodes(2, 8)
    vc.allocate(((0, 8), (1, 4)))
    for name in placers.PLACERS:
        placer = placers.get(name, seed=1)
        rng = getattr(placer, "rng", None)
        state = rng.bit_generator.state if rng is not None else None
        assert placer(vc, 5) is None
        assert (rng.bit_generator.state if rng is not None else None) == state
