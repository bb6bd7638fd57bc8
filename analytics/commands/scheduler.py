"""The scheduler configuration of `helios ingest --format slurm` and `helios sync slurm`: the --slurm-config flag and
what the commands say about the configuration they stored (or could not read)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from analytics.ingest.slurm_conf import SLURM_CONFIG_COMMANDS
from analytics.scheduler import capture_info, config_summary, stored_config
from analytics.slurm_config import SlurmConfigError

MAX_NOTES_PRINTED = 5


def add_slurm_config_arg(group: argparse._ArgumentGroup) -> None:
    """Add --slurm-config DIR to an argument group."""
    files = ", ".join(
        f"{name} ({' '.join(word for word in command if not word.startswith('format='))})"
        for name, command in SLURM_CONFIG_COMMANDS.items()
    )
    group.add_argument(
        "--slurm-config",
        type=Path,
        metavar="DIR",
        help=f"slurm: a folder with the scheduler's own settings, for the Data page and the `slurm` what-if policy: "
        f"{files}, sacctmgr's format= lists in docs/formats.md; a file that cannot be read leaves the dataset without "
        "a scheduler configuration (a warning, exit 0)",
    )


def print_scheduler(meta: dict[str, Any]) -> None:
    """Print the stored scheduler configuration in one line, or warn (stderr) why the one given was not stored."""
    error = capture_info(meta).get("error")
    if error:
        print(f"helios: warning: {error}; the dataset is kept without a scheduler configuration", file=sys.stderr)
        return
    try:
        config = stored_config(meta)
    except SlurmConfigError as exc:
        print(f"helios: warning: the stored scheduler configuration cannot be read ({exc})", file=sys.stderr)
        return
    if config is None:
        return
    print(f"scheduler: {config_summary(config)}")
    for note in config.not_modelled[:MAX_NOTES_PRINTED]:
        print(f"  not modelled: {note}")
    more = len(config.not_modelled) - MAX_NOTES_PRINTED
    if more > 0:
        print(f"  and {more} more settings not modelled (the Data page lists them)")
