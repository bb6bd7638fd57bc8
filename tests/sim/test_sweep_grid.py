"""sim.sweep and `helios sweep`: grids, Dask (local cluster and DASK_SCHEDULER_ADDRESS) and the CLI."""

from __future__ import annotations

import argparse
import json
from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from analytics import schema, store
from sim.commands import sweep as sweep_command
from sim.scenario import CesOptions, ScenarioConfig, ScenarioError, run_scenario
from sim.sweep import MAX_GRID_POINTS, SCHEDULER_ENV, apply_point, grid_points, parse_grid, run_sweep

VCS = {"vcA": 3, "vcB": 2}


def make_trace(n_jobs: int = 900, days: int = 6, seed: int = 11) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A small congested one-cluster trace and its VC capacities."""
    rng = np.random.default_rng(seed)
    submit_s = np.sort(rng.integers(0, days * 86_400, n_jobs))
    duration = rng.lognormal(7.0, 1.5, n_jobs).astype(np.int64)
    submit = [datetime(2020, 4, 1) + timedelta(seconds=int(s)) for s in submit_s]
    jobs = pl.DataFrame(
        {
            "cluster": "Earth",
            "job_id": np.arange(1, n_jobs + 1),
            "user": [f"u{u}" for u in rng.integers(0, 12, n_jobs)],
            "vc": rng.choice(list(VCS), n_jobs),
            "gpu_num": rng.choice([1, 2, 4, 8], n_jobs),
            "state": "COMPLETED",
            "submit_time": submit,
            "start_time": submit,
            "end_time": [s + timedelta(seconds=int(d)) for s, d in zip(submit, duration, strict=True)],
            "duration": duration,
            "queue": 0,
        }
    )
    caps = [
        {"cluster": "Earth", "vc": v, "date": date(2020, 4, 1) + timedelta(days=d), "gpus": n * 8}
        for v, n in VCS.items()
        for d in range(days + 1)
    ]
    return schema.conform_jobs(jobs), pl.DataFrame(caps)


BASE = ScenarioConfig(dataset="mini", cluster="Earth", start="2020-04-04", end="2020-04-05", policies=("fifo",))


def test_parse_grid_reads_numbers_names_and_switches():
    grid = parse_grid(["load-factor=0.8, 1.2", "policy=fifo,qssf", "backfill=on,off", "ces.buffer=5,10"])
    assert grid == {
        "load_factor": [0.8, 1.2],
        "policy": ["fifo", "qssf"],
        "backfill": [True, False],
        "ces.buffer": [5.0, 10.0],
    }


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("speed=1,2", "grid parameter 'speed' unknown"),
        ("load_factor", "expected name=v1,v2"),
        ("load_factor=fast", "'fast' is not a number"),
        ("backfill=maybe", "is not on/off"),
    ],
)
def test_parse_grid_refuses_bad_items(item, message):
    with pytest.raises(ScenarioError, match=message):
        parse_grid([item])


def test_grid_points_are_the_cartesian_product_in_order():
    points = grid_points({"load_factor": [1.0, 2.0], "policy": ["fifo", "sjf", "qssf"]})
    assert len(points) == 6
    assert points[0] == {"load_factor": 1.0, "policy": "fifo"} and points[-1] == {
        "load_factor": 2.0,
        "policy": "qssf",
    }


def test_apply_point_sets_policies_and_enables_ces():
    config = apply_point(BASE, {"policy": "sjf", "ces.buffer": 4, "ces.busy_kw": 2.5})
    assert config.policies == ("sjf",)
    assert config.ces.enabled and config.ces.policy == (("buffer", 4.0),) and config.ces.energy == (("busy_kw", 2.5),)
    with pytest.raises(ScenarioError, match="unknown policy"):
        apply_point(BASE, {"policy": "lottery"})


@pytest.fixture(scope="module")
def trace():
    return make_trace()


@pytest.fixture(scope="module")
def local_client():
    """One local Dask cluster (threads, no processes) shared by the tests that pass a client explicitly."""
    from dask.distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        yield client


def test_sweep_rows_equal_single_scenario_runs(trace, local_client):
    jobs, vc_gpus = trace
    grid = {"load_factor": [1.0, 1.5], "policy": ["fifo", "sjf"]}
    frame = run_sweep(BASE, grid, jobs, vc_gpus, client=local_client)
    keys = list(zip(frame["load_factor"], frame["policy"], frame["scheme"], strict=True))
    assert keys == [
        (1.0, "fifo", "recorded"),
        (1.0, "fifo", "twin"),
        (1.0, "fifo", "fifo"),
        (1.0, "sjf", "recorded"),
        (1.0, "sjf", "twin"),
        (1.0, "sjf", "sjf"),
        (1.5, "fifo", "twin"),
        (1.5, "fifo", "fifo"),
        (1.5, "sjf", "twin"),
        (1.5, "sjf", "sjf"),
    ]
    single = run_scenario(apply_point(BASE, {"load_factor": 1.5, "policy": "sjf"}), jobs, vc_gpus)
    row = frame.filter((pl.col("load_factor") == 1.5) & (pl.col("scheme") == "sjf")).row(0, named=True)
    alone = single.summary.filter(pl.col("scheme") == "sjf").row(0, named=True)
    assert row["avg_jct_s"] == alone["avg_jct_s"] and row["p99_queue_s"] == alone["p99_queue_s"]
    assert row["avg_queue_x_vs_baseline"] == alone["avg_queue_x_vs_baseline"]  # against that point's own twin


def test_progress_counts_grid_points(trace, local_client):
    seen = []
    run_sweep(
        BASE,
        {"capacity_scale": [1.0, 2.0, 3.0]},
        *trace,
        client=local_client,
        progress=lambda f, m: seen.append(m),
    )
    assert seen[-1] == "3/3 grid points done" and len(seen) == 3


def test_default_client_is_a_local_process_cluster(trace):
    frame = run_sweep(BASE, {"capacity_scale": [1.0, 0.5]}, *trace)
    fifo = frame.filter(pl.col("scheme") == "fifo").sort("capacity_scale")
    assert fifo["avg_queue_s"][0] >= fifo["avg_queue_s"][1]  # half the nodes never wait less


def test_scheduler_address_from_the_environment(trace, monkeypatch):
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        monkeypatch.setenv(SCHEDULER_ENV, cluster.scheduler_address)
        frame = run_sweep(BASE, {"backfill": [False, True]}, *trace)
        assert cluster.scheduler.task_prefixes.keys() >= {"point_rows"}
    assert frame.filter(pl.col("scheme") == "fifo").height == 2


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="helios")
    sweep_command.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_sweep_prints_json_rows(trace, data_root, capsys, monkeypatch, local_client):
    jobs, vc_gpus = trace
    store.write_dataset("mini", jobs, vc_gpus, {"source": "test"})
    monkeypatch.setenv(SCHEDULER_ENV, local_client.scheduler.address)
    argv = [
        "sweep",
        "--dataset",
        "mini",
        "--cluster",
        "Earth",
        "--start",
        "2020-04-04",
        "--end",
        "2020-04-05",
    ]
    code = _cli([*argv, "--policies", "fifo", "--grid", "load_factor=1,2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(r["load_factor"], r["scheme"]) for r in out["rows"]] == [
        (1.0, "recorded"),
        (1.0, "twin"),
        (1.0, "fifo"),
        (2.0, "twin"),
        (2.0, "fifo"),
    ]
    assert out["grid"] == {"load_factor": [1.0, 2.0]}


def test_cli_sweep_reports_bad_grids_in_one_line(data_root, capsys):
    code = _cli(["sweep", "--dataset", "mini", "--cluster", "Earth", "--grid", "warp=1,2"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("helios: error: grid parameter 'warp' unknown") and "\n" not in err


def test_ces_only_sweep_needs_ces_or_a_policy(trace, local_client):
    base = ScenarioConfig(cluster="Earth", policies=(), ces=CesOptions(enabled=False), twin_baseline=False)
    with pytest.raises(ScenarioError, match="choose at least one policy"):
        run_sweep(base, {"load_factor": [1.0]}, *trace, client=local_client)


def test_a_grid_above_the_cap_is_refused_before_anything_runs():
    grid = parse_grid([f"load_factor={','.join(str(1 + i / 100) for i in range(MAX_GRID_POINTS + 1))}"])
    with pytest.raises(ScenarioError, match=f"the grid has {MAX_GRID_POINTS + 1} points; a sweep runs at most"):
        grid_points(grid)
    with pytest.raises(ScenarioError, match="load factor must be between 0.1 and 10"):
        apply_point(ScenarioConfig(dataset="d", cluster="c"), {"load_factor": 1e9})
