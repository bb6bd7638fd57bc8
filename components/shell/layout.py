"""The page shell (navbar, filter bar, page container) and the helpers every page layout starts with."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import _pages, dcc, html, no_update
from dash.development.base_component import Component
from flask import has_request_context

from analytics.filters import empty_state, flat_params, to_query
from analytics.store import DatasetError
from components.datasets import access
from components.shell import callbacks, controls

# the ids of dash.page_container's parts (Dash's pages router reads the Location and fills the content and store)
PAGES_LOCATION, PAGES_CONTENT, PAGES_STORE = "_pages_location", "_pages_content", "_pages_store"
NOT_FOUND_MODULE = "not_found_404"  # the page module Dash's router shows for a path no page has


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
    """The bare shell around every page: its filter values and content are filled in from the URL by callbacks (as
    the Locations read it on mount), unless requested_layout lays it out for a page's URL."""
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
                    copy.deepcopy(dash.page_container),  # its own copy: requested_layout fills it in
                ],
                fluid=True,
                className="pb-4",
            ),
        ]
    )


def requested_layout(pathname: str, search: str) -> html.Div | None:
    """The shell as the callbacks that run on load would leave it for a page URL (pathname and search as the browser
    has them): filter bar and stores from the query string, the page's content and title, both Locations holding the
    URL so that none of those callbacks runs in the browser. None when a first-screen figure of the page is cached:
    the pages router's answer then brings the content with it in one round trip, and a page's HTML carries layout, not
    data (measured: a chart page laid out in its HTML, asking for its cached figures, is drawn later). Such a page is
    laid out twice, here and by the router (measured: its HTML takes ~16 ms, its cached figures read twice)."""
    with controls.noting_cached_figures() as cached:
        content, title = page_content(pathname, search)
    if cached:
        return None
    answers = {
        **dict(zip(callbacks.SYNC_OUTPUTS, callbacks.url_answer(search), strict=True)),
        (controls.FILTER_BAR, "style"): controls.filter_bar_style(pathname),
        (controls.URL, "pathname"): pathname,
        (controls.URL, "search"): search,
        (PAGES_LOCATION, "pathname"): pathname,
        (PAGES_LOCATION, "search"): search,
        (PAGES_CONTENT, "children"): content,
        (PAGES_STORE, "data"): {"title": title},
    }
    return with_props(layout(), {key: value for key, value in answers.items() if value is not no_update})


def page_content(pathname: str, search: str) -> tuple[Any, str]:
    """The content and title Dash's pages router gives a URL: the page whose path (or path template) matches, called
    with its path variables and query parameters, or the not-found page."""
    page, path_variables = _pages._path_to_page(dash.strip_relative_path(pathname))
    if not page:
        page = next(p for p in dash.page_registry.values() if p["module"].split(".")[-1] == NOT_FOUND_MODULE)
    content, title = page.get("layout", ""), page["title"]
    if callable(content):
        content = content(**{**(path_variables or {}), **_pages._parse_query_string(search)})
    return content, title(**(path_variables or {})) if callable(title) else title


def with_props(root: Component, props: dict[tuple[str, str], Any]) -> Component:
    """root with each (component id, prop name) of props set to its value."""
    by_id = {node.id: node for node in [root, *root._traverse()] if isinstance(getattr(node, "id", None), str)}
    for (cid, prop), value in props.items():
        setattr(by_id[cid], prop, value)
    return root
