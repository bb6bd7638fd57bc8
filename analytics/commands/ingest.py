"""The `helios ingest` and `helios export` sub-commands."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from analytics import store
from analytics.capabilities import ABSENT, capacity_disabled, column_status
from analytics.commands.common import derive, fail, parsed_number
from analytics.commands.scheduler import add_slurm_config_arg, print_scheduler
from analytics.export import export_dataset
from analytics.ingest import FORMATS, IngestError, IngestOptions, append, ingest
from analytics.ingest.alibaba import DEFAULT_ORIGIN
from analytics.ingest.archive import DEFAULT_MAX_MEMBER_BYTES
from analytics.ingest.helios import LOG_COLUMNS
from analytics.ingest.mapped_csv import ALIASES, parse_mapping
from analytics.ingest.quality import rejections, summary_lines
from analytics.ingest.slurm import FIELD_LISTS, SACCT_FIELDS, VC_FROM, sacct_fields
from analytics.progress import Progress

SALT_VARIABLE = "HELIOS_ANON_SALT"
SACCT_EXAMPLE = (
    f"sacct --allusers --parsable2 --starttime 2026-01-01 --endtime now+7days --format={','.join(SACCT_FIELDS)} "
    "> jobs.txt"
)
XDMOD_EXAMPLE = (
    "sacct --allusers --parsable2 --noheader --allocations --duplicates --starttime 2026-01-01 --endtime now "
    f"--format={','.join(FIELD_LISTS['xdmod'])} > jobs.txt, then --sacct-fields xdmod"
)


def anonymise_salt(wanted: bool) -> str | None:
    """The pseudonym salt from $HELIOS_ANON_SALT when --anonymise is given (raises IngestError when unset)."""
    if not wanted:
        return None
    salt = os.environ.get(SALT_VARIABLE, "")
    if not salt:
        raise IngestError(
            f"--anonymise needs a secret salt in ${SALT_VARIABLE} (keep it private and the same for every refresh, "
            "so that a user keeps one pseudonym)"
        )
    return salt


def column_map(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """The CSV column mapping of --map and --map-file (the file's lines first)."""
    texts = []
    if args.map_file:
        try:
            texts.append(args.map_file.read_text())
        except OSError as exc:
            raise IngestError(f"{args.map_file}: cannot read the mapping file ({exc.strerror})") from exc
    texts += args.map or []
    return parse_mapping("\n".join(texts)) if texts else ()


def ingest_options(args: argparse.Namespace) -> IngestOptions:
    """The IngestOptions of the ingest (or sync) flags."""
    return IngestOptions(
        clusters=tuple(getattr(args, "clusters", None) or ()),
        vc_nodes=getattr(args, "vc_nodes", None),
        origin=getattr(args, "origin", DEFAULT_ORIGIN),
        max_member_bytes=getattr(args, "max_member_bytes", DEFAULT_MAX_MEMBER_BYTES),
        cluster=args.cluster or "",
        anonymise_salt=anonymise_salt(args.anonymise),
        capacity=args.capacity,
        vc_from=args.vc_from,
        sacct_fields=sacct_fields(args.sacct_fields) if getattr(args, "sacct_fields", None) else (),
        column_map=column_map(args) if hasattr(args, "map") else (),
        slurm_config=args.slurm_config,
    )


def print_capacity_note(meta: dict) -> None:
    """Say which views a dataset without capacity disables."""
    disabled = capacity_disabled(meta)
    if disabled:
        print("no GPU capacity given (--capacity): disabled views: " + "; ".join(disabled))


def print_refresh(result: store.Upsert) -> None:
    """Print what a refresh did and what the dataset holds now."""
    meta = result.dataset.meta
    months = ", ".join(result.months_rewritten) or "none"
    print(
        f"dataset {result.dataset.name}: {result.added} added, {result.updated} updated, {result.unchanged} unchanged"
    )
    print(f"months rewritten: {months}; now {meta['row_counts']['jobs']} jobs, version {result.dataset.version}")


def print_rejections(quality: dict | None) -> None:
    """Say which rows a batch's report rejected, each reason with its count and first examples (nothing if none)."""
    why = rejections(quality) if quality else ""
    if why:
        print(f"rows rejected: {why}")


def run_ingest(args: argparse.Namespace) -> int:
    """Run `helios ingest`: read, validate and write (or --append to) the dataset, then print the quality summary."""
    progress = Progress(0, quiet=args.quiet)
    try:
        options = ingest_options(args)
        if args.append:
            result = append(args.path, args.format, args.name, options, progress)
            dataset = result.dataset
        else:
            dataset = ingest(args.path, args.format, args.name, options, progress)
        derive(dataset, progress)
    except (IngestError, OSError) as exc:
        if progress.step and not args.quiet:
            print(file=sys.stderr)  # end the progress line of the stage that failed
        return fail(str(exc))
    meta = dataset.meta
    quality = meta["quality"]
    if args.append:
        print_refresh(result)
        quality = result.quality or quality  # the batch's report: a refresh that changes nothing does not store it
    else:
        clusters = ", ".join(meta["clusters"])
        print(f"dataset {dataset.name}: {meta['row_counts']['jobs']} jobs, clusters {clusters}")
    print(
        f"period {meta['period']['start']} .. {meta['period']['end']}; written to {dataset.path.parent / dataset.name}"
    )
    print_capacity_note(meta)
    if args.slurm_config:
        print_scheduler(meta)
    print("\n".join(summary_lines(quality)))
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
    absent = absent_published_columns(dataset.meta)
    if absent:
        print(f"helios: note: left empty, not in this trace: {absent}", file=sys.stderr)
    return 0


def absent_published_columns(meta: dict) -> str:
    """The published columns an export leaves empty because the dataset lacks them, with why ('' when none)."""
    status = column_status(meta)
    return "; ".join(f"{c} ({status[c]['note']})" for c in LOG_COLUMNS if status[c]["status"] == ABSENT)


def _size(text: str) -> int:
    value = parsed_number(text, int, "a number of bytes")
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def add_own_cluster_args(p: argparse.ArgumentParser) -> None:
    """The flags of one's own cluster's data (Slurm, CSV): cluster name, capacity, VC source, pseudonyms."""
    g = p.add_argument_group("your own cluster (--format slurm or csv)")
    g.add_argument(
        "--cluster",
        metavar="NAME",
        help="cluster name (default: slurm's Cluster column, else 'slurm'; csv's mapped column, else 'cluster'); a "
        "job is its cluster and id, so give the same name on every refresh",
    )
    g.add_argument(
        "--capacity",
        type=Path,
        metavar="FILE",
        help="GPUs of each partition, for utilisation and the what-if simulator: the output of `scontrol show nodes "
        "-o`, of `sinfo -N -o '%%N|%%P|%%G'`, or a CSV vc,gpus (vc '*' = whole cluster); without it those views "
        "are disabled",
    )
    g.add_argument(
        "--vc-from",
        choices=VC_FROM,
        default="partition",
        help="slurm: the virtual cluster is the job's partition (default) or its account",
    )
    g.add_argument(
        "--anonymise",
        action="store_true",
        help=f"replace user names by salted SHA-256 pseudonyms (salt from ${SALT_VARIABLE}) and drop job names, "
        "to share the dashboard outside the team",
    )
    add_slurm_config_arg(g)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `ingest` and `export` sub-commands."""
    p = subparsers.add_parser(
        "ingest",
        help="ingest a trace (Helios, Philly, Alibaba openb, Slurm sacct export, any CSV) as a dataset",
        description="Validate a trace and write it as dataset NAME; a failed ingest writes nothing (exit 2). "
        f"A Slurm export: {SACCT_EXAMPLE}. One without a header line, as Open XDMoD takes it: {XDMOD_EXAMPLE}. "
        "With --append, a newer export refreshes the dataset.",
    )
    p.add_argument("path", type=Path, metavar="PATH", help="trace file, folder or zip")
    p.add_argument("--format", required=True, choices=list(FORMATS), help="source format")
    p.add_argument("--name", required=True, help="dataset name (replaced on success, or refreshed with --append)")
    p.add_argument(
        "--append",
        action="store_true",
        help="add new jobs and update changed ones (same cluster and job id) in dataset NAME instead of replacing "
        "it, rewriting only the months touched; creates NAME when absent; slurm, or csv with an id column",
    )
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
    add_own_cluster_args(p)
    lists = "; ".join(f"{k}: {','.join(v)}" for k, v in FIELD_LISTS.items())
    p.add_argument(
        "--sacct-fields",
        metavar="LIST|" + "|".join(FIELD_LISTS),
        help="slurm: the export has no header line (sacct --noheader); its fields, in order: a list as given to "
        f"sacct --format (',' or '|' between names) or one of Open XDMoD's lists ({lists})",
    )
    aliases = ", ".join(f"{a}={t}" for a, t in ALIASES.items())
    p.add_argument(
        "--map",
        action="append",
        metavar="FIELD=COLUMN,...",
        help="csv: which CSV column holds each schema column (vc, gpu_num, submit_time and duration or start and "
        f"end are required; short names {aliases}), e.g. --map submit=SubmitTime,gpus=ngpu,vc=queue,duration=run_s",
    )
    p.add_argument("--map-file", type=Path, metavar="FILE", help="csv: the mapping as FIELD=COLUMN lines")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run_ingest)
    e = subparsers.add_parser(
        "export",
        help="write a dataset in the published Helios CSV format",
        description="Write <Cluster>/cluster_log.csv and cluster_gpu_number.csv under OUT (or OUT/data.zip). A "
        "published column the dataset lacks is left empty (never 0) and named on stderr.",
    )
    e.add_argument("name", metavar="NAME", help="dataset to export")
    e.add_argument("--out", required=True, type=Path, help="output folder")
    e.add_argument("--clusters", nargs="+", metavar="C", help="clusters to write (default all)")
    e.add_argument("--zip", action="store_true", help="write OUT/data.zip (files under data/) instead")
    e.set_defaults(func=run_export)
