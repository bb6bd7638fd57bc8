"""The dashboard's filter state: a JSON-safe dict that round-trips through the URL query string."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode

from analytics import schema
from analytics.filters import JobFilter

JOB_KINDS: tuple[str, ...] = ("all", "gpu", "cpu")
LIST_KEYS: dict[str, str] = {"cluster": "clusters", "vc": "vcs", "user": "users", "state": "states"}
MAX_GPUS = 4096


def empty_state(dataset: str = "") -> dict[str, Any]:
    """A filter state selecting every job of dataset."""
    return {
        "dataset": dataset,
        "clusters": [],
        "vcs": [],
        "users": [],
        "states": [],
        "start": None,
        "end": None,
        "job_kind": "all",
        "gpu_min": None,
        "gpu_max": None,
    }


def _cut(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _shown(value: str) -> str:
    return _cut(repr(value))


def _split(value: str) -> list[str]:
    return [v for v in (p.strip() for p in value.split(",")) if v]


def _parse_day(value: str, key: str, problems: list[str]) -> str | None:
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        problems.append(f"URL parameter {key}={_shown(value)} is not a date (YYYY-MM-DD); ignored")
        return None


def _parse_gpus(value: str, key: str, problems: list[str]) -> int | None:
    if value.isdigit() and int(value) <= MAX_GPUS:
        return int(value)
    problems.append(f"URL parameter {key}={_shown(value)} is not a GPU count (0-{MAX_GPUS}); ignored")
    return None


def parse_params(params: dict[str, str], default_dataset: str = "") -> tuple[dict[str, Any], list[str]]:
    """Turn query parameters (one string per key) into a filter state plus the problems found in them."""
    state = empty_state(params.get("ds") or default_dataset)
    problems: list[str] = []
    for key, field in LIST_KEYS.items():
        state[field] = _split(params.get(key, ""))
    bad = [s for s in state["states"] if s not in schema.STATES]
    if bad:
        problems.append(f"URL parameter state: unknown state(s) {_cut(', '.join(bad))}; ignored")
        state["states"] = [s for s in state["states"] if s in schema.STATES]
    for key in ("start", "end"):
        if params.get(key):
            state[key] = _parse_day(params[key], key, problems)
    kind = params.get("kind", "all")
    if kind not in JOB_KINDS:
        problems.append(f"URL parameter kind={_shown(kind)} must be one of {', '.join(JOB_KINDS)}; ignored")
        kind = "all"
    state["job_kind"] = kind
    for key, field in (("gmin", "gpu_min"), ("gmax", "gpu_max")):
        if params.get(key):
            state[field] = _parse_gpus(params[key], key, problems)
    return state, problems


def parse_query(search: str | None, default_dataset: str = "") -> tuple[dict[str, Any], list[str]]:
    """Parse a URL query string (with or without the leading '?') into a filter state and its problems."""
    raw = parse_qs((search or "").lstrip("?"), keep_blank_values=False)
    return parse_params({k: v[-1] for k, v in raw.items()}, default_dataset)


def to_params(state: dict[str, Any]) -> dict[str, str]:
    """The non-default parts of a filter state as query parameters."""
    params: dict[str, str] = {}
    if state.get("dataset"):
        params["ds"] = state["dataset"]
    for key, field in LIST_KEYS.items():
        if state.get(field):
            params[key] = ",".join(state[field])
    for key in ("start", "end"):
        if state.get(key):
            params[key] = state[key]
    if state.get("job_kind", "all") != "all":
        params["kind"] = state["job_kind"]
    for key, field in (("gmin", "gpu_min"), ("gmax", "gpu_max")):
        if state.get(field) is not None:
            params[key] = str(state[field])
    return params


FILTER_PARAMS: frozenset[str] = frozenset({"ds", "start", "end", "kind", "gmin", "gmax", *LIST_KEYS})


def page_params(search: str | None) -> dict[str, str]:
    """The query parameters of a URL that are a page's own settings rather than filters."""
    raw = parse_qs((search or "").lstrip("?"))
    return {k: v[-1] for k, v in raw.items() if k not in FILTER_PARAMS}


def to_query(state: dict[str, Any], extra: dict[str, str] | None = None) -> str:
    """Encode a filter state (plus a page's own parameters) as a URL query string ('' when there is nothing)."""
    params = {**to_params(state), **(extra or {})}
    return "?" + urlencode(params, safe=",") if params else ""


def to_filter(state: dict[str, Any]) -> JobFilter:
    """Build the analytics JobFilter of a filter state (the end day is inclusive in the UI, exclusive in SQL)."""
    start = datetime.fromisoformat(state["start"]) if state.get("start") else None
    end = datetime.fromisoformat(state["end"]) + timedelta(days=1) if state.get("end") else None
    return JobFilter(
        clusters=tuple(state.get("clusters") or ()),
        vcs=tuple(state.get("vcs") or ()),
        start=start,
        end=end,
        users=tuple(state.get("users") or ()),
        states=tuple(state.get("states") or ()),
        job_kind=state.get("job_kind") or "all",
        gpu_min=state.get("gpu_min"),
        gpu_max=state.get("gpu_max"),
    )
