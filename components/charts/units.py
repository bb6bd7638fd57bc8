"""Human units for every number on screen, each with its exact value for a hover title: the one place for them.

Durations and queues ("2 h 15 min"), GPU time ("3.4 k GPU-h"), energy ("1.2 MWh"), sizes ("1.2 TB") and counts
("12.3 k"). A missing value (None, NaN) reads "not in this trace", never 0. This module lives in `charts`, the lowest
UI layer that draws, so that figures, the shell, the grids and the pages can all use it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

NOT_IN_TRACE = "not in this trace"

MINUTE_S = 60
HOUR_S = 3600
DAY_S = 86_400

_DURATION_STEPS = ((DAY_S, "d", HOUR_S, "h"), (HOUR_S, "h", MINUTE_S, "min"), (MINUTE_S, "min", 1, "s"))
_COUNT_UNITS = ((1e12, " T"), (1e9, " G"), (1e6, " M"), (1e3, " k"), (1.0, ""))
_BYTE_UNITS = ((1e15, " PB"), (1e12, " TB"), (1e9, " GB"), (1e6, " MB"), (1e3, " kB"), (1.0, " B"))
_ENERGY_UNITS_KWH = ((1e6, " GWh"), (1e3, " MWh"), (1.0, " kWh"))


class Shown(NamedTuple):
    """A value as displayed (text) and its exact value for a hover title (title)."""

    text: str
    title: str


def _absent(value: float | None) -> bool:
    return value is None or math.isnan(float(value))


def _sign(value: float) -> str:
    return "−" if value < 0 else ""


def _short(value: float) -> str:
    """A positive number with three significant figures at most, without a trailing .0 (3.4, 12.3, 120)."""
    if value >= 100:
        return f"{value:,.0f}"
    text = f"{value:.2g}" if value < 1 else f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def duration(seconds: float | None) -> str:
    """Seconds as at most two units: 45 s, 12 min 5 s, 2 h 15 min, 3 d 4 h, 120 d."""
    if _absent(seconds):
        return NOT_IN_TRACE
    if math.isinf(seconds):
        return f"{_sign(seconds)}∞"
    size = abs(seconds)
    for big_s, big, small_s, small in _DURATION_STEPS:
        rounded_s = round(size / small_s) * small_s
        if rounded_s >= big_s:
            n_big, rest_s = divmod(rounded_s, big_s)
            n_small = round(rest_s / small_s)
            if n_small == 0 or n_big >= 100:
                return f"{_sign(seconds)}{n_big:.0f} {big}"
            return f"{_sign(seconds)}{n_big:.0f} {big} {n_small} {small}"
    return f"{_sign(seconds)}{size:.0f} s" if size >= 1 or size == 0 else f"{_sign(seconds)}{_short(size)} s"


def duration_exact(seconds: float | None) -> str:
    """Seconds as the exact count for a hover title (8,100 s)."""
    if _absent(seconds):
        return NOT_IN_TRACE
    if math.isinf(seconds):
        return f"{_sign(seconds)}∞ s"
    return f"{seconds:,.0f} s" if float(seconds).is_integer() else f"{seconds:,.3f} s"


def _scaled(value: float | None, units: tuple[tuple[float, str], ...]) -> str:
    """value in the largest unit it reaches (units: (size, suffix) largest first, the last one the base unit)."""
    if _absent(value):
        return NOT_IN_TRACE
    if math.isinf(value):
        return f"{_sign(value)}∞{units[-1][1]}"
    size, suffix = next(((size, suffix) for size, suffix in units if abs(value) >= size), units[-1])
    return f"{_sign(value)}{_short(abs(value) / size)}{suffix}"


def _exact(value: float | None, unit: str) -> str:
    if _absent(value):
        return NOT_IN_TRACE
    if math.isinf(value):
        return f"{_sign(value)}∞ {unit}".strip()
    number = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
    return f"{number} {unit}".strip()


def count(n: float | None) -> str:
    """A count as 950, 12.3 k, 4.5 M."""
    return _scaled(n, _COUNT_UNITS)


def count_exact(n: float | None) -> str:
    """A count with thousands separators (12,345)."""
    return _exact(n, "")


def gpu_hours(gpu_h: float | None) -> str:
    """GPU time given in GPU-hours as 0.5 GPU-h, 120 GPU-h, 3.4 k GPU-h, 1.2 M GPU-h."""
    if _absent(gpu_h):
        return NOT_IN_TRACE
    return f"{count(gpu_h)} GPU-h"


def gpu_time(gpu_s: float | None) -> str:
    """GPU time given in GPU-seconds, shown in GPU-hours (3.4 k GPU-h)."""
    return gpu_hours(None if _absent(gpu_s) else gpu_s / HOUR_S)


def gpu_time_exact(gpu_s: float | None) -> str:
    """GPU time in GPU-seconds as its exact GPU-hours and GPU-seconds (3,412.50 GPU-h = 12,285,000 GPU-s)."""
    if _absent(gpu_s):
        return NOT_IN_TRACE
    return f"{_exact(gpu_s / HOUR_S, 'GPU-h')} = {_exact(gpu_s, 'GPU-s')}"


def energy_kwh(kwh: float | None) -> str:
    """Energy given in kWh as 850 kWh, 1.2 MWh, 3.4 GWh."""
    return _scaled(kwh, _ENERGY_UNITS_KWH)


def energy_exact(kwh: float | None) -> str:
    """Energy in kWh with separators (1,234.56 kWh)."""
    return _exact(kwh, "kWh")


def size_bytes(n: float | None) -> str:
    """A size in bytes with decimal prefixes: 512 B, 3.4 MB, 1.2 TB."""
    return _scaled(n, _BYTE_UNITS)


def size_exact(n: float | None) -> str:
    """A size as its exact byte count (1,234,567 bytes)."""
    return _exact(n, "bytes")


def percent(pct: float | None) -> str:
    """A percentage with one decimal (42.3 %)."""
    return NOT_IN_TRACE if _absent(pct) else f"{pct:.1f} %"


KINDS: dict[str, tuple] = {
    "duration": (duration, duration_exact),
    "gpu_time": (gpu_time, gpu_time_exact),
    "gpu_hours": (gpu_hours, lambda h: gpu_time_exact(None if _absent(h) else h * HOUR_S)),
    "energy": (energy_kwh, energy_exact),
    "size": (size_bytes, size_exact),
    "count": (count, count_exact),
    "percent": (percent, lambda p: NOT_IN_TRACE if _absent(p) else f"{p:.4g} %"),
}


def show(kind: str, value: float | None) -> Shown:
    """value of a kind (a key of KINDS) as its human text and its exact hover title."""
    text, exact = KINDS[kind]
    return Shown(text(value), exact(value))


DURATION_TICKS_S: tuple[tuple[float, str], ...] = (
    (1, "1 s"), (10, "10 s"), (MINUTE_S, "1 min"), (10 * MINUTE_S, "10 min"), (HOUR_S, "1 h"),
    (DAY_S, "1 d"), (7 * DAY_S, "1 wk"), (30 * DAY_S, "30 d"), (365 * DAY_S, "1 y"),
)  # fmt: skip


def duration_ticks(low_s: float, high_s: float) -> tuple[list[float], list[str]]:
    """Tick values and labels (1 min, 1 h, 1 d, ...) of a log duration axis spanning low_s .. high_s seconds."""
    picked = [(v, t) for v, t in DURATION_TICKS_S if low_s <= v <= high_s] or [
        min(DURATION_TICKS_S, key=lambda vt: abs(math.log10(vt[0]) - math.log10(max(high_s, 1))))
    ]
    return [v for v, _ in picked], [t for _, t in picked]


def duration_scale(high_s: float) -> tuple[float, str]:
    """The unit (divisor in seconds, name) that reads best on a linear axis reaching high_s: min, hours or days."""
    if high_s >= 3 * DAY_S:
        return float(DAY_S), "days"
    if high_s >= 3 * HOUR_S:
        return float(HOUR_S), "hours"
    if high_s >= 3 * MINUTE_S:
        return float(MINUTE_S), "minutes"
    return 1.0, "seconds"
