"""The `slurm` policy inside a what-if: the captured configuration (or, without one, a twin calibrated from the
record) replayed on all VCs at once, reported like the other policies; and the twin as every scenario's baseline."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from analytics.slurm_config import NodeSpec, PartitionSpec, PrioritySpec, SchedSpec, SlurmConfig
from sim.scenario import ScenarioConfig, ScenarioError, run_scenario
from sim.scenario import run as scenario_run
from sim.scenario.config import TWIN
from tests.sim.test_scenario_run import VCS, WINDOW, make_cluster


def _config() -> SlurmConfig:
    nodes = tuple(NodeSpec(f"n{i}", 8, 64) for i in range(sum(VCS.values())))
    parts, first = [], 0
    for name, n in VCS.items():
        parts.append(PartitionSpec(name, tuple(range(first, first + n))))
        first += n
    prio = PrioritySpec(multifactor=True, weight_fairshare=1000, weight_age=100)
    return SlurmConfig(nodes=nodes, partitions=tuple(parts), priority=prio, sched=SchedSpec(bf_interval_s=30))


@pytest.fixture(autouse=True)
def no_kept_baselines(monkeypatch):
    """Each test replays its baselines itself (the tests count the replays)."""
    monkeypatch.setattr(scenario_run, "_BASELINES", scenario_run.OrderedDict())


@pytest.fixture(scope="module")
def trace():
    return make_cluster(n_jobs=600)


def test_without_a_configuration_the_twin_is_calibrated_from_the_record_and_says_so(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("slurm",)), jobs, vc_gpus)
    assert result.twin["source"] == "calibrated"
    assert any(rule.startswith("each user capped") for rule in result.twin["rules"])
    assert "slurm" in set(result.summary["scheme"])


def test_the_twin_is_the_baseline_with_its_error_as_the_band_of_every_change(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("fifo", "slurm")), jobs, vc_gpus, scheduler=_config())
    assert result.baseline == TWIN and result.twin["source"] == "captured"
    rows = {r["scheme"]: r for r in result.summary.to_dicts()}
    twin, fifo, recorded = rows[TWIN], rows["fifo"], rows["recorded"]
    assert twin["avg_queue_x_vs_baseline"] == 1.0
    assert fifo["avg_queue_x_vs_baseline"] == pytest.approx(fifo["avg_queue_s"] / twin["avg_queue_s"], rel=1e-3)
    error = (twin["avg_queue_s"] + 60) / (recorded["avg_queue_s"] + 60)
    error = max(error, 1 / error)
    change = (fifo["avg_queue_s"] + 60) / (twin["avg_queue_s"] + 60)  # the band is on queues offset by 60 s
    assert fifo["avg_queue_x_vs_baseline_lo"] == pytest.approx(change / error, rel=1e-2)
    assert fifo["avg_queue_x_vs_baseline_hi"] == pytest.approx(change * error, rel=1e-2)
    points = abs(twin["gpu_util_pct"] - recorded["gpu_util_pct"])
    assert fifo["gpu_util_pp_vs_baseline"] == pytest.approx(fifo["gpu_util_pct"] - twin["gpu_util_pct"], abs=0.06)
    assert fifo["gpu_util_pp_vs_baseline_hi"] == pytest.approx(fifo["gpu_util_pp_vs_baseline"] + points, abs=0.06)
    lines = {line["metric"]: line for line in result.replay["lines"]}
    assert result.replay["baseline"] == TWIN
    assert lines["start order (Kendall τ)"]["replayed"] == twin["start_order_tau"]


@pytest.fixture
def calls(monkeypatch) -> list:
    """The configurations of every Slurm replay a test's scenarios make, in order."""
    made = []
    replay = scenario_run.simulate_slurm
    monkeypatch.setattr(scenario_run, "simulate_slurm", lambda *a: made.append(a[0]) or replay(*a))
    return made


def test_the_slurm_policy_without_a_knob_is_the_baselines_own_replay_and_with_one_its_own(trace, calls):
    jobs, vc_gpus = trace
    config = ScenarioConfig(**WINDOW, policies=("slurm",))
    same = run_scenario(config, jobs, vc_gpus, scheduler=_config())
    assert len(calls) == 1
    starts = {s: same.records.filter(pl.col("scheme") == s)["start_s"].to_list() for s in (TWIN, "slurm")}
    assert starts[TWIN] == starts["slurm"]
    run_scenario(replace(config, twin=(("backfill", 0.0),)), jobs, vc_gpus, scheduler=_config())
    assert len(calls) == 2 and calls[0].sched.backfill and not calls[1].sched.backfill  # the baseline kept


