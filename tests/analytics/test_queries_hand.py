"""Study queries on the small trace of conftest.py against values worked out by hand (see its docstring)."""

from __future__ import annotations

from datetime import date, datetime

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analytics import queries as q
from analytics.filters import JobFilter

# Header of the artifact's helios_cluster_summary.csv (HeliosArtifact, MIT; its rows are the summary block of
# analytics/reference/helios_reference.json), copied verbatim.
CSV_HEADER = (
    "id,gpu_num,job_num,cpu_job_num,gpu_job_num,avg_run_time_cpu,avg_run_time_gpu,avg_que_time_cpu,avg_que_time_gpu,"
    "avg_gpu_num,med_run_time_cpu,med_run_time_gpu,med_que_time_cpu,med_que_time_gpu,med_gpu_num,complete_rate,"
    "cancel_rate,fail_rate,complete_rate_cpu,cancel_rate_cpu,fail_rate_cpu,complete_rate_gpu,cancel_rate_gpu,"
    "fail_rate_gpu,complete_gpu_time,cancel_gpu_time,fail_gpu_time"
)

# Alpha: CPU jobs A3 (1 s, queue 5, COMPLETED), A5 (600 s, queue 0, TIMEOUT); GPU jobs A1 (2 GPUs, 130 s, q 40, C),
# A2 (8, 50 s, q 0, CANCELLED), A4 (1, 60 s, q 30, FAILED), A6 (16, 40 s, q 30, C).
# Beta: CPU B3 (50 s, q 0, C); GPU B1 (4, 0 s, q 0, C), B2 (1, 7200 s, q 1800, X), B4 (2, 7200, q 0, NODE_FAIL),
# B5 (1, 600 s, q 300, C). total = all 11 jobs; medians of an even count are the mean of the two middle values.
SUMMARY_ROWS = [
    # id, gpu_num (13.33 -> 13, 16, 13 + 16), job_num, cpu, gpu,
    # avg_run cpu (1+600)/2 | 50 | 651/3, gpu 280/4 | 15000/4 | 15280/8,
    # avg_que cpu 5/2 | 0 | 5/3 = 1.667, gpu 100/4 | 2100/4 | 2200/8, avg_gpu_num 27/4 | 8/4 | 35/8,
    # med_run cpu, gpu (50+60)/2 | (600+7200)/2 | (60+130)/2, med_que cpu, gpu (30+30)/2 | (0+300)/2 | (30+30)/2,
    # med_gpu_num (2+8)/2 | (1+2)/2 | (2+2)/2,
    # rates all (3, 1, 2 of 6 | 3, 1, 1 of 5 | 6, 2, 3 of 11), cpu, gpu, GPU-s completed/cancelled/failed.
    ("Alpha", 13, 6, 2, 4, 300.5, 70.0, 2.5, 25.0, 6.75, 300.5, 55.0, 2.5, 30.0, 5.0,
     0.5, 0.167, 0.333, 0.5, 0.0, 0.5, 0.5, 0.25, 0.25, 900.0, 400.0, 60.0),
    ("Beta", 16, 5, 1, 4, 50.0, 3750.0, 0.0, 525.0, 2.0, 50.0, 3900.0, 0.0, 150.0, 1.5,
     0.6, 0.2, 0.2, 1.0, 0.0, 0.0, 0.5, 0.25, 0.25, 600.0, 7200.0, 14400.0),
    ("total", 29, 11, 3, 8, 217.0, 1910.0, 1.667, 275.0, 4.375, 50.0, 95.0, 0.0, 30.0, 2.0,
     0.545, 0.182, 0.273, 0.667, 0.0, 0.333, 0.5, 0.25, 0.25, 1500.0, 7600.0, 14460.0),
]  # fmt: skip


def test_summary_columns_are_the_published_header(small_ds):
    assert ",".join(q.cluster_summary(small_ds).columns) == CSV_HEADER
    assert ",".join(q.SUMMARY_COLUMNS) == CSV_HEADER


