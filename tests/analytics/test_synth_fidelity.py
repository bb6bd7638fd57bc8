"""Tests of `helios fidelity` (analytics.fidelity) and the published reference loader."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

import cli
from analytics import store
from analytics.fidelity import Check, checks_to_json, fidelity_checks, format_table
from analytics.reference import REFERENCE_DIR, earth_vc_gpus, reference_path, summary_rows
from analytics.synth.build import SynthParams, build_dataset

SCALE = 0.02


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A data folder holding a 2 % synthetic trace `synth` and a deliberately wrong copy `wrong`."""
    base = tmp_path_factory.mktemp("data")
    ds = build_dataset(SynthParams(scale=SCALE, seed=21), name="synth", root=base)
    jobs = ds.jobs().collect()
    gpu = pl.col("gpu_num") > 0
    wrong = jobs.with_columns(
        pl.when(gpu).then(pl.lit("CANCELLED")).otherwise(pl.col("state")).alias("state"),
        pl.when(gpu).then(pl.col("gpu_num") * 8).otherwise(0).alias("gpu_num"),
        (pl.col("duration") * 20).alias("duration"),
    ).with_columns((pl.col("start_time") + pl.col("duration") * pl.duration(seconds=1)).alias("end_time"))
    store.write_dataset("wrong", wrong, ds.vc_gpus(), ds.meta, root=base)
    return base


@pytest.fixture
def in_root(root, monkeypatch):
    monkeypatch.setenv("HELIOS_DATA_DIR", str(root))
    return root


def _by_name(checks: list[Check]) -> dict[tuple[str, str], Check]:
    return {(c.cluster, c.statistic): c for c in checks}


def test_fidelity_of_a_small_trace_is_computed_and_printed(root, capsys):
    checks = fidelity_checks(store.open_dataset("synth", root))
    table = format_table(checks)
    print(table)
    assert len(checks) == 230
    assert f"{sum(c.passed for c in checks)} of 230 checks pass" in table
    named = _by_name(checks)
    for cluster in ("Venus", "Earth", "Saturn", "Uranus", "total"):
        assert named[(cluster, f"job_num (published x {SCALE:g})")].passed
        assert named[(cluster, f"gpu_job_num (published x {SCALE:g})")].passed
        assert named[(cluster, "med_que_time_gpu")].passed
    for stat in ("complete_rate_gpu_pct", "cancel_rate_gpu_pct", "avg_gpu_num", "avg_que_time_gpu"):
        assert named[("total", stat)].passed, named[("total", stat)]
    assert sum(c.passed for c in checks) >= 0.7 * len(checks)  # small samples: loose overall


def test_fidelity_command_json_matches_the_exit_code(in_root, capsys):
    code = cli.main(["fidelity", "--dataset", "synth", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == (0 if report["passed"] else 1)
    assert report["dataset"] == "synth" and report["scale"] == SCALE
    assert report["checks_total"] == len(report["checks"]) == 230
    first = report["checks"][0]
    assert set(first) == {"cluster", "statistic", "published", "value", "difference", "tolerance", "passed"}


def test_fidelity_fails_on_a_deliberately_wrong_dataset(in_root, capsys):
    assert cli.main(["fidelity", "--dataset", "wrong"]) == 1
    failing = [line for line in capsys.readouterr().out.splitlines() if line.endswith("FAIL")]
    assert any(line.startswith("total") and "avg_run_time_gpu" in line for line in failing)
    checks = _by_name(fidelity_checks(store.open_dataset("wrong", in_root)))
    for stat in ("avg_run_time_gpu", "cancel_rate_gpu_pct", "avg_gpu_num", "complete_gpu_time_share_pct"):
        assert not checks[("total", stat)].passed
    gpu_count_cdf = [
        c for (cl, stat), c in checks.items() if cl == "Venus" and stat.startswith("GPU-count CDF % of jobs")
    ]
    assert len(gpu_count_cdf) == 1 and not gpu_count_cdf[0].passed


def test_fidelity_of_a_missing_dataset_is_an_error(in_root, capsys):
    assert cli.main(["fidelity", "--dataset", "nope"]) == 2
    assert "not found" in capsys.readouterr().err


def test_report_json_counts_failures():
    checks = [
        Check("Venus", "a", 1.0, 1.0, 0.0, "±3 pp", True),
        Check("Venus", "b", 1.0, None, None, "±3 pp", False),
    ]

    class _Ds:
        name, meta = "x", {}

    report = checks_to_json(_Ds(), checks)
    assert report["passed"] is False and report["checks_failed"] == 1
    assert "1 of 2 checks pass; 1 FAIL" in format_table(checks)


def test_reference_files_load_from_the_repository_copy(monkeypatch):
    monkeypatch.delenv("HELIOS_SHARED_DIR", raising=False)
    assert reference_path("helios_reference.json").parent == REFERENCE_DIR
    assert summary_rows()["total"]["job_num"] == 3362981
    # The published values live in one file: no other data file in the folder holds them.
    assert sorted(p.name for p in REFERENCE_DIR.iterdir() if p.suffix in (".csv", ".json")) == [
        "earth_vc_gpu_number.csv",
        "helios_reference.json",
    ]
    earth = earth_vc_gpus()
    assert earth.columns == ["cluster", "vc", "date", "gpus"] and earth.height == 25 * 181


def test_reference_files_load_from_a_shared_dir(tmp_path, monkeypatch):
    (tmp_path / "spec").mkdir()
    shutil.copy(REFERENCE_DIR / "helios_reference.json", tmp_path / "spec" / "helios_reference.json")
    monkeypatch.setenv("HELIOS_SHARED_DIR", str(tmp_path))
    assert reference_path("helios_reference.json") == tmp_path / "spec" / "helios_reference.json"
    assert summary_rows()["Venus"]["gpu_num"] == 1022
    with pytest.raises(FileNotFoundError, match="earth_vc_gpu_number.csv"):
        reference_path("earth_vc_gpu_number.csv")
