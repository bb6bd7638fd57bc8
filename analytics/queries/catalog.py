"""What a dataset holds, for pickers: its clusters, VCs per cluster, users and first and last submit days."""

from __future__ import annotations

import polars as pl

from analytics.store import Dataset


def filter_options(ds: Dataset) -> dict[str, list]:
    """The sorted clusters, (cluster, VC) pairs and users of a dataset."""
    pairs = ds.jobs().select("cluster", "vc").unique().collect()
    users = ds.jobs().select("user").drop_nulls().unique().collect()["user"].sort()
    return {
        "clusters": sorted(pairs["cluster"].unique().to_list()),
        "cluster_vcs": [[c, v] for c, v in pairs.drop_nulls().sort(["cluster", "vc"]).iter_rows()],
        "users": users.to_list(),
    }


def submit_days(ds: Dataset) -> tuple[str | None, str | None]:
    """The first and last submit day of a dataset as ISO dates (None when it has no jobs)."""
    row = ds.jobs().select(pl.col("submit_time").min().alias("a"), pl.col("submit_time").max().alias("b"))
    first, last = row.collect().row(0)
    return (first.date().isoformat() if first else None, last.date().isoformat() if last else None)


def newest_record(ds: Dataset) -> str | None:
    """The latest submit, start or end time in a dataset as `YYYY-MM-DD HH:MM` (None when it has no jobs)."""
    times = ds.jobs().select(pl.max_horizontal(pl.col(c).max() for c in ("submit_time", "start_time", "end_time")))
    newest = times.collect().item()
    return newest.strftime("%Y-%m-%d %H:%M") if newest else None


def cluster_names(ds: Dataset) -> list[str]:
    """The dataset's clusters in the order its metadata lists them, else sorted."""
    return ds.clusters or sorted(ds.jobs().select("cluster").unique().collect()["cluster"].to_list())


def gpu_vcs(ds: Dataset, cluster: str) -> list[str]:
    """The sorted VCs of a cluster that have GPU jobs."""
    lazy = ds.jobs().filter((pl.col("cluster") == cluster) & (pl.col("gpu_num") > 0)).select("vc").unique()
    return sorted(lazy.collect()["vc"].drop_nulls().to_list())
