"""The twin's knobs: the scheduler settings a what-if or a sweep may change on the captured configuration before the
`slurm` policy replays it (priority weights and periods, backfill on or off and its limits, the main pass's timing).

Each knob is one field of analytics.slurm_config's PrioritySpec or SchedSpec, set to a whole number within the
bounds below (backfill: 0 = sched/builtin, 1 = sched/backfill); `account_gpus.<account>` caps the GPUs an account
runs at once (its association's GrpTRES=gres/gpu, enforced); `merge.<a>+<b>` = 1 lets the partitions' jobs run on
the nodes of all of them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

from analytics.slurm_config import DAY_S, AssocSpec, PartitionSpec, SlurmConfig


class Knob(NamedTuple):
    """Where a knob lives (the SlurmConfig field "priority" or "sched", and its field there), its bounds and its name
    in slurm.conf."""

    spec: str
    field: str
    low: int
    high: int
    slurm: str


WEIGHT_MAX = 4_294_967_295  # Slurm's PriorityWeight* are 32-bit
KNOBS: dict[str, Knob] = {
    "weight_fairshare": Knob("priority", "weight_fairshare", 0, WEIGHT_MAX, "PriorityWeightFairshare"),
    "weight_age": Knob("priority", "weight_age", 0, WEIGHT_MAX, "PriorityWeightAge"),
    "weight_job_size": Knob("priority", "weight_job_size", 0, WEIGHT_MAX, "PriorityWeightJobSize"),
    "weight_partition": Knob("priority", "weight_partition", 0, WEIGHT_MAX, "PriorityWeightPartition"),
    "weight_qos": Knob("priority", "weight_qos", 0, WEIGHT_MAX, "PriorityWeightQOS"),
    "max_age_s": Knob("priority", "max_age_s", 1, 365 * DAY_S, "PriorityMaxAge (s)"),
    "decay_half_life_s": Knob("priority", "decay_half_life_s", 0, 365 * DAY_S, "PriorityDecayHalfLife (s)"),
    "calc_period_s": Knob("priority", "calc_period_s", 1, DAY_S, "PriorityCalcPeriod (s)"),
    "backfill": Knob("sched", "backfill", 0, 1, "backfill (1) or builtin (0)"),
    "sched_interval_s": Knob("sched", "sched_interval_s", 1, DAY_S, "sched_interval (s)"),
    "default_queue_depth": Knob("sched", "default_queue_depth", 1, 1_000_000, "default_queue_depth"),
    "bf_interval_s": Knob("sched", "bf_interval_s", 1, DAY_S, "bf_interval (s)"),
    "bf_window_s": Knob("sched", "bf_window_s", 60, 30 * DAY_S, "bf_window (s)"),
    "bf_max_job_test": Knob("sched", "bf_max_job_test", 1, 1_000_000, "bf_max_job_test"),
    "bf_resolution_s": Knob("sched", "bf_resolution_s", 1, 3600, "bf_resolution (s)"),
}


ACCOUNT_GPUS = "account_gpus"  # account_gpus.<account>: the account's GrpTRES=gres/gpu (GPUs running at once)
MERGE = "merge"  # merge.<a>+<b>: 1 puts the partitions' nodes together (each partition gets all of them), 0 leaves them
PARAMETERIZED: dict[str, tuple[int, int]] = {ACCOUNT_GPUS: (0, 1_000_000), MERGE: (0, 1)}
MAX_NAME_CHARS = 64


def param_of(name: str) -> tuple[str, str] | None:
    """(kind, argument) of a knob named "<kind>.<argument>" of PARAMETERIZED (None for another name)."""
    kind, dot, argument = name.partition(".")
    return (kind, argument) if kind in PARAMETERIZED and dot else None


def account_of(name: str) -> str | None:
    """The account of an account_gpus.<account> knob name (None for another name)."""
    param = param_of(name)
    return param[1] if param is not None and param[0] == ACCOUNT_GPUS else None


def merged_of(name: str) -> tuple[str, ...] | None:
    """The partitions of a merge.<a>+<b> knob name (None for another name)."""
    param = param_of(name)
    return tuple(param[1].split("+")) if param is not None and param[0] == MERGE else None


def _name_ok(text: str) -> bool:
    return 0 < len(text) <= MAX_NAME_CHARS and text.isprintable() and not any(c in text for c in ",= +")


def _bounds(name: str) -> tuple[int, int]:
    param = param_of(name)
    if param is None:
        if name not in KNOBS:
            expected = ", ".join((*KNOBS, f"{ACCOUNT_GPUS}.<account>", f"{MERGE}.<partition>+<partition>"))
            raise ValueError(f"unknown twin knob {name!r}; expected one of {expected}")
        return KNOBS[name].low, KNOBS[name].high
    kind, argument = param
    names = argument.split("+") if kind == MERGE else [argument]
    if not all(_name_ok(n) for n in names) or (kind == MERGE and len(set(names)) < 2):
        what = "two or more partition names joined by +" if kind == MERGE else "an account name"
        raise ValueError(f"twin knob {name!r}: expected {what} of at most {MAX_NAME_CHARS} characters each")
    return PARAMETERIZED[kind]


def check_knob(name: str, value: object) -> int:
    """The knob's value as a whole number (ValueError naming the knob when it is unknown, not whole or out of
    bounds)."""
    low, high = _bounds(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"twin knob {name} must be a number, got {value!r}")
    if value != int(value) or not low <= value <= high:
        raise ValueError(f"twin knob {name} must be a whole number from {low:,} to {high:,}, got {value:g}")
    return int(value)


def with_knobs(config: SlurmConfig, knobs: tuple[tuple[str, float], ...]) -> SlurmConfig:
    """config with each (knob, value) set (priority weights on a priority/basic capture turn multifactor on; an
    account's GPU cap is set on its association, added below root when the capture has none, and enforced; merged
    partitions each get the nodes of all; ValueError naming a merged partition the capture does not have)."""
    priority, sched, assocs, enforced = config.priority, config.sched, config.assocs, config.limits_enforced
    partitions = config.partitions
    for name, value in knobs:
        whole, account, merged = check_knob(name, value), account_of(name), merged_of(name)
        if account is not None:
            assocs, enforced = _capped(assocs, account, whole), True
            continue
        if merged is not None:
            partitions = _merged(partitions, merged) if whole else partitions
            continue
        knob = KNOBS[name]
        if knob.spec == "priority":
            priority = dataclasses.replace(priority, **{knob.field: whole})
            if knob.field.startswith("weight_") and whole:
                priority = dataclasses.replace(priority, multifactor=True)
        else:
            sched = dataclasses.replace(sched, **{knob.field: bool(whole) if knob.field == "backfill" else whole})
    return dataclasses.replace(
        config, partitions=partitions, priority=priority, sched=sched, assocs=assocs, limits_enforced=enforced
    )


def _merged(partitions: tuple[PartitionSpec, ...], names: tuple[str, ...]) -> tuple[PartitionSpec, ...]:
    """partitions with each named one over the nodes of all of them (ValueError naming a partition not captured)."""
    known = {p.name for p in partitions}
    missing = [n for n in names if n not in known]
    if missing:
        raise ValueError(
            f"twin knob {MERGE}.{'+'.join(names)}: no partition {missing[0]!r} in the captured configuration "
            f"(partitions: {', '.join(sorted(known))})"
        )
    nodes = tuple(sorted({i for p in partitions if p.name in names for i in p.nodes}))
    return tuple(dataclasses.replace(p, nodes=nodes) if p.name in names else p for p in partitions)


def _capped(assocs: tuple[AssocSpec, ...], account: str, gpus: int) -> tuple[AssocSpec, ...]:
    """assocs with the account association's GrpTRES=gres/gpu set to gpus."""
    if any(a.account == account and not a.user for a in assocs):
        return tuple(
            dataclasses.replace(a, grp_gpus=gpus) if a.account == account and not a.user else a for a in assocs
        )
    return (*assocs, AssocSpec(account, grp_gpus=gpus))


def knob_values(config: SlurmConfig) -> dict[str, int]:
    """Each knob's value in config (backfill as 1 or 0)."""
    return {name: int(getattr(getattr(config, knob.spec), knob.field)) for name, knob in KNOBS.items()}


def scaled_nodes(config: SlurmConfig, scale: float) -> SlurmConfig:
    """config with round(scale x its nodes) nodes (at least one): the first ones kept, or, past them, copies of
    each node in turn (named "<node>+k", in the same partitions) - the what-if's VC capacity scale for the twin."""
    n = len(config.nodes)
    target = max(1, round(n * scale))
    if target == n:
        return config
    nodes = tuple(
        config.nodes[i % n]
        if i < n
        else dataclasses.replace(config.nodes[i % n], name=f"{config.nodes[i % n].name}+{i // n}")
        for i in range(target)
    )
    members = [set(p.nodes) for p in config.partitions]
    partitions = tuple(
        dataclasses.replace(p, nodes=tuple(i for i in range(target) if i % n in member))
        for p, member in zip(config.partitions, members, strict=True)
    )
    return dataclasses.replace(config, nodes=nodes, partitions=partitions)
