"""What-if page: URL state, run and cache callbacks, rendering, downloads, "why wait" and the page route."""

from __future__ import annotations

import dataclasses
import io
import json
from contextvars import copy_context
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest
from dash._callback_context import context_value
from dash._utils import AttributeDict
from plotly.io.json import to_json_plotly

from analytics import schema
from analytics.filters import query_params
from components.charts.figures import PALETTE
from components.server.background import BackgroundSetupError, background_manager, poll_interval_ms
from components.server.settings import Settings
from components.whatif import callbacks as cb
from components.whatif import figures as wf
from components.whatif import form as ids
from components.whatif.run import results_cache
from components.whatif.state import (
    default_form,
    form_from_params,
    form_to_config,
    form_to_params,
)
from sim.ces.policy import POLICY_PARAMS
from sim.scenario import RECORDED, TWIN, ScenarioError, config_to_dict
from sim.scenario.outputs import replay_fidelity
from sim.scenario.run import default_baseline
from sim.slurm.knobs import KNOBS


@pytest.fixture
def settings(tmp_path, write_small):
    """Settings over a data folder holding the small two-cluster dataset, with fresh caches."""
    data = tmp_path / "data"
    write_small("helios-synth", data)
    return Settings(data_dir=data, cache_dir=tmp_path / "cache")


def _form(**changes) -> dict:
    form = default_form("helios-synth", "Earth", "2020-04-15", "2020-04-20")
    form.update({"policies": ["fifo", "sjf"], **changes})
    return form


def _values(form: dict) -> list:
    return [form[k] for k in ids.FORM_FIELDS]


def _click_run(form: dict, settings: Settings, trigger: str = "whatif-run.n_clicks", search: str = ""):
    def call():
        context_value.set(AttributeDict(triggered_inputs=[{"prop_id": trigger, "value": 1}]))
        return cb.start_run(
            1, [None] * 9, [None] * 7, [None] * len(KNOBS), *_values(form), settings=settings, search=search
        )

    return copy_context().run(call)


def _in_context(fn, trigger: str):
    def call():
        context_value.set(AttributeDict(triggered_inputs=[{"prop_id": trigger, "value": 1}]))
        return fn()

    return copy_context().run(call)


def test_form_round_trips_through_the_url():
    form = _form(
        vcs=["vcC", "vcD"],
        backfill=True,
        estimator="noisy-oracle",
        noise_level=2.5,
        load_factor=1.2,
        ces_enabled=True,
        ces_policy={"buffer": 3.0},
        ces_energy={"busy_kw": 2.5},
    )
    params = form_to_params(form)
    assert params["run"] == "1" and params["pol"] == "fifo,sjf" and params["c_buffer"] == "3"
    back, problems = form_from_params(params, default_form("other", "Venus"))
    assert problems == [] and back == form


def test_the_twin_baseline_switch_round_trips_through_the_url():
    form = _form(twin_baseline=False)
    params = form_to_params(form)
    assert params["tb"] == "0" and "tb" not in form_to_params(_form())
    back, problems = form_from_params(params, default_form("other", "Venus"))
    assert problems == [] and back["twin_baseline"] is False and form_to_config(back).twin_baseline is False
    kept, problems = form_from_params({**params, "tb": "no"}, default_form("other", "Venus"))
    assert problems == ["URL parameter tb='no' must be 0 or 1; ignored"] and kept["twin_baseline"] is True
    with pytest.raises(ScenarioError, match="twin baseline must be true or false"):
        form_to_config({**form, "twin_baseline": "false"})  # a tampered client's text is refused, not read as true


def test_bad_url_values_are_reported_and_ignored():
    params = query_params("?ds=helios-synth&pol=fifo,magic&load=fast&est=psychic&c_buffer=x")
    form, problems = form_from_params(params, _form())
    assert form["policies"] == ["fifo"] and form["load_factor"] == 1.0 and form["estimator"] == "history"
    assert len(problems) == 4 and any("magic" in p for p in problems)


