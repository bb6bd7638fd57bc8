"""The filter state: URL round trips, validation messages and the JobFilter it becomes."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analytics.filters import (
    Known,
    check_dataset,
    check_known,
    empty_state,
    parse_query,
    resolve_range,
    to_filter,
    to_query,
)
from components.whatif.state import default_form, form_from_params, form_to_config, form_to_params
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
        time="running",
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


def test_a_relative_range_stays_relative_in_the_url():
    state, problems = parse_query("?ds=h&range=7d&time=running")
    assert problems == [] and state["range"] == "7d" and state["time"] == "running"
    resolve_range(state, datetime(2020, 9, 27, 14, 2, 30), now=datetime(2026, 12, 2))
    assert state["start"] == "2020-09-20" and state["end"] == "2020-09-27"
    assert to_query(state) == "?ds=h&range=7d&time=running"  # the resolved days are not written into the link


def test_a_range_on_a_past_trace_counts_back_from_its_last_submission_and_says_so():
    state, _ = parse_query("?ds=h&range=24h")
    note = resolve_range(state, datetime(2020, 9, 27, 14, 2, 30), now=datetime(2026, 12, 2))
    flt = to_filter(state)
    assert (flt.start, flt.end) == (datetime(2020, 9, 26, 14, 3), datetime(2020, 9, 27, 14, 3))
    assert note.startswith("Last 24 hours of the trace: 2020-09-26 14:03 – 2020-09-27 14:03")
    assert "last job was submitted 2020-09-27 14:02" in note and "not from today" in note


def test_a_range_on_a_live_trace_counts_back_from_now():
    now = datetime(2026, 12, 2, 9, 30)
    state, _ = parse_query("?ds=h&range=month")
    note = resolve_range(state, now - timedelta(hours=2), now=now)
    assert to_filter(state).start == datetime(2026, 12, 1) and to_filter(state).end == datetime(2026, 12, 2, 9, 31)
    assert note.startswith("This month: 2026-12-01 00:00") and "trace" not in note


def test_the_whole_trace_range_selects_every_job():
    state, _ = parse_query("?ds=h&range=all&time=running")
    resolve_range(state, datetime(2020, 9, 27), now=datetime(2026, 12, 2))
    assert to_filter(state).where() == ("TRUE", [])


def test_a_range_wins_over_days_and_bad_time_values_are_named():
    state, problems = parse_query("?range=30d&start=2020-01-01&time=overlapping&range=1y")
    assert state["range"] is None and state["time"] == "submitted"
    assert any("range='1y'" in p for p in problems) and any("time='overlapping'" in p for p in problems)
    state, problems = parse_query("?range=30d&start=2020-01-01")
    assert (
        state["range"] == "30d"
        and state["start"] is None
        and problems == ["URL parameter start ignored: range=30d sets the window"]
    )


def test_reversed_days_and_gpu_bounds_are_ignored_with_a_message():
    state, problems = parse_query("?start=2020-05-02&end=2020-05-01&gmin=8&gmax=2")
    assert (state["start"], state["end"], state["gpu_min"], state["gpu_max"]) == (None, None, None, None)
    assert len(problems) == 2 and "after end=2020-05-01" in problems[0] and "gmin=8 > gmax=2" in problems[1]


KNOWN = Known(
    clusters=("Venus", "Earth"),
    cluster_vcs=(("Venus", "vcA"), ("Earth", "vcB")),
    users=("u1", "u2"),
    first_day="2020-04-01",
    last_day="2020-09-27",
)


def test_values_the_dataset_lacks_are_ignored_each_with_its_reason():
    state, _ = parse_query("?ds=h&cluster=Venus,Mars&vc=vcA,vcB&user=u1,u9&start=2021-01-01")
    problems = check_known(state, KNOWN)
    late, _ = parse_query("?ds=h&end=2019-01-01")
    problems += check_known(late, KNOWN)
    assert state["clusters"] == ["Venus"] and state["vcs"] == ["vcA"] and state["users"] == ["u1"]
    assert state["start"] is None and late["end"] is None
    assert problems == [
        "URL parameter cluster: no cluster Mars in dataset 'h'; ignored",
        "URL parameter vc: no VC vcB in cluster(s) Venus; ignored",
        "URL parameter user: no user u9 in dataset 'h'; ignored",
        "URL parameter start=2021-01-01 is after the trace's last day (the trace runs 2020-04-01 – 2020-09-27); "
        "ignored",
        "URL parameter end=2019-01-01 is before the trace's first day (the trace runs 2020-04-01 – 2020-09-27); "
        "ignored",
    ]


def test_running_mode_on_a_trace_without_start_times_says_it_cannot_apply():
    state, _ = parse_query("?ds=philly&range=7d&time=running")
    no_starts = Known(clusters=("Philly",), no_running="the Philly job list has no start times")
    problems = check_known(state, no_starts)
    assert state["time"] == "submitted"
    assert problems == [
        "URL parameter time=running cannot be applied on dataset 'philly': the Philly job list has no start times; "
        "showing the jobs submitted in the window instead"
    ]


def test_an_unknown_dataset_falls_back_to_the_default_with_a_message():
    state, _ = parse_query("?ds=nope")
    assert check_dataset(state, ["a", "b"], "a") == [
        "URL parameter ds='nope': no dataset of that name; showing 'a' instead"
    ]
    assert state["dataset"] == "a"
    assert check_dataset(state, ["a", "b"], "a") == []


def test_dataset_is_read_as_ds_and_written_back_as_ds():
    state, problems = parse_query("?dataset=philly&cluster=Philly")
    assert problems == [] and state["dataset"] == "philly" and to_query(state) == "?ds=philly&cluster=Philly"


def test_the_slurm_twins_knobs_round_trip_through_the_url_and_reach_the_scenario():
    base = {**default_form("helios-synth", "Earth"), "policies": ["slurm"]}
    form, problems = form_from_params({"t_weight_fairshare": "0", "t_backfill": "0"}, base)
    assert problems == [] and form["twin"] == {"weight_fairshare": 0.0, "backfill": 0.0}
    params = form_to_params(form)
    assert params["t_weight_fairshare"] == "0" and params["t_backfill"] == "0"
    assert form_to_config(form).twin == (("backfill", 0.0), ("weight_fairshare", 0.0))
    assert "t_backfill" not in form_to_params(base)  # no knob set, none in the URL


def test_a_twin_knob_out_of_bounds_is_named_in_the_url_and_refused_at_run():
    base = {**default_form("helios-synth", "Earth"), "policies": ["slurm"]}
    form, problems = form_from_params({"t_bf_window_s": "5", "t_weight_age": "lots"}, base)
    assert any("t_bf_window_s" in p and "from 60" in p for p in problems)
    assert any("t_weight_age" in p and "not a number" in p for p in problems)
    with pytest.raises(ScenarioError, match="bf_window_s must be a whole number from 60"):
        form_to_config(form)
    with pytest.raises(ScenarioError, match="at most 65 knobs"):
        form_to_config({**base, "twin": {f"k{i}": 1 for i in range(70)}})


def test_account_gpu_caps_come_from_the_link_and_the_form_text():
    from components.whatif.state import account_caps

    base = {**default_form("helios-synth", "Earth"), "policies": ["slurm"]}
    form, problems = form_from_params({"t_account_gpus.my-lab": "4"}, base)
    assert problems == [] and form["twin"] == {"account_gpus.my-lab": 4.0}
    assert form_to_params(form)["t_account_gpus.my-lab"] == "4"
    assert form_to_config(form).twin == (("account_gpus.my-lab", 4.0),)
    assert account_caps("nlp=4, speech = 8,") == {"account_gpus.nlp": 4.0, "account_gpus.speech": 8.0}
    with pytest.raises(ScenarioError, match="'nlp': expected account=GPUs"):
        account_caps("nlp")


def test_merged_partitions_come_from_the_link_and_the_form_text():
    from components.whatif.state import merges

    base = {**default_form("helios-synth", "Earth"), "policies": ["slurm"]}
    form, problems = form_from_params({"t_merge.short+long": "1"}, base)
    assert problems == [] and form_to_config(form).twin == (("merge.short+long", 1.0),)
    assert merges("short + long, a+b") == {"merge.short+long": 1.0, "merge.a+b": 1.0}
    with pytest.raises(ScenarioError, match="two or more partition names"):
        form_to_config({**base, "twin": merges("short")})
