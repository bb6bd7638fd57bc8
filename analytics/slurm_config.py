"""THE scheduler configuration schema: a Slurm cluster's nodes, partitions, associations, QOS, priority and
scheduling settings as frozen records, as captured with a dataset (analytics.ingest.slurm_conf) and replayed by
the `slurm` policy (sim.slurm).

Times are seconds (Slurm's own minutes are converted where the settings are read); None means unlimited or unset.
`config_from_dict` builds and checks a SlurmConfig from the JSON form `config_to_dict` writes (meta.json keeps
it), naming the first bad field.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

DAY_S = 86_400
ROOT = "root"  # the account at the top of every association tree


class SlurmConfigError(ValueError):
    """A scheduler configuration that cannot be modelled (a bad number, an unknown partition or account)."""


@dataclass(frozen=True)
class NodeSpec:
    """One node: its name, GPUs and CPUs."""

    name: str
    gpus: int
    cpus: int = 1


@dataclass(frozen=True)
class PartitionSpec:
    """A partition: a view over some of the cluster's nodes (by index), with its limits and priority factor."""

    name: str
    nodes: tuple[int, ...]
    max_time_s: int | None = None  # MaxTime
    default_time_s: int | None = None  # DefaultTime (a job without a limit gets it, else MaxTime)
    max_nodes: int | None = None  # MaxNodes per job
    priority_job_factor: int = 1  # PriorityJobFactor
    priority_tier: int = 1  # PriorityTier


@dataclass(frozen=True)
class AssocSpec:
    """An association: an account (user "") under its parent account, or a user in an account, with its shares
    and limits."""

    account: str
    user: str = ""
    parent: str = ROOT  # the parent account of an account association (ignored for users: their account)
    shares: int = 1  # Fairshare (raw shares)
    grp_gpus: int | None = None  # GrpTRES=gres/gpu=N: GPUs running at once for the association and all below it
    grp_jobs: int | None = None  # GrpJobs
    max_jobs: int | None = None  # MaxJobs: running jobs per user association (inherited from the account)


@dataclass(frozen=True)
class QosSpec:
    """A quality of service: its priority, usage factor and limits."""

    name: str
    priority: int = 0
    usage_factor: float = 1.0
    grp_gpus: int | None = None  # GrpTRES=gres/gpu=N over every job of the QOS
    grp_jobs: int | None = None
    max_gpus_per_user: int | None = None  # MaxTRESPerUser=gres/gpu=N
    max_jobs_per_user: int | None = None  # MaxJobsPerUser


@dataclass(frozen=True)
class PrioritySpec:
    """PriorityType and the multifactor settings (priority/basic orders jobs by submission)."""

    multifactor: bool = False
    weight_age: int = 0
    weight_fairshare: int = 0
    weight_job_size: int = 0
    weight_partition: int = 0
    weight_qos: int = 0
    max_age_s: int = 7 * DAY_S  # PriorityMaxAge
    decay_half_life_s: int = 7 * DAY_S  # PriorityDecayHalfLife (0 = no decay)
    calc_period_s: int = 300  # PriorityCalcPeriod
    favor_small: bool = False  # PriorityFavorSmall
    fair_tree: bool = True  # Fair Tree (Slurm's default); False = the classic 2^(-usage/shares)
    dampening: int = 1  # FairShareDampeningFactor (classic only)


@dataclass(frozen=True)
class SchedSpec:
    """SchedulerType and SchedulerParameters: the main pass's timing and depth, and backfill's."""

    backfill: bool = True  # sched/backfill; False = sched/builtin (strict priority order, no backfill)
    sched_interval_s: int = 60  # periodic main pass (sched_interval)
    default_queue_depth: int = 100  # jobs the event-triggered main pass looks at
    bf_interval_s: int = 30
    bf_window_s: int = DAY_S
    bf_max_job_test: int = 500
    bf_resolution_s: int = 60
    bf_continue: bool = False


@dataclass(frozen=True)
class SlurmConfig:
    """Everything the model replays: nodes, partitions, associations, QOS, priority, scheduling, time limits."""

    nodes: tuple[NodeSpec, ...]
    partitions: tuple[PartitionSpec, ...]
    assocs: tuple[AssocSpec, ...] = ()
    qos: tuple[QosSpec, ...] = ()
    priority: PrioritySpec = field(default_factory=PrioritySpec)
    sched: SchedSpec = field(default_factory=SchedSpec)
    over_time_limit_s: int = 0  # OverTimeLimit
    kill_wait_s: int = 30  # KillWait
    billing_gpu_weight: float = 0.0  # TRESBillingWeights GRES/gpu (usage is billed CPU-seconds by default)
    billing_cpu_weight: float = 1.0
    boot_time: str = ""  # slurmctld's BOOT_TIME (ISO): its periodic passes count from it; "" when not known
    limits_enforced: bool = True  # AccountingStorageEnforce has limits (or safe): else association/QOS limits are
    # recorded but Slurm does not apply them
    not_modelled: tuple[str, ...] = ()  # captured settings the model leaves out, in words (preemption, TRES weights...)

    def partition_index(self, name: str) -> int:
        """The index of the partition called name (SlurmConfigError if there is none)."""
        for i, p in enumerate(self.partitions):
            if p.name == name:
                return i
        raise SlurmConfigError(f"no partition {name!r} (partitions: {', '.join(p.name for p in self.partitions)})")


_RECORDS: dict[str, type] = {
    "nodes": NodeSpec,
    "partitions": PartitionSpec,
    "assocs": AssocSpec,
    "qos": QosSpec,
    "priority": PrioritySpec,
    "sched": SchedSpec,
}