def test_the_first_of_several_clusters_from_the_filter_bar_is_used():
    form, _ = form_from_params(query_params("?ds=helios-synth&cluster=Venus,Earth"), _form())
    assert form["cluster"] == "Venus"


def test_form_to_config_orders_policies_canonically():
    assert form_to_config(_form(policies=["qssf", "fifo"])).policies == ("fifo", "qssf")


def test_run_click_hands_an_uncached_scenario_to_the_background(settings):
    search, error, request, results, meta, status = _click_run(_form(), settings)
    assert error is None and status == "running…"
    assert "pol=fifo,sjf" in search and search.endswith("run=1")
    assert request["config"]["policies"] == ["fifo", "sjf"]
    assert results is cb.no_update and meta is cb.no_update


def test_a_run_keeps_the_sweep_part_of_the_url_and_nothing_else(settings):
    before = "?ds=other&pol=las&run=1&sx=load_factor&sxv=1,1.2&sy=policy&syv=fifo,sjf&sm=avg_queue_s&sweep=1&x=y"
    search, *_ = _click_run(_form(), settings, search=before)
    params = query_params(search)
    assert params["ds"] == "helios-synth" and params["pol"] == "fifo,sjf" and params["run"] == "1"
    assert {k: params[k] for k in ("sx", "sxv", "sy", "syv", "sm", "sweep")} == {
        "sx": "load_factor",
        "sxv": "1,1.2",
        "sy": "policy",
        "syv": "fifo,sjf",
        "sm": "avg_queue_s",
        "sweep": "1",
    }
    assert "x" not in params


def test_a_bad_form_shows_a_one_line_error(settings):
    out = _click_run(_form(load_factor=-1), settings)
    assert "load factor must be between 0.1 and 10" in out[1].children
    assert out[2] is cb.no_update


@pytest.mark.parametrize(
    "search",
    [
        "?ds=helios-synth",
        "?ds=helios-synth&cluster=Venus&pol=fifo,qssf&ces=1&cpre=saturn",
        "?ds=helios-synth&cluster=Nowhere&vc=vcZ",
        "?ds=philly-mini&start=1999-01-01",
        "?ds=no-such-dataset",
        "",
    ],
)
def test_the_page_is_laid_out_with_what_its_form_callbacks_give_it(module_ui, _module_app, search):
    ui = module_ui
    layout = ui.page("/whatif", search)
    assert ui.find(layout, ids.DATASET) is not None  # a form on every one (an unknown dataset: named in a note)
    with _module_app[0].server.app_context():  # the callbacks read the dataset through the app's cache
        value = {
            cid: ui.find(layout, cid)["value"] for cid in (ids.DATASET, ids.CLUSTER, ids.CES_ENABLED, ids.POLICIES)
        }
        dates = ui.find(layout, ids.DATES)
        shown = (ui.find(layout, ids.CLUSTER)["options"], dates["min_date_allowed"], dates["max_date_allowed"])
        assert list(shown) == list(ids.scope_options(value[ids.DATASET]))
        assert ui.find(layout, ids.VCS)["options"] == ids.vc_options(value[ids.DATASET], value[ids.CLUSTER])
        assert ui.find(layout, ids.CES_BODY).get("style") == ids.ces_body_style(value[ids.CES_ENABLED])
        assert ui.find(layout, ids.CES_SCHEDULE)["options"] == ids.schedule_options(value[ids.POLICIES])
        preset = ui.find(layout, ids.CES_PRESET)["value"]
        placeholders = [ui.find(layout, {"type": ids.CES_POLICY, "name": n})["placeholder"] for n in POLICY_PARAMS]
        assert placeholders == ids.policy_placeholders(preset)


