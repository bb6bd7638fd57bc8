"""Issue #37: the time charts are thinned on the server to about two points per pixel of their width, each bucket
drawn through its lowest and highest value, so that a one-minute peak stays visible at every zoom level; the CSV
keeps the series the chart was thinned from."""

from __future__ import annotations

import base64
from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from analytics import queries, store
from analytics.filters import JobFilter, empty_state
from components.charts import decimate
from components.charts import registry as charts

START = datetime(2020, 1, 1)
DAYS = 200
BASE_GPUS, SPIKE_GPUS, CAPACITY = 40, 40, 80  # utilisation 50 %, and 100 % in a spike's minute
SPIKES = (  # each a job of SPIKE_GPUS running 30 s: one minute at 100 %
    datetime(2020, 2, 10, 13, 7, 10),
    datetime(2020, 4, 2, 3, 41, 0),
    datetime(2020, 6, 30, 22, 59, 20),
)
ZOOMS = [  # (start, span): whole-period buckets of hours, then 30, 10, 1 and 1 minutes
    (None, None),
    (datetime(2020, 3, 20), timedelta(days=30)),
    (datetime(2020, 3, 30), timedelta(days=7)),
    (datetime(2020, 4, 1, 12), timedelta(days=1)),
    (datetime(2020, 4, 2, 3), timedelta(hours=2)),
]


def _ms(value) -> np.ndarray:
    """A trace's x or y as numbers, whether plotly sent a typed array (base64) or a list."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return np.asarray(value, dtype=float)


def spiky_trace() -> tuple[pl.DataFrame, pl.DataFrame]:
    """One cluster at 50 % for DAYS days (one long job), with a one-minute spike to 100 % at each of SPIKES."""
    starts = [START, *SPIKES]
    durations = [DAYS * 86_400 - 60, *[30] * len(SPIKES)]
    n = len(starts)
    jobs = pl.DataFrame(
        {
            "cluster": ["Venus"] * n,
            "job_id": np.arange(1, n + 1),
            "user": ["u1"] * n,
            "vc": ["vcA"] * n,
            "gpu_num": [BASE_GPUS] + [SPIKE_GPUS] * len(SPIKES),
            "cpu_num": [8.0] * n,
            "state": ["COMPLETED"] * n,
            "submit_time": starts,
            "start_time": starts,
            "end_time": [s + timedelta(seconds=d) for s, d in zip(starts, durations, strict=True)],
            "duration": durations,
            "queue": [0] * n,
        }
    )
    caps = pl.DataFrame(
        {
            "cluster": ["Venus"] * DAYS,
            "vc": ["vcA"] * DAYS,
            "date": [date(2020, 1, 1) + timedelta(days=d) for d in range(DAYS)],
            "gpus": [CAPACITY] * DAYS,
        }
    )
    return jobs, caps


@pytest.fixture(scope="module")
def spiky(tmp_path_factory):
    """The dashboard over the spiky trace, with its rollups written as at ingest."""
    from app import create_app
    from components.server.settings import Settings

    root = tmp_path_factory.mktemp("spiky")
    (root / "data").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HELIOS_DATA_DIR", str(root / "data"))
        ds = store.write_dataset("spiky", *spiky_trace(), {}, root=root / "data")
        queries.derive(ds)
        app = create_app(Settings(data_dir=root / "data", cache_dir=root / "cache"))
        yield app, ds


def drawn(app, viewport_px: int, x0: datetime | None, span: timedelta | None) -> tuple[np.ndarray, np.ndarray]:
    """The utilisation chart's points (x in epoch ms, y in %) as a reader with this viewport sees it: the page's
    figure, or the zoom callback's answer for [x0, x0 + span]."""
    from components.pages import cluster

    spec = {"name": "utilization", "state": empty_state("spiky"), charts.VIEWPORT: viewport_px}
    with app.server.test_request_context():
        if x0 is None:
            fig = charts.render_cached(spec)
        else:
            relayout = {"xaxis.range[0]": str(x0), "xaxis.range[1]": str(x0 + span)}
            fig = cluster.zoom_utilization(relayout, spec).to_plotly_json()
    (trace,) = fig["data"]
    return _ms(trace["x"]), _ms(trace["y"])


def test_the_trace_has_one_minute_spikes_an_hourly_mean_hides(spiky):
    _, ds = spiky
    minutes = queries.QUERIES["utilization_minutes"](ds, JobFilter())
    peaks = minutes.filter(pl.col("gpu_utilization") > 0.99)["time"].to_list()
    assert peaks == [s.replace(second=0) for s in SPIKES]
    hourly = queries.QUERIES["utilization_resampled"](ds, JobFilter(), every="1h")
    assert hourly["gpu_utilization"].max() < 0.51  # drawn as hourly means, no spike would show
    assert hourly["gpu_utilization_max"].max() == 1.0


