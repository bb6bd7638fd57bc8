"""The filter state: URL round trips, validation messages and the JobFilter it becomes."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analytics.filters import empty_state, parse_query, to_filter, to_query
from components.whatif.state import default_form, form_from_params, form_to_config
from sim.scenario import ScenarioError

NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)


def test_a_full_state_round_trips_through_the_url():
    state = empty_state("helios-synth")
    state.update(
        clusters=["Venus", "Earth"],
        vcs=["vc6YE"],
        users=["u1"],
        states=["FAILED", "TIMEOUT"],
        start="2020-05-01",
        end="2020-05-31",
        job_kind="gpu",
        gpu_min=2,
        gpu_max=64,
    )
    query = to_query(state)
    assert query.startswith("?ds=helios-synth&cluster=Venus,Earth")
    parsed, problems = parse_query(query)
    assert problems == [] and parsed == state


@given(
    clusters=st.lists(NAMES, max_size=3, unique=True),
    users=st.lists(NAMES, max_size=3, unique=True),
    kind=st.sampled_from(["all", "gpu", "cpu"]),
    gpu_min=st.none() | st.integers(0, 64),
)
def test_any_state_round_trips(clusters, users, kind, gpu_min):
    state = empty_state("ds")
    state.update(clusters=clusters, users=users, job_kind=kind, gpu_min=gpu_min)
    assert parse_query(to_query(state)) == (state, [])


def test_an_empty_state_has_an_empty_query_and_the_default_dataset_fills_in():
    assert to_query(empty_state()) == ""
    state, problems = parse_query("", default_dataset="helios-synth")
    assert state == empty_state("helios-synth") and problems == []


def test_bad_parameters_are_dropped_with_a_message_naming_them():
    state, problems = parse_query("?kind=tpu&gmin=-3&start=May&state=COMPLETED,BOGUS")
    assert state["job_kind"] == "all" and state["gpu_min"] is None and state["start"] is None
    assert state["states"] == ["COMPLETED"]
    assert len(problems) == 4
    assert any("kind='tpu'" in p for p in problems) and any("BOGUS" in p for p in problems)


def test_the_end_day_is_inclusive_in_the_ui_and_exclusive_in_the_filter():
    state = empty_state("x")
    state.update(start="2020-05-01", end="2020-05-31", job_kind="cpu", gpu_max=8)
    flt = to_filter(state)
    assert flt.start == datetime(2020, 5, 1) and flt.end == datetime(2020, 6, 1)
    assert flt.job_kind == "cpu" and flt.gpu_max == 8


def test_url_numbers_go_through_the_scenario_limits_and_are_reported_not_dropped():
    form, problems = form_from_params({"load": "50", "cap": "0.5", "noise": "x"}, default_form("helios-synth"))
    assert form["load_factor"] == 50.0  # kept, so the form shows what the link asked for
    assert form["capacity_scale"] == 0.5
    assert problems == [
        "URL parameter noise='x' is not a number; ignored",
        "URL parameter load: load factor must be between 0.1 and 10, got 50",
    ]
    with pytest.raises(ScenarioError, match="must be at most 10"):
        form_to_config({**form, "cluster": "Venus"})  # and refused where the run is built
