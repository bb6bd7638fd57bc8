"""Busy nodes derived from a schedule on the simulator's node model, and `helios ces` end to end."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

import cli
from analytics.store import write_dataset
from sim.ces.demand import Schedule, bin_max, dataset_node_series, replay

T0 = datetime(2020, 4, 1)


def _ts(minutes: list[int]) -> np.ndarray:
    return np.array([np.datetime64(T0 + timedelta(minutes=m), "us") for m in minutes])


def test_replay_consolidates_and_counts_busy_nodes():
    schedule = Schedule(
        vc_index=np.array([0, 0, 0, 1]),
        gpu_num=np.array([4, 4, 8, 16]),
        start=_ts([0, 5, 10, 12]),
        end=_ts([30, 20, 40, 15]),
        vc_nodes=(2, 2),
    )
    timeline = replay(schedule)
    assert timeline.busy.tolist() == [1, 1, 2, 4, 2, 2, 1, 0]  # the 2nd 4-GPU job shares the 1st job's node
    assert timeline.unplaced_jobs == 0
    grid = _ts([0, 10, 20, 30, 40])
    assert bin_max(timeline, grid).tolist() == [1, 4, 2, 2, 1]


def test_unplaceable_job_is_counted():
    schedule = Schedule(np.array([0]), np.array([24]), _ts([0]), _ts([10]), vc_nodes=(2,))
    assert replay(schedule).unplaced_jobs == 1


def _jobs(n_days: int = 75, seed: int = 3) -> pl.DataFrame:
    """Jobs of cluster Mini: two VCs, a daily wave of 1- to 16-GPU jobs."""
    rng = np.random.default_rng(seed)
    n = n_days * 40
    start = np.sort(rng.uniform(0, n_days * 86400, n)).astype(np.int64)
    duration = rng.integers(600, 6 * 3600, n)
    gpus = rng.choice([1, 2, 4, 8, 16], n, p=[0.5, 0.2, 0.1, 0.15, 0.05])
    submit = [T0 + timedelta(seconds=int(s)) for s in start]
    return pl.DataFrame(
        {
            "cluster": "Mini",
            "job_id": np.arange(n),
            "vc": rng.choice(["vcA", "vcB"], n).tolist(),
            "gpu_num": gpus,
            "submit_time": submit,
            "start_time": submit,
            "end_time": [s + timedelta(seconds=int(d)) for s, d in zip(submit, duration, strict=True)],
            "duration": duration,
            "state": "COMPLETED",
        }
    )


def _vc_gpus(n_days: int = 75, gpus: int = 64) -> pl.DataFrame:
    days = [date(2020, 4, 1) + timedelta(days=d) for d in range(n_days)]
    vcs = ["vcA"] * n_days + ["vcB"] * n_days
    return pl.DataFrame({"cluster": "Mini", "vc": vcs, "date": days * 2, "gpus": [gpus] * (2 * n_days)})


def test_dataset_series_has_total_and_busy_nodes():
    series, unplaced = dataset_node_series(_jobs(10), _vc_gpus(10))
    assert unplaced == 0
    assert len(series.time) == len(np.unique(series.time))
    assert (np.diff(series.time) == np.timedelta64(10, "m")).all()
    assert (series.active <= series.total).all() and series.active.max() > 0
    assert (series.total >= 16).all()


@pytest.fixture
def mini_dataset(data_root):
    write_dataset("mini", _jobs(), _vc_gpus(), {"clusters": ["Mini"]})
    return "mini"


def test_cli_on_a_dataset(mini_dataset, capsys, tmp_path):
    argv = ["ces", "--dataset", mini_dataset, "--cluster", "Mini", "--preset", "venus", "--mode", "artifact"]
    argv += ["--start", "2020-06-01", "--end", "2020-06-08", "--json", "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    keys = "original_used_pct optimized_used_pct poweroff_mean_nodes daily_change_times daily_increase_times"
    keys += " rmse smape node_hours_off energy_saved_kwh cost_saved co2_saved_kg lack_node_steps wall_s"
    assert set(keys.split()) <= set(out)
    assert out["steps"] == 7 * 144 and out["unplaced_jobs"] == 0
    assert out["lack_jobs_waiting"] >= 0
    timeline = pl.read_parquet(tmp_path / "ces_timeline.parquet")
    expected = ["time", "total", "running", "prediction", "active", "poweroff", "change", "lack"]
    assert timeline.columns[:8] == expected and timeline.height == 7 * 144


def test_cli_on_a_simulated_schedule(data_root, capsys):
    write_dataset("tight", _jobs(), _vc_gpus(gpus=16), {"clusters": ["Mini"]})  # jobs queue on 2 nodes per VC
    argv = ["ces", "--dataset", "tight", "--cluster", "Mini", "--mode", "artifact", "--json"]
    argv += ["--start", "2020-06-01", "--end", "2020-06-08"]
    assert cli.main([*argv, "--schedule", "fifo"]) == 0
    simulated = json.loads(capsys.readouterr().out)
    assert cli.main(argv) == 0
    recorded = json.loads(capsys.readouterr().out)
    assert simulated["steps"] == recorded["steps"] == 7 * 144
    assert simulated["mean_running_nodes"] < recorded["mean_running_nodes"]
    assert simulated["total_nodes_mean"] == 4 < recorded["total_nodes_mean"]  # recorded times overflow


def test_cli_policy_and_energy_parameters(public_data_dir, capsys):
    csv = public_data_dir / "ces" / "philly_node_sequence.csv.gz"
    pred = public_data_dir / "ces" / "ces_philly_artifact_predictions.csv"
    base = ["ces", "--node-sequence", str(csv), "--predictions", str(pred), "--json"]
    assert cli.main(base) == 0
    default = json.loads(capsys.readouterr().out)
    assert cli.main([*base, "--buffer", "40", "--idle-kw", "1.6", "--price-per-kwh", "0.2"]) == 0
    changed = json.loads(capsys.readouterr().out)
    assert default["poweroff_mean_nodes"] == pytest.approx(100.11061507936508, abs=1e-9)
    assert changed["poweroff_mean_nodes"] < default["poweroff_mean_nodes"]
    assert changed["cost_saved"] > default["cost_saved"]


def test_cli_bad_rows_name_file_row_and_column(tmp_path, capsys):
    bad = tmp_path / "nodes.csv"
    bad.write_text("time,active,total\n2020-01-01 00:00:00,3,10\n2020-01-01 00:01:00,three,10\n")
    assert cli.main(["ces", "--node-sequence", str(bad)]) == 2
    assert "nodes.csv: row 3, column active: cannot parse 'three'" in capsys.readouterr().err


def test_cli_unknown_cluster(mini_dataset, capsys):
    assert cli.main(["ces", "--dataset", mini_dataset, "--cluster", "Nope"]) == 2
    assert "--cluster must name a cluster of 'mini': Mini" in capsys.readouterr().err