@pytest.mark.parametrize("viewport_px", [390, 1280, 1920, 3840])
@pytest.mark.parametrize(("x0", "span"), ZOOMS)
def test_every_spike_stays_visible_at_every_zoom_level(spiky, viewport_px, x0, span):
    app, _ = spiky
    x, y = drawn(app, viewport_px, x0, span)
    width_px = decimate.plot_width_px(viewport_px)
    lo_ms = (x0 or START).timestamp() * 1000
    hi_ms = lo_ms + (span or timedelta(days=DAYS)).total_seconds() * 1000
    inside = (x >= lo_ms) & (x <= hi_ms)
    assert inside.sum() <= 2 * width_px + 4  # about two points per pixel in view, never more
    assert x.size <= 4 * width_px + 8  # with the coarser rest of the period beside a zoom (the range slider's)
    assert np.nanmin(y) == pytest.approx(50.0) and np.nanmax(y) == pytest.approx(100.0)
    for spike in SPIKES:
        ms = spike.replace(second=0).timestamp() * 1000
        near = (x <= ms) & (x > ms - 4 * 7 * 86_400_000)  # the bucket holding it starts at most 4 weeks before
        last_bucket = x[near].max()
        assert y[x == last_bucket].max() == pytest.approx(100.0), spike


def test_the_csv_keeps_the_series_the_chart_was_thinned_from(spiky):
    app, _ = spiky
    spec = {"name": "utilization", "state": empty_state("spiky"), charts.VIEWPORT: 390}
    with app.server.test_request_context():
        fig, frame = charts.render(spec)
    assert frame.height == DAYS * 24  # hourly rows, not the drawn buckets
    assert frame.filter(pl.col("gpu_utilization_max") == 1.0).height == len(SPIKES)
    assert sum(len(_ms(t.x)) for t in fig.data) < frame.height / 4


def test_the_viewport_is_bounded_and_keys_the_cached_figure():
    assert decimate.viewport_class("1440") == 1600
    assert decimate.viewport_class("1e400") == decimate.viewport_class("drop table") == decimate.DEFAULT_VIEWPORT_PX
    assert decimate.viewport_class(-3) == decimate.MIN_VIEWPORT_PX
    assert decimate.viewport_class(10**12) == decimate.MAX_VIEWPORT_PX
    spec = {"name": "utilization", "state": empty_state("helios-synth")}
    keys = {charts._figure_key({**spec, charts.VIEWPORT: v}) for v in (1300, 1400, 1600, "1599.5")}
    assert len(keys) == 1 and charts._figure_key({**spec, charts.VIEWPORT: 1601}) not in keys
    other = {"name": "heatmap", "state": empty_state("helios-synth")}
    assert charts._figure_key({**other, charts.VIEWPORT: 390, charts.WIDE: True}) == charts._figure_key(other)


def test_a_bucket_is_drawn_through_its_lowest_then_highest_value():
    bucket, values, kind = decimate.interleaved(np.array([1.0, 2.0, np.nan, 3.0]), np.array([4.0, 2.0, np.nan, 5.0]))
    assert bucket.tolist() == [0, 0, 1, 2, 3, 3]
    assert np.array_equal(values, [1.0, 4.0, 2.0, np.nan, 3.0, 5.0], equal_nan=True)  # an unknown bucket: a gap
    assert kind.tolist() == [0, 1, decimate.BOTH, decimate.BOTH, 0, 1]


def test_the_bucket_is_the_shortest_that_fits_the_width():
    assert decimate.step_for(183 * 86_400, 1800) == "3h"
    assert decimate.step_for(86_400, 1800) == "1m"
    assert decimate.step_for(86_400, 500) == "5m"
    assert decimate.step_for(21 * 86_400, 1800, finest="1h") == "1h"
    assert decimate.step_for(100 * 365 * 86_400, 200) == decimate.STEPS_MIN[-1][0]


def test_the_viewport_cookie_sets_every_cards_spec(ui):
    ui.client.set_cookie(decimate.VIEWPORT_COOKIE, "390")
    specs = {s["name"]: s for s in ui.specs(ui.page("/cluster", "?ds=helios-synth"))}
    assert specs["utilization"][charts.VIEWPORT] == specs["heatmap"][charts.VIEWPORT] == 390
    assert specs["utilization"][charts.WIDE] and not specs["heatmap"][charts.WIDE]
    ui.client.set_cookie(decimate.VIEWPORT_COOKIE, "<script>")
    again = {s["name"]: s for s in ui.specs(ui.page("/cluster", "?ds=helios-synth"))}
    assert again["utilization"][charts.VIEWPORT] == decimate.DEFAULT_VIEWPORT_PX
    ui.client.set_cookie(decimate.VIEWPORT_COOKIE, "99999")
    assert ui.specs(ui.page("/cluster", "?ds=helios-synth"))[0][charts.VIEWPORT] == decimate.MAX_VIEWPORT_PX