def test_summary_matches_hand_values(small_ds):
    expected = pl.DataFrame(SUMMARY_ROWS, schema=list(q.SUMMARY_COLUMNS), orient="row")
    assert_frame_equal(q.cluster_summary(small_ds), expected.cast(q.cluster_summary(small_ds).schema))


def test_summary_vc_filter_uses_vc_capacity(small_ds):
    # Beta with vcB1 only: 8 GPUs a day instead of the "*" row's 16.
    out = q.cluster_summary(small_ds, JobFilter(vcs=("vcB1",)))
    assert out.select("id", "gpu_num").rows() == [("Beta", 8), ("total", 8)]


def _busy_minutes(df: pl.DataFrame) -> list[tuple]:
    cols = ["cluster", "time", "running_gpujob_num", "running_gpu_num", "running_gpu_multi", "total_gpu_num"]
    return df.filter(pl.col("running_gpujob_num") > 0).select(*cols, "gpu_utilization", "gpu_utilization_multi").rows()


def test_utilization_minutes_by_hand(small_ds):
    out = q.utilization_minutes(small_ds)
    assert out.height == 2 * 4320
    rows = _busy_minutes(out)
    t = datetime
    assert rows[:5] == [
        ("Alpha", t(2020, 4, 1, 0, 1), 1, 2, 2, 12, 0.167, 0.167),  # A1
        ("Alpha", t(2020, 4, 1, 0, 2), 2, 10, 10, 12, 0.833, 0.833),  # A1 + A2
        ("Alpha", t(2020, 4, 1, 0, 3), 2, 12, 18, 12, 1.0, 1.5),  # A1 + A6 = 18 GPUs, capped at 12; multi not capped
        ("Alpha", t(2020, 4, 2, 23, 59), 1, 1, 0, 12, 0.083, 0.0),  # A4, Apr 2 capacity
        ("Alpha", t(2020, 4, 3, 0, 0), 1, 1, 0, 16, 0.062, 0.0),  # A4, Apr 3 capacity; 1/16 rounds half-even
    ]
    beta = [r for r in rows if r[0] == "Beta"]
    assert len(beta) == 6 + 1 + 121 + 60  # B5, B1, B2, B4 (clipped at the period end)
    assert beta[0][1] == t(2020, 4, 1, 0, 0) and beta[5][1] == t(2020, 4, 1, 0, 5)
    assert (t(2020, 4, 1, 12, 0), 4, 0.25) in [(r[1], r[3], r[6]) for r in beta]  # B1: zero duration, one minute
    assert beta[-1][1] == t(2020, 4, 3, 23, 59)


def test_utilization_minutes_vc_filter_changes_capacity(small_ds):
    out = q.utilization_minutes(small_ds, JobFilter(vcs=("vcB1",)))
    first = out.filter(pl.col("cluster") == "Beta").row(0, named=True)
    assert (first["total_gpu_num"], first["gpu_utilization"]) == (8, 0.125)
    assert out.filter(pl.col("cluster") == "Alpha")["total_gpu_num"].is_null().all()


def test_monthly_and_diurnal_utilization_by_hand(small_ds):
    # Alpha: per-minute utilisations 0.167 + 0.833 + 1.0 + 0.083 + 0.062 = 2.145 over 4,320 minutes.
    # Beta: 127 minutes at 0.062, one at 0.25 and 60 at 0.125 = 15.624.
    monthly = q.monthly_utilization(small_ds)
    assert monthly["month"].to_list() == [date(2020, 4, 1)] * 2
    assert monthly["gpu_utilization_pct"].to_list() == pytest.approx([214.5 / 4320, 1562.4 / 4320])
    # Multi: Alpha 0.167 + 0.833 + 1.5; single: Alpha 0.083 + 0.062.
    assert monthly["multi_gpu_utilization_pct"][0] == pytest.approx(250.0 / 4320)
    assert monthly["single_gpu_utilization_pct"][0] == pytest.approx(14.5 / 4320)
    diurnal = q.diurnal_utilization(small_ds)
    assert diurnal.height == 48
    alpha = dict(diurnal.filter(pl.col("cluster") == "Alpha").select("hour", "gpu_utilization_pct").rows())
    assert alpha[0] == pytest.approx(206.2 / 180)  # hour 0 of 3 days = 180 minutes
    assert alpha[23] == pytest.approx(8.3 / 180)
    assert alpha[12] == 0.0


