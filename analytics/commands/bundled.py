"""`helios bundled`: build the datasets of the real public traces that ship in data/public (Philly, Alibaba)."""

from __future__ import annotations

import argparse

from analytics.commands.common import derive, fail
from analytics.ingest import IngestError
from analytics.ingest.bundled import BUNDLED, build, missing
from analytics.progress import Progress


def run_bundled(args: argparse.Namespace) -> int:
    """Run `helios bundled`: ingest each bundled trace that is missing (or all of them with --force)."""
    unknown = [n for n in args.names if n not in BUNDLED]
    if unknown:
        return fail(f"unknown bundled dataset {', '.join(unknown)}; expected some of {', '.join(BUNDLED)}")
    wanted = args.names or list(BUNDLED)
    names = wanted if args.force else [n for n in missing() if n in wanted]
    if not names:
        print("bundled datasets present: " + ", ".join(wanted))
        return 0
    for name in names:
        progress = Progress(0, quiet=args.quiet)
        try:
            ds = build(name, progress=progress)
            derive(ds, progress)
        except IngestError as exc:
            return fail(f"bundled dataset {name}: {exc}")
        print(f"dataset {ds.name}: {ds.meta['row_counts']['jobs']:,} jobs from {ds.meta['source']}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `bundled` sub-command."""
    p = subparsers.add_parser(
        "bundled",
        help="build the datasets of the bundled public traces (philly, alibaba) if missing",
        description="Ingest the real public traces shipped in data/public (sources and licences in "
        "data/SOURCES.md) as datasets under $HELIOS_DATA_DIR: 'philly' (82,247 Microsoft Philly GPU jobs "
        "and its 11 VCs) and 'alibaba' (8,152 pods of the Alibaba GPU cluster trace v2023). Datasets "
        "already present are left alone unless --force is given. `make run` and `make test` run this.",
    )
    p.add_argument(
        "names", nargs="*", metavar="NAME", help=f"which to build: any of {', '.join(BUNDLED)} (default all)"
    )
    p.add_argument("--force", action="store_true", help="rebuild even when the dataset exists")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run_bundled)
