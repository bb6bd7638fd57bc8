"""Node-demand series: read `time, active, total` per minute and resample to a complete 10-minute grid."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

STEP = timedelta(minutes=10)
STEPS_PER_DAY = 144
WEEK_STEPS = 7 * STEPS_PER_DAY
STEP_HOURS = 1 / 6
REQUIRED_COLUMNS = ("time", "active", "total")


class SeriesError(ValueError):
    """A node-demand series is missing, malformed or too short for the requested window."""


@dataclass(frozen=True)
class NodeSeries:
    """A complete 10-minute grid: bin starts and per-bin max of busy and total nodes (NaN: empty bin)."""

    time: np.ndarray  # datetime64[us], one per bin, contiguous 10-minute steps
    active: np.ndarray  # float64 busy nodes (max over the bin), NaN for empty bins
    total: np.ndarray  # float64 total nodes (max over the bin), NaN for empty bins

    def index_of(self, ts: datetime) -> int:
        """Position of the first bin starting at or after ts."""
        return int(np.searchsorted(self.time, np.datetime64(ts, "us")))

    def slice(self, lo: int, hi: int) -> NodeSeries:
        """The bins at positions lo..hi-1."""
        return NodeSeries(self.time[lo:hi], self.active[lo:hi], self.total[lo:hi])


def read_node_csv(path: Path) -> pl.DataFrame:
    """Read a per-minute `time, active, total` CSV, with a one-line error naming the file, row and column."""
    if not Path(path).is_file():
        raise SeriesError(f"{path}: file not found")
    try:
        df = pl.read_csv(path, infer_schema_length=0)
    except pl.exceptions.PolarsError as exc:
        raise SeriesError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise SeriesError(f"{path}: missing column(s) {', '.join(missing)}; expected time, active, total")
    out = df.select(
        pl.col("time").str.to_datetime(strict=False, time_unit="us"),
        pl.col("active").cast(pl.Float64, strict=False),
        pl.col("total").cast(pl.Float64, strict=False),
    )
    for col in REQUIRED_COLUMNS:
        bad = out.with_row_index("row").filter(pl.col(col).is_null() & df[col].is_not_null())
        if bad.height:
            row = int(bad["row"][0]) + 2
            raise SeriesError(f"{path}: row {row}, column {col}: cannot parse {df[col][row - 2]!r}")
    return out.drop_nulls("time").sort("time")


def resample_10min(minutes: pl.DataFrame) -> NodeSeries:
    """Max per left-closed 10-minute bin on a complete grid, empty bins kept as NaN (pandas `resample`)."""
    if minutes.height == 0:
        raise SeriesError("node-demand series is empty")
    binned = (
        minutes.with_columns(pl.col("time").dt.truncate("10m").alias("bin"))
        .group_by("bin")
        .agg(pl.col("active").max(), pl.col("total").max())
    )
    first, last = binned["bin"].min(), binned["bin"].max()
    grid = pl.DataFrame({"bin": pl.datetime_range(first, last, "10m", time_unit="us", eager=True)})
    full = grid.join(binned, on="bin", how="left").sort("bin")
    return NodeSeries(
        time=full["bin"].to_numpy(),
        active=full["active"].cast(pl.Float64).fill_null(np.nan).to_numpy(),
        total=full["total"].cast(pl.Float64).fill_null(np.nan).to_numpy(),
    )


def load_node_series(path: Path) -> NodeSeries:
    """Read a per-minute node CSV and resample it to the 10-minute grid."""
    return resample_10min(read_node_csv(path))
