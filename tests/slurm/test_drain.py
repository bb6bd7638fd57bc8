"""A node drained and resumed on a real Slurm 22.05, beside the twin's model of it (sim.slurm NodeChange): the job
running on the drained node runs on, a job submitted while it is drained waits, and starts once the node is
resumed, where the replay starts it (about a minute; skipped without REQUIRE_SLURM=1, failed when Slurm is
missing)."""

from __future__ import annotations

import time
from datetime import datetime

import numpy as np
import pytest

from analytics.slurm_config import NodeSpec, PartitionSpec, SchedSpec, SlurmConfig
from sim.slurm.jobs import build_jobs
from sim.slurm.run import replay
from tests.slurm.cluster import ACCOUNTS, CPUS, GPUS, NODE, require_slurm, slurm_cluster

pytestmark = pytest.mark.slow
RUNNING_S, WAITING_S, BF_INTERVAL_S = 20, 2, 5  # the cluster's SchedulerParameters: bf_interval=5
U1, U2 = sorted(ACCOUNTS)


def _epoch_s(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _jobs(cluster, ids: list[int]) -> dict[int, dict[str, str]]:
    out = cluster.sacct("2000-01-01T00:00:00", "JobID,Submit,Start,End,State", "-X", "--noheader")
    rows = (line.split("|") for line in out.splitlines() if line.count("|") == 4)
    found = {int(r[0]): dict(zip(("submit", "start", "end", "state"), r[1:], strict=True)) for r in rows}
    return {i: found[i] for i in ids}


@pytest.fixture(scope="module")
def drained(tmp_path_factory):
    """Job a running when the node is drained, job b submitted while it is, then the node resumed: sacct's rows of
    both and the drain and resume times (epoch seconds)."""
    require_slurm()
    with slurm_cluster() as cluster:
        a = cluster.sbatch(U1, "-p", "vcA", "-c", "1", "--gres=gpu:4", script=f"sleep {RUNNING_S}")
        cluster.wait_for_state(str(a), "RUNNING")
        cluster.run("scontrol", "update", f"NodeName={NODE}", "State=DRAIN", "Reason=twin-drain-test")
        drain_s = time.time()
        b = cluster.sbatch(U2, "-p", "vcA", "-c", "1", "--gres=gpu:2", script=f"sleep {WAITING_S}")
        deadline = time.monotonic() + RUNNING_S + 30
        while str(a) in cluster.states() and time.monotonic() < deadline:
            time.sleep(1)
        time.sleep(BF_INTERVAL_S + 2)  # a main and a backfill pass on the drained, idle node
        b_state_while_drained = cluster.states().get(str(b))
        cluster.run("scontrol", "update", f"NodeName={NODE}", "State=RESUME")
        resume_s = time.time()
        cluster.wait_until_idle(120)
        return _jobs(cluster, [a, b]), a, b, drain_s, resume_s, b_state_while_drained


def test_the_drained_nodes_running_job_runs_on_and_a_new_one_waits_for_the_resume(drained):
    rows, a, b, drain_s, resume_s, b_state = drained
    assert rows[a]["state"] == "COMPLETED" and _epoch_s(rows[a]["start"]) < drain_s
    assert _epoch_s(rows[a]["end"]) - _epoch_s(rows[a]["start"]) >= RUNNING_S
    assert b_state == "PENDING"
    assert rows[b]["state"] == "COMPLETED" and _epoch_s(rows[b]["start"]) >= int(resume_s)


def test_the_replay_starts_the_waiting_job_where_slurm_did(drained):
    rows, a, b, drain_s, resume_s, _ = drained
    t0 = _epoch_s(rows[a]["submit"])
    sub = np.array([0, round(_epoch_s(rows[b]["submit"]) - t0)])
    ran = [round(_epoch_s(rows[j]["end"]) - _epoch_s(rows[j]["start"])) for j in (a, b)]
    config = SlurmConfig(
        nodes=(NodeSpec(NODE, GPUS, CPUS),),
        partitions=(PartitionSpec("vcA", (0,)),),
        sched=SchedSpec(bf_interval_s=BF_INTERVAL_S),
    )
    jobs, _ = build_jobs(
        config,
        submit_s=sub,
        duration_s=np.array(ran),
        gpus=np.array([4, 2]),
        cpus=np.array([1, 1]),
        timelimit_s=[None, None],
        partition=["vcA", "vcA"],
        account=["a", "a"],
        user=[U1, U2],
    )
    # sacct's times are whole seconds (truncated): the drain's second, truncated too, comes no later than b's submit
    changes = [(int(drain_s - t0), 0, False), (int(resume_s - t0), 0, True)]
    out = replay(config, jobs, changes=changes)
    real_start_s = _epoch_s(rows[b]["start"]) - t0
    assert out.start_s[0] == 0 and out.end_s[0] == ran[0]
    assert abs(out.start_s[1] - real_start_s) <= BF_INTERVAL_S, (out.start_s[1], real_start_s)
