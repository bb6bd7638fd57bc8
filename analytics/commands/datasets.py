"""`helios datasets`: list the stored datasets, or show one dataset's metadata and data-quality report."""

from __future__ import annotations

import argparse

from analytics import store
from analytics.capabilities import ABSENT, DERIVED, REAL, capabilities
from analytics.commands.common import fail, print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `datasets` sub-command."""
    p = subparsers.add_parser(
        "datasets",
        help="list datasets, or show one dataset's metadata and data-quality report",
        description="Without --dataset, list every dataset under $HELIOS_DATA_DIR with its period, job count and "
        "source. With --dataset NAME, print that dataset's metadata: source, clusters, period, row counts, "
        "attribution, which columns are real, derived or absent and which pages work with it, and the "
        "data-quality report of its ingest.",
    )
    p.add_argument("--dataset", metavar="NAME", help="show this dataset's metadata and quality report")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run_datasets)


def _period(meta: dict) -> str:
    period = meta.get("period") or {}
    return f"{period.get('start', '?')} .. {period.get('end', '?')}"


def _jobs(meta: dict) -> str:
    jobs = (meta.get("row_counts") or {}).get("jobs")
    return f"{jobs:,}" if isinstance(jobs, int) else "?"


def _list(as_json: bool) -> int:
    found = store.list_datasets()
    if as_json:
        print_json([{"name": d.name, **d.meta} for d in found])
        return 0
    if not found:
        print(f"no datasets under {store.data_dir()} (build one with `helios demo` or `helios ingest`)")
        return 0
    for d in found:
        print(f"{d.name:24} {_jobs(d.meta):>12} jobs  {_period(d.meta):45} {d.meta.get('source', '?')}")
    return 0


def _issue_lines(quality: dict) -> list[str]:
    lines = [f"rows in {quality.get('rows_in', '?')}, rows stored {quality.get('rows_out', '?')}"]
    for kind, issue in sorted((quality.get("issues") or {}).items()):
        lines.append(f"  {kind}: {issue.get('count', '?')} rows, {issue.get('action', 'flagged')}")
        lines += [f"    e.g. {example}" for example in (issue.get("examples") or [])[:3]]
    return lines


def _show(name: str, as_json: bool) -> int:
    ds = store.open_dataset(name)
    if as_json:
        print_json(ds.meta)
        return 0
    meta = ds.meta
    print(f"dataset {ds.name} (version {ds.version})")
    print(f"source: {meta.get('source', '?')} ({meta.get('format', '?')})")
    print(f"clusters: {', '.join(meta.get('clusters', []))}")
    print(f"period: {_period(meta)}; jobs: {_jobs(meta)}")
    print(f"attribution: {meta.get('attribution', '?')}")
    for line in _capability_lines(capabilities(meta)):
        print(line)
    print("data quality:")
    for line in _issue_lines(meta.get("quality") or {}):
        print(f"  {line}")
    return 0


def _capability_lines(caps: dict) -> list[str]:
    columns = caps["columns"]
    lines = []
    for status in (REAL, DERIVED, ABSENT):
        chosen = [(c, v["note"]) for c, v in columns.items() if v["status"] == status]
        named = [f"{c} ({note})" if status == DERIVED else c for c, note in chosen]
        lines.append(f"{status} columns: {', '.join(named) or 'none'}")
    lines.append("works with:")
    lines += [f"  {page}: {problem or 'yes'}" for page, problem in caps["pages"].items()]
    return lines


def run_datasets(args: argparse.Namespace) -> int:
    """List the datasets, or show one; exit 2 with a one-line error for an unknown dataset."""
    try:
        return _show(args.dataset, args.json) if args.dataset else _list(args.json)
    except store.DatasetError as exc:
        return fail(str(exc))
