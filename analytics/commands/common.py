"""Helpers shared by the command modules: one-line errors and JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

N = TypeVar("N", int, float)


def fail(message: str) -> int:
    """Print a one-line error to stderr and return exit code 2."""
    print(f"helios: error: {message}", file=sys.stderr)
    return 2


def print_json(obj: Any) -> None:
    """Print obj as JSON on stdout."""
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def parsed_number(text: str, parse: Callable[[str], N], expected: str) -> N:
    """text parsed by parse (int or float), or an argparse error saying what was expected."""
    try:
        return parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from exc
