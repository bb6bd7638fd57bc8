"""The `helios` command line: a thin dispatcher over the command modules of analytics/ and sim/."""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys

# Polars' allocator (jemalloc) keeps freed pages for seconds by default; an ingest frees and allocates gigabytes
# cluster after cluster, so give them back at once. Set before Polars loads (the command modules load it); an
# explicit setting in the environment wins.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")

# Each module exposes `register(subparsers)`, which adds one or more sub-commands whose `func(args) -> int` runs them.
COMMAND_MODULES: tuple[str, ...] = (
    "analytics.commands.ingest",
    "analytics.commands.bundled",
    "analytics.commands.sync",
    "sim.commands.demo",
    "analytics.commands.fidelity",
    "analytics.commands.summary",
    "analytics.commands.datasets",
    "sim.commands.simulate",
    "sim.commands.ces",
    "sim.commands.whatif",
    "sim.commands.sweep",
    "components.commands.serve",
    "components.commands.user",
)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every registered sub-command."""
    parser = argparse.ArgumentParser(
        prog="helios",
        description=(
            "Helios Dashboard: explore deep-learning GPU datacenter traces and run what-if scheduling "
            "(QSSF) and energy (CES) experiments. Datasets live in $HELIOS_DATA_DIR (default ./data)."
        ),
        epilog="Run 'helios COMMAND --help' for the options of one command.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod_name in COMMAND_MODULES:
        importlib.import_module(mod_name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse argv and run the chosen sub-command, returning its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno != errno.EPIPE and "os error 32" not in str(exc):
            raise
        # The reader of our output went away (e.g. `| head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
