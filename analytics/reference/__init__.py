"""The published Helios numbers (summary table, figure values, Earth's VC capacities): the files of this folder.

Lookup order: `$HELIOS_SHARED_DIR/{spec,data}/` when that variable is set, else the copies in analytics/reference/.
"""

from __future__ import annotations

import csv
import json
import os
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl

from analytics import schema

CLUSTERS: tuple[str, ...] = ("Venus", "Earth", "Saturn", "Uranus")
STATE_GPU_BUCKETS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)  # Fig 7b: exactly 1..32 GPUs, then >= 64
REFERENCE_DIR = Path(__file__).resolve().parent
_SUBDIR = {"helios_reference.json": "spec", "helios_cluster_summary.csv": "data", "earth_vc_gpu_number.csv": "data"}


def reference_path(filename: str) -> Path:
    """Path of one reference file: under `$HELIOS_SHARED_DIR` when set, else the in-repo copy."""
    shared = os.environ.get("HELIOS_SHARED_DIR")
    if shared:
        path = Path(shared) / _SUBDIR[filename] / filename
        if not path.is_file():
            raise FileNotFoundError(f"{path}: reference file missing (HELIOS_SHARED_DIR={shared})")
        return path
    return REFERENCE_DIR / filename


@cache
def _reference_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def reference() -> dict[str, Any]:
    """The figure values of helios_reference.json (see its 'about' field for units and definitions)."""
    return _reference_json(reference_path("helios_reference.json"))


def summary_rows() -> dict[str, dict[str, float]]:
    """The published per-cluster summary (helios_cluster_summary.csv) keyed by id, values as floats."""
    path = reference_path("helios_cluster_summary.csv")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    out: dict[str, dict[str, float]] = {}
    for line_no, row in enumerate(rows, start=2):
        key = row.pop("id")
        try:
            out[key] = {k: float(v) for k, v in row.items()}
        except ValueError as exc:
            raise ValueError(f"{path}: row {line_no}: {exc}") from exc
    return out


def earth_vc_gpus() -> pl.DataFrame:
    """Earth's real daily GPUs per VC as a long table (cluster, vc, date, gpus), zero-GPU days included."""
    path = reference_path("earth_vc_gpu_number.csv")
    wide = pl.read_csv(path, try_parse_dates=False)
    if "date" not in wide.columns:
        raise ValueError(f"{path}: row 1: column 'date' missing")
    vcs = [c for c in wide.columns if c not in ("date", "total")]
    long = wide.select(["date", *vcs]).unpivot(index="date", variable_name="vc", value_name="gpus")
    long = long.with_columns(
        pl.lit("Earth").alias("cluster"),
        pl.col("date").str.to_date("%Y-%m-%d"),
    )
    return schema.conform_vc_gpus(long).sort(["vc", "date"])


def period_days() -> list[date]:
    """The 181 days of the trace, 2020-04-01 .. 2020-09-28."""
    return pl.date_range(date(2020, 4, 1), date(2020, 9, 28), "1d", eager=True).to_list()
