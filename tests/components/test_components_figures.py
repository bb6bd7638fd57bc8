"""Figure builders: titles, axis units, log axes, palettes and empty-selection messages, on small frames."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from components.charts import decimate, figures, units


def _cdf(n: int = 22) -> pl.DataFrame:
    xs = [2**i for i in range(n)]
    return pl.DataFrame(
        {
            "cluster": ["Venus"] * n + ["Earth"] * n,
            "x_s": xs * 2,
            "pct": [min(100.0, 5.0 * i) for i in range(n)] * 2,
        }
    )


def test_duration_cdf_has_log_x_in_human_units_and_one_trace_per_cluster():
    df = _cdf()
    fig = figures.duration_cdf_figure(df, kind="gpu")
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis.title.text == "duration (log scale)"
    labels = list(fig.layout.xaxis.ticktext)
    assert "1 min" in labels and "1 h" in labels and not any(t.isdigit() for t in labels)  # no raw seconds
    assert min(fig.layout.xaxis.tickvals) >= df["x_s"].filter(df["x_s"] > 0).min()
    assert list(fig.data[0].customdata[:2]) == [units.duration(x) for x in df["x_s"][:2]]  # hover in human units
    assert fig.layout.yaxis.title.text == "share of jobs (%)"
    assert [t.name for t in fig.data] == ["Venus", "Earth"]
    assert fig.layout.title.text == "GPU job duration CDF"
    assert fig.data[0].line.color == figures.cluster_color("Venus") != fig.data[1].line.color


def test_a_cluster_keeps_its_colour_whatever_else_is_drawn():
    alone = figures.duration_cdf_figure(_cdf().filter(pl.col("cluster") == "Earth"))
    both = figures.duration_cdf_figure(_cdf())
    assert alone.data[0].line.color == both.data[1].line.color == figures.cluster_color("Earth")
    assert figures.cluster_color("SomeNewCluster") == figures.cluster_color("SomeNewCluster") in figures.PALETTE


@pytest.mark.parametrize(
    "builder",
    [
        figures.utilization_figure,
        figures.running_queued_figure,
        figures.diurnal_utilization_figure,
        figures.diurnal_submissions_figure,
        figures.submission_heatmap_figure,
        figures.monthly_figure,
        figures.vc_utilization_figure,
        figures.duration_cdf_figure,
        figures.queue_cdf_figure,
        figures.gpu_num_cdf_figure,
        figures.final_state_figure,
        figures.concentration_figure,
        figures.completion_histogram_figure,
        figures.user_jobs_figure,
    ],
)
def test_every_builder_shows_a_message_on_an_empty_frame(builder):
    fig = builder(pl.DataFrame())
    assert len(fig.data) == 0
    assert fig.layout.annotations[0].text.startswith("No jobs match the current filters")
    assert fig.layout.title.text


def test_utilization_figure_draws_each_buckets_lowest_and_highest_minute_in_percent_with_a_range_slider():
    t0 = datetime(2020, 4, 1)
    df = pl.DataFrame(
        {
            "cluster": ["Venus"] * 3,
            "time": [t0 + timedelta(hours=h) for h in range(3)],
            "gpu_utilization_low": [0.5, 0.75, None],
            "gpu_utilization_high": [0.625, 0.75, None],
            decimate.STEP_COLUMN: [3600] * 3,
        }
    )
    fig = figures.utilization_figure(df)
    assert np.array_equal(fig.data[0].y, [50.0, 62.5, 75.0, np.nan], equal_nan=True)  # the unknown hour: a gap
    assert list(fig.data[0].text) == ["lowest minute of 1 h", "highest minute of 1 h", "1 h", "1 h"]
    assert fig.data[0].type == "scatter"
    assert fig.layout.xaxis.rangeslider.visible is True
    assert fig.layout.yaxis.title.text == "GPU utilisation (%)"
    assert "the lowest and highest minute of every 1 h" in fig.layout.title.text


def test_final_state_bars_stack_in_state_colours():
    df = pl.DataFrame(
        {
            "gpu_num": ["1", "2", ">=64"],
            "completed_pct": [60.0, 50.0, 20.0],
            "cancelled_pct": [30.0, 30.0, 70.0],
            "failed_pct": [10.0, 20.0, 10.0],
        }
    )
    fig = figures.final_state_figure(df)
    assert fig.layout.barmode == "stack"
    assert [t.name for t in fig.data] == ["completed", "cancelled", "failed"]
    assert fig.data[2].marker.color == figures.STATE_COLORS["FAILED"]
    assert list(fig.data[0].x) == ["1", "2", ">=64"]


def test_concentration_marks_the_top_1_5_10_20_percent():
    pct = list(range(101))
    df = pl.DataFrame({"cluster": ["Venus"] * 101, "user_pct": pct, "share_pct": [min(100.0, 3.0 * p) for p in pct]})
    fig = figures.concentration_figure(df, metric="gpu_queue_time")
    marks = fig.data[-1]
    assert list(marks.x) == [1, 5, 10, 20]
    assert list(marks.y) == [3.0, 15.0, 30.0, 60.0]
    assert "GPU queueing time" in fig.layout.title.text
    assert len(fig.layout.shapes) == 4


def test_vc_boxes_use_the_precomputed_quartiles_and_carry_the_vc_for_drill_down():
    df = pl.DataFrame(
        {
            "cluster": ["Earth", "Earth"],
            "vc": ["vcA", "vcB"],
            "mean_gpus": [32.0, 64.0],
            "mean_pct": [50.0, 70.0],
            "median_pct": [55.0, 75.0],
            "q1_pct": [20.0, 60.0],
            "q3_pct": [80.0, 90.0],
            "whisker_low_pct": [0.0, 30.0],
            "whisker_high_pct": [100.0, 100.0],
        }
    )
    fig = figures.vc_utilization_figure(df)
    box = fig.data[0]
    assert list(box.x) == ["vcB", "vcA"]  # largest VC first
    assert list(box.median) == [75.0, 55.0]
    assert list(box.customdata) == ["vcB", "vcA"]
    assert list(fig.data[1].y) == [64, 32]
    assert fig.layout.yaxis2.title.text == "VC size (mean GPUs)"


def _fig4_frame(published: bool) -> pl.DataFrame:
    df = pl.DataFrame(
        {
            "cluster": ["Earth", "Earth"],
            "vc": ["vcA", "vcB"],
            "mean_gpus": [32.0, 64.0],
            "mean_pct": [50.0, 70.0],
            "median_pct": [55.0, 75.0],
            "q1_pct": [20.0, 60.0],
            "q3_pct": [80.0, 90.0],
            "whisker_low_pct": [0.0, 30.0],
            "whisker_high_pct": [100.0, 100.0],
            "avg_gpus_per_job": [2.0, 8.0],
            "norm_avg_duration_pct": [0.0, 100.0],
            "norm_avg_queue_pct": [100.0, 0.0],
            "window_label": ["Earth, May 2020 without 2020-05-10"] * 2,
        }
    )
    if published:
        df = df.with_columns(pl.col(c).alias(f"pub_{c}") for c in df.columns if c.endswith(("pct", "per_job")))
    return df


def test_fig4_draws_boxes_gpus_per_job_on_the_right_and_normalised_duration_and_queue_below():
    fig = figures.vc_fig4_figure(_fig4_frame(published=False))
    names = [t.name for t in fig.data]
    assert names == [
        "utilisation (this dataset)",
        "mean GPUs per job",
        "mean duration (normalised)",
        "mean queue (normalised)",
    ]
    assert list(fig.data[0].x) == ["vcB (64)", "vcA (32)"]  # largest first, VC size = mean GPUs
    assert fig.data[1].yaxis == "y2" and list(fig.data[1].y) == [8.0, 2.0]
    assert fig.data[2].yaxis == "y3" and fig.layout.yaxis2.title.text == "GPUs per job"
    assert "May 2020 without 2020-05-10" in fig.layout.title.text


def test_fig4_overlays_the_published_values_when_given():
    names = [t.name for t in figures.vc_fig4_figure(_fig4_frame(published=True)).data]
    assert {"published (Fig 4)", "published GPUs per job", "published duration", "published queue"} <= set(names)


def test_the_pooled_duration_curve_is_drawn_thick_and_black():
    df = pl.DataFrame(
        {"cluster": ["Earth", "Earth", "Helios", "Helios"], "x_s": [1, 2, 1, 2], "pct": [10.0, 50.0, 20.0, 60.0]}
    )
    pooled = [t for t in figures.duration_cdf_figure(df).data if t.name == "Helios"][0]
    assert pooled.line.color == "black" and pooled.line.width == 3


def test_heatmap_fills_missing_hours_with_zero():
    df = pl.DataFrame({"cluster": ["Venus", "Earth"], "weekday": [0, 0], "hour": [3, 3], "jobs": [2, 5]})
    z = figures.submission_heatmap_figure(df).data[0].z
    assert len(z) == 7 and all(len(row) == 24 for row in z)
    assert z[0][3] == 7 and sum(map(sum, z)) == 7


def test_monthly_bars_stand_per_month_and_cluster_in_its_colour_with_utilisation_on_the_right():
    df = pl.DataFrame(
        {
            "cluster": ["Venus", "Venus"],
            "month": [4, 5],
            "single_gpu_jobs": [10, 20],
            "multi_gpu_jobs": [3, 4],
            "gpu_utilization_pct": [70.0, 80.0],
        }
    )
    fig = figures.monthly_figure(df)
    multi, single, util = fig.data
    assert list(multi.x) == list(single.x) == ["Apr", "May"] and multi.offsetgroup == single.offsetgroup == "Venus"
    assert list(single.base) == [3, 4] and list(single.y) == [10, 20]  # single-GPU jobs stand on the multi-GPU ones
    assert multi.marker.color == single.marker.color == util.marker.color == figures.cluster_color("Venus")
    assert util.yaxis == "y2" and list(util.y) == [70.0, 80.0]


def test_month_labels_name_the_year_when_months_are_dates():
    assert figures.month_label(date(2017, 10, 1)) == "Oct 2017"
    assert figures.month_label(4) == "Apr"


def test_reference_lines_are_dashed_and_named_published():
    fig = figures.duration_cdf_figure(_cdf())
    ref = _cdf().with_columns(pl.lit("Helios Venus").alias("cluster")).head(22)
    figures.add_reference_lines(fig, ref, "x_s", "pct")
    assert fig.data[-1].name == "Helios Venus (published)"
    assert fig.data[-1].line.dash == "dash"


def test_the_user_timeline_says_when_it_shows_a_sample():
    t0 = datetime(2020, 4, 1)
    df = pl.DataFrame(
        {
            "job_id": [1, 2],
            "gpu_num": [1, 8],
            "state": ["COMPLETED", "TIMEOUT"],
            "submit_time": [t0, t0 + timedelta(hours=1)],
            "duration": [0, 3600],
            "of_jobs": [9000, 9000],
        }
    )
    fig = figures.user_jobs_figure(df)
    assert fig.layout.title.text == "Jobs over time (size = GPUs): a random 2 of 9,000 jobs"
    assert [t.name for t in fig.data] == ["completed", "failed"]  # TIMEOUT counts as failed
    assert list(fig.data[0].y) == [1]  # a 0 s job is drawn at 1 s on the log axis


def test_the_job_timeline_marks_and_shades_the_job_across_both_panels():
    from components.charts.timeline import RUN_COLOUR, WAIT_COLOUR, job_timeline_figure

    t0 = datetime(2020, 4, 1, 8)
    times = [t0 + timedelta(minutes=10 * i) for i in range(30)]
    activity = pl.DataFrame(
        {"time": times, "running_gpu_num": [8] * 30, "total_gpu_num": [16] * 30, "queued_jobs": [2] * 30}
    )
    submit, start, end = t0 + timedelta(minutes=30), t0 + timedelta(hours=2), t0 + timedelta(hours=2, minutes=5)
    record = {"submit_time": submit, "start_time": start, "end_time": end, "state": "COMPLETED", "vc": "vcA"}
    fig = job_timeline_figure(activity, record, end, (t0, t0 + timedelta(hours=5))).to_plotly_json()
    shapes = fig["layout"]["shapes"]
    panels = {("x", "y domain"), ("x2", "y2 domain")}
    rects = [s for s in shapes if s["type"] == "rect"]
    assert [(s["x0"], s["x1"], s["fillcolor"]) for s in rects[::2]] == [
        (submit, start, WAIT_COLOUR),
        (start, end, RUN_COLOUR),
    ]
    assert {(s["xref"], s["yref"]) for s in rects} == panels and all((s["y0"], s["y1"]) == (0, 1) for s in shapes)
    lines = [s for s in shapes if s["type"] == "line"]
    assert sorted({s["x0"] for s in lines}) == [submit, start, end] and len(lines) == 6  # each mark in both panels
    notes = {a["text"]: a for a in fig["layout"]["annotations"]}
    assert {"waiting", "running", "submitted", "started", "ended"} <= set(notes)
    assert (notes["started"]["yshift"], notes["ended"]["yshift"]) == (0, 14)  # close marks' labels on two lines
