"""The event-driven engine against a literal 1-second-tick re-implementation of the artifact (spec §4, §4.1)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sim import engine, placers
from sim.cluster import VCNodes
from sim.model import SimConfig, Workload, checkpoint_overhead_s


def _order(policy, queue, arrived, submit, dur, gpu, pred, prio):
    if policy == "fifo":
        queue.sort(key=lambda j: submit[j])
    elif policy == "sjf":
        queue.sort(key=lambda j: dur[j])
    else:
        queue.sort(key=lambda j: gpu[j])
        if len(queue) > arrived:
            for j in queue:
                if prio[j] == -1:
                    prio[j] = pred[j] * gpu[j]
            queue.sort(key=lambda j: prio[j])


def tick_reference(submit, dur, gpu, pred, n_nodes, policy, placer_name, per_node=8):
    """Literal artifact loop: one iteration per simulated second (zero-length jobs end at once, as in our engine)."""
    n = len(submit)
    vc = VCNodes(n_nodes, per_node)
    place = placers.get(placer_name)
    start, end, qtime, ckpt = [-1] * n, [-1] * n, [0] * n, [0] * n
    prio, remain, last_ckpt, alloc = [-1.0] * n, list(dur), [0] * n, [()] * n
    queue, running = [], []
    now, nxt, ended = 0, 0, 0
    while ended < n:
        for j in list(running):
            if policy == "srtf":
                if remain[j] == 0:
                    end[j] = now
                else:
                    remain[j] -= 1
                    continue
            elif end[j] != now:
                continue
            vc.release(alloc[j])
            running.remove(j)
            ended += 1
        arrived = 0
        while nxt < n and submit[nxt] == now:
            queue.append(nxt)
            nxt += 1
            arrived += 1
        if policy == "srtf":
            current = sorted(queue + running, key=lambda j: remain[j])
            quota, prerun, preempt = vc.capacity_gpus, [], []
            for j in current:
                if gpu[j] <= quota:
                    quota -= gpu[j]
                    if j in queue:
                        prerun.append(j)
                elif j in running:
                    preempt.append(j)
            for j in preempt:
                ckpt[j] += 1
                last_ckpt[j] = now
                remain[j] += checkpoint_overhead_s(gpu[j])
                vc.release(alloc[j])
                running.remove(j)
                queue.append(j)
            for j in prerun:
                a = place(vc, gpu[j])
                if a is None:
                    continue
                queue.remove(j)
                running.append(j)
                vc.allocate(a)
                alloc[j] = a
                if start[j] == -1:
                    start[j], qtime[j] = now, now - submit[j]
                else:
                    qtime[j] += now - last_ckpt[j]
        else:
            _order(policy, queue, arrived, submit, dur, gpu, pred, prio)
            for j in list(queue):
                a = place(vc, gpu[j])
                if a is None:
                    break
                queue.remove(j)
                start[j], end[j], qtime[j], alloc[j] = now, now + dur[j], now - submit[j], a
                if dur[j] == 0:
                    ended += 1
                else:
                    vc.allocate(a)
                    running.append(j)
        now += 1
    return start, end, qtime, ckpt


def _workload(submit, dur, gpu, pred, n_nodes):
    n = len(submit)
    return Workload(
        job_id=np.arange(n, dtype=np.int64),
        vc_index=np.zeros(n, dtype=np.int32),
        submit_s=np.asarray(submit, dtype=np.int64),
        duration_s=np.asarray(dur, dtype=np.int64),
        gpu_num=np.asarray(gpu, dtype=np.int64),
        predicted_s=np.asarray(pred, dtype=np.float64),
        vc_names=("vc",),
        vc_nodes=(n_nodes,),
    )


@st.composite
def congested_traces(draw):
    n_nodes = draw(st.integers(1, 3))
    n = draw(st.integers(1, 14))
    gaps = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    submit = np.cumsum(gaps).tolist()
    dur = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    gpu_choices = st.sampled_from([1, 1, 2, 3, 4, 8, 9, 12, 16, 20, 24])
    gpu = [min(g, n_nodes * 8) for g in draw(st.lists(gpu_choices, min_size=n, max_size=n))]
    pred = draw(st.lists(st.integers(-5, 60), min_size=n, max_size=n))
    return submit, dur, gpu, pred, n_nodes


def _engine(trace, policy, placer):
    submit, dur, gpu, pred, n_nodes = trace
    res = engine.run(SimConfig(policy=policy, placer=placer), _workload(submit, dur, gpu, pred, n_nodes))
    vc = res.vcs["vc"]
    return vc, res.unplaceable


def _placeable(trace, placer):
    submit, dur, gpu, pred, n_nodes = trace
    return engine.placeable_mask(np.asarray(gpu), n_nodes, 8, placer).all()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trace=congested_traces(),
    policy=st.sampled_from(["fifo", "sjf", "qssf", "srtf"]),
    placer=st.sampled_from(["consolidate", "first-fit"]),
)
def test_engine_matches_tick_reference(trace, policy, placer):
    assume(_placeable(trace, placer))
    vc, unplaceable = _engine(trace, policy, placer)
    start, end, qtime, ckpt = tick_reference(*trace, policy, placer)
    assert unplaceable == 0
    assert vc.start_s.tolist() == start
    assert vc.end_s.tolist() == end
    assert vc.queue_s.tolist() == qtime
    assert vc.preemptions.tolist() == ckpt
