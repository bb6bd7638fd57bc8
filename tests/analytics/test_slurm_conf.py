"""The scheduler configuration parser (analytics.ingest.slurm_conf) on the five outputs of a real Slurm 22.05 under
three slurm.conf variants (captured by tests/slurm/capture_conf.py), Slurm's time and hostlist forms, and bad input:
each problem named by file, line and key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analytics.ingest.slurm_conf import (
    CONFIG_FILES,
    SLURM_CONFIG_COMMANDS,
    captured_meta,
    expand_hostlist,
    parse_slurm_time,
    read_slurm_config,
)
from analytics.scheduler import CAPTURE_KEY, CONFIG_KEY, config_summary, span_text
from analytics.slurm_config import (
    AssocSpec,
    NodeSpec,
    PartitionSpec,
    QosSpec,
    SlurmConfigError,
    config_from_dict,
    config_to_dict,
)

CONF = Path(__file__).parent / "fixtures" / "slurm_conf"
TESTCLUSTER, MULTIFACTOR, CLASSIC = CONF / "testcluster", CONF / "multifactor", CONF / "classic"
# The associations the capture script made with sacctmgr (the same in both richer variants).
ASSOCS = (
    AssocSpec("root", "root"),
    AssocSpec("teama", "", "root", shares=30, grp_gpus=6, grp_jobs=7, max_jobs=4),
    AssocSpec("teama", "daemon", max_jobs=4),  # MaxJobs is shown inherited on the account's users
    AssocSpec("teama", "root", max_jobs=4),
    AssocSpec("teamc", "", "teama", shares=5, max_jobs=4),
    AssocSpec("teamc", "daemon", shares=2, max_jobs=2),
    AssocSpec("teamb", "", "root", shares=10),
    AssocSpec("teamb", "nobody", shares=3, grp_gpus=4),
)
QOS = (
    QosSpec("normal"),
    QosSpec("high", priority=100, usage_factor=2.0, grp_gpus=8, grp_jobs=10, max_gpus_per_user=4, max_jobs_per_user=3),
    QosSpec("low", priority=10, usage_factor=0.5),
)
NODES = (NodeSpec("gpu02", 4, 16), NodeSpec("gpu03", 4, 16), NodeSpec("node1", 8, 8))


def test_the_test_cluster_as_configured_basic_priority_and_default_backfill():
    config = read_slurm_config(TESTCLUSTER)
    assert config.nodes == (NodeSpec("node1", 8, 8),)
    assert config.partitions == tuple(PartitionSpec(p, (0,), max_time_s=1800) for p in ("vcA", "vcB", "vcC"))
    assert not config.priority.multifactor
    assert config.sched.backfill and config.sched.bf_interval_s == 5  # SchedulerParameters=bf_interval=5
    assert (config.sched.bf_window_s, config.sched.bf_resolution_s, config.sched.sched_interval_s) == (86_400, 60, 60)
    assert config.kill_wait_s == 2 and config.over_time_limit_s == 0
    assert not config.limits_enforced  # AccountingStorageEnforce = none
    assert [(a.account, a.user) for a in config.assocs] == [
        ("root", "root"), ("teama", ""), ("teama", "daemon"), ("teama", "root"), ("teamb", ""), ("teamb", "nobody"),
    ]  # fmt: skip
    assert config.qos == (QosSpec("normal"),) and config.not_modelled == ()
    assert (config.billing_cpu_weight, config.billing_gpu_weight) == (1.0, 0.0)


def test_multifactor_fair_tree_backfill_hostlists_and_limits():
    config = read_slurm_config(MULTIFACTOR)
    p = config.priority
    assert p.multifactor and p.fair_tree and p.favor_small
    weights = (p.weight_age, p.weight_fairshare, p.weight_job_size, p.weight_partition, p.weight_qos)
    assert weights == (100, 10_000, 50, 1000, 2000)
    assert (p.max_age_s, p.decay_half_life_s, p.calc_period_s, p.dampening) == (3600, 1800, 60, 1)
    s = config.sched
    assert s.backfill and s.bf_continue
    assert (s.bf_interval_s, s.bf_window_s, s.bf_resolution_s, s.bf_max_job_test) == (5, 3600, 10, 200)
    assert (s.sched_interval_s, s.default_queue_depth) == (10, 50)
    assert config.nodes == NODES  # node1's untyped gpu:8 and gpu[02-03]'s gpu:a100:4
    assert config.partitions == (
        PartitionSpec("vcA", (0, 1, 2), 1800, 600, 2, priority_job_factor=10, priority_tier=2),  # gpu[02-03],node1
        PartitionSpec("vcB", (2,), max_time_s=86_400),  # MaxTime=1-00:00:00
        PartitionSpec("vcC", (0, 1), max_time_s=None),  # hidden, MaxTime=UNLIMITED
    )
    assert config.assocs == ASSOCS and config.qos == QOS
    assert config.limits_enforced and config.kill_wait_s == 5 and config.boot_time.startswith("2026-")
    assert (config.billing_cpu_weight, config.billing_gpu_weight) == (1.0, 4.0)  # the same TRESBillingWeights
    assert config.not_modelled == (
        "GPU types, which jobs may ask for: gpu:a100:4",
        "nodes not up when captured, counted as up: gpu02 DOWN, gpu03 DOWN",
        "assoc MaxWall: teamb, teamb/nobody",
        "qos MaxSubmitPU: low",
    )


def test_classic_fair_share_builtin_scheduler_and_what_the_model_leaves_out():
    config = read_slurm_config(CLASSIC)
    p = config.priority
    assert p.multifactor and not p.fair_tree and p.dampening == 3 and not p.favor_small
    assert (p.weight_age, p.weight_fairshare, p.weight_qos) == (1000, 5000, 0)
    assert (p.max_age_s, p.decay_half_life_s, p.calc_period_s) == (3 * 86_400, 2 * 86_400, 300)
    assert not config.sched.backfill and config.sched.sched_interval_s == 20 and config.sched.default_queue_depth == 300
    assert config.over_time_limit_s == 120 and not config.limits_enforced  # AccountingStorageEnforce=associations
    assert config.partitions == (
        PartitionSpec("vcA", (2,), max_time_s=46 * 60, priority_job_factor=5),  # MaxTime=45:30, Slurm rounds up
        PartitionSpec("vcB", (0, 1, 2), max_time_s=2 * 86_400 + 12 * 3600, default_time_s=3600),  # 2-12, 1:00:00
    )
    notes = config.not_modelled
    assert "PriorityWeightTRES=CPU=100,GRES/gpu=200 (TRES weights)" in notes
    assert "PriorityFlags CALCULATE_RUNNING" in notes and "SchedulerParameters defer" in notes
    assert "PreemptType=preempt/qos (preemption)" in notes and "partition OverTimeLimit: vcB 3" in notes


def test_the_config_survives_its_json_form():
    for folder in (TESTCLUSTER, MULTIFACTOR, CLASSIC):
        config = read_slurm_config(folder)
        assert config_from_dict(json.loads(json.dumps(config_to_dict(config)))) == config


def test_the_summary_says_the_configuration_in_one_line():
    assert config_summary(read_slurm_config(MULTIFACTOR)) == (
        "multifactor; weights fair-share 10000, age 100 (full at 1 h), job size 50 (small first), partition 1000, "
        "QOS 2000; Fair Tree, usage half-life 30 min; backfill (bf_interval 5 s, bf_window 60 min, bf_resolution "
        "10 s, bf_max_job_test 200, bf_continue), sched_interval 10 s; 3 partitions on 3 nodes, 16 GPUs; 3 accounts, "
        "3 users, 3 QOS; limits enforced"
    )
    classic = config_summary(read_slurm_config(CLASSIC))
    assert "classic fair-share (dampening 3), usage half-life 2 days" in classic
    assert "builtin (strict priority order, no backfill), sched_interval 20 s" in classic
    assert classic.endswith("limits set but not enforced")
    assert config_summary(read_slurm_config(TESTCLUSTER)).startswith("basic priority (first submitted, first ")


def test_the_commands_are_the_ones_documented():
    assert CONFIG_FILES == ("config.txt", "partitions.txt", "nodes.txt", "assoc.txt", "qos.txt")
    docs = (Path(__file__).parents[2] / "docs" / "formats.md").read_text()
    for command in SLURM_CONFIG_COMMANDS.values():
        assert " ".join(command) in docs


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 1800), ("45:30", 2730), ("01:00:00", 3600), ("2-12", 216_000), ("1-00:30", 88_200),
     ("1-00:00:00", 86_400), ("0", 0), ("30 sec", 30), ("1 min", 60), ("UNLIMITED", None), ("NONE", None),
     ("INFINITE", None)],
)  # fmt: skip
def test_slurm_times(text, seconds):
    assert parse_slurm_time(text) == seconds


@pytest.mark.parametrize("text", ["1:2:3:4", "ten", "-5", "1-2-3", "5 fortnights", "", "1:xx"])
def test_what_is_not_a_slurm_time(text):
    with pytest.raises(ValueError, match="is not a Slurm time"):
        parse_slurm_time(text)


def test_hostlists():
    assert expand_hostlist("node[1-3,5]") == ["node1", "node2", "node3", "node5"]
    assert expand_hostlist("gpu[02-03],node1") == ["gpu02", "gpu03", "node1"]
    assert expand_hostlist("r[1-2]n[8-9]") == ["r1n8", "r1n9", "r2n8", "r2n9"]
    assert expand_hostlist("a,b") == ["a", "b"] and expand_hostlist("n[099-101]") == ["n099", "n100", "n101"]
    for bad in ("node[1-", "node[a-b]", "n1,,n2", "n1]"):
        with pytest.raises(ValueError):
            expand_hostlist(bad)


def _edited(tmp_path: Path, name: str, old: str, new: str, source: Path = MULTIFACTOR) -> Path:
    """A copy of a fixture folder with old replaced by new (once) in one of its files."""
    folder = tmp_path / "conf"
    shutil.copytree(source, folder)
    text = (folder / name).read_text()
    assert text.count(old) == 1, old
    (folder / name).write_text(text.replace(old, new))
    return folder


def _line(folder: Path, name: str, start: str) -> int:
    return next(i for i, line in enumerate((folder / name).read_text().splitlines(), 1) if line.startswith(start))


def _error(folder: Path) -> str:
    with pytest.raises(SlurmConfigError) as caught:
        read_slurm_config(folder)
    return str(caught.value)


@pytest.mark.parametrize(
    ("name", "old", "new", "line_start", "expected"),
    [
        ("config.txt", "PriorityWeightAge       = 100", "PriorityWeightAge       = ten", "PriorityWeightAge",
         "PriorityWeightAge: 'ten' is not a whole number"),
        ("config.txt", "PriorityWeightQOS       = 2000", "PriorityWeightQOS       = 2e3", "PriorityWeightQOS",
         "PriorityWeightQOS: '2e3' is not a whole number"),
        ("config.txt", "PriorityFlags           = ", "PriorityFlags           = NO_FAIR_TREE,FAST", "PriorityFlags",
         "PriorityFlags: unknown flag 'FAST'"),
        ("config.txt", "= sched/backfill", "= sched/wiki", "SchedulerType",
         "SchedulerType: 'sched/wiki' is not sched/backfill or sched/builtin"),
        ("config.txt", "= priority/multifactor", "= priority/magic", "PriorityType",
         "PriorityType: 'priority/magic' is not priority/basic or priority/multifactor"),
        ("config.txt", "bf_window=60", "bf_window=1h", "SchedulerParameters",
         "SchedulerParameters bf_window: '1h' is not a whole number"),
        ("config.txt", "bf_resolution=10", "bf_resolution=0", "SchedulerParameters",
         "SchedulerParameters bf_resolution: 0 is below 1"),
        ("config.txt", "PriorityMaxAge          = 01:00:00", "PriorityMaxAge          = soon", "PriorityMaxAge",
         "PriorityMaxAge: 'soon' is not a Slurm time"),
        ("config.txt", "ClusterName             = heliostest", "ClusterName heliostest", "ClusterName",
         "line: expected 'Key = value', got 'ClusterName heliostest'"),
        ("assoc.txt", "|teama|||root|30|7|", "|teama|||root|30|-1|", "heliostest|teama||",
         "GrpJobs: '-1' is not a whole number (sacctmgr shows a cleared limit as empty, never -1)"),
        ("assoc.txt", "|gres/gpu=6|", "|gres/gpu=-1|", "heliostest|teama||",
         "GrpTRES: '-1' is not a whole number (sacctmgr shows a cleared limit as empty, never -1)"),
        ("assoc.txt", "|teamb|||root|10|", "|teamb|||root|ten|", "heliostest|teamb||",
         "Share: 'ten' is not a whole number"),
        ("assoc.txt", "|teamc|daemon|||2|", "|teamc|daemon|||parent|", "heliostest|teamc|daemon",
         "Share: Fairshare=parent is not modelled"),
        ("assoc.txt", "|teamb|nobody||", "|teamb|nobody|vcA|", "heliostest|teamb|nobody",
         "Partition: associations of one partition (vcA) are not modelled"),
        ("assoc.txt", "|teamc|||teama|", "|teamc|||teamz|", "heliostest|teamc||",
         "ParentName: account 'teamz' has no association of its own"),
        ("assoc.txt", "Cluster|Account|User|", "Cluster|Account|Usr|", "Cluster",
         "Usr: not a column of sacctmgr --parsable2 show assoc"),
        ("qos.txt", "high|100|2.000000|", "high|100|lots|", "high", "UsageFactor: 'lots' is not a number"),
        ("qos.txt", "Name|Priority|", "Name|Priority|Bogus|", "Name", "Bogus: not a column of sacctmgr"),
        ("qos.txt", "low|10|", "low|10|0.5|", "low", "line: 24 fields, the header has 23"),
        ("partitions.txt", "Nodes=node1 ", "Nodes=node9 ", "PartitionName=vcB",
         "Nodes: node 'node9' is not in scontrol show nodes"),
        ("partitions.txt", "MaxTime=1-00:00:00", "MaxTime=a-day", "PartitionName=vcB",
         "MaxTime: 'a-day' is not a Slurm time"),
        ("partitions.txt", "PriorityJobFactor=10", "PriorityJobFactor=high", "PartitionName=vcA",
         "PriorityJobFactor: 'high' is not a whole number"),
        ("nodes.txt", "CPUTot=8 ", "CPUTot=eight ", "NodeName=node1", "CPUTot: 'eight' is not a whole number"),
    ],
)  # fmt: skip
def test_bad_values_are_named_by_file_line_and_key(tmp_path, name, old, new, line_start, expected):
    folder = _edited(tmp_path, name, old, new)
    message = _error(folder)
    assert message.startswith(f"{folder / name} line {_line(folder, name, line_start)}, "), message
    assert expected in message


def test_a_file_that_is_not_slurms(tmp_path):
    folder = tmp_path / "conf"
    shutil.copytree(MULTIFACTOR, folder)
    (folder / "config.txt").write_text("vc,gpus\nvcA,8\n")
    assert _error(folder) == (
        f"{folder}/config.txt line 1, first line: expected 'Configuration data as of' (scontrol show config), got "
        "'vc,gpus'"
    )
    shutil.copy(MULTIFACTOR / "config.txt", folder / "config.txt")
    (folder / "nodes.txt").write_text("NODELIST|PARTITION|GRES\nnode1|vcA|gpu:8\n")
    assert _error(folder).startswith(f"{folder}/nodes.txt line 1, NodeName: expected a NodeName=... line")
    shutil.copy(MULTIFACTOR / "nodes.txt", folder / "nodes.txt")
    shutil.copy(MULTIFACTOR / "qos.txt", folder / "assoc.txt")  # the wrong table
    assert _error(folder).startswith(f"{folder}/assoc.txt line 1, Name: not a column of sacctmgr --parsable2 show")
    (folder / "assoc.txt").write_text("")
    assert _error(folder).startswith(f"{folder}/assoc.txt line 1, header: an empty file")
    config = (MULTIFACTOR / "config.txt").read_text()
    (folder / "config.txt").write_text(config[: config.index("PriorityType")])  # cut short
    assert "PriorityType: missing: not the whole output of scontrol show config" in _error(folder)


def test_a_missing_file_or_folder(tmp_path):
    folder = tmp_path / "conf"
    shutil.copytree(MULTIFACTOR, folder)
    (folder / "qos.txt").unlink()
    assert _error(folder) == f"{folder}/qos.txt: missing (the output of {' '.join(SLURM_CONFIG_COMMANDS['qos.txt'])})"
    assert _error(tmp_path / "nowhere").startswith(f"{tmp_path}/nowhere: no such folder (--slurm-config names a")


def test_other_clusters_of_the_same_slurmdbd_are_left_out(tmp_path):
    folder = _edited(tmp_path, "assoc.txt", "heliostest|teamb|nobody|", "othercluster|teamb|nobody|")
    assert ("teamb", "nobody") not in {(a.account, a.user) for a in read_slurm_config(folder).assocs}
    config = (folder / "config.txt").read_text().replace("= heliostest", "= elsewhere")
    (folder / "config.txt").write_text(config)
    assert "Cluster: no association of cluster 'elsewhere' (ClusterName)" in _error(folder)


def test_a_parsable_export_with_a_trailing_bar_and_the_default_qos_columns(tmp_path):
    folder = tmp_path / "conf"
    shutil.copytree(MULTIFACTOR, folder)
    lines = (folder / "assoc.txt").read_text().splitlines()
    (folder / "assoc.txt").write_text("".join(line + "|\n" for line in lines))  # sacctmgr -p
    default_qos = (TESTCLUSTER / "qos.txt").read_text()  # plain `sacctmgr show qos -P`: all its columns
    (folder / "qos.txt").write_text(default_qos)
    config = read_slurm_config(folder)
    assert config.assocs == ASSOCS and config.qos == (QosSpec("normal"),)


def test_captured_meta_keeps_the_config_or_the_error():
    meta = captured_meta(MULTIFACTOR)
    assert config_from_dict(meta[CONFIG_KEY]) == read_slurm_config(MULTIFACTOR)
    info = meta[CAPTURE_KEY]
    assert info["error"] is None and info["cluster"] == "heliostest" and info["slurm_version"] == "22.05.8"
    assert info["as_of"].startswith("2026-") and info["source"] == str(MULTIFACTOR)


def test_a_capture_helios_ran_names_the_commands(tmp_path):
    folder = _edited(tmp_path, "qos.txt", "high|100|2.000000|", "high|x|2.000000|")
    meta = captured_meta(folder, source="scontrol and sacctmgr")
    command = " ".join(SLURM_CONFIG_COMMANDS["qos.txt"])
    assert meta[CONFIG_KEY] is None and meta[CAPTURE_KEY]["source"] == "scontrol and sacctmgr"
    assert meta[CAPTURE_KEY]["error"] == f"`{command}` line 3, Priority: 'x' is not a whole number"


def test_span_text():
    assert [span_text(s) for s in (90, 60, 1800, 3600, 86_400, 172_800, None)] == [
        "90 s", "1 min", "30 min", "1 h", "1 day", "2 days", "unlimited",
    ]  # fmt: skip