def test_utilization_resampled_daily(small_ds):
    out = q.utilization_resampled(small_ds, every="1d").filter(pl.col("cluster") == "Alpha")
    assert out["time"].to_list() == [datetime(2020, 4, d) for d in (1, 2, 3)]
    assert out["gpu_utilization"].to_list() == pytest.approx([2.0 / 1440, 0.083 / 1440, 0.062 / 1440])
    with pytest.raises(ValueError, match="every"):
        q.utilization_resampled(small_ds, every="1 hour; DROP")


def test_throughput_by_hand(small_ds):
    out = q.throughput_10min(small_ds)
    assert out.height == 2 * 432
    row = out.filter((pl.col("cluster") == "Alpha") & (pl.col("time") == datetime(2020, 4, 1))).row(0, named=True)
    # A1, A2, A6 are submitted, started and ended in 00:00-00:10 with 2 + 8 + 16 GPUs.
    assert [row[k] for k in ("submit_job_all", "submit_gpu_num", "start_gpu_job", "end_job_all")] == [3, 26, 3, 3]
    beta = out.filter(pl.col("cluster") == "Beta")
    assert beta["submit_job_all"].sum() == 4  # B5 was submitted before the period
    assert beta["end_gpu_num"].sum() == 1 + 4 + 1  # B5, B1, B2 end inside; B4 ends after the period
    bin_8 = beta.filter(pl.col("time") == datetime(2020, 4, 2, 8)).row(0, named=True)
    assert (bin_8["submit_job_all"], bin_8["submit_gpu_job"], bin_8["start_job_all"]) == (2, 1, 1)  # B2, B3; B3


def test_monthly_jobs_by_hand(small_ds):
    out = q.monthly_jobs(small_ds)
    assert out.rows() == [
        ("Alpha", date(2020, 4, 1), 6, 2, 4, 1, 3),
        ("Beta", date(2020, 3, 1), 1, 0, 1, 1, 0),  # B5, submitted Mar 31
        ("Beta", date(2020, 4, 1), 4, 1, 3, 1, 2),
    ]


def test_submission_patterns_by_hand(small_ds):
    hw = q.hour_weekday_submissions(small_ds)
    assert hw.height == 2 * 7 * 24 and hw["jobs"].sum() == 11
    got = {(c, wd, h): n for c, wd, h, n in hw.filter(pl.col("jobs") > 0).rows()}
    assert got == {
        ("Alpha", 2, 0): 3, ("Alpha", 2, 10): 1, ("Alpha", 3, 23): 1, ("Alpha", 4, 5): 1,
        ("Beta", 1, 23): 1, ("Beta", 2, 12): 1, ("Beta", 3, 8): 2, ("Beta", 4, 23): 1,
    }  # fmt: skip
    di = q.diurnal_submissions(small_ds).filter(pl.col("gpu_jobs_per_hour") > 0)
    # GPU-job submissions in the period per hour of day / 3 days: Alpha 00h A1, A2, A6; 23h A4. Beta 08h B2,
    # 12h B1, 23h B4 (B5 is before the period, B3 a CPU job).
    assert di.rows() == [
        ("Alpha", 0, 1.0), ("Alpha", 23, 1 / 3), ("Beta", 8, 1 / 3), ("Beta", 12, 1 / 3), ("Beta", 23, 1 / 3)
    ]  # fmt: skip