def test_a_calibrated_twin_replays_a_trace_whose_partitions_and_accounts_are_not_its_vcs(trace):
    jobs, vc_gpus = trace
    named = jobs.with_columns(partition=pl.lit("gpu"), account=pl.lit("physics"))
    config = ScenarioConfig(**WINDOW, policies=("slurm",), capacity_scale=0.5)
    result = run_scenario(config, named, vc_gpus)
    assert result.twin["source"] == "calibrated"
    placed = result.records.filter(pl.col("placed"))
    assert set(placed["scheme"]) == {"recorded", TWIN, "slurm"}
    vc_gpus_used = result.timeline.filter(pl.col("scheme") == "slurm")["capacity_gpus"].unique().to_list()
    assert vc_gpus_used == [8 * sum(max(1, round(n * 0.5)) for n in VCS.values())]  # each VC scaled, as fifo's


def test_a_calibrated_twin_places_as_the_record_fits_best_and_reports_the_windows_jobs_only(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=()), jobs, vc_gpus)
    rule = next(r for r in result.twin["rules"] if r.startswith("placement:"))
    chosen, told = rule.split()[1], rule.rsplit("distance to the record: ", 1)[1]
    fits = dict(part.rsplit(" ", 1) for part in told.split(", "))
    assert set(fits) == {"nodes", "pools"} and float(fits[chosen]) == min(map(float, fits.values()))
    assert result.replay["distance"][TWIN] == pytest.approx(float(fits[chosen]), abs=1e-3)
    ids = {s: set(result.records.filter(pl.col("scheme") == s)["job_id"]) for s in ("recorded", TWIN)}
    assert ids["recorded"] == ids[TWIN]  # jobs carried in from before the window are replayed, not reported


def test_a_scenario_run_again_replays_its_baseline_twins_once(trace, calls):
    jobs, vc_gpus = trace
    config = ScenarioConfig(**WINDOW, policies=("fifo",))
    first = run_scenario(config, jobs, vc_gpus)
    assert len(calls) == 2  # the twin on nodes and on pools
    again = run_scenario(replace(config, policies=("sjf",)), jobs, vc_gpus)
    assert len(calls) == 2 and again.twin == first.twin
    assert again.summary.filter(pl.col("scheme") == TWIN).equals(first.summary.filter(pl.col("scheme") == TWIN))
    run_scenario(replace(config, end="2020-04-07"), jobs, vc_gpus)
    assert len(calls) == 4  # another window, another baseline


def test_the_baseline_twin_replays_the_cluster_as_it_was_and_the_knobs_only_the_alternative(trace):
    jobs, vc_gpus = trace
    config = ScenarioConfig(**WINDOW, policies=("slurm",), capacity_scale=2.0)
    result = run_scenario(config, jobs, vc_gpus, scheduler=_config())
    rows = {r["scheme"]: r for r in result.summary.to_dicts()}
    assert rows["slurm"]["avg_queue_s"] < rows[TWIN]["avg_queue_s"]
    alone = run_scenario(replace(config, capacity_scale=1.0), jobs, vc_gpus, scheduler=_config())
    assert {r["scheme"]: r for r in alone.summary.to_dicts()}[TWIN]["avg_queue_s"] == rows[TWIN]["avg_queue_s"]


def test_a_scenario_may_leave_the_twin_out(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("fifo",), twin_baseline=False), jobs, vc_gpus)
    assert TWIN not in set(result.summary["scheme"]) and result.baseline == "fifo"
    with pytest.raises(ScenarioError, match="twin baseline"):
        run_scenario(ScenarioConfig(**WINDOW, policies=("fifo",), twin_baseline="yes"), jobs, vc_gpus)


