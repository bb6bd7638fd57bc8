"""Human units: durations, GPU time, energy, sizes and counts, their exact hover values and absent values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from components.charts import units


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (0.4, "0.4 s"),
        (45, "45 s"),
        (59.6, "1 min"),
        (725, "12 min 5 s"),
        (3599, "1 h"),
        (2 * 3600 + 15 * 60, "2 h 15 min"),
        (3 * 86_400 + 4 * 3600, "3 d 4 h"),
        (86_399, "1 d"),
        (120 * 86_400 + 7 * 3600, "120 d"),
        (-(2 * 3600 + 15 * 60), "−2 h 15 min"),
        (math.inf, "∞"),
    ],
)
def test_duration_reads_as_at_most_two_units(seconds, text):
    assert units.duration(seconds) == text


@pytest.mark.parametrize("absent", [None, math.nan, np.float64("nan")])
def test_an_absent_value_is_not_in_this_trace_never_zero(absent):
    for kind in units.KINDS:
        shown = units.show(kind, absent)
        assert shown == (units.NOT_IN_TRACE, units.NOT_IN_TRACE), kind


def test_zero_is_a_value_not_an_absence():
    for kind in units.KINDS:
        text, title = units.show(kind, 0)
        assert text.startswith("0") and title.startswith("0"), (kind, text, title)


def test_exact_values_keep_every_digit():
    assert units.duration_exact(8100) == "8,100 s"
    assert units.duration_exact(1.5) == "1.500 s"
    assert units.count_exact(12_345) == "12,345"
    assert units.size_exact(1_234_567) == "1,234,567 bytes"
    assert units.energy_exact(1234.5) == "1,234.50 kWh"
    assert units.gpu_time_exact(3600 * 3400) == "3,400 GPU-h = 12,240,000 GPU-s"


@pytest.mark.parametrize(
    ("fmt", "value", "text"),
    [
        (units.gpu_time, 3400 * 3600, "3.4 k GPU-h"),
        (units.gpu_time, 120 * 3600, "120 GPU-h"),
        (units.gpu_hours, 1.2e6, "1.2 M GPU-h"),
        (units.gpu_hours, 0.5, "0.5 GPU-h"),
        (units.energy_kwh, 850, "850 kWh"),
        (units.energy_kwh, 1234.5, "1.2 MWh"),
        (units.energy_kwh, 2.5e6, "2.5 GWh"),
        (units.size_bytes, 512, "512 B"),
        (units.size_bytes, 3.4e6, "3.4 MB"),
        (units.size_bytes, 1.2e12, "1.2 TB"),
        (units.count, 950, "950"),
        (units.count, 12_345, "12.3 k"),
        (units.count, -12_345, "−12.3 k"),
        (units.count, 4.5e6, "4.5 M"),
        (units.percent, 42.345, "42.3 %"),
    ],
)
def test_scaled_units(fmt, value, text):
    assert fmt(value) == text


def test_log_duration_ticks_are_named_times_inside_the_range():
    values, labels = units.duration_ticks(30, 2 * 86_400)
    assert values == [60, 600, 3600, 86_400]
    assert labels == ["1 min", "10 min", "1 h", "1 d"]
    assert units.duration_ticks(0.1, 0.5)[1] == ["1 s"]


@pytest.mark.parametrize(
    ("high_s", "unit"), [(100, "seconds"), (600, "minutes"), (5 * 3600, "hours"), (10 * 86_400, "days")]
)
def test_linear_duration_axis_unit(high_s, unit):
    divisor, name = units.duration_scale(high_s)
    assert name == unit and high_s / divisor >= 1
