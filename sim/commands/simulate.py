"""`helios simulate`: run a scheduling policy over a dataset's (or a raw Philly CSV's) GPU jobs and report metrics."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from datetime import datetime
from datetime import time as dtime
from pathlib import Path

import polars as pl

from analytics import schema
from analytics.commands.common import fail, print_json
from sim import engine, metrics, placers, policies, workload
from sim.estimators import ESTIMATORS, EstimateError, predict, quality, read_estimates
from sim.model import SimConfig

PHILLY_CLUSTER = "philly"


def register(subparsers) -> None:
    """Add the `simulate` sub-command to subparsers."""
    p = subparsers.add_parser(
        "simulate",
        help="what-if scheduling simulation (fifo, sjf, srtf, qssf, las) of a dataset's GPU jobs",
        description="Replay the GPU jobs of one cluster through an event-driven scheduler with the chosen policy.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="dataset name under $HELIOS_DATA_DIR")
    src.add_argument("--philly-csv", type=Path, help="raw Philly jobs CSV (timestamp,duration,num_gpus,...,cluster)")
    p.add_argument("--cluster", help="cluster name (default for --philly-csv: philly)")
    p.add_argument("--vc", nargs="+", help="only these VCs (default: all VCs with jobs in the window)")
    p.add_argument("--start", help="window start, 'YYYY-MM-DD[ HH:MM:SS]' (default: first submit)")
    p.add_argument("--end", help="window end, inclusive; a bare date means its last second (default: last submit)")
    p.add_argument("--policy", choices=sorted(policies.POLICIES), default="fifo")
    p.add_argument("--placer", choices=list(placers.PLACERS), default="consolidate")
    p.add_argument("--estimator", choices=list(ESTIMATORS), default="oracle", help="duration predictor for qssf")
    p.add_argument("--estimates", type=Path, help="CSV job_id,predicted_duration_s (overrides --estimator)")
    p.add_argument(
        "--vc-nodes", type=Path, help="CSV vc,nodes overriding the VC sizes (without --vc: simulate only these VCs)"
    )
    p.add_argument("--capacity-date", help="date of the VC sizes taken from the dataset (default: window start)")
    p.add_argument("--capacity-scale", type=float, default=1.0, help="multiply every VC's node count")
    p.add_argument("--load-factor", type=float, default=1.0, help=">1 compresses inter-arrival times")
    p.add_argument("--gpus-per-node", type=int, default=schema.GPUS_PER_NODE)
    p.add_argument("--backfill", action="store_true", help="EASY backfilling for fifo/sjf/qssf")
    p.add_argument("--las-threshold", type=float, default=3600.0, help="LAS queue threshold in GPU-seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", type=Path, help="write jobs.parquet and timeline.parquet into this folder")
    p.set_defaults(func=run_command)


def parse_time(text: str | None, end_of_day: bool = False) -> datetime | None:
    """Parse 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM[:SS]' (a bare date as an end means 23:59:59)."""
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise workload.WorkloadError(f"bad time {text!r}: use YYYY-MM-DD or 'YYYY-MM-DD HH:MM:SS'") from exc
    if end_of_day and len(text.strip()) == 10:
        value = datetime.combine(value.date(), dtime(23, 59, 59))
    return value


def read_philly_csv(path: Path) -> pl.DataFrame:
    """Read the public Philly GPU jobs CSV into canonical job columns (job_id = row order, cluster = 'philly')."""
    try:
        raw = pl.read_csv(path, schema_overrides={"timestamp": pl.String, "cluster": pl.String})
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise workload.WorkloadError(f"{path}: cannot read Philly jobs: {exc}") from exc
    missing = {"timestamp", "duration", "num_gpus", "cluster"} - set(raw.columns)
    if missing:
        raise workload.WorkloadError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    raw = raw.filter(~pl.all_horizontal(pl.all().is_null()))  # blank lines
    df = raw.with_row_index("job_id").select(
        pl.lit(PHILLY_CLUSTER).alias("cluster"),
        pl.col("job_id").cast(pl.Int64),
        pl.col("cluster").alias("vc"),
        pl.col("num_gpus").alias("gpu_num"),
        pl.col("timestamp").str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False).alias("submit_time"),
        pl.col("duration").cast(pl.Int64),
    )
    bad = df.with_row_index("row", offset=2).filter(pl.col("submit_time").is_null()).head(1)
    if bad.height:
        raise workload.WorkloadError(f"{path}: row {bad.get_column('row')[0]}, column 'timestamp': bad time")
    return schema.conform_jobs(df)