def test_slurm_policy_replays_every_vc(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("fifo", "slurm")), jobs, vc_gpus, scheduler=_config())
    summary = {r["scheme"]: r for r in result.summary.to_dicts()}
    assert "slurm" in summary and "fifo" in summary
    rec = result.records.filter(result.records["scheme"] == "slurm")
    started = rec.filter(rec["start_s"] >= 0) if "start_s" in rec.columns else rec
    assert started.height > 0
    assert set(result.per_vc.filter(result.per_vc["scheme"] == "slurm")["vc"]) <= set(VCS)
    used = result.timeline.filter(result.timeline["scheme"] == "slurm")["used_gpus"].to_numpy()
    assert used.max() <= 8 * sum(VCS.values()) and np.all(used >= 0)


def test_recorded_timeout_without_a_limit_keeps_its_recorded_length(trace):
    jobs, vc_gpus = trace
    jobs = jobs.with_columns(state=pl.lit("TIMEOUT"))  # no timelimit_s column: the trace has no limits
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("slurm",)), jobs, vc_gpus, scheduler=_config())
    rec = result.records.filter((pl.col("scheme") == "slurm") & pl.col("placed"))
    assert (rec["end_s"] - rec["start_s"] == rec["duration_s"]).all()


def test_recorded_accounts_and_time_limits_are_the_replays(trace):
    jobs, vc_gpus = trace
    account = pl.when(pl.col("job_id") % 2 == 0).then(pl.lit("even")).otherwise(pl.lit("odd"))
    limited = jobs.with_columns(account=account, timelimit_s=pl.lit(60, pl.Int64), state=pl.lit("TIMEOUT"))
    result = run_scenario(ScenarioConfig(**WINDOW, policies=("slurm",)), limited, vc_gpus, scheduler=_config())
    per_account = result.per_account.filter(pl.col("scheme") == "slurm")
    assert set(per_account["account"]) == {"even", "odd"}
    rec = result.records.filter((pl.col("scheme") == "slurm") & pl.col("placed"))
    assert set(rec["account"]) == {"even", "odd"}
    long = rec.filter(pl.col("duration_s") > 60)
    ran_s = long["end_s"] - long["start_s"]
    assert long.height > 0 and ran_s.is_between(60, 60 + 30).all()  # killed at the first 30 s check past its limit