def test_background_job_reports_progress_renders_and_caches(settings):
    _, _, request, _, _, _ = _click_run(_form(), settings)
    seen = []
    children, meta, status, error = cb.run_job(seen.append, request, settings)
    assert error is None and status.startswith("ran in") and meta["cached"] is False
    assert seen[-1][0] == 100 and all(0 <= p <= 100 for p, _ in seen)
    cached = results_cache(settings).get(meta["key"])
    assert cached is not None and cached.summary["scheme"].to_list() == [RECORDED, TWIN, "fifo", "sjf"]
    graph_ids = {n["props"]["id"] for n in _walk(children) if str(n["props"].get("id", "")).startswith("whatif-g")}
    assert {
        "whatif-graph-jct-cdf",
        "whatif-graph-queue-cdf",
        "whatif-graph-vc-queue",
        "whatif-graph-timeline",
    } <= graph_ids
    # The same scenario again comes straight from the cache, in the click callback itself.
    search, _, request2, children2, meta2, status2 = _click_run(_form(), settings)
    assert request2 is cb.no_update and meta2 == {"key": meta["key"], "cached": True}
    assert status2.startswith("from cache")
    assert _table_text(children2) == _table_text(children)


def test_background_job_shows_scenario_errors(settings):
    request = {"config": {**config_to_dict(form_to_config(_form())), "cluster": "Mars"}}
    *_, error = cb.run_job(lambda p: None, request, settings)
    assert "cluster 'Mars' has no GPU jobs" in error.children


def _walk(children) -> list[dict]:
    """Every component (as JSON, the way the browser receives it) in a tree of children."""
    tree = children if _is_plain(children) else json.loads(to_json_plotly(children))
    found: list[dict] = []

    def visit(node) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict) and "props" in node:
            found.append(node)
            for value in node["props"].values():
                visit(value)

    visit(tree)
    return found


def _is_plain(children) -> bool:
    return isinstance(children, list) and all(isinstance(c, dict) for c in children)


def _table_text(children) -> list[str]:
    return [str(n["props"].get("children")) for n in _walk(children) if n["type"] == "Td"]


@pytest.fixture
def ran(settings):
    _, _, request, _, _, _ = _click_run(_form(), settings)
    _, meta, _, _ = cb.run_job(lambda p: None, request, settings)
    return meta, results_cache(settings).get(meta["key"])


def test_downloads_send_the_cached_result(ran, settings):
    meta, result = ran

    def click(button: str, *clicks):
        return _in_context(lambda: cb.download(*clicks, meta, settings), f"whatif-dl-{button}.n_clicks")

    records = click("records", None, 1, None, None)
    frame = pl.read_csv(io.StringIO(records["content"]))
    assert frame.height == result.records.height and records["filename"].endswith("-jobs.csv")
    summary = click("summary", 1, None, None, None)
    assert pl.read_csv(io.StringIO(summary["content"]))["scheme"].to_list() == [RECORDED, TWIN, "fifo", "sjf"]
    metrics = click("json", None, None, 1, None)
    assert '"summary"' in metrics["content"] and metrics["filename"].endswith(".json")
    with pytest.raises(cb.PreventUpdate):  # no CES in this scenario
        click("ces", None, None, None, 1)


def test_why_wait_lists_the_longest_waits_and_who_went_first(ran, settings):
    meta, result = ran
    schemes, first = cb.wait_schemes(meta, settings)
    assert schemes == [RECORDED, TWIN, "fifo", "sjf"] and first == TWIN
    options, chosen = cb.wait_jobs("fifo", meta, settings)
    fifo = result.records.filter((pl.col("scheme") == "fifo") & pl.col("placed"))
    assert chosen == fifo.sort("queue_s", descending=True)["job_id"][0]
    graph, table = cb.wait_view(chosen, "fifo", meta, settings)
    assert [t.name.split(":")[0] for t in graph.figure.data] == [RECORDED, "fifo"]
    assert cb.wait_view(None, "fifo", meta, settings) == (None, None)  # no chart before a job is chosen
    job, ahead = wf.jobs_ahead(result.records, "fifo", chosen)
    assert (ahead["start_s"] <= job["start_s"]).all() and (ahead["vc"] == job["vc"]).all()


