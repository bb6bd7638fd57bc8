"""Hand-checked small traces: golden per-job start/end times for every policy, and placer choices."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import engine, placers
from sim.cluster import VCNodes
from sim.model import SimConfig, Workload


def workload(jobs, n_nodes=1, predicted=None):
    submit, dur, gpu = (np.asarray(c, dtype=np.int64) for c in zip(*jobs, strict=True))
    n = len(jobs)
    return Workload(
        job_id=np.arange(n, dtype=np.int64),
        vc_index=np.zeros(n, dtype=np.int32),
        submit_s=submit,
        duration_s=dur,
        gpu_num=gpu,
        predicted_s=np.asarray(predicted if predicted is not None else dur, dtype=np.float64),
        vc_names=("vc",),
        vc_nodes=(n_nodes,),
    )


def simulate(jobs, policy, placer="consolidate", n_nodes=1, **kw):
    return engine.run(SimConfig(policy=policy, placer=placer, **kw), workload(jobs, n_nodes)).vcs["vc"]


# (submit, duration, gpus) on one 8-GPU node
TRACE_A = [(0, 10, 8), (1, 5, 4), (2, 2, 4), (3, 1, 2)]
TRACE_B = [(0, 10, 8), (1, 3, 8), (2, 4, 1)]


@pytest.mark.parametrize(
    ("trace", "policy", "starts", "ends"),
    [
        (TRACE_A, "fifo", [0, 10, 10, 12], [10, 15, 12, 13]),
        (TRACE_A, "sjf", [0, 11, 10, 10], [10, 16, 12, 11]),
        (TRACE_A, "qssf", [0, 11, 10, 10], [10, 16, 12, 11]),
        (TRACE_B, "sjf", [0, 10, 13], [10, 13, 17]),
        (TRACE_B, "qssf", [0, 14, 10], [10, 17, 14]),
        (TRACE_A, "srtf", [0, 1, 2, 3], [79, 39, 5, 5]),
    ],
)
def test_golden_start_and_end_times(trace, policy, starts, ends):
    vc = simulate(trace, policy)
    assert vc.start_s.tolist() == starts
    assert vc.end_s.tolist() == ends


@pytest.mark.parametrize(
    ("placer", "starts", "nodes"),
    [
        ("consolidate", [0, 0, 10], [(0,), (1,), (0,)]),  # 4 GPUs need one node: wait for job 0
        ("first-fit", [0, 0, 1], [(0,), (0, 1), (1,)]),  # job 1 spans nodes 0 and 1, leaving 4 GPUs on node 1
        ("random", [0, 0, 1], None),
    ],
)
def test_golden_start_times_per_placer(placer, starts, nodes):
    vc = simulate([(0, 10, 6), (0, 10, 6), (1, 5, 4)], "fifo", placer=placer, n_nodes=2)
    assert vc.start_s.tolist() == starts
    if nodes is not None:
        assert vc.nodes == nodes


def test_srtf_golden_preemptions_and_queue():
    vc = simulate(TRACE_A, "srtf")
    assert vc.preemptions.tolist() == [1, 1, 0, 0]
    assert vc.queue_s.tolist() == [38, 2, 0, 0]
    jct = vc.end_s - np.array([s for s, _, _ in TRACE_A])
    assert jct.tolist() == [38 + 10 + 30 + 1, 2 + 5 + 30 + 1, 3, 2]


def test_qssf_jobs_started_from_an_idle_queue_keep_no_priority():
    vc = simulate(TRACE_B, "qssf")
    assert vc.priority.tolist() == [-1.0, 24.0, 4.0]


def test_las_demotes_long_jobs_behind_new_ones():
    # threshold 40 GPU-s: job 0 (8 GPUs) is demoted after 5 s of service, then job 1 runs first
    vc = simulate([(0, 20, 8), (1, 4, 8)], "las", las_threshold_gpu_s=40)
    assert vc.start_s.tolist() == [0, 5]
    assert vc.preemptions.tolist() == [1, 0]
    assert vc.end_s.tolist() == [5 + 4 + 1 + 15 + 30 + 1, 10]


def test_easy_backfill_starts_short_job_without_delaying_head():
    # head (8 GPUs) waits for job 0 to end at 10; job 2 (1 s) fits the 4 free GPUs and ends before 10
    trace = [(0, 10, 4), (1, 5, 8), (2, 3, 4), (3, 30, 4)]
    plain = simulate(trace, "fifo")
    easy = simulate(trace, "fifo", backfill=True)
    assert plain.start_s.tolist() == [0, 10, 15, 15]
    assert easy.start_s.tolist() == [0, 10, 2, 15]


def test_zero_length_jobs_end_at_once_and_unplaceable_jobs_are_counted():
    res = engine.run(SimConfig(policy="fifo"), workload([(0, 0, 8), (0, 5, 8), (1, 9, 16)], n_nodes=1))
    vc = res.vcs["vc"]
    assert vc.start_s.tolist() == [0, 0, -1]
    assert vc.end_s.tolist() == [0, 5, -1]
    assert res.unplaceable == 1


NODES = [3, 8, 2, 8, 5]  # free GPUs of five 8-GPU nodes


def vc_with_free(free):
    vc = VCNodes(len(free), 8)
    vc.allocate(tuple((i, 8 - f) for i, f in enumerate(free) if f < 8))
    return vc


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        (2, ((2, 2),)),
        (3, ((0, 3),)),
        (4, ((4, 4),)),
        (8, ((1, 8),)),
        (16, ((1, 8), (3, 8))),
        (12, ((1, 8), (3, 4))),
        (20, ((1, 8), (3, 8), (4, 4))),
        (22, None),
        (24, None),
        (27, None),
    ],
)
def test_consolidate_follows_artifact_tie_rules(gpus, expected):
    assert placers.consolidate(vc_with_free(NODES), gpus) == expected


def test_first_fit_spans_nodes_in_index_order():
    assert placers.first_fit(vc_with_free(NODES), 12) == ((0, 3), (1, 8), (2, 1))
    assert placers.first_fit(vc_with_free(NODES), 27) is None


def test_random_placer_is_seeded_and_covers_the_request():
    a = [placers.RandomPlacer(7)(vc_with_free(NODES), 9) for _ in range(1)]
    b = [placers.RandomPlacer(7)(vc_with_free(NODES), 9) for _ in range(1)]
    assert a == b
    assert sum(g for _, g in a[0]) == 9
    seen = {placers.RandomPlacer(s)(vc_with_free(NODES), 4) for s in range(20)}
    assert len(seen) > 1


def artifact_consolidate(free: list[int], gpus: int, per_node: int = 8):
    """Literal transcription of the artifact's consolidate placer (stable sorts of the nodes with free GPUs)."""
    if gpus > sum(free):
        return None
    avail = [(i, f) for i, f in enumerate(free) if f > 0]
    if gpus <= per_node:
        for i, f in sorted(avail, key=lambda nf: nf[1]):
            if f >= gpus:
                return ((i, gpus),)
        return None
    need, rem, alloc = -(-gpus // per_node), gpus % per_node, []
    for i, f in sorted(avail, key=lambda nf: -nf[1]):
        if need > 1 or rem == 0:
            if f < per_node:
                return None
            alloc.append((i, per_node))
        else:
            if f < rem:
                return None
            alloc.append((i, rem))
        need -= 1
        if need == 0:
            return tuple(alloc)
    return None


@settings(max_examples=400, deadline=None)
@given(free=st.lists(st.integers(0, 8), min_size=1, max_size=12), gpus=st.integers(1, 70))
def test_consolidate_equals_literal_artifact_rules(free, gpus):
    assert placers.consolidate(vc_with_free(free), gpus) == artifact_consolidate(free, gpus)


@settings(max_examples=200, deadline=None)
@given(free=st.lists(st.integers(0, 8), min_size=1, max_size=12), gpus=st.integers(1, 70))
def test_first_fit_equals_literal_artifact_rules(free, gpus):
    expected = None
    if gpus <= sum(free):
        need, alloc = gpus, []
        for i, f in enumerate(free):
            if f > 0 and need > 0:
                alloc.append((i, min(f, need)))
                need -= min(f, need)
        expected = tuple(alloc)
    assert placers.first_fit(vc_with_free(free), gpus) == expected


def test_job_records_and_summary_of_a_golden_run():
    from sim import metrics

    res = engine.run(SimConfig(policy="fifo"), workload(TRACE_A, n_nodes=2))
    rec = metrics.job_records(res)
    # job 3 (2 GPUs) finds both nodes full at t=3 and waits for job 2 to end at t=4
    assert rec.get_column("nodes").to_list() == [[0], [1], [1], [1]]
    assert rec.get_column("start_s").to_list() == [0, 1, 2, 4]
    assert rec.get_column("jct_s").to_list() == [10, 5, 2, 2]
    summary = metrics.summarize(rec, metrics.timelines(res))
    assert summary["all"]["avg_jct_s"] == 4.8  # 19 / 4, rounded to 0.1
    assert summary["vcs"]["vc"]["gpu_util_pct"] == round((8 * 10 + 4 * 5 + 4 * 2 + 2 * 1) / (16 * 10) * 100, 1)
