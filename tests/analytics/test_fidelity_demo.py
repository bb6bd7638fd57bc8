"""The demo trace (`helios demo`, scale 1, seed 0, in $HELIOS_DATA_DIR) passes every fidelity check but the known
misses of the generator (listed in docs/fidelity.md), and copies of it with one VC emptied, ten times the users or
no daily rhythm fail the checks meant to catch that.

Building the demo takes minutes, so these tests use the one in $HELIOS_DATA_DIR (default ./data): skipped when it is
missing or not at scale 1, failed instead when REQUIRE_DEMO=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

from analytics import schema, store
from analytics.fidelity import dataset_scale, fidelity_checks, format_table
from analytics.fidelity.levels import diurnal_checks
from analytics.fidelity.summary import user_checks
from analytics.fidelity.vcs import fig4_checks
from analytics.reference import CLUSTERS
from tests.analytics.test_synth_fidelity import _flat_diurnal, _users_x10, _vc_emptied

DATA_DIR = Path(os.environ.get("HELIOS_DATA_DIR", "data"))
AMPLITUDE_2B = "diurnal GPU-job submissions per hour: max - min over the hours (published x 1)"
# (source, cluster, statistic) the seed-0 demo misses, each explained in docs/fidelity.md; a check that starts to
# pass must leave this list (the test says so), one that starts to fail is a regression
_NORM_QUEUE = "mean GPU-job queueing delay, min-max normalised %"
KNOWN_MISSES = {
    ("Fig 2a", "Saturn", "diurnal utilisation: max - min over the hours (published x 1)"),
    *(("Fig 4", "Earth", f"{vc}: {_NORM_QUEUE}") for vc in ("vc6YE", "vcMod", "vc3sl", "vcLJZ")),
}


@pytest.fixture(scope="module")
def demo() -> store.Dataset:
    """The scale-1 demo dataset of $HELIOS_DATA_DIR."""
    try:
        ds = store.open_dataset(store.DEFAULT_DATASET, DATA_DIR)
        missing = None if dataset_scale(ds) == 1 else f"its scale is {dataset_scale(ds):g}, not 1"
    except store.DatasetError as exc:
        missing = str(exc)
    if missing:
        reason = f"demo dataset {store.DEFAULT_DATASET} in {DATA_DIR}: {missing} (run `helios demo`)"
        if os.environ.get("REQUIRE_DEMO") == "1":
            pytest.fail(f"{reason}, but REQUIRE_DEMO=1")
        pytest.skip(reason)
    return ds


@pytest.fixture(scope="module")
def demo_jobs(demo) -> pl.DataFrame:
    return demo.jobs().collect()


def _distorted(demo, jobs: pl.DataFrame, name: str, tmp_path_factory) -> store.Dataset:
    root = tmp_path_factory.mktemp(name)
    return store.write_dataset(name, schema.conform_jobs(jobs), demo.vc_gpus(), demo.meta, root=root)


def test_the_demo_passes_every_fidelity_check_but_the_known_misses(demo):
    checks = fidelity_checks(demo)
    failed = [c for c in checks if not c.passed]
    new = [c for c in failed if (c.source, c.cluster, c.statistic) not in KNOWN_MISSES]
    assert not new, format_table(new)
    fixed = KNOWN_MISSES - {(c.source, c.cluster, c.statistic) for c in failed}
    assert not fixed, f"these now pass: take them off KNOWN_MISSES and docs/fidelity.md: {sorted(fixed)}"


def test_an_emptied_vc_of_the_demo_fails_fig4(demo, demo_jobs, tmp_path_factory):
    base = {(c.cluster, c.statistic): c for c in fig4_checks(demo)}
    bad = {
        (c.cluster, c.statistic): c
        for c in fig4_checks(_distorted(demo, _vc_emptied(demo_jobs), "e", tmp_path_factory))
    }
    for stat in ("vc6YE: mean utilisation %", "vc6YE: median utilisation %", "min of the VCs' mean utilisation %"):
        assert base[("Earth", stat)].passed and not bad[("Earth", stat)].passed


def test_ten_times_the_users_of_the_demo_fail_the_user_checks(demo, demo_jobs, tmp_path_factory):
    bad = {
        (c.cluster, c.statistic): c for c in user_checks(_distorted(demo, _users_x10(demo_jobs), "u", tmp_path_factory))
    }
    assert not bad[("all", "users, all clusters")].passed
    # Splitting every user evenly keeps the concentration curves (Fig 8) but multiplies Fig 9b's bins.
    assert not bad[("all", "users with 40-50 % of GPU jobs completed")].passed


def test_the_demo_without_a_daily_rhythm_fails_the_diurnal_checks(demo, demo_jobs, tmp_path_factory):
    flat = _distorted(demo, _flat_diurnal(demo_jobs), "f", tmp_path_factory)
    bad = [c for c in diurnal_checks(flat) if not c.passed]
    for cluster in ("Venus", "Earth", "Saturn", "Uranus"):
        assert any(c.cluster == cluster and c.statistic == AMPLITUDE_2B for c in bad)
    # a flat curve has no daily peak to time: its phase check fails however its noise falls
    for cluster in CLUSTERS:
        assert any(c.cluster == cluster and "submissions per hour: hour" in c.statistic for c in bad)
