"""What a dataset holds, for pickers: its clusters, VCs per cluster, users and first and last submit days.

All of it is computed together once per dataset version into the dataset's derived `catalog` part (by the first
process that asks), so that the pickers of every page read a small file instead of scanning the jobs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from analytics import store
from analytics.store import Dataset

CATALOG_PART = "catalog"
CATALOG_FILE = "catalog.json"


def _options(ds: Dataset) -> dict[str, list]:
    pairs = ds.jobs().select("cluster", "vc").unique().collect()
    users = ds.jobs().select("user").drop_nulls().unique().collect()["user"].sort()
    return {
        "clusters": sorted(pairs["cluster"].unique().to_list()),
        "cluster_vcs": [[c, v] for c, v in pairs.drop_nulls().sort(["cluster", "vc"]).iter_rows()],
        "users": users.to_list(),
    }


def _times(ds: Dataset) -> dict[str, str | None]:
    """The first and last submit day (ISO dates) and the newest record (`YYYY-MM-DD HH:MM`), None without jobs."""
    columns = ("submit_time", "start_time", "end_time")
    row = ds.jobs().select(
        pl.col("submit_time").min().alias("first"),
        pl.col("submit_time").max().alias("last"),
        pl.max_horizontal(pl.col(c).max() for c in columns).alias("newest"),
    )
    first, last, newest = row.collect().row(0)
    return {
        "first_day": first.date().isoformat() if first else None,
        "last_day": last.date().isoformat() if last else None,
        "newest": newest.strftime("%Y-%m-%d %H:%M") if newest else None,
    }


def _gpu_vcs(ds: Dataset) -> dict[str, list[str]]:
    pairs = ds.jobs().filter(pl.col("gpu_num") > 0).select("cluster", "vc").unique().drop_nulls().collect()
    return {c: sorted(part["vc"].to_list()) for (c,), part in pairs.partition_by("cluster", as_dict=True).items()}


def _compute(ds: Dataset) -> dict[str, Any]:
    return {
        "version": ds.version,
        "options": _options(ds),
        **_times(ds),
        "clusters": sorted(ds.jobs().select("cluster").unique().collect()["cluster"].to_list()),
        "gpu_vcs": _gpu_vcs(ds),
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


def cluster_names(ds: Dataset) -> list[str]:
    """The dataset's clusters in the order its metadata lists them, else sorted."""
    return ds.clusters or _catalog(ds)["clusters"]


def gpu_vcs(ds: Dataset, cluster: str) -> list[str]:
    """The sorted VCs of a cluster that have GPU jobs."""
    return _catalog(ds)["gpu_vcs"].get(cluster, [])