def config_to_dict(config: SlurmConfig) -> dict[str, Any]:
    """The JSON-ready form of config (tuples become lists)."""
    out = dataclasses.asdict(config)
    for p in out["partitions"]:
        p["nodes"] = list(p["nodes"])
    for key in ("nodes", "partitions", "assocs", "qos", "not_modelled"):
        out[key] = list(out[key])
    return out


def _check_value(where: str, name: str, value: Any, kind: type | str) -> Any:
    """value checked against the field's kind: int (>= 0), float (>= 0, finite), bool, str, or optional int."""
    optional = kind == "int | None"
    if optional and value is None:
        return None
    if kind in (int, "int | None"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SlurmConfigError(f"{where}.{name} must be a whole number >= 0, got {value!r}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise SlurmConfigError(f"{where}.{name} must be a number >= 0, got {value!r}")
        return float(value)
    if kind is bool:
        if not isinstance(value, bool):
            raise SlurmConfigError(f"{where}.{name} must be true or false, got {value!r}")
        return value
    if not isinstance(value, str):
        raise SlurmConfigError(f"{where}.{name} must be a text, got {value!r}")
    return value


_KINDS = {"int": int, "float": float, "bool": bool, "str": str, "int | None": "int | None"}


def _known_fields(cls: type, data: dict, where: str) -> dict[str, dataclasses.Field]:
    """cls's fields by name, or SlurmConfigError naming the settings in data that cls does not have."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise SlurmConfigError(f"{where}: unknown setting(s) {', '.join(unknown)}")
    return fields


def _record(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise SlurmConfigError(f"{where} must be an object, got {data!r}")
    fields = _known_fields(cls, data, where)
    values = {}
    for name, value in data.items():
        kind = fields[name].type
        if kind == "tuple[int, ...]":
            if not isinstance(value, list | tuple):
                raise SlurmConfigError(f"{where}.{name} must be a list of node numbers, got {value!r}")
            values[name] = tuple(_check_value(f"{where}.{name}", str(i), v, int) for i, v in enumerate(value))
        else:
            values[name] = _check_value(where, name, value, _KINDS[kind])
    try:
        return cls(**values)
    except TypeError as exc:
        raise SlurmConfigError(f"{where}: {exc}") from None


def config_from_dict(data: dict[str, Any]) -> SlurmConfig:
    """Build and check a SlurmConfig from its JSON form (SlurmConfigError naming the first bad field)."""
    if not isinstance(data, dict):
        raise SlurmConfigError(f"slurm config must be an object, got {type(data).__name__}")
    top = _known_fields(SlurmConfig, data, "slurm config")
    values: dict[str, Any] = {}
    for name, value in data.items():
        cls = _RECORDS.get(name)
        if top[name].type == "tuple[str, ...]":
            if not isinstance(value, list | tuple):
                raise SlurmConfigError(f"slurm config: {name} must be a list of texts, got {value!r}")
            values[name] = tuple(_check_value(f"slurm config.{name}", str(i), v, str) for i, v in enumerate(value))
        elif cls is None:
            values[name] = _check_value("slurm config", name, value, _KINDS[top[name].type])
        elif name in ("priority", "sched"):
            values[name] = _record(cls, value, name)
        else:
            if not isinstance(value, list | tuple):
                raise SlurmConfigError(f"slurm config: {name} must be a list, got {value!r}")
            values[name] = tuple(_record(cls, v, f"{name}[{i}]") for i, v in enumerate(value))
    config = SlurmConfig(**values) if "nodes" in values and "partitions" in values else None
    if config is None:
        raise SlurmConfigError("slurm config: nodes and partitions are required")
    return check(config)


def check(config: SlurmConfig) -> SlurmConfig:
    """config unchanged if it is consistent (nodes exist, names unique, periods positive), else SlurmConfigError."""
    if not config.nodes:
        raise SlurmConfigError("slurm config: no nodes")
    if not config.partitions:
        raise SlurmConfigError("slurm config: no partitions")
    for k, p in enumerate(config.partitions):
        bad = [n for n in p.nodes if not 0 <= n < len(config.nodes)]
        if bad or not p.nodes:
            known = len(config.nodes)
            raise SlurmConfigError(f"partitions[{k}] ({p.name}): nodes {list(p.nodes)} not among the {known}")
    _unique([p.name for p in config.partitions], "partition")
    _unique([(a.account, a.user) for a in config.assocs], "association")
    _unique([q.name for q in config.qos], "QOS")
    accounts = {a.account for a in config.assocs if not a.user} | {ROOT}
    for a in config.assocs:
        owner = a.account if a.user else a.parent
        if owner not in accounts:
            raise SlurmConfigError(f"association {a.account}/{a.user or '-'}: account {owner!r} is not defined")
    for name in ("calc_period_s",):
        if getattr(config.priority, name) < 1:
            raise SlurmConfigError(f"priority.{name} must be at least 1 s")
    for name in ("sched_interval_s", "bf_interval_s", "bf_resolution_s", "default_queue_depth", "bf_max_job_test"):
        if getattr(config.sched, name) < 1:
            raise SlurmConfigError(f"sched.{name} must be at least 1")
    if config.priority.max_age_s < 1:
        raise SlurmConfigError("priority.max_age_s must be at least 1 s")
    return config


def _unique(names: list, what: str) -> None:
    seen = set()
    for n in names:
        if n in seen:
            raise SlurmConfigError(f"slurm config: {what} {n!r} is defined twice")
        seen.add(n)
