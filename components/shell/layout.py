"""The page shell (navbar, filter bar, page container) and the helpers every page layout starts with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import dcc, html
from dash.development.base_component import Component
from flask import has_request_context

from analytics.filters import empty_state, flat_params, to_query
from analytics.store import DatasetError
from components.datasets import access
from components.shell import controls


def page_layout(
    title: str, subtitle: str, body: Callable[[dict[str, Any], dict[str, Any]], list]
) -> Callable[..., html.Div]:
    """A page's layout function: its header, then body(filter state, URL parameters), or the dataset's problem."""

    def layout(**params: Any) -> html.Div:
        state, _, note = access.read_params(flat_params(params))
        problem = dataset_problem(state)
        header = controls.page_header(title, subtitle)
        if problem:
            return html.Div([header, problem])
        return html.Div([header, data_as_of(state["dataset"]), *window_note(note), *body(state, params)])

    return layout


def data_as_of(dataset: str) -> html.P:
    """A line naming the time of the dataset's newest record, so a stale refresh shows."""
    newest = access.data_as_of(dataset)
    text = f"{dataset}: data as of {newest} (its newest submit, start or end)" if newest else f"{dataset}: no jobs"
    return html.P(text, id=controls.DATA_AS_OF, className="text-muted small mb-2")


def window_note(note: str | None) -> list:
    """The line naming the window of a relative time range, when there is one."""
    return [html.P(note, id=controls.WINDOW_NOTE, className="small mb-2 fw-semibold")] if note else []


def dataset_problem(state: dict[str, Any]) -> html.Div | None:
    """A message when the state's dataset is missing, else None."""
    if not state["dataset"]:
        return dbc.Alert(
            ["No dataset yet. Build the bundled one with ", html.Code("helios demo"), " or ingest a trace."],
            color="warning",
        )
    try:
        access.open_dataset(state["dataset"])
    except DatasetError as exc:
        return dbc.Alert(str(exc), color="danger")
    return None


def layout() -> html.Div:
    """The shell around every page; the filter values are filled in from the URL by a callback."""
    # Dash calls this once without a request to check it: no data is read then.
    names = access.dataset_names() if has_request_context() else []
    state = empty_state(access.default_dataset(names) if names else "")
    return html.Div(
        [
            dcc.Location(id=controls.URL, refresh="callback-nav"),  # lets the pages router see filter changes
            dcc.Store(id=controls.FILTER_STATE, data=state),
            dcc.Store(id=controls.NAV_QUERY, data=to_query(state)),
            controls.navbar(state),
            dbc.Container(
                [
                    controls.filter_bar(state, names),
                    html.Div(id=controls.URL_ALERT),
                    dash.page_container,
                ],
                fluid=True,
                className="pb-4",
            ),
        ]
    )


def id_skeleton(layout: Component) -> dict[str, Any]:
    """Every component of layout that has an id, bare (no other props, no children: no figures, store data or rows):
    all that the browser checks callbacks against, as Dash's validation layout, which every page's HTML carries."""
    nodes = [layout, *layout._traverse()]
    bare = [
        {"type": n._type, "namespace": n._namespace, "props": {"id": n.id}}
        for n in nodes
        if getattr(n, "id", None) is not None
    ]
    return {"type": "Div", "namespace": "dash_html_components", "props": {"children": bare}}
