"""Capture the five scheduler-configuration outputs of a real Slurm 22.05 into the parser's test fixtures.

It starts the test cluster of `tests.slurm.cluster`, writes what `analytics.ingest.slurm_conf.SLURM_CONFIG_COMMANDS`
prints for it as configured (`testcluster/`: priority/basic, backfill, three partitions on one node, no limits),
then gives it accounts, users and QOS with shares and limits and restarts slurmctld under two richer slurm.conf
variants: `multifactor/` (Fair Tree, every weight, backfill settings, two more nodes with typed GPUs in hostlist
partitions, a hidden partition, limits enforced) and `classic/` (NO_FAIR_TREE, sched/builtin, OverTimeLimit,
settings the model leaves out). The extra nodes are declared only: they never run slurmd, so Slurm lists them DOWN.

Run as root from the repository's root: `.venv/bin/python -m tests.slurm.capture_conf [OUT]` (default
tests/analytics/fixtures/slurm_conf).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from analytics.ingest.slurm_conf import SLURM_CONFIG_COMMANDS
from tests.slurm.cluster import CLUSTER, SlurmCluster, _ok, _start, _stop, _wait, slurm_cluster

DEFAULT_OUT = Path("tests/analytics/fixtures/slurm_conf")
EXTRA_NODES = "NodeName=gpu[02-03] NodeAddr=127.0.0.1 CPUs=16 RealMemory=64000 Gres=gpu:a100:4 State=DOWN"
PARTITIONS = {
    "multifactor": [
        "PartitionName=vcA Nodes=node1,gpu[02-03] Default=YES MaxTime=30 DefaultTime=10 MaxNodes=2 "
        "PriorityJobFactor=10 PriorityTier=2 TRESBillingWeights=CPU=1.0,GRES/gpu=4.0 State=UP",
        "PartitionName=vcB Nodes=node1 MaxTime=1-00:00:00 TRESBillingWeights=CPU=1.0,GRES/gpu=4.0 State=UP",
        "PartitionName=vcC Nodes=gpu[02-03] MaxTime=UNLIMITED Hidden=YES TRESBillingWeights=CPU=1.0,GRES/gpu=4.0 "
        "State=UP",
    ],
    "classic": [
        "PartitionName=vcA Nodes=node1 Default=YES MaxTime=45:30 PriorityJobFactor=5 State=UP",
        "PartitionName=vcB Nodes=node1,gpu[02-03] MaxTime=2-12 DefaultTime=1:00:00 OverTimeLimit=3 State=UP",
    ],
}
SETTINGS = {
    "multifactor": {
        "PriorityType": "priority/multifactor",
        "PriorityWeightAge": "100",
        "PriorityWeightFairshare": "10000",
        "PriorityWeightJobSize": "50",
        "PriorityWeightPartition": "1000",
        "PriorityWeightQOS": "2000",
        "PriorityMaxAge": "1:00:00",
        "PriorityDecayHalfLife": "0-00:30:00",
        "PriorityCalcPeriod": "1",
        "PriorityFavorSmall": "YES",
        "SchedulerType": "sched/backfill",
        "SchedulerParameters": "bf_interval=5,bf_window=60,bf_resolution=10,bf_max_job_test=200,bf_continue,"
        "sched_interval=10,default_queue_depth=50",
        "AccountingStorageEnforce": "associations,limits,qos",
        "KillWait": "5",
    },
    "classic": {
        "PriorityType": "priority/multifactor",
        "PriorityWeightAge": "1000",
        "PriorityWeightFairshare": "5000",
        "PriorityWeightTRES": "CPU=100,GRES/gpu=200",
        "PriorityFlags": "NO_FAIR_TREE,CALCULATE_RUNNING",
        "FairShareDampeningFactor": "3",
        "PriorityDecayHalfLife": "2-00:00:00",
        "PriorityMaxAge": "3-0",
        "SchedulerType": "sched/builtin",
        "SchedulerParameters": "sched_interval=20,default_queue_depth=300,defer",
        "AccountingStorageEnforce": "associations",
        "OverTimeLimit": "2",
        "PreemptType": "preempt/qos",
        "PreemptMode": "REQUEUE",
    },
}
SACCTMGR = [
    ("modify", "account", "teama", "set", "fairshare=30", "GrpTRES=gres/gpu=6", "GrpJobs=7", "MaxJobs=4"),
    ("modify", "account", "teamb", "set", "fairshare=10"),
    ("add", "account", "teamc", "parent=teama", "fairshare=5", f"cluster={CLUSTER}"),
    ("add", "user", "daemon", "account=teamc", "fairshare=2", "MaxJobs=2", f"cluster={CLUSTER}"),
    ("modify", "user", "nobody", "set", "GrpTRES=gres/gpu=4", "fairshare=3"),
    (
        "add",
        "qos",
        "high",
        "priority=100",
        "usagefactor=2",
        "GrpTRES=gres/gpu=8",
        "MaxTRESPerUser=gres/gpu=4",
        "MaxJobsPerUser=3",
        "GrpJobs=10",
    ),  # fmt: skip
    ("modify", "account", "teamb", "set", "MaxWall=08:00:00"),
    ("add", "qos", "low", "priority=10", "usagefactor=0.5", "MaxSubmitJobsPerUser=20"),
    ("modify", "user", "daemon", "set", "qos+=high,low"),
]


def capture(cluster: SlurmCluster, folder: Path) -> None:
    """Write each command's output into folder under its file name."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, command in SLURM_CONFIG_COMMANDS.items():
        (folder / name).write_text(cluster.run(*command))
    print(f"captured {folder}")


