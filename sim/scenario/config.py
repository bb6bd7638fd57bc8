"""A what-if scenario's configuration, validated once, and the request that binds it to one version of its dataset.

`open_request(config, data_dir)` validates a `ScenarioConfig` (or its dict), opens its dataset once and computes
the result cache key; the run, the cache and the sweep all take that `ScenarioRequest`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from analytics.capabilities import capabilities
from analytics.schema import GPUS_PER_NODE
from analytics.store import Dataset, open_dataset
from sim import placers, policies
from sim.ces.energy import ENERGY_PARAMS, EnergyParams
from sim.ces.policy import POLICY_PARAMS, PRESETS, PolicyParams
from sim.ces.run import MODES
from sim.estimators import ESTIMATORS
from sim.slurm.knobs import check_knob

SCENARIO_CODE_VERSION = "10"  # bump when the results of the same configuration change
RECORDED = "recorded"
TWIN = "twin"  # the baseline scheme: the cluster's own scheduler replayed as it was (sim.slurm)
DEFAULT_POLICIES: tuple[str, ...] = ("fifo", "sjf", "srtf", "qssf")


class ScenarioError(ValueError):
    """A scenario configuration that cannot run (unknown policy, bad number, empty window)."""


@dataclass(frozen=True)
class CesOptions:
    """The CES part of a scenario: preset, forecaster mode, schedule replayed and parameter overrides."""

    enabled: bool = False
    preset: str = "earth"
    mode: str = "honest"
    schedule: str = RECORDED  # "recorded" or one of the scenario's policies (window jobs at simulated times)
    policy: tuple[tuple[str, float], ...] = ()  # overrides of PolicyParams fields
    energy: tuple[tuple[str, float], ...] = ()  # overrides of EnergyParams fields


@dataclass(frozen=True)
class ScenarioConfig:
    """Everything that decides a scenario's results (the dataset's version aside)."""

    dataset: str = ""
    cluster: str = ""
    vcs: tuple[str, ...] = ()
    start: str | None = None  # first submit day, YYYY-MM-DD
    end: str | None = None  # last submit day (inclusive), YYYY-MM-DD
    policies: tuple[str, ...] = DEFAULT_POLICIES
    placer: str = "consolidate"
    backfill: bool = False
    estimator: str = "history"
    noise_level: float = 1.0  # noisy-oracle only: 0 = oracle, 1 = the artifact's error model, 2 = twice its errors
    load_factor: float = 1.0
    capacity_scale: float = 1.0
    gpus_per_node: int = GPUS_PER_NODE
    seed: int = 0
    ladder: bool = False  # also run QSSF with each predictor of LADDER
    ces: CesOptions = field(default_factory=CesOptions)
    twin: tuple[tuple[str, float], ...] = ()  # (knob, value) set on the captured Slurm configuration (sim.slurm.knobs)
    twin_baseline: bool = True  # replay the twin first, as the baseline every policy is measured against


# The bounds every scenario is held to where its run is built (the what-if form shows the same ones): a replayed or
# hand-made request cannot go past them.
LIMITS: dict[str, tuple[float, float]] = {
    "load_factor": (0.1, 10.0),
    "capacity_scale": (0.1, 10.0),
    "noise_level": (0.0, 10.0),
    "gpus_per_node": (1, 64),
    "seed": (0, 2**31 - 1),
}
MAX_WINDOW_DAYS = 400  # the longest window a scenario replays
MAX_VCS = 500  # the most VCs a scenario may name


def _check_day(value: str | None, name: str) -> None:
    if value is None:
        return
    try:
        date.fromisoformat(value)
    except ValueError as exc:
        raise ScenarioError(f"{name} {value!r} is not a date (YYYY-MM-DD)") from exc


def check_limit(name: str, value: object) -> None:
    """Refuse (ScenarioError) a value of a LIMITS setting that is not a finite number within its bounds."""
    low, high = LIMITS[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise ScenarioError(f"{name.replace('_', ' ')} must be a number, got {value!r}")
    if not low <= value <= high:
        raise ScenarioError(f"{name.replace('_', ' ')} must be between {low:g} and {high:g}, got {value:g}")


def _check_limits(config: ScenarioConfig) -> None:
    for name in LIMITS:
        check_limit(name, getattr(config, name))


def _check_window(config: ScenarioConfig) -> None:
    _check_day(config.start, "start")
    _check_day(config.end, "end")
    if config.start and config.end:
        days = (date.fromisoformat(config.end) - date.fromisoformat(config.start)).days + 1
        if days < 1:
            raise ScenarioError(f"end {config.end} is before start {config.start}")
        if days > MAX_WINDOW_DAYS:
            raise ScenarioError(f"the window spans {days} days; at most {MAX_WINDOW_DAYS} days run at once")
    if len(config.vcs) > MAX_VCS:
        raise ScenarioError(f"{len(config.vcs)} VCs named; at most {MAX_VCS}")


def _check_ces(ces: CesOptions, policies_run: tuple[str, ...]) -> None:
    if ces.preset not in PRESETS:
        raise ScenarioError(f"unknown CES preset {ces.preset!r}; expected one of {', '.join(PRESETS)}")
    if ces.mode not in MODES:
        raise ScenarioError(f"unknown CES mode {ces.mode!r}; expected one of {', '.join(MODES)}")
    if ces.schedule != RECORDED and ces.schedule not in policies_run:
        raise ScenarioError(f"CES schedule {ces.schedule!r} must be 'recorded' or one of the chosen policies")
    for name, value in ces.policy:
        if name not in POLICY_PARAMS:
            raise ScenarioError(f"unknown CES policy parameter {name!r}")
        low = 1 if name in ("history", "future", "warmup") else 0
        _check_knob(PolicyParams, name, value, low)
    for name, value in ces.energy:
        if name not in ENERGY_PARAMS:
            raise ScenarioError(f"unknown CES energy parameter {name!r}")
        _check_knob(EnergyParams, name, value, 0)


def _check_knob(cls: type, name: str, value: float, low: float) -> None:
    high = next(f.metadata["max"] for f in dataclasses.fields(cls) if f.name == name)
    if not np.isfinite(value) or not low <= value <= high:
        raise ScenarioError(f"CES parameter {name} must be between {low:g} and {high:g}, got {value:g}")


def _check_twin(twin: tuple[tuple[str, float], ...]) -> None:
    names = [name for name, _ in twin]
    if len(set(names)) != len(names):
        raise ScenarioError(f"a twin knob is set twice: {', '.join(names)}")
    for name, value in twin:
        try:
            check_knob(name, value)
        except ValueError as exc:
            raise ScenarioError(str(exc)) from None


def validate(config: ScenarioConfig) -> ScenarioConfig:
    """Return config unchanged if it can run, else raise ScenarioError naming the first bad field."""
    if not config.cluster:
        raise ScenarioError("choose a cluster")
    try:
        policies.check_names(config.policies)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None
    if not isinstance(config.twin_baseline, bool):
        raise ScenarioError(f"twin baseline must be true or false, got {config.twin_baseline!r}")
    if not config.policies and not config.ces.enabled and not config.twin_baseline:
        raise ScenarioError("choose at least one policy (or enable CES, or replay the Slurm twin alone)")
    if config.placer not in placers.PLACERS:
        raise ScenarioError(f"unknown placer {config.placer!r}; expected one of {', '.join(placers.PLACERS)}")
    if config.estimator not in ESTIMATORS:
        raise ScenarioError(f"unknown predictor {config.estimator!r}; expected one of {', '.join(ESTIMATORS)}")
    _check_window(config)
    _check_limits(config)
    _check_twin(config.twin)
    if config.ces.enabled:
        _check_ces(config.ces, config.policies)
    return config


def config_to_dict(config: ScenarioConfig) -> dict[str, Any]:
    """A JSON-ready dict of config (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def twin_pairs(data: Any) -> tuple[tuple[str, float], ...]:
    """Twin knobs given as a dict or as [name, value] pairs, as sorted (name, value) pairs (ScenarioError when they
    are neither)."""
    items = data.items() if isinstance(data, dict) else (data or ())
    try:
        return tuple(sorted((str(name), float(value)) for name, value in items))
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"twin knobs must be name/number pairs: {exc}") from None


