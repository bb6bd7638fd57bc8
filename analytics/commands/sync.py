"""`helios sync slurm`: export the recent jobs with sacct (and the nodes with scontrol) and refresh a dataset."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from analytics.commands.common import derive, fail
from analytics.commands.ingest import (
    add_own_cluster_args,
    ingest_options,
    print_capacity_note,
    print_refresh,
    print_rejections,
)
from analytics.commands.scheduler import print_scheduler
from analytics.ingest import IngestError, IngestOptions, append
from analytics.ingest.parse import TIME_FORMAT
from analytics.ingest.slurm import sacct_command
from analytics.ingest.slurm_conf import SLURM_CONFIG_COMMANDS
from analytics.progress import Progress

SCHEDULERS = ("slurm",)
SINCE_UNITS_S = {"m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
DEFAULT_SINCE = "2d"
COMMAND_TIMEOUT_S = 600.0
SLURM_ENV = {"SLURM_TIME_FORMAT": "standard"}  # ISO times whatever the site's default
CAPTURE_SOURCE = "scontrol and sacctmgr (helios sync slurm)"


def since_time(text: str, now: datetime) -> datetime:
    """The start of the export window: `now` minus `2d`, `12h`, `30m`, `1w`, or a date `YYYY-MM-DD[THH:MM:SS]`."""
    relative = re.fullmatch(r"(\d+)([mhdw])", text.strip())
    if relative:
        return now - timedelta(seconds=int(relative.group(1)) * SINCE_UNITS_S[relative.group(2)])
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise IngestError(f"--since {text!r}: expected a duration like 2d, 12h, 30m, 1w or a date YYYY-MM-DD") from None


def run_tool(command: list[str], out: Path) -> None:
    """Run a Slurm command with ISO times, its output written to out (raises IngestError when it fails)."""
    program = shutil.which(command[0])
    if program is None:
        raise IngestError(
            f"{command[0]} not found on PATH: run helios sync on a machine with the Slurm client commands, or "
            "export with sacct elsewhere and refresh with helios ingest --format slurm --append"
        )
    env = {**os.environ, **SLURM_ENV}
    with out.open("w") as fh:
        try:
            done = subprocess.run(
                [program, *command[1:]],
                stdout=fh,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                timeout=COMMAND_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise IngestError(f"{command[0]} did not answer within {COMMAND_TIMEOUT_S:g} s") from None
    if done.returncode:
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise IngestError(f"{' '.join(command)} exited with {done.returncode}: {reason}")


def node_capacity(folder: Path, quiet: bool) -> Path | None:
    """`scontrol show nodes -o` written to a file in folder, or None (with a note) when it cannot run."""
    path = folder / "nodes.txt"
    try:
        run_tool(["scontrol", "show", "nodes", "--oneliner"], path)
    except IngestError as exc:
        if not quiet:
            print(f"helios: note: no node list ({exc}); the stored capacity is kept", file=sys.stderr)
        return None
    return path


def scheduler_settings(folder: Path, quiet: bool) -> Path | None:
    """The five scheduler-configuration outputs (SLURM_CONFIG_COMMANDS) written to folder, or None (with a note)
    when a command cannot run: the stored configuration is then kept."""
    folder.mkdir()
    try:
        for name, command in SLURM_CONFIG_COMMANDS.items():
            run_tool(list(command), folder / name)
    except IngestError as exc:
        if not quiet:
            print(f"helios: note: no scheduler configuration captured ({exc}); the stored one is kept", file=sys.stderr)
        return None
    return folder


def _with_scheduler(options: IngestOptions, args: argparse.Namespace, tmp: Path) -> IngestOptions:
    """options with the scheduler configuration of --slurm-config, else of the commands run now (when they can)."""
    if args.slurm_config is not None:
        return options
    folder = scheduler_settings(tmp / "slurm-config", args.quiet)
    if folder is None:
        return options
    return dataclasses.replace(options, slurm_config=folder, slurm_config_source=CAPTURE_SOURCE)


def run_sync(args: argparse.Namespace) -> int:
    """Run `helios sync slurm`: sacct over the window, then the same refresh as `helios ingest --append`."""
    progress = Progress(0, quiet=args.quiet)
    try:
        start = since_time(args.since, datetime.now()).strftime(TIME_FORMAT).replace(" ", "T")
        with tempfile.TemporaryDirectory(prefix="helios-sync-") as tmp:
            export = args.keep_export or Path(tmp) / "sacct.txt"
            run_tool(sacct_command(start), export)
            if args.capacity is None and args.nodes == "scontrol":
                args.capacity = node_capacity(Path(tmp), args.quiet)
            options = _with_scheduler(ingest_options(args), args, Path(tmp))
            source = f"sacct --starttime={start} (helios sync slurm)"
            result = append(export, "slurm", args.name, options, progress, source=source)
        derive(result.dataset, progress)
    except (IngestError, OSError) as exc:
        if progress.step and not args.quiet:
            print(file=sys.stderr)
        return fail(str(exc))
    print_refresh(result)
    print_rejections(result.quality)
    print_capacity_note(result.dataset.meta)
    if options.slurm_config is not None:
        print_scheduler(result.dataset.meta)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `sync` sub-command."""
    p = subparsers.add_parser(
        "sync",
        help="refresh a dataset from the scheduler itself (runs sacct; for cron or a systemd timer)",
        description="Export the jobs active since --since with `sacct --allusers --allocations --parsable2` "
        "(the nodes' GPUs with `scontrol show nodes --oneliner`, the scheduler's settings with scontrol and sacctmgr, "
        "or --slurm-config DIR), then add new jobs and update changed ones "
        "in dataset NAME exactly like `helios ingest --format slurm --append` (created when absent; running it "
        "again changes nothing; readers never see a half-written dataset). Cron: "
        "'*/15 * * * * helios sync slurm --name mycluster --cluster mycluster --since 2d --quiet'.",
    )
    p.add_argument("scheduler", choices=SCHEDULERS, help="the scheduler to ask")
    p.add_argument("--name", required=True, help="dataset to refresh (created when absent)")
    p.add_argument(
        "--since",
        default=DEFAULT_SINCE,
        metavar="WHEN",
        help="export jobs active since this long ago (2d, 12h, 30m, 1w) or this date; default %(default)s, longer "
        "than the gap between two runs so a missed run loses nothing",
    )
    p.add_argument(
        "--nodes",
        choices=("scontrol", "none"),
        default="scontrol",
        help="read the capacity from `scontrol show nodes` (default) or not (keep the stored one); --capacity FILE "
        "overrides it",
    )
    p.add_argument("--keep-export", type=Path, metavar="FILE", help="also keep the sacct output in FILE")
    add_own_cluster_args(p)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run_sync)
