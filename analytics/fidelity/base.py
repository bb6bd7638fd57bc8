"""One fidelity check (a published statistic beside the dataset's value) and the tolerance rules every check uses.

Tolerances are relative to the published value: ±15 % of it (counts, moments, small percentages), or ±3 percentage
points for percentages above 20 % (where 15 % would be wider); a percentage read from a figure never gets less than
its reading accuracy allows (READ_FLOOR_PP). See docs/fidelity.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analytics.store import Dataset

REL_PCT = 15.0  # relative tolerance, % of the published value
PP_ABOVE = 20.0  # percentages above this get PP_TOL percentage points instead
PP_TOL = 3.0
READ_FLOOR_PP = 0.5  # figure values are read to about ±0.3 pp: no tolerance below this for them
ZERO_ABS_S = 5.0  # absolute tolerance (s) where the published value is 0 (median queues)
MIN_PEARSON = 0.8


@dataclass(frozen=True)
class Check:
    """One published statistic beside the dataset's value, the tolerance, the verdict and the figure or table it
    comes from."""

    cluster: str
    statistic: str
    published: float
    value: float | None
    difference: float | None
    tolerance: str
    passed: bool
    source: str = ""


def dataset_scale(ds: Dataset) -> float:
    """The generator scale recorded in a synthetic dataset's meta.json (1 for real traces)."""
    return float((ds.meta.get("generator") or {}).get("scale", 1.0))


def absolute(
    source: str, cluster: str, stat: str, published: float, value: float | None, tol: float, unit: str
) -> Check:
    """Pass when |value - published| <= tol (in unit)."""
    diff = None if value is None else value - published
    ok = diff is not None and abs(diff) <= tol + 1e-9
    return Check(cluster, stat, published, value, diff, f"±{tol:g} {unit}", ok, source)


def relative(source: str, cluster: str, stat: str, published: float, value: float | None, pct: float) -> Check:
    """Pass when value is within pct % of published (±ZERO_ABS_S s when the published value is 0)."""
    if published == 0:
        return absolute(source, cluster, stat, published, value, ZERO_ABS_S, "s")
    diff = None if value is None else value - published
    ok = diff is not None and abs(diff) <= abs(published) * pct / 100 + 1e-9
    return Check(cluster, stat, published, value, diff, f"±{pct:g} %", ok, source)


def pct_tolerance_pp(published_pct: float, floor_pp: float = READ_FLOOR_PP, scale: float = 1.0) -> float:
    """Tolerance (pp) of a percentage: PP_TOL above PP_ABOVE, else REL_PCT of it, never below floor_pp; a value that
    scales with the dataset (utilisation) is judged at published x scale with the tolerance x scale."""
    base = PP_TOL if abs(published_pct) > PP_ABOVE else max(abs(published_pct) * REL_PCT / 100, floor_pp)
    return base * scale


def percentage(
    source: str,
    cluster: str,
    stat: str,
    published_pct: float,
    value: float | None,
    floor_pp: float = READ_FLOOR_PP,
    scale: float = 1.0,
) -> Check:
    """A percentage against the published one (x scale) with pct_tolerance_pp."""
    tol = pct_tolerance_pp(published_pct, floor_pp, scale)
    return absolute(source, cluster, stat, published_pct * scale, value, tol, "pp")


def worst_point(
    source: str, cluster: str, stat: str, xs: list, published: list[float], values: dict, floor_pp: float
) -> Check:
    """The curve point whose difference uses the largest part of its own percentage tolerance."""
    scored = [
        (abs(values[x] - p) / pct_tolerance_pp(p, floor_pp), x, p)
        for x, p in zip(xs, published, strict=True)
        if x in values
    ]
    if len(scored) < len(xs):
        return percentage(source, cluster, f"{stat} (points missing)", published[0], None, floor_pp)
    _, x, p = max(scored, key=lambda d: d[0])
    return percentage(source, cluster, f"{stat}, worst point x={x}", p, values[x], floor_pp)


def pearson(source: str, cluster: str, stat: str, published: list[float], values: list[float]) -> Check:
    """Shape: Pearson r of the values against the published series, at least MIN_PEARSON."""
    r = None
    if len(values) == len(published) and len(values) > 2 and np.std(values) > 0 and np.std(published) > 0:
        r = float(np.corrcoef(np.asarray(published, float), np.asarray(values, float))[0, 1])
    ok = bool(r and r >= MIN_PEARSON)
    return Check(cluster, stat, 1.0, r, None if r is None else r - 1.0, f"r ≥ {MIN_PEARSON:g}", ok, source)


def by_cluster(rows, key: str, value: str) -> dict[str, dict]:
    """{cluster: {key: value}} from a frame with columns cluster, key and value."""
    out: dict[str, dict] = {}
    for row in rows.iter_rows(named=True):
        out.setdefault(row["cluster"], {})[row[key]] = row[value]
    return out
