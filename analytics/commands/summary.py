"""`helios summary` (the per-cluster summary table) and `helios query` (any single study query) on a dataset."""

from __future__ import annotations

import argparse
import inspect
import sys
from datetime import datetime

import polars as pl

from analytics import db, queries, store
from analytics.commands.common import fail, print_json
from analytics.filters import JOB_KINDS, SUBMITTED, TIME_MODES, JobFilter


def _add_filter_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default=store.DEFAULT_DATASET, help="dataset name (default %(default)s)")
    g = p.add_argument_group("filters (repeat a flag to select several values)")
    g.add_argument("--cluster", action="append", default=[], metavar="NAME", help="keep this cluster")
    g.add_argument("--vc", action="append", default=[], metavar="VC", help="keep this virtual cluster")
    g.add_argument("--start", metavar="WHEN", help="window start (YYYY-MM-DD[ HH:MM:SS]); starts series")
    g.add_argument("--end", metavar="WHEN", help="window end, exclusive (YYYY-MM-DD[ HH:MM:SS]); ends series")
    g.add_argument(
        "--time",
        choices=TIME_MODES,
        default=SUBMITTED,
        help="jobs submitted in the window (default), or running in it: started before its end and ended (end time, "
        "else start + duration) after its start",
    )
    g.add_argument("--user", action="append", default=[], metavar="USER", help="keep this user")
    g.add_argument("--state", action="append", default=[], metavar="STATE", help="keep this final state")
    g.add_argument("--kind", choices=JOB_KINDS, default="all", help="GPU jobs (gpu_num > 0), CPU jobs or all")
    g.add_argument("--gpu-min", type=int, metavar="N", help="at least N GPUs")
    g.add_argument("--gpu-max", type=int, metavar="N", help="at most N GPUs")


def filter_from_args(args: argparse.Namespace) -> JobFilter:
    """Build the JobFilter named by the command-line filter flags (raises ValueError on bad values)."""
    return JobFilter(
        clusters=tuple(args.cluster),
        vcs=tuple(args.vc),
        start=args.start,
        end=args.end,
        users=tuple(args.user),
        states=tuple(args.state),
        job_kind=args.kind,
        gpu_min=args.gpu_min,
        gpu_max=args.gpu_max,
        time_mode=args.time,
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `summary` and `query` sub-commands."""
    p = subparsers.add_parser(
        "summary",
        help="per-cluster summary table (the columns of helios_cluster_summary.csv)",
        description="Print one row per cluster and a 'total' row: job counts, mean/median run and queue times, "
        "GPUs per job, final-state rates and GPU time per final state.",
    )
    _add_filter_args(p)
    p.add_argument("--json", action="store_true", help="print a JSON list of row objects instead of a table")
    p.set_defaults(func=run_summary)

    p = subparsers.add_parser(
        "query",
        help="print one study query as a table, JSON or CSV",
        description=f"Run one study query. Names: {', '.join(queries.QUERIES)}. A query the dataset cannot answer "
        "(its trace lacks the columns or the GPU capacity it needs) exits 2 with the reason the pages show ('Not in "
        "this trace: ...'); cluster_summary and monthly_jobs leave the columns the trace lacks empty and name them on "
        "stderr.",
    )
    p.add_argument("name", choices=list(queries.QUERIES), metavar="NAME", help="query name (see above)")
    _add_filter_args(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print a JSON list of row objects")
    out.add_argument("--csv", action="store_true", help="print CSV")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a query option, e.g. kind=cpu (duration_cdf, queue_cdf), weight=gpu_time (gpu_num_cdf), "
        "metric=cpu_only_time (user_concentration), every=1d (utilization_resampled)",
    )
    p.set_defaults(func=run_query)


def _options(name: str, pairs: list[str]) -> dict[str, str]:
    allowed = [p for p in inspect.signature(queries.QUERIES[name]).parameters if p not in ("ds", "flt")]
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in allowed:
            expected = ", ".join(f"{a}=..." for a in allowed) or "none"
            raise ValueError(f"bad --option {pair!r} for query {name}; expected one of: {expected}")
        out[key] = value
    return out


def _records(df: pl.DataFrame) -> list[dict]:
    return [
        {k: v.isoformat(sep=" ") if isinstance(v, datetime) else v for k, v in row.items()} for row in df.to_dicts()
    ]


def _print_table(df: pl.DataFrame) -> None:
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=1000, tbl_hide_dataframe_shape=True, fmt_str_lengths=80):
        print(df)


def _print_csv(df: pl.DataFrame) -> None:
    lists = [c for c, t in df.schema.items() if isinstance(t, pl.List)]
    df.with_columns(pl.col(lists).list.join(";")).write_csv(sys.stdout)


def _run(args: argparse.Namespace, name: str, options: list[str]) -> tuple[pl.DataFrame | None, int]:
    """The query's answer, or None and the exit code of a one-line error (also when the dataset lacks what the
    query needs: the pages' "Not in this trace" sentence, never rows of zeros)."""
    try:
        flt = filter_from_args(args)
        kwargs = _options(name, options)
        ds = store.open_dataset(args.dataset)
        missing = queries.not_in_trace(ds, name, kwargs)
        if missing:
            return None, fail(f"{name} on dataset {ds.name}: {missing}")
        return queries.QUERIES[name](ds, flt, **kwargs), 0
    except (ValueError, store.DatasetError, db.QueryError) as exc:
        return None, fail(str(exc))


def _note_left_empty(args: argparse.Namespace, name: str) -> None:
    """Name on stderr the columns of the answer left empty because the dataset's trace lacks them."""
    empty = queries.left_empty(store.open_dataset(args.dataset), name)
    if empty:
        print(f"helios: note: left empty: {empty}", file=sys.stderr)


def run_summary(args: argparse.Namespace) -> int:
    """Print the per-cluster summary table (or JSON with --json)."""
    df, code = _run(args, "cluster_summary", [])
    if df is None:
        return code
    if args.json:
        print_json(_records(df))
    else:
        _print_table(df)
    _note_left_empty(args, "cluster_summary")
    return 0


def run_query(args: argparse.Namespace) -> int:
    """Print one study query as a table, JSON (--json) or CSV (--csv)."""
    df, code = _run(args, args.name, args.option)
    if df is None:
        return code
    if args.json:
        print_json(_records(df))
    elif args.csv:
        _print_csv(df)
    else:
        _print_table(df)
    _note_left_empty(args, args.name)
    return 0
