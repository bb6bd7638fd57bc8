"""The Slurm replay on hand-worked cases: strict priority and backfill on time limits, time-limit stops,
fair-share order, limits that hold one job without blocking the others, and determinism."""

from dataclasses import replace

import numpy as np
import pytest

from analytics.slurm_config import (
    AssocSpec,
    NodeSpec,
    PartitionSpec,
    PrioritySpec,
    QosSpec,
    SchedSpec,
    SlurmConfig,
)
from sim.slurm.fairshare import decay_per_s
from sim.slurm.jobs import NEVER_S, build_jobs
from sim.slurm.run import build_model, next_tick, replay
from sim.slurm.usage import calc_pass, job_end, new_ledger

FAST = SchedSpec(backfill=True, sched_interval_s=60, bf_interval_s=1, bf_resolution_s=1)


def _config(**kw) -> SlurmConfig:
    base = dict(
        nodes=(NodeSpec("n1", 8, 32),),
        partitions=(PartitionSpec("a", (0,)), PartitionSpec("b", (0,))),
        sched=FAST,
    )
    base.update(kw)
    return SlurmConfig(**base)


def _run(config, rows, boot_s=0, changes=()):
    """rows: (submit_s, duration_s, gpus, limit_s, partition, account, user); changes: run.NodeChange."""
    cols = list(zip(*rows, strict=True))
    jobs, _ = build_jobs(
        config,
        submit_s=np.array(cols[0]),
        duration_s=np.array(cols[1]),
        gpus=np.array(cols[2]),
        cpus=np.array(cols[2]),
        timelimit_s=list(cols[3]),
        partition=list(cols[4]),
        account=list(cols[5]),
        user=list(cols[6]),
    )
    return replay(config, jobs, boot_s, changes=changes)


BACKFILL_CASE = [
    (0, 100, 6, 100, "a", "x", "u1"),  # runs 0..100
    (1, 50, 4, 100, "a", "x", "u1"),  # blocked: reserves the node from 100
    (2, 40, 2, 50, "b", "x", "u2"),  # ends by its limit before 100: backfilled
    (3, 40, 2, 200, "b", "x", "u2"),  # its limit reaches past 100: waits
]


def test_backfill_starts_only_jobs_whose_limit_ends_before_the_reservation():
    out = _run(_config(), BACKFILL_CASE)
    assert list(out.start_s[:2]) == [0, 100]
    assert 2 <= out.start_s[2] <= 3
    assert out.start_s[3] >= 100


def test_builtin_keeps_strict_priority_order():
    config = _config(sched=SchedSpec(backfill=False, sched_interval_s=60))
    out = _run(config, BACKFILL_CASE)
    assert list(out.start_s) == [0, 100, 100, 100]  # jobs 2 and 3 wait behind job 1, then all three fit


def test_a_job_over_its_limit_stops_at_the_next_limit_check():
    out = _run(_config(), [(5, NEVER_S, 1, 60, "a", "x", "u1"), (7, 30, 1, 60, "a", "x", "u1")], boot_s=-13)
    stop = next_tick(5 + 60, -13, 30)
    assert out.end_s[0] == stop and out.timed_out[0]
    assert out.end_s[1] == 37 and not out.timed_out[1]


def test_fair_share_puts_the_lighter_account_first():
    prio = PrioritySpec(multifactor=True, weight_fairshare=10_000, weight_age=10, calc_period_s=60)
    assocs = (AssocSpec("x", shares=1), AssocSpec("y", shares=1))
    config = _config(priority=prio, assocs=assocs)
    rows = [(0, 200, 8, 300, "a", "x", "u1")]  # x uses the whole node for 200 s
    rows += [(150, 50, 8, 300, "a", "x", "u1"), (151, 50, 8, 300, "a", "y", "u2")]
    out = _run(config, rows)
    assert out.start_s[2] == 200  # y's job, submitted later, starts first
    assert out.start_s[1] == 250
    assert out.priority[2] > out.priority[1]


