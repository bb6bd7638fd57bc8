"""A Slurm cluster's own scheduler settings, read from what five commands print (SLURM_CONFIG_COMMANDS, one file
each) into the SlurmConfig the `slurm` policy replays (analytics.slurm_config).

`scontrol show config` gives the priority and scheduler settings, `scontrol show partition` and `scontrol show
nodes` (one line each) the partitions over the nodes and their GPUs, `sacctmgr show assoc` and `sacctmgr show qos`
(`--parsable2`, with their header line) the shares and limits. Times are read in every form Slurm prints them
("MM", "MM:SS", "HH:MM:SS", "D-HH[:MM[:SS]]", "30 sec", "1 min", UNLIMITED/NONE) and stored in seconds.

A file that is not what its command prints, an unknown column or flag, a value that is not a number, a limit of -1
(which sacctmgr never prints: it clears a limit) raise SlurmConfigError naming the file, line and key. A setting
the model leaves out (preemption, TRES weights, time and submit limits...) is no error: the config lists it in
`not_modelled`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from analytics.ingest.capacity import node_gpus
from analytics.ingest.parse import clip
from analytics.scheduler import CAPTURE_KEY, CONFIG_KEY
from analytics.slurm_config import (
    DAY_S,
    ROOT,
    AssocSpec,
    NodeSpec,
    PartitionSpec,
    PrioritySpec,
    QosSpec,
    SchedSpec,
    SlurmConfig,
    SlurmConfigError,
    check,
    config_to_dict,
)

ASSOC_MODELLED = ("Cluster", "Account", "User", "Partition", "ParentName", "Share", "GrpJobs", "GrpTRES", "MaxJobs")
ASSOC_NOTED = ("GrpSubmit", "GrpTRESMins", "GrpTRESRunMins", "GrpWall", "MaxSubmit", "MaxTRES", "MaxTRESPerNode",
               "MaxTRESMins", "MaxWall")  # fmt: skip
QOS_MODELLED = ("Name", "Priority", "UsageFactor", "GrpTRES", "GrpJobs", "MaxTRESPU", "MaxJobsPU")
QOS_NOTED = ("Flags", "Preempt", "UsageThres", "GrpTRESMins", "GrpTRESRunMins", "GrpSubmit", "GrpWall", "MaxTRES",
             "MaxTRESPerNode", "MaxTRESMins", "MaxWall", "MaxSubmitPU", "MaxTRESPA", "MaxJobsPA", "MaxSubmitPA",
             "MinTRES")  # fmt: skip
# The file each command's output is kept in, and the command (run as is by `helios sync slurm`; any account that can
# run scontrol and sacctmgr will do). --all lists hidden partitions too; the format= lists fix sacctmgr's columns.
SLURM_CONFIG_COMMANDS: dict[str, tuple[str, ...]] = {
    "config.txt": ("scontrol", "show", "config"),
    "partitions.txt": ("scontrol", "--all", "--oneliner", "show", "partition"),
    "nodes.txt": ("scontrol", "--all", "--oneliner", "show", "nodes"),
    "assoc.txt": ("sacctmgr", "--parsable2", "show", "assoc", "format=" + ",".join(ASSOC_MODELLED + ASSOC_NOTED)),
    "qos.txt": ("sacctmgr", "--parsable2", "show", "qos", "format=" + ",".join(QOS_MODELLED + QOS_NOTED)),
}
CONFIG_FILES = tuple(SLURM_CONFIG_COMMANDS)
MAX_FILE_BYTES = 256 * 2**20  # a larger "output" is not one of these commands'

# Columns sacctmgr prints by default that the model has no use for (accepted, not read).
_ASSOC_IGNORED = ("Priority", "QOS", "Def QOS", "DefaultQOS", "ID", "ParentID", "LFT", "RGT")
_QOS_IGNORED = ("GraceTime", "PreemptExemptTime", "PreemptMode", "Description", "ID")
_PRIORITY_FLAGS = {
    "ACCRUE_ALWAYS", "CALCULATE_RUNNING", "DEPTH_OBLIVIOUS", "NO_FAIR_TREE", "INCR_ONLY", "MAX_TRES", "NO_NORMAL_ALL",
    "NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES", "SMALL_RELATIVE_TO_TIME",
}  # fmt: skip
_SCHED_INTS = {  # SchedulerParameters option -> (SchedSpec field, seconds per unit)
    "bf_interval": ("bf_interval_s", 1),
    "bf_window": ("bf_window_s", 60),
    "bf_max_job_test": ("bf_max_job_test", 1),
    "bf_resolution": ("bf_resolution_s", 1),
    "sched_interval": ("sched_interval_s", 1),
    "default_queue_depth": ("default_queue_depth", 1),
}
_UNLIMITED = {"UNLIMITED", "INFINITE", "NONE"}
_UNIT_S = {"sec": 1, "min": 60, "hour": 3600, "hours": 3600, "day": DAY_S, "days": DAY_S}
_CONFIG_FIRST = "Configuration data as of"
_CONFIG_LINE = re.compile(r"([A-Za-z_][\w\[\]().-]*)\s*=(?: (.*))?$")
_CONTROLLER_LINE = re.compile(r"Slurmctld\(.*\) at \S+ is (?:UP|DOWN)")
_FIELD = re.compile(r"(?:^|\s)([A-Za-z_]\w*)=(\S*)")
_DIGITS = re.compile(r"\d+")
_UP_STATE = re.compile(r"(IDLE|MIXED|ALLOCATED|COMPLETING)(\+(CLOUD|COMPLETING|PLANNED|RESERVED|POWERING_UP))*")
_TYPED_GPU = re.compile(r"gpu:[^:,(\d][^:,(]*:")
_COLUMN_ALIASES = {"fairshare": "share", "maxtresperuser": "maxtrespu", "maxjobsperuser": "maxjobspu"}


def parse_slurm_time(text: str) -> int | None:
    """Seconds of a Slurm time ("MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS", "30 sec", "1 min"),
    None for UNLIMITED, INFINITE or NONE; ValueError for anything else."""
    value = text.strip()
    if value.upper() in _UNLIMITED:
        return None
    unit = re.fullmatch(r"(\d+) ([a-z]+)", value)
    if unit and unit.group(2) in _UNIT_S:
        return int(unit.group(1)) * _UNIT_S[unit.group(2)]
    days, dash, rest = value.rpartition("-")
    parts = rest.split(":")
    if (dash and not _DIGITS.fullmatch(days)) or len(parts) > 3 or not all(_DIGITS.fullmatch(p) for p in parts):
        raise ValueError(f"{clip(value, 40)!r} is not a Slurm time (MM, MM:SS, HH:MM:SS, D-HH:MM:SS or UNLIMITED)")
    numbers = [int(p) for p in parts]
    if days:  # D-HH, D-HH:MM, D-HH:MM:SS
        numbers += [0] * (3 - len(numbers))
        return int(days) * DAY_S + numbers[0] * 3600 + numbers[1] * 60 + numbers[2]
    scale = {1: (60,), 2: (60, 1), 3: (3600, 60, 1)}[len(numbers)]  # MM, MM:SS, HH:MM:SS
    return sum(n * s for n, s in zip(numbers, scale, strict=True))


def _expand_one(name: str) -> list[str]:
    """One hostlist item (`gpu[01-03,7]`, `rack[1-2]n[1-2]`) as its host names."""
    found = re.search(r"\[([^\[\]]*)\]", name)
    if found is None:
        if "[" in name or "]" in name:
            raise ValueError(f"unbalanced brackets in {clip(name, 60)!r}")
        return [name]
    head, tail = name[: found.start()], name[found.end() :]
    names = []
    for part in found.group(1).split(","):
        first, _, last = part.partition("-")
        if not _DIGITS.fullmatch(first) or (last and not _DIGITS.fullmatch(last)):
            raise ValueError(f"{clip(part, 40)!r} is not a number or a range in {clip(name, 60)!r}")
        width = len(first)
        for n in range(int(first), int(last or first) + 1):
            names.append(f"{head}{n:0{width}d}")
    return [expanded for n in names for expanded in _expand_one(n + tail)]


def expand_hostlist(text: str) -> list[str]:
    """The host names of a Slurm hostlist (`node[1-3,5],gpu07`), in order; ValueError when it is malformed."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    if any(not item for item in items):
        raise ValueError(f"empty host name in {clip(text, 60)!r}")
    return [name for item in items for name in _expand_one(item)]