def config_from_dict(data: dict[str, Any]) -> ScenarioConfig:
    """Build and validate a ScenarioConfig from a dict such as config_to_dict's output."""
    known = {f.name for f in dataclasses.fields(ScenarioConfig)}
    extra = sorted(set(data) - known)
    if extra:
        raise ScenarioError(f"unknown scenario field(s): {', '.join(extra)}")
    ces_data = dict(data.get("ces") or {})
    ces_known = {f.name for f in dataclasses.fields(CesOptions)}
    if set(ces_data) - ces_known:
        raise ScenarioError(f"unknown CES field(s): {', '.join(sorted(set(ces_data) - ces_known))}")
    for key in ("policy", "energy"):
        pairs = ces_data.get(key) or ()
        items = pairs.items() if isinstance(pairs, dict) else pairs
        ces_data[key] = tuple(sorted((str(k), float(v)) for k, v in items))
    values = {k: v for k, v in data.items() if k != "ces"}
    for key in ("vcs", "policies"):
        if key in values:
            values[key] = tuple(values[key] or ())
    if "twin" in values:
        values["twin"] = twin_pairs(values["twin"])
    try:
        config = ScenarioConfig(**values, ces=CesOptions(**ces_data))
    except TypeError as exc:
        raise ScenarioError(f"bad scenario: {exc}") from exc
    return validate(config)


