"""sim.scenario: the what-if runner against the simulator's own functions, its key, validation, progress."""

from __future__ import annotations

import dataclasses
import json
from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from analytics import schema
from sim import engine, metrics, workload
from sim.estimators import noisy_oracle_predict, predict
from sim.estimators.lgbm import FEATURES, lightgbm_fit_predict
from sim.model import SimConfig
from sim.scenario import (
    RECORDED,
    TWIN,
    CesOptions,
    ScenarioConfig,
    ScenarioError,
    config_from_dict,
    config_to_dict,
    predictions_and_importance,
    records_timeline,
    run_scenario,
    scenario_key,
    simulate,
)
from sim.scenario.outputs import closest_to_record, predictor_quality, replay_fidelity

START = datetime(2020, 4, 1)
VCS = {"vcA": 4, "vcB": 2, "vcC": 1}  # nodes of 8 GPUs


def make_cluster(n_jobs: int = 1500, days: int = 10, seed: int = 3) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A congested one-cluster trace with recorded start times, and its daily VC capacities."""
    rng = np.random.default_rng(seed)
    submit_s = np.sort(rng.integers(0, days * 86_400, n_jobs))
    vc = rng.choice(list(VCS), n_jobs, p=[0.6, 0.3, 0.1])
    gpu = rng.choice([1, 1, 2, 4, 8, 16], n_jobs)
    gpu = np.where(vc == "vcC", np.minimum(gpu, 8), gpu)
    duration = rng.lognormal(7.0, 1.6, n_jobs).astype(np.int64)
    queue = np.where(rng.random(n_jobs) < 0.7, 0, rng.integers(1, 3600, n_jobs))
    submit = [START + timedelta(seconds=int(s)) for s in submit_s]
    start = [t + timedelta(seconds=int(q)) for t, q in zip(submit, queue, strict=True)]
    jobs = pl.DataFrame(
        {
            "cluster": "Earth",
            "job_id": np.arange(1, n_jobs + 1),
            "user": [f"u{u}" for u in rng.integers(0, 25, n_jobs)],
            "vc": vc,
            "gpu_num": gpu,
            "cpu_num": 4.0,
            "node_num": 1,
            "state": "COMPLETED",
            "submit_time": submit,
            "start_time": start,
            "end_time": [s + timedelta(seconds=int(d)) for s, d in zip(start, duration, strict=True)],
            "duration": duration,
            "queue": queue,
        }
    )
    caps = [
        {"cluster": "Earth", "vc": v, "date": date(2020, 4, 1) + timedelta(days=d), "gpus": n * 8}
        for v, n in VCS.items()
        for d in range(days + 1)
    ]
    return schema.conform_jobs(jobs), pl.DataFrame(caps)


@pytest.fixture(scope="module")
def trace():
    return make_cluster()


WINDOW = {"cluster": "Earth", "start": "2020-04-06", "end": "2020-04-08"}


def _direct_workload(jobs, vc_gpus, estimator="history"):
    window = workload.select_window(jobs, "Earth", None, datetime(2020, 4, 6), datetime(2020, 4, 8, 23, 59, 59))
    nodes = workload.vc_nodes_on(vc_gpus, "Earth", window.start.date())
    return window, workload.to_workload(window, nodes, predict(estimator, window.history, window.jobs))


@pytest.mark.parametrize("policy", ["fifo", "sjf", "qssf", "srtf", "las"])
def test_vc_by_vc_simulation_equals_one_engine_run(trace, policy):
    _, w = _direct_workload(*trace)
    whole = metrics.job_records(engine.run(SimConfig(policy=policy), w)).drop("nodes", "priority")
    split = metrics.job_records(simulate(SimConfig(policy=policy), w)).drop("nodes", "priority")
    assert split.equals(whole)


def test_comparison_table_matches_the_simulator_metrics(trace):
    jobs, vc_gpus = trace
    config = ScenarioConfig(**WINDOW, policies=("fifo", "qssf"), twin_baseline=False)  # the closest is the baseline
    result = run_scenario(config, jobs, vc_gpus)
    _, w = _direct_workload(jobs, vc_gpus)
    assert result.summary["scheme"].to_list() == [RECORDED, "fifo", "qssf"]
    table = {r["scheme"]: r for r in result.summary.iter_rows(named=True)}
    end_s = (datetime(2020, 4, 8, 23, 59, 59) - datetime(2020, 4, 6)).total_seconds()
    by_end = pl.col("start_s") <= end_s  # jobs still waiting when the window ends are counted, not averaged
    expected_recorded = metrics.summarize(metrics.recorded_records(w).filter(by_end))["all"]
    for policy in ("fifo", "qssf"):
        records = metrics.job_records(engine.run(SimConfig(policy=policy), w))
        expected = metrics.summarize(records.filter(by_end | ~pl.col("placed")))["all"]
        for col in ("jobs", "avg_jct_s", "p95_jct_s", "avg_queue_s", "p99_queue_s", "avg_bounded_slowdown"):
            assert table[policy][col] == expected[col], (policy, col)
        assert table[policy]["waiting_at_end"] == records.filter(pl.col("placed") & ~by_end).height
    assert table[RECORDED]["avg_jct_s"] == expected_recorded["avg_jct_s"]
    baseline = result.baseline
    assert baseline in ("fifo", "qssf") and table[baseline]["avg_jct_x_vs_baseline"] == 1.0
    ratio = table["qssf"]["avg_jct_s"] / table[RECORDED]["avg_jct_s"]
    assert table["qssf"]["avg_jct_x_vs_recorded"] == pytest.approx(ratio, abs=0.001)
    assert result.replay["baseline"] == baseline and [x["metric"] for x in result.replay["lines"]][0] == "mean queue"
    assert result.jobs == len(w) and result.records.height == 3 * len(w)


def test_utilisation_and_timelines_are_consistent(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("sjf",)), jobs, vc_gpus)
    tl = result.timeline
    capacity = sum(VCS.values()) * 8
    assert set(tl["scheme"].unique()) == {RECORDED, TWIN, "sjf"}
    sjf = tl.filter(pl.col("scheme") == "sjf")
    assert (sjf["used_gpus"] <= capacity).all() and (sjf["used_gpus"] >= 0).all()
    assert (tl["capacity_gpus"] == capacity).all()
    util = dict(result.summary.select("scheme", "gpu_util_pct").iter_rows())
    assert 0 < util["sjf"] <= 100
    span = sjf.filter(pl.col("time") <= datetime(2020, 4, 8, 23, 59, 59))
    assert util["sjf"] == pytest.approx(span["used_gpus"].mean() / capacity * 100, abs=0.6)


def test_records_timeline_by_hand():
    records = pl.DataFrame(
        {
            "submit_s": [0, 10, 20],
            "start_s": [0, 30, 25],
            "end_s": [50, 40, 25],
            "gpu_num": [2, 4, 8],
            "placed": [True, True, True],
        }
    )
    used, queued = records_timeline(records, np.array([0, 10, 20, 25, 30, 45, 50]))
    assert used.tolist() == [2, 2, 2, 2, 6, 2, 0]  # the zero-length job never holds GPUs
    assert queued.tolist() == [0, 1, 2, 1, 0, 0, 0]


def test_cdfs_and_per_vc_means_cover_every_scheme(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("fifo", "srtf")), jobs, vc_gpus)
    cdf = result.cdf
    for scheme in (RECORDED, "fifo", "srtf"):
        for metric in ("jct_s", "queue_s"):
            part = cdf.filter((pl.col("scheme") == scheme) & (pl.col("metric") == metric))
            assert part["value_s"].is_sorted() and part["fraction"][-1] == 1.0
    fifo = result.records.filter((pl.col("scheme") == "fifo") & pl.col("placed"))
    assert (
        cdf.filter((pl.col("scheme") == "fifo") & (pl.col("metric") == "jct_s"))["value_s"][-1] == fifo["jct_s"].max()
    )
    means = result.per_vc.filter(pl.col("scheme") == "fifo").sort("vc")
    expected = fifo.group_by("vc").agg(pl.col("queue_s").mean()).sort("vc")
    assert np.allclose(means["avg_queue_s"].to_numpy(), expected["queue_s"].to_numpy())


def test_progress_rises_to_done_and_beats_between_stages(trace):
    jobs, vc_gpus = trace
    seen: list[tuple[float, str]] = []
    run_scenario(ScenarioConfig(**WINDOW), jobs, vc_gpus, progress=lambda f, m: seen.append((f, m)), heartbeat_s=0.001)
    fractions = [f for f, _ in seen]
    assert fractions[-1] == 1.0 and seen[-1][1].startswith("done")
    assert all(b >= a for a, b in zip(fractions, fractions[1:], strict=False))
    assert any("VC 3/3" in m for _, m in seen)
    assert len(seen) > 3 * 4  # per-VC reports for each of the four default policies


def test_load_factor_drops_the_recorded_baseline(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("fifo",), load_factor=1.5), jobs, vc_gpus)
    assert result.summary["scheme"].to_list() == [TWIN, "fifo"]  # the twin replays the changed load too
    assert result.summary["avg_jct_x_vs_recorded"].to_list() == [None, None] and result.replay is None
    assert result.summary["avg_queue_x_vs_baseline_lo"].to_list() == [None, None]  # no record, no error band


def test_capacity_scale_changes_the_nodes(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("fifo",), capacity_scale=2.0), jobs, vc_gpus)
    assert result.vc_nodes == {v: 2 * n for v, n in VCS.items()}


def test_noise_level_scales_the_artifact_error_model(trace):
    jobs, vc_gpus = trace
    window, _ = _direct_workload(jobs, vc_gpus)
    true_s = window.jobs["duration"].to_numpy().astype(float)
    assert np.array_equal(predictions_and_importance("noisy-oracle", window, seed=5, noise_level=0.0)[0], true_s)
    artifact = noisy_oracle_predict(window.history, window.jobs, 5)
    assert np.array_equal(predictions_and_importance("noisy-oracle", window, seed=5, noise_level=1.0)[0], artifact)
    doubled = predictions_and_importance("noisy-oracle", window, seed=5, noise_level=2.0)[0]
    assert np.array_equal(doubled, np.trunc(true_s + 2 * (artifact - true_s)))


def test_predictor_ladder_from_oracle_to_no_information(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("qssf",), ladder=True), jobs, vc_gpus)
    ladder = result.ladder
    assert ladder["predictor"].to_list() == ["oracle", "lightgbm", "history", "none"]
    assert ladder["spearman"][0] == 1.0 and ladder["spearman"][3] is None
    assert sum(result.importance.values()) == pytest.approx(100.0)  # from the ladder's LightGBM run
    oracle_qssf = engine.run(SimConfig(policy="qssf"), _oracle_workload(jobs, vc_gpus))
    expected = metrics.summarize(metrics.job_records(oracle_qssf))["all"]["avg_jct_s"]
    assert ladder["avg_jct_s"][0] == pytest.approx(expected, abs=0.05)


def _oracle_workload(jobs, vc_gpus):
    window, w = _direct_workload(jobs, vc_gpus)
    return dataclasses.replace(w, predicted_s=window.jobs["duration"].to_numpy().astype(float))


def test_predictor_quality_counts_every_job(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("fifo",), estimator="oracle"), jobs, vc_gpus)
    pred = result.predictor
    assert pred["mae_s"] == 0 and pred["spearman"] == 1.0
    assert pred["density"]["jobs"].sum() == result.jobs
    diagonal = pred["density"].filter(pl.col("log10_actual_s") == pl.col("log10_predicted_s"))
    assert diagonal["jobs"].sum() == result.jobs


def test_key_is_stable_and_covers_every_field():
    base = ScenarioConfig(**WINDOW)
    assert scenario_key("v1", base) == scenario_key("v1", ScenarioConfig(**WINDOW))
    assert scenario_key("v1", base) != scenario_key("v2", base)
    variants = [
        dataclasses.replace(base, policies=("fifo",)),
        dataclasses.replace(base, backfill=True),
        dataclasses.replace(base, load_factor=1.1),
        dataclasses.replace(base, noise_level=0.5),
        dataclasses.replace(base, vcs=("vcA",)),
        dataclasses.replace(base, ces=CesOptions(enabled=True)),
        dataclasses.replace(base, ces=CesOptions(policy=(("buffer", 3.0),))),
    ]
    keys = {scenario_key("v1", v) for v in variants}
    assert len(keys) == len(variants) and scenario_key("v1", base) not in keys


def test_config_round_trips_through_a_dict():
    config = ScenarioConfig(**WINDOW, vcs=("vcA",), ces=CesOptions(enabled=True, policy=(("keep", 6.0),)))
    assert config_from_dict(config_to_dict(config)) == config


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"policies": ["fifo", "best"]}, "unknown policy 'best'"),
        ({"load_factor": 0}, "load factor must be between 0.1 and 10, got 0"),
        ({"start": "2020-04-09", "end": "2020-04-02"}, "is before start"),
        ({"start": "April"}, "not a date"),
        ({"placer": "tetris"}, "unknown placer"),
        ({"policies": [], "twin_baseline": False}, "choose at least one policy"),
        ({"ces": {"enabled": True, "schedule": "las"}}, "CES schedule 'las'"),
        ({"ces": {"enabled": True, "policy": {"future": 0}}}, "CES parameter future must be between 1 and 1008"),
        ({"ces": {"enabled": True, "energy": {"busy_kw": 1e12}}}, "CES parameter busy_kw must be between 0 and 100"),
        ({"gpus_per_node": 1_000_000_000}, "gpus per node must be between 1 and 64"),
        ({"capacity_scale": 1e9}, "capacity scale must be between 0.1 and 10"),
        ({"load_factor": float("nan")}, "load factor must be a number"),
        ({"seed": -1}, "seed must be between 0 and"),
        ({"start": "2000-01-01", "end": "2020-04-09"}, "at most 400 days run at once"),
        ({"vcs": [f"vc{i}" for i in range(501)]}, "at most 500"),
        ({"colour": "blue"}, "unknown scenario field"),
    ],
)
def test_bad_configs_are_refused_with_a_clear_message(change, message):
    with pytest.raises(ScenarioError, match=message):
        config_from_dict({**config_to_dict(ScenarioConfig(**WINDOW)), **change})


def test_an_unknown_cluster_is_a_scenario_error(trace):
    with pytest.raises(ScenarioError, match="cluster 'Mars' has no GPU jobs"):
        run_scenario(ScenarioConfig(cluster="Mars"), *trace)


@pytest.fixture(scope="module")
def long_trace():
    return make_cluster(n_jobs=4000, days=70)  # April trains and May validates the CES forecaster


CES_WINDOW = {"cluster": "Earth", "start": "2020-06-05", "end": "2020-06-09"}


def test_ces_on_the_recorded_schedule_equals_helios_ces_by_hand(long_trace):
    from sim.ces.demand import dataset_node_series
    from sim.ces.policy import PRESETS
    from sim.ces.run import CesConfig, run_ces

    jobs, vc_gpus = long_trace
    ces = CesOptions(enabled=True, preset="earth", mode="recursive", policy=(("buffer", 2.0),))
    result = run_scenario(ScenarioConfig(**CES_WINDOW, policies=("fifo",), ces=ces), jobs, vc_gpus)
    recorded = jobs.filter(pl.col("submit_time") <= datetime(2020, 6, 9, 23, 59, 59))
    series, _ = dataset_node_series(recorded, vc_gpus)
    policy = dataclasses.replace(PRESETS["earth"], buffer=2)
    config = CesConfig("recursive", datetime(2020, 6, 5), datetime(2020, 6, 10), policy, artifact_features="helios")
    expected = run_ces(series, config).metrics
    for key in ("original_used_pct", "optimized_used_pct", "energy_saved_kwh", "lack_node_steps", "steps"):
        assert result.ces["metrics"][key] == pytest.approx(expected[key]), key
    timeline = result.ces["timeline"]
    assert timeline["time"].min() == datetime(2020, 6, 5) and timeline.height == 5 * 144


def test_ces_can_replay_a_simulated_schedule(long_trace):
    jobs, vc_gpus = long_trace
    ces = CesOptions(enabled=True, preset="earth", mode="recursive", schedule="sjf")
    result = run_scenario(ScenarioConfig(**CES_WINDOW, policies=("sjf",), ces=ces), jobs, vc_gpus)
    metrics_ = result.ces["metrics"]
    assert metrics_["steps"] > 0 and 0 < metrics_["original_used_pct"] <= 100
    assert {"energy_saved_kwh", "co2_saved_kg", "cost_saved", "lack_node_steps"} <= set(metrics_)


def test_a_scenario_is_deterministic(trace):
    config = ScenarioConfig(**WINDOW, placer="random", estimator="noisy-oracle", seed=4)
    first, second = run_scenario(config, *trace), run_scenario(config, *trace)
    assert first.summary.equals(second.summary) and first.records.equals(second.records)
    assert first.timeline.equals(second.timeline)


def test_lightgbm_reports_its_gain_importance_and_keeps_its_predictions(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("fifo",), estimator="lightgbm"), jobs, vc_gpus)
    shares = result.importance
    assert list(shares) == list(FEATURES)
    assert all(v >= 0 for v in shares.values()) and sum(shares.values()) == pytest.approx(100.0)
    assert json.loads(json.dumps(shares)) == shares
    window, _ = _direct_workload(jobs, vc_gpus)
    expected = predict("lightgbm", window.history, window.jobs)
    fifo = result.records.filter(pl.col("scheme") == "fifo").sort("job_id")
    by_id = dict(zip(window.jobs["job_id"].to_list(), expected.tolist(), strict=True))
    assert fifo["predicted_s"].to_list() == [by_id[j] for j in fifo["job_id"].to_list()]


@pytest.mark.parametrize("name", ["oracle", "noisy-oracle", "history", "none"])
def test_other_predictors_have_no_importance(trace, name):
    window, _ = _direct_workload(*trace)
    predicted, shares = predictions_and_importance(name, window, seed=0)
    assert shares is None and predicted.shape == (window.jobs.height,)


def test_a_scenario_without_lightgbm_has_no_importance(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("fifo",), estimator="history"), jobs, vc_gpus)
    assert result.importance is None


def test_lightgbm_falling_back_to_history_has_no_importance(trace):
    window, _ = _direct_workload(*trace)
    with pytest.warns(UserWarning, match="falls back to the history estimator"):
        predicted, shares = lightgbm_fit_predict(window.history.head(50), window.jobs)
    assert shares is None and np.array_equal(predicted, predict("history", window.history.head(50), window.jobs))


def _row(scheme: str, queue: float, jct: float, util: float, median_queue: float = 0.0) -> dict:
    return {
        "scheme": scheme,
        "avg_queue_s": queue,
        "median_queue_s": median_queue,
        "avg_jct_s": jct,
        "median_jct_s": jct / 2,
        "gpu_util_pct": util,
    }


def test_the_baseline_is_the_policy_closest_to_the_record():
    rows = [_row(RECORDED, 300, 5_000, 70), _row("fifo", 90_000, 100_000, 60), _row("srtf", 150, 5_100, 69)]
    assert closest_to_record(rows) == "srtf"
    assert closest_to_record(rows[1:]) is None  # no record: the caller falls back to FIFO


def test_a_replay_far_from_the_record_says_why():
    rows = [_row(RECORDED, 300, 5_000, 70), _row("fifo", 9_000, 6_000, 68)]
    replay = replay_fidelity(rows, "fifo")
    assert replay["far"] and replay["why"] == ["its mean queue is 25.2× the recorded one (each + 60 s)"]
    assert [x["metric"] for x in replay["lines"]] == [
        "mean queue",
        "median queue",
        "GPU utilisation",
        "mean JCT",
        "median JCT",
        "start order (Kendall τ)",
    ]
    assert replay["lines"][0]["ratio"] == pytest.approx(30.0) and replay["lines"][1]["ratio"] is None
    assert not replay_fidelity([_row(RECORDED, 300, 5_000, 70), _row("fifo", 400, 5_500, 66)], "fifo")["far"]


def test_predictor_quality_is_compared_with_none():
    true_s = np.array([10.0, 100.0, 1_000.0, 10_000.0])
    bad = predictor_quality("history", true_s * 50, true_s)
    assert bad["none"]["mae_s"] == pytest.approx(np.abs(1 - true_s).mean())
    assert bad["worse_than_none"] == ["mae_s", "median_ape_pct"]
    assert predictor_quality("oracle", true_s, true_s)["worse_than_none"] == []


def test_vc_nodes_are_the_mean_gpus_over_the_window():
    caps = pl.DataFrame(
        {
            "cluster": ["Earth"] * 4,
            "vc": ["vcA", "vcA", "vcB", "vcB"],
            "date": [date(2020, 4, 1), date(2020, 4, 3), date(2020, 4, 1), date(2020, 4, 4)],
            "gpus": [16, 48, 8, 0],
        }
    )
    # vcA: 16, 16 (no row: the day before's), 48, 48 over Apr 1-4 -> 32 GPUs = 4 nodes; vcB: 8, 8, 8, 0 -> 6 -> 1
    assert workload.vc_nodes_mean(caps, "Earth", date(2020, 4, 1), date(2020, 4, 4)) == {"vcA": 4, "vcB": 1}


def test_vc_node_steps_follow_the_days_capacity_from_the_windows_start():
    caps = pl.DataFrame(
        {
            "cluster": ["Earth"] * 4,
            "vc": ["vcA", "vcA", "vcB", "vcB"],
            "date": [date(2020, 4, 1), date(2020, 4, 3), date(2020, 4, 2), date(2020, 4, 4)],
            "gpus": [16, 48, 8, 0],
        }
    )
    steps = workload.vc_node_steps(caps, "Earth", datetime(2020, 4, 1, 12), datetime(2020, 4, 4, 23))
    # vcA: 2 nodes from the start, 6 from Apr 3's midnight (36 h on); vcB: none before its first row, 1 node from
    # Apr 2, none from Apr 4
    assert steps == {"vcA": ((0, 2), (129_600, 6)), "vcB": ((0, 0), (43_200, 1), (216_000, 0))}
    early = workload.vc_node_steps(caps, "Earth", datetime(2020, 3, 1), datetime(2020, 3, 2))
    assert early == {"vcA": ((0, 2),)}  # before any row: vc_nodes_on's first day (vcB has no row on it)


def test_utilisation_counts_gpu_seconds_to_the_second_not_ten_minute_samples():
    from types import SimpleNamespace

    from sim.scenario.outputs import engine_gpu_s, records_gpu_s

    records = pl.DataFrame(
        {"placed": [True, True, False], "start_s": [0, 250, -1], "end_s": [30, 400, -1], "gpu_num": [2, 1, 8]}
    )
    assert records_gpu_s(records, 300) == 2 * 30 + 1 * 50  # the second job counted until the span ends
    vc = SimpleNamespace(timeline_t_s=np.array([0, 30, 250]), timeline_used_gpus=np.array([2, 0, 1]))
    assert engine_gpu_s(SimpleNamespace(vcs={"a": vc}), 300) == records_gpu_s(records, 300)
    assert engine_gpu_s(SimpleNamespace(vcs={"a": vc}), 20) == 2 * 20
