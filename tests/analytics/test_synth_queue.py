"""Tests of capacity-consistent start times of the synthetic trace: the scheduling pass of `helios demo` (the one
Slurm model) and the fidelity check that GPUs in use never exceed a VC's capacity."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

import cli
from analytics import schema, store
from analytics.fidelity import capacity_checks, claims_capacity_consistency, fidelity_checks, peak_excess_gpus
from analytics.synth.build import SynthParams, apply_schedule, generate
from analytics.synth.layout import repair_isolated_days
from sim.synthetic_queue.calibration import slurm_schedule
from tests.sim.test_sim_replay import assert_raised_only_by_drains

T0 = datetime(2020, 4, 1)
SCALE = 0.003


def _jobs(rows: list[tuple[str, int, int, int]]) -> pl.LazyFrame:
    """GPU jobs (vc, gpus, start s, end s after 2020-04-01) of cluster Alpha."""
    return pl.LazyFrame(
        {
            "cluster": ["Alpha"] * len(rows),
            "vc": [r[0] for r in rows],
            "gpu_num": [r[1] for r in rows],
            "start_time": [T0 + timedelta(seconds=r[2]) for r in rows],
            "end_time": [T0 + timedelta(seconds=r[3]) for r in rows],
        }
    ).with_columns(pl.col("start_time").cast(schema.TIMESTAMP), pl.col("end_time").cast(schema.TIMESTAMP))


def _caps(gpus_by_day: list[int]) -> pl.DataFrame:
    days = [date(2020, 4, 1 + d) for d in range(len(gpus_by_day))]
    return pl.DataFrame({"cluster": "Alpha", "vc": "vcA", "date": days, "gpus": gpus_by_day})


@pytest.mark.parametrize(
    ("rows", "caps", "excess"),
    [
        ([("vcA", 4, 0, 10), ("vcA", 4, 10, 20)], [8], -4),  # back to back: the end frees GPUs first
        ([("vcA", 4, 0, 10), ("vcA", 8, 9, 20)], [8], 4),  # one second of overlap counts
        ([("vcA", 8, 80_000, 90_000)], [8, 4], 4),  # running into a day with fewer GPUs
        ([("vcA", 8, 86_400 * 3, 86_400 * 3 + 5)], [8, 4], 4),  # after the last day: the last day's GPUs
        ([("vcB", 64, 0, 10), ("vcA", 2, 0, 10)], [8], -6),  # VCs without capacity rows are not checked
    ],
)
def test_peak_excess_sweeps_starts_ends_and_midnights(rows, caps, excess):
    got = peak_excess_gpus(_jobs(rows), _caps(caps))
    assert got.rows() == [("Alpha", excess)]


def test_isolated_capacity_days_take_their_neighbours_value():
    gpus = np.array([[64, 64, 0, 64, 48, 48], [0, 0, 840, 0, 0, 0], [8, 80, 0, 0, 0, 0]])
    fixed = repair_isolated_days(gpus)
    assert fixed.tolist() == [[64, 64, 64, 64, 48, 48], [0, 0, 0, 0, 0, 0], [8, 80, 0, 0, 0, 0]]


def test_apply_schedule_moves_start_and_end_and_keeps_the_others():
    jobs, _ = generate(SynthParams(scale=SCALE, seed=2))
    gpu = jobs.filter(pl.col("gpu_num") > 0)
    later = gpu.select(
        "cluster",
        "job_id",
        (pl.col("submit_time") + pl.duration(seconds=60)).alias("start_time"),
        pl.lit(60).alias("queue"),
    )
    out = apply_schedule(jobs, later)
    assert out.schema == jobs.schema and out.height == jobs.height
    moved = out.filter(pl.col("gpu_num") > 0)
    assert (moved["queue"] == 60).all()
    assert (
        moved.filter(pl.col("end_time") != pl.col("start_time") + pl.duration(seconds=pl.col("duration"))).height == 0
    )
    assert out.filter(pl.col("gpu_num") == 0).equals(jobs.filter(pl.col("gpu_num") == 0))


def test_apply_schedule_with_new_submit_times_renumbers_jobs_in_submit_order():
    jobs, _ = generate(SynthParams(scale=SCALE, seed=2))
    first = jobs.filter((pl.col("gpu_num") > 0) & (pl.col("job_id") == 1))
    if first.is_empty():
        first = jobs.filter(pl.col("gpu_num") > 0).sort("job_id").head(1)
    week = pl.duration(days=7)
    timed = first.select(
        "cluster",
        "job_id",
        (pl.col("submit_time") + week).alias("submit_time"),
        (pl.col("submit_time") + week).alias("start_time"),
        pl.lit(0).alias("queue"),
    )
    out = apply_schedule(jobs, timed)
    backwards = out.sort("cluster", "job_id").filter(
        pl.col("submit_time").diff().over("cluster") < pl.duration(seconds=0)
    )
    assert backwards.height == 0 and out["job_id"].n_unique() == out.group_by("cluster").len()["len"].max()
    assert out.height == jobs.height


@pytest.fixture(scope="module")
def sim_root(tmp_path_factory):
    """A data folder with the same small scheduled demo built twice (`a`, `b`) and one sampled demo (`s`)."""
    root = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HELIOS_DATA_DIR", str(root))
        for name, queue in (("a", "slurm"), ("b", "slurm"), ("s", "sampled")):
            args = ["demo", "--scale", str(SCALE), "--seed", "4", "--name", name, "--queue", queue, "--quiet"]
            assert cli.main(args) == 0
    return root


def test_scheduled_demo_is_deterministic(sim_root):
    a, b = store.open_dataset("a", sim_root), store.open_dataset("b", sim_root)
    assert a.jobs_path.read_bytes() == b.jobs_path.read_bytes()
    assert a.vc_gpus().equals(b.vc_gpus())


def test_scheduled_demo_never_exceeds_vc_capacity(sim_root):
    ds = store.open_dataset("a", sim_root)
    assert_raised_only_by_drains(ds.vc_gpus(), generate(SynthParams(scale=SCALE, seed=4))[1])
    assert claims_capacity_consistency(ds)
    checks = capacity_checks(ds)
    assert len(checks) == 4 and all(c.passed for c in checks), checks
    assert [c for c in fidelity_checks(ds) if c.statistic.startswith("peak GPUs")] == checks


def test_sampled_demo_records_that_it_is_not_capacity_bound(sim_root):
    ds = store.open_dataset("s", sim_root)
    assert not claims_capacity_consistency(ds)
    assert ds.meta["start_times"]["gpu_jobs"].startswith("sampled")
    assert not any(c.statistic.startswith("peak GPUs") for c in fidelity_checks(ds))


def test_scheduled_times_are_consistent_and_cpu_jobs_keep_sampled_queues(sim_root):
    sim = store.open_dataset("a", sim_root).jobs().collect()
    sampled = store.open_dataset("s", sim_root).jobs().collect()
    bad = sim.filter(
        (pl.col("start_time") != pl.col("submit_time") + pl.duration(seconds=pl.col("queue")))
        | (pl.col("end_time") != pl.col("start_time") + pl.duration(seconds=pl.col("duration")))
    )
    assert bad.height == 0
    assert (sim["queue"] >= 0).all()
    cpu = pl.col("gpu_num") == 0
    keys = ["cluster", "submit_time", "user", "duration", "cpu_num"]
    assert sim.filter(cpu).drop("job_id").sort(keys).equals(sampled.filter(cpu).drop("job_id").sort(keys))
    meta = store.open_dataset("a", sim_root).meta["start_times"]
    assert meta["capacity_consistent"] is True and "slurm_schedule" in meta["gpu_jobs"]


def test_capacity_check_fails_when_a_vc_is_overbooked(sim_root):
    ds = store.open_dataset("a", sim_root)
    jobs = ds.jobs().collect()
    vc = jobs.filter(pl.col("gpu_num") > 0)["vc"][0]
    crowd = jobs.with_columns(
        pl.when(pl.col("vc") == vc).then(pl.col("gpu_num") * 1000).otherwise(pl.col("gpu_num")).alias("gpu_num")
    )
    wrong = store.write_dataset("crowd", crowd, ds.vc_gpus(), ds.meta, root=sim_root)
    failed = [c for c in capacity_checks(wrong) if not c.passed]
    assert len(failed) == 1 and failed[0].value > 0


def test_scheduling_on_tight_capacities_queues_jobs_and_never_overbooks():
    jobs, vc_gpus = generate(SynthParams(scale=SCALE, seed=6))
    tight = vc_gpus.with_columns(
        pl.when(pl.col("gpus") > 0).then((pl.col("gpus") // 32).clip(lower_bound=8)).otherwise(0).alias("gpus")
    )
    smallest = tight.filter(pl.col("gpus") > 0).group_by("cluster", "vc").agg(pl.col("gpus").min().alias("least"))
    jobs = jobs.join(smallest, on=["cluster", "vc"], how="left").filter(pl.col("gpu_num") <= pl.col("least"))
    jobs = jobs.drop("least")
    timed, held = slurm_schedule(jobs.filter(pl.col("gpu_num") > 0), tight)
    assert_raised_only_by_drains(held, tight)
    out = apply_schedule(jobs, timed)
    assert (out.filter(pl.col("gpu_num") > 0)["queue"] > 0).sum() > 10
    assert (peak_excess_gpus(out.lazy(), held)["excess_gpus"] <= 0).all()
    assert peak_excess_gpus(jobs.lazy(), tight)["excess_gpus"].max() > 0  # the sampled times overbook them
