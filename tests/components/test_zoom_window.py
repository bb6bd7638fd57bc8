"""A zoom of the utilisation chart computes the zoomed window only (one step wider on each side), at the step the
chart's width needs there, and shows exactly the steps the whole period's series has there."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analytics import queries, store
from analytics.filters import JobFilter, empty_state
from components.charts import decimate, registry
from tests.analytics.test_queries_crosscheck import random_trace

ZOOMS = [  # at the default viewport's width (1,800 px)
    (datetime(2020, 4, 1, 7, 13, 20), timedelta(hours=20)),  # 1-minute steps
    (datetime(2020, 4, 1, 23, 55), timedelta(days=2)),  # 2-minute steps
    (datetime(2020, 4, 1, 2), timedelta(days=5)),  # 5-minute steps
    (datetime(2020, 3, 31, 20), timedelta(days=80)),  # past both ends of the period: hourly steps
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    jobs, caps = random_trace(seed=21, n_jobs=600)
    return store.write_dataset("zoom", jobs, caps, {}, root=tmp_path_factory.mktemp("data"))


@pytest.mark.parametrize(("x0", "span"), ZOOMS)
def test_a_zoom_shows_the_whole_periods_steps(dataset, monkeypatch, x0, span):
    x1 = x0 + span
    every = min(decimate.step_for(span.total_seconds(), decimate.plot_width_px(None)), "1h", key=decimate.STEP_S.get)
    whole = queries.QUERIES["utilization_resampled"](dataset, JobFilter(), every=every)
    monkeypatch.setattr(registry.access, "open_dataset", lambda name: dataset)
    monkeypatch.setattr(registry.access, "query", lambda name, state, **kw: queries.QUERIES[name](dataset, **kw))
    monkeypatch.setattr(registry.access, "derived", lambda name, state, compute: compute())
    shown = registry.utilization_window({"state": empty_state("zoom")}, x0, x1)
    inside = pl.col("time").is_between(x0, x1)
    assert_frame_equal(shown.filter(inside), whole.filter(inside))
    assert shown.filter(inside).height > 0
