"""Tests of `helios fidelity` (analytics.fidelity) and the published reference loader."""

from __future__ import annotations

import json
import shutil

import numpy as np
import polars as pl
import pytest

import cli
from analytics import schema, store
from analytics.fidelity import Check, checks_to_json, fidelity_checks, format_table
from analytics.fidelity.levels import diurnal_checks, monthly_level_checks, relative_daily_swing, shape_checks
from analytics.fidelity.summary import summary_checks, user_checks
from analytics.fidelity.vcs import fig4_checks, spread_checks, vc_checks
from analytics.reference import REFERENCE_DIR, earth_vc_gpus, reference, reference_path, summary_rows
from analytics.synth.build import SynthParams, build_dataset

SCALE = 0.02
# summary 5 x 26, curves 4 x 4, Fig 7b 3, users 3 x 4 x 4 + 10 bins + 1, Fig 3 levels 4 x 6 x 5, Fig 2 4 x 5,
# shapes 4 x 7, Fig 4: Earth 10 x 7 + 5 + 2 and 3 x 2 for the other clusters
N_CHECKS = 130 + 16 + 3 + 59 + 120 + 20 + 28 + 77 + 6


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
    assert len(checks) == N_CHECKS
    assert f"{sum(c.passed for c in checks)} of {N_CHECKS} checks pass" in table
    assert all(c.source for c in checks)  # every check names its figure or table
    named = _by_name(checks)
    for cluster in ("Venus", "Earth", "Saturn", "Uranus", "total"):
        assert named[(cluster, f"job_num (published x {SCALE:g})")].passed
        assert named[(cluster, f"gpu_job_num (published x {SCALE:g})")].passed
        assert named[(cluster, "med_que_time_gpu")].passed
    for stat in ("complete_rate_gpu_pct", "cancel_rate_gpu_pct", "avg_gpu_num", "avg_que_time_gpu"):
        assert named[("total", stat)].passed, named[("total", stat)]
    # small samples: loose overall (Fig 4 and the daily amplitudes need the full-size trace with its queue)
    assert sum(c.passed for c in checks) >= 0.65 * len(checks)


