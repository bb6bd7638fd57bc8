"""Compare page: datasets and clusters side by side on the same figures, with the published Helios values."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Dash, Input, Output, State, html, no_update

from analytics.filters import page_params, parse_query, to_query
from analytics.store import DatasetError
from components.charts import reference
from components.charts import registry as charts
from components.datasets import access
from components.shell import controls
from components.shell.controls import figure_card, grid
from components.shell.layout import page_layout

dash.register_page(__name__, path="/compare", name="Compare", title="Helios Dashboard · Compare", order=4)

DATASETS = "compare-datasets"
CLUSTERS = "compare-clusters"
OVERLAY = "compare-overlay"
FIGURES: tuple[str, ...] = tuple(charts.COMPARE_CHARTS)


def chosen(params: dict[str, Any], names: list[str]) -> tuple[list[str], bool]:
    """The datasets to compare (URL `cmp`, default the first four) and whether to overlay (`ref=1`)."""
    wanted = [n for n in str(params.get("cmp", "")).split(",") if n in names]
    return (wanted if "cmp" in params else names[:4]), params.get("ref") == "1"


def cluster_options(datasets: list[str]) -> list[str]:
    """Every cluster of the chosen datasets, as '<dataset>/<cluster>'."""
    return [charts.compare_pick(name, c) for name in datasets for c in _clusters(name)]


def _clusters(name: str) -> list[str]:
    try:
        return access.cluster_names(name)
    except DatasetError:
        return []


def chosen_clusters(params: dict[str, Any], options: list[str]) -> list[str]:
    """The clusters to draw (URL `cmpc`, '<dataset>/<cluster>' names; every cluster when absent)."""
    if "cmpc" not in params:
        return options
    return [c for c in str(params["cmpc"]).split(",") if c in options]


def body(state: dict[str, Any], params: dict[str, Any]) -> list:
    """The dataset, cluster and overlay controls and the comparison cards for a filter state and the page's
    parameters."""
    names = access.dataset_names()
    picked, overlay = chosen(params, names)
    options = cluster_options(picked)
    clusters = chosen_clusters(params, options)
    has_reference = bool(reference.load_reference())
    controls_row = dbc.Row(
        [
            dbc.Col(
                [
                    dbc.Label("Datasets", className="small text-muted mb-0"),
                    dbc.Checklist(id=DATASETS, options=names, value=picked, inline=True),
                    dbc.Label("Clusters", className="small text-muted mb-0 mt-1 d-block"),
                    dbc.Checklist(
                        id=CLUSTERS,
                        options=[{"label": o.replace("/", " "), "value": o} for o in options],
                        value=clusters,
                        inline=True,
                    ),
                ],
                xs=12,
                md=8,
            ),
            dbc.Col(
                dbc.Switch(
                    id=OVERLAY,
                    label="Overlay published Helios values",
                    value=overlay and has_reference,
                    disabled=not has_reference,
                ),
                xs=12,
                md=4,
                className="pt-md-3",
            ),
        ],
        className="mb-2",
    )
    picks = None if clusters == options else clusters
    return [controls_row, html.Div(cards(state, picked, picks, overlay and has_reference))]


layout = page_layout(
    "Compare",
    "The chosen clusters of the chosen datasets on the same axes, each cluster in its own colour on every page "
    "(a second dataset's lines dotted; job-kind, state and GPU filters apply; VC, user and date filters do not, "
    "since they differ between datasets). The overlay draws the values published for the real Helios trace "
    "(Hu et al., SC'21) as dashed lines in their cluster's colour.",
    body,
)


def cards(state: dict[str, Any], datasets: list[str], clusters: list[str] | None, overlay: bool) -> list:
    """The comparison figure cards for the chosen datasets and clusters (None: all of them)."""
    if not datasets:
        return [dbc.Alert("Choose at least one dataset to compare.", color="info")]
    if clusters == []:
        return [dbc.Alert("Choose at least one cluster to compare.", color="info")]
    extra = {"datasets": list(datasets), "overlay": bool(overlay)} | (
        {} if clusters is None else {"clusters": clusters}
    )
    made = [figure_card("cmp_" + name, state, extra=extra, lazy=i >= 2) for i, name in enumerate(FIGURES)]
    return [grid(made[i : i + 2]) for i in range(0, len(made), 2)]


def compare_url(datasets: list[str] | None, clusters: list[str] | None, overlay: bool, search: str | None):
    """The URL query with the compared datasets, their drawn clusters (when not all; after a change of datasets,
    all) and the overlay switch; no update when the URL already says so (a new URL draws the whole page again)."""
    state, _ = parse_query(search)
    before = page_params(search)
    picked, ref = chosen(before, access.dataset_names())
    if [picked, chosen_clusters(before, cluster_options(picked)), ref] == [
        datasets or [],
        clusters or [],
        bool(overlay),
    ]:
        return no_update
    datasets_changed = picked != (datasets or [])
    extra = {**before, "cmp": ",".join(datasets or [])}
    for key in ("ref", "cmpc"):
        extra.pop(key, None)
    options = cluster_options(datasets or [])
    kept = [c for c in clusters or [] if c in options]
    if kept != options and not datasets_changed:
        extra["cmpc"] = ",".join(kept)
    if overlay:
        extra["ref"] = "1"
    return to_query(state, extra)


def register_callbacks(app: Dash) -> None:
    """Register this page's callbacks on app."""
    app.callback(
        Output(controls.URL, "search", allow_duplicate=True),
        Input(DATASETS, "value"),
        Input(CLUSTERS, "value"),
        Input(OVERLAY, "value"),
        State(controls.URL, "search"),
        prevent_initial_call=True,
    )(compare_url)
