"""The what-if page's sweep mode: grid parsing from the controls, row selection and the charts."""

from __future__ import annotations

import polars as pl
import pytest

from components.whatif import sweep as ws
from sim.scenario import ScenarioError


def _frame() -> pl.DataFrame:
    rows = []
    for load in (1.0, 2.0):
        for policy in ("fifo", "sjf"):
            if load == 1.0:
                rows.append({"load_factor": load, "policy": policy, "scheme": "recorded", "avg_jct_s": 50.0})
            rows.append({"load_factor": load, "policy": policy, "scheme": policy, "avg_jct_s": load * len(policy)})
    return pl.DataFrame(rows)


def test_grid_from_the_controls():
    assert ws.grid_of("load_factor", "1,2", "policy", "fifo,sjf") == {
        "load_factor": [1.0, 2.0],
        "policy": ["fifo", "sjf"],
    }
    assert ws.grid_of("ces.buffer", "5,10", ws.NONE, "") == {"ces.buffer": [5.0, 10.0]}
    with pytest.raises(ScenarioError, match="must differ"):
        ws.grid_of("load_factor", "1", "load_factor", "2")
    with pytest.raises(ScenarioError, match="choose a sweep parameter"):
        ws.grid_of("load_factor", " ", None, None)


def test_policy_sweeps_keep_each_points_own_policy():
    rows = ws.sweep_rows(_frame(), {"load_factor": [1.0, 2.0], "policy": ["fifo", "sjf"]}, "avg_jct_s")
    assert sorted(zip(rows["load_factor"], rows["scheme"], strict=True)) == [
        (1.0, "fifo"),
        (1.0, "sjf"),
        (2.0, "fifo"),
        (2.0, "sjf"),
    ]


def test_one_parameter_gives_a_line_per_policy():
    fig = ws.sweep_figure(_frame(), {"load_factor": [1.0, 2.0], "policy": ["fifo", "sjf"]}, "avg_jct_s")
    assert [t.name for t in fig.data] == ["fifo", "sjf"]
    assert list(fig.data[0].y) == [4.0, 8.0] and list(fig.data[1].y) == [3.0, 6.0]


def test_two_parameters_give_a_heatmap():
    frame = pl.DataFrame(
        {
            "load_factor": [1.0, 1.0, 2.0, 2.0],
            "capacity_scale": [1.0, 2.0, 1.0, 2.0],
            "scheme": ["qssf"] * 4,
            "avg_queue_s": [10.0, 5.0, 40.0, 20.0],
        }
    )
    grid = {"load_factor": [1.0, 2.0], "capacity_scale": [1.0, 2.0]}
    fig = ws.sweep_figure(frame, grid, "avg_queue_s")
    heat = fig.data[0]
    assert heat.type == "heatmap" and [list(r) for r in heat.z] == [[10.0, 40.0], [5.0, 20.0]]


def test_ces_metrics_come_from_the_ces_rows():
    frame = pl.DataFrame(
        {"ces.buffer": [5.0, 5.0], "scheme": ["fifo", "ces"], "energy_saved_kwh": [None, 12.0]},
        schema_overrides={"energy_saved_kwh": pl.Float64},
    )
    fig = ws.sweep_figure(frame, {"ces.buffer": [5.0]}, "energy_saved_kwh")
    assert [t.name for t in fig.data] == ["ces"] and list(fig.data[0].y) == [12.0]
