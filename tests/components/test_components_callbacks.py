"""Callbacks on small datasets: URL <-> filters, options, drill-downs, zoom, CSV downloads and the job explorer."""

from __future__ import annotations

import csv
import importlib
import io
import json
from datetime import datetime
from types import SimpleNamespace
from urllib.parse import unquote

import plotly
import polars as pl
import pytest
from dash import no_update

from analytics.filters import empty_state, to_filter, to_query
from analytics.queries import explorer
from components.charts import figures, units
from components.charts import registry as charts
from components.explorer import grid as explorer_grid
from components.shell import callbacks, controls
from tests.analytics.polars_ref import filter_expr
from tests.components.conftest import SYNC_OUTPUT, find


@pytest.fixture
def pages(dash_app):
    """The page modules, as Dash imported them when the app was built."""
    return SimpleNamespace(
        **{n: importlib.import_module(f"components.pages.{n}") for n in ("cluster", "jobs", "users")}
    )


SYNC_OUTPUTS = callbacks.SYNC_OUTPUTS


def sync(ui, trigger: tuple[str, str], search: str = "", values: list | None = None) -> dict:
    """Call the URL/filter-bar callback as the browser would, with one changed input."""
    values = values if values is not None else callbacks.state_to_controls(empty_state("helios-synth"))
    inputs = [
        {"id": "url", "property": "search", "value": search},
        {"id": "filter-reset", "property": "n_clicks", "value": None},
    ]
    inputs += [{"id": i, "property": p, "value": v} for (i, p), v in zip(callbacks.FILTER_INPUTS, values, strict=True)]
    payload = {
        "output": SYNC_OUTPUT,
        "outputs": [{"id": i, "property": p} for i, p in SYNC_OUTPUTS],
        "inputs": inputs,
        "state": [],
        "changedPropIds": [f"{trigger[0]}.{trigger[1]}"],
    }
    if trigger[0] == "filter-reset":
        inputs[1]["value"] = 1
    resp = ui.client.post("/_dash-update-component", json=payload)
    assert resp.status_code == 200, resp.get_data(as_text=True)[:500]
    return resp.get_json()["response"]


def test_a_shared_url_sets_every_filter_control(ui):
    out = sync(ui, ("url", "search"), "?ds=philly-mini&cluster=Philly&kind=gpu&gmin=2&start=2020-04-02&state=FAILED")
    assert "url" not in out  # the URL is left as it is
    assert out["f-dataset"]["value"] == "philly-mini"
    assert out["f-clusters"]["value"] == ["Philly"]
    assert out["f-kind"]["value"] == "gpu" and out["f-gpu-min"]["value"] == 2
    assert out["f-dates"]["start_date"] == "2020-04-02" and out["f-states"]["value"] == ["FAILED"]
    assert out["filter-state"]["data"]["dataset"] == "philly-mini"
    assert out["f-clusters"]["options"] == ["Philly"]  # options come with the values they must contain
    assert out["nav-query"]["data"] == to_query(out["filter-state"]["data"])  # what every page link carries
    assert out["nav-query"]["data"].startswith("?ds=philly-mini&cluster=Philly")


def test_a_bad_url_parameter_shows_a_warning(ui):
    out = sync(ui, ("url", "search"), "?kind=tpu")
    assert "kind='tpu'" in json.dumps(out["url-alert"]["children"])
    assert out["f-kind"]["value"] == "all"


def test_changing_a_control_rewrites_the_url(ui):
    values = callbacks.state_to_controls(empty_state("helios-synth"))
    values[1] = ["Venus"]
    values[7] = "cpu"
    out = sync(ui, ("f-clusters", "value"), values=values)
    assert out["url"]["search"] == "?ds=helios-synth&cluster=Venus&kind=cpu"
    assert out["filter-state"]["data"]["clusters"] == ["Venus"]
    assert "f-clusters" not in out or "value" not in out["f-clusters"]  # the control keeps its own value
    assert out["f-vcs"]["options"] == ["vcA", "vcB"]  # the VCs of the chosen cluster


