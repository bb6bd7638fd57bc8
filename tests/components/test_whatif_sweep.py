"""The what-if page's sweep mode: grid parsing from the controls, row selection and the charts."""

from __future__ import annotations

import polars as pl
import pytest

from components.whatif import sweep as ws
from components.whatif.state import default_form
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


def test_the_heatmap_draws_the_swept_policy_not_the_twin_baseline():
    frame = pl.DataFrame(
        {
            "load_factor": [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0],
            "capacity_scale": [1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0],
            "scheme": ["twin", "qssf"] * 4,
            "avg_queue_s": [99.0, 10.0, 99.0, 5.0, 99.0, 40.0, 99.0, 20.0],
        }
    )
    grid = {"load_factor": [1.0, 2.0], "capacity_scale": [1.0, 2.0]}
    fig = ws.sweep_figure(frame, grid, "avg_queue_s")
    assert [list(r) for r in fig.data[0].z] == [[10.0, 40.0], [5.0, 20.0]] and fig.layout.title.text.endswith("(qssf)")
    lines = ws.sweep_figure(frame.filter(pl.col("capacity_scale") == 1.0), {"load_factor": [1.0, 2.0]}, "avg_queue_s")
    assert [(t.name, t.line.dash) for t in lines.data] == [("twin", "dash"), ("qssf", "solid")]


def test_ces_metrics_come_from_the_ces_rows():
    frame = pl.DataFrame(
        {"ces.buffer": [5.0, 5.0], "scheme": ["fifo", "ces"], "energy_saved_kwh": [None, 12.0]},
        schema_overrides={"energy_saved_kwh": pl.Float64},
    )
    fig = ws.sweep_figure(frame, {"ces.buffer": [5.0]}, "energy_saved_kwh")
    assert [t.name for t in fig.data] == ["ces"] and list(fig.data[0].y) == [12.0]


def test_the_sweep_figure_names_its_metric_and_parameters_in_human_units():
    frame = _frame().with_columns(pl.col("avg_jct_s") * 3600)  # hours of JCT
    fig = ws.sweep_figure(frame, {"load_factor": [1.0, 2.0], "policy": ["fifo", "sjf"]}, "avg_jct_s")
    assert fig.layout.yaxis.title.text == "mean JCT (hours)" and fig.layout.xaxis.title.text == "load factor"
    assert list(fig.data[0].y) == [4.0, 8.0]  # shown in hours, not seconds
    assert list(fig.data[0].customdata) == ["4 h", "8 h"]  # hover in human units
    assert "avg_jct_s" not in fig.layout.title.text and "load_factor" not in fig.layout.title.text


def test_sweep_settings_come_from_the_url_and_bad_ones_are_reported_not_dropped():
    chosen, problems = ws.settings_from_params(
        {"sx": "capacity_scale", "sxv": "0.5,1", "sy": ws.NONE, "sm": "avg_queue_s"}
    )
    assert chosen == {**ws.DEFAULTS, "sx": "capacity_scale", "sxv": "0.5,1", "sy": ws.NONE, "sm": "avg_queue_s"}
    assert problems == []
    chosen, problems = ws.settings_from_params({"sx": "rm -rf", "sxv": "a,b", "sm": "nope"})
    assert chosen["sxv"] == "a,b"  # kept in the form for the user to mend
    assert any("sx='rm -rf' must be one of" in p for p in problems)
    assert any("sm='nope' must be one of" in p for p in problems)
    assert any(p.startswith("URL sweep values:") for p in problems)  # the grid parser's own check
    assert ws.settings_from_params({}) == (ws.DEFAULTS, [])


def test_a_sweep_url_carries_the_form_and_the_sweep(monkeypatch):
    form = {"dataset": "helios-synth", "cluster": "Venus", "start": "2020-09-01", "end": "2020-09-07"}
    monkeypatch.setattr(ws.ids, "form_of", lambda values, p, e, t: default_form(**form))
    search = ws.sweep_url(1, "load_factor", "1,2", "policy", "fifo,sjf", "avg_queue_s", [], [], [], "?ds=x", 1)
    params = dict(p.split("=", 1) for p in search[1:].split("&"))
    assert params["sx"] == "load_factor" and params["sxv"] == "1,2" and params["sm"] == "avg_queue_s"
    assert params["sweep"] == "1" and params["ds"] == "helios-synth" and params["cluster"] == "Venus"
    assert "run" not in params  # the single run was not asked for
    again = ws.sweep_url(1, "load_factor", "1,2", "policy", "fifo,sjf", "avg_queue_s", [], [], [], "?run=1", 1)
    assert "run=1" in again
    chosen, problems = ws.settings_from_params(dict(p.split("=", 1) for p in again[1:].split("&")))
    assert problems == [] and chosen["sm"] == "avg_queue_s"


def test_a_sweep_is_cached_under_its_scenario_grid_and_metric():
    key = ws.sweep_key("abc", {"load_factor": [1.0, 2.0]}, "avg_jct_s")
    assert key == ws.sweep_key("abc", {"load_factor": [1.0, 2.0]}, "avg_jct_s")
    assert key != ws.sweep_key("abd", {"load_factor": [1.0, 2.0]}, "avg_jct_s")
    assert key != ws.sweep_key("abc", {"load_factor": [1.0, 3.0]}, "avg_jct_s")
    assert key != ws.sweep_key("abc", {"load_factor": [1.0, 2.0]}, "avg_queue_s")
