"""Property tests of the engine on random multi-VC traces: capacity, start/finish invariants, order, determinism."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim import engine
from sim.model import SimConfig, Workload

PER_NODE = 8
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def traces(draw):
    n_vcs = draw(st.integers(1, 3))
    vc_nodes = tuple(draw(st.lists(st.integers(0, 3), min_size=n_vcs, max_size=n_vcs)))
    n = draw(st.integers(1, 40))
    submit = np.cumsum(draw(st.lists(st.integers(0, 8), min_size=n, max_size=n)))
    return Workload(
        job_id=np.arange(100, 100 + n, dtype=np.int64),
        vc_index=np.asarray(draw(st.lists(st.integers(0, n_vcs - 1), min_size=n, max_size=n)), dtype=np.int32),
        submit_s=submit.astype(np.int64),
        duration_s=np.asarray(draw(st.lists(st.integers(0, 80), min_size=n, max_size=n)), dtype=np.int64),
        gpu_num=np.asarray(
            draw(st.lists(st.sampled_from([1, 2, 3, 4, 8, 12, 16, 32]), min_size=n, max_size=n)), dtype=np.int64
        ),
        predicted_s=np.asarray(draw(st.lists(st.integers(-10, 100), min_size=n, max_size=n)), dtype=np.float64),
        vc_names=tuple(f"vc{k}" for k in range(n_vcs)),
        vc_nodes=vc_nodes,
    )


configs = st.builds(
    SimConfig,
    policy=st.sampled_from(["fifo", "sjf", "qssf", "srtf", "las"]),
    placer=st.sampled_from(["consolidate", "first-fit", "random"]),
    backfill=st.booleans(),
    seed=st.integers(0, 5),
    las_threshold_gpu_s=st.sampled_from([10.0, 200.0]),
)


@FAST
@given(w=traces(), config=configs)
def test_invariants(w, config):
    res = engine.run(config, w)
    placed_total = 0
    for k, (name, vc) in enumerate(res.vcs.items()):
        cap = w.vc_nodes[k] * PER_NODE
        submit, dur, gpu = w.submit_s[vc.rows], w.duration_s[vc.rows], w.gpu_num[vc.rows]
        placed = vc.start_s >= 0
        placed_total += int(placed.sum())
        assert (vc.timeline_used_gpus <= cap).all(), name
        if vc.timeline_used_gpus.size:
            assert vc.timeline_used_gpus[-1] == 0  # every job released its GPUs exactly once
        assert (vc.start_s[placed] >= submit[placed]).all()
        assert (vc.end_s[placed] >= vc.start_s[placed] + dur[placed]).all()
        assert (vc.end_s[~placed] == -1).all()
        if config.policy in ("fifo", "sjf", "qssf"):
            assert (vc.end_s[placed] == vc.start_s[placed] + dur[placed]).all()
            assert _peak_gpus(vc.start_s[placed], vc.end_s[placed], gpu[placed]) <= cap
    assert placed_total + res.unplaceable == len(w)


def _peak_gpus(start, end, gpu):
    events = sorted(
        [(s, 1, g) for s, e, g in zip(start, end, gpu, strict=True) if e > s]
        + [(e, 0, -g) for s, e, g in zip(start, end, gpu, strict=True) if e > s]
    )
    level, peak = 0, 0
    for _, _, delta in events:
        level += delta
        peak = max(peak, level)
    return peak


@FAST
@given(w=traces(), placer=st.sampled_from(["consolidate", "first-fit"]))
def test_qssf_with_oracle_orders_like_sjf_on_gpu_time(w, placer):
    oracle = Workload(**{**w.__dict__, "predicted_s": w.duration_s.astype(np.float64)})
    vc_results = engine.run(SimConfig(policy="qssf", placer=placer), oracle).vcs.values()
    for vc in vc_results:
        submit, gpu = oracle.submit_s[vc.rows], oracle.gpu_num[vc.rows]
        gpu_time = oracle.duration_s[vc.rows] * gpu
        for a in np.flatnonzero((vc.start_s >= 0) & (vc.priority != -1)):
            t = vc.start_s[a]
            waiting = (submit <= t) & (vc.start_s > t)
            assert not np.any(waiting & _lexless(gpu_time, gpu, gpu_time[a], gpu[a], a))


def _lexless(gpu_time, gpu, t_a, g_a, a):
    idx = np.arange(gpu.size)
    return (gpu_time < t_a) | ((gpu_time == t_a) & ((gpu < g_a) | ((gpu == g_a) & (idx < a))))


@FAST
@given(w=traces(), config=configs)
def test_same_seed_same_result(w, config):
    a, b = engine.run(config, w), engine.run(config, w)
    for name in a.vcs:
        assert a.vcs[name].start_s.tolist() == b.vcs[name].start_s.tolist()
        assert a.vcs[name].end_s.tolist() == b.vcs[name].end_s.tolist()
        assert a.vcs[name].nodes == b.vcs[name].nodes