def scenario_key(dataset_version: str, config: ScenarioConfig) -> str:
    """A stable hash of the dataset version, the code version and the whole configuration."""
    payload = {
        "dataset_version": dataset_version,
        "code": SCENARIO_CODE_VERSION,
        "config": config_to_dict(config),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ScenarioRequest:
    """A validated scenario bound to the dataset version it runs on, with its result cache key."""

    config: ScenarioConfig
    dataset: Dataset
    key: str

    def inputs(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """What the scenario reads from its opened dataset (config_inputs)."""
        return config_inputs(self.dataset, self.config)


def config_inputs(dataset: Dataset, config: ScenarioConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The jobs and capacities a scenario of config (or a sweep around it) reads: its cluster's jobs submitted up to
    its window's last day (the window, the history before it and CES read no later job) and the VC capacities."""
    until = date.fromisoformat(config.end) + timedelta(days=1) if config.end else None
    return scenario_inputs(dataset, config.cluster, until)


def scenario_inputs(dataset: Dataset, cluster: str, until: date | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A cluster's jobs (those submitted before day `until` when given) and the VC capacities of a dataset: what a
    scenario (or a sweep of them) runs on."""
    jobs = dataset.jobs().filter(pl.col("cluster") == cluster)
    if until is not None:
        jobs = jobs.filter(pl.col("submit_time") < datetime.combine(until, datetime.min.time()))
    return jobs.collect(), dataset.vc_gpus()


CES_MIN_HISTORY_DAYS = 7  # the CES forecaster learns from at least a week (its features reach one week back)


def _first_submit_day(dataset: Dataset, cluster: str) -> date | None:
    jobs = dataset.jobs().filter(pl.col("cluster") == cluster).select(pl.col("submit_time").min()).collect()
    first = jobs.item() if jobs.height else None
    return first.date() if first is not None else None


def check_applicable(config: ScenarioConfig, dataset: Dataset) -> None:
    """Raise ScenarioError, before anything runs, when the dataset cannot support what the scenario asks."""
    features = capabilities(dataset.meta)["features"]
    if features["whatif"]:
        raise ScenarioError(f"The what-if replay does not apply to dataset {dataset.name}: {features['whatif']}.")
    if not config.ces.enabled:
        return
    if features["ces"]:
        raise ScenarioError(
            f"CES does not apply to dataset {dataset.name}: {features['ces']} (its forecaster learns from the "
            "recorded busy nodes before the window, whichever schedule is replayed)."
        )
    first = _first_submit_day(dataset, config.cluster)
    earliest = first + timedelta(days=CES_MIN_HISTORY_DAYS) if first else None
    if earliest and (config.start is None or date.fromisoformat(config.start) < earliest):
        raise ScenarioError(
            f"CES trains its forecaster on the {CES_MIN_HISTORY_DAYS} days or more before the window, and "
            f"{config.cluster} starts on {first}: start the window on {earliest} or later."
        )


def open_request(config: ScenarioConfig | dict[str, Any], data_dir: Path | None = None) -> ScenarioRequest:
    """Validate config (or its dict form) once, open its dataset under data_dir once, check the dataset can
    support it, and key the pair."""
    checked = config_from_dict(config) if isinstance(config, dict) else validate(config)
    if not checked.dataset:
        raise ScenarioError("choose a dataset")
    dataset = open_dataset(checked.dataset, data_dir)
    check_applicable(checked, dataset)
    checked = with_dataset_node_size(checked, dataset)
    return ScenarioRequest(checked, dataset, scenario_key(dataset.version, checked))


def with_dataset_node_size(config: ScenarioConfig, dataset: Dataset) -> ScenarioConfig:
    """config with the dataset's GPUs per node (recorded from its node list, e.g. a Slurm cluster's 4-GPU nodes)
    when the config keeps the default."""
    recorded = dataset.meta.get("gpus_per_node")
    if config.gpus_per_node != GPUS_PER_NODE or not isinstance(recorded, int) or recorded < 1:
        return config
    return dataclasses.replace(config, gpus_per_node=recorded)
