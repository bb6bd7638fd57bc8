"""Pure figure builders: each takes a Polars frame (the output of one query) and returns a go.Figure."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from datetime import date

import numpy as np
import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from analytics import schema
from analytics.queries.jobs import POOLED_HELIOS, POOLED_OTHERS
from components.charts import decimate, units

# Okabe-Ito, the colour-blind-safe palette (yellow last: it is faint on white).
PALETTE: tuple[str, ...] = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#000000", "#F0E442")
STATE_COLORS: dict[str, str] = {
    schema.COMPLETED: "#009E73",
    schema.CANCELLED: "#E69F00",
    schema.FAILED: "#D55E00",
    schema.UNFINISHED: "#999999",
}
WEEKDAYS: tuple[str, ...] = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTHS: tuple[str, ...] = ("", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# THE colour of each cluster, on every figure and page (Okabe-Ito, by the order the study lists them); any other
# cluster takes a fixed one of the palette from its name; the pooled curves are black.
CLUSTER_COLORS: dict[str, str] = {
    "Venus": PALETTE[0],
    "Earth": PALETTE[1],
    "Saturn": PALETTE[2],
    "Uranus": PALETTE[3],
    "Philly": PALETTE[5],
    "Alibaba-openb": PALETTE[4],
}
POOLED_COLOR = "black"
COLOR_KEY = "color_key"  # optional column: the cluster whose colour a line takes (compare: "<dataset> <cluster>")
HOVER_TEXT = "hover_text"  # optional column: a point's value in human units for its hover
LINE_DASH = "line_dash"  # optional column: the line's dash (compare: one per dataset; published overlays: dashed)
TOP_USER_PCTS: tuple[int, ...] = (1, 5, 10, 20)

TEMPLATE = go.layout.Template(
    layout=go.Layout(
        colorway=list(PALETTE),
        font={"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 13},
        paper_bgcolor="white",
        plot_bgcolor="white",
        xaxis={"showgrid": True, "gridcolor": "#e5e7eb", "zeroline": False, "linecolor": "#9ca3af", "automargin": True},
        yaxis={"showgrid": True, "gridcolor": "#e5e7eb", "zeroline": False, "linecolor": "#9ca3af", "automargin": True},
        hoverlabel={"namelength": -1},
        # The legend sits at the foot of the figure so that, when it wraps on a phone, it cannot hide the title.
        legend={"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "xanchor": "left", "x": 0},
        # l: room for a y title and tick labels of up to five characters ("100 %"), so that automargin rarely grows it
        margin={"l": 70, "r": 20, "t": 50, "b": 40},
    )
)
# The bottom margin a figure ends up with once automargin has made room for what sits below its plot: given at once,
# plotly draws the figure once instead of drawing it, growing the margin and drawing it again (half of a small
# figure's drawing time). A range slider makes its own room below the template's margin.
X_TITLE_PX = 15


def legend_row_px(font_px: float) -> float:
    """The height of a row of a horizontal legend's entries in a font of font_px (plotly.js legend/draw.js)."""
    return max(1.3 * font_px, 16.0) + 3.0


LEGEND_ROW_PX = math.ceil(legend_row_px(TEMPLATE.layout.font.size))  # the horizontal legend at the figure's foot


def listed(trace: dict | go.BaseTraceType) -> bool:
    """Whether plotly lists trace (a trace object or its JSON dict) in the legend."""
    return trace["showlegend"] is not False and trace["visible"] is not False


def legend_drawn(showlegend: bool | None, n_listed: int) -> bool:
    """Whether plotly draws a legend: as the layout's showlegend says, else when two or more traces are listed."""
    return bool(showlegend) if showlegend is not None else n_listed >= 2


def shows_legend(fig: go.Figure) -> bool:
    """Whether plotly draws fig's legend."""
    return legend_drawn(fig.layout.showlegend, sum(listed(trace) for trace in fig.data))


def bottom_margin_px(fig: go.Figure, x_title: str) -> int:
    """The bottom margin fig needs for its x title and its legend (the template's with a range slider)."""
    if fig.layout.xaxis.rangeslider.visible:
        return TEMPLATE.layout.margin.b
    return TEMPLATE.layout.margin.b + X_TITLE_PX * bool(x_title) + LEGEND_ROW_PX * shows_legend(fig)


def style(fig: go.Figure, title: str, x_title: str = "", y_title: str = "") -> go.Figure:
    """Apply the dashboard's look, a title and axis titles (with units) to fig."""
    fig.update_layout(
        template=TEMPLATE,
        title={"text": title, "x": 0, "xanchor": "left", "font": {"size": 15}},
        margin_b=bottom_margin_px(fig, x_title),
    )
    if x_title:
        fig.update_layout(xaxis_title_text=x_title)
    if y_title:
        fig.update_layout(yaxis_title_text=y_title)
    return fig


def empty_figure(message: str = "No jobs match the current filters.", title: str = "") -> go.Figure:
    """A blank figure carrying a centred message (for empty selections and errors)."""
    fig = go.Figure()
    fig.add_annotation(text=message, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font={"size": 14})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return style(fig, title)


def _groups(df: pl.DataFrame, col: str = "cluster") -> list[str]:
    return df[col].unique(maintain_order=True).to_list()


def cluster_color(cluster: str) -> str:
    """The colour of a cluster by its name, the same on every figure (black for the pooled curves)."""
    if cluster in (POOLED_HELIOS, POOLED_OTHERS):
        return POOLED_COLOR
    return CLUSTER_COLORS.get(cluster) or PALETTE[zlib.crc32(cluster.encode()) % 6]  # not black or faint yellow


def _line_style(part: pl.DataFrame, name: str) -> dict:
    """A group's line colour (by its cluster) and dash, from the COLOR_KEY and LINE_DASH columns when present."""
    key = str(part[COLOR_KEY][0]) if COLOR_KEY in part.columns else str(name)
    dash = part[LINE_DASH][0] if LINE_DASH in part.columns else None
    return {"color": cluster_color(key)} | ({"dash": dash} if dash else {})


def epoch_ms(times: pl.Series) -> np.ndarray:
    """Times as milliseconds since the epoch, what a date axis reads from a typed array (a third of the bytes of
    ISO strings, and no string parsing in the browser)."""
    return times.dt.epoch("ms").cast(pl.Float64).to_numpy()


RANGE_TEXTS: tuple[str, ...] = ("lowest {of} of {step}", "highest {of} of {step}", "{step}")  # decimate's kinds


def _range_lines(
    fig: go.Figure, df: pl.DataFrame, lines: tuple[tuple[str, str | None, str, float], ...], of: str, hover: str
):
    """Add a line per cluster and (series, dash, name suffix, scale) of lines through each bucket's lowest and highest
    value (decimate.envelope's frame: <series>_low, _high, step_s), coloured by cluster; of names what a bucket's low
    and high are (a minute, an hourly mean), for the hover."""
    for name, part in df.partition_by("cluster", as_dict=True, maintain_order=True).items():
        times = epoch_ms(part["time"])
        steps = [units.duration(s) for s in part[decimate.STEP_COLUMN].to_list()]
        for col, dash, label, scale in lines:
            bucket, values, kind = range_points(part, col)
            texts = [
                RANGE_TEXTS[k].format(of=of, step=steps[b]) for k, b in zip(kind.tolist(), bucket.tolist(), strict=True)
            ]
            line = {"color": cluster_color(str(name[0])), "width": 1.5} | ({"dash": dash} if dash else {})
            fig.add_trace(
                go.Scatter(
                    x=times[bucket],
                    y=(values * scale).astype(np.float32),  # half the bytes of float64, exact to 7 digits
                    text=texts,
                    name=f"{name[0]} {label}" if label else str(name[0]),
                    mode="lines",
                    line=line,
                    hovertemplate="%{x|%Y-%m-%d %H:%M}, %{text}<br>" + hover + "<extra>%{fullData.name}</extra>",
                )
            )


def range_points(part: pl.DataFrame, series: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A thinned series' points (decimate.interleaved of its _low and _high columns): bucket indices, values, kinds."""
    low, high = (part[series + end].fill_null(np.nan).to_numpy() for end in decimate.ENDS)
    return decimate.interleaved(low, high)


def steps_note(df: pl.DataFrame, of: str, of_s: int) -> str:
    """A time figure's subtitle: its points are each bucket's lowest and highest <of> (a value every of_s seconds),
    with the buckets' length (the zoomed window's, then the rest's)."""
    steps = sorted(df[decimate.STEP_COLUMN].unique().to_list())
    every = f"every {of}" if steps[0] <= of_s else f"the lowest and highest {of} of every {units.duration(steps[0])}"
    rest = f" ({units.duration(steps[-1])} outside the zoom)" if len(steps) > 1 else ""
    return f"<br><sup>{every}{rest}: no peak is lost</sup>"


def utilization_figure(df: pl.DataFrame) -> go.Figure:
    """GPU utilisation over time per cluster (decimate.envelope's frame of gpu_utilization: each bucket's lowest and
    highest minute) with a range slider."""
    title = "GPU utilisation over time"
    if df.is_empty():
        return empty_figure(title=title)
    fig = go.Figure()
    _range_lines(fig, df, (("gpu_utilization", None, "", 100),), "minute", "%{y:.1f} %")
    fig.update_xaxes(rangeslider={"visible": True, "thickness": 0.08}, type="date")
    fig.update_yaxes(range=[0, 105], ticksuffix=" %")
    return style(fig, title + steps_note(df, "minute", units.MINUTE_S), "time", "GPU utilisation (%)")


def running_queued_figure(df: pl.DataFrame) -> go.Figure:
    """Running and queued GPU jobs over time (decimate.envelope's frame of running_gpujob_num and queued_gpujob_num:
    each bucket's lowest and highest hourly mean)."""
    title = "Running and queued GPU jobs"
    if df.is_empty():
        return empty_figure(title=title)
    fig = go.Figure()
    lines = (("running_gpujob_num", "solid", "running", 1), ("queued_gpujob_num", "dot", "queued", 1))
    _range_lines(fig, df, lines, "hourly mean", "%{y:.0f} jobs")
    fig.update_xaxes(type="date")
    return style(fig, title + steps_note(df, "hourly mean", units.HOUR_S), "time", "GPU jobs")


def _group_lines(
    fig: go.Figure, df: pl.DataFrame, x: str, y: str, group: str, trace: Callable[[pl.DataFrame, str], dict]
):
    """Add one Scatter per value of group (in order of appearance), styled by trace(its rows, value); a HOVER_TEXT
    column, when present, is the points' customdata."""
    for name in _groups(df, group):
        part = df.filter(pl.col(group) == name)
        custom = {"customdata": part[HOVER_TEXT]} if HOVER_TEXT in part.columns else {}
        fig.add_trace(go.Scatter(x=part[x], y=part[y], **custom, **trace(part, name)))
    return fig


def _lines_by_group(df: pl.DataFrame, x: str, y: str, hover: str, group: str = "cluster") -> go.Figure:
    def trace(part: pl.DataFrame, name: str) -> dict:
        return {
            "name": str(name),
            "mode": "lines+markers",
            "marker": {"size": 5},
            "line": _line_style(part, name),
            "hovertemplate": hover + "<extra>%{fullData.name}</extra>",
        }

    return _group_lines(go.Figure(), df, x, y, group, trace)


def diurnal_utilization_figure(df: pl.DataFrame) -> go.Figure:
    """Mean GPU utilisation by hour of day per cluster (columns cluster, hour, gpu_utilization_pct)."""
    if df.is_empty():
        return empty_figure(title="GPU utilisation by hour of day")
    fig = _lines_by_group(df, "hour", "gpu_utilization_pct", "%{x}:00<br>%{y:.1f} %")
    fig.update_xaxes(range=[-0.5, 23.5], dtick=3)
    fig.update_yaxes(ticksuffix=" %")
    return style(fig, "GPU utilisation by hour of day", "hour of day", "mean GPU utilisation (%)")


def diurnal_submissions_figure(df: pl.DataFrame) -> go.Figure:
    """Mean GPU-job submissions per clock hour by hour of day (columns cluster, hour, gpu_jobs_per_hour)."""
    if df.is_empty():
        return empty_figure(title="GPU-job submissions by hour of day")
    fig = _lines_by_group(df, "hour", "gpu_jobs_per_hour", "%{x}:00<br>%{y:.1f} jobs/h")
    fig.update_xaxes(range=[-0.5, 23.5], dtick=3)
    return style(fig, "GPU-job submissions by hour of day", "hour of day", "GPU jobs / hour")


def submission_heatmap_figure(df: pl.DataFrame) -> go.Figure:
    """Job submissions by weekday and hour, summed over clusters (columns weekday, hour, jobs)."""
    if df.is_empty():
        return empty_figure(title="Submissions by weekday and hour")
    grid = (
        pl.DataFrame({"weekday": list(range(7))})
        .join(pl.DataFrame({"hour": list(range(24))}), how="cross")
        .join(df.group_by("weekday", "hour").agg(pl.col("jobs").sum()), on=["weekday", "hour"], how="left")
        .with_columns(pl.col("jobs").fill_null(0))
        .sort("weekday", "hour")
    )
    z = [grid.filter(pl.col("weekday") == d)["jobs"].to_list() for d in range(7)]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(24)),
            y=list(WEEKDAYS),
            colorscale="Cividis",
            colorbar={"title": {"text": "jobs"}},
            hovertemplate="%{y} %{x}:00<br>%{z:,} jobs<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(dtick=3)
    return style(fig, "Job submissions by weekday and hour", "hour of day", "weekday")


def month_label(month: int | date) -> str:
    """A month as 'Apr' (month number) or 'Apr 2020' (first day of the month)."""
    if isinstance(month, date):
        return month.strftime("%b %Y")
    return MONTHS[month] if 1 <= month <= 12 else str(month)


def monthly_figure(df: pl.DataFrame) -> go.Figure:
    """Monthly GPU jobs per cluster, side by side in the cluster's colour (multi-GPU jobs hatched at the foot, single-
    GPU jobs above them), with each cluster's monthly GPU utilisation as a diamond on the right axis."""
    title = "Monthly GPU jobs and utilisation"
    if df.is_empty():
        return empty_figure(title=title)
    df = df.sort("cluster", "month")
    months = sorted(set(df["month"].to_list()))
    labels = {m: month_label(m) for m in months}
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for cluster in _groups(df):
        part = df.filter(pl.col("cluster") == cluster)
        x, color = [labels[m] for m in part["month"].to_list()], cluster_color(str(cluster))
        common = {"x": x, "offsetgroup": str(cluster), "legendgroup": str(cluster), "marker_line_width": 0}
        fig.add_trace(
            go.Bar(
                y=part["multi_gpu_jobs"],
                name=f"{cluster} multi-GPU",
                showlegend=False,
                marker={"color": color, "pattern": {"shape": "/", "fgcolor": "white", "fillmode": "overlay"}},
                hovertemplate="%{x}<br>%{y:,} multi-GPU jobs<extra>" + str(cluster) + "</extra>",
                **common,
            ),
            secondary_y=False,
        )
        fig.add_trace(
            go.Bar(
                y=part["single_gpu_jobs"],
                base=part["multi_gpu_jobs"],
                name=str(cluster),
                marker={"color": color, "opacity": 0.55},
                hovertemplate="%{x}<br>%{y:,} single-GPU jobs<extra>" + str(cluster) + "</extra>",
                **common,
            ),
            secondary_y=False,
        )
        if "gpu_utilization_pct" in part.columns:
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=part["gpu_utilization_pct"],
                    name=f"{cluster} GPU utilisation",
                    showlegend=False,
                    mode="markers",
                    offsetgroup=str(cluster),
                    legendgroup=str(cluster),
                    marker={"color": color, "size": 9, "symbol": "diamond", "line": {"color": "white", "width": 1}},
                    hovertemplate="%{x}<br>%{y:.1f} % GPU utilisation<extra>" + str(cluster) + "</extra>",
                ),
                secondary_y=True,
            )
    fig.update_layout(barmode="group", scattermode="group", bargap=0.25, bargroupgap=0.05)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=[labels[m] for m in months])
    fig.update_yaxes(title_text="GPU jobs submitted", secondary_y=False)
    fig.update_yaxes(
        title_text="GPU utilisation (%)",
        range=[0, 105],
        tickvals=[0, 25, 50, 75, 100],
        showgrid=False,
        automargin=True,
        secondary_y=True,
    )
    note = "hatched: multi-GPU jobs; ◆ GPU utilisation (right axis)"
    return style(fig, f"{title}<br><sup>{note}</sup>")


def vc_utilization_figure(df: pl.DataFrame, max_vcs: int = 30) -> go.Figure:
    """Per-VC utilisation box plots (precomputed quartiles) with VC size on a right axis; click a box to drill."""
    if df.is_empty():
        message = "No jobs match the current filters."
        return empty_figure(message, title="Utilisation per VC")
    df = df.sort("mean_gpus", descending=True).head(max_vcs)
    multi = df["cluster"].n_unique() > 1
    labels = [f"{c}/{v}" if multi else str(v) for c, v in zip(df["cluster"], df["vc"], strict=True)]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(
        go.Box(
            x=labels,
            q1=df["q1_pct"],
            median=df["median_pct"],
            q3=df["q3_pct"],
            lowerfence=df["whisker_low_pct"],
            upperfence=df["whisker_high_pct"],
            mean=df["mean_pct"],
            customdata=df["vc"].to_list(),
            name="utilisation",
            marker={"color": PALETTE[0]},
            fillcolor="rgba(0,114,178,0.25)",
        ),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(
            x=labels,
            y=df["mean_gpus"],
            customdata=df["vc"].to_list(),
            name="VC size (mean GPUs over the window)",
            mode="markers",
            marker={"color": PALETTE[1], "size": 10, "symbol": "diamond"},
            hovertemplate="%{x}<br>%{y:.1f} GPUs on average<extra></extra>",
        ),
        secondary_y=True,
    )
    fig.update_yaxes(title_text="GPU utilisation (%)", range=[0, 105], secondary_y=False)
    fig.update_yaxes(
        title_text="VC size (mean GPUs)",
        rangemode="tozero",
        tickmode="auto",
        nticks=6,
        showgrid=False,
        automargin=True,
        secondary_y=True,
    )
    fig.update_layout(clickmode="event")
    # no x title: the rotated VC names are the axis, and a title would sit on them
    return style(fig, "Utilisation per virtual cluster (click a VC to filter)")


def _vc_labels(df: pl.DataFrame) -> list[str]:
    """x labels of per-VC figures: the VC and its size (mean GPUs over the window)."""
    return [f"{vc} ({gpus:.0f})" for vc, gpus in zip(df["vc"], df["mean_gpus"], strict=True)]


def _published_boxes(fig: go.Figure, df: pl.DataFrame, labels: list[str]) -> None:
    """The published boxes (pub_* columns) beside the dataset's, in grey."""
    fig.add_trace(
        go.Box(
            x=labels,
            q1=df["pub_q1_pct"],
            median=df["pub_median_pct"],
            q3=df["pub_q3_pct"],
            lowerfence=df["pub_whisker_low_pct"],
            upperfence=df["pub_whisker_high_pct"],
            mean=df["pub_mean_pct"],
            name="published (Fig 4)",
            marker={"color": "#6b7280"},
            fillcolor="rgba(107,114,128,0.2)",
            offsetgroup="published",
        ),
        row=1,
        col=1,
        secondary_y=False,
    )


def _job_mix_traces(fig: go.Figure, df: pl.DataFrame, labels: list[str], published: bool) -> None:
    """Mean GPUs per GPU job on the right axis (row 1), normalised mean duration and queue as bars (row 2), with the
    published values as open markers."""
    fig.add_trace(
        go.Scatter(
            x=labels,
            y=df["avg_gpus_per_job"],
            name="mean GPUs per job",
            mode="markers",
            marker={"color": PALETTE[1], "size": 10, "symbol": "diamond"},
            hovertemplate="%{x}<br>%{y:.1f} GPUs per job<extra></extra>",
        ),
        row=1,
        col=1,
        secondary_y=True,
    )
    bars = (("norm_avg_duration_pct", "mean duration", PALETTE[2]), ("norm_avg_queue_pct", "mean queue", PALETTE[3]))
    for col, name, color in bars:
        fig.add_trace(
            go.Bar(x=labels, y=df[col], name=f"{name} (normalised)", marker={"color": color}, offsetgroup=col),
            row=2,
            col=1,
        )
    if not published:
        return
    marks = (
        ("pub_avg_gpus_per_job", "published GPUs per job", PALETTE[1], 1, True),
        ("pub_norm_avg_duration_pct", "published duration", PALETTE[2], 2, False),
        ("pub_norm_avg_queue_pct", "published queue", PALETTE[3], 2, False),
    )
    for col, name, color, row, right in marks:
        fig.add_trace(
            go.Scatter(
                x=labels,
                y=df[col],
                name=name,
                mode="markers",
                marker={"color": color, "size": 11, "symbol": "diamond-open", "line": {"width": 2}},
            ),
            row=row,
            col=1,
            secondary_y=right if row == 1 else None,
        )


def vc_fig4_figure(df: pl.DataFrame) -> go.Figure:
    """Fig 4 as the paper draws it: per-VC utilisation boxes (precomputed quartiles) of the largest VCs, mean GPUs per
    job on the right axis, and below the min-max normalised mean duration and queue per VC; the published values
    (pub_* columns, when present) beside them, in the figure's order; window_label names the cluster and window."""
    title = "Utilisation per VC as in the paper's Fig 4"
    if df.is_empty():
        return empty_figure(title=title)
    published = "pub_mean_pct" in df.columns and df["pub_mean_pct"].is_not_null().any()
    df = df if published else df.sort("mean_gpus", descending=True)  # the figure's order, else the largest first
    labels = _vc_labels(df)
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.68, 0.32],
        vertical_spacing=0.06,
        specs=[[{"secondary_y": True}], [{}]],
    )
    fig.add_trace(
        go.Box(
            x=labels,
            q1=df["q1_pct"],
            median=df["median_pct"],
            q3=df["q3_pct"],
            lowerfence=df["whisker_low_pct"],
            upperfence=df["whisker_high_pct"],
            mean=df["mean_pct"],
            customdata=df["vc"].to_list(),
            name="utilisation (this dataset)",
            marker={"color": PALETTE[0]},
            fillcolor="rgba(0,114,178,0.25)",
            offsetgroup="dataset",
        ),
        row=1,
        col=1,
        secondary_y=False,
    )
    if published:
        _published_boxes(fig, df, labels)
    _job_mix_traces(fig, df, labels, published)
    fig.update_layout(boxmode="group", barmode="group", clickmode="event")
    fig.update_yaxes(title_text="GPU utilisation (%)", range=[0, 105], row=1, col=1, secondary_y=False)
    fig.update_yaxes(
        title_text="GPUs per job", rangemode="tozero", tickformat=".0f", showgrid=False, row=1, col=1, secondary_y=True
    )
    fig.update_yaxes(title_text="normalised (%)", range=[0, 105], row=2, col=1)
    subtitle = (
        f"{df['window_label'][0]}, the {df.height} largest VCs (mean GPUs)" if "window_label" in df.columns else ""
    )
    return style(fig, f"{title}<br><sup>{subtitle}</sup>", "", "")


def duration_axis(fig: go.Figure, low_s: float, high_s: float, axis: str = "x") -> None:
    """A log duration axis (seconds) labelled 1 min, 1 h, 1 d, ... instead of raw seconds."""
    values, labels = units.duration_ticks(max(low_s, 1e-3), max(high_s, 1))
    getattr(fig, f"update_{axis}axes")(type="log", tickvals=values, ticktext=labels)


def with_duration_hover(df: pl.DataFrame, col: str) -> pl.DataFrame:
    """df with a HOVER_TEXT column: col (seconds) in human units, for the points' hover."""
    return df.with_columns(pl.col(col).map_elements(units.duration, return_dtype=pl.String).alias(HOVER_TEXT))


def cdf_figure(df: pl.DataFrame, title: str, x_title: str, group: str = "cluster") -> go.Figure:
    """A CDF over log-scaled durations per group (columns <group>, x_s in seconds, pct), ticks and hover in human
    units."""
    if df.is_empty():
        return empty_figure(title=title)
    fig = _lines_by_group(with_duration_hover(df, "x_s"), "x_s", "pct", "≤ %{customdata}<br>%{y:.1f} %", group)
    positive = df.filter(pl.col("x_s") > 0)["x_s"]
    duration_axis(fig, positive.min() or 1, positive.max() or 1)
    fig.update_yaxes(range=[0, 101], ticksuffix=" %")
    return style(fig, title, x_title, "share of jobs (%)")  # short: a long y title runs into the figure's title


def duration_cdf_figure(df: pl.DataFrame, kind: str = "gpu") -> go.Figure:
    """CDF of job duration (columns cluster, x_s, pct) for GPU or CPU jobs, log x as in the paper's Fig 5; a pooled
    curve of all clusters (Fig 1a's "Helios") is drawn thick and black."""
    fig = cdf_figure(df, f"{kind.upper()} job duration CDF", "duration (log scale)")
    fig.update_traces(selector={"name": POOLED_HELIOS}, line={"color": POOLED_COLOR, "width": 3})
    fig.update_traces(selector={"name": POOLED_OTHERS}, line={"color": POOLED_COLOR, "width": 3})
    return fig


def queue_cdf_figure(df: pl.DataFrame) -> go.Figure:
    """CDF of queueing delay (columns cluster, x_s, pct), log x."""
    return cdf_figure(df, "GPU job queueing delay CDF", "queueing delay (log scale)")


def gpu_num_cdf_figure(df: pl.DataFrame, weight: str = "jobs") -> go.Figure:
    """CDF of GPUs per job (columns cluster, x_gpus, pct) weighted by job count or by GPU time (Fig 6)."""
    title = "GPUs per job CDF, by " + ("job count" if weight == "jobs" else "GPU time")
    if df.is_empty():
        return empty_figure(title=title)
    fig = _lines_by_group(df, "x_gpus", "pct", "≤ %{x} GPUs<br>%{y:.1f} %")
    fig.update_xaxes(type="category")
    fig.update_yaxes(range=[0, 101], ticksuffix=" %")
    share = "jobs" if weight == "jobs" else "GPU time"
    return style(fig, title, "GPUs requested", f"share of {share} (%)")


def final_state_figure(df: pl.DataFrame, x: str = "gpu_num", title: str = "Final state by GPUs per job") -> go.Figure:
    """100 % stacked bars of final-state shares (columns <x>, completed_pct, cancelled_pct, failed_pct, and optionally
    unfinished_jobs, the selection's unfinished jobs, named in a subtitle)."""
    if df.is_empty():
        return empty_figure(title=title)
    fig = go.Figure()
    for state in schema.STATE_GROUPS:
        col = f"{state.lower()}_pct"
        fig.add_trace(
            go.Bar(
                x=df[x].cast(pl.String),
                y=df[col],
                name=state.lower(),
                marker={"color": STATE_COLORS[state]},
                hovertemplate="%{x}<br>%{y:.1f} %<extra>" + state.lower() + "</extra>",
            )
        )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(type="category")
    fig.update_yaxes(range=[0, 100.5], ticksuffix=" %")
    x_title = "GPUs per job" if x == "gpu_num" else x.replace("_", " ")
    unfinished = int(df["unfinished_jobs"].max() or 0) if "unfinished_jobs" in df.columns else 0
    if unfinished:
        title += f"<br><sup>{unfinished:,} unfinished jobs (running or pending when the trace ends) are left out</sup>"
    return style(fig, title, x_title, "share of jobs (%)")