def test_basic_priority_is_submission_order():
    rows = [(0, 200, 8, 300, "a", "x", "u1"), (150, 50, 8, 300, "a", "x", "u1"), (151, 50, 8, 300, "a", "y", "u2")]
    out = _run(_config(), rows)
    assert list(out.start_s) == [0, 200, 250]


def test_group_gpu_limit_holds_the_job_without_blocking_others():
    assocs = (AssocSpec("x", grp_gpus=4), AssocSpec("y"))
    config = _config(assocs=assocs)
    rows = [(0, 100, 4, 200, "a", "x", "u1"), (1, 100, 2, 200, "a", "x", "u1"), (2, 100, 2, 200, "a", "y", "u2")]
    out = _run(config, rows)
    assert out.start_s[0] == 0 and out.start_s[2] == 2
    assert out.start_s[1] == 100  # waits for x's GPUs, not for the node


def test_a_job_larger_than_its_accounts_cap_never_starts_and_the_replay_ends():
    config = _config(assocs=(AssocSpec("x", grp_gpus=4), AssocSpec("y")), sched=replace(FAST, sched_interval_s=1))
    rows = [(0, 100, 6, 200, "a", "x", "u1"), (1, 100, 2, 200, "a", "x", "u1"), (2, 100, 2, 200, "a", "y", "u2")]
    out = _run(config, rows)
    assert out.start_s[0] == -1 and not out.runnable[0]
    assert out.start_s[1] == 1 and out.start_s[2] == 2


TWO_NODES = {"nodes": (NodeSpec("n1", 8, 32), NodeSpec("n2", 8, 32)), "partitions": (PartitionSpec("a", (0, 1)),)}
DRAIN_CASE = [
    (0, 100, 16, None, "a", "x", "u1"),  # on both nodes 0..100; n2 is drained at 50 under it
    (60, 10, 8, None, "a", "x", "u1"),  # one node: n1 once the first ends
    (61, 10, 16, None, "a", "x", "u2"),  # two nodes: only when n2 is back
]


def test_a_drained_node_keeps_its_running_job_and_takes_no_new_one():
    config = _config(**TWO_NODES)
    out = _run(config, DRAIN_CASE, changes=[(50, 1, False), (500, 1, True)])
    assert out.end_s[0] == 100 and out.start_s[1] == 100 and out.placement[1] == ((0, 8, 8),)
    assert out.start_s[2] == 500


def test_jobs_that_no_node_left_in_service_can_hold_wait_and_the_replay_ends():
    out = _run(_config(**TWO_NODES), DRAIN_CASE, changes=[(50, 1, False)])
    assert out.start_s.tolist() == [0, 100, -1] and out.runnable[2]


def test_a_job_held_for_ever_behind_one_that_never_fits_ends_the_replay_unstarted():
    config = _config(**TWO_NODES, sched=replace(FAST, backfill=False))  # sched/builtin: strict order
    rows = [(10, 50, 16, None, "a", "x", "u1"), (11, 50, 8, None, "a", "x", "u1")]
    out = _run(config, rows, changes=[(0, 1, False)])
    assert out.start_s.tolist() == [-1, -1]


def test_a_node_joining_takes_the_waiting_jobs_from_its_second():
    out = _run(_config(**TWO_NODES), [(10, 50, 16, None, "a", "x", "u1")], changes=[(0, 1, False), (200, 1, True)])
    assert out.start_s[0] == 200


def test_qos_per_user_gpu_limit():
    config = _config(qos=(QosSpec("normal", max_gpus_per_user=2),))
    cols = [(0, 100, 2, 200, "a", "x", "u1"), (1, 100, 2, 200, "a", "x", "u1"), (2, 100, 2, 200, "a", "x", "u2")]
    c = list(zip(*cols, strict=True))
    jobs, _ = build_jobs(
        config,
        submit_s=np.array(c[0]),
        duration_s=np.array(c[1]),
        gpus=np.array(c[2]),
        cpus=np.array(c[2]),
        timelimit_s=list(c[3]),
        partition=list(c[4]),
        account=list(c[5]),
        user=list(c[6]),
        qos=["normal"] * 3,
    )
    out = replay(config, jobs)
    assert list(out.start_s) == [0, 100, 2]


