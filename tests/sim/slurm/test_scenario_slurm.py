"""The `slurm` policy inside a what-if: it needs the captured configuration, replays all VCs on one shared pool,
and is reported like the other policies."""

import numpy as np
import polars as pl
import pytest

from analytics.slurm_config import NodeSpec, PartitionSpec, PrioritySpec, SchedSpec, SlurmConfig
from sim.scenario import ScenarioConfig, ScenarioError, run_scenario
from tests.sim.test_scenario_run import VCS, WINDOW, make_cluster


def _config() -> SlurmConfig:
    nodes = tuple(NodeSpec(f"n{i}", 8, 64) for i in range(sum(VCS.values())))
    parts, first = [], 0
    for name, n in VCS.items():
        parts.append(PartitionSpec(name, tuple(range(first, first + n))))
        first += n
    prio = PrioritySpec(multifactor=True, weight_fairshare=1000, weight_age=100)
    return SlurmConfig(nodes=nodes, partitions=tuple(parts), priority=prio, sched=SchedSpec(bf_interval_s=30))


@pytest.fixture(scope="module")
def trace():
    return make_cluster(n_jobs=600)


def test_slurm_policy_needs_a_configuration(trace):
    jobs, vc_gpus = trace
    with pytest.raises(ScenarioError, match="--slurm-config"):
        run_scenario(ScenarioConfig(**WINDOW, policies=("slurm",)), jobs, vc_gpus)


def test_slurm_policy_replays_every_vc(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("fifo", "slurm")), jobs, vc_gpus, scheduler=_config())
    summary = {r["scheme"]: r for r in result.summary.to_dicts()}
    assert "slurm" in summary and "fifo" in summary
    rec = result.records.filter(result.records["scheme"] == "slurm")
    started = rec.filter(rec["start_s"] >= 0) if "start_s" in rec.columns else rec
    assert started.height > 0
    assert set(result.per_vc.filter(result.per_vc["scheme"] == "slurm")["vc"]) <= set(VCS)
    used = result.timeline.filter(result.timeline["scheme"] == "slurm")["used_gpus"].to_numpy()
    assert used.max() <= 8 * sum(VCS.values()) and np.all(used >= 0)


def test_recorded_timeout_without_a_limit_keeps_its_recorded_length(trace):
    jobs, vc_gpus = trace
    jobs = jobs.with_columns(state=pl.lit("TIMEOUT"))  # no timelimit_s column: the trace has no limits
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("slurm",)), jobs, vc_gpus, scheduler=_config())
    rec = result.records.filter((pl.col("scheme") == "slurm") & pl.col("placed"))
    assert (rec["end_s"] - rec["start_s"] == rec["duration_s"]).all()


def test_recorded_accounts_and_time_limits_are_the_replays(trace):
    jobs, vc_gpus = trace
    account = pl.when(pl.col("job_id") % 2 == 0).then(pl.lit("even")).otherwise(pl.lit("odd"))
    limited = jobs.with_columns(account=account, timelimit_s=pl.lit(60, pl.Int64), state=pl.lit("TIMEOUT"))
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("slurm",)), limited, vc_gpus, scheduler=_config())
    per_account = result.per_account.filter(pl.col("scheme") == "slurm")
    assert set(per_account["account"]) == {"even", "odd"}
    rec = result.records.filter((pl.col("scheme") == "slurm") & pl.col("placed"))
    assert set(rec["account"]) == {"even", "odd"}
    long = rec.filter(pl.col("duration_s") > 60)
    ran_s = long["end_s"] - long["start_s"]
    assert long.height > 0 and ran_s.is_between(60, 60 + 30).all()  # killed at the first 30 s check past its limit
