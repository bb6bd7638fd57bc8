"""`helios fidelity`: compare a dataset with the published Helios statistics."""

from __future__ import annotations

import argparse

from analytics import store
from analytics.commands.common import fail, print_json
from analytics.db import QueryError
from analytics.fidelity import checks_to_json, fidelity_checks, format_table


def run_fidelity(args: argparse.Namespace) -> int:
    """Run `helios fidelity`: compare the dataset with the published Helios numbers; exit 1 if any check fails."""
    try:
        ds = store.open_dataset(args.dataset)
        checks = fidelity_checks(ds)
    except (store.DatasetError, QueryError, OSError, ValueError) as exc:
        return fail(str(exc))
    report = checks_to_json(ds, checks)
    if args.json:
        print_json(report)
    else:
        print(f"fidelity of dataset {ds.name} (scale {report['scale']:g}) against the published Helios numbers")
        print(format_table(checks))
    return 0 if report["passed"] else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `fidelity` sub-command."""
    f = subparsers.add_parser(
        "fidelity",
        help="compare a dataset with the published Helios statistics (exit 1 if any check fails)",
        description=(
            "Print each published Helios statistic beside the dataset's value, the difference, the tolerance and a "
            "verdict. Exit code 0 when every check passes, 1 otherwise, 2 on errors."
        ),
    )
    f.add_argument("--dataset", default=store.DEFAULT_DATASET, help=f"dataset name (default {store.DEFAULT_DATASET})")
    f.add_argument("--json", action="store_true", help="print the report as JSON")
    f.set_defaults(func=run_fidelity)