def test_replay_is_deterministic():
    rng = np.random.default_rng(7)
    rows = [
        (int(t), int(d), int(g), int(lim), "ab"[k % 2], "xyz"[k % 3], f"u{k % 4}")
        for k, (t, d, g, lim) in enumerate(
            zip(
                np.sort(rng.integers(0, 600, 80)),
                rng.integers(10, 90, 80),
                rng.choice([1, 2, 4], 80),
                rng.choice([60, 120], 80),
                strict=True,
            )
        )
    ]
    prio = PrioritySpec(multifactor=True, weight_fairshare=1000, weight_age=100, max_age_s=600, calc_period_s=60)
    config = _config(priority=prio, assocs=(AssocSpec("x", shares=5), AssocSpec("y", shares=2)))
    a, b = _run(config, rows), _run(config, rows)
    assert np.array_equal(a.start_s, b.start_s) and np.array_equal(a.end_s, b.end_s)
    assert (a.start_s >= 0).all()
    assert (a.start_s >= np.array([r[0] for r in rows])).all()
    used = a.timeline_used_gpus.sum(axis=1)
    assert used.max() <= 8 and used[-1] == 0


def _ledger_after_a_job(enforced: bool) -> tuple[float, float]:
    """A job of 8 CPUs runs 0..200 s with decay passes at 60, 120 and 180 s: usage before and after its end."""
    prio = PrioritySpec(multifactor=True, weight_fairshare=10_000, calc_period_s=60)
    config = _config(priority=prio, assocs=(AssocSpec("x", shares=1),), limits_enforced=enforced)
    one = {"submit_s": np.array([0]), "duration_s": np.array([200]), "gpus": np.array([8]), "cpus": np.array([8])}
    jobs, _ = build_jobs(config, **one, timelimit_s=[300], partition=["a"], account=["x"], user=["u1"])
    m = build_model(config, jobs)
    ledger = new_ledger(1, last_pass_s=0)
    for t in (60, 120, 180):
        calc_pass(ledger, m.st, m.jt, t, np.array([0]), 1, np.array([0]))
    before = float(ledger.usage.sum())
    job_end(ledger, m.st, m.jt, 0, 0, 200)
    return before, float(ledger.usage.sum())


def test_an_ending_jobs_last_seconds_are_charged_only_where_limits_are_enforced():
    # Slurm 22.05 charges the seconds since the last pass at a job's end from acct_policy's limit bookkeeping only
    before, after = _ledger_after_a_job(enforced=True)
    decay = decay_per_s(PrioritySpec().decay_half_life_s)
    assert after - before == pytest.approx(8 * 20 * decay**20)
    before, after = _ledger_after_a_job(enforced=False)
    assert after == before > 0


@pytest.mark.parametrize("seed", range(5))
def test_the_queue_resorted_after_a_priority_pass_is_in_full_sort_order(seed):
    from sim.slurm import run

    rng = np.random.default_rng(seed)
    n = 300
    rows = [(i, 50, 1, 100, "ab"[i % 2], "x", "u1") for i in range(n)]
    cols = list(zip(*rows, strict=True))
    config = _config(partitions=(PartitionSpec("a", (0,), priority_tier=2), PartitionSpec("b", (0,))))
    jobs, _ = build_jobs(
        config, submit_s=np.array(cols[0]), duration_s=np.array(cols[1]), gpus=np.array(cols[2]),
        cpus=np.array(cols[2]), timelimit_s=list(cols[3]), partition=list(cols[4]), account=list(cols[5]),
        user=list(cols[6]),
    )  # fmt: skip
    m = run.build_model(config, jobs)
    queued = rng.permutation(n)[: n // 2]
    m.out.priority[:] = rng.integers(0, 20, n).astype(float)  # ties on priority: the earlier job first
    m.q.pending[: len(queued)] = np.sort(queued)
    m.q.size[run.P_PENDING] = len(queued)
    run._resort(m)
    expected = sorted(queued, key=lambda j: (-m.jt.tier[j], -m.out.priority[j], j))
    assert list(m.q.pending[: len(queued)]) == expected
