"""The artifact's Helios feature set (CES_Helios.py): holiday and event columns, categorical in LightGBM."""

from __future__ import annotations

import json
from datetime import datetime

import numpy as np
import pytest

import cli
from sim.ces.forecast_artifact import (
    artifact_features,
    event_feature,
    feature_set_for,
    fit_artifact,
    holiday_feature,
)
from sim.ces.policy import PRESETS
from sim.ces.run import CesConfig, run_ces
from sim.ces.series import NodeSeries

TEST_START = np.datetime64("2020-09-01", "us")


def _times(*stamps: str) -> np.ndarray:
    return np.array(stamps, dtype="datetime64[us]")


@pytest.fixture(scope="module")
def series() -> NodeSeries:
    """Jun 1 .. Sep 7 2020: a daily cycle, 40 fewer busy nodes on holidays and 15 more before deadlines."""
    time = np.arange(np.datetime64("2020-06-01"), np.datetime64("2020-09-08"), np.timedelta64(10, "m"))
    time = time.astype("datetime64[us]")
    day_fraction = (time - time.astype("datetime64[D]")).astype("timedelta64[m]").astype(np.int64) / 1440
    noise = np.random.default_rng(0).normal(0, 3, len(time))
    active = 100 + 20 * np.sin(2 * np.pi * day_fraction) - 40 * holiday_feature(time)
    active = np.round(active + 15 * event_feature(time) + noise)
    return NodeSeries(time, active, np.full(len(time), 200.0))


def _train(series: NodeSeries) -> NodeSeries:
    return series.slice(0, int(np.searchsorted(series.time, TEST_START)))


def test_holiday_follows_chinese_calendar():
    days = _times("2020-10-01T13:20", "2020-09-05", "2020-09-26", "2020-09-27", "2020-10-10", "2020-09-01")
    # National Day, a Saturday, a Saturday, the swapped working Sunday and Saturday, a Tuesday
    assert holiday_feature(days).tolist() == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]


def test_holiday_outside_the_calendar_years_is_a_clear_error():
    with pytest.raises(ValueError, match="holiday feature: no available data for year 2040"):
        holiday_feature(_times("2040-01-02"))


@pytest.mark.parametrize("deadline", ["2020-03-06", "2020-06-06", "2020-09-10"])
def test_event_is_the_ten_days_before_each_deadline(deadline):
    d = np.datetime64(deadline, "us")
    ten_days, step = np.timedelta64(10, "D"), np.timedelta64(10, "m")
    stamps = np.array([d - ten_days - step, d - ten_days, d - step, d, d + ten_days])
    assert event_feature(stamps).tolist() == [0.0, 1.0, 1.0, 0.0, 0.0]


def test_event_window_spans_leap_day():
    assert event_feature(_times("2020-02-24T23:50", "2020-02-25", "2020-02-29T12:00")).tolist() == [0, 1, 1]


def test_helios_features_append_holiday_and_event(series):
    philly = artifact_features(series)
    helios = artifact_features(series, "helios")
    assert philly.shape[1] == 16 and helios.shape[1] == 18 and helios.dtype == np.float64
    assert np.array_equal(helios[:, :16], philly, equal_nan=True)
    assert np.array_equal(helios[:, 16], holiday_feature(series.time))
    assert np.array_equal(helios[:, 17], event_feature(series.time))


def test_unknown_feature_set_is_rejected(series):
    with pytest.raises(ValueError, match="unknown artifact feature set 'alibaba'"):
        artifact_features(series, "alibaba")


def _split_types(node: dict, out: set) -> set:
    if "split_feature" in node:
        out.add((node["split_feature"], node["decision_type"]))
        _split_types(node["left_child"], out)
        _split_types(node["right_child"], out)
    return out


def test_helios_model_input_has_18_columns_last_two_categorical(series):
    fit = fit_artifact(_train(series), TEST_START, "helios")
    booster = fit.booster
    assert booster.num_feature() == 18
    assert booster.feature_name()[-2:] == ["holiday", "event"]
    assert booster.params["categorical_column"] == [16, 17]
    infos = booster.dump_model()["feature_infos"]
    assert infos["holiday"]["values"] and infos["event"]["values"] and not infos["3h_ago"]["values"]
    splits = set()
    for tree in booster.dump_model()["tree_info"]:
        _split_types(tree["tree_structure"], splits)
    assert (16, "==") in splits  # the holiday effect is learnt through a categorical split


def test_philly_model_input_stays_16_numeric_columns(series):
    booster = fit_artifact(_train(series), TEST_START).booster
    assert booster.num_feature() == 16
    assert "categorical_column" not in booster.params


def test_feature_set_by_preset():
    assert [feature_set_for(p) for p in ("philly", "venus", "earth", "saturn", "uranus")] == [
        "philly",
        "helios",
        "helios",
        "helios",
        "helios",
    ]


@pytest.mark.parametrize("mode", ["artifact", "recursive"])
def test_run_with_helios_features(series, mode):
    config = CesConfig(
        mode=mode,
        start=datetime(2020, 9, 1),
        end=datetime(2020, 9, 8),
        policy=PRESETS["earth"],
        artifact_features="helios",
    )
    result = run_ces(series, config)
    assert result.metrics["artifact_features"] == "helios"
    assert result.timeline.height == 7 * 144
    assert np.isfinite(result.timeline["prediction"].to_numpy()).all()


def _write_csv(series: NodeSeries, path) -> None:
    rows = [
        f"{t},{a:.0f},{n:.0f}" for t, a, n in zip(series.time.astype(str), series.active, series.total, strict=True)
    ]
    path.write_text("time,active,total\n" + "\n".join(rows) + "\n")


def test_cli_artifact_features_default_by_preset_and_override(series, tmp_path, capsys):
    csv = tmp_path / "nodes.csv"
    _write_csv(series, csv)
    base = ["ces", "--node-sequence", str(csv), "--mode", "artifact", "--start", "2020-09-01", "--json"]
    chosen = []
    for extra in (["--preset", "earth"], ["--preset", "earth", "--artifact-features", "philly"], []):
        assert cli.main([*base, *extra]) == 0
        chosen.append(json.loads(capsys.readouterr().out)["artifact_features"])
    assert chosen == ["helios", "philly", "philly"]