def test_changing_the_dataset_clears_its_dataset_specific_filters(ui):
    values = callbacks.state_to_controls(empty_state("philly-mini"))
    values[1], values[2], values[11] = ["Venus"], ["vcA"], ["u001"]
    out = sync(ui, ("f-dataset", "value"), values=values)
    assert out["url"]["search"] == "?ds=philly-mini"
    assert out["f-clusters"]["value"] == [] and out["f-vcs"]["value"] == [] and out["f-users"]["value"] == []


def test_reset_keeps_only_the_dataset(ui):
    values = callbacks.state_to_controls(empty_state("helios-synth"))
    values[7] = "gpu"
    out = sync(ui, ("filter-reset", "n_clicks"), values=values)
    assert out["url"]["search"] == "?ds=helios-synth" and out["f-kind"]["value"] == "all"


def test_filter_options_follow_the_dataset_and_chosen_clusters(dash_app):
    with dash_app.server.test_request_context():
        clusters, vcs, users_, first, last, modes = callbacks.filter_options("helios-synth", ["Venus"], ["u003"])
        assert clusters == ["Earth", "Venus"] and vcs == ["vcA", "vcB"]
        assert users_ == ["u003"] and first == "2020-04-01" and last <= "2020-04-22"  # users: the chosen ones
        assert not any(m.get("disabled") for m in modes)
        assert callbacks.filter_options("missing", None) == ([], [], [], None, None, controls.TIME_OPTIONS)


def _search_users(ui, typed, chosen, dataset="helios-synth"):
    output = next(d["output"] for d in ui.client.get("/_dash-dependencies").get_json() if "search_value" in str(d))
    out = ui.callback(
        output,
        {"id": controls.USERS, "property": output.split(".", 1)[1]},
        [{"id": controls.USERS, "property": "search_value", "value": typed}],
        [
            {"id": controls.USERS, "property": "value", "value": chosen},
            {"id": controls.FILTER_STATE, "property": "data", "value": {"dataset": dataset}},
        ],
    )
    return out.get("response", {}).get(controls.USERS, {}).get("options")


def test_the_user_drop_down_offers_the_chosen_users_and_the_first_matches_of_what_is_typed(ui):
    assert _search_users(ui, "U00", ["u017"]) == ["u017", *[f"u00{i}" for i in range(10)]]  # any case
    assert _search_users(ui, "u0", []) == [f"u{i:03d}" for i in range(40)]  # 40 users, all match
    assert _search_users(ui, "nobody", ["u001", "x' OR 1=1", 7]) == ["u001"]  # only known chosen users stay
    assert _search_users(ui, "", ["u001"]) is None  # nothing typed: the choices stay as they are
    assert _search_users(ui, "u0", [], dataset="../etc") is None  # an unknown dataset: no choices


def test_a_search_offers_at_most_max_user_matches_users():
    names = [f"user{i:05d}" for i in range(5000)]
    found = callbacks.user_matches(names, "USER", ["user04999"])
    assert found[0] == "user04999" and len(found) == 1 + callbacks.MAX_USER_MATCHES
    assert callbacks.user_matches(names, "x" * 10_000, None) == []


def test_nav_links_keep_the_filters_and_mark_the_page(dash_app):
    state = empty_state("helios-synth")
    state["clusters"] = ["Venus"]
    links = {item.children.children: item.children for item in controls.nav_links(state, "/jobs")}
    assert list(links)[:6] == ["Overview", "Cluster", "Jobs", "Users", "Compare", "Data"]
    assert links["Jobs"].href == "/jobs?ds=helios-synth&cluster=Venus" and links["Jobs"].active
    assert not any(link.active for name, link in links.items() if name != "Jobs")


