"""The scheduler configuration through the CLI: `helios ingest --format slurm --slurm-config DIR` stores it with the
dataset version, a refresh keeps it, bad input leaves the dataset without one (a warning naming file, line and key,
exit 0), and `helios sync slurm` runs the five commands itself (stand-in scontrol and sacctmgr programs)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

import cli
from analytics import store
from analytics.commands.sync import CAPTURE_SOURCE
from analytics.ingest.slurm_conf import SLURM_CONFIG_COMMANDS, read_slurm_config
from analytics.scheduler import CAPTURE_KEY, CONFIG_KEY, config_summary, scheduler_config
from tests.analytics.test_ingest_slurm import BATCH1, FIXTURES, SYNC
from tests.analytics.test_slurm_conf import CLASSIC, MULTIFACTOR

CAPACITY = FIXTURES / "scontrol_nodes.txt"


def _ingest(*extra: str, path: Path = BATCH1) -> int:
    args = ["ingest", str(path), "--format", "slurm", "--name", "real", "--cluster", "heliostest"]
    return cli.main([*args, "--capacity", str(CAPACITY), "--quiet", *extra])


def _bad_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "bad-conf"
    shutil.copytree(MULTIFACTOR, folder)
    text = (folder / "config.txt").read_text()
    (folder / "config.txt").write_text(text.replace("PriorityWeightAge       = 100", "PriorityWeightAge       = ten"))
    return folder


def test_ingest_stores_the_configuration_with_the_dataset_and_says_it(data_root, capsys):
    assert _ingest("--slurm-config", str(MULTIFACTOR)) == 0
    out = capsys.readouterr().out
    expected = read_slurm_config(MULTIFACTOR)
    assert f"scheduler: {config_summary(expected)}\n" in out
    assert "  not modelled: assoc MaxWall: teamb, teamb/nobody\n" in out
    dataset = store.open_dataset("real")
    assert scheduler_config(dataset) == expected
    assert dataset.meta[CAPTURE_KEY]["source"] == str(MULTIFACTOR) and dataset.meta[CAPTURE_KEY]["error"] is None
    on_disk = store.open_dataset("real")  # read back from meta.json, not from memory
    assert scheduler_config(on_disk) == expected and on_disk.version == dataset.version


def test_a_refresh_keeps_the_configuration_or_replaces_it(data_root, capsys):
    assert _ingest("--slurm-config", str(MULTIFACTOR)) == 0
    assert _ingest("--append", path=SYNC) == 0
    refreshed = store.open_dataset("real")
    assert scheduler_config(refreshed) == read_slurm_config(MULTIFACTOR)
    assert refreshed.meta["row_counts"]["jobs"] == 37
    assert _ingest("--append", "--slurm-config", str(CLASSIC), path=SYNC) == 0
    assert scheduler_config(store.open_dataset("real")) == read_slurm_config(CLASSIC)
    assert "scheduler: multifactor; weights fair-share 5000, age 1000" in capsys.readouterr().out


def test_bad_input_keeps_the_dataset_without_a_configuration(data_root, tmp_path, capsys):
    bad = _bad_copy(tmp_path)
    assert _ingest("--slurm-config", str(bad)) == 0
    captured = capsys.readouterr()
    line = next(i for i, t in enumerate((bad / "config.txt").read_text().splitlines(), 1) if "WeightAge" in t)
    assert captured.err == (
        f"helios: warning: {bad}/config.txt line {line}, PriorityWeightAge: 'ten' is not a whole number; the dataset "
        "is kept without a scheduler configuration\n"
    )
    assert "dataset real: 29 jobs" in captured.out and "scheduler:" not in captured.out
    dataset = store.open_dataset("real")
    assert scheduler_config(dataset) is None and dataset.meta[CONFIG_KEY] is None
    assert "PriorityWeightAge" in dataset.meta[CAPTURE_KEY]["error"]
    assert _ingest("--append", "--slurm-config", str(MULTIFACTOR), path=SYNC) == 0  # a good one later replaces it
    assert scheduler_config(store.open_dataset("real")) == read_slurm_config(MULTIFACTOR)
    assert _ingest("--append", "--slurm-config", str(tmp_path / "nowhere"), path=SYNC) == 0  # as does a bad one
    assert "nowhere: no such folder" in capsys.readouterr().err
    assert scheduler_config(store.open_dataset("real")) is None


def test_slurm_config_applies_to_slurm_only(data_root, tmp_path, capsys):
    csv = tmp_path / "jobs.csv"
    csv.write_text("vc,gpus,submit,duration\nA,1,2024-01-01 00:00:00,10\n")
    args = ["ingest", str(csv), "--format", "csv", "--name", "c", "--map", "gpus=gpus,submit=submit,duration=duration"]
    assert cli.main([*args, "--slurm-config", str(MULTIFACTOR), "--quiet"]) == 2
    assert "--slurm-config applies to --format slurm only" in capsys.readouterr().err


def _program(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _stand_ins(bin_dir: Path, conf: Path) -> None:
    """sacct printing the sync export; scontrol and sacctmgr printing conf's files for SLURM_CONFIG_COMMANDS'
    arguments (and the capacity file for sync's own `scontrol show nodes --oneliner`), logging every call."""
    bin_dir.mkdir(exist_ok=True)
    _program(bin_dir, "sacct", f"cat {SYNC}")
    for program in ("scontrol", "sacctmgr"):
        cases = [
            f'  "{" ".join(command[1:])}") cat {conf / name} ;;'
            for name, command in SLURM_CONFIG_COMMANDS.items()
            if command[0] == program
        ]
        if program == "scontrol":
            cases.append(f'  "show nodes --oneliner") cat {CAPACITY} ;;')
        body = f'echo "{program} $*" >> {bin_dir}/calls\ncase "$*" in\n' + "\n".join(cases)
        _program(bin_dir, program, body + '\n  *) echo "unexpected: $*" >&2; exit 1 ;;\nesac')


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch) -> Path:
    """A PATH whose Slurm commands are the stand-ins, printing the multifactor capture."""
    bin_dir = tmp_path / "bin"
    _stand_ins(bin_dir, MULTIFACTOR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def test_sync_runs_the_five_commands_and_stores_what_they_print(data_root, fake_slurm, capsys):
    assert cli.main(["sync", "slurm", "--name", "live", "--quiet"]) == 0
    assert f"scheduler: {config_summary(read_slurm_config(MULTIFACTOR))}" in capsys.readouterr().out
    calls = (fake_slurm / "calls").read_text().splitlines()
    assert [" ".join(c) for c in SLURM_CONFIG_COMMANDS.values()] == [c for c in calls if "show nodes --one" not in c]
    dataset = store.open_dataset("live")
    assert scheduler_config(dataset) == read_slurm_config(MULTIFACTOR)
    assert dataset.meta[CAPTURE_KEY]["source"] == CAPTURE_SOURCE


def test_sync_keeps_the_stored_configuration_when_a_command_fails(data_root, fake_slurm, capsys):
    assert cli.main(["sync", "slurm", "--name", "live", "--quiet"]) == 0
    _program(fake_slurm, "sacctmgr", "echo 'sacctmgr: error: Problem talking to the database' >&2; exit 1")
    assert cli.main(["sync", "slurm", "--name", "live"]) == 0
    err = capsys.readouterr().err
    assert "helios: note: no scheduler configuration captured (sacctmgr --parsable2 show assoc format=" in err
    assert "exited with 1: sacctmgr: error: Problem talking to the database); the stored one is kept" in err
    assert scheduler_config(store.open_dataset("live")) == read_slurm_config(MULTIFACTOR)


def test_sync_with_bad_output_warns_naming_the_command_and_drops_the_configuration(data_root, fake_slurm, capsys):
    assert cli.main(["sync", "slurm", "--name", "live", "--quiet"]) == 0
    _program(fake_slurm, "sacctmgr", "echo 'Name|Priority'; echo 'normal|-1'")
    assert cli.main(["sync", "slurm", "--name", "live", "--quiet"]) == 0
    err = capsys.readouterr().err
    command = " ".join(SLURM_CONFIG_COMMANDS["assoc.txt"])
    assert f"helios: warning: `{command}` line 1, Name: not a column of sacctmgr --parsable2 show assoc" in err
    assert "the dataset is kept without a scheduler configuration" in err
    assert scheduler_config(store.open_dataset("live")) is None


def test_sync_reads_slurm_config_dir_instead_of_running_the_commands(data_root, fake_slurm, capsys):
    assert cli.main(["sync", "slurm", "--name", "live", "--slurm-config", str(CLASSIC), "--quiet"]) == 0
    assert all("show config" not in call for call in (fake_slurm / "calls").read_text().splitlines())
    assert scheduler_config(store.open_dataset("live")) == read_slurm_config(CLASSIC)


def test_the_version_follows_the_configuration_and_an_unchanged_refresh_writes_nothing(data_root):
    assert _ingest() == 0 and _ingest("--append", path=SYNC) == 0
    without = store.open_dataset("real")
    assert _ingest("--append", "--slurm-config", str(MULTIFACTOR), path=SYNC) == 0  # no job changes, a config
    first = store.open_dataset("real")
    assert first.version != without.version and scheduler_config(first) is not None
    assert _ingest("--append", "--slurm-config", str(MULTIFACTOR), path=SYNC) == 0  # the same again
    again = store.open_dataset("real")
    assert again.version == first.version and again.path == first.path  # nothing written
    assert _ingest("--append", "--slurm-config", str(CLASSIC), path=SYNC) == 0
    assert store.open_dataset("real").version not in (first.version, without.version)
