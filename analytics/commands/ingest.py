"""The `helios ingest` and `helios export` sub-commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analytics import store
from analytics.commands.common import fail, parsed_number
from analytics.export import export_dataset
from analytics.ingest import FORMATS, IngestError, IngestOptions, ingest
from analytics.ingest.alibaba import DEFAULT_ORIGIN
from analytics.ingest.archive import DEFAULT_MAX_MEMBER_BYTES
from analytics.ingest.quality import summary_lines
from analytics.progress import Progress


def run_ingest(args: argparse.Namespace) -> int:
    """Run `helios ingest`: read, validate and write the dataset, then print the quality summary."""
    options = IngestOptions(
        clusters=tuple(args.clusters or ()),
        vc_nodes=args.vc_nodes,
        origin=args.origin,
        max_member_bytes=args.max_member_bytes,
    )
    progress = Progress(0, quiet=args.quiet)
    try:
        dataset = ingest(args.path, args.format, args.name, options, progress)
    except (IngestError, OSError) as exc:
        if progress.step and not args.quiet:
            print(file=sys.stderr)  # end the progress line of the stage that failed
        return fail(str(exc))
    meta = dataset.meta
    clusters = ", ".join(meta["clusters"])
    print(f"dataset {dataset.name}: {meta['row_counts']['jobs']} jobs, clusters {clusters}")
    print(f"period {meta['period']['start']} .. {meta['period']['end']}; written to {dataset.path}")
    print("\n".join(summary_lines(meta["quality"])))
    return 0


def run_export(args: argparse.Namespace) -> int:
    """Run `helios export`: write a dataset in the published Helios CSV layout (or data.zip)."""
    try:
        dataset = store.open_dataset(args.name)
        paths = export_dataset(dataset, args.out, list(args.clusters or ()), zipped=args.zip)
    except (store.DatasetError, ValueError, OSError) as exc:
        return fail(str(exc))
    for path in paths:
        print(path)
    return 0


def _size(text: str) -> int:
    value = parsed_number(text, int, "a number of bytes")
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `ingest` and `export` sub-commands."""
    p = subparsers.add_parser(
        "ingest",
        help="ingest a real trace (Helios data.zip or folder, Philly, Alibaba openb) as a dataset",
        description="Validate a trace and write it as dataset NAME; a failed ingest writes nothing (exit 2).",
    )
    p.add_argument("path", type=Path, metavar="PATH", help="trace file, folder or zip")
    p.add_argument("--format", required=True, choices=list(FORMATS), help="source format")
    p.add_argument("--name", required=True, help="dataset name (an existing one is replaced on success)")
    p.add_argument("--clusters", nargs="+", metavar="C", help="helios: clusters to keep (default all)")
    p.add_argument("--vc-nodes", type=Path, metavar="CSV", help="philly: VC node table (default beside PATH)")
    p.add_argument("--origin", default=DEFAULT_ORIGIN, help=f"alibaba-openb: time of t=0 ({DEFAULT_ORIGIN})")
    p.add_argument(
        "--max-member-bytes",
        metavar="BYTES",
        type=_size,
        default=DEFAULT_MAX_MEMBER_BYTES,
        help="largest uncompressed zip member accepted (default 2 GiB)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run_ingest)
    e = subparsers.add_parser(
        "export",
        help="write a dataset in the published Helios CSV format",
        description="Write <Cluster>/cluster_log.csv and cluster_gpu_number.csv under OUT (or OUT/data.zip).",
    )
    e.add_argument("name", metavar="NAME", help="dataset to export")
    e.add_argument("--out", required=True, type=Path, help="output folder")
    e.add_argument("--clusters", nargs="+", metavar="C", help="clusters to write (default all)")
    e.add_argument("--zip", action="store_true", help="write OUT/data.zip (files under data/) instead")
    e.set_defaults(func=run_export)