def test_twin_knobs_change_the_replay_and_a_sweep_runs_them(trace):
    from dask.distributed import Client, LocalCluster

    from sim.sweep import apply_point, run_sweep

    jobs, vc_gpus = trace
    base = ScenarioConfig(**WINDOW, policies=("slurm",))
    builtin = run_scenario(apply_point(base, {"twin.backfill": 0}), jobs, vc_gpus, scheduler=_config())
    backfill = run_scenario(base, jobs, vc_gpus, scheduler=_config())
    queue = {name: r.summary.filter(pl.col("scheme") == "slurm")["avg_queue_s"][0] for name, r in
             (("builtin", builtin), ("backfill", backfill))}  # fmt: skip
    assert queue["builtin"] != queue["backfill"]
    grid = {"twin.backfill": [0, 1], "twin.weight_fairshare": [0, 1000]}
    with (
        LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        frame = run_sweep(base, grid, jobs, vc_gpus, client=client, scheduler=_config())
    slurm = frame.filter(pl.col("scheme") == "slurm")
    assert slurm.height == 4
    swept = slurm.filter((pl.col("twin.backfill") == 0) & (pl.col("twin.weight_fairshare") == 1000))
    assert swept["avg_queue_s"][0] == queue["builtin"]  # the captured weight is 1000: the point is the builtin run


def test_twin_knobs_are_checked_where_the_scenario_is_built(trace):
    from sim.scenario import config_from_dict

    with pytest.raises(ScenarioError, match="unknown twin knob 'bogus'"):
        config_from_dict({**WINDOW, "policies": ["slurm"], "twin": {"bogus": 1}})
    with pytest.raises(ScenarioError, match="bf_window_s must be a whole number from 60"):
        config_from_dict({**WINDOW, "policies": ["slurm"], "twin": [["bf_window_s", 1.5]]})
    with pytest.raises(ScenarioError, match="name/number pairs"):
        config_from_dict({**WINDOW, "policies": ["slurm"], "twin": [["backfill"]]})
    config = config_from_dict({**WINDOW, "policies": ["slurm"], "twin": {"weight_age": 5, "backfill": 0}})
    assert config.twin == (("backfill", 0.0), ("weight_age", 5.0))


def test_the_capacity_scale_gives_the_twin_more_nodes_as_it_gives_the_other_policies(trace):
    jobs, vc_gpus = trace
    base = ScenarioConfig(**WINDOW, policies=("fifo", "slurm"))
    runs = {scale: run_scenario(replace(base, capacity_scale=scale), jobs, vc_gpus, scheduler=_config())
            for scale in (1.0, 2.0)}  # fmt: skip
    queue = {s: dict(r.summary.select("scheme", "avg_queue_s").iter_rows()) for s, r in runs.items()}
    assert queue[2.0]["slurm"] < queue[1.0]["slurm"] and queue[2.0]["fifo"] < queue[1.0]["fifo"]
    nodes = {s: sum(r.vc_nodes.values()) for s, r in runs.items()}
    assert nodes[2.0] == 2 * nodes[1.0]


def test_an_account_gpu_cap_holds_that_accounts_jobs_back(trace):
    from sim.commands.scenario_options import twin_knobs
    from sim.sweep import parse_grid

    jobs, vc_gpus = trace
    vc = sorted(VCS)[0]  # without an account column, each VC is its jobs' account
    base = ScenarioConfig(**WINDOW, policies=("slurm",))
    capped = replace(base, twin=((f"account_gpus.{vc}", 1.0),))
    queue = {}
    for name, config in (("free", base), ("capped", capped)):
        result = run_scenario(config, jobs, vc_gpus, scheduler=_config())
        per_account = result.per_account.filter(pl.col("scheme") == "slurm")
        queue[name] = dict(per_account.select("account", "avg_queue_s").iter_rows())
    assert queue["capped"][vc] > queue["free"][vc]
    assert twin_knobs(["account_gpus.my-lab=4"]) == (("account_gpus.my-lab", 4.0),)
    assert parse_grid(["twin.account_gpus.my-lab=1,2"]) == {"twin.account_gpus.my-lab": [1.0, 2.0]}


def test_merging_partitions_lets_their_jobs_share_the_nodes(trace):
    jobs, vc_gpus = trace
    a, b = sorted(VCS)[:2]
    base = ScenarioConfig(**WINDOW, policies=("slurm",))
    runs = {merged: run_scenario(replace(base, twin=((f"merge.{a}+{b}", merged),)), jobs, vc_gpus, scheduler=_config())
            for merged in (0.0, 1.0)}  # fmt: skip
    queue = {m: r.summary.filter(pl.col("scheme") == "slurm")["avg_queue_s"][0] for m, r in runs.items()}
    assert queue[1.0] != queue[0.0]
    with pytest.raises(ScenarioError, match="no partition 'nope'"):
        run_scenario(replace(base, twin=((f"merge.{a}+nope", 1.0),)), jobs, vc_gpus, scheduler=_config())


def test_the_twin_alone_is_a_scenario_its_fit(trace):
    jobs, vc_gpus = trace
    result = run_scenario(ScenarioConfig(**WINDOW, policies=()), jobs, vc_gpus)
    assert result.summary["scheme"].to_list() == ["recorded", TWIN] and result.replay["baseline"] == TWIN


DAY_S = 86_400


def test_the_calibrated_twin_follows_a_vcs_capacity_day_by_day(trace):
    jobs, vc_gpus = trace
    day = pl.col("date").dt.strftime("%Y-%m-%d")
    grown = pl.when((pl.col("vc") == "vcC") & (day == "2020-04-06")).then(0).otherwise(pl.col("gpus"))
    result = run_scenario(ScenarioConfig(**WINDOW, policies=()), jobs, vc_gpus.with_columns(grown.alias("gpus")))
    twin = result.records.filter((pl.col("scheme") == TWIN) & (pl.col("vc") == "vcC"))
    assert twin.filter(pl.col("submit_s") < DAY_S).height > 0
    assert twin.filter(pl.col("start_s") >= 0)["start_s"].min() == DAY_S  # Apr 6's jobs wait for its node to join


def test_a_stored_configuration_that_cannot_be_read_is_refused_with_what_to_do():
    broken = SimpleNamespace(meta={"slurm_config": {"nodes": "x"}})
    with pytest.raises(ScenarioError, match=r"cannot be read \(slurm config: nodes must be a list.*--no-twin-baseline"):
        scenario_run.twin_scheduler(broken)
    assert scenario_run.twin_scheduler(SimpleNamespace(meta={})) is None  # none captured: the twin is calibrated