@pytest.mark.parametrize(
    ("relayout", "expected"),
    [
        (
            {"xaxis.range[0]": "2020-04-03 00:00:00", "xaxis.range[1]": "2020-04-03 12:00:00.5"},
            (datetime(2020, 4, 3), datetime(2020, 4, 3, 12)),
        ),
        ({"xaxis.range": ["2020-04-03T06:00:00", "2020-04-05"]}, (datetime(2020, 4, 3, 6), datetime(2020, 4, 5))),
        ({"xaxis.autorange": True}, (None, None)),
        ({"autosize": True}, None),
        (None, None),
    ],
)
def test_visible_window_reads_plotly_relayout_events(relayout, expected, pages):
    assert pages.cluster.visible_window(relayout) == expected


def test_zooming_in_fetches_finer_utilisation_for_the_window_only(dash_app, pages):
    spec = {"name": "utilization", "state": empty_state("helios-synth"), charts.VIEWPORT: 1920}
    with dash_app.server.test_request_context():
        coarse = charts.utilization_window(spec)
        x0, x1 = datetime(2020, 4, 5), datetime(2020, 4, 5, 12)
        zoomed = charts.utilization_window(spec, x0, x1)
        fig = pages.cluster.zoom_utilization({"xaxis.range[0]": str(x0), "xaxis.range[1]": str(x1)}, spec)
    inside = zoomed.filter(zoomed["time"].is_between(x0, x1))
    assert inside.height > 10 * coarse.filter(coarse["time"].is_between(x0, x1)).height
    assert (
        zoomed.filter(~zoomed["time"].is_between(x0, x1)).height
        == coarse.filter(~coarse["time"].is_between(x0, x1)).height
    )
    assert [str(v)[:10] for v in fig.layout.xaxis.range] == ["2020-04-05", "2020-04-05"]
    assert "every minute (1 h outside the zoom)" in fig.layout.title.text


def test_a_figure_csv_holds_the_figure_data(dash_app):
    spec = {"name": "duration_gpu", "state": {**empty_state("helios-synth"), "clusters": ["Venus"]}}
    with dash_app.server.test_request_context():
        sent = callbacks.download_csv(1, spec)
    rows = list(csv.DictReader(io.StringIO(sent["content"])))
    assert sent["filename"] == "helios-duration_gpu.csv"
    assert {r["cluster"] for r in rows} == {"Venus"} and len(rows) == 22
    assert float(rows[-1]["pct"]) == pytest.approx(100.0)


def test_a_bad_filter_is_shown_on_the_figure(dash_app):
    spec = {"name": "duration_gpu", "state": {**empty_state("helios-synth"), "gpu_min": 8, "gpu_max": 2}}
    with dash_app.server.test_request_context():
        fig = callbacks.render_figure(spec).figure
    assert "gpu_min 8 > gpu_max 2" in fig.layout.annotations[0].text


def test_the_compare_overlay_adds_the_published_curves(dash_app):
    spec = {
        "name": "cmp_duration_gpu",
        "state": empty_state("helios-synth"),
        "datasets": ["helios-synth", "philly-mini"],
        "overlay": True,
    }
    with dash_app.server.test_request_context():
        fig, df = charts.render(spec)
    names = [t.name for t in fig.data]
    assert names[:3] == ["helios-synth Earth", "helios-synth Venus", "philly-mini Philly"]
    # the published curves of the clusters drawn (Venus, Earth) and the pooled one, not Saturn's or Uranus'
    assert sorted(names[3:]) == ["Helios (Fig 1a) (published)", "Helios Earth (published)", "Helios Venus (published)"]
    assert set(df["cluster"]) == set(names[:3])
    line = {t.name: t.line for t in fig.data}
    assert line["Helios Venus (published)"].color == line["helios-synth Venus"].color == figures.cluster_color("Venus")
    assert line["Helios Venus (published)"].dash == "dash" and line["helios-synth Venus"].dash is None
    assert line["philly-mini Philly"].dash == "dot"  # the second dataset
    assert line["Helios Earth (published)"].color != line["Helios Venus (published)"].color