def test_queue_position_by_hand():
    job = {"submit_s": 10, "start_s": 50}
    ahead = pl.DataFrame({"submit_s": [0, 20, 30], "start_s": [40, 45, 50]})
    times, waiting = wf.queue_position(job, ahead)
    assert times.tolist() == [10, 20, 30, 40, 45, 50]
    assert waiting.tolist() == [1, 2, 3, 2, 1, 0]


def test_ces_figure_and_numbers():
    timeline = pl.DataFrame(
        {
            "time": [datetime(2020, 9, 1, 0, 10 * k) for k in range(3)],
            "total": [10, 10, 10],
            "running": [4, 5, 6],
            "prediction": [4.5, 5.5, 6.5],
            "active": [9, 9, 8],
        }
    )
    fig = wf.ces_figure(wf.thinned_ces(timeline, 1920))
    assert [t.name for t in fig.data] == ["total", "powered on", "running", "predicted"]
    assert list(fig.data[2].y) == [4, 5, 6]  # three 10-minute samples: nothing to thin
    row = wf.ces_numbers({"energy_saved_kwh": 12.5, "lack_node_steps": 3})
    texts = [str(n["props"].get("children")) for n in _walk(row) if n["type"] == "Div"]
    assert "12.5 kWh" in texts and "3 node-steps" in texts


def test_a_year_long_timeline_is_thinned_to_its_half_width_chart_keeping_its_peaks():
    n = 365 * 144  # a year of 10-minute samples
    rng = np.random.default_rng(3)
    queued = rng.integers(0, 50, n)
    queued[40_000] = 900  # one sample's peak
    t0 = datetime(2020, 1, 1)
    timeline = pl.DataFrame(
        {
            "scheme": ["fifo"] * n,
            "time": [t0 + timedelta(minutes=10 * k) for k in range(n)],
            "used_gpus": rng.integers(0, 64, n),
            "queued_jobs": queued,
            "capacity_gpus": [64] * n,
        }
    )
    fig = wf.timeline_figure(wf.thinned_timeline(timeline, 1440))  # a 1,600 px class: charts of 680 px
    queue, util = (fig.data[0].y, fig.data[1].y)
    assert len(queue) <= 2 * 680 and len(util) <= 2 * 680
    assert max(queue) == 900 and min(queue) == 0
    assert max(util) == pytest.approx(63 / 64 * 100) and min(util) == 0


def test_whatif_page_route_fills_the_form_from_the_url(ui):
    search = "?ds=helios-synth&cluster=Venus&pol=fifo,qssf&load=1.5&bf=1&run=1"
    layout = ui.page("/whatif", search)
    assert ui.find(layout, ids.CLUSTER)["value"] == "Venus"
    assert ui.find(layout, ids.POLICIES)["value"] == ["fifo", "qssf"]
    assert ui.find(layout, ids.LOAD)["value"] == 1.5
    assert ui.find(layout, ids.BACKFILL)["value"] is True
    assert ui.find(layout, ids.AUTORUN)["data"] is True


def test_background_manager_defaults_to_diskcache(tmp_path, monkeypatch):
    import dash

    monkeypatch.delenv("HELIOS_REDIS_URL", raising=False)
    manager = background_manager(Settings(cache_dir=tmp_path / "c"))
    assert isinstance(manager, dash.DiskcacheManager)
    assert (tmp_path / "c" / "background").is_dir()


