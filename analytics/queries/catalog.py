"""What a dataset holds, for pickers: its clusters, VCs per cluster, users and first and last submit days.

All of it is computed together from the column store once per dataset version into the dataset's derived `catalog`
part (by the first process that asks), so that the pickers of every page read a small file."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from analytics import store
from analytics.queries import colstore
from analytics.store import Dataset

CATALOG_PART = "catalog"
CATALOG_FILE = "catalog.json"
DAY_US = 86_400 * 1_000_000
BUSY_SHARE = 0.1  # a last day with fewer GPU jobs than this share of the cluster's median day is a trailing tail


def _iso_day(us: int | None) -> str | None:
    return colstore.from_us(us).date().isoformat() if us is not None else None


def _options(cols: colstore.JobColumns) -> dict[str, list]:
    n_vcs = len(cols.cats["vc"].names)
    pairs = np.flatnonzero(np.bincount(cols.pair_code, minlength=len(cols.cats["cluster"].names) * n_vcs))
    clusters, vcs = cols.cats["cluster"].names, cols.cats["vc"].names
    return {
        "clusters": list(clusters),
        "cluster_vcs": [[clusters[p // n_vcs], vcs[p % n_vcs]] for p in pairs.tolist()],
        "users": list(cols.cats["user"].names),
    }


def _times(cols: colstore.JobColumns) -> dict[str, str | None]:
    """The first and last submit day (ISO dates) and the newest record (`YYYY-MM-DD HH:MM`), None without jobs."""
    if not cols.n_rows:
        return {"first_day": None, "last_day": None, "newest": None}
    started = cols.start_us[cols.has_start]
    # time_range's last time is each cluster's latest end_time (else submit_time): with the latest submit and start,
    # the latest of all three recorded times.
    newest = max(int(cols.submit_us.max()), *(hi for _, hi in cols.time_range.values()))
    newest = max(newest, int(started.max())) if started.size else newest
    return {
        "first_day": _iso_day(int(cols.submit_us.min())),
        "last_day": _iso_day(int(cols.submit_us.max())),
        "newest": colstore.from_us(newest).strftime("%Y-%m-%d %H:%M"),
    }


def _gpu_vcs(cols: colstore.JobColumns) -> dict[str, list[str]]:
    n_vcs = len(cols.cats["vc"].names)
    used = np.bincount(cols.pair_code[cols.gpu_num > 0], minlength=len(cols.cats["cluster"].names) * n_vcs)
    out: dict[str, list[str]] = {}
    for pair in np.flatnonzero(used).tolist():
        out.setdefault(cols.cats["cluster"].names[pair // n_vcs], []).append(cols.cats["vc"].names[pair % n_vcs])
    return out


def _compute(ds: Dataset) -> dict[str, Any]:
    """ds's catalog, from its column store."""
    cols = colstore.columns(ds)
    return {
        "version": ds.version,
        "options": _options(cols),
        **_times(cols),
        "clusters": list(cols.cats["cluster"].names),
        "gpu_vcs": _gpu_vcs(cols),
    }


def _write(ds: Dataset, folder: Path) -> None:
    (folder / CATALOG_FILE).write_text(json.dumps(_compute(ds)))


def write(ds: Dataset) -> Path | None:
    """Write ds's catalog part (once per version); its folder, or None when the dataset's folder cannot be written."""
    return store.derived_part(ds, CATALOG_PART, lambda folder: _write(ds, folder))


def _catalog(ds: Dataset) -> dict[str, Any]:
    """ds's catalog, read from its derived part (written first when absent), else computed."""
    folder = write(ds)
    if folder is not None:
        found = json.loads((folder / CATALOG_FILE).read_text())
        if found["version"] == ds.version:
            return found
    return _compute(ds)


def filter_options(ds: Dataset) -> dict[str, list]:
    """The sorted clusters, (cluster, VC) pairs and users of a dataset."""
    return _catalog(ds)["options"]


def submit_days(ds: Dataset) -> tuple[str | None, str | None]:
    """The first and last submit day of a dataset as ISO dates (None when it has no jobs)."""
    found = _catalog(ds)
    return found["first_day"], found["last_day"]


def newest_record(ds: Dataset) -> str | None:
    """The latest submit, start or end time in a dataset as `YYYY-MM-DD HH:MM` (None when it has no jobs)."""
    return _catalog(ds)["newest"]


def last_submit(ds: Dataset) -> datetime | None:
    """The latest submit time in a dataset (None when it has no jobs): where its relative time ranges end."""
    cols = colstore.columns(ds)
    return colstore.from_us(int(cols.submit_us.max())) if cols.n_rows else None


def recent_days(ds: Dataset, cluster: str, n_days: int) -> tuple[str | None, str | None]:
    """The first and last of the n_days submit days (ISO dates) that end on the cluster's last busy day: its last day
    with at least BUSY_SHARE of its median daily GPU jobs (a trace's sparse tail is passed over); None without GPU
    jobs."""
    cols = colstore.columns(ds)
    names = cols.cats["cluster"].names
    if cluster not in names:
        return None, None
    gpu = (cols.cats["cluster"].codes == names.index(cluster)) & (cols.gpu_num > 0)
    days, per_day = np.unique(cols.submit_us[gpu] // DAY_US, return_counts=True)
    if not days.size:
        return None, None
    last_day = int(days[per_day >= BUSY_SHARE * np.median(per_day)].max())
    return _iso_day((last_day - n_days + 1) * DAY_US), _iso_day(last_day * DAY_US)


def cluster_names(ds: Dataset) -> list[str]:
    """The dataset's clusters in the order its metadata lists them, else sorted."""
    return ds.clusters or _catalog(ds)["clusters"]


def gpu_vcs(ds: Dataset, cluster: str) -> list[str]:
    """The sorted VCs of a cluster that have GPU jobs."""
    return _catalog(ds)["gpu_vcs"].get(cluster, [])