def test_fidelity_command_json_matches_the_exit_code(in_root, capsys):
    code = cli.main(["fidelity", "--dataset", "synth", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == (0 if report["passed"] else 1)
    assert report["dataset"] == "synth" and report["scale"] == SCALE
    assert report["checks_total"] == len(report["checks"]) == N_CHECKS
    first = report["checks"][0]
    assert set(first) == {"cluster", "statistic", "published", "value", "difference", "tolerance", "passed", "source"}


def test_fidelity_fails_on_a_deliberately_wrong_dataset(in_root, capsys):
    assert cli.main(["fidelity", "--dataset", "wrong"]) == 1
    failing = [line for line in capsys.readouterr().out.splitlines() if line.endswith("FAIL")]
    assert any(line.split()[:2] == ["summary", "total"] and "avg_run_time_gpu" in line for line in failing)
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


# Deliberately distorted traces: each new check fails on the distortion it is there to catch.


def _levels_x3(jobs: pl.DataFrame) -> pl.DataFrame:
    """Every job three times (new job ids): job counts, submissions and GPUs in use tripled."""
    step = int(jobs["job_id"].max()) + 1
    return pl.concat([jobs.with_columns(pl.col("job_id") + k * step) for k in range(3)])


def _flat_diurnal(jobs: pl.DataFrame) -> pl.DataFrame:
    """Every job moved, with its start and end, to a random second of its submit day: no daily rhythm left."""
    rng = np.random.default_rng(5)
    day = pl.col("submit_time").dt.truncate("1d")
    shift = day + pl.duration(seconds=pl.Series(rng.integers(0, 86_400, jobs.height))) - pl.col("submit_time")
    return (
        jobs.with_columns(shift.alias("_d"))
        .with_columns((pl.col(c) + pl.col("_d")).alias(c) for c in ("submit_time", "start_time", "end_time"))
        .drop("_d")
    )


def _users_x10(jobs: pl.DataFrame) -> pl.DataFrame:
    """Each user split into ten (by job id): ten times the users, each with a tenth of the work."""
    return jobs.with_columns(pl.col("user") + "-" + (pl.col("job_id") % 10).cast(pl.String))


def _vc_emptied(jobs: pl.DataFrame) -> pl.DataFrame:
    """Earth's largest VC (vc6YE) without a single job."""
    return jobs.filter(~((pl.col("cluster") == "Earth") & (pl.col("vc") == "vc6YE")))


DISTORTIONS = {
    "levels_x3": _levels_x3,
    "flat_diurnal": _flat_diurnal,
    "users_x10": _users_x10,
    "vc_emptied": _vc_emptied,
}


@pytest.fixture(scope="module")
def distorted(root):
    """Each distortion of the 2 % trace as a dataset of the same folder, by name."""
    base = store.open_dataset("synth", root)
    jobs = base.jobs().collect()
    return {
        name: store.write_dataset(name, schema.conform_jobs(fn(jobs)), base.vc_gpus(), base.meta, root=root)
        for name, fn in DISTORTIONS.items()
    }


def _failing(checks: list[Check]) -> set[tuple[str, str]]:
    return {(c.cluster, c.statistic) for c in checks if not c.passed}


def test_levels_x3_fail_the_monthly_levels_and_counts(root, distorted):
    base = _by_name(monthly_level_checks(store.open_dataset("synth", root)))
    bad = _failing(monthly_level_checks(distorted["levels_x3"]))
    for cluster in ("Venus", "Earth", "Saturn", "Uranus"):
        for stat in (f"May single gpu jobs (published x {SCALE:g})", f"Sep multi gpu jobs (published x {SCALE:g})"):
            assert base[(cluster, stat)].passed and (cluster, stat) in bad
        assert (cluster, "Jul GPU utilisation %") in bad and (cluster, "Jul multi-GPU-job utilisation %") in bad
    jobs = _by_name(summary_checks(distorted["levels_x3"]))
    assert not jobs[("total", f"job_num (published x {SCALE:g})")].passed
    diurnal = _by_name(diurnal_checks(distorted["levels_x3"]))
    assert not diurnal[("Earth", f"diurnal mean utilisation % (published x {SCALE:g})")].passed
    # The Pearson r of the shapes cannot see it: this is why the level checks exist.
    shapes = _by_name(shape_checks(distorted["levels_x3"]))
    assert shapes[("Earth", "monthly single-GPU jobs (shape)")].passed


def test_a_flattened_diurnal_rhythm_fails_its_amplitude_and_phase(root, distorted):
    base = _by_name(diurnal_checks(store.open_dataset("synth", root)))
    flat = _by_name(diurnal_checks(distorted["flat_diurnal"]))
    for cluster in ("Venus", "Earth", "Saturn", "Uranus"):
        stat = f"diurnal GPU-job submissions per hour: max - min over the hours (published x {SCALE:g})"
        phase = "diurnal GPU-job submissions per hour: hour of the daily peak"
        assert base[(cluster, phase)].passed and not flat[(cluster, stat)].passed
        # what swing is left is noise: at 2 % scale Earth's flattened hours swing 0.35-0.62 of the published (8 draws)
        assert flat[(cluster, stat)].value < 0.75 * flat[(cluster, stat)].published
        assert not flat[(cluster, phase)].passed and flat[(cluster, phase)].value is None  # no daily peak to time


def test_ten_times_the_users_fail_the_user_count_and_fig_9b(root, distorted):
    base = _by_name(user_checks(store.open_dataset("synth", root)))
    bad = _by_name(user_checks(distorted["users_x10"]))
    assert base[("all", "users, all clusters")].passed
    assert bad[("all", "users, all clusters")].value > 9 * base[("all", "users, all clusters")].value
    assert not bad[("all", "users, all clusters")].passed
    # Splitting every user evenly keeps the concentration curves (Fig 8) but multiplies Fig 9b's bins.
    bin_40 = bad[("all", "users with 40-50 % of GPU jobs completed")]
    assert not bin_40.passed


def test_an_emptied_vc_fails_its_fig4_checks(distorted):
    checks = _by_name(fig4_checks(distorted["vc_emptied"]))
    row = checks[("Earth", "vc6YE: mean utilisation %")]
    assert row.value == 0.0 and not row.passed
    assert not checks[("Earth", "vc6YE: median utilisation %")].passed
    assert checks[("Earth", "vc6YE: mean GPUs per GPU job")].value is None


def _published_frame(published: dict) -> pl.DataFrame:
    """The published Fig 4 values as a vc_utilization frame: a dataset that reproduces the figure exactly."""
    rows = [{"cluster": "Earth", "vc": vc, **{k: float(v) for k, v in p.items()}} for vc, p in published.items()]
    return pl.DataFrame(rows)


def test_fig4_checks_pass_on_the_published_figure_and_fail_when_a_vc_is_emptied():
    published = reference()["earth_may_vc_utilization"]
    exact = _published_frame(published)
    checks = vc_checks(exact, published) + spread_checks("Earth", exact, published, 1.0, level=True)
    assert all(c.passed for c in checks) and len(checks) == 77
    emptied = exact.with_columns(
        [pl.when(pl.col("vc") == "vc6YE").then(0.0).otherwise(pl.col(c)).alias(c) for c in ("mean_pct", "median_pct")]
    )
    bad = _failing(vc_checks(emptied, published) + spread_checks("Earth", emptied, published, 1.0, level=True))
    assert {("Earth", "vc6YE: mean utilisation %"), ("Earth", "min of the VCs' mean utilisation %")} <= bad
    # The other clusters are held to Earth's spread: all VCs alike (a narrow band) fails it.
    narrow = exact.with_columns(pl.lit(70.0).alias("mean_pct"))
    assert not any(c.passed for c in spread_checks("Venus", narrow, published, 1.0, level=False))


def test_the_daily_swing_is_the_24_hour_harmonic_relative_to_the_mean():
    hours = np.arange(24)
    assert relative_daily_swing(list(10 + 2 * np.cos(2 * np.pi * hours / 24))) == pytest.approx(0.1)
    assert relative_daily_swing([5.0] * 24) == pytest.approx(0.0)
    assert relative_daily_swing([0.0] * 24) is None and relative_daily_swing([1.0] * 23) is None
