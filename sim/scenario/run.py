"""Run a what-if scenario: select the window, predict durations, simulate every policy VC by VC, add CES.

`run_scenario(config, jobs, vc_gpus, progress)` is pure (no UI, no I/O) and reports progress between VCs and on a
heartbeat; `run_request(request, progress)` runs a `ScenarioRequest` on its opened dataset.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import numpy as np
import polars as pl

from analytics.scheduler import HasMeta, config_summary, scheduler_config
from analytics.slurm_config import SlurmConfig, SlurmConfigError
from sim import engine, workload
from sim.estimators import noisy_oracle_predict, predict, quality
from sim.estimators.lgbm import lightgbm_fit_predict
from sim.model import SimConfig, SimResult, VCResult, Workload, digest
from sim.policies import CLUSTER_WIDE
from sim.scenario.config import RECORDED, TWIN, ScenarioConfig, ScenarioError, ScenarioRequest, config_to_dict, validate
from sim.scenario.energy import run_ces_part
from sim.scenario.outputs import (
    ScenarioResult,
    cdf_points,
    closest_to_record,
    distance,
    engine_gpu_s,
    engine_timeline,
    error_band,
    nearest_row,
    per_account_means,
    per_vc_means,
    predictor_quality,
    recorded_records,
    records_gpu_s,
    records_timeline,
    replay_fidelity,
    sim_records,
    start_order_tau,
    summary_row,
    timeline_frame,
    timeline_grid,
    with_factors,
)
from sim.slurm.calibrate import CAPTURED, Calibration, calibrated, captured
from sim.slurm.knobs import scaled_nodes, with_knobs
from sim.slurm.workload import simulate_slurm

LGBM_TRAIN_JOBS = 50_000  # most recent past jobs LightGBM is fitted on (keeps the fit to seconds)
HEARTBEAT_S = 0.5
LADDER: tuple[str, ...] = ("oracle", "lightgbm", "history", "none")

ProgressCallback = Callable[[float, str], None]  # (fraction done, message)


class _Reporter:
    """Forwards stage progress to the callback and repeats the last message on a heartbeat while work runs."""

    def __init__(self, progress: ProgressCallback | None, heartbeat_s: float):
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


def _window(config: ScenarioConfig, jobs: pl.DataFrame) -> workload.Window:
    start = datetime.fromisoformat(config.start) if config.start else None
    end = workload.day_end(datetime.fromisoformat(config.end)) if config.end else None
    try:
        return workload.select_window(jobs, config.cluster, list(config.vcs) or None, start, end)
    except workload.WorkloadError as exc:
        raise ScenarioError(str(exc)) from exc


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


def _stage_weights(config: ScenarioConfig) -> list[str]:
    stages = ["predict", *([TWIN] if config.twin_baseline else []), *config.policies]
    if config.ladder:
        stages += [f"ladder:{p}" for p in LADDER]
    if config.ces.enabled:
        stages.append("ces")
    return stages


def run_scenario(
    config: ScenarioConfig,
    jobs: pl.DataFrame,
    vc_gpus: pl.DataFrame,
    progress: ProgressCallback | None = None,
    heartbeat_s: float = HEARTBEAT_S,
    keep_records: bool = True,
    scheduler: SlurmConfig | None = None,
) -> ScenarioResult:
    """Run every policy of config (and CES) over its window of jobs and return all comparison outputs (scheduler:
    the cluster's captured Slurm configuration, which the `slurm` policy replays)."""
    validate(config)
    with _Reporter(progress, heartbeat_s) as reporter:
        return _run(config, jobs, vc_gpus, reporter, keep_records, scheduler)


class _Schemes:
    """Accumulates each scheme's records, comparison row and timeline on one shared time grid; utilisation is over
    the scenario's capacity (its scale applied), the record's and the twin's over the cluster's own (recorded_nodes)."""

    def __init__(self, w: Workload, t0: datetime, end: datetime, gpus_per_node: int, recorded_nodes: int):
        self.t0 = t0
        self.capacity = sum(w.vc_nodes) * gpus_per_node
        self.recorded_capacity = recorded_nodes * gpus_per_node
        self.end_s = int((end - t0).total_seconds())
        span_s = int(w.submit_s.max(initial=0)) + 1
        self.grid = timeline_grid(span_s)
        self.span_s = span_s
        self.records: dict[str, pl.DataFrame] = {}
        self.twin: SimResult | None = None
        self.rows: list[dict] = []
        self.timelines: list[pl.DataFrame] = []

    def add(self, scheme: str, records: pl.DataFrame, busy_gpu_s: float, used, queued, capacity_gpus=None) -> None:
        """Record one scheme's per-job outcome, the GPU-seconds it ran in the span and its GPUs-in-use and
        jobs-waiting series (capacity_gpus: the GPUs it ran on, the scenario's by default)."""
        capacity = capacity_gpus or self.capacity
        self.records[scheme] = records
        row = summary_row(records, busy_gpu_s, capacity, self.span_s, self.end_s)
        tau = None if scheme == RECORDED else start_order_tau(self.records.get(RECORDED), records)
        self.rows.append({"scheme": scheme, **row, "start_order_tau": tau})
        self.timelines.append(timeline_frame(scheme, self.t0, self.grid, used, queued, capacity))

    def row_of(self, result: SimResult) -> dict:
        """The comparison row a replay on the cluster's own capacity would add (summary_row), without adding it."""
        records = sim_records(result, TWIN)
        busy_gpu_s = engine_gpu_s(result, self.span_s)
        return summary_row(records, busy_gpu_s, self.recorded_capacity, self.span_s, self.end_s)

    def all_records(self) -> pl.DataFrame:
        """Every scheme's records stacked."""
        return pl.concat(list(self.records.values())) if self.records else pl.DataFrame()


def _prepare(config: ScenarioConfig, jobs: pl.DataFrame, vc_gpus: pl.DataFrame, reporter: _Reporter, step: float):
    reporter.report(0.0, "selecting the window")
    window = _window(config, jobs)
    nodes = workload.vc_nodes_mean(
        vc_gpus, config.cluster, window.start.date(), window.end.date(), config.gpus_per_node
    )
    window = workload.pool_whole_cluster(window, nodes)
    if not any(nodes.get(vc) for vc in window.vcs):
        raise workload.WorkloadError(
            f"no GPU capacity for the VCs of cluster {config.cluster!r}: the simulator needs each VC's nodes "
            "(ingest the dataset with --capacity)"
        )
    scaled = workload.scale_nodes(nodes, config.capacity_scale)
    reporter.report(step * 0.5, f"predicting durations ({config.estimator})")
    predicted, importance = predictions_and_importance(config.estimator, window, config.seed, config.noise_level)
    w = workload.to_workload(window, scaled, predicted, config.load_factor)
    steps = workload.vc_node_steps(vc_gpus, config.cluster, window.start, window.end, config.gpus_per_node)
    as_recorded = dataclasses.replace(
        w,
        vc_nodes=tuple(int(nodes.get(v, 0)) for v in w.vc_names),
        vc_node_steps=_steps_of(w, steps, config.load_factor, 1.0),
    )
    w = dataclasses.replace(w, vc_node_steps=_steps_of(w, steps, config.load_factor, config.capacity_scale))
    return window, w, as_recorded, importance


def _steps_of(w: Workload, steps: dict, load_factor: float, capacity_scale: float) -> tuple:
    """w's VCs' node steps (no node for a VC without capacity rows) on the scenario's axes (workload.scale_steps)."""
    return tuple(workload.scale_steps(steps.get(v, ((0, 0),)), load_factor, capacity_scale) for v in w.vc_names)


def twin_candidates(
    w: Workload, scheduler: SlurmConfig | None, gpus_per_node: int, window: workload.Window | None = None
) -> list[Calibration]:
    """The twins a scenario may replay: the captured configuration, else one calibrated from w's record (w with the
    cluster's own capacity) on each VC's nodes and, with the record's window to fit them on, one on each VC's pool
    starting from the jobs running or waiting when the window opened."""
    if scheduler is not None:
        return [captured(scheduler, config_summary(scheduler))]
    if window is None:
        return [calibrated(w, gpus_per_node)]
    carried = workload.carried_in(window)
    return [calibrated(w, gpus_per_node, carried=carried), calibrated(w, gpus_per_node, True, carried)]


def _changed_twin(config: ScenarioConfig, twin: Calibration, w: Workload) -> SlurmConfig:
    """The twin's configuration with the scenario's knobs and capacity scale (ScenarioError when a knob cannot): a
    captured one's nodes scaled, a calibrated one's on w's (scaled) VC capacities of each day."""
    try:
        base = scaled_nodes(twin.config, config.capacity_scale) if twin.source == CAPTURED else twin.on_nodes_of(w)
        return with_knobs(base, config.twin)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None


def _unchanged(config: ScenarioConfig) -> bool:
    """Whether the scenario's `slurm` policy replays the twin exactly as its baseline does."""
    return not config.twin and config.capacity_scale == 1.0


def _simulate(config, policy: str, w: Workload, twin: Calibration, on_vc) -> SimResult:
    if policy not in CLUSTER_WIDE:
        return simulate(_sim_config(config, policy), w, on_vc)
    jobs = twin.jobs_of(w)
    result = simulate_slurm(
        _changed_twin(config, twin, w), _sim_config(config, policy), jobs, twin.changes_of(w), twin.n_carried
    )
    return dataclasses.replace(result, workload=w)  # the scenario's jobs as the trace gives them, not on pools


def _add_result(schemes: _Schemes, scheme: str, result: SimResult, capacity_gpus: int | None = None) -> None:
    records, busy_gpu_s = sim_records(result, scheme), engine_gpu_s(result, schemes.span_s)
    schemes.add(scheme, records, busy_gpu_s, *engine_timeline(result, schemes.grid), capacity_gpus)


def _simulate_policies(config, w: Workload, schemes: _Schemes, reporter: _Reporter, step: float, stage_s, twin):
    for k, policy in enumerate(config.policies):
        t = time.perf_counter()
        base = step * (k + 1 + config.twin_baseline)

        def on_vc(done: int, total: int, base: float = base, policy: str = policy) -> None:
            reporter.report(base + step * done / total, f"simulating {policy}: VC {done}/{total}")

        reporter.report(base, f"simulating {policy}")
        if policy in CLUSTER_WIDE and schemes.twin is not None and _unchanged(config):
            result = schemes.twin  # the twin with no knob set is the baseline's replay
        else:
            result = _simulate(config, policy, w, twin, on_vc)
        _add_result(schemes, policy, result)
        stage_s[policy] = time.perf_counter() - t


def _chosen_twin(twins: list[Calibration], w_recorded: Workload, schemes: _Schemes, reporter: _Reporter, step):
    """The candidate twin whose replay of the cluster as it was is nearest the record (outputs.nearest_row; the
    only one when there is one candidate or no record) with its replay (None when none was needed), the fit in its
    rules."""
    recorded = next((r for r in schemes.rows if r["scheme"] == RECORDED), None)
    if len(twins) == 1 or recorded is None:
        return twins[0], None
    placements = " and on ".join(c.placement for c in twins)
    reporter.report(step, f"replaying the Slurm twin ({twins[0].source}, on {placements})")
    results = _replays(twins, w_recorded)
    rows = [schemes.row_of(result) for result in results]
    best = nearest_row(rows, recorded)
    if best is None:
        return twins[0], results[0]
    fits = [(c.placement, distance(row, recorded)) for c, row in zip(twins, rows, strict=True) if row["avg_jct_s"]]
    return twins[best].with_fit(fits), results[best]


def _add_twin(w_recorded: Workload, schemes: _Schemes, reporter: _Reporter, step: float, twin, replayed, stage_s):
    """Add the twin's replay of the cluster as it was (its own capacity, no knob; the scenario's load) as the
    baseline (replayed: its replay when the choice of twin made it)."""
    t = time.perf_counter()
    if replayed is None:
        reporter.report(step, f"replaying the Slurm twin ({twin.source})")
        replayed = _replays([twin], w_recorded)[0]
    schemes.twin = replayed
    _add_result(schemes, TWIN, replayed, schemes.recorded_capacity)
    stage_s[TWIN] = stage_s.get(TWIN, 0.0) + time.perf_counter() - t


_BASELINES: OrderedDict[str, list[SimResult]] = OrderedDict()  # recent twins' replays, by their inputs' digest
BASELINES_KEPT = 2  # a sweep over the load factor alternates two; each set holds a window's replays twice
_BASELINES_LOCK = threading.Lock()


def _replays(twins: list[Calibration], w_recorded: Workload) -> list[SimResult]:
    """Each twin's replay of the cluster as it was, in threads (the compiled replay runs without the GIL); the last
    BASELINES_KEPT sets are kept, keyed by what the replays read, so that a sweep's points in one process replay
    their common baseline once. The results are shared: they must not be changed."""
    inputs = [_replay_inputs(twin, w_recorded) for twin in twins]
    key = digest(*(_unpredicted(replay) for replay in inputs))
    with _BASELINES_LOCK:
        results = _BASELINES.get(key)
        if results is not None:
            _BASELINES.move_to_end(key)
    if results is None:
        with ThreadPoolExecutor(len(twins)) as pool:
            results = list(pool.map(lambda replay: simulate_slurm(*replay), inputs))
        with _BASELINES_LOCK:
            _BASELINES[key] = results
            while len(_BASELINES) > BASELINES_KEPT:
                _BASELINES.popitem(last=False)
    return [dataclasses.replace(result, workload=w_recorded) for result in results]  # this scenario's own jobs


def _unpredicted(replay: tuple) -> tuple:
    """A replay's arguments without the jobs' predictions, which it does not read (a sweep over predictors hits)."""
    config, sim, jobs, changes, carried = replay
    return config, sim, dataclasses.replace(jobs, predicted_s=np.zeros(0)), changes, carried


def _replay_inputs(twin: Calibration, w_recorded: Workload) -> tuple:
    """simulate_slurm's arguments for a twin's replay of w_recorded (what the replay reads, and so the memo's key)."""
    return twin.config, SimConfig(policy="slurm"), twin.jobs_of(w_recorded), twin.changes_of(w_recorded), twin.n_carried


def _run(config, jobs, vc_gpus, reporter: _Reporter, keep_records: bool, scheduler=None) -> ScenarioResult:
    step = 1.0 / (len(_stage_weights(config)) + 1)
    t = time.perf_counter()
    window, w, w_recorded, importance = _prepare(config, jobs, vc_gpus, reporter, step)
    stage_s: dict[str, float] = {"prepare": time.perf_counter() - t}
    schemes = _Schemes(w, window.start, window.end, config.gpus_per_node, sum(w_recorded.vc_nodes))
    record = recorded_records(w) if config.load_factor == 1.0 else None
    if record is not None:
        busy_gpu_s = records_gpu_s(record, schemes.span_s)
        timeline = records_timeline(record, schemes.grid)
        schemes.add(RECORDED, record, busy_gpu_s, *timeline, schemes.recorded_capacity)
    twin = None
    if wants_scheduler(config):
        t = time.perf_counter()
        twins = twin_candidates(w_recorded, scheduler, config.gpus_per_node, window if record is not None else None)
        twin, replayed = _chosen_twin(twins, w_recorded, schemes, reporter, step)
        stage_s[TWIN] = time.perf_counter() - t
        if config.twin_baseline:
            _add_twin(w_recorded, schemes, reporter, step, twin, replayed, stage_s)
    _simulate_policies(config, w, schemes, reporter, step, stage_s, twin)
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
        twin=twin.as_dict() if twin is not None else None,
        ladder=ladder,
        ces=ces,
        stage_s={k: round(v, 3) for k, v in stage_s.items()},
        importance=importance,
    )
    reporter.report(1.0, "done")
    return result


