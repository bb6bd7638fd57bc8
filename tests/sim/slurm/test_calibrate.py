"""A trace without a Slurm configuration replayed on its VCs: one partition per VC over that VC's own nodes, each
user capped at what the record shows they held at once."""

from dataclasses import replace

import numpy as np

from analytics.slurm_config import PrioritySpec, SchedSpec, check
from sim.model import SchedulerColumns, SimConfig, Workload
from sim.slurm.calibrate import CALIBRATED, calibrated, node_changes, user_gpu_caps, vc_cluster
from sim.slurm.workload import simulate_slurm


def _workload() -> Workload:
    n = 3
    return Workload(
        job_id=np.arange(n),
        vc_index=np.array([0, 1, 1], dtype=np.int32),
        submit_s=np.arange(n),
        duration_s=np.full(n, 10),
        gpu_num=np.ones(n, dtype=np.int64),
        predicted_s=np.full(n, 10.0),
        vc_names=("vcA", "vcB"),
        vc_nodes=(2, 3),
    )


def test_each_vc_is_a_partition_over_its_own_nodes():
    config = check(vc_cluster(_workload(), 8))
    assert [(p.name, p.nodes) for p in config.partitions] == [("vcA", (0, 1)), ("vcB", (2, 3, 4))]
    assert {n.gpus for n in config.nodes} == {8} and len(config.nodes) == 5
    assert config.priority == PrioritySpec() and config.sched == SchedSpec()


def test_a_vc_whose_capacity_steps_has_its_most_nodes_and_drains_the_highest_first():
    w = replace(_workload(), vc_node_steps=(((0, 2),), ((0, 1), (3_600, 3), (7_200, 2))))
    config = check(vc_cluster(w, 8))
    assert [(p.name, p.nodes) for p in config.partitions] == [("vcA", (0, 1)), ("vcB", (2, 3, 4))]
    assert node_changes(w) == [(0, 3, False), (0, 4, False), (3_600, 3, True), (3_600, 4, True), (7_200, 4, False)]
    assert node_changes(_workload()) == []


def test_the_given_scheduler_settings_are_kept():
    prio, sched = PrioritySpec(multifactor=True, weight_age=5), SchedSpec(backfill=False)
    config = vc_cluster(_workload(), 4, prio, sched)
    assert config.priority is prio and config.sched is sched and config.nodes[0].gpus == 4


def _recorded(users, vcs, gpus, start_s, duration_s) -> Workload:
    n = len(users)
    return Workload(
        job_id=np.arange(n),
        vc_index=np.array(vcs, dtype=np.int32),
        submit_s=np.zeros(n, dtype=np.int64),
        duration_s=np.array(duration_s, dtype=np.int64),
        gpu_num=np.array(gpus, dtype=np.int64),
        predicted_s=np.ones(n),
        vc_names=("vcA", "vcB"),
        vc_nodes=(2, 3),
        recorded_start_s=np.array(start_s, dtype=np.int64),
        scheduler=SchedulerColumns(np.array(users, dtype=object), None, None, None, None, None, None, None),
    )


def test_a_users_cap_is_the_most_gpus_their_jobs_held_at_once_in_the_record():
    # u1 in vcA: 2 GPUs over [0, 100), 4 over [50, 150) -> 6 at once; a job ending at 150 and one starting then
    # do not overlap; u1's job in vcB is counted apart; u2 never started a job of 8 GPUs: its cap lets it run
    w = _recorded(
        users=["u1", "u1", "u1", "u1", "u2", "u2"],
        vcs=[0, 0, 0, 1, 0, 0],
        gpus=[2, 4, 5, 1, 1, 8],
        start_s=[0, 50, 150, 0, 10, -1],
        duration_s=[100, 100, 10, 10, 10, 10],
    )
    assert user_gpu_caps(w) == {("vcA", "u1"): 6, ("vcB", "u1"): 1, ("vcA", "u2"): 8}