def _pct_at(df: pl.DataFrame, cluster: str, x_col: str) -> dict:
    return dict(df.filter(pl.col("cluster") == cluster).select(x_col, "pct").rows())


def test_cdfs_by_hand(small_ds):
    gpu = q.duration_cdf(small_ds)
    assert gpu["x_s"].unique().sort().to_list() == list(q.POW2_X_S)
    alpha = _pct_at(gpu, "Alpha", "x_s")  # 40, 50, 60, 130 s
    assert (alpha[32], alpha[64], alpha[128], alpha[256]) == (0.0, 75.0, 75.0, 100.0)
    beta = _pct_at(gpu, "Beta", "x_s")  # 0, 600, 7200, 7200 s
    assert (beta[1], beta[512], beta[1024], beta[4096], beta[8192]) == (25.0, 25.0, 50.0, 50.0, 100.0)
    cpu = _pct_at(q.duration_cdf(small_ds, kind="cpu"), "Alpha", "x_s")  # 1, 600 s
    assert (cpu[1], cpu[512], cpu[1024]) == (50.0, 50.0, 100.0)
    queue = _pct_at(q.queue_cdf(small_ds), "Alpha", "x_s")  # 0, 30, 30, 40 s
    assert (queue[1], queue[16], queue[32], queue[64]) == (25.0, 25.0, 75.0, 100.0)


def test_gpu_num_cdf_by_hand(small_ds):
    jobs = q.gpu_num_cdf(small_ds)
    assert jobs["x_gpus"].to_list()[:13] == list(q.GPU_NUM_X)
    alpha = _pct_at(jobs, "Alpha", "x_gpus")  # 1, 2, 8, 16 GPUs
    assert [alpha[x] for x in ("1", "2", "4", "8", "12", "16", ">64")] == [25.0, 50.0, 50.0, 75.0, 75.0, 100.0, 100.0]
    time = q.gpu_num_cdf(small_ds, weight="gpu_time")
    alpha = _pct_at(time, "Alpha", "x_gpus")  # GPU-s: 60 (1 GPU), 260 (2), 400 (8), 640 (16) of 1,360
    assert [alpha[x] for x in ("1", "2", "8", "16")] == pytest.approx([6000 / 1360, 32000 / 1360, 72000 / 1360, 100])
    beta = _pct_at(time, "Beta", "x_gpus")  # 7,800 (1 GPU), 14,400 (2), 0 (4) of 22,200
    assert [beta[x] for x in ("1", "2", "4")] == pytest.approx([780000 / 22200, 100.0, 100.0])


def test_final_states_by_hand(small_ds):
    by_gpu = q.final_state_by_gpu_num(small_ds)
    # 1 GPU: A4 failed, B2 cancelled, B5 completed; 2: A1 completed, B4 failed; 4: B1; 8: A2; 16: A6.
    assert by_gpu["gpu_num"].to_list() == ["1", "2", "4", "8", "16"]
    assert by_gpu.row(0)[1:] == pytest.approx((100 / 3, 100 / 3, 100 / 3))
    assert by_gpu.row(1)[1:] == (50.0, 0.0, 50.0)
    assert by_gpu.row(3)[1:] == (0.0, 100.0, 0.0)
    kinds = q.final_state_cpu_vs_gpu(small_ds)
    assert kinds["job_type"].to_list() == ["CPU", "GPU"]
    assert kinds.row(0)[1:] == pytest.approx((200 / 3, 0.0, 100 / 3))  # A3 C, A5 TIMEOUT, B3 C
    assert kinds.row(1)[1:] == (50.0, 25.0, 25.0)
    share = q.gpu_time_share_by_state(small_ds)
    assert share.select("state_group", "gpu_time").rows() == [
        ("COMPLETED", 1500.0), ("CANCELLED", 7600.0), ("FAILED", 14460.0)
    ]  # fmt: skip
    assert share["pct"].to_list() == pytest.approx([150000 / 23560, 760000 / 23560, 1446000 / 23560])