def test_compare_draws_only_the_picked_clusters(dash_app):
    spec = {
        "name": "cmp_duration_gpu",
        "state": empty_state("helios-synth"),
        "datasets": ["helios-synth", "philly-mini"],
        "clusters": ["helios-synth/Venus", "philly-mini/Philly"],
        "overlay": False,
    }
    with dash_app.server.test_request_context():
        fig, _ = charts.render(spec)
    assert [t.name for t in fig.data] == ["helios-synth Venus", "philly-mini Philly"]


def test_the_leaderboard_ranks_users_by_gpu_time_shown_in_human_units(dash_app, pages):
    with dash_app.server.test_request_context():
        rows = pages.users.leaderboard_rows(empty_state("helios-synth"))
    gpu_s = [r["gpu_time_s"] for r in rows]
    assert gpu_s == sorted(gpu_s, reverse=True) and len(rows) == 80  # 40 users on each of 2 clusters
    assert 0 <= rows[0]["completion_pct"] <= 100
    top = rows[0]
    assert top["gpu_time_s__text"].endswith("GPU-h") and top["gpu_time_s__exact"].endswith("GPU-s")
    assert top["mean_gpu_queue_s__text"] == units.duration(top["mean_gpu_queue_s"])


def as_json(components: list) -> list:
    """Components as the JSON Dash sends."""
    return json.loads(json.dumps(components, cls=plotly.utils.PlotlyJSONEncoder))


@pytest.mark.parametrize("search", [None, [], 7, "?ds=nope&gmin=x&cluster=Mars", "?cluster=%00" + "x" * 5000])
def test_a_table_built_when_shown_reads_the_urls_checked_filter_state(dash_app, search):
    pages = SimpleNamespace(users=importlib.import_module("components.pages.users"))
    with dash_app.server.test_request_context():
        assert controls.lazy_body(explorer_grid.body, False, "?ds=helios-synth") is no_update
        built = controls.lazy_body(explorer_grid.body, True, search)
        assert find(as_json(built), explorer_grid.GRID)["dashGridOptions"]["context"]["dataset"] == "helios-synth"
        board = controls.lazy_body(pages.users.board, True, search)
        assert find(as_json(board), pages.users.BOARD)["rowData"]


def test_the_job_explorer_pages_sorts_and_filters_on_the_server(dash_app):
    state = {**empty_state("helios-synth"), "clusters": ["Earth"]}
    request = {
        "startRow": 0,
        "endRow": 50,
        "sortModel": [{"colId": "gpu_num", "sort": "desc"}],
        "filterModel": {"state": {"filterType": "text", "type": "equals", "filter": "FAILED"}},
    }
    with dash_app.server.test_request_context():
        response, href, status = explorer_grid.get_rows(request, state)
    rows = response["rowData"]
    assert len(rows) == 50 and response["rowCount"] > 50
    assert {r["cluster"] for r in rows} == {"Earth"} and {r["state"] for r in rows} == {"FAILED"}
    assert [r["gpu_num"] for r in rows] == sorted((r["gpu_num"] for r in rows), reverse=True)
    assert status == f"{response['rowCount']:,} jobs"
    assert href.startswith("/download/jobs.csv?ds=helios-synth&cluster=Earth&grid_filter=")


def test_grid_filters_become_bound_parameters():
    where, params = explorer.grid_where(
        {
            "user": {"filterType": "text", "type": "contains", "filter": "'; DROP TABLE jobs; --"},
            "duration": {"filterType": "number", "type": "inRange", "filter": 10, "filterTo": 20},
            "submit_time": {"filterType": "date", "type": "greaterThan", "dateFrom": "2020-04-02 00:00:00"},
        }
    )
    assert where == ('CAST("user" AS VARCHAR) ILIKE ? AND "duration" BETWEEN ? AND ? AND "submit_time" > ?')
    assert params == ["%'; DROP TABLE jobs; --%", 10.0, 20.0, datetime(2020, 4, 2)]


