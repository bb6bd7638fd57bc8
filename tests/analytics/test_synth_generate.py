"""Tests of the calibrated synthetic Helios trace (analytics.synth.build) and `helios demo`."""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np
import polars as pl
import pytest

import cli
from analytics import schema, store
from analytics.reference import CLUSTERS, summary_rows
from analytics.synth.build import (
    SynthParams,
    _achievable,
    _month_min_gpus,
    _run_days_by_vc_month,
    _with_gpu_time,
    build_dataset,
    generate,
)
from analytics.synth.layout import Capacity

SCALE = 0.01


@pytest.fixture(scope="module")
def small():
    """Jobs and VC capacities of a 1 % trace (seed 11)."""
    return generate(SynthParams(scale=SCALE, seed=11))


def test_same_seed_gives_identical_tables(small):
    jobs, vc_gpus = generate(SynthParams(scale=SCALE, seed=11))
    assert jobs.equals(small[0])
    assert vc_gpus.equals(small[1])


def test_other_seed_gives_other_jobs(small):
    jobs, _ = generate(SynthParams(scale=SCALE, seed=12))
    assert not jobs.equals(small[0])


def test_same_seed_gives_byte_identical_jobs_file(tmp_path):
    a = build_dataset(SynthParams(scale=0.003, seed=5), name="a", root=tmp_path)
    b = build_dataset(SynthParams(scale=0.003, seed=5), name="b", root=tmp_path)
    assert a.jobs_path.read_bytes() == b.jobs_path.read_bytes()
    assert a.version == b.version


@pytest.mark.parametrize("scale", [1e-4, 0.002, SCALE])
def test_row_counts_scale_with_the_published_counts(scale, small):
    jobs = small[0] if scale == SCALE else generate(SynthParams(scale=scale, seed=1))[0]
    counts = jobs.group_by("cluster").agg(pl.len().alias("n"), (pl.col("gpu_num") > 0).sum().alias("gpu"))
    got = {r["cluster"]: r for r in counts.iter_rows(named=True)}
    for cluster in CLUSTERS:
        published = summary_rows()[cluster]
        assert got[cluster]["n"] == round(published["job_num"] * scale)
        assert got[cluster]["gpu"] == round(published["gpu_job_num"] * scale)