def default_baseline(rows: list[dict], policies: tuple[str, ...]) -> str | None:
    """The scheme the others are compared with: the twin when it ran, else the policy closest to the record, else
    FIFO, else the first."""
    if any(r["scheme"] == TWIN for r in rows):
        return TWIN
    closest = closest_to_record(rows)
    if closest is not None:
        return closest
    return "fifo" if "fifo" in policies else (policies[0] if policies else None)


def _assemble(config, window: workload.Window, w: Workload, schemes: _Schemes, keep_records: bool) -> ScenarioResult:
    records = schemes.all_records()
    empty = pl.DataFrame()
    baseline = default_baseline(schemes.rows, config.policies)
    return ScenarioResult(
        config=config_to_dict(config),
        window=(str(window.start), str(window.end)),
        jobs=len(w),
        vc_nodes=dict(zip(w.vc_names, w.vc_nodes, strict=True)),
        summary=with_factors(schemes.rows, baseline, error_band(schemes.rows, baseline)) if schemes.rows else empty,
        per_vc=per_vc_means(records) if records.height else empty,
        per_account=per_account_means(records) if records.height else empty,
        cdf=pl.concat([cdf_points(r, s) for s, r in schemes.records.items()]) if schemes.records else empty,
        timeline=pl.concat(schemes.timelines) if schemes.timelines else empty,
        records=records if keep_records else empty,
        predictor=predictor_quality(config.estimator, w.predicted_s, w.duration_s),
        ladder=None,
        ces=None,
        stage_s={},
        baseline=baseline,
        replay=replay_fidelity(schemes.rows, baseline) if baseline else None,
    )