def test_user_table_by_hand(small_ds):
    users = q.user_table(small_ds)
    assert users.select("cluster", "user").rows() == [
        ("Alpha", "u1"), ("Alpha", "u2"), ("Alpha", "u3"), ("Beta", "u4"), ("Beta", "u5"), ("Beta", "u1")
    ]  # fmt: skip
    u3 = users.filter((pl.col("cluster") == "Alpha") & (pl.col("user") == "u3")).row(0, named=True)
    # A5: CPU job, 8 CPUs x 600 s, TIMEOUT; A6: 16 GPUs x 40 s, 32 CPUs, queue 30, COMPLETED.
    assert u3["vc_list"] == ["vcA1", "vcA2"] and u3["vc_list_gpu"] == ["vcA2"] and u3["vc_num"] == 2
    assert (u3["total_gpu_time"], u3["total_cpu_only_time"], u3["total_cpu_time"]) == (640.0, 4800.0, 6080.0)
    assert (u3["completed_gpu_percent"], u3["failed_percent"]) == (1.0, 0.0)  # TIMEOUT is not FAILED here
    assert (u3["avg_gpu_num"], u3["avg_cpu_pend_time"], u3["avg_gpu_pend_time"]) == (8.0, 0.0, 30.0)
    u1 = users.filter((pl.col("cluster") == "Alpha") & (pl.col("user") == "u1")).row(0, named=True)
    assert (u1["cpu_only"], u1["avg_cpu_run_time"], u1["avg_gpu_run_time"], u1["cancelled_percent"]) == (
        False, 0.0, 90.0, 0.5
    )  # fmt: skip


def test_user_concentration_by_hand(small_ds):
    out = q.user_concentration(small_ds)
    alpha = dict(out.filter(pl.col("cluster") == "Alpha").select("user_pct", "share_pct").rows())
    # GPU time u1 660, u3 640, u2 60 (total 1,360) at x = 0, 50, 100; linear in between.
    assert [alpha[p] for p in (0, 25, 50, 75, 100)] == pytest.approx(
        [66000 / 1360, (66000 / 1360 + 130000 / 1360) / 2, 130000 / 1360, (130000 / 1360 + 100) / 2, 100]
    )
    beta = dict(out.filter(pl.col("cluster") == "Beta").select("user_pct", "share_pct").rows())
    assert [beta[p] for p in (0, 50, 100)] == pytest.approx([1500000 / 22200, 100, 100])  # u5, u4, u1 (0 s)
    cpu = q.user_concentration(small_ds, metric="cpu_only_time")
    assert cpu.filter(pl.col("cluster") == "Alpha")["share_pct"][0] == pytest.approx(480000 / 4802)
    with pytest.raises(ValueError, match="metric"):
        q.user_concentration(small_ds, metric="nope")


def test_user_completion_histogram_by_hand(small_ds):
    # Over both clusters: u1 2 of 3 GPU jobs completed (66.7 %), u2 0/1, u3 1/1 (100 % -> last bin), u4 0/1, u5 1/2.
    out = q.user_completion_histogram(small_ds)
    assert out["bin"].to_list() == list(q.HIST_BINS)
    assert out["users"].to_list() == [2, 0, 0, 0, 0, 1, 1, 0, 0, 1]


