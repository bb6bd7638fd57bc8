"""A trace without a Slurm configuration replayed on its VCs: one partition per VC over that VC's own nodes."""

import numpy as np

from analytics.slurm_config import PrioritySpec, SchedSpec, check
from sim.model import Workload
from sim.slurm.calibrate import vc_cluster


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


def test_the_given_scheduler_settings_are_kept():
    prio, sched = PrioritySpec(multifactor=True, weight_age=5), SchedSpec(backfill=False)
    config = vc_cluster(_workload(), 4, prio, sched)
    assert config.priority is prio and config.sched is sched and config.nodes[0].gpus == 4