def _variant_conf(text: str, variant: str) -> str:
    """The cluster's slurm.conf with variant's settings in place of (or after) its own and its partitions."""
    lines = [line for line in text.splitlines() if not line.startswith("PartitionName=")]
    settings = dict(SETTINGS[variant])
    for i, line in enumerate(lines):
        key = line.split("=", 1)[0]
        if key in settings:
            lines[i] = f"{key}={settings.pop(key)}"
    lines += [f"{k}={v}" for k, v in settings.items()]
    return "\n".join([*lines, EXTRA_NODES, *PARTITIONS[variant]]) + "\n"


def restart(cluster: SlurmCluster, variant: str) -> None:
    """Rewrite slurm.conf for variant and restart slurmctld (state cleared) and slurmd."""
    base = cluster.root / "etc" / "slurm.conf.base"
    if not base.exists():
        base.write_text(cluster.conf.read_text())
    cluster.conf.write_text(_variant_conf(base.read_text(), variant))
    for name in ("slurmd", "slurmctld"):
        _stop(cluster.procs.pop(name))
    ctld = _start(cluster, "slurmctld", ["slurmctld", "-D", "-c", "-i"])
    _wait(lambda: _ok(cluster, "scontrol", "ping"), "slurmctld", ctld)
    slurmd = _start(cluster, "slurmd", ["slurmd", "-D", "-N", "node1"])
    _wait(lambda: "node1" in cluster.run("sinfo", "-h", "-N", "-t", "idle", "-o", "%N", check=False), "slurmd", slurmd)
    found = cluster.run("scontrol", "show", "config")
    assert re.search(rf"PriorityType\s+= {SETTINGS[variant]['PriorityType']}", found), "slurm.conf not applied"


def main(argv: list[str] | None = None) -> int:
    """Start the cluster and capture the three configurations."""
    out = Path((argv if argv is not None else sys.argv[1:])[0]) if (argv or sys.argv[1:]) else DEFAULT_OUT
    with slurm_cluster() as cluster:
        capture(cluster, out / "testcluster")
        for command in SACCTMGR:
            cluster.run("sacctmgr", "-i", *command)
        for variant in SETTINGS:
            restart(cluster, variant)
            capture(cluster, out / variant)
    return 0


if __name__ == "__main__":
    sys.exit(main())
