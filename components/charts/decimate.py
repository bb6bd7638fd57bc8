"""Time series thinned to what a chart can draw (min/max decimation): per bucket of about one horizontal pixel, the
lowest and the highest value, so that about two points per pixel are sent and a one-minute peak stays visible at
every zoom level. The buckets' width comes from the reader's viewport, sent as a bounded width class."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from components.charts import units

VIEWPORT_COOKIE = "helios-viewport"  # the browser's viewport width in px (assets/viewport.js)
VIEWPORT_STEP_PX = 320  # viewports are rounded up to a multiple of this: a few cached figures per chart, not one per px
MIN_VIEWPORT_PX, MAX_VIEWPORT_PX = 320, 3840
DEFAULT_VIEWPORT_PX = 1920  # without the cookie (a first request from a script, a test client)
FULL_WIDTH_CHROME_PX = 120  # page and card padding and the plot's side margins of a full-width figure card
LG_PX = 992  # Bootstrap's lg breakpoint: from it on, a card of an lg=6 column is half the page wide
# The bucket lengths a series is thinned to, in minutes: the smallest giving no more buckets than pixels is taken.
STEPS_MIN: tuple[tuple[str, int], ...] = (
    ("1m", 1),
    ("2m", 2),
    ("5m", 5),
    ("10m", 10),
    ("15m", 15),
    ("30m", 30),
    ("1h", 60),
    ("2h", 120),
    ("3h", 180),
    ("4h", 240),
    ("6h", 360),
    ("8h", 480),
    ("12h", 720),
    ("1d", 1440),
    ("2d", 2880),
    ("1w", 10_080),
    ("2w", 20_160),
    ("4w", 40_320),
)
STEP_S: dict[str, int] = {every: minutes * units.MINUTE_S for every, minutes in STEPS_MIN}
LOW, HIGH = "_low", "_high"  # suffixes of a thinned series' columns
ENDS = (LOW, HIGH)
STEP_COLUMN = "step_s"  # column of a thinned frame: the length of its buckets


def viewport_width(raw: Any) -> int:
    """A viewport width from the client (cookie or spec) in px, bounded; the default when unreadable."""
    try:
        px = int(float(str(raw)[:12]))
    except (TypeError, ValueError, OverflowError):
        return DEFAULT_VIEWPORT_PX
    return min(max(px, MIN_VIEWPORT_PX), MAX_VIEWPORT_PX)


def viewport_class(raw: Any) -> int:
    """A viewport width from the client (cookie or spec) as its bounded width class; the default when unreadable."""
    rounded = -(-viewport_width(raw) // VIEWPORT_STEP_PX) * VIEWPORT_STEP_PX
    return min(rounded, MAX_VIEWPORT_PX)


def card_plot_px(viewport_px: int, lg_share: float = 1.0) -> int:
    """The plot area's width of a figure card in a viewport viewport_px wide: a full-width card, or one taking
    lg_share of the row from the lg breakpoint on."""
    share = lg_share if viewport_px >= LG_PX else 1.0
    return max(int(viewport_px * share) - FULL_WIDTH_CHROME_PX, MIN_VIEWPORT_PX - FULL_WIDTH_CHROME_PX)


def plot_width_px(viewport_px: Any, lg_share: float = 1.0) -> int:
    """card_plot_px in a viewport of this width class."""
    return card_plot_px(viewport_class(viewport_px), lg_share)


def step_for(span_s: float, width_px: int, finest: str = "1m") -> str:
    """The shortest bucket (of STEPS_MIN, none shorter than finest) that cuts span_s into no more than width_px."""
    floor_s = STEP_S[finest]
    for every, step_s in STEP_S.items():
        if step_s >= floor_s and span_s / step_s <= width_px:
            return every
    return STEPS_MIN[-1][0]


def envelope(
    df: pl.DataFrame, every: str, series: Mapping[str, tuple[str, str]], group: str = "cluster"
) -> pl.DataFrame:
    """Per group (a cluster, a scheme) and bucket of `every`: for each series name -> (low column, high column) of
    df, the lowest low (name_low) and the highest high (name_high), with the bucket's start (time) and length
    (STEP_COLUMN)."""
    out_cols = [f"{name}{LOW}" for name in series] + [f"{name}{HIGH}" for name in series]
    lows = [pl.col(lo).min().alias(f"{name}{LOW}") for name, (lo, _) in series.items()]
    highs = [pl.col(hi).max().alias(f"{name}{HIGH}") for name, (_, hi) in series.items()]
    out = df.group_by(group, pl.col("time").dt.truncate(every), maintain_order=True).agg(*lows, *highs)
    return out.with_columns(pl.col(out_cols).cast(pl.Float64), pl.lit(STEP_S[every], pl.Int64).alias(STEP_COLUMN))


def thin(
    df: pl.DataFrame, width_px: int, series: Mapping[str, tuple[str, str]], group: str = "cluster", finest: str = "1m"
) -> pl.DataFrame:
    """df's series (sampled every `finest`) cut to no more buckets over its time span than width_px (envelope)."""
    if df.is_empty():
        return envelope(df, finest, series, group)
    span_s = (df["time"].max() - df["time"].min()).total_seconds() + STEP_S[finest]
    return envelope(df, step_for(span_s, width_px, finest), series, group)


BOTH = 2  # a point's kind (interleaved): 0 the bucket's low, 1 its high, BOTH its only value (low = high)


def interleaved(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each bucket's low then its high, in the order one line draws them; the high left out where it equals the low
    (or both are unknown: one NaN, a gap in the line). Returns the points' bucket indices, values and kinds."""
    pairs = np.column_stack([low, high]).ravel()
    kind = np.tile(np.array([0, 1], dtype=np.int8), len(low))
    same = (low == high) | (np.isnan(low) & np.isnan(high))
    kind[0::2][same] = BOTH
    keep = np.ones(len(pairs), dtype=bool)
    keep[1::2] = ~same
    return np.repeat(np.arange(len(low)), 2)[keep], pairs[keep], kind[keep]
