"""Helpers shared by the command modules: one-line errors and JSON output."""

from __future__ import annotations

import json
import sys
from typing import Any


def fail(message: str) -> int:
    """Print a one-line error to stderr and return exit code 2."""
    print(f"helios: error: {message}", file=sys.stderr)
    return 2


def print_json(obj: Any) -> None:
    """Print obj as JSON on stdout."""
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
