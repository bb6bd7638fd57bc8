"""Positional shift and rolling statistics with pandas 1.2.4 semantics (missing unless all p present)."""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

VARIANCE_FLOOR = 1e-14


def shift(values: np.ndarray, lag: int) -> np.ndarray:
    """Values moved lag positions later (the first lag positions become NaN), like `Series.shift(lag)`."""
    out = np.full(values.shape, np.nan)
    if lag < len(values):
        out[lag:] = values[: len(values) - lag]
    return out


def _windows(values: np.ndarray, p: int) -> np.ndarray:
    padded = np.concatenate([np.full(p - 1, np.nan), values])
    return sliding_window_view(padded, p)


def rolling_mean(values: np.ndarray, p: int) -> np.ndarray:
    """Mean of the last p values, NaN unless all p are present."""
    return _windows(values, p).sum(axis=1) / p


def rolling_median(values: np.ndarray, p: int) -> np.ndarray:
    """Median of the last p values, NaN unless all p are present."""
    windows = _windows(values, p)
    out = np.median(np.where(np.isnan(windows), 0.0, windows), axis=1)
    out[np.isnan(windows).any(axis=1)] = np.nan
    return out


class _Welford:
    """Running count, mean and squared deviations with Kahan compensations, as in pandas 1.2.4 `roll_var`."""

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self.ssq = 0.0
        self.c_add = 0.0
        self.c_rem = 0.0

    def add(self, x: float) -> None:
        """Insert x."""
        self.n += 1
        q = self.mean - self.c_add
        y = x - self.c_add
        t = y - self.mean
        self.c_add = (t + self.mean) - y
        self.mean = self.mean + t / self.n
        self.ssq = self.ssq + (x - q) * (x - self.mean)

    def remove(self, x: float) -> None:
        """Remove x."""
        self.n -= 1
        if self.n == 0:
            self.mean = 0.0
            self.ssq = 0.0
            return
        q = self.mean - self.c_rem
        y = x - self.c_rem
        t = y - self.mean
        self.c_rem = (t + self.mean) - y
        self.mean = self.mean - t / self.n
        self.ssq = self.ssq - (x - q) * (x - self.mean)


def rolling_std(values: np.ndarray, p: int) -> np.ndarray:
    """Sample std of the last p values (NaN unless all present), bit-identical to pandas 1.2.4."""
    state = _Welford()
    xs = values.tolist()
    out = [math.nan] * len(xs)
    for i, x in enumerate(xs):
        if i >= p and not math.isnan(xs[i - p]):
            state.remove(xs[i - p])
        if not math.isnan(x):
            state.add(x)
        if state.n >= p:
            var = state.ssq / (state.n - 1)
            out[i] = math.sqrt(0.0 if var < VARIANCE_FLOOR else var)
    return np.asarray(out, dtype=np.float64)
