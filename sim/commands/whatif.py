"""`helios whatif`: the what-if panel's scenario from the command line (policies, predictor, CES) on any dataset."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from pathlib import Path

import polars as pl

from analytics.commands.common import fail, print_json
from analytics.csv_safety import spreadsheet_safe
from analytics.store import DatasetError
from sim.commands.scenario_options import add_scenario_arguments, base_config
from sim.scenario import TWIN, ScenarioError, open_request, run_request
from sim.scenario.outputs import replayed_jobs

SHOWN = (
    "scheme",
    "jobs",
    "avg_jct_s",
    "median_jct_s",
    "avg_queue_s",
    "median_queue_s",
    "gpu_util_pct",
    "unplaceable",
    "waiting_at_end",
    "avg_queue_x_vs_baseline",
    "gpu_util_pp_vs_baseline",
    "start_order_tau",
)


def register(subparsers) -> None:
    """Add the `whatif` sub-command to subparsers."""
    p = subparsers.add_parser(
        "whatif",
        help="run one what-if scenario (the dashboard's What-if panel) and compare it with what happened",
        description=(
            "Replay the GPU jobs of one cluster's window with the Slurm twin first (the cluster's own scheduler: the "
            "configuration captured with the dataset, else one calibrated from its record), then under each chosen "
            "policy (and optionally CES), exactly as the dashboard's What-if panel does; print each scheme beside "
            "the recorded one, the twin's error against the record, and each policy's change against the twin "
            "with the band of that error. A scenario the dataset cannot support (e.g. CES on a trace without start "
            "times) is refused with the reason."
        ),
    )
    add_scenario_arguments(p)
    p.add_argument(
        "--json",
        action="store_true",
        help="print the summary, the twin's calibration and its replay against the record (and CES metrics) as JSON",
    )
    p.add_argument(
        "--jobs-out",
        type=Path,
        metavar="FILE",
        help="write every scheme's jobs (scheme, job id, user, account, partition, GPUs, submit, start, end, queue "
        "seconds) to FILE: Parquet if it ends in .parquet, else CSV",
    )
    p.set_defaults(func=run_command)


def write_jobs(frame: pl.DataFrame, path: Path) -> None:
    """frame to path (Parquet by extension, else spreadsheet-safe CSV), written beside it and renamed into place."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if path.suffix.lower() == ".parquet":
            frame.write_parquet(tmp)
        else:
            spreadsheet_safe(frame).write_csv(tmp, datetime_format="%Y-%m-%dT%H:%M:%S")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _print_summary(summary: pl.DataFrame) -> None:
    _print_summary_rows(summary.select([c for c in SHOWN if c in summary.columns]))


def _print_accounts(per_account: pl.DataFrame) -> None:
    """Each account's (VC's where the trace has none) mean queue seconds per scheme."""
    if per_account.height == 0:
        return
    table = per_account.pivot(on="scheme", index="account", values="avg_queue_s").sort("account")
    print("mean queue (s) per account:")
    _print_summary_rows(table)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    return "-" if value is None else str(value)


def _print_summary_rows(table: pl.DataFrame) -> None:
    texts = [
        [f"{v:,.1f}" if isinstance(v, float) else ("-" if v is None else str(v)) for v in r] for r in table.iter_rows()
    ]
    widths = [max(len(c), *(len(t[i]) for t in texts)) + 2 for i, c in enumerate(table.columns)]
    print("".join(c.rjust(w) for c, w in zip(table.columns, widths, strict=True)))
    for row in texts:
        print("".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))


def _print_twin(twin: dict | None) -> None:
    """Where the Slurm twin's configuration came from, and its rules."""
    if twin is None:
        return
    print(f"Slurm twin ({twin['source']}):")
    for rule in twin["rules"]:
        print(f"  - {rule}")


def _print_replay(replay: dict | None) -> None:
    """The baseline's replay against the record, its error band, and the warning when it is far from it."""
    if replay is None:
        return
    how = "the Slurm twin" if replay["baseline"] == TWIN else "closest to the record"
    print(f"baseline ({how}): {replay['baseline']}; distances {replay['distance']}")
    for line in replay["lines"]:
        ratio = "" if line["ratio"] is None else f" ({line['ratio']:.2f}x)"
        recorded = "" if line["recorded"] is None else f"recorded {line['recorded']}, "
        print(f"  {line['metric']}: {recorded}replayed {line['replayed']}{ratio}")
    band = replay.get("band")
    if band:
        util = "-" if band["gpu_util_pp"] is None else f"±{band['gpu_util_pp']:.1f} points"
        print(
            f"  error band of every change against it: mean queue (+60 s) ×/÷{band['avg_queue_x']:.2f}, "
            f"mean JCT ×/÷{band['avg_jct_x']:.2f}, utilisation {util}"
        )
    if replay["far"]:
        print(f"  WARNING: the replay is far from the record: {'; '.join(replay['why'])}")


def _stderr_progress(fraction: float, message: str) -> None:
    print(f"[{fraction * 100:5.1f} %] {message}", file=sys.stderr, flush=True)


def run_command(args: argparse.Namespace) -> int:
    """Entry point of `helios whatif`."""
    try:
        request = open_request(base_config(args))
        result = run_request(request, _stderr_progress)
    except (ScenarioError, DatasetError, ValueError, OSError) as exc:
        return fail(str(exc))
    if args.jobs_out is not None:
        try:
            write_jobs(replayed_jobs(result.records, datetime.fromisoformat(result.window[0])), args.jobs_out)
        except OSError as exc:
            return fail(f"{args.jobs_out}: {exc.strerror or exc}")
    ces = (result.ces or {}).get("metrics")
    predictor = {k: v for k, v in result.predictor.items() if k != "density"}
    if args.json:
        print_json(
            {
                "window": result.window,
                "vc_nodes": result.vc_nodes,
                "summary": result.summary.to_dicts(),
                "per_account": result.per_account.to_dicts(),
                "baseline": result.baseline,
                "twin": result.twin,
                "replay": result.replay,
                "predictor": predictor,
                "ces": ces,
            }
        )
        return 0
    print(f"{request.config.cluster}: {result.window[0]} .. {result.window[1]}, {result.jobs:,} GPU jobs")
    _print_summary(result.summary)
    _print_accounts(result.per_account)
    _print_twin(result.twin)
    _print_replay(result.replay)
    for name, value in (ces or {}).items():
        print(f"  ces {name}: {value}")
    return 0
