"""The published Helios numbers: every value in one file, helios_reference.json (the summary table and the figure
values); beside it Earth's real daily VC capacities, an input of the synthetic trace, and the windows of the figures.

Lookup order: `$HELIOS_SHARED_DIR/{spec,data}/` when that variable is set, else the copies in analytics/reference/.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import date, datetime
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl

from analytics import schema

CLUSTERS: tuple[str, ...] = ("Venus", "Earth", "Saturn", "Uranus")
STATE_GPU_BUCKETS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)  # Fig 7b: exactly 1..32 GPUs, then >= 64
REFERENCE_DIR = Path(__file__).resolve().parent
_SUBDIR = {"helios_reference.json": "spec", "earth_vc_gpu_number.csv": "data"}


@dataclass(frozen=True)
class FigureWindow:
    """Where a per-VC figure of the paper looks: cluster, [start, end), days left out, and how many VCs (largest)."""

    cluster: str
    start: datetime
    end: datetime
    excluded_days: tuple[date, ...]
    top_vcs: int

    def exclude_days_text(self) -> str:
        """The excluded days as the comma-separated YYYY-MM-DD text the vc_utilization query takes."""
        return ",".join(d.isoformat() for d in self.excluded_days)


# Fig 4: Earth, May 2020 without May 10 (spec helios.md, Fig 4 row), the 10 largest VCs.
FIG4 = FigureWindow("Earth", datetime(2020, 5, 1), datetime(2020, 6, 1), (date(2020, 5, 10),), 10)


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
    """The published per-cluster summary (helios_cluster_summary.csv, the 'summary' of helios_reference.json) keyed by
    id (the four clusters and 'total'), values as floats."""
    return {cid: {k: float(v) for k, v in row.items()} for cid, row in reference()["summary"].items()}


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
