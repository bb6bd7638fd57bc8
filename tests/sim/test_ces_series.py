"""Reading and resampling node-demand series, and window checks."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl
import pytest

from sim.ces.policy import PolicyParams
from sim.ces.run import default_window, given_forecast, window_bounds
from sim.ces.series import SeriesError, load_node_series, read_node_csv, resample_10min
from sim.commands.ces import read_predictions


def _minutes(rows: list[tuple[str, float, float]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["time", "active", "total"], orient="row").with_columns(
        pl.col("time").str.to_datetime(time_unit="us")
    )


def test_resample_left_closed_max_and_empty_bins_kept():
    minutes = _minutes(
        [
            ("2020-01-01 00:00", 3, 10),
            ("2020-01-01 00:09", 5, 10),
            ("2020-01-01 00:10", 4, 10),
            ("2020-01-01 00:41", 2, 12),
        ]
    )
    series = resample_10min(minutes)
    assert [str(t)[11:16] for t in series.time] == ["00:00", "00:10", "00:20", "00:30", "00:40"]
    assert np.array_equal(series.active, [5, 4, np.nan, np.nan, 2], equal_nan=True)
    assert np.array_equal(series.total, [10, 10, np.nan, np.nan, 12], equal_nan=True)


def test_window_with_empty_bins_is_rejected():
    series = resample_10min(_minutes([("2020-01-01 00:00", 3, 10), ("2020-01-01 00:30", 3, 10)]))
    with pytest.raises(SeriesError, match="2 empty 10-minute bins"):
        window_bounds(series, datetime(2020, 1, 1), datetime(2020, 1, 2))
    with pytest.raises(SeriesError, match="holds no 10-minute bin"):
        window_bounds(series, datetime(2021, 1, 1), datetime(2021, 1, 2))


def test_default_window_is_the_last_14_full_days(public_data_dir):
    series = load_node_series(public_data_dir / "ces" / "philly_node_sequence.csv.gz")
    assert default_window(series) == (datetime(2017, 12, 1), datetime(2017, 12, 15))


def test_predictions_must_cover_the_window():
    series = resample_10min(_minutes([("2020-01-01 00:00", 3, 10), ("2020-01-01 00:10", 3, 10)]))
    table = pl.DataFrame({"time": [datetime(2020, 1, 1)], "active": [3.0]}).with_columns(
        pl.col("time").cast(pl.Datetime("us"))
    )
    with pytest.raises(SeriesError, match="lack 1 window bins"):
        given_forecast(series, 0, 2, table, PolicyParams())


def test_missing_column_and_file(tmp_path):
    path = tmp_path / "n.csv"
    path.write_text("time,busy,total\n2020-01-01 00:00:00,1,2\n")
    with pytest.raises(SeriesError, match="n.csv: missing column"):
        read_node_csv(path)
    with pytest.raises(SeriesError, match="file not found"):
        read_node_csv(tmp_path / "absent.csv")


def test_bad_prediction_row_names_file_row_and_column(tmp_path):
    path = tmp_path / "pred.csv"
    path.write_text("time,active\n2017-12-01 00:00:00,1.5\n2017-12-01 00:10:00,\n")
    with pytest.raises(SeriesError, match=r"pred.csv: row 3, column active: cannot parse an empty value"):
        read_predictions(path)