def test_jobs_conform_to_the_canonical_schema(small):
    jobs = small[0]
    assert jobs.schema == pl.Schema(schema.JOB_SCHEMA)
    assert jobs.select(schema.JOB_REQUIRED_NON_NULL).null_count().sum_horizontal().item() == 0
    assert jobs["job_name"].null_count() == jobs.height
    assert set(jobs["state"].unique()) <= {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL"}
    assert jobs["user"].str.starts_with("u").all() and jobs["vc"].str.starts_with("vc").all()
    assert (jobs["cpu_num"] > 0).all()
    expected_nodes = np.maximum(1, np.ceil(jobs["gpu_num"].to_numpy() / schema.GPUS_PER_NODE))
    assert np.array_equal(jobs["node_num"].to_numpy(), expected_nodes)


def test_times_are_consistent(small):
    jobs = small[0]
    second = pl.duration(seconds=1)
    assert (jobs["queue"] >= 0).all() and (jobs["duration"] >= 0).all()
    bad = jobs.filter(
        (pl.col("start_time") != pl.col("submit_time") + pl.col("queue") * second)
        | (pl.col("end_time") != pl.col("start_time") + pl.col("duration") * second)
    )
    assert bad.height == 0
    assert jobs["submit_time"].min() >= datetime(2020, 4, 1)
    assert jobs["submit_time"].max() <= datetime(2020, 9, 28, 23, 59, 59)


def test_job_ids_increase_in_submit_order_per_cluster(small):
    ordered = small[0].sort("cluster", "job_id")
    backwards = ordered.filter(
        (pl.col("submit_time").diff().over("cluster") < pl.duration(seconds=0))
        | (pl.col("job_id").diff().over("cluster") <= 0)
    )
    assert backwards.height == 0


def test_capacities_match_the_published_gpu_counts(small):
    vc_gpus = small[1]
    daily = vc_gpus.group_by("cluster", "date").agg(pl.col("gpus").sum())
    means = dict(daily.group_by("cluster").agg(pl.col("gpus").mean()).iter_rows())
    for cluster in CLUSTERS:
        assert math.floor(means[cluster]) == int(summary_rows()[cluster]["gpu_num"])
    assert math.floor(sum(means.values())) == int(summary_rows()["total"]["gpu_num"]) == 6220
    earth = vc_gpus.filter(pl.col("cluster") == "Earth")
    assert earth["vc"].n_unique() == 25 and earth.height == 25 * 181
    assert (earth["gpus"] == 0).any()  # VCs without GPUs on a day are still listed


def test_gpu_jobs_fit_their_vc_on_the_submit_day(small):
    jobs, vc_gpus = small
    gpu_jobs = jobs.filter(pl.col("gpu_num") > 0).with_columns(pl.col("submit_time").dt.date().alias("date"))
    joined = gpu_jobs.join(vc_gpus, on=["cluster", "vc", "date"], how="left")
    assert joined["gpus"].null_count() == 0
    assert (joined["gpu_num"] <= joined["gpus"]).all()


def test_users_and_vcs_are_plausible(small):
    jobs = small[0]
    users = jobs.group_by("cluster").agg(pl.col("user").n_unique())
    assert 500 <= users["user"].sum() <= 713
    per_user = jobs.group_by("user").agg(pl.col("vc").n_unique().alias("vcs"), pl.col("cluster").n_unique().alias("c"))
    # users keep to a VC or two; the biggest users hold more GPU time than one VC has, and a few of every user's
    # jobs are spread by count over all users
    assert per_user["vcs"].median() <= 2 and per_user["vcs"].quantile(0.95) <= 6
    assert (per_user["c"] == 1).all()


def test_invalid_scale_is_rejected():
    with pytest.raises(ValueError, match="scale"):
        generate(SynthParams(scale=0.0))


def test_demo_command_writes_the_dataset_with_meta(data_root, capsys):
    assert cli.main(["demo", "--scale", "0.002", "--seed", "3", "--name", "tiny", "--quiet"]) == 0
    ds = store.open_dataset("tiny")
    meta = ds.meta
    assert meta["source"] == "synthetic" and meta["format"] == "helios-synth"
    assert meta["generator"] == {"module": "analytics.synth.build", "scale": 0.002, "seed": 3}
    assert meta["clusters"] == list(CLUSTERS)
    assert meta["period"] == {"start": "2020-04-01 00:00:00", "end": "2020-09-28 23:59:59"}
    assert meta["row_counts"]["jobs"] == ds.jobs().select(pl.len()).collect().item()
    assert meta["quality"]["issues"] == {} and meta["quality"]["null_counts"]["job_name"] == meta["row_counts"]["jobs"]
    assert "CC BY 4.0" in meta["attribution"]
    assert "dataset tiny" in capsys.readouterr().out


def test_demo_command_rejects_bad_arguments(data_root, capsys):
    with pytest.raises(SystemExit):
        cli.main(["demo", "--scale", "0"])
    assert cli.main(["demo", "--scale", "0.001", "--name", "../x", "--quiet"]) == 2
    assert "invalid dataset name" in capsys.readouterr().err


def test_user_completion_ratios_move_to_bins_their_users_can_reach():
    ratio = np.array([0.15, 0.25, 0.15, 0.05, 0.95, 0.5, 0.199])
    jobs = np.array([5, 7, 100, 3, 10, 1, 10])
    out = _achievable(ratio, jobs, 10)
    done = out * jobs
    assert np.allclose(done, np.rint(done))  # whole counts of completed jobs
    bins = np.minimum(np.floor(out * 10 + 1e-9), 9)
    assert sorted(bins.tolist()) == sorted(np.minimum(np.floor(ratio * 10), 9).tolist())  # the histogram stays
    assert bins[0] == 2 and bins[1] == 1  # 5 jobs cannot complete 10-20 %: swapped with the 7-job user's 25 %
    assert bins[5] == 9 and bins[4] == 5  # 1 job cannot complete half: takes the 10-job user's 95 %


def test_run_days_are_the_gpu_time_weighted_mean_duration_of_each_vcs_months_jobs():
    day_s = 86_400
    month = np.array([0, 0, 1, 0])  # two April jobs and one May job of VC 0, an April job of VC 1
    duration_s = np.array([10 * day_s, 60, day_s // 4, 3 * day_s])
    gpus = np.array([8, 1, 2, 1])
    run_days = _run_days_by_vc_month(np.array([0, 0, 0, 1]), 3, month, duration_s, gpus)
    assert run_days[0, :3].tolist() == [10, 1, 1]  # a long 8-GPU job outweighs a minute's; a short run is one day
    assert run_days[1, 0] == 3  # each VC its own jobs
    assert (run_days >= 1).all()  # a VC or month without jobs: one day


def test_durations_are_stretched_to_the_gpu_time_asked():
    duration_s = np.array([1, 100, 10_000])
    gpus = np.array([1, 2, 8])
    out = _with_gpu_time(duration_s, gpus, 1.02 * float((gpus * duration_s).sum()))
    assert out.tolist() == [1, 102, 10_200]  # one factor for every job
    assert _with_gpu_time(np.zeros(2, np.int64), np.ones(2, np.int64), 5.0).tolist() == [0, 0]  # no GPU time: kept


def test_a_movable_job_fits_a_vc_only_by_the_days_it_may_start_on():
    # a VC with 16 GPUs from June 27 only (April has 30 days, May 31: June 1 is day 61); a 5-day June job can start
    # on June 1-25 at its time of day, so the VC does not hold it; a 1-hour job can start on June 27-30
    day_s = 86_400
    gpus_by_day = np.zeros((1, 181), dtype=np.int32)
    gpus_by_day[0, 61 + 26 : 61 + 30] = 16
    cap = Capacity(["vcA"], gpus_by_day, pl.DataFrame())
    submit_s = np.array([61 * day_s + 3_600, 61 * day_s + 3_600])
    out = _month_min_gpus(cap, submit_s, np.array([5 * day_s, 3_600]))
    assert out[:, 0].tolist() == [0, 16]
