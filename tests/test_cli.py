"""The `helios` command line: help for every sub-command, quiet exit on a closed pipe."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import cli
from analytics import store


def _subcommands() -> list[str]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)


def test_top_level_help_lists_commands(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    for name in ("ingest", "demo", "fidelity", "summary", "simulate", "ces", "serve"):
        assert name in out


@pytest.mark.parametrize("command", _subcommands())
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    assert exc.value.code == 0
    assert len(capsys.readouterr().out) > 200


def test_closed_pipe_exits_quietly(data_root):
    t0 = dt.datetime(2020, 4, 1)
    jobs = pl.DataFrame(
        {
            "cluster": ["C"],
            "job_id": [1],
            "vc": ["v"],
            "gpu_num": [1],
            "submit_time": [t0],
            "start_time": [t0],
            "end_time": [t0 + dt.timedelta(days=3)],
            "duration": [3 * 86400],
        }
    )
    caps = pl.DataFrame(
        {
            "cluster": ["C"] * 3,
            "vc": ["v"] * 3,
            "date": [t0.date() + dt.timedelta(days=i) for i in range(3)],
            "gpus": [8] * 3,
        }
    )
    store.write_dataset("pipe", jobs, caps, {})
    helios = Path(sys.executable).with_name("helios")
    proc = subprocess.run(
        f"{helios} query utilization_minutes --dataset pipe --csv | head -c 10",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.startswith("cluster"), proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr
