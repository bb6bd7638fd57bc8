"""The registry of figure cards: each name maps to a data function (spec -> frame) and a pure figure builder."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import plotly.graph_objects as go
import polars as pl

from analytics.queries.jobs import POOLED_HELIOS, POOLED_OTHERS
from analytics.reference import CLUSTERS, FIG4
from analytics.store import DatasetError
from components.charts import decimate, figures, margins, reference
from components.datasets import access
from components.server import cache as query_cache

Spec = dict[str, Any]


@dataclass(frozen=True)
class Chart:
    """How to fetch one figure's data, how to draw it, and the dataset features (analytics.capabilities) it needs."""

    data: Callable[[Spec], pl.DataFrame]
    build: Callable[[pl.DataFrame], go.Figure]
    needs: tuple[str, ...] = ()
    thin: Callable[[pl.DataFrame, Spec], pl.DataFrame] | None = None  # the data as drawn, when the chart thins it


def _q(name: str, **kwargs: Any) -> Callable[[Spec], pl.DataFrame]:
    return lambda spec: access.query(name, spec["state"], **kwargs)


HOURLY = "1h"  # the step of the series behind the time charts (rollups hold it) and of the overview cards' mean
VIEWPORT = "viewport_px"  # a spec key: the reader's viewport width (a chart that thins its series to it: its class)
WIDE = "wide"  # a spec key: the card takes its row's whole width (else half of it, from the lg breakpoint on)
TEXT = "text_sample_px"  # a spec key: the width the reader's browser sets margins.TEXT_SAMPLE in, at 100 px
UTIL_RANGE = {"gpu_utilization": ("gpu_utilization_min", "gpu_utilization_max")}  # a bucket's lowest, highest minute
RUNNING_QUEUED_RANGE = {c: (c, c) for c in ("running_gpujob_num", "queued_gpujob_num")}  # the lowest, highest hour


def utilization_window(spec: Spec, x0: datetime | None = None, x1: datetime | None = None) -> pl.DataFrame:
    """GPU utilisation per cluster, hourly over the whole period with each hour's lowest and highest minute, and in
    the zoomed window [x0, x1] at the finer step the chart's width needs there."""
    state = spec["state"]
    hourly = access.query("utilization_resampled", state, every=HOURLY)
    if x0 is None or x1 is None or hourly.is_empty():
        return hourly
    every = decimate.step_for((x1 - x0).total_seconds(), decimate.plot_width_px(spec.get(VIEWPORT)))
    if decimate.STEP_S[every] >= decimate.STEP_S[HOURLY]:
        return hourly
    period = access.query("period", state)
    # The series of the zoomed window only, one step wider on each side (so that every step shown holds the same
    # minutes as in the whole period's series), within the period.
    step = timedelta(seconds=decimate.STEP_S[every])
    start, end = max(x0 - step, period["start"][0]), min(x1 + step, period["end"][0])
    fine = access.derived(
        f"util:{every}:{x0:%Y%m%d%H%M}:{x1:%Y%m%d%H%M}",
        state,
        lambda: access.query_between("utilization_resampled", state, start, end, every=every).filter(
            pl.col("time").is_between(x0, x1)
        ),
    )
    outside = hourly.filter(~pl.col("time").is_between(x0, x1))
    return pl.concat([outside, fine], how="vertical_relaxed").sort("cluster", "time")


def thinned(
    df: pl.DataFrame, spec: Spec, series: dict[str, tuple[str, str]], window: tuple[datetime, datetime] | None = None
) -> pl.DataFrame:
    """An hourly series frame (utilization_window's, running_queued's) as drawn: per bucket of about one pixel of
    the chart's width the lowest and highest value of each series (decimate.envelope), the zoomed window's buckets
    cut to its own width."""
    width_px = decimate.plot_width_px(spec.get(VIEWPORT))
    if window is None or df.is_empty():
        return decimate.thin(df, width_px, series, finest=HOURLY)
    span_s = (df["time"].max() - df["time"].min()).total_seconds() + decimate.STEP_S[HOURLY]
    whole = decimate.step_for(span_s, width_px, finest=HOURLY)
    inside = pl.col("time").is_between(*window)
    fine = decimate.step_for((window[1] - window[0]).total_seconds(), width_px)
    parts = [decimate.envelope(df.filter(~inside), whole, series), decimate.envelope(df.filter(inside), fine, series)]
    return pl.concat(parts).sort("cluster", "time")


def thinned_utilization(df: pl.DataFrame, spec: Spec, window: tuple[datetime, datetime] | None = None) -> pl.DataFrame:
    """utilization_window's frame as the utilisation chart draws it (thinned)."""
    return thinned(df, spec, UTIL_RANGE, window)


def running_queued(spec: Spec) -> pl.DataFrame:
    """Running GPU jobs (utilisation series) beside queued GPU jobs (submitted minus dequeued, cumulated), hourly."""
    state = spec["state"]

    def compute() -> pl.DataFrame:
        tp, util = query_cache.parallel(
            lambda: access.query_uncached("throughput_10min", state),  # 10-minute bins: too many rows to cache
            lambda: access.query("utilization_resampled", state, every=HOURLY),
        )
        if tp.is_empty() or util.is_empty():
            return pl.DataFrame()
        queued = (
            tp.sort("cluster", "time")
            .with_columns(
                ((pl.col("submit_gpu_job") - pl.col("dequeue_gpu_job")).cum_sum().over("cluster")).alias("queued")
            )
            .group_by_dynamic("time", every=HOURLY, group_by="cluster")
            .agg(pl.col("queued").mean().clip(0).alias("queued_gpujob_num"))
        )
        running = util.select("cluster", "time", "running_gpujob_num")
        return running.join(queued, on=["cluster", "time"], how="left").fill_null(0).sort("cluster", "time")

    return access.derived("running_queued", state, compute)


def with_unfinished(query: str, **kwargs: Any) -> Callable[[Spec], pl.DataFrame]:
    """A final-state query's frame with the selection's unfinished job count (left out of the shares) beside it."""

    def data(spec: Spec) -> pl.DataFrame:
        shares, states = query_cache.parallel(
            lambda: access.query(query, spec["state"], **kwargs), lambda: access.query("job_states", spec["state"])
        )
        return shares.with_columns(pl.lit(int(states["unfinished_jobs"].sum())).alias("unfinished_jobs"))

    return data


def monthly(spec: Spec) -> pl.DataFrame:
    """Monthly single/multi-GPU job counts joined with monthly utilisation (when the dataset has it)."""
    state = spec["state"]
    if access.missing_feature(state["dataset"], ("utilisation",)):
        return access.query("monthly_jobs", state)
    jobs, util = query_cache.parallel(
        lambda: access.query("monthly_jobs", state), lambda: access.query("monthly_utilization", state)
    )
    if jobs.is_empty() or util.is_empty():
        return jobs
    return jobs.join(util, on=["cluster", "month"], how="left")


def duration_gpu(spec: Spec) -> pl.DataFrame:
    """GPU-job duration CDF per cluster and, with several clusters, all of them pooled: "Helios" when they are
    Helios' four clusters (Fig 1a), else "all clusters"."""
    state = spec["state"]
    clusters = state.get("clusters") or access.cluster_names(state["dataset"])
    if len(clusters) < 2:
        return access.query("duration_cdf", state, kind="gpu")
    label = POOLED_HELIOS if set(clusters) == set(CLUSTERS) else POOLED_OTHERS
    return access.query("duration_cdf", state, kind="gpu", pooled=label)


def fig4_window(name: str) -> tuple[datetime, datetime, str]:
    """The window of the paper's Fig 4 view on dataset name: FIG4's (May 2020 without its excluded day) when the
    dataset's jobs cover it, else the first whole month it has, else its whole period; with the days to exclude."""
    first, last = access.dataset_period(name)
    if first and last and first <= f"{FIG4.start:%Y-%m-%d}" and last >= f"{FIG4.end:%Y-%m-%d}":
        return FIG4.start, FIG4.end, FIG4.exclude_days_text()
    if not (first and last):
        return FIG4.start, FIG4.end, ""
    day, last_day = datetime.fromisoformat(first), datetime.fromisoformat(last)
    start = day if day.day == 1 else (day.replace(day=1) + timedelta(days=32)).replace(day=1)
    end = (start + timedelta(days=32)).replace(day=1)
    return (start, end, "") if end <= last_day + timedelta(days=1) else (day, last_day + timedelta(days=1), "")


def vc_fig4(spec: Spec) -> pl.DataFrame:
    """Fig 4 as the paper draws it: the cluster's FIG4.top_vcs largest VCs in the figure's window, with the published
    values beside them (pub_* columns) for Earth in May 2020; window_label says which window and cluster."""
    state = spec["state"]
    name = state["dataset"]
    known = access.cluster_names(name)
    chosen = state.get("clusters") or ([FIG4.cluster] if FIG4.cluster in known else known[:1])
    cluster = chosen[0] if chosen else ""
    start, end, excluded = fig4_window(name)
    published = reference.fig4_published() if cluster == FIG4.cluster and excluded else pl.DataFrame()
    # the paper's VCs where it drew them (its ties at 32 GPUs broken its way), else the largest
    vcs = published["vc"].to_list() if published.height else []
    last_day = end - timedelta(days=1)  # a view's end day is inclusive
    view = {**state, "clusters": [cluster], "vcs": vcs, "start": f"{start:%Y-%m-%d}", "end": f"{last_day:%Y-%m-%d}"}
    df = access.query("vc_utilization", view, exclude_days=excluded, top="0" if vcs else str(FIG4.top_vcs))
    whole_month = start.day == 1 and end == (start + timedelta(days=32)).replace(day=1)
    span = f"{start:%B %Y}" if whole_month else f"{start:%Y-%m-%d} – {last_day:%Y-%m-%d}"
    label = f"{cluster}, {span}" + (f" without {', '.join(excluded.split(','))}" if excluded else "")
    df = df.with_columns(pl.lit(label).alias("window_label"))
    return df.join(published, on="vc", how="left").sort("pub_order") if published.height else df


COMPARE_DASHES: tuple[str | None, ...] = (None, "dot", "dashdot", "longdashdot")  # one per compared dataset


def compare_pick(dataset: str, cluster: str) -> str:
    """The Compare page's name of one cluster of one dataset ('<dataset>/<cluster>', as in its URL)."""
    return f"{dataset}/{cluster}"


def _compare_one(
    state: dict[str, Any], name: str, picks: list[str] | None, query: str, needs: tuple[str, ...], **kwargs: Any
) -> pl.DataFrame:
    """The query on dataset name's picked clusters (every cluster when picks is None) without the view's
    dataset-specific filters; empty when none is picked or the dataset lacks what it needs."""
    known = access.cluster_names(name)
    wanted = [c for c in known if picks is None or compare_pick(name, c) in picks]
    if not wanted or access.missing_feature(name, needs):
        return pl.DataFrame()
    clusters = [] if wanted == known else wanted  # the whole dataset: answered from its rollups
    view = {**state, "dataset": name, "clusters": clusters, "vcs": [], "users": [], "start": None, "end": None}
    return access.query(query, view, **kwargs)


def compare_frames(spec: Spec, query: str, needs: tuple[str, ...] = (), **kwargs: Any) -> pl.DataFrame:
    """One query on every compared dataset having the needed features, restricted to the picked clusters
    (spec["clusters"]: compare_pick names; all when absent), clusters relabelled '<dataset> <cluster>', coloured by
    their cluster and dashed by dataset."""
    frames = []
    picks = spec.get("clusters")
    for i, name in enumerate(spec.get("datasets") or [spec["state"]["dataset"]]):
        try:
            df = _compare_one(spec["state"], name, picks, query, needs, **kwargs)
        except DatasetError:
            continue
        if not df.is_empty():
            frames.append(
                df.with_columns(
                    pl.col("cluster").cast(pl.String).alias(figures.COLOR_KEY),
                    pl.lit(COMPARE_DASHES[i % len(COMPARE_DASHES)], dtype=pl.String).alias(figures.LINE_DASH),
                    (pl.lit(name + " ") + pl.col("cluster").cast(pl.String)).alias("cluster"),
                )
            )
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


def drawn_references(ref: pl.DataFrame, df: pl.DataFrame) -> pl.DataFrame:
    """The published curves of the clusters drawn (with the pooled one), or all of them when no Helios cluster is."""
    drawn = set(df[figures.COLOR_KEY].to_list()) if figures.COLOR_KEY in df.columns else set()
    keys = set(ref[figures.COLOR_KEY].to_list())
    if not drawn & (keys - {POOLED_HELIOS}):
        return ref
    return ref.filter(pl.col(figures.COLOR_KEY).is_in(list(drawn | {POOLED_HELIOS})))


def _compare_build(figure: str, build: Callable[[pl.DataFrame], go.Figure], x: str, y: str):
    def draw(df: pl.DataFrame, overlay: bool = False) -> go.Figure:
        fig = build(df)
        ref = reference.reference_curve(figure)
        if overlay and not df.is_empty() and not ref.is_empty():
            figures.add_reference_lines(fig, drawn_references(ref, df), x, y)
        return fig

    return draw


CHARTS: dict[str, Chart] = {
    # Cluster page.
    "utilization": Chart(utilization_window, figures.utilization_figure, ("utilisation",), thinned_utilization),
    "running_queued": Chart(
        running_queued,
        figures.running_queued_figure,
        ("utilisation", "queueing"),
        partial(thinned, series=RUNNING_QUEUED_RANGE),
    ),
    "diurnal_util": Chart(_q("diurnal_utilization"), figures.diurnal_utilization_figure, ("utilisation",)),
    "diurnal_submit": Chart(_q("diurnal_submissions"), figures.diurnal_submissions_figure),
    "heatmap": Chart(_q("hour_weekday_submissions"), figures.submission_heatmap_figure),
    "monthly": Chart(monthly, figures.monthly_figure),
    "vc_fig4": Chart(vc_fig4, figures.vc_fig4_figure, ("vc_utilisation",)),
    "vc_util": Chart(_q("vc_utilization"), figures.vc_utilization_figure, ("vc_utilisation",)),
    # Jobs page.
    "duration_gpu": Chart(duration_gpu, partial(figures.duration_cdf_figure, kind="gpu")),
    "duration_cpu": Chart(
        _q("duration_cdf", kind="cpu"), partial(figures.duration_cdf_figure, kind="cpu"), ("cpu_jobs",)
    ),
    "gpu_num_jobs": Chart(_q("gpu_num_cdf", weight="jobs"), partial(figures.gpu_num_cdf_figure, weight="jobs")),
    "gpu_num_time": Chart(_q("gpu_num_cdf", weight="gpu_time"), partial(figures.gpu_num_cdf_figure, weight="gpu_time")),
    "state_by_gpu": Chart(with_unfinished("final_state_by_gpu_num"), figures.final_state_figure, ("final_states",)),
    "state_cpu_gpu": Chart(
        with_unfinished("final_state_cpu_vs_gpu"),
        partial(figures.final_state_figure, x="job_type", title="Final state of CPU and GPU jobs"),
        ("final_states",),
    ),
    "queue_cdf": Chart(_q("queue_cdf", kind="gpu"), figures.queue_cdf_figure, ("queueing",)),
    # Users page.
    "conc_gpu": Chart(_q("user_concentration", metric="gpu_time"), figures.concentration_figure, ("users",)),
    "conc_cpu": Chart(
        _q("user_concentration", metric="cpu_only_time"),
        partial(figures.concentration_figure, metric="cpu_only_time"),
        ("users",),
    ),
    "conc_queue": Chart(
        _q("user_concentration", metric="gpu_queue_time"),
        partial(figures.concentration_figure, metric="gpu_queue_time"),
        ("users", "queueing"),
    ),
    "completion_hist": Chart(
        _q("user_completion_histogram"), figures.completion_histogram_figure, ("users", "final_states")
    ),
    "user_jobs": Chart(lambda spec: access.user_jobs(spec["state"]), figures.user_jobs_figure, ("users",)),
}

COMPARE_NEEDS: dict[str, tuple[str, ...]] = {
    "diurnal_util": ("utilisation",),
    "conc_gpu": ("users",),
    "conc_queue": ("users", "queueing"),
}
COMPARE_CHARTS: dict[str, tuple[str, dict[str, Any], Callable[[pl.DataFrame], go.Figure]]] = {
    "duration_gpu": ("duration_cdf", {"kind": "gpu"}, partial(figures.duration_cdf_figure, kind="gpu")),
    "duration_cpu": ("duration_cdf", {"kind": "cpu"}, partial(figures.duration_cdf_figure, kind="cpu")),
    "gpu_num_jobs": ("gpu_num_cdf", {"weight": "jobs"}, partial(figures.gpu_num_cdf_figure, weight="jobs")),
    "gpu_num_time": ("gpu_num_cdf", {"weight": "gpu_time"}, partial(figures.gpu_num_cdf_figure, weight="gpu_time")),
    "diurnal_util": ("diurnal_utilization", {}, figures.diurnal_utilization_figure),
    "diurnal_submit": ("diurnal_submissions", {}, figures.diurnal_submissions_figure),
    "conc_gpu": ("user_concentration", {"metric": "gpu_time"}, figures.concentration_figure),
    "conc_queue": (
        "user_concentration",
        {"metric": "gpu_queue_time"},
        partial(figures.concentration_figure, metric="gpu_queue_time"),
    ),
}


def compare_charts() -> dict[str, Chart]:
    """The Compare page's charts ('cmp_<name>'): one query over every chosen dataset, drawn with its overlay."""
    made = {}
    for name, (query, kwargs, build) in COMPARE_CHARTS.items():
        x, y = reference.CURVES[name][2:]
        needs = COMPARE_NEEDS.get(name, ())
        data = partial(compare_frames, query=query, needs=needs, **kwargs)
        made["cmp_" + name] = Chart(data, _compare_build(name, build, x, y))
    return made


CHARTS.update(compare_charts())


def thins(name: Any) -> bool:
    """Whether the chart named name thins its series to the reader's viewport (its spec's VIEWPORT's width class)."""
    return isinstance(name, str) and name in CHARTS and CHARTS[name].thin is not None


def not_in_trace_figure(chart: Chart, message: str) -> go.Figure:
    """The chart's empty figure (its title) carrying why the dataset cannot draw it."""
    title = chart.build(pl.DataFrame()).layout.title.text or ""
    return figures.empty_figure(message, title=title)


def _chart(spec: Spec) -> Chart:
    if not isinstance(spec, dict) or not isinstance(spec.get("state"), dict) or spec.get("name") not in CHARTS:
        raise ValueError(f"unknown chart {str(spec.get('name') if isinstance(spec, dict) else spec)[:80]!r}")
    return CHARTS[spec["name"]]


def not_in_trace(spec: Spec) -> str | None:
    """'Not in this trace: ...' when the card's dataset lacks what its chart needs (nothing to draw or download)."""
    return access.missing_feature(spec["state"]["dataset"], _chart(spec).needs)


def render(spec: Spec) -> tuple[go.Figure, pl.DataFrame]:
    """Fetch and draw the figure a card spec names; the frame is returned for CSV export (at full resolution: a chart
    that thins its series draws fewer points than the frame has; empty for a chart the dataset cannot draw)."""
    chart = _chart(spec)
    missing = not_in_trace(spec)
    if missing:
        return not_in_trace_figure(chart, missing), pl.DataFrame()
    df = chart.data(spec)
    drawn = chart.thin(df, spec) if chart.thin else df
    if spec.get("overlay"):
        return chart.build(drawn, overlay=True), df
    return chart.build(drawn), df


DRAWN = "drawn"  # a spec key: the card was laid out with its figure, from the cache


def _figure_key(spec: Spec) -> str:
    """The cache name of spec's figure: its chart and options and the versions of the datasets it compares."""
    if not isinstance(spec, dict) or not isinstance(spec.get("state"), dict):
        raise ValueError("a figure card needs a spec with a filter state")
    compared = {name: access.open_dataset(name).version for name in spec.get("datasets") or ()}
    options = {k: v for k, v in spec.items() if k not in ("state", DRAWN, VIEWPORT, WIDE, TEXT)}
    if thins(spec.get("name")):  # one figure per viewport width class, whatever the spec says
        options[VIEWPORT] = decimate.viewport_class(spec.get(VIEWPORT))
    extra = json.dumps({**options, "versions": compared}, sort_keys=True)
    return "fig:" + hashlib.sha256(extra.encode()).hexdigest()[:32]


def render_cached(spec: Spec) -> dict[str, Any]:
    """The figure render(spec) draws, as the JSON-ready dict sent to the browser, cached per spec and dataset
    versions (building a Plotly figure of thousands of points takes longer than reading its data from the cache),
    its margins fitted to the card's width."""
    return _fitted(access.derived(_figure_key(spec), spec["state"], lambda: _as_dict(spec)), spec)


def cached_figure(spec: Spec) -> dict[str, Any] | None:
    """spec's figure, its margins fitted to the card's width, when it is in the cache already (a page laid out with
    it draws once, with no request), else None."""
    try:
        figure = access.derived_if_cached(_figure_key(spec), spec["state"])
    except access.USER_ERRORS:
        return None
    return None if figure is None else _fitted(figure, spec)


def _fitted(figure: dict[str, Any], spec: Spec) -> dict[str, Any]:
    plot_px = margins.card_plot_width_px(spec.get(VIEWPORT), bool(spec.get(WIDE)))
    return margins.fitted(figure, plot_px, margins.text_scale(spec.get(TEXT)))


def _as_dict(spec: Spec) -> dict[str, Any]:
    return render(spec)[0].to_plotly_json()