def concentration_figure(df: pl.DataFrame, metric: str = "gpu_time") -> go.Figure:
    """Share of a resource held by the top x % of users per cluster (columns cluster, user_pct, share_pct)."""
    label = {"gpu_time": "GPU time", "cpu_only_time": "CPU-only time", "gpu_queue_time": "GPU queueing time"}[metric]
    title = f"Users' share of {label}"
    if df.is_empty():
        return empty_figure(title=title)
    fig = _lines_by_group(df, "user_pct", "share_pct", "top %{x} % of users<br>%{y:.1f} % of " + label)
    fig.update_traces(mode="lines")
    marks = df.filter(pl.col("user_pct").is_in(list(TOP_USER_PCTS)))
    fig.add_trace(
        go.Scatter(
            x=marks["user_pct"],
            y=marks["share_pct"],
            mode="markers",
            name="top 1/5/10/20 %",
            marker={"color": "black", "size": 7, "symbol": "circle-open"},
            customdata=marks["cluster"],
            hovertemplate="%{customdata}: top %{x} % of users hold %{y:.1f} %<extra></extra>",
        )
    )
    for pct in TOP_USER_PCTS:
        fig.add_vline(x=pct, line={"color": "#9ca3af", "dash": "dot", "width": 1})
    fig.update_xaxes(range=[0, 100], ticksuffix=" %")
    fig.update_yaxes(range=[0, 101], ticksuffix=" %")
    short = {"GPU queueing time": "queueing"}.get(label, label)
    return style(fig, title, "top users (% of users, by usage)", f"share of {short} (%)")


def completion_histogram_figure(df: pl.DataFrame) -> go.Figure:
    """Number of users per GPU-job completion-ratio bin (columns bin, users), as in Fig 9b."""
    if df.is_empty():
        return empty_figure(title="Users by GPU-job completion ratio")
    fig = go.Figure(
        go.Bar(
            x=df["bin"],
            y=df["users"],
            marker={"color": PALETTE[2]},
            hovertemplate="%{x} % completed<br>%{y} users<extra></extra>",
            name="users",
        )
    )
    fig.update_xaxes(type="category")
    return style(fig, "Users by GPU-job completion ratio", "completed GPU jobs (%)", "users")


def user_jobs_figure(df: pl.DataFrame) -> go.Figure:
    """One user's jobs over time: submit time vs duration, sized by GPUs, coloured by state group (unfinished apart)."""
    if df.is_empty():
        return empty_figure(title="Jobs over time")
    fig = go.Figure()
    groups = df.with_columns(pl.col("state").map_elements(schema.state_group, return_dtype=pl.String))
    for state, color in STATE_COLORS.items():
        part = groups.filter(pl.col("state") == state)
        if part.is_empty():
            continue
        fig.add_trace(
            go.Scatter(
                x=part["submit_time"],
                y=part["duration"].clip(1),
                mode="markers",
                name=state.lower(),
                marker={"color": color, "size": (part["gpu_num"].clip(0, 64).sqrt() * 3 + 4).to_list(), "opacity": 0.6},
                customdata=with_duration_hover(part, "duration").select("job_id", "gpu_num", HOVER_TEXT).rows(),
                hovertemplate="job %{customdata[0]}<br>%{x|%Y-%m-%d %H:%M}<br>ran %{customdata[2]} on "
                "%{customdata[1]} GPUs<extra>%{fullData.name}</extra>",
            )
        )
    duration_axis(fig, 1, max(float(df["duration"].max() or 1), 60), axis="y")
    title = "Jobs over time (size = GPUs)"
    if "of_jobs" in df.columns and df["of_jobs"][0] > df.height:
        title += f": a random {df.height:,} of {df['of_jobs'][0]:,} jobs"
    return style(fig, title, "submit time", "duration (log scale)")


def add_reference_lines(fig: go.Figure, ref: pl.DataFrame, x: str, y: str, group: str = "cluster") -> go.Figure:
    """Overlay published reference curves on fig, dashed in their cluster's colour (COLOR_KEY); ref has columns
    <group>, x, y."""

    def trace(part: pl.DataFrame, name: str) -> dict:
        return {
            "name": f"{name} (published)",
            "mode": "lines",
            "line": _line_style(part, name) | {"dash": "dash", "width": 1.5},
            "opacity": 0.8,
            "hovertemplate": "%{x}<br>%{y:.1f}<extra>%{fullData.name}</extra>",
        }

    return _group_lines(fig, ref, x, y, group, trace)
