"""Compare a dataset with the published Helios statistics (`helios fidelity`): one check per statistic with its
tolerance, verdict and the figure or table it comes from (every check is listed in docs/fidelity.md).

Dataset values come from analytics.queries; published values from helios_reference.json (analytics.reference).
Counts and utilisation are compared after scaling the published values by the dataset's generator scale (1 for real
traces).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from analytics.fidelity.base import Check, dataset_scale
from analytics.fidelity.capacity import capacity_checks, claims_capacity_consistency, peak_excess_gpus
from analytics.fidelity.levels import diurnal_checks, monthly_level_checks, shape_checks
from analytics.fidelity.summary import curve_checks, state_checks, summary_checks, user_checks
from analytics.fidelity.vcs import fig4_checks
from analytics.store import Dataset

__all__ = [
    "Check",
    "capacity_checks",
    "checks_to_json",
    "claims_capacity_consistency",
    "dataset_scale",
    "fidelity_checks",
    "format_table",
    "peak_excess_gpus",
]


def fidelity_checks(ds: Dataset) -> list[Check]:
    """Every fidelity check of the dataset against the published Helios numbers (plus the capacity check when the
    dataset's start times claim capacity consistency)."""
    capacity = capacity_checks(ds) if claims_capacity_consistency(ds) else []
    return [
        *summary_checks(ds),
        *curve_checks(ds),
        *state_checks(ds),
        *user_checks(ds),
        *monthly_level_checks(ds),
        *diurnal_checks(ds),
        *shape_checks(ds),
        *fig4_checks(ds),
        *capacity,
    ]


def checks_to_json(ds: Dataset, checks: list[Check]) -> dict[str, Any]:
    """JSON-ready report: dataset, overall verdict, counts and every check."""
    failed = [c for c in checks if not c.passed]
    return {
        "dataset": ds.name,
        "scale": dataset_scale(ds),
        "passed": not failed,
        "checks_total": len(checks),
        "checks_failed": len(failed),
        "checks": [asdict(c) for c in checks],
    }


def format_table(checks: list[Check]) -> str:
    """Plain-text table of the checks: source, cluster, statistic, published, dataset, difference, tolerance and
    verdict."""
    header = ("source", "cluster", "statistic", "published", "dataset", "diff", "tolerance", "ok")
    rows = [header] + [
        (
            c.source,
            c.cluster,
            c.statistic,
            _num(c.published),
            _num(c.value),
            _num(c.difference),
            c.tolerance,
            _verdict(c),
        )
        for c in checks
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) if i < 3 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    failed = sum(not c.passed for c in checks)
    lines.append(f"{len(checks) - failed} of {len(checks)} checks pass" + (f"; {failed} FAIL" if failed else ""))
    return "\n".join(lines)


def _verdict(check: Check) -> str:
    return "pass" if check.passed else "FAIL"


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1e6:
        return f"{value:.4g}"
    return f"{value:.3f}".rstrip("0").rstrip(".") if value != int(value) else f"{int(value)}"