def _ladder(
    config, window, w: Workload, reporter: _Reporter, step: float, stage_s: dict
) -> tuple[pl.DataFrame, dict[str, float] | None]:
    """QSSF's average JCT and queue with each predictor of LADDER, and LightGBM's gain shares (%)."""
    rows = []
    importance = None
    base = step * (len(config.policies) + 1 + config.twin_baseline)
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


def wants_scheduler(config: ScenarioConfig) -> bool:
    """Whether config replays the cluster's own scheduler (the twin as its baseline, or the `slurm` policy)."""
    return config.twin_baseline or any(p in CLUSTER_WIDE for p in config.policies)


def run_request(
    request: ScenarioRequest, progress: ProgressCallback | None = None, heartbeat_s: float = HEARTBEAT_S
) -> ScenarioResult:
    """Run a scenario request on its opened dataset (progress reported from the reading of its jobs on)."""
    validate(request.config)
    with _Reporter(progress, heartbeat_s) as reporter:
        reporter.report(0.0, "reading the jobs")
        jobs, vc_gpus = request.inputs()
        scheduler = twin_scheduler(request.dataset) if wants_scheduler(request.config) else None
        return _run(request.config, jobs, vc_gpus, reporter, True, scheduler)


def twin_scheduler(dataset: HasMeta) -> SlurmConfig | None:
    """The dataset's captured Slurm configuration, which the twin replays (None: none captured, the twin is then
    calibrated from the record; ScenarioError saying what to do when the stored one cannot be read)."""
    try:
        return scheduler_config(dataset)
    except SlurmConfigError as exc:
        raise ScenarioError(
            f"the dataset's stored Slurm configuration cannot be read ({exc}), and the Slurm twin replays it: capture "
            "it again (helios sync slurm --slurm-config DIR) or leave the twin out (--no-twin-baseline, or the "
            "What-if page's twin switch)"
        ) from None