def test_vc_utilization_by_hand(small_ds):
    out = q.vc_utilization(small_ds)
    # VC size = mean GPUs over the period's days: vcA2 has 4, 4 and 8.
    assert out.select("cluster", "vc", "gpu_jobs").rows() == [
        ("Alpha", "vcA1", 2),
        ("Alpha", "vcA2", 2),
        ("Beta", "vcB1", 4),
    ]
    assert out["mean_gpus"].to_list() == pytest.approx([8.0, 16 / 3, 8.0])
    # vcA1: 25 % (A1) + 100 % (A1 + A2 = 10 GPUs capped at 8) + 25 % over 4,320 minutes.
    assert out["mean_pct"].to_list() == pytest.approx([150 / 4320, 137.5 / 4320, 3137.5 / 4320])
    assert out.row(0, named=True)["avg_gpus_per_job"] == 5.0
    # Apr 2 08:00-10:00: B2 (1 of 8 GPUs) runs 08:30-09:59, 90 of the 120 minutes -> 30 zeros then 90 x 12.5 %.
    window = JobFilter(start=datetime(2020, 4, 2, 8), end=datetime(2020, 4, 2, 10), clusters=("Beta",))
    row = q.vc_utilization(small_ds, window).row(0, named=True)
    assert row["mean_pct"] == pytest.approx(9.375)
    assert (row["q1_pct"], row["median_pct"], row["q3_pct"]) == (9.375, 12.5, 12.5)  # q1 = 0.75 of the way 0 -> 12.5
    assert (row["whisker_low_pct"], row["whisker_high_pct"]) == (12.5, 12.5)  # zeros are below q1 - 1.5 IQR
    assert (row["avg_gpus_per_job"], row["avg_duration_s"], row["avg_queue_s"]) == (1.0, 7200.0, 1800.0)


def test_vc_utilization_leaves_out_excluded_days_and_keeps_the_largest_vcs(small_ds):
    # Without Apr 2, vcA2 has 4 and 8 GPUs (mean 6) and A4 (submitted Apr 2) is left out; Alpha's largest is vcA1.
    out = q.vc_utilization(small_ds, JobFilter(clusters=("Alpha",)), exclude_days="2020-04-02")
    assert out.select("vc", "mean_gpus", "gpu_jobs").rows() == [("vcA1", 8.0, 2), ("vcA2", 6.0, 1)]
    # Of 2,880 minutes: A6 holds all 4 GPUs of Apr 1 for one, A4 (still running) 1 of 8 at Apr 3 00:00.
    assert out["mean_pct"][1] == pytest.approx((100 + 12.5) / 2880)
    # Normalised over the VCs shown: mean duration vcA1 90 s, vcA2 40 s (A6); mean queue 20 s and 30 s.
    assert out.select("norm_avg_duration_pct", "norm_avg_queue_pct").rows() == [(100.0, 0.0), (0.0, 100.0)]
    top = q.vc_utilization(small_ds, JobFilter(clusters=("Alpha",)), top=1)
    assert top["vc"].to_list() == ["vcA1"]
    assert top.select("norm_avg_duration_pct", "norm_avg_queue_pct").rows() == [(None, None)]  # one VC: no range


def test_period(small_ds):
    assert q.period(small_ds).row(0) == (datetime(2020, 4, 1), datetime(2020, 4, 4))
    window = JobFilter(start=datetime(2020, 4, 2), end=datetime(2020, 4, 2, 12))
    assert q.period(small_ds, window).row(0) == (datetime(2020, 4, 2), datetime(2020, 4, 2, 12))


def test_window_bounds_series_but_selects_jobs_by_submit_time(small_ds):
    window = JobFilter(start=datetime(2020, 4, 1), end=datetime(2020, 4, 1, 0, 10))
    minutes = q.utilization_minutes(small_ds, window)
    assert minutes.height == 2 * 10
    # B5 was submitted before the window but runs in it: it still occupies Beta's GPUs.
    assert minutes.filter(pl.col("cluster") == "Beta")["running_gpu_num"].to_list() == [1] * 6 + [0] * 4
    assert q.cluster_summary(small_ds, window)["job_num"].to_list() == [3, 3]  # A1, A2, A6 only


@pytest.mark.parametrize("name", sorted(q.QUERIES))
def test_no_matching_job_gives_empty_frame_with_columns(small_ds, name):
    nobody = JobFilter(users=("nobody",))
    full, none = q.QUERIES[name](small_ds), q.QUERIES[name](small_ds, nobody)
    if name == "period":
        assert none.height == 1  # the window does not depend on which jobs are selected
        return
    assert none.is_empty() and none.schema == full.schema