@pytest.mark.parametrize(
    "bad",
    [
        {"nope": {"filterType": "text", "type": "equals", "filter": "x"}},
        {"duration": {"filterType": "number", "type": "equals", "filter": "ten"}},
        {"state": {"filterType": "text", "type": "regex", "filter": "x"}},
    ],
)
def test_bad_grid_filters_are_refused_with_a_message(bad):
    with pytest.raises(explorer.GridFilterError):
        explorer.grid_where(bad)


def test_grid_sort_only_accepts_known_columns():
    assert explorer.order_by([{"colId": "queue", "sort": "asc"}]).startswith('"queue" ASC NULLS LAST')
    with pytest.raises(explorer.GridFilterError, match="unknown column"):
        explorer.order_by([{"colId": "1; DROP", "sort": "asc"}])


def test_csv_export_streams_every_filtered_row(ui, dash_app):
    grid_filter = json.dumps({"gpu_num": {"filterType": "number", "type": "greaterThanOrEqual", "filter": 8}})
    resp = ui.client.get(
        "/download/jobs.csv", query_string={"ds": "helios-synth", "cluster": "Venus", "grid_filter": grid_filter}
    )
    assert resp.status_code == 200 and resp.mimetype == "text/csv"
    rows = list(csv.DictReader(io.StringIO(resp.get_data(as_text=True))))
    with dash_app.server.test_request_context():
        from components.datasets import access

        ds = access.open_dataset("helios-synth")
        expected = ds.jobs().filter(filter_expr(to_filter({**empty_state(), "clusters": ["Venus"], "gpu_min": 8})))
        assert len(rows) == expected.collect().height > 0
    assert {r["cluster"] for r in rows} == {"Venus"} and min(int(r["gpu_num"]) for r in rows) >= 8


def test_csv_export_refuses_bad_input_with_one_line(ui):
    resp = ui.client.get("/download/jobs.csv", query_string={"ds": "helios-synth", "grid_sort": '[{"colId": "x"}]'})
    assert resp.status_code == 400
    assert resp.get_data(as_text=True) == "cannot export: unknown column 'x' in grid sort\n"


def test_the_compare_choices_live_in_the_url(dash_app):
    compare = importlib.import_module("components.pages.compare")
    every = ["helios-synth/Venus", "helios-synth/Earth", "philly-mini/Philly"]
    with dash_app.server.test_request_context():
        assert compare.cluster_options(["helios-synth", "philly-mini"]) == every
        assert compare.compare_url(["philly-mini"], every, True, "?ds=helios-synth&kind=gpu") == (
            "?ds=helios-synth&kind=gpu&cmp=philly-mini&ref=1"
        )
        assert compare.compare_url(["a", "b"], [], False, "?cmp=x&ref=1") == "?cmp=a,b"
        two = ["helios-synth", "philly-mini"]
        two_in_url = "?cmp=helios-synth,philly-mini"
        assert unquote(compare.compare_url(two, every[1:], False, two_in_url)) == (
            "?cmp=helios-synth,philly-mini&cmpc=helios-synth/Earth,philly-mini/Philly"
        )
        # a change of datasets draws every cluster of the new choice
        assert compare.compare_url(two, every[1:], False, "?cmp=philly-mini") == "?cmp=helios-synth,philly-mini"
        # What the URL already says is no update: a new URL would draw the whole page again.
        assert compare.compare_url(["philly-mini"], every[2:], True, "?cmp=philly-mini&ref=1") is no_update
    assert compare.chosen_clusters({"cmpc": "helios-synth/Earth,nope/X"}, every) == ["helios-synth/Earth"]
    assert compare.chosen_clusters({}, every) == every
    assert compare.chosen({"cmp": "philly-mini,nope", "ref": "1"}, ["helios-synth", "philly-mini"]) == (
        ["philly-mini"],
        True,
    )
    assert compare.chosen({}, ["helios-synth", "philly-mini"]) == (["helios-synth", "philly-mini"], False)


