"""The twin's knobs set on a captured configuration."""

import dataclasses

import pytest

from analytics.slurm_config import NodeSpec, PartitionSpec, PrioritySpec, SchedSpec, SlurmConfig
from sim.slurm.knobs import KNOBS, check_knob, knob_values, scaled_nodes, with_knobs

CAPTURED = SlurmConfig(
    nodes=(NodeSpec("n0", 8, 64),),
    partitions=(PartitionSpec("p", (0,)),),
    priority=PrioritySpec(),  # priority/basic
    sched=SchedSpec(),
)


def test_each_knob_sets_its_field_and_nothing_else():
    for name, knob in KNOBS.items():
        value = knob.high if knob.low == 0 else knob.low
        changed = with_knobs(CAPTURED, ((name, float(value)),))
        spec = getattr(changed, knob.spec)
        expected = bool(value) if knob.field == "backfill" else value
        assert getattr(spec, knob.field) == expected, name
        other = "sched" if knob.spec == "priority" else "priority"
        assert getattr(changed, other) == getattr(CAPTURED, other) or knob.field.startswith("weight_")


def test_a_weight_turns_basic_priority_into_multifactor_and_backfill_zero_is_builtin():
    changed = with_knobs(CAPTURED, (("weight_fairshare", 10_000.0), ("backfill", 0.0)))
    assert changed.priority.multifactor and changed.priority.weight_fairshare == 10_000
    assert changed.sched.backfill is False
    assert with_knobs(CAPTURED, (("weight_age", 0.0),)).priority.multifactor is False


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("nope", 1, "unknown twin knob 'nope'"),
        ("bf_window_s", 10, "from 60 to"),
        ("weight_age", -1, "from 0 to"),
        ("weight_age", 2.5, "whole number"),
        ("weight_age", float("nan"), "must be a number"),
        ("backfill", True, "must be a number"),
    ],
)
def test_bad_values_are_refused_by_name(name, value, message):
    with pytest.raises(ValueError, match=message):
        check_knob(name, value)


def test_knob_values_read_back_what_with_knobs_set():
    changed = with_knobs(CAPTURED, (("weight_age", 7.0), ("backfill", 0.0), ("bf_window_s", 3600.0)))
    values = knob_values(changed)
    assert set(values) == set(KNOBS)
    assert (values["weight_age"], values["backfill"], values["bf_window_s"]) == (7, 0, 3600)
    assert knob_values(CAPTURED)["backfill"] == 1


def test_scaled_nodes_copy_each_node_in_turn_into_its_partitions_or_keep_the_first_ones():
    config = SlurmConfig(
        nodes=tuple(NodeSpec(f"n{i}", 8, 64) for i in range(4)),
        partitions=(PartitionSpec("a", (0, 1)), PartitionSpec("b", (1, 2, 3))),
    )
    bigger = scaled_nodes(config, 1.5)
    assert [n.name for n in bigger.nodes] == ["n0", "n1", "n2", "n3", "n0+1", "n1+1"]
    assert bigger.partitions[0].nodes == (0, 1, 4, 5) and bigger.partitions[1].nodes == (1, 2, 3, 5)
    smaller = scaled_nodes(config, 0.5)
    assert [n.name for n in smaller.nodes] == ["n0", "n1"]
    assert smaller.partitions[0].nodes == (0, 1) and smaller.partitions[1].nodes == (1,)
    assert scaled_nodes(config, 1.0) is config and len(scaled_nodes(config, 0.01).nodes) == 1


def test_an_account_gpu_cap_is_set_on_its_association_or_added_and_enforced():
    from analytics.slurm_config import AssocSpec

    added = with_knobs(dataclasses.replace(CAPTURED, limits_enforced=False), (("account_gpus.my-lab", 4.0),))
    assert added.assocs == (AssocSpec("my-lab", grp_gpus=4),) and added.limits_enforced
    captured = dataclasses.replace(CAPTURED, assocs=(AssocSpec("nlp", shares=5, grp_gpus=16), AssocSpec("nlp", "ann")))
    changed = with_knobs(captured, (("account_gpus.nlp", 2.0),))
    assert changed.assocs == (AssocSpec("nlp", shares=5, grp_gpus=2), AssocSpec("nlp", "ann"))


@pytest.mark.parametrize(
    ("name", "message"),
    [("account_gpus.", "expected an account name"), ("account_gpus.a,b", "expected an account name")],
)
def test_bad_account_caps_are_refused_by_name(name, message):
    with pytest.raises(ValueError, match=message):
        check_knob(name, 1)
    with pytest.raises(ValueError, match="from 0 to 1,000,000"):
        check_knob("account_gpus.nlp", -1)


def test_merged_partitions_each_get_the_nodes_of_all_and_an_unknown_one_is_named():
    config = SlurmConfig(
        nodes=tuple(NodeSpec(f"n{i}", 8, 64) for i in range(3)),
        partitions=(PartitionSpec("short", (0,)), PartitionSpec("long", (1, 2)), PartitionSpec("other", (2,))),
    )
    merged = with_knobs(config, (("merge.short+long", 1.0),))
    assert [p.nodes for p in merged.partitions] == [(0, 1, 2), (0, 1, 2), (2,)]
    assert with_knobs(config, (("merge.short+long", 0.0),)) == config
    with pytest.raises(ValueError, match="no partition 'gpu' in the captured configuration"):
        with_knobs(config, (("merge.short+gpu", 1.0),))
    with pytest.raises(ValueError, match="two or more partition names"):
        check_knob("merge.short", 1)
