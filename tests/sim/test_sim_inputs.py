"""Workload selection, VC sizes, load factor, estimators and the estimates file."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from analytics import schema
from sim import estimators, workload
from sim.model import digest, joined

T0 = datetime(2020, 4, 1)


def jobs_frame(n=400, seed=0, names=False):
    rng = np.random.default_rng(seed)
    users = rng.choice(["u1", "u2", "u3", "u4"], n)
    base = {"u1": 30, "u2": 600, "u3": 5000, "u4": 60000}
    dur = np.array([int(base[u] * rng.uniform(0.5, 1.5)) for u in users])
    df = pl.DataFrame(
        {
            "cluster": "Earth",
            "job_id": np.arange(n),
            "user": users,
            "vc": rng.choice(["vcA", "vcB"], n),
            "job_name": [f"{u}job-{k}" for k, u in enumerate(users)] if names else [None] * n,
            "gpu_num": rng.choice([0, 1, 2, 8], n),
            "cpu_num": 4.0,
            "node_num": 1,
            "submit_time": [T0 + timedelta(minutes=10 * k) for k in range(n)],
            "duration": dur,
        }
    )
    return schema.conform_jobs(df)


def test_select_window_keeps_gpu_jobs_in_window_and_history_before():
    jobs = jobs_frame()
    win = workload.select_window(jobs, "Earth", start=T0 + timedelta(days=1), end=T0 + timedelta(days=2))
    assert win.jobs.get_column("gpu_num").min() > 0
    assert win.jobs.get_column("submit_time").min() >= T0 + timedelta(days=1)
    assert win.jobs.get_column("submit_time").max() <= T0 + timedelta(days=2)
    assert win.history.get_column("submit_time").max() < T0 + timedelta(days=1)
    assert win.vcs == ("vcA", "vcB")


def test_a_window_without_an_end_runs_to_the_end_of_its_last_submission_day():
    jobs = jobs_frame()
    win = workload.select_window(jobs, "Earth")
    last = jobs.filter((pl.col("cluster") == "Earth") & (pl.col("gpu_num") > 0))["submit_time"].max()
    assert win.end == datetime.combine(last.date(), datetime.min.time()) + timedelta(days=1, seconds=-1)
    assert win.jobs["submit_time"].max() == last


def test_select_window_errors_name_the_problem():
    with pytest.raises(workload.WorkloadError, match="cluster 'Mars'"):
        workload.select_window(jobs_frame(), "Mars")
    with pytest.raises(workload.WorkloadError, match="vcZ"):
        workload.select_window(jobs_frame(), "Earth", vcs=["vcZ"])


def test_vc_nodes_on_date_and_scaling():
    vc_gpus = pl.DataFrame(
        {
            "cluster": "Earth",
            "vc": ["vcA", "vcA", "vcB"],
            "date": [date(2020, 4, 1), date(2020, 4, 3), date(2020, 4, 1)],
            "gpus": [16, 64, 9],
        }
    )
    assert workload.vc_nodes_on(vc_gpus, "Earth", date(2020, 4, 2)) == {"vcA": 2, "vcB": 1}
    assert workload.vc_nodes_on(vc_gpus, "Earth", date(2020, 4, 5)) == {"vcA": 8, "vcB": 1}
    assert workload.scale_nodes({"vcA": 8, "vcB": 1, "vcC": 0}, 0.5) == {"vcA": 4, "vcB": 1, "vcC": 0}


def test_node_steps_are_compressed_as_submissions_and_scaled_as_node_counts():
    steps = ((0, 8), (86_400, 1), (172_801, 0))
    assert workload.scale_steps(steps, 1.0, 1.0) == steps
    assert workload.scale_steps(steps, 2.0, 0.5) == ((0, 4), (43_200, 1), (86_400, 0))
    with pytest.raises(workload.WorkloadError, match="capacity scale"):
        workload.scale_steps(steps, 1.0, 0.0)


def test_vc_nodes_csv_errors_name_row_and_column(tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("vc,node num\n6214e9,64\n")
    assert workload.read_vc_nodes_csv(good) == {"6214e9": 64}
    bad = tmp_path / "bad.csv"
    bad.write_text("vc,nodes\na,4\nb,x\n")
    with pytest.raises(workload.WorkloadError, match=r"bad.csv: row 3, column 'nodes'"):
        workload.read_vc_nodes_csv(bad)


def test_to_workload_seconds_and_load_factor():
    win = workload.select_window(jobs_frame(), "Earth", start=T0, end=T0 + timedelta(days=1))
    w1 = workload.to_workload(win, {"vcA": 2})
    w2 = workload.to_workload(win, {"vcA": 2}, load_factor=2.0)
    assert w1.vc_nodes == (2, 0)
    assert w1.submit_s[0] == 0
    assert np.array_equal(w2.submit_s, w1.submit_s // 2)
    assert (w1.recorded_start_s == -1).all()


def test_the_jobs_running_or_waiting_when_a_window_opens_are_carried_in_running_first():
    jobs = (
        jobs_frame()
        .with_columns((pl.col("submit_time") + pl.duration(seconds=pl.col("job_id") % 3 * 7_200)).alias("start_time"))
        .with_columns((pl.col("start_time") + pl.duration(seconds=pl.col("duration"))).alias("end_time"))
    )
    opens = T0 + timedelta(days=1)
    window = workload.select_window(jobs, "Earth", start=opens)
    carried = workload.carried_in(window)
    history = window.history.filter(pl.col("end_time") > opens)
    running = history.filter(pl.col("start_time") < opens)
    assert len(carried) == history.height and set(carried.job_id) == set(history["job_id"])
    assert (carried.submit_s == 0).all() and carried.job_id[: running.height].tolist() == running["job_id"].to_list()
    left_s = (running["end_time"] - opens).dt.total_seconds().to_numpy()
    assert carried.duration_s[: running.height].tolist() == left_s.tolist()
    assert (carried.recorded_start_s[: running.height] == 0).all()
    limited = workload.carried_in(
        workload.select_window(jobs.with_columns(pl.lit(100_000).alias("timelimit_s")), "Earth", start=opens)
    )
    started_s = (running["start_time"] - opens).dt.total_seconds().to_numpy()
    assert limited.scheduler.timelimit_s[: running.height].tolist() == (100_000 + started_s).tolist()
    assert (limited.scheduler.timelimit_s[running.height :] == 100_000).all()
    both = joined(carried, workload.to_workload(window, {"vcA": 2}))
    assert both.after(len(carried)).job_id.tolist() == window.jobs.filter(pl.col("gpu_num") > 0)["job_id"].to_list()
    assert both.scheduler.user[: len(carried)].tolist() == carried.scheduler.user.tolist()
    assert both.take(np.array([1, 0])).job_id.tolist() == both.job_id[[1, 0]].tolist()


def test_a_digest_follows_the_content_of_workloads_and_their_columns():
    win = workload.select_window(jobs_frame(), "Earth", start=T0, end=T0 + timedelta(days=1))
    w = workload.to_workload(win, {"vcA": 2})
    same = workload.to_workload(win, {"vcA": 2})
    assert digest(w, (1, "a")) == digest(same, (1, "a")) != digest(w, (1, "b"))
    users = w.scheduler.user.copy()
    users[0] = "someone else"
    assert digest(replace(w, scheduler=replace(w.scheduler, user=users))) != digest(w)
    assert digest(replace(w, gpu_num=w.gpu_num + 1)) != digest(w)


def split(names=False):
    jobs = jobs_frame(names=names)
    return workload.select_window(jobs, "Earth", start=T0 + timedelta(days=2))


@pytest.mark.parametrize("name", ["oracle", "noisy-oracle", "history", "lightgbm"])
def test_estimators_predict_one_value_per_window_job(name):
    win = split()
    pred = estimators.predict(name, win.history, win.jobs, seed=1)
    assert pred.shape == (win.jobs.height,)
    assert np.isfinite(pred).all()


def test_history_and_lightgbm_learn_the_users_scale_without_names():
    win = split()
    true_s = win.jobs.get_column("duration").to_numpy().astype(float)
    for name in ("history", "lightgbm"):
        q = estimators.quality(estimators.predict(name, win.history, win.jobs), true_s)
        assert q["spearman"] > 0.8, (name, q)
        assert q["median_ape_pct"] < 40, (name, q)


def test_lightgbm_uses_job_names_when_present():
    win = split(names=True)
    pred = estimators.predict("lightgbm", win.history, win.jobs)
    q = estimators.quality(pred, win.jobs.get_column("duration").to_numpy().astype(float))
    assert q["spearman"] > 0.8


def test_noisy_oracle_is_seeded_and_can_be_non_positive():
    win = split()
    a = estimators.predict("noisy-oracle", win.history, win.jobs, seed=3)
    b = estimators.predict("noisy-oracle", win.history, win.jobs, seed=3)
    c = estimators.predict("noisy-oracle", win.history, win.jobs, seed=4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert (a <= 0).any()


def test_estimates_file_used_as_given_with_warning(tmp_path):
    win = split()
    ids = win.jobs.get_column("job_id").to_list()
    path = tmp_path / "est.csv"
    path.write_text(
        "job_id,predicted_duration_s\n" + "".join(f"{i},{-5 if k == 0 else k}\n" for k, i in enumerate(ids))
    )
    with pytest.warns(UserWarning, match="1 prediction"):
        pred = estimators.read_estimates(path, win.jobs)
    assert pred[0] == -5 and pred[3] == 3
    path.write_text("job_id,predicted_duration_s\n1,abc\n")
    with pytest.raises(estimators.EstimateError, match="row 2, column 'predicted_duration_s'"):
        estimators.read_estimates(path, win.jobs)


def test_quality_metrics():
    q = estimators.quality(np.array([10.0, 20.0, 30.0]), np.array([10.0, 40.0, 20.0]))
    assert q["mae_s"] == pytest.approx(10.0)
    assert q["median_ape_pct"] == pytest.approx(50.0)
    assert q["spearman"] == pytest.approx(0.5)


def test_select_window_leaves_out_jobs_still_pending_or_running():
    jobs = jobs_frame()
    states = ["RUNNING", "PENDING", "SUSPENDED", "REQUEUED", None, "COMPLETED", "TIMEOUT"]
    jobs = jobs.with_columns(pl.Series("state", [states[i % len(states)] for i in range(jobs.height)]))
    win = workload.select_window(jobs, "Earth", start=T0 + timedelta(days=1), end=T0 + timedelta(days=2))
    for frame in (win.jobs, win.history):
        kept = set(frame.get_column("state").to_list())
        assert kept <= {None, "COMPLETED", "TIMEOUT"} and frame.height > 0
