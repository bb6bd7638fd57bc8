"""Hostile job-explorer requests (AG Grid filter/sort models) and CSV export links: a message, never a 500."""

from __future__ import annotations

import json

import pytest

from analytics.filters import empty_state

MB_VALUE = "Z" * 1_000_000
INJECT = "x' OR '1'='1'; DROP TABLE jobs; --"
TEXT_VALUES = (INJECT, "%' OR 1=1 --", "ab\x00cd DROP", "Ünïcødé 🚀 \u202e 漢字", MB_VALUE)
GRID_OUTPUT = "..jobs-grid.getRowsResponse...jobs-export.href...jobs-status.children.."
GRID_OUTPUTS = [
    {"id": "jobs-grid", "property": "getRowsResponse"},
    {"id": "jobs-export", "property": "href"},
    {"id": "jobs-status", "property": "children"},
]


@pytest.fixture
def ui(module_ui):
    """The small-data app, built once for this module's read-only requests; an empty query cache per test."""
    return module_ui


def assert_bound_only(texts: list[str], payload: str) -> None:
    """The payload never appears in an SQL text (it can only have been bound as a value)."""
    assert texts, "no SQL ran: the test proves nothing"
    marker = payload[:64]
    assert not [t for t in texts if marker in t], "payload spliced into SQL"


def grid_request(ui, request) -> dict:
    """Send one AG Grid block request through the real callback endpoint."""
    return ui.callback(
        GRID_OUTPUT,
        GRID_OUTPUTS,
        [{"id": "jobs-grid", "property": "getRowsRequest", "value": request}],
        [{"id": "jobs-spec", "property": "data", "value": empty_state("helios-synth")}],
    )["response"]


def _text_models(value: str) -> list[dict]:
    return [
        {col: {"filterType": "text", "type": op, "filter": value}}
        for col in ("user", "vc", "state", "cluster")
        for op in ("contains", "equals", "startsWith", "notContains")
    ]


@pytest.mark.parametrize("value", TEXT_VALUES, ids=["inject", "like", "nul", "unicode", "megabyte"])
def test_text_filters_bind_hostile_values(ui, sql_texts, value):
    for model in _text_models(value):
        out = grid_request(ui, {"startRow": 0, "endRow": 100, "filterModel": model, "sortModel": []})
        assert out["jobs-status"]["children"].endswith("jobs"), out["jobs-status"]
    assert_bound_only(sql_texts, value)


BAD_REQUESTS = {
    "number-filter-text": {"filterModel": {"gpu_num": {"filterType": "number", "type": "equals", "filter": INJECT}}},
    "date-filter-text": {
        "filterModel": {"submit_time": {"filterType": "date", "type": "lessThan", "dateFrom": INJECT}}
    },
    "unknown-column": {"filterModel": {INJECT: {"filterType": "text", "type": "equals", "filter": "x"}}},
    "unknown-op": {"filterModel": {"user": {"filterType": "text", "type": INJECT, "filter": "x"}}},
    "model-is-list": {"filterModel": [INJECT]},
    "model-is-text": {"filterModel": INJECT},
    "column-model-is-text": {"filterModel": {"user": INJECT}},
    "conditions-not-list": {"filterModel": {"user": {"operator": "OR", "conditions": INJECT}}},
    "sort-unknown-column": {"sortModel": [{"colId": INJECT, "sort": "asc"}]},
    "sort-is-dict": {"sortModel": {"colId": "user"}},
    "sort-item-text": {"sortModel": [INJECT]},
    "start-row-text": {"startRow": INJECT},
    "start-row-huge": {"startRow": 10**30, "endRow": 10**30 + 100},
    "end-row-negative": {"startRow": 0, "endRow": -(10**12)},
    "request-is-list": [INJECT],
}


@pytest.mark.parametrize("name", sorted(BAD_REQUESTS))
def test_malformed_grid_requests_get_a_message(ui, sql_texts, name):
    bad = BAD_REQUESTS[name]
    request = {"startRow": 0, "endRow": 100, **bad} if isinstance(bad, dict) else bad
    out = grid_request(ui, request)
    assert out["jobs-status"]["children"].startswith("⚠"), out["jobs-status"]
    assert out["jobs-grid"]["getRowsResponse"] == {"rowData": [], "rowCount": 0}
    assert not [t for t in sql_texts if INJECT[:20] in t]


def test_ten_thousand_or_conditions_are_refused(ui, sql_texts):
    conditions = [{"filterType": "text", "type": "equals", "filter": f"{INJECT}{i}"} for i in range(10_000)]
    model = {"user": {"filterType": "text", "operator": "OR", "conditions": conditions}}
    out = grid_request(ui, {"startRow": 0, "endRow": 100, "filterModel": model})
    assert out["jobs-status"]["children"].startswith("⚠")
    assert not [t for t in sql_texts if INJECT[:20] in t]


def test_the_sort_direction_is_never_spliced(ui, sql_texts):
    request = {"startRow": 0, "endRow": 10, "sortModel": [{"colId": "user", "sort": INJECT}]}
    out = grid_request(ui, request)
    assert out["jobs-status"]["children"].endswith("jobs")
    assert_bound_only(sql_texts, INJECT)


EXPORT_PARAMS = (
    "ds",
    "cluster",
    "vc",
    "user",
    "state",
    "start",
    "end",
    "kind",
    "gmin",
    "gmax",
    "grid_filter",
    "grid_sort",
)
EXPORT_VALUES = {
    "inject": INJECT,
    "nul": "ab\x00cd",
    "unicode": "漢字 🚀",
    "megabyte": MB_VALUE,
    "list10k": ",".join(f"c{i}'--" for i in range(10_000)),
    "json-list": json.dumps([INJECT]),
    "json-deep": "[" * 5000 + "]" * 5000,
}


@pytest.mark.parametrize("key", EXPORT_PARAMS)
@pytest.mark.parametrize("kind", sorted(EXPORT_VALUES))
def test_the_csv_export_link_takes_hostile_parameters(ui, sql_texts, key, kind):
    value = EXPORT_VALUES[kind]
    resp = ui.client.get("/download/jobs.csv", query_string={"ds": "helios-synth", key: value})
    body = resp.get_data(as_text=True)
    assert resp.status_code in (200, 400), body[:300]
    if resp.status_code == 400:
        assert body.startswith("cannot export: ") and body.count("\n") == 1 and len(body) < 1000
    else:
        assert body.startswith("cluster,job_id,")
    assert not [t for t in sql_texts if value[:20] in t and len(value) > 8]


def test_the_csv_export_binds_grid_filter_values(ui, sql_texts):
    grid_filter = json.dumps({"user": {"filterType": "text", "type": "contains", "filter": INJECT}})
    resp = ui.client.get("/download/jobs.csv", query_string={"ds": "helios-synth", "grid_filter": grid_filter})
    assert resp.status_code == 200 and resp.get_data(as_text=True).strip() == ",".join(
        ["cluster", "job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state"]
        + ["submit_time", "start_time", "end_time", "duration", "queue"]
    )  # no job_name or gpu_type column: the fixture's trace has none (not in this trace, never empty cells)
    assert_bound_only(sql_texts, INJECT)