def test_the_calibrated_twin_caps_users_on_their_association_and_says_what_it_assumed():
    w = _recorded(["u1", "u2"], [0, 1], [2, 3], [0, 0], [10, 10])
    twin = calibrated(w, 8)
    assert twin.source == CALIBRATED
    users = {(a.account, a.user, a.grp_gpus) for a in check(twin.config).assocs if a.user}
    assert users == {("vcA", "u1", 2), ("vcB", "u2", 3)}
    assert twin.config.priority == PrioritySpec() and twin.config.sched == SchedSpec()
    words = " ".join(twin.rules)
    assert "5 nodes of 8 GPUs" in words and "record: 2 users" in words and "else none" in words
    assert twin.rules[2].endswith(": none recorded")
    limited = _recorded(["u1", "u2"], [0, 1], [2, 3], [0, 0], [10, 10])
    limited = replace(limited, scheduler=replace(limited.scheduler, timelimit_s=np.array([600, -1])))
    assert calibrated(limited, 8).rules[2].endswith(": 1 of 2 jobs with a recorded limit")


def test_a_calibrated_twin_replays_jobs_in_their_vc_and_on_scaled_vcs():
    w = _recorded(["u1", "u2"], [0, 1], [2, 3], [0, 0], [10, 10])
    w = replace(w, scheduler=replace(w.scheduler, partition=np.array(["gpu"] * 2, dtype=object)))
    twin = calibrated(w, 8)
    assert twin.jobs_of(w).scheduler.partition is None and twin.jobs_of(w).scheduler.account is None
    bigger = twin.on_nodes_of(replace(w, vc_nodes=(1, 6)))
    assert [len(p.nodes) for p in bigger.partitions] == [1, 6] and bigger.assocs == twin.config.assocs


def test_without_users_or_start_times_nobody_is_capped():
    assert user_gpu_caps(_workload()) == {}
    w = _recorded(["", ""], [0, 1], [2, 3], [0, 0], [10, 10])
    assert user_gpu_caps(w) == {} and "none: the trace records no users" in " ".join(calibrated(w, 8).rules)


def test_a_pooled_twin_places_by_gpu_count_on_each_vcs_gpus():
    # vcA: 2 nodes of 8 GPUs, one drained at 3,600 s: a pool of 1-GPU nodes that shrinks by 8; vcB: 3 nodes all the
    # window: one node of 24 GPUs. A recorded 1-node job of 12 GPUs cannot run on 8-GPU nodes but runs on the pool
    w = _recorded(["u1"], [0], [12], [0], [10])
    w = replace(w, scheduler=replace(w.scheduler, nodes=np.array([1])), vc_node_steps=(((0, 2), (3_600, 1)), ((0, 3),)))
    twin = calibrated(w, 8, pooled=True)
    assert twin.placement == "pools" and "each one pool of its GPUs, up to 40 GPUs in all" in twin.rules[0]
    placed = twin.jobs_of(w)
    assert placed.scheduler.nodes is None and placed.vc_nodes == (16, 1)
    assert [len(p.nodes) for p in twin.config.partitions] == [16, 1]
    assert [n.gpus for n in twin.config.nodes] == [1] * 16 + [24] and twin.config.nodes[-1].cpus == 24 * 64
    assert len(twin.changes_of(w)) == 8  # vcA's pool shrinks by one node's 8 GPUs at 3,600 s
    result = simulate_slurm(twin.config, SimConfig(policy="slurm"), placed, twin.changes_of(w))
    assert result.vcs["vcA"].start_s.tolist() == [0]
    assert calibrated(w, 8).placement == "nodes"


def test_a_pooled_twin_starts_from_the_carried_jobs_and_reports_only_the_windows():
    # u1 ran 8 GPUs before the window until second 100 (carried), so the window's 10-GPU job of vcA's 16 waits;
    # the carried job is in the record u1's cap is read from (10: it ended as the 10-GPU job started), not reported
    window = _recorded(["u1"], [0], [10], [100], [50])
    carried = replace(_recorded(["u1"], [0], [8], [0], [100]), job_id=np.array([99]))
    twin = calibrated(window, 8, pooled=True, carried=carried)
    assert twin.n_carried == 1
    users = {(a.account, a.user, a.grp_gpus) for a in twin.config.assocs if a.user}
    assert users == {("vcA", "u1", 10)}
    result = simulate_slurm(twin.config, SimConfig(policy="slurm"), twin.jobs_of(window), (), twin.n_carried)
    vc = result.vcs["vcA"]
    assert vc.rows.tolist() == [0] and vc.start_s.tolist() == [100] and vc.queue_s.tolist() == [100]
    assert result.workload.job_id.tolist() == [0] and vc.timeline_used_gpus.max() == 10
    assert calibrated(window, 8, carried=carried).n_carried == 0  # a twin on nodes starts empty
