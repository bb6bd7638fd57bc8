"""Every id a callback names is laid out somewhere: the check Dash's renderer would make in every reader's browser
(its validation layout, whose errors only its dev tools show) made once here instead."""

from __future__ import annotations

import json
from typing import Any

import dash

from components.charts import registry as charts
from components.shell import controls

SEARCH = "?ds=helios-synth"


def _key(component_id: Any) -> str:
    """A string id as it is; a pattern-matching id by its type (what MATCH/ALL callbacks address)."""
    if isinstance(component_id, str) and component_id.startswith("{"):
        component_id = json.loads(component_id)
    return f"type={component_id['type']}" if isinstance(component_id, dict) else component_id


def _ids(layout: Any, ui) -> set[str]:
    return {_key(n["props"]["id"]) for n in ui.walk(layout) if n["props"].get("id") is not None}


def _lazy_bodies(ui, layout: Any) -> list:
    """The content of every lazy section of a page layout, as its callback fills it once shown."""
    bodies = []
    for node in ui.walk(layout):
        cid = node["props"].get("id")
        if isinstance(cid, dict) and cid.get("type") == controls.LAZY_SHOWN:
            body = {"type": controls.LAZY_BODY, "name": cid["name"]}
            out = ui.callback(
                f"{controls.dash_id(body)}.children",
                {"id": body, "property": "children"},
                [{"id": cid, "property": "data", "value": True}],
                [{"id": controls.URL, "property": "search", "value": SEARCH}],
            )
            bodies.append(out["response"][controls.dash_id(body)]["children"])
    return bodies


def _overview_cards(ui, layout: Any) -> Any:
    """The overview's cards, as the callback the page asks them from fills them."""
    state = ui.find(layout, "overview-spec")["data"]
    outs = [("overview-cards", "children"), ("overview-table", "columnDefs"), ("overview-table", "rowData")]
    return ui.callback(
        ".." + "...".join(f"{i}.{p}" for i, p in outs) + "..",
        [{"id": i, "property": p} for i, p in outs],
        [{"id": "overview-want", "property": "data", "value": state}],
    )["response"]["overview-cards"]["children"]


def _first_figure(ui, layout: Any) -> list:
    """The Graph the first figure card of a page layout is drawn with (none on a page without cards)."""
    specs = ui.specs(layout)
    if not specs:
        return []
    request = controls.figure_request({k: v for k, v in specs[0].items() if k != charts.DRAWN})
    answer = ui.callback(request["output"], request["outputs"], request["inputs"])["response"]
    return [slot["children"] for slot in answer.values()]


def _laid_out_ids(ui) -> set[str]:
    """Every id of the shell, of every page (a job's for the job page) and of what their callbacks lay out."""
    ids = _ids(ui.client.get("/_dash-layout").get_json(), ui)
    for page in dash.page_registry.values():
        layout = ui.page("/jobs/1" if page.get("path_template") else page["path"], SEARCH)
        filled = [layout, *_lazy_bodies(ui, layout), *_first_figure(ui, layout)]
        if page["path"] == "/":
            filled.append(_overview_cards(ui, layout))
        ids |= set().union(*(_ids(part, ui) for part in filled))
    return ids


def _named_ids(dependency: dict) -> set[str]:
    """The ids one entry of `_dash-dependencies` names (outputs, inputs, states)."""
    outputs = dependency["output"].strip(".").split("...")
    named = {_key(out.rsplit(".", 1)[0]) for out in outputs}
    return named | {_key(i["id"]) for i in (*dependency["inputs"], *dependency["state"])}


def test_every_id_a_callback_names_is_in_a_layout_the_reader_can_be_shown(module_ui):
    ui = module_ui
    ui.client.get("/")
    laid_out = _laid_out_ids(ui)
    dependencies = ui.client.get("/_dash-dependencies").get_json()
    missing = {(d["output"][:80], cid) for d in dependencies for cid in _named_ids(d) - laid_out}
    assert len(dependencies) > 40 and not missing