def test_a_filter_change_keeps_the_page_own_url_parameters(ui):
    values = callbacks.state_to_controls(empty_state("helios-synth"))
    values[7] = "gpu"
    out = sync(ui, ("f-kind", "value"), "?ds=helios-synth&cmp=philly-mini&ref=1", values=values)
    assert out["url"]["search"] == "?ds=helios-synth&kind=gpu&cmp=philly-mini&ref=1"


@pytest.mark.parametrize(
    ("period", "window"),
    [
        (("2020-04-01", "2020-09-27"), (datetime(2020, 5, 1), datetime(2020, 6, 1), "2020-05-10")),
        (("2021-03-04", "2021-05-02"), (datetime(2021, 4, 1), datetime(2021, 5, 1), "")),
        (("2021-03-04", "2021-03-20"), (datetime(2021, 3, 4), datetime(2021, 3, 21), "")),  # no whole month
    ],
)
def test_fig4_reads_the_papers_window_a_whole_month_or_the_whole_period(monkeypatch, period, window):
    monkeypatch.setattr(charts.access, "dataset_period", lambda _name: period)
    assert charts.fig4_window("any") == window


def test_fig4_asks_for_may_without_june_the_first(monkeypatch):
    asked = {}
    monkeypatch.setattr(charts.access, "dataset_period", lambda _name: ("2020-04-01", "2020-09-27"))
    monkeypatch.setattr(charts.access, "cluster_names", lambda _name: ["Earth"])
    monkeypatch.setattr(charts.access, "query", lambda _q, view, **kw: asked.update(view=view, **kw) or pl.DataFrame())
    monkeypatch.setattr(charts.reference, "fig4_published", pl.DataFrame)
    charts.vc_fig4({"name": "vc_fig4", "state": empty_state("helios-synth")})
    assert (asked["view"]["start"], asked["view"]["end"], asked["exclude_days"]) == (
        "2020-05-01",
        "2020-05-31",
        "2020-05-10",
    )


def test_a_page_is_laid_out_with_the_figures_already_drawn(ui):
    first = ui.page("/cluster", "?ds=helios-synth")
    spec = next(s for s in ui.specs(first) if s["name"] == "running_queued")
    assert charts.DRAWN not in spec
    drawn = ui.figure(spec)
    again = ui.page("/cluster", "?ds=helios-synth")
    cached = next(s for s in ui.specs(again) if s["name"] == "running_queued")
    assert cached[charts.DRAWN] is True
    graph = find(again, {"type": controls.GRAPH, "name": "running_queued"})
    assert [t["name"] for t in graph["figure"]["data"]] == [t["name"] for t in drawn["data"]]
    assert callbacks.render_figure(cached) is no_update  # the card's callback leaves it


def test_picking_a_range_writes_it_and_picking_days_clears_it(ui):
    values = callbacks.state_to_controls(empty_state("helios-synth"))
    values[3] = "7d"  # the range drop-down
    out = sync(ui, ("f-range", "value"), values=values)
    assert out["url"]["search"] == "?ds=helios-synth&range=7d"
    shown_start, shown_end = out["f-dates"]["start_date"], out["f-dates"]["end_date"]
    assert shown_start and shown_end and shown_start < shown_end  # the days the range covers are shown
    values[4], values[5] = "2020-04-02", shown_end
    out = sync(ui, ("f-dates", "start_date"), values=values)
    assert out["url"]["search"] == f"?ds=helios-synth&start=2020-04-02&end={shown_end}"
    assert out["f-range"]["value"] is None
    values[3], values[6] = None, "running"
    out = sync(ui, ("f-time", "value"), values=values)
    assert out["url"]["search"].endswith("&time=running") and out["filter-state"]["data"]["time"] == "running"
