"""Smoke test: every page renders through `app.server.test_client()`, and every figure on it draws."""

from __future__ import annotations

import pytest

from components.charts import units

PAGES: dict[str, int] = {"/": 0, "/cluster": 8, "/jobs": 7, "/users": 4, "/compare": 8, "/data": 0}


def test_every_page_is_served_with_the_shell(ui):
    for path in PAGES:
        resp = ui.client.get(path)
        assert resp.status_code == 200
        assert b"<title>Helios Dashboard" in resp.data and b"_dash-renderer" in resp.data
    layout = ui.client.get("/_dash-layout").get_json()
    assert ui.find(layout, "f-dataset")["value"] == "helios-synth"


@pytest.mark.parametrize("path", list(PAGES))
def test_every_page_renders_and_every_figure_draws_data(ui, path):
    layout = ui.page(path)
    specs = ui.specs(layout)
    assert len(specs) == PAGES[path]
    for spec in specs:
        fig = ui.figure(spec)
        assert fig["data"], f"{spec['name']} drew no trace"
        assert fig["layout"]["title"]["text"], f"{spec['name']} has no title"
        assert not fig["layout"].get("annotations"), spec["name"]


def test_a_filtered_url_reaches_the_figures(ui):
    layout = ui.page("/jobs", "?ds=helios-synth&cluster=Venus&kind=gpu")
    spec = ui.specs(layout)[0]
    assert spec["state"]["clusters"] == ["Venus"] and spec["state"]["job_kind"] == "gpu"
    fig = ui.figure(spec)
    assert [t["name"] for t in fig["data"]] == ["Venus"]


def test_an_empty_selection_shows_a_message_not_a_broken_chart(ui):
    layout = ui.page("/jobs", "?cluster=Venus&gmin=4000")
    fig = ui.figure(ui.specs(layout)[0])
    assert fig["data"] == []
    assert fig["layout"]["annotations"][0]["text"] == "No jobs match the current filters."


def test_an_unknown_dataset_is_named_and_the_default_one_shown(ui):
    from tests.components.test_components_callbacks import sync

    layout = ui.page("/cluster", "?ds=nope")
    assert ui.specs(layout) and all(spec["state"]["dataset"] == "helios-synth" for spec in ui.specs(layout))
    alert = str(sync(ui, ("url", "search"), "?ds=nope")["url-alert"]["children"])
    assert "ds='nope': no dataset of that name; showing 'helios-synth' instead" in alert


def test_one_user_in_the_url_opens_the_user_view(ui):
    layout = ui.page("/users", "?user=u001")
    names = [s["name"] for s in ui.specs(layout)]
    assert names == ["user_jobs", "duration_gpu", "gpu_num_jobs", "queue_cdf", "state_by_gpu"]
    fig = ui.figure(ui.specs(layout)[0])
    assert fig["data"] and fig["layout"]["yaxis"]["type"] == "log"


def test_the_data_page_lists_every_dataset_with_its_attribution(ui, small_data):
    text = str(ui.page("/data"))
    assert "helios-synth" in text and "philly-mini" in text and "Made up for tests." in text
    # in plain words: no internal kind ids, no raw report, no server paths
    assert "2 × gpu_num < 0: left out (e.g. cluster_log.csv row 17: gpu_num = -1)." in text
    assert "negative_gpu_num" not in text and "row_counts" not in text and str(small_data) not in text
    assert " jobs on 2 clusters, submitted " in text and "a synthetic trace (generated, not recorded)" in text


def overview(ui, search: str = "") -> dict:
    """The overview page's cards and table, then its utilisation fill, through the callback endpoint."""
    state = ui.find(ui.page("/", search), "overview-spec")["data"]
    outs = [("overview-cards", "children"), ("overview-table", "columnDefs"), ("overview-table", "rowData")]
    out = ui.callback(
        ".." + "...".join(f"{i}.{p}" for i, p in outs) + "..",
        [{"id": i, "property": p} for i, p in outs],
        [{"id": "overview-want", "property": "data", "value": state}],
    )["response"]
    cards = out["overview-cards"]["children"]
    util_ids = [n["props"]["id"] for n in ui.walk(cards) if isinstance(n["props"].get("id"), dict)]
    util = ui.callback(
        '{"cluster":["ALL"],"type":"overview-util"}.children',
        [{"id": i, "property": "children"} for i in util_ids],
        [{"id": "overview-cards", "property": "children", "value": cards}],
        [{"id": "overview-spec", "property": "data", "value": state}],
    )["response"]
    return {"cards": cards, "table": out["overview-table"], "util": util}


def test_the_overview_has_a_card_per_cluster_and_the_summary_table(ui):
    got = overview(ui)
    text = str(got["cards"])
    assert "Venus" in text and "Earth" in text and "active users" in text and "GPU-h" in text
    assert [r["id"] for r in got["table"]["rowData"]] == ["Venus", "Earth", "total"]
    headers = {c["field"]: c["headerName"] for c in got["table"]["columnDefs"]}
    assert headers["avg_run_time_gpu"] == "mean GPU-job run" and len(headers) == 27
    venus = got["table"]["rowData"][0]
    assert venus["avg_run_time_gpu__text"] == units.duration(venus["avg_run_time_gpu"])  # shown in human units
    assert venus["avg_run_time_gpu__exact"] == units.duration_exact(venus["avg_run_time_gpu"])  # exact on hover
    assert len(got["util"]) == 2
    assert all(v["children"].endswith(" %") for v in got["util"].values())


def test_the_overview_is_laid_out_with_its_cards_once_they_are_cached(ui):
    first = ui.page("/", "?cluster=Venus")
    assert ui.find(first, "overview-laid-out")["data"] is False  # nothing cached: asked for by callbacks
    got = overview(ui, "?cluster=Venus")
    again = ui.page("/", "?cluster=Venus")
    assert ui.find(again, "overview-laid-out")["data"] is True
    cards = ui.find(again, "overview-cards")["children"]
    texts = [n["props"].get("children") for n in ui.walk(cards)]
    assert "…" not in texts and list(got["util"].values())[0]["children"] in texts  # the utilisation filled in
    assert "Venus" in texts and "active users" in texts
    assert not [n for n in ui.walk(cards) if isinstance(n["props"].get("id"), dict)]  # nothing left to fill
    grid = ui.find(again, "overview-table")
    assert grid["rowData"] == got["table"]["rowData"] and grid["columnDefs"] == got["table"]["columnDefs"]


def test_the_overview_of_an_empty_selection_says_so(ui):
    got = overview(ui, "?cluster=Venus&gmin=4000")
    assert "No jobs match the current filters." in str(got["cards"]) and got["table"]["rowData"] == []


def test_a_compare_url_restores_its_datasets_and_overlay(ui):
    specs = ui.specs(ui.page("/compare", "?cmp=philly-mini&ref=1"))
    assert {tuple(s["datasets"]) for s in specs} == {("philly-mini",)} and all(s["overlay"] for s in specs)
    fig = ui.figure(specs[0])
    assert [t["name"] for t in fig["data"]][0] == "philly-mini Philly"
    assert any(t["name"].endswith("(published)") for t in fig["data"])