def _load(args) -> tuple[pl.DataFrame, pl.DataFrame, str]:
    if args.philly_csv:
        return read_philly_csv(args.philly_csv), schema.empty_vc_gpus(), args.cluster or PHILLY_CLUSTER
    from analytics.store import open_dataset

    ds = open_dataset(args.dataset)
    cluster = args.cluster or (ds.clusters[0] if ds.clusters else None)
    if cluster is None:
        raise workload.WorkloadError(f"dataset {args.dataset!r}: give --cluster")
    jobs = ds.jobs().filter(pl.col("cluster") == cluster).collect()
    return jobs, ds.vc_gpus(), cluster


def _vc_nodes(args, vc_gpus: pl.DataFrame, cluster: str, window: workload.Window) -> dict[str, int]:
    if args.vc_nodes:
        nodes = workload.read_vc_nodes_csv(args.vc_nodes)
    else:
        on = parse_time(args.capacity_date).date() if args.capacity_date else window.start.date()
        nodes = workload.vc_nodes_on(vc_gpus, cluster, on, args.gpus_per_node)
    return workload.scale_nodes(nodes, args.capacity_scale)


def _predictions(args, window: workload.Window):
    if args.estimates:
        return read_estimates(args.estimates, window.jobs), "external"
    return predict(args.estimator, window.history, window.jobs, args.seed), args.estimator


def simulate(args) -> dict:
    """Run the simulation described by args and return the JSON-ready report (writing --out files)."""
    jobs, vc_gpus, cluster = _load(args)
    vcs = args.vc
    if args.vc_nodes and not vcs:  # as the artifact: only the VCs listed in the size file
        listed = set(workload.read_vc_nodes_csv(args.vc_nodes))
        vcs = sorted(listed & set(jobs.filter(pl.col("gpu_num") > 0).get_column("vc").unique().to_list()))
    window = workload.select_window(jobs, cluster, vcs, parse_time(args.start), parse_time(args.end, end_of_day=True))
    vc_nodes = _vc_nodes(args, vc_gpus, cluster, window)
    window = workload.pool_whole_cluster(window, vc_nodes)
    predicted_s, estimator = _predictions(args, window)
    wl = workload.to_workload(window, vc_nodes, predicted_s, args.load_factor)
    config = SimConfig(
        policy=args.policy,
        placer=args.placer,
        gpus_per_node=args.gpus_per_node,
        backfill=args.backfill,
        seed=args.seed,
        las_threshold_gpu_s=args.las_threshold,
    )
    result = engine.run(config, wl)
    records, tl = metrics.job_records(result), metrics.timelines(result)
    summary = metrics.summarize(records, tl)
    report = {
        "policy": args.policy,
        "placer": args.placer,
        "estimator": estimator,
        "cluster": cluster,
        "window": [str(window.start), str(window.end)],
        "jobs": len(wl),
        "unplaceable": result.unplaceable,
        "wall_s": round(result.wall_s, 3),
        "all": summary["all"],
        "vcs": summary["vcs"],
        "vc_nodes": dict(zip(wl.vc_names, wl.vc_nodes, strict=True)),
        "estimator_quality": quality(wl.predicted_s, wl.duration_s.astype(float)),
    }
    baseline = metrics.recorded_records(wl) if args.load_factor == 1.0 else None
    if baseline is not None:
        report["recorded"] = metrics.summarize(baseline)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        records.write_parquet(args.out / "jobs.parquet")
        tl.write_parquet(args.out / "timeline.parquet")
    return report


def _print_table(report: dict) -> None:
    print(
        f"{report['policy']} / {report['placer']} / {report['estimator']}: {report['jobs']} jobs, "
        f"{report['unplaceable']} unplaceable, {report['wall_s']} s"
    )
    print(f"{'vc':<12}{'jobs':>8}{'avg JCT s':>14}{'avg queue s':>14}")
    for vc, row in {**report["vcs"], "all": report["all"]}.items():
        print(f"{vc:<12}{row.get('jobs', 0):>8}{row.get('avg_jct_s') or 0:>14.0f}{row.get('avg_queue_s') or 0:>14.0f}")


def run_command(args: argparse.Namespace) -> int:
    """Entry point of `helios simulate`."""
    started = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = simulate(args)
    except (workload.WorkloadError, EstimateError, ValueError, OSError) as exc:
        return fail(str(exc))
    for w in caught:
        print(f"helios: warning: {w.message}", file=sys.stderr)
    report["total_wall_s"] = round(time.perf_counter() - started, 3)
    if args.json:
        print_json(report)
    else:
        _print_table(report)
    return 0
