"""The twin's knobs: the scheduler settings a what-if or a sweep may change on the captured configuration before the
`slurm` policy replays it (priority weights and periods, backfill on or off and its limits, the main pass's timing).

Each knob is one field of analytics.slurm_config's PrioritySpec or SchedSpec, set to a whole number within the
bounds below (backfill: 0 = sched/builtin, 1 = sched/backfill); `account_gpus.<account>` caps the GPUs an account
runs at once (its association's GrpTRES=gres/gpu, enforced).
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

from analytics.slurm_config import DAY_S, AssocSpec, SlurmConfig


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
ACCOUNT_GPUS_MAX = 1_000_000
MAX_ACCOUNT_CHARS = 64


def account_of(name: str) -> str | None:
    """The account of an account_gpus.<account> knob name (None for another name)."""
    knob, dot, account = name.partition(".")
    return account if knob == ACCOUNT_GPUS and dot else None


def _bounds(name: str) -> tuple[int, int]:
    account = account_of(name)
    if account is not None:
        if not 0 < len(account) <= MAX_ACCOUNT_CHARS or not account.isprintable() or any(c in account for c in ",= "):
            raise ValueError(
                f"twin knob {name!r}: the account must be a name of at most {MAX_ACCOUNT_CHARS} characters"
            )
        return 0, ACCOUNT_GPUS_MAX
    if name not in KNOBS:
        raise ValueError(f"unknown twin knob {name!r}; expected one of {', '.join(KNOBS)} or {ACCOUNT_GPUS}.<account>")
    return KNOBS[name].low, KNOBS[name].high


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
    account's GPU cap is set on its association, added below root when the capture has none, and enforced)."""
    priority, sched, assocs, enforced = config.priority, config.sched, config.assocs, config.limits_enforced
    for name, value in knobs:
        whole, account = check_knob(name, value), account_of(name)
        if account is not None:
            assocs, enforced = _capped(assocs, account, whole), True
            continue
        knob = KNOBS[name]
        if knob.spec == "priority":
            priority = dataclasses.replace(priority, **{knob.field: whole})
            if knob.field.startswith("weight_") and whole:
                priority = dataclasses.replace(priority, multifactor=True)
        else:
            sched = dataclasses.replace(sched, **{knob.field: bool(whole) if knob.field == "backfill" else whole})
    return dataclasses.replace(config, priority=priority, sched=sched, assocs=assocs, limits_enforced=enforced)


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
