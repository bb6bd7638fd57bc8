"""Helpers shared by the command modules: one-line errors, JSON output and the derived files of a new dataset."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from analytics import queries, store
from analytics.progress import Progress

N = TypeVar("N", int, float)


def fail(message: str) -> int:
    """Print a one-line error to stderr and return exit code 2."""
    print(f"helios: error: {message}", file=sys.stderr)
    return 2


def print_json(obj: Any) -> None:
    """Print obj as JSON on stdout."""
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def derive(ds: store.Dataset, progress: Progress) -> None:
    """Write ds's derived files (column files, rollups, catalog) as one more progress stage; each cluster's own
    rollups are left to the server (components.server.derive)."""
    progress.total += 1
    with progress.stage(f"deriving the column files, rollups and catalog of {ds.name}"):
        queries.derive(ds, by_cluster=False)


def parsed_number(text: str, parse: Callable[[str], N], expected: str) -> N:
    """text parsed by parse (int or float), or an argparse error saying what was expected."""
    try:
        return parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from exc
