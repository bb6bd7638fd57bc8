"""Fidelity checks of Fig 4, utilisation per VC: Earth's 10 largest VCs in May 2020 (without May 10) one by one, the
spread of their mean utilisations, and the spread of the other clusters' 10 largest VCs against Earth's.

The paper draws Fig 4 for Earth only. The other clusters are held to the spread of Earth's VC means (inter-quartile
range and range), not to its level, which Fig 3 sets for each cluster.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from analytics import queries
from analytics.fidelity.base import Check, absolute, dataset_scale
from analytics.filters import JobFilter
from analytics.reference import CLUSTERS, FIG4, reference
from analytics.store import Dataset

SOURCE = "Fig 4"
MEAN_PP = 10.0  # a VC's mean utilisation
QUARTILE_PP = 15.0  # its quartiles and median
REL_PCT = 25.0  # mean GPUs per job, normalised duration and queue
NORM_FLOOR_PCT = 5.0  # min-max normalised values near 0 have no relative scale: at least 5 points of 0-100
SPREAD_PP = 10.0  # min, quartiles and max of the VCs' means
HIGH_PCT = 90.0
HIGH_COUNT_TOL = 1
_BOX = (("mean_pct", MEAN_PP), ("q1_pct", QUARTILE_PP), ("median_pct", QUARTILE_PP), ("q3_pct", QUARTILE_PP))
_RELATIVE = {
    "avg_gpus_per_job": "mean GPUs per GPU job",
    "norm_avg_duration_pct": "mean GPU-job duration, min-max normalised %",
    "norm_avg_queue_pct": "mean GPU-job queueing delay, min-max normalised %",
}
_SPREAD = ("min", "q1", "median", "q3", "max")


def fig4_frame(ds: Dataset, cluster: str, vcs: tuple[str, ...] = ()) -> pl.DataFrame:
    """The Fig 4 statistics of a cluster's VCs in the figure's window: the named VCs, else its FIG4.top_vcs largest."""
    flt = JobFilter(clusters=(cluster,), vcs=vcs, start=FIG4.start, end=FIG4.end)
    return queries.vc_utilization(ds, flt, exclude_days=FIG4.exclude_days_text(), top=0 if vcs else FIG4.top_vcs)


def spread(values: list[float]) -> dict[str, float]:
    """Min, quartiles (linear) and max of values."""
    q = np.percentile(np.asarray(values, dtype=float), [0, 25, 50, 75, 100])
    return dict(zip(_SPREAD, (float(x) for x in q), strict=True))


def vc_checks(frame: pl.DataFrame, published: dict[str, dict[str, Any]], scale: float = 1.0) -> list[Check]:
    """Each published VC against its row of frame (a vc_utilization output): mean ±10 pp, quartiles ±15 pp (x scale),
    mean GPUs per job and normalised duration and queue ±25 % (the last two at least ±5 points)."""
    rows = {r["vc"]: r for r in frame.iter_rows(named=True)}
    out = []
    for vc, pub in published.items():
        row = rows.get(vc, {})
        for col, tol in _BOX:
            stat = f"{vc}: {col.removesuffix('_pct').replace('_', ' ')} utilisation %"
            out.append(absolute(SOURCE, FIG4.cluster, stat, pub[col] * scale, row.get(col), tol * scale, "pp"))
        for col in _RELATIVE:
            out.append(_relative_check(vc, col, pub[col], row.get(col)))
    return out


def _relative_check(vc: str, col: str, published: float, value: float | None) -> Check:
    floor = 0.0 if col == "avg_gpus_per_job" else NORM_FLOOR_PCT
    tol = max(abs(published) * REL_PCT / 100, floor)
    diff = None if value is None else value - published
    ok = diff is not None and abs(diff) <= tol + 1e-9
    text = f"±{REL_PCT:g} %" + (f" (≥ {floor:g} points)" if floor else "")
    return Check(FIG4.cluster, f"{vc}: {_RELATIVE[col]}", published, value, diff, text, ok, SOURCE)


def spread_checks(
    cluster: str, frame: pl.DataFrame, published: dict[str, dict[str, Any]], scale: float, level: bool
) -> list[Check]:
    """The spread of the VCs' mean utilisations in frame against the published VCs' (x scale): with level, their min,
    quartiles and max (±10 pp) and the VCs with a mean, and with a median, of at least 90 % (±1 VC); without, their
    inter-quartile range and range (±10 pp)."""
    got_means = frame["mean_pct"].drop_nulls().to_list()
    want = spread([p["mean_pct"] * scale for p in published.values()])
    got = spread(got_means) if got_means else None
    tol = SPREAD_PP * scale
    if not level:
        out = []
        for name, (hi, lo) in (("inter-quartile range", ("q3", "q1")), ("range", ("max", "min"))):
            value = None if got is None else got[hi] - got[lo]
            stat = f"{name} of the {FIG4.top_vcs} largest VCs' mean utilisation (pp, like Earth's)"
            out.append(absolute(SOURCE, cluster, stat, want[hi] - want[lo], value, tol, "pp"))
        return out
    out = [
        absolute(
            SOURCE,
            cluster,
            f"{name} of the VCs' mean utilisation %",
            want[name],
            None if got is None else got[name],
            tol,
            "pp",
        )
        for name in _SPREAD
    ]
    for col in ("mean_pct", "median_pct"):
        high = HIGH_PCT * scale
        count = int((frame[col].drop_nulls() >= high).sum()) if frame.height else None
        wanted = sum(p[col] * scale >= high for p in published.values())
        stat = f"VCs with a {col.removesuffix('_pct')} utilisation ≥ {high:g} %"
        out.append(absolute(SOURCE, cluster, stat, float(wanted), count, HIGH_COUNT_TOL, "VC"))
    return out


def fig4_checks(ds: Dataset) -> list[Check]:
    """Fig 4 on the dataset: Earth's published VCs one by one and their spread, the other clusters' spread."""
    published, scale = reference()["earth_may_vc_utilization"], dataset_scale(ds)
    clusters = set(queries.cluster_summary(ds)["id"].to_list())
    out = []
    if FIG4.cluster in clusters:
        frame = fig4_frame(ds, FIG4.cluster, tuple(published))
        out += vc_checks(frame, published, scale) + spread_checks(FIG4.cluster, frame, published, scale, level=True)
    for cluster in [c for c in CLUSTERS if c in clusters and c != FIG4.cluster]:
        out += spread_checks(cluster, fig4_frame(ds, cluster), published, scale, level=False)
    return out
