"""ClusterQueues: FIFO + EASY backfill over several VCs, one queue per cluster or per VC (hand-checked traces)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.synthetic_queue.cluster_queues import (
    BACKFILL_DEPTH,
    ClusterQueues,
    DailyCapacity,
    Placer,
    VcState,
    fixed_placer,
)


def preferred_best_fit(vcs: list[VcState], fits: list[list[int]], preferred: list[int]) -> Placer:
    """A placer choosing among several VCs: the job's preferred VC when it holds the job now, else the allowed VC
    with the fewest spare GPUs."""

    def place(j: int, t_s: int, among: Sequence[int] | None) -> int:
        allowed = fits[j] if among is None else [v for v in among if v in fits[j]]
        if preferred[j] in allowed and vcs[preferred[j]].fits_now(j, t_s):
            return preferred[j]
        ready = [v for v in allowed if vcs[v].fits_now(j, t_s)]
        return min(ready, key=lambda v: vcs[v].free_gpus(t_s)) if ready else -1

    return place


def run(submit, dur, gpus, caps, fits=None, preferred=None):
    """Start seconds and VCs of the jobs on VCs of constant capacity caps (a list of GPUs per VC)."""
    n = len(submit)
    start = [-1] * n
    vcs = [VcState(DailyCapacity([c]), list(gpus), list(dur), start) for c in caps]
    fits = fits or [list(range(len(caps)))] * n
    place = preferred_best_fit(vcs, fits, preferred or [f[0] for f in fits])
    vc = ClusterQueues(vcs, fits, place).run(list(submit))
    return start, vc


def test_a_job_starts_in_another_vc_when_its_preferred_one_is_full():
    # job 0 fills VC 0; job 1 prefers VC 0 but starts at once in VC 1
    start, vc = run([0, 5], [100, 10], [8, 4], [8, 8], preferred=[0, 0])
    assert start == [0, 5] and vc == [0, 1]


def test_best_fit_picks_the_vc_with_the_fewest_spare_gpus():
    # VC 0 has 16 free, VC 1 has 4 free after job 0: the 4-GPU job goes to VC 1 when its preferred VC 2 is full
    start, vc = run([0, 0, 1], [100, 100, 10], [4, 8, 4], [16, 8, 8], preferred=[1, 2, 2])
    assert vc == [1, 2, 1] and start == [0, 0, 1]


def test_the_queue_waits_for_the_first_vc_that_frees_room():
    # both VCs busy until 50 and 80; the waiting 8-GPU job starts at 50 in VC 1, not in its preferred VC 0
    start, vc = run([0, 0, 1], [80, 50, 10], [8, 8, 8], [8, 8], preferred=[0, 1, 0])
    assert start == [0, 0, 50] and vc == [0, 1, 1]


def test_backfill_in_another_vc_does_not_wait_for_the_blocked_head():
    # job 2 (16 GPUs) can only run in VC 0 and waits for job 0; job 3 only fits VC 1 and starts at once
    fits = [[0], [1], [0], [1]]
    start, _ = run([0, 0, 1, 2], [100, 10, 10, 1_000], [8, 4, 16, 4], [16, 8], fits=fits)
    assert start == [0, 0, 100, 10] or start == [0, 0, 100, 2]
    assert start[3] == 2  # VC 1 had 4 GPUs free at second 2


def test_easy_backfill_keeps_the_head_reservation_in_its_vc():
    # head job 1 (8 GPUs) waits for job 0 (ends at 10) in the only VC; a short job backfills, a long one must not
    start, _ = run([0, 1, 2, 3], [10, 5, 3, 30], [4, 8, 4, 4], [8])
    assert start == [0, 10, 2, 15]


def test_a_late_backfill_job_leaves_the_reserved_vc_to_the_head_and_runs_in_another():
    # head job 1 (8 GPUs, VC 0 only) is reserved in VC 0 at 100 with no GPUs spare: job 2 (long) prefers VC 0, where
    # 4 GPUs are free, but starts in VC 1; job 3 ends before 100 and starts in VC 0
    fits = [[0], [0], [0, 1], [0, 1]]
    start, vc = run([0, 1, 2, 3], [100, 10, 1_000, 50], [4, 8, 4, 4], [8, 8], fits=fits, preferred=[0, 0, 0, 0])
    assert start == [0, 100, 2, 3] and vc == [0, 0, 1, 0]


def test_a_job_that_fits_no_vc_is_never_started_and_does_not_block():
    start, vc = run([0, 1], [10, 10], [32, 4], [8, 16])
    assert start == [-1, 1] and vc == [-1, 0]


@st.composite
def clusters(draw):
    n = draw(st.integers(1, 50))
    submit = np.cumsum(draw(st.lists(st.integers(0, 5_000), min_size=n, max_size=n))).tolist()
    dur = draw(st.lists(st.integers(0, 50_000), min_size=n, max_size=n))
    gpus = draw(st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=n, max_size=n))
    caps = draw(st.lists(st.sampled_from([8, 16, 32]), min_size=1, max_size=4))
    return submit, dur, gpus, caps


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=clusters())
def test_no_vc_is_ever_over_capacity_and_every_job_starts_once_after_submit(trace):
    submit, dur, gpus, caps = trace
    start, vc = run(submit, dur, gpus, caps)
    ran = [j for j in range(len(submit)) if start[j] >= 0]
    assert all(start[j] >= submit[j] for j in ran)
    assert all(vc[j] >= 0 for j in ran) and all(vc[j] == -1 for j in range(len(submit)) if start[j] < 0)
    assert all(gpus[j] > max(caps) for j in range(len(submit)) if start[j] < 0)  # only jobs no VC holds never run
    for t in {start[j] for j in ran}:
        for v, cap in enumerate(caps):
            busy = sum(gpus[j] for j in ran if vc[j] == v and start[j] <= t < start[j] + dur[j])
            assert busy <= cap
    assert run(submit, dur, gpus, caps) == (start, vc)  # deterministic


def test_fixed_placer_only_uses_the_jobs_own_vc():
    start = [-1, -1]
    vcs = [VcState(DailyCapacity([8]), [8, 8], [10, 10], start) for _ in range(2)]
    place = fixed_placer(vcs, [0, 0])
    ClusterQueues(vcs, [[0], [0]], place).run([0, 1])
    assert start == [0, 10]


def _per_vc_run(per_vc: bool) -> list[int]:
    """A blocked head in VC 0 with more waiting jobs behind it than EASY looks at, then a job of VC 1."""
    n = BACKFILL_DEPTH + 3
    gpus, dur, own = [8] * (n - 1) + [4], [100] * (n - 1) + [10], [0] * (n - 1) + [1]
    start = [-1] * n
    vcs = [VcState(DailyCapacity([8]), gpus, dur, start) for _ in range(2)]
    ClusterQueues(vcs, [[v] for v in own], fixed_placer(vcs, own), per_vc=per_vc).run(list(range(n)))
    return start


def test_with_a_queue_per_vc_a_full_vc_holds_back_only_its_own_jobs():
    # one cluster queue: the VC-1 job sits beyond the backfill depth behind VC 0's jobs; one queue per VC: it starts
    assert _per_vc_run(per_vc=False)[-1] > BACKFILL_DEPTH
    assert _per_vc_run(per_vc=True)[-1] == BACKFILL_DEPTH + 2
