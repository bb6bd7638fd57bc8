"""What-if scenarios: run several scheduling policies (and optionally CES) over one window and compare them.

`run_scenario(config, jobs, vc_gpus, progress)` is pure (no UI, no I/O): it selects the window, predicts
durations, simulates every chosen policy VC by VC (reporting progress between VCs and on a heartbeat), and
returns a `ScenarioResult` holding the comparison table, per-VC means, CDFs, resampled timelines, per-job
records, the predictor's quality, LightGBM's feature importance and the CES outcome.
`scenario_key(dataset_version, config)` is its stable cache key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

from sim import engine, metrics, placers, policies, workload
from sim.ces.demand import dataset_node_series
from sim.ces.energy import EnergyParams
from sim.ces.forecast_artifact import feature_set_for
from sim.ces.policy import PRESETS, PolicyParams
from sim.ces.run import MODES, CesConfig, run_ces
from sim.estimators import ESTIMATORS, noisy_oracle_predict, predict, quality
from sim.estimators.lgbm import lightgbm_fit_predict
from sim.model import SimConfig, SimResult, VCResult, Workload

SCENARIO_CODE_VERSION = "3"  # bump when the results of the same configuration change
RECORDED = "recorded"
DEFAULT_POLICIES: tuple[str, ...] = ("fifo", "sjf", "srtf", "qssf")
LGBM_TRAIN_JOBS = 50_000  # most recent past jobs LightGBM is fitted on (keeps the fit to seconds)
CDF_POINTS = 200
TIMELINE_STEP_S = 600
DENSITY_BINS = 40
HEARTBEAT_S = 0.5
LADDER: tuple[str, ...] = ("oracle", "lightgbm", "history", "none")

Progress = Callable[[float, str], None]


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
    gpus_per_node: int = 8
    seed: int = 0
    ladder: bool = False  # also run QSSF with each predictor of LADDER
    ces: CesOptions = field(default_factory=CesOptions)


@dataclass(frozen=True, eq=False)
class ScenarioResult:
    """All outputs of a scenario (picklable: plain values and Polars frames)."""

    config: dict[str, Any]
    window: tuple[str, str]
    jobs: int
    vc_nodes: dict[str, int]
    summary: pl.DataFrame  # one row per scheme: recorded and each policy
    per_vc: pl.DataFrame  # scheme, vc, jobs, avg_jct_s, avg_queue_s
    cdf: pl.DataFrame  # scheme, metric (jct_s | queue_s), value_s, fraction
    timeline: pl.DataFrame  # scheme, time, used_gpus, queued_jobs, capacity_gpus
    records: pl.DataFrame  # per job and scheme
    predictor: dict[str, Any]
    ladder: pl.DataFrame | None
    ces: dict[str, Any] | None
    stage_s: dict[str, float]
    importance: dict[str, float] | None = None  # LightGBM's gain share (%) per feature, when LightGBM ran


# --- configuration ---


def _check_day(value: str | None, name: str) -> None:
    if value is None:
        return
    try:
        date.fromisoformat(value)
    except ValueError as exc:
        raise ScenarioError(f"{name} {value!r} is not a date (YYYY-MM-DD)") from exc


def _check_positive(value: float, name: str) -> None:
    if not np.isfinite(value) or value <= 0:
        raise ScenarioError(f"{name} must be a positive number, got {value}")


def _check_ces(ces: CesOptions, policies_run: tuple[str, ...]) -> None:
    if ces.preset not in PRESETS:
        raise ScenarioError(f"unknown CES preset {ces.preset!r}; expected one of {', '.join(PRESETS)}")
    if ces.mode not in MODES:
        raise ScenarioError(f"unknown CES mode {ces.mode!r}; expected one of {', '.join(MODES)}")
    if ces.schedule != RECORDED and ces.schedule not in policies_run:
        raise ScenarioError(f"CES schedule {ces.schedule!r} must be 'recorded' or one of the chosen policies")
    policy_fields = {f.name for f in dataclasses.fields(PolicyParams)}
    energy_fields = {f.name for f in dataclasses.fields(EnergyParams)}
    for name, value in ces.policy:
        if name not in policy_fields:
            raise ScenarioError(f"unknown CES policy parameter {name!r}")
        if value < 0 or (name in ("history", "future", "warmup") and value < 1):
            raise ScenarioError(f"CES parameter {name} out of range: {value}")
    for name, value in ces.energy:
        if name not in energy_fields:
            raise ScenarioError(f"unknown CES energy parameter {name!r}")
        if value < 0:
            raise ScenarioError(f"CES energy parameter {name} must not be negative, got {value}")


def validate(config: ScenarioConfig) -> ScenarioConfig:
    """Return config unchanged if it can run, else raise ScenarioError naming the first bad field."""
    if not config.cluster:
        raise ScenarioError("choose a cluster")
    unknown = [p for p in config.policies if p not in policies.POLICIES]
    if unknown:
        raise ScenarioError(f"unknown policy {unknown[0]!r}; expected one of {', '.join(policies.POLICIES)}")
    if not config.policies and not config.ces.enabled:
        raise ScenarioError("choose at least one policy (or enable CES)")
    if config.placer not in placers.PLACERS:
        raise ScenarioError(f"unknown placer {config.placer!r}; expected one of {', '.join(placers.PLACERS)}")
    if config.estimator not in ESTIMATORS:
        raise ScenarioError(f"unknown predictor {config.estimator!r}; expected one of {', '.join(ESTIMATORS)}")
    _check_day(config.start, "start")
    _check_day(config.end, "end")
    if config.start and config.end and config.end < config.start:
        raise ScenarioError(f"end {config.end} is before start {config.start}")
    _check_positive(config.load_factor, "load factor")
    _check_positive(config.capacity_scale, "VC capacity scale")
    if not 0 <= config.noise_level <= 10:
        raise ScenarioError(f"noise level must be between 0 and 10, got {config.noise_level}")
    if config.gpus_per_node < 1:
        raise ScenarioError(f"GPUs per node must be at least 1, got {config.gpus_per_node}")
    if config.ces.enabled:
        _check_ces(config.ces, config.policies)
    return config


def config_to_dict(config: ScenarioConfig) -> dict[str, Any]:
    """A JSON-ready dict of config (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


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


# --- progress ---


class _Reporter:
    """Forwards stage progress to the callback and repeats the last message on a heartbeat while work runs."""

    def __init__(self, progress: Progress | None, heartbeat_s: float):
        self.progress = progress
        self.heartbeat_s = heartbeat_s
        self.fraction, self.message = 0.0, "starting"
        self.t0 = time.perf_counter()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> _Reporter:
        if self.progress is not None and self.heartbeat_s > 0:
            self.thread = threading.Thread(target=self._beat, name="scenario-heartbeat", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()

    def _emit(self) -> None:
        if self.progress is not None:
            elapsed = time.perf_counter() - self.t0
            self.progress(self.fraction, f"{self.message} ({elapsed:.1f} s)")

    def _beat(self) -> None:
        while not self.stop.wait(self.heartbeat_s):
            with self.lock:
                self._emit()

    def report(self, fraction: float, message: str) -> None:
        """Record and send a new progress fraction (0..1) and message."""
        with self.lock:
            self.fraction, self.message = min(max(fraction, 0.0), 1.0), message
            self._emit()


# --- inputs ---


def _window(config: ScenarioConfig, jobs: pl.DataFrame) -> workload.Window:
    start = datetime.fromisoformat(config.start) if config.start else None
    end = datetime.fromisoformat(config.end) + timedelta(days=1, seconds=-1) if config.end else None
    try:
        return workload.select_window(jobs, config.cluster, list(config.vcs) or None, start, end)
    except workload.WorkloadError as exc:
        raise ScenarioError(str(exc)) from exc


def predictions(name: str, window: workload.Window, seed: int, noise_level: float = 1.0) -> np.ndarray:
    """Predicted durations (s) of the window jobs; 'none' predicts one constant (no information)."""
    return predictions_and_importance(name, window, seed, noise_level)[0]


def predictions_and_importance(
    name: str, window: workload.Window, seed: int, noise_level: float = 1.0
) -> tuple[np.ndarray, dict[str, float] | None]:
    """`predictions` plus LightGBM's gain share (%) per feature (None for the other predictors)."""
    if name == "none":
        return np.ones(window.jobs.height, dtype=np.float64), None
    if name == "noisy-oracle":
        true_s = window.jobs.get_column("duration").fill_null(0).to_numpy().astype(np.float64)
        artifact = noisy_oracle_predict(window.history, window.jobs, seed)
        return np.trunc(true_s + noise_level * (artifact - true_s)), None
    if name == "lightgbm":
        return lightgbm_fit_predict(window.history.tail(LGBM_TRAIN_JOBS), window.jobs, seed)
    return predict(name, window.history, window.jobs, seed), None


def _sim_config(config: ScenarioConfig, policy: str) -> SimConfig:
    return SimConfig(
        policy=policy,
        placer=config.placer,
        gpus_per_node=config.gpus_per_node,
        backfill=config.backfill,
        seed=config.seed,
    )


def _sub_workload(w: Workload, v: int) -> tuple[Workload, np.ndarray]:
    rows = w.vc_rows(v)
    rec = w.recorded_start_s[rows] if w.recorded_start_s is not None else None
    sub = Workload(
        job_id=w.job_id[rows],
        vc_index=np.zeros(rows.shape[0], dtype=np.int32),
        submit_s=w.submit_s[rows],
        duration_s=w.duration_s[rows],
        gpu_num=w.gpu_num[rows],
        predicted_s=w.predicted_s[rows],
        vc_names=(w.vc_names[v],),
        vc_nodes=(w.vc_nodes[v],),
        t0_us=w.t0_us,
        recorded_start_s=rec,
    )
    return sub, rows


def simulate(sim: SimConfig, w: Workload, on_vc: Callable[[int, int], None] | None = None) -> SimResult:
    """engine.run one VC at a time (so that progress can be reported between VCs); same result as one run."""
    t0 = time.perf_counter()
    vcs: dict[str, VCResult] = {}
    unplaceable = 0
    order = np.argsort([-np.count_nonzero(w.vc_index == v) for v in range(len(w.vc_names))], kind="stable")
    for done, v in enumerate(order.tolist()):
        sub, rows = _sub_workload(w, v)
        part = engine.run(dataclasses.replace(sim, seed=sim.seed + v), sub)
        name = w.vc_names[v]
        vcs[name] = dataclasses.replace(part.vcs[name], rows=rows[part.vcs[name].rows])
        unplaceable += part.unplaceable
        if on_vc is not None:
            on_vc(done + 1, len(order))
    ordered = {name: vcs[name] for name in w.vc_names}
    return SimResult(w, sim, ordered, unplaceable, time.perf_counter() - t0)


# --- per-scheme outputs ---


def sim_records(result: SimResult, scheme: str) -> pl.DataFrame:
    """Per-job outcome of a simulation (without node lists), in workload row order."""
    w = result.workload
    n = len(w)
    start, end, queue = np.full(n, -1, np.int64), np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    preempt = np.zeros(n, np.int64)
    for r in result.vcs.values():
        start[r.rows], end[r.rows], queue[r.rows], preempt[r.rows] = (
            r.start_s,
            r.end_s,
            r.queue_s,
            r.preemptions,
        )
    return _records_frame(w, scheme, start, end, queue, preempt)


def recorded_records(w: Workload) -> pl.DataFrame | None:
    """What really happened, in the sim_records layout (None when no start time was recorded)."""
    rec = w.recorded_start_s
    if rec is None or not (rec >= 0).any():
        return None
    placed = rec >= 0
    end = np.where(placed, rec + w.duration_s, -1)
    queue = np.where(placed, rec - w.submit_s, -1)
    return _records_frame(w, RECORDED, rec.astype(np.int64), end, queue, np.zeros(len(w), np.int64))


def _records_frame(w: Workload, scheme: str, start, end, queue, preempt) -> pl.DataFrame:
    names = np.asarray(w.vc_names, dtype=object)
    placed = start >= 0
    return pl.DataFrame(
        {
            "scheme": scheme,
            "job_id": w.job_id,
            "vc": names[w.vc_index].tolist() if len(w) else [],
            "gpu_num": w.gpu_num,
            "submit_s": w.submit_s,
            "duration_s": w.duration_s,
            "predicted_s": w.predicted_s,
            "start_s": start,
            "end_s": end,
            "queue_s": queue,
            "jct_s": np.where(placed, end - w.submit_s, -1),
            "preemptions": preempt,
            "placed": placed,
        },
        schema_overrides={"scheme": pl.String, "vc": pl.String},
    ).with_columns(pl.when(pl.col("placed")).then(pl.col("jct_s")).alias("jct_s"))


def _grid(span_s: int) -> np.ndarray:
    return np.arange(0, max(span_s, 1) + TIMELINE_STEP_S, TIMELINE_STEP_S, dtype=np.int64)


def _step_sum(times: np.ndarray, deltas: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Value at each grid point of the step function that jumps by deltas at times (jumps at t count at t)."""
    order = np.argsort(times, kind="stable")
    t, level = times[order], np.cumsum(deltas[order])
    pos = np.searchsorted(t, grid, side="right") - 1
    return np.where(pos >= 0, level[np.maximum(pos, 0)], 0)


def records_timeline(records: pl.DataFrame, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GPUs in use and jobs waiting at each grid second, from per-job submit/start/end times."""
    ran = records.filter(pl.col("placed") & (pl.col("end_s") > pl.col("start_s")))
    s, e, g = (ran.get_column(c).to_numpy() for c in ("start_s", "end_s", "gpu_num"))
    used = _step_sum(np.concatenate([s, e]), np.concatenate([g, -g]), grid)
    placed = records.filter(pl.col("placed"))
    sub, st = placed.get_column("submit_s").to_numpy(), placed.get_column("start_s").to_numpy()
    ones = np.ones(sub.shape[0], dtype=np.int64)
    queued = _step_sum(np.concatenate([sub, st]), np.concatenate([ones, -ones]), grid)
    return used, queued


def engine_timeline(result: SimResult, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GPUs in use and jobs waiting at each grid second, summed over VCs, from the engine's event samples."""
    used = np.zeros(grid.shape[0], dtype=np.int64)
    queued = np.zeros(grid.shape[0], dtype=np.int64)
    for r in result.vcs.values():
        if r.timeline_t_s.shape[0] == 0:
            continue
        pos = np.searchsorted(r.timeline_t_s, grid, side="right") - 1
        ok = pos >= 0
        used += np.where(ok, r.timeline_used_gpus[np.maximum(pos, 0)], 0)
        queued += np.where(ok, r.timeline_queued_jobs[np.maximum(pos, 0)], 0)
    return used, queued


def _timeline_frame(scheme: str, t0: datetime, grid: np.ndarray, used, queued, capacity: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "scheme": scheme,
            "time": [t0 + timedelta(seconds=int(s)) for s in grid.tolist()],
            "used_gpus": used.astype(np.int64),
            "queued_jobs": queued.astype(np.int64),
            "capacity_gpus": capacity,
        },
        schema_overrides={"scheme": pl.String},
    )


def cdf_points(records: pl.DataFrame, scheme: str) -> pl.DataFrame:
    """JCT and queue-delay CDFs of placed jobs as CDF_POINTS quantiles each."""
    placed = records.filter(pl.col("placed"))
    fractions = np.linspace(0.0, 1.0, CDF_POINTS)
    parts = []
    for metric in ("jct_s", "queue_s"):
        values = np.sort(placed.get_column(metric).to_numpy().astype(np.float64))
        if values.shape[0] == 0:
            continue
        parts.append(
            pl.DataFrame(
                {
                    "scheme": scheme,
                    "metric": metric,
                    "value_s": np.quantile(values, fractions),
                    "fraction": fractions,
                }
            )
        )
    return pl.concat(parts) if parts else pl.DataFrame()


def per_vc_means(records: pl.DataFrame) -> pl.DataFrame:
    """Jobs, average JCT and average queue delay per scheme and VC (placed jobs)."""
    return (
        records.filter(pl.col("placed"))
        .group_by("scheme", "vc")
        .agg(
            pl.len().alias("jobs"),
            pl.col("jct_s").mean().alias("avg_jct_s"),
            pl.col("queue_s").mean().alias("avg_queue_s"),
        )
        .sort("scheme", "vc")
    )


def summary_row(records: pl.DataFrame, used: np.ndarray, capacity_gpus: int, span_points: int) -> dict:
    """The comparison-table row of one scheme: metrics.summarize's overall figures plus the utilisation."""
    row = metrics.summarize(records)["all"]
    busy = used[:span_points].astype(np.float64)
    row["gpu_util_pct"] = round(float(busy.mean() / capacity_gpus * 100), 1) if capacity_gpus else None
    return row


def _with_factors(rows: list[dict]) -> pl.DataFrame:
    table = pl.DataFrame(rows)
    factors = []
    for reference in (RECORDED, "fifo"):
        ref = table.filter(pl.col("scheme") == reference)
        for col in ("avg_jct_s", "avg_queue_s"):
            name = f"{col.removesuffix('_s')}_x_vs_{reference}"
            if ref.height and ref[col][0]:
                factors.append((pl.lit(ref[col][0]) / pl.col(col)).round(2).alias(name))
            else:
                factors.append(pl.lit(None, dtype=pl.Float64).alias(name))
    return table.with_columns(factors)


# --- predictor quality ---


def predictor_quality(name: str, predicted_s: np.ndarray, true_s: np.ndarray) -> dict[str, Any]:
    """MAE, median APE and rank correlation, plus a log-log density of predicted vs actual durations."""
    q = quality(predicted_s, true_s.astype(np.float64))
    x = np.log10(np.maximum(true_s.astype(np.float64), 1.0))
    y = np.log10(np.maximum(predicted_s, 1.0))
    top = float(max(x.max(initial=0.0), y.max(initial=0.0), 1.0))
    edges = np.linspace(0.0, top, DENSITY_BINS + 1)
    counts, _, _ = np.histogram2d(x, y, bins=[edges, edges])
    centres = (edges[:-1] + edges[1:]) / 2
    density = pl.DataFrame(
        {
            "log10_actual_s": np.repeat(centres, DENSITY_BINS),
            "log10_predicted_s": np.tile(centres, DENSITY_BINS),
            "jobs": counts.ravel().astype(np.int64),
        }
    ).filter(pl.col("jobs") > 0)
    return {"name": name, **{k: round(v, 3) for k, v in q.items()}, "density": density}


# --- CES ---


def _ces_config(ces: CesOptions, window: workload.Window) -> CesConfig:
    policy = dataclasses.replace(PRESETS[ces.preset], **{k: _as_field(PolicyParams, k, v) for k, v in ces.policy})
    energy = dataclasses.replace(EnergyParams(), **{k: _as_field(EnergyParams, k, v) for k, v in ces.energy})
    end = window.end.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    start = window.start.replace(hour=0, minute=0, second=0, microsecond=0)
    features = feature_set_for(ces.preset)
    return CesConfig(mode=ces.mode, start=start, end=end, policy=policy, energy=energy, artifact_features=features)


def _as_field(cls: type, name: str, value: float):
    default = next(f.default for f in dataclasses.fields(cls) if f.name == name)
    return int(value) if isinstance(default, int) and not isinstance(default, bool) else float(value)


def _ces_jobs(jobs: pl.DataFrame, window: workload.Window, simulated: pl.DataFrame | None) -> pl.DataFrame:
    """Recorded GPU jobs up to the window end, the window's jobs at simulated times when given."""
    cols = ["job_id", "vc", "gpu_num", "start_time", "end_time"]
    gpu = jobs.filter(
        (pl.col("cluster") == window.jobs["cluster"][0])
        & (pl.col("gpu_num") > 0)
        & (pl.col("submit_time") <= window.end)
    ).select(cols)
    if simulated is None:
        return gpu
    before = gpu.filter(~pl.col("job_id").is_in(simulated["job_id"].implode()))
    return pl.concat([before, simulated.select(cols)], how="vertical_relaxed")


def _simulated_times(records: pl.DataFrame, t0: datetime) -> pl.DataFrame:
    placed = records.filter(pl.col("placed"))
    base = pl.lit(t0)
    return placed.select(
        "job_id",
        "vc",
        "gpu_num",
        (base + pl.duration(seconds=pl.col("start_s"))).alias("start_time"),
        (base + pl.duration(seconds=pl.col("end_s"))).alias("end_time"),
    )


def run_ces_part(
    ces: CesOptions, jobs: pl.DataFrame, vc_gpus: pl.DataFrame, window: workload.Window, records: dict
) -> dict[str, Any]:
    """Replay the chosen schedule on nodes and run CES over the window days: metrics and timeline."""
    simulated = None
    if ces.schedule != RECORDED:
        simulated = _simulated_times(records[ces.schedule], window.start)
    cluster = window.jobs["cluster"][0]
    series, unplaced = dataset_node_series(
        _ces_jobs(jobs, window, simulated), vc_gpus.filter(pl.col("cluster") == cluster)
    )
    result = run_ces(series, _ces_config(ces, window))
    out = {k: v for k, v in result.metrics.items() if not isinstance(v, float) or np.isfinite(v)}
    out["unplaced_jobs"] = unplaced
    return {"metrics": out, "timeline": result.timeline}


# --- the scenario ---


def _stage_weights(config: ScenarioConfig) -> list[str]:
    stages = ["predict", *config.policies]
    if config.ladder:
        stages += [f"ladder:{p}" for p in LADDER]
    if config.ces.enabled:
        stages.append("ces")
    return stages


def run_scenario(
    config: ScenarioConfig,
    jobs: pl.DataFrame,
    vc_gpus: pl.DataFrame,
    progress: Progress | None = None,
    heartbeat_s: float = HEARTBEAT_S,
    keep_records: bool = True,
) -> ScenarioResult:
    """Run every policy of config (and CES) over its window of jobs and return all comparison outputs."""
    validate(config)
    with _Reporter(progress, heartbeat_s) as reporter:
        return _run(config, jobs, vc_gpus, reporter, keep_records)


class _Schemes:
    """Accumulates each scheme's records, comparison row and timeline on one shared time grid."""

    def __init__(self, w: Workload, t0: datetime, gpus_per_node: int):
        self.t0 = t0
        self.capacity = sum(w.vc_nodes) * gpus_per_node
        span_s = int(w.submit_s.max(initial=0)) + 1
        self.grid = _grid(span_s)
        self.span_points = int(np.searchsorted(self.grid, span_s))
        self.records: dict[str, pl.DataFrame] = {}
        self.rows: list[dict] = []
        self.timelines: list[pl.DataFrame] = []

    def add(self, scheme: str, records: pl.DataFrame, used: np.ndarray, queued: np.ndarray) -> None:
        """Record one scheme's per-job outcome and its GPUs-in-use and jobs-waiting series."""
        self.records[scheme] = records
        self.rows.append({"scheme": scheme, **summary_row(records, used, self.capacity, self.span_points)})
        self.timelines.append(_timeline_frame(scheme, self.t0, self.grid, used, queued, self.capacity))

    def all_records(self) -> pl.DataFrame:
        """Every scheme's records stacked."""
        return pl.concat(list(self.records.values())) if self.records else pl.DataFrame()


def _prepare(config: ScenarioConfig, jobs: pl.DataFrame, vc_gpus: pl.DataFrame, reporter: _Reporter, step: float):
    reporter.report(0.0, "selecting the window")
    window = _window(config, jobs)
    nodes = workload.vc_nodes_on(vc_gpus, config.cluster, window.start.date(), config.gpus_per_node)
    nodes = workload.scale_nodes(nodes, config.capacity_scale)
    reporter.report(step * 0.5, f"predicting durations ({config.estimator})")
    predicted, importance = predictions_and_importance(config.estimator, window, config.seed, config.noise_level)
    return window, workload.to_workload(window, nodes, predicted, config.load_factor), importance


def _simulate_policies(config, w: Workload, schemes: _Schemes, reporter: _Reporter, step: float, stage_s) -> None:
    for k, policy in enumerate(config.policies):
        t = time.perf_counter()
        base = step * (k + 1)

        def on_vc(done: int, total: int, base: float = base, policy: str = policy) -> None:
            reporter.report(base + step * done / total, f"simulating {policy}: VC {done}/{total}")

        reporter.report(base, f"simulating {policy}")
        result = simulate(_sim_config(config, policy), w, on_vc)
        schemes.add(policy, sim_records(result, policy), *engine_timeline(result, schemes.grid))
        stage_s[policy] = time.perf_counter() - t


def _run(config, jobs, vc_gpus, reporter: _Reporter, keep_records: bool) -> ScenarioResult:
    step = 1.0 / (len(_stage_weights(config)) + 1)
    t = time.perf_counter()
    window, w, importance = _prepare(config, jobs, vc_gpus, reporter, step)
    stage_s: dict[str, float] = {"prepare": time.perf_counter() - t}
    schemes = _Schemes(w, window.start, config.gpus_per_node)
    baseline = recorded_records(w) if config.load_factor == 1.0 else None
    if baseline is not None:
        schemes.add(RECORDED, baseline, *records_timeline(baseline, schemes.grid))
    _simulate_policies(config, w, schemes, reporter, step, stage_s)
    ladder = None
    if config.ladder:
        ladder, ladder_importance = _ladder(config, window, w, reporter, step, stage_s)
        importance = importance or ladder_importance
    ces = None
    if config.ces.enabled:
        t = time.perf_counter()
        reporter.report(1.0 - step, "CES: replaying jobs on nodes and forecasting demand")
        ces = run_ces_part(config.ces, jobs, vc_gpus, window, schemes.records)
        stage_s["ces"] = time.perf_counter() - t
    reporter.report(1.0 - step * 0.2, "summarising")
    result = _assemble(config, window, w, schemes, keep_records)
    result = dataclasses.replace(
        result,
        ladder=ladder,
        ces=ces,
        stage_s={k: round(v, 3) for k, v in stage_s.items()},
        importance=importance,
    )
    reporter.report(1.0, "done")
    return result


def _assemble(config, window: workload.Window, w: Workload, schemes: _Schemes, keep_records: bool) -> ScenarioResult:
    records = schemes.all_records()
    empty = pl.DataFrame()
    return ScenarioResult(
        config=config_to_dict(config),
        window=(str(window.start), str(window.end)),
        jobs=len(w),
        vc_nodes=dict(zip(w.vc_names, w.vc_nodes, strict=True)),
        summary=_with_factors(schemes.rows) if schemes.rows else empty,
        per_vc=per_vc_means(records) if records.height else empty,
        cdf=pl.concat([cdf_points(r, s) for s, r in schemes.records.items()]) if schemes.records else empty,
        timeline=pl.concat(schemes.timelines) if schemes.timelines else empty,
        records=records if keep_records else empty,
        predictor=predictor_quality(config.estimator, w.predicted_s, w.duration_s),
        ladder=None,
        ces=None,
        stage_s={},
    )


def _ladder(
    config, window, w: Workload, reporter: _Reporter, step: float, stage_s: dict
) -> tuple[pl.DataFrame, dict[str, float] | None]:
    """QSSF's average JCT and queue with each predictor of LADDER, and LightGBM's gain shares (%)."""
    rows = []
    importance = None
    base = step * (len(config.policies) + 1)
    for k, name in enumerate(LADDER):
        t = time.perf_counter()
        reporter.report(base + step * k, f"QSSF with the {name} predictor")
        predicted, shares = predictions_and_importance(name, window, config.seed)
        importance = importance or shares
        wk = dataclasses.replace(w, predicted_s=predicted[: len(w)])
        rec = sim_records(simulate(_sim_config(config, "qssf"), wk), "qssf")
        placed = rec.filter(pl.col("placed"))
        q = quality(wk.predicted_s, wk.duration_s.astype(np.float64))
        rows.append(
            {
                "predictor": name,
                "spearman": round(q["spearman"], 3) if np.isfinite(q["spearman"]) else None,
                "avg_jct_s": round(float(placed["jct_s"].mean()), 1),
                "avg_queue_s": round(float(placed["queue_s"].mean()), 1),
            }
        )
        stage_s[f"ladder:{name}"] = time.perf_counter() - t
    return pl.DataFrame(rows), importance