def test_background_manager_names_a_missing_celery(monkeypatch):
    monkeypatch.setenv("HELIOS_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setitem(__import__("sys").modules, "celery", None)
    with pytest.raises(BackgroundSetupError, match="'celery' package"):
        background_manager()


def test_poll_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("HELIOS_BG_INTERVAL_MS", "250")
    assert poll_interval_ms() == 250
    monkeypatch.setenv("HELIOS_BG_INTERVAL_MS", "soon")
    with pytest.raises(BackgroundSetupError, match="HELIOS_BG_INTERVAL_MS"):
        poll_interval_ms()


def test_results_cache_is_keyed_by_dataset_version(settings, write_small):
    from components.whatif.run import get_or_run
    from sim.scenario import open_request

    config = form_to_config(_form())
    cache = results_cache(settings)
    request = open_request(config, settings.data_dir)
    first, _, cached1 = get_or_run(request, cache)
    again, _, cached2 = get_or_run(open_request(config, settings.data_dir), cache)
    assert (cached1, cached2) == (False, True)
    assert again.summary.equals(first.summary) and again.records.equals(first.records)
    write_small("helios-synth", settings.data_dir, n_jobs=2500)  # a new version of the dataset
    newer = open_request(config, settings.data_dir)
    rerun, _, cached3 = get_or_run(newer, cache)
    assert newer.key != request.key and cached3 is False and rerun.jobs != first.jobs


def test_importance_figure_draws_horizontal_bars_largest_on_top():
    frame = wf.importance_frame({"user": 20.0, "gpu_num": 50.0, "hour": 30.0})
    assert frame["feature"].to_list() == ["gpu_num", "hour", "user"]
    fig = wf.importance_figure(frame)
    (bars,) = fig.data
    assert bars.orientation == "h" and list(bars.y) == ["user", "hour", "gpu_num"]
    assert list(bars.x) == [20.0, 30.0, 50.0] and bars.marker.color == PALETTE[0]
    assert fig.layout.xaxis.title.text == "gain (share of total, %)"
    assert fig.layout.title.text.startswith("LightGBM feature importance")
    empty = wf.importance_figure(wf.importance_frame(None))
    assert not empty.data and empty.layout.annotations[0].text == "No LightGBM model was fitted."


def _graph_ids(children) -> set:
    return {n["props"]["id"] for n in _walk(children) if str(n["props"].get("id", "")).startswith("whatif-g")}


def test_the_importance_figure_appears_only_for_lightgbm(settings):
    _, _, request, _, _, _ = _click_run(_form(estimator="lightgbm"), settings)
    children, meta, _, error = cb.run_job(lambda p: None, request, settings)
    assert error is None and "whatif-graph-importance" in _graph_ids(children)
    result = results_cache(settings).get(meta["key"])
    assert sum(result.importance.values()) == pytest.approx(100.0)
    assert cb.importance_button_style(meta, settings) is None
    sent = cb.download_importance(1, meta, settings)
    frame = pl.read_csv(io.StringIO(sent["content"]))
    assert frame.columns == ["feature", "gain_pct"] and frame["gain_pct"].sum() == pytest.approx(100.0)
    metrics = _in_context(lambda: cb.download(None, None, 1, None, meta, settings), "whatif-dl-json.n_clicks")
    assert json.loads(metrics["content"])["feature_importance_gain_pct"] == result.importance


def test_no_importance_figure_for_other_predictors(ran, settings):
    meta, result = ran
    assert result.importance is None
    assert "whatif-graph-importance" not in _graph_ids(cb.results_children(result))
    assert cb.importance_button_style(meta, settings) == ids.HIDDEN
    with pytest.raises(cb.PreventUpdate):
        cb.download_importance(1, meta, settings)


def test_the_replay_card_comes_first_and_names_the_baseline(ran):
    _, result = ran
    children = cb.results_children(result)
    texts = [str(n["props"].get("children")) for n in _walk(children) if n["type"] == "H6"]
    assert texts[0] == "The Slurm twin against the record"
    ids_seen = {n["props"].get("id") for n in _walk(children)}
    assert {"whatif-replay", "whatif-ratios", "whatif-twin-rules"} <= ids_seen
    assert result.baseline == TWIN and result.replay["baseline"] == TWIN and result.twin["source"] == "calibrated"
    ratios = next(n for n in _walk(children) if n["props"].get("id") == "whatif-ratios")
    assert "within Slurm twin's own error" in str(ratios["props"]["children"])


def test_without_the_twin_the_closest_policy_is_the_baseline(ran):
    _, result = ran
    rows = [r for r in result.summary.to_dicts() if r["scheme"] != TWIN]
    baseline = default_baseline(rows, ("fifo", "sjf"))
    replay = replay_fidelity(rows, baseline)
    children = cb.results_children(dataclasses.replace(result, baseline=baseline, replay=replay, twin=None))
    texts = [str(n["props"].get("children")) for n in _walk(children) if n["type"] == "H6"]
    assert texts[0] == "How far to trust this replay" and baseline in ("fifo", "sjf")


def test_a_replay_far_from_the_record_is_flagged(ran):
    _, result = ran
    far = {**result.replay, "far": True, "why": ["its mean queue is 12× the recorded one"]}
    children = cb.results_children(dataclasses.replace(result, replay=far))
    alerts = [n for n in _walk(children) if n["props"].get("id") == "whatif-replay-warning"]
    assert len(alerts) == 1 and "12× the recorded one" in str(alerts[0]["props"]["children"])


def test_ratios_say_their_direction():
    assert wf.ratio_phrase(0.128, "mean queue", "FIFO") == "0.13× FIFO's mean queue, 7.8× shorter"
    assert wf.ratio_phrase(692.3, "mean queue", "SRTF") == "692× SRTF's mean queue, 692× longer"
    assert wf.ratio_phrase(1.0, "mean JCT", "FIFO") == "1.00× FIFO's mean JCT, the same"
    assert wf.ratio_phrase(0.0, "mean queue", "Slurm twin") == "0× Slurm twin's mean queue: none at all"
    summary = pl.DataFrame(
        {
            "scheme": [RECORDED, "fifo", "qssf"],
            "avg_queue_x_vs_baseline": [2.0, 1.0, 0.128],
            "avg_jct_x_vs_baseline": [1.0, 1.0, 0.5],
        }
    )
    assert wf.ratio_sentences(summary, "fifo") == [
        "QSSF: 0.13× FIFO's mean queue, 7.8× shorter; 0.5× FIFO's mean JCT, 2× shorter."
    ]


def test_a_predictor_worse_than_none_is_called_out():
    predictor = {"name": "history", "mae_s": 9000.0, "median_ape_pct": 2432.0, "spearman": 0.1}
    predictor |= {"none": {"mae_s": 5000.0, "median_ape_pct": 99.0}, "worse_than_none": ["mae_s", "median_ape_pct"]}
    found = [n for n in _walk([cb._predictor_text(predictor)]) if n["props"].get("id") == "whatif-predictor-warning"]
    assert len(found) == 1 and "mean absolute error and median relative error" in str(found[0]["props"]["children"])
    assert not [n for n in _walk([cb._predictor_text(predictor | {"worse_than_none": []})]) if n["type"] == "Alert"]


def test_the_twin_sections_inputs_become_knobs_and_a_bad_cap_is_named():
    from components.whatif import form as ids

    values = _values(_form())
    twin_values = [None] * len(KNOBS) + ["vcA=2, vcB = 4"]
    twin_values[list(KNOBS).index("backfill")] = 0
    form = ids.form_of(values, [None] * 9, [None] * 7, twin_values)
    assert form["twin"] == {"backfill": 0.0, "account_gpus.vcA": 2.0, "account_gpus.vcB": 4.0}
    with pytest.raises(ScenarioError, match="'vcA': expected account=GPUs"):
        ids.form_of(values, [None] * 9, [None] * 7, [None] * len(KNOBS) + ["vcA"])


def test_a_dataset_that_cannot_be_read_is_named_on_the_page_not_shown_as_an_empty_form(ui, small_data):
    (small_data / "philly-mini" / schema.VC_GPUS_FILE).unlink()  # listed, but incomplete
    layout = ui.page("/whatif", "?ds=philly-mini")
    alerts = [n["props"] for n in ui.walk(layout) if n["type"] == "Alert" and n["props"].get("color") == "danger"]
    assert alerts and "incomplete" in str(alerts[0]["children"]) and ui.find(layout, ids.DATASET) is None