@dataclass
class _Notes:
    """What the model leaves out, each with the places it was found."""

    places: dict[str, list[str]] = field(default_factory=dict)

    def add(self, what: str, where: str = "") -> None:
        self.places.setdefault(what, [])
        if where and where not in self.places[what]:
            self.places[what].append(where)

    def lines(self) -> tuple[str, ...]:
        out = []
        for what, places in self.places.items():
            shown = ", ".join(places[:3]) + (f" and {len(places) - 3} more" if len(places) > 3 else "")
            out.append(f"{what}: {shown}" if shown else what)
        return tuple(out)


def _bad(label: str, line: int, key: str, message: str) -> SlurmConfigError:
    return SlurmConfigError(f"{label} line {line}, {key}: {message}")


def _whole(label: str, line: int, key: str, text: str, minimum: int = 0) -> int:
    """A whole number >= minimum, else SlurmConfigError (a limit of -1 is cleared by sacctmgr, never printed)."""
    value = text.strip()
    if not _DIGITS.fullmatch(value):
        shown = clip(value, 40)
        why = " (sacctmgr shows a cleared limit as empty, never -1)" if value.startswith("-") else ""
        raise _bad(label, line, key, f"{shown!r} is not a whole number{why}")
    if int(value) < minimum:
        raise _bad(label, line, key, f"{value} is below {minimum}")
    return int(value)


def _real(label: str, line: int, key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _bad(label, line, key, f"{clip(text, 40)!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise _bad(label, line, key, f"{clip(text, 40)!r} is not a number >= 0")
    return value


def _seconds(label: str, line: int, key: str, text: str) -> int | None:
    try:
        return parse_slurm_time(text)
    except ValueError as exc:
        raise _bad(label, line, key, str(exc)) from None


# --- scontrol show config ---------------------------------------------------------------------------------------


@dataclass
class _Settings:
    """`scontrol show config`'s main settings by lower-case key: (line, key as printed, value)."""

    label: str
    found: dict[str, tuple[int, str, str]]

    def get(self, key: str, default: str = "") -> str:
        return self.found[key.lower()][2] if key.lower() in self.found else default

    def where(self, key: str) -> tuple[str, int, str]:
        line, printed, _ = self.found.get(key.lower(), (0, key, ""))
        return self.label, line, printed

    def whole(self, key: str, default: int, minimum: int = 0) -> int:
        return _whole(*self.where(key), self.get(key), minimum) if key.lower() in self.found else default

    def time(self, key: str, default: int, minimum: int = 0) -> int:
        if key.lower() not in self.found:
            return default
        value = _seconds(*self.where(key), self.get(key))
        if value is None:
            raise _bad(*self.where(key), f"{self.get(key)} is not modelled (a period is needed)")
        if value < minimum:
            raise _bad(*self.where(key), f"{self.get(key)} is shorter than {minimum} s")
        return value

    def is_set(self, key: str) -> bool:
        return self.get(key, "(null)").strip() not in ("", "(null)", "0", "NONE", "none")


def _config_lines(text: str, label: str) -> dict[str, tuple[int, str, str]]:
    """The main section's `Key = value` lines of `scontrol show config` (the plugins' sections after it skipped)."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None or not lines[first].startswith(_CONFIG_FIRST):
        got = clip(repr(lines[first]), 80) if first is not None else "an empty file"
        raise _bad(
            label, (first or 0) + 1, "first line", f"expected {_CONFIG_FIRST!r} (scontrol show config), got {got}"
        )
    found: dict[str, tuple[int, str, str]] = {}
    main = True
    for number, line in enumerate(lines[first + 1 :], start=first + 2):
        if not line.strip():
            main = False
            continue
        matched = _CONFIG_LINE.match(line)
        if matched and main:
            found.setdefault(matched.group(1).lower(), (number, matched.group(1), (matched.group(2) or "").strip()))
        elif not (matched or line.rstrip().endswith(":") or _CONTROLLER_LINE.fullmatch(line.strip())):
            raise _bad(label, number, "line", f"expected 'Key = value', got {clip(repr(line), 80)}")
    for key in ("PriorityType", "SchedulerType", "ClusterName"):
        if key.lower() not in found:
            raise _bad(label, len(lines), key, "missing: not the whole output of scontrol show config")
    return found


def _priority_flags(s: _Settings, notes: _Notes) -> bool:
    """Whether Fair Tree is on, from PriorityFlags (SlurmConfigError on a flag Slurm does not have)."""
    flags = [f.strip() for f in s.get("PriorityFlags").split(",") if f.strip() and f.strip() != "(null)"]
    for flag in flags:
        if flag.upper() not in _PRIORITY_FLAGS:
            raise _bad(*s.where("PriorityFlags"), f"unknown flag {clip(flag, 40)!r}")
        if flag.upper() != "NO_FAIR_TREE":
            notes.add(f"PriorityFlags {flag.upper()}")
    return not ({"NO_FAIR_TREE", "DEPTH_OBLIVIOUS"} & {f.upper() for f in flags})


def _priority(s: _Settings, notes: _Notes) -> PrioritySpec:
    kind = s.get("PriorityType")
    if kind == "priority/basic":
        return PrioritySpec(multifactor=False)
    if kind != "priority/multifactor":
        raise _bad(*s.where("PriorityType"), f"{clip(kind, 40)!r} is not priority/basic or priority/multifactor")
    for key, why in (("PriorityWeightAssoc", "the association factor"), ("PriorityWeightTRES", "TRES weights")):
        if s.is_set(key):
            notes.add(f"{key}={s.get(key)} ({why})")
    for key in ("PriorityUsageResetPeriod", "PrioritySiteFactorPlugin"):
        if s.is_set(key) and s.get(key) != "site_factor/none":
            notes.add(f"{key}={s.get(key)}")
    favor = s.get("PriorityFavorSmall", "No")
    if favor.lower() not in ("yes", "no"):
        raise _bad(*s.where("PriorityFavorSmall"), f"{clip(favor, 40)!r} is not Yes or No")
    default = PrioritySpec()
    return PrioritySpec(
        multifactor=True,
        weight_age=s.whole("PriorityWeightAge", 0),
        weight_fairshare=s.whole("PriorityWeightFairShare", 0),
        weight_job_size=s.whole("PriorityWeightJobSize", 0),
        weight_partition=s.whole("PriorityWeightPartition", 0),
        weight_qos=s.whole("PriorityWeightQOS", 0),
        max_age_s=s.time("PriorityMaxAge", default.max_age_s, minimum=1),
        decay_half_life_s=s.time("PriorityDecayHalfLife", default.decay_half_life_s),
        calc_period_s=s.time("PriorityCalcPeriod", default.calc_period_s, minimum=1),
        favor_small=favor.lower() == "yes",
        fair_tree=_priority_flags(s, notes),
        dampening=s.whole("FairShareDampeningFactor", default.dampening, minimum=1),
    )


def _sched(s: _Settings, notes: _Notes) -> SchedSpec:
    kind = s.get("SchedulerType")
    if kind not in ("sched/backfill", "sched/builtin"):
        raise _bad(*s.where("SchedulerType"), f"{clip(kind, 40)!r} is not sched/backfill or sched/builtin")
    values: dict[str, int | bool] = {"backfill": kind == "sched/backfill"}
    label, line, key = s.where("SchedulerParameters")
    for option in s.get("SchedulerParameters", "(null)").split(","):
        name, has_value, value = option.strip().partition("=")
        if not name or name == "(null)":
            continue
        if name == "bf_continue" and not has_value:
            values["bf_continue"] = True
        elif name in ("bf_interval", "sched_interval") and value.strip() == "-1":
            if name == "sched_interval":
                raise _bad(label, line, f"{key} {name}", "-1 (no periodic main pass) is not modelled")
            values["backfill"] = False  # bf_interval=-1 turns the backfill loop off
        elif name in _SCHED_INTS:
            target, unit = _SCHED_INTS[name]
            values[target] = _whole(label, line, f"{key} {name}", value, minimum=1) * unit
        else:
            notes.add(f"SchedulerParameters {clip(option.strip(), 60)}")
    return SchedSpec(**values)  # type: ignore[arg-type]


def _enforced(s: _Settings, notes: _Notes) -> bool:
    """Whether association and QOS limits are applied (AccountingStorageEnforce has limits, safe or all)."""
    enforce = {e.strip().lower() for e in s.get("AccountingStorageEnforce", "none").split(",")}
    for option in sorted(enforce & {"wckeys", "nojobs", "nosteps"}):
        notes.add(f"AccountingStorageEnforce {option}")
    return bool(enforce & {"limits", "safe", "all"})


def _general(s: _Settings, notes: _Notes) -> dict:
    """SlurmConfig's settings of `show config` besides priority and scheduling."""
    if s.get("PreemptType", "preempt/none") != "preempt/none":
        notes.add(f"PreemptType={s.get('PreemptType')} (preemption)")
    if s.get("SelectType", "select/cons_tres") not in ("select/cons_tres", "select/cons_res"):
        notes.add(f"SelectType={s.get('SelectType')} (the model places jobs as cons_tres does)")
    over = _seconds(*s.where("OverTimeLimit"), s.get("OverTimeLimit", "0 min"))
    if over is None:
        raise _bad(*s.where("OverTimeLimit"), "UNLIMITED is not modelled (jobs would never reach their limit)")
    boot = s.get("BOOT_TIME")
    if boot and not _is_iso(boot):
        notes.add(f"BOOT_TIME {clip(boot, 40)!r} (not ISO: run scontrol with SLURM_TIME_FORMAT=standard)")
    return {
        "over_time_limit_s": over,
        "kill_wait_s": s.time("KillWait", 30),
        "boot_time": boot if _is_iso(boot) else "",
        "limits_enforced": _enforced(s, notes),
    }


def _is_iso(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


# --- scontrol show nodes / partition ----------------------------------------------------------------------------


def _one_liners(text: str, label: str, first_key: str) -> list[tuple[int, dict[str, str]]]:
    """The `Key=value` fields of each line of `scontrol --oneliner show ...` (each line starts with first_key=)."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if not line.startswith(f"{first_key}="):
            raise _bad(label, number, first_key, f"expected a {first_key}=... line, got {clip(repr(line), 80)}")
        fields: dict[str, str] = {}
        for key, value in _FIELD.findall(line):
            fields.setdefault(key, value)
        out.append((number, fields))
    if not out:
        raise _bad(label, 1, first_key, "no lines: an empty file")
    return out


def _nodes(text: str, label: str, notes: _Notes) -> tuple[list[NodeSpec], dict[str, int]]:
    nodes: list[NodeSpec] = []
    index: dict[str, int] = {}
    for number, fields in _one_liners(text, label, "NodeName"):
        name = fields["NodeName"]
        if not name or name in index:
            raise _bad(label, number, "NodeName", f"node {clip(name, 40)!r} is empty or listed twice")
        gres = fields.get("Gres", "")
        if _TYPED_GPU.search(gres):
            notes.add("GPU types, which jobs may ask for", gres)
        state = fields.get("State", "")
        if state and not _UP_STATE.fullmatch(state):
            notes.add("nodes not up when captured, counted as up", f"{name} {state}")
        cpus = _whole(label, number, "CPUTot", fields.get("CPUTot", "1"), minimum=1)
        index[name] = len(nodes)
        nodes.append(NodeSpec(name, node_gpus(fields.get("CfgTRES"), gres), cpus))
    return nodes, index


def _partition_nodes(label: str, number: int, text: str, index: dict[str, int]) -> tuple[int, ...]:
    try:
        names = expand_hostlist(text) if text not in ("", "(null)") else []
    except ValueError as exc:
        raise _bad(label, number, "Nodes", str(exc)) from None
    unknown = [n for n in names if n not in index]
    if unknown:
        raise _bad(label, number, "Nodes", f"node {clip(unknown[0], 40)!r} is not in scontrol show nodes")
    return tuple(sorted(index[n] for n in names))


def _limit(label: str, number: int, key: str, text: str) -> int | None:
    return None if text.upper() in _UNLIMITED else _whole(label, number, key, text)


_PARTITION_DEFAULTS = {"State": "UP", "QoS": "N/A", "OverTimeLimit": "NONE", "OverSubscribe": "NO",
                       "AllowAccounts": "ALL", "AllowQos": "ALL", "MaxCPUsPerNode": "UNLIMITED"}  # fmt: skip


def _partition(
    label: str, number: int, fields: dict[str, str], index: dict[str, int], notes: _Notes
) -> PartitionSpec | None:
    name = fields["PartitionName"]
    for key, usual in _PARTITION_DEFAULTS.items():
        if fields.get(key, usual) != usual:
            notes.add(f"partition {key}", f"{name} {clip(fields[key], 40)}")
    nodes = _partition_nodes(label, number, fields.get("Nodes", ""), index)
    if not nodes:
        notes.add("partitions without nodes (left out)", name)
        return None
    return PartitionSpec(
        name,
        nodes,
        max_time_s=_seconds(label, number, "MaxTime", fields.get("MaxTime", "UNLIMITED")),
        default_time_s=_seconds(label, number, "DefaultTime", fields.get("DefaultTime", "NONE")),
        max_nodes=_limit(label, number, "MaxNodes", fields.get("MaxNodes", "UNLIMITED")),
        priority_job_factor=_whole(label, number, "PriorityJobFactor", fields.get("PriorityJobFactor", "1")),
        priority_tier=_whole(label, number, "PriorityTier", fields.get("PriorityTier", "1")),
    )


def _billing(label: str, number: int, text: str, notes: _Notes) -> tuple[float, float]:
    """(CPU, GPU) weights of a TRESBillingWeights text ("" = Slurm's default: CPUs are billed)."""
    if not text:
        return 1.0, 0.0
    weights: dict[str, float] = {}
    for item in text.split(","):
        tres, _, value = item.partition("=")
        key = tres.strip().lower()
        if key in ("cpu", "gres/gpu"):
            weights[key] = _real(label, number, f"TRESBillingWeights {tres}", value)
        else:
            notes.add("TRESBillingWeights of other TRES than CPU and GRES/gpu", clip(item, 40))
    return weights.get("cpu", 0.0), weights.get("gres/gpu", 0.0)


def _partitions(text: str, label: str, index: dict[str, int], notes: _Notes) -> tuple[list[PartitionSpec], dict]:
    partitions: list[PartitionSpec] = []
    billing: dict[tuple[float, float], list[str]] = {}
    for number, fields in _one_liners(text, label, "PartitionName"):
        spec = _partition(label, number, fields, index, notes)
        if spec is not None and spec.name in {p.name for p in partitions}:
            raise _bad(label, number, "PartitionName", f"partition {clip(spec.name, 40)!r} is listed twice")
        if spec is not None:
            partitions.append(spec)
            weights = _billing(label, number, fields.get("TRESBillingWeights", ""), notes)
            billing.setdefault(weights, []).append(spec.name)
    if len(billing) > 1:
        shown = "; ".join(f"{', '.join(names)}: CPU {c:g}, GPU {g:g}" for (c, g), names in billing.items())
        notes.add(f"TRESBillingWeights that differ between partitions ({shown}): usage billed as CPU-seconds")
    cpu, gpu = next(iter(billing)) if len(billing) == 1 else (1.0, 0.0)
    return partitions, {"billing_cpu_weight": cpu, "billing_gpu_weight": gpu}


# --- sacctmgr show assoc / qos ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Table:
    """A `sacctmgr --parsable2` table: what it lists, its known columns, those it must have."""

    what: str
    modelled: tuple[str, ...]
    noted: tuple[str, ...]
    ignored: tuple[str, ...]
    required: tuple[str, ...]


_ASSOC = _Table("assoc", ASSOC_MODELLED, ASSOC_NOTED, _ASSOC_IGNORED, ("Account", "User", "ParentName", "Share"))
_QOS = _Table("qos", QOS_MODELLED, QOS_NOTED, _QOS_IGNORED, ("Name", "Priority"))


def _rows(text: str, label: str, table: _Table) -> list[tuple[int, dict[str, str]]]:
    """The rows of a sacctmgr table by column name (SlurmConfigError on an unknown or missing column)."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise _bad(label, 1, "header", f"an empty file (expected sacctmgr show {table.what}'s header line)")
    number, header_line = lines[0]
    trailing = header_line.endswith("|")  # --parsable (-p) ends every line with |
    printed = [h.strip() for h in (header_line[:-1] if trailing else header_line).split("|")]
    known = {c.lower() for c in table.modelled + table.noted + table.ignored}
    header = [_COLUMN_ALIASES.get(h.lower(), h.lower()) for h in printed]
    for name, column in zip(printed, header, strict=True):
        if column not in known:
            what = f"sacctmgr --parsable2 show {table.what}"
            raise _bad(label, number, clip(name, 40) or "header", f"not a column of {what} (expected its header line)")
    if len(set(header)) < len(header):
        raise _bad(label, number, "header", "a column is named twice")
    missing = [c for c in table.required if c.lower() not in header]
    if missing:
        raise _bad(label, number, "header", f"column(s) {', '.join(missing)} missing (use the command in docs)")
    rows = []
    for number, line in lines[1:]:
        values = (line[:-1] if trailing and line.endswith("|") else line).split("|")
        if len(values) != len(header):
            raise _bad(label, number, "line", f"{len(values)} fields, the header has {len(header)}")
        rows.append((number, {h: v.strip() for h, v in zip(header, values, strict=True)}))
    return rows


def _gpus(label: str, number: int, key: str, text: str, where: str, notes: _Notes) -> int | None:
    """The gres/gpu count of a TRES list (`cpu=4,gres/gpu=8`); other TRES are noted."""
    gpus = None
    for item in filter(None, text.split(",")):
        tres, has_value, value = item.partition("=")
        if not has_value:
            raise _bad(label, number, key, f"{clip(item, 40)!r} is not TRES=count")
        if tres == "gres/gpu":
            gpus = _whole(label, number, key, value)
        else:
            notes.add(f"{key} on {tres}", where)
    return gpus


def _optional(label: str, number: int, key: str, row: dict[str, str]) -> int | None:
    value = row.get(key.lower(), "")
    return _whole(label, number, key, value) if value else None


def _note_columns(row: dict[str, str], table: _Table, where: str, notes: _Notes) -> None:
    for column in table.noted:
        if row.get(column.lower()):
            notes.add(f"{table.what} {column}", where)


def _shares(label: str, number: int, text: str) -> int:
    if text.lower() == "parent":
        raise _bad(label, number, "Share", "Fairshare=parent is not modelled")
    return _whole(label, number, "Share", text)


def _assoc(label: str, number: int, row: dict[str, str], notes: _Notes) -> AssocSpec | None:
    account, user = row["account"], row["user"]
    if not account:
        raise _bad(label, number, "Account", "empty")
    if row.get("partition"):
        raise _bad(label, number, "Partition", f"associations of one partition ({row['partition']}) are not modelled")
    where = f"{account}/{user}" if user else account
    _note_columns(row, _ASSOC, where, notes)
    grp_gpus = _gpus(label, number, "GrpTRES", row.get("grptres", ""), where, notes)
    if account == ROOT and not user:
        if grp_gpus is not None or row.get("grpjobs") or row.get("maxjobs"):
            notes.add("limits on the root association", ROOT)
        return None
    parent = row["parentname"]
    if not user and not parent:
        raise _bad(label, number, "ParentName", f"account {clip(account, 40)!r} has no parent")
    return AssocSpec(
        account,
        user,
        parent=parent if not user else ROOT,
        shares=_shares(label, number, row["share"]),
        grp_gpus=grp_gpus,
        grp_jobs=_optional(label, number, "GrpJobs", row),
        max_jobs=_optional(label, number, "MaxJobs", row),
    )


def _assocs(text: str, label: str, cluster: str, notes: _Notes) -> list[AssocSpec]:
    rows = _rows(text, label, _ASSOC)
    mine = [(n, row) for n, row in rows if row.get("cluster", cluster) == cluster]  # a slurmdbd may serve several
    if rows and not mine:
        raise _bad(label, rows[0][0], "Cluster", f"no association of cluster {clip(cluster, 40)!r} (ClusterName)")
    out: dict[tuple[str, str], tuple[int, AssocSpec]] = {}
    for number, row in mine:
        spec = _assoc(label, number, row, notes)
        if spec is not None and (spec.account, spec.user) in out:
            raise _bad(label, number, "User" if spec.user else "Account", f"{clip(row['account'], 40)} is listed twice")
        if spec is not None:
            out[(spec.account, spec.user)] = (number, spec)
    accounts = {account for account, user in out if not user} | {ROOT}
    for number, spec in out.values():
        owner, key = (spec.account, "Account") if spec.user else (spec.parent, "ParentName")
        if owner not in accounts:
            raise _bad(label, number, key, f"account {clip(owner, 40)!r} has no association of its own")
    return [spec for _, spec in out.values()]


def _qos(text: str, label: str, notes: _Notes) -> list[QosSpec]:
    out: list[QosSpec] = []
    for number, row in _rows(text, label, _QOS):
        name = row["name"]
        if not name or name in {q.name for q in out}:
            raise _bad(label, number, "Name", f"{clip(name, 40)!r} is empty or listed twice")
        _note_columns(row, _QOS, name, notes)
        factor = row.get("usagefactor", "")
        out.append(
            QosSpec(
                name,
                priority=_whole(label, number, "Priority", row["priority"]),
                usage_factor=_real(label, number, "UsageFactor", factor) if factor else 1.0,
                grp_gpus=_gpus(label, number, "GrpTRES", row.get("grptres", ""), name, notes),
                grp_jobs=_optional(label, number, "GrpJobs", row),
                max_gpus_per_user=_gpus(label, number, "MaxTRESPU", row.get("maxtrespu", ""), name, notes),
                max_jobs_per_user=_optional(label, number, "MaxJobsPU", row),
            )
        )
    return out


# --- the five together ------------------------------------------------------------------------------------------


def parse_slurm_config(texts: Mapping[str, str], labels: Mapping[str, str] | None = None) -> SlurmConfig:
    """The SlurmConfig of the five outputs (texts by file name of SLURM_CONFIG_COMMANDS; labels name them in
    messages, default the file names); SlurmConfigError naming the file, line and key of the first problem."""
    label = {name: (labels or {}).get(name, name) for name in CONFIG_FILES}
    missing = [name for name in CONFIG_FILES if name not in texts]
    if missing:
        raise SlurmConfigError(
            f"{label[missing[0]]}: missing (the output of {' '.join(SLURM_CONFIG_COMMANDS[missing[0]])})"
        )
    notes = _Notes()
    settings = _Settings(label["config.txt"], _config_lines(texts["config.txt"], label["config.txt"]))
    priority, sched, general = _priority(settings, notes), _sched(settings, notes), _general(settings, notes)
    nodes, index = _nodes(texts["nodes.txt"], label["nodes.txt"], notes)
    partitions, billing = _partitions(texts["partitions.txt"], label["partitions.txt"], index, notes)
    assocs = _assocs(texts["assoc.txt"], label["assoc.txt"], settings.get("ClusterName"), notes)
    qos = _qos(texts["qos.txt"], label["qos.txt"], notes)
    config = SlurmConfig(
        nodes=tuple(nodes),
        partitions=tuple(partitions),
        assocs=tuple(assocs),
        qos=tuple(qos),
        priority=priority,
        sched=sched,
        **general,
        **billing,
        not_modelled=notes.lines(),
    )
    return check(config)


def _read(path: Path) -> str:
    if not path.is_file():
        command = " ".join(SLURM_CONFIG_COMMANDS[path.name])
        raise SlurmConfigError(f"{path}: missing (the output of {command})")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise SlurmConfigError(f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB, not the output of a Slurm command")
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        raise SlurmConfigError(f"{path}: cannot read ({exc.strerror})") from exc


def _texts(folder: Path) -> dict[str, str]:
    if not folder.is_dir():
        names = ", ".join(CONFIG_FILES)
        raise SlurmConfigError(f"{folder}: no such folder (--slurm-config names a folder with {names})")
    return {name: _read(folder / name) for name in CONFIG_FILES}


def read_slurm_config(folder: Path) -> SlurmConfig:
    """The SlurmConfig of the five files in folder (config.txt, partitions.txt, nodes.txt, assoc.txt, qos.txt)."""
    return parse_slurm_config(_texts(folder), {name: str(folder / name) for name in CONFIG_FILES})


def command_labels() -> dict[str, str]:
    """Each file named by the command that printed it, for messages about a capture helios ran itself."""
    return {name: f"`{' '.join(command)}`" for name, command in SLURM_CONFIG_COMMANDS.items()}


def captured_meta(folder: Path, source: str = "") -> dict[str, Any]:
    """meta.json's scheduler configuration entries for the five files in folder: the config (None when it cannot be
    read) and the capture's source, time, cluster, Slurm version and error. source, when given, names the capture
    (one helios ran itself: messages then name the commands instead of the files)."""
    info: dict[str, Any] = {"source": source or str(folder), "error": None}
    try:
        texts = _texts(folder)
        labels = command_labels() if source else {name: str(folder / name) for name in CONFIG_FILES}
        config = parse_slurm_config(texts, labels)
    except SlurmConfigError as exc:
        return {CONFIG_KEY: None, CAPTURE_KEY: {**info, "error": str(exc)}}
    first = texts["config.txt"].lstrip().splitlines()[0]
    settings = _config_lines(texts["config.txt"], "config.txt")
    info["as_of"] = first.removeprefix(_CONFIG_FIRST).strip()
    info["cluster"] = settings["clustername"][2]
    info["slurm_version"] = settings.get("slurm_version", (0, "", ""))[2]
    return {CONFIG_KEY: config_to_dict(config), CAPTURE_KEY: info}
