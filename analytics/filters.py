"""Which jobs a view shows: `JobFilter` (a frozen dataclass that becomes a SQL predicate with bound parameters)
and the one codec between a page's URL query string, its JSON-safe view state (dataset + filter) and a JobFilter."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode

from analytics import schema

JOB_KINDS: tuple[str, ...] = ("all", "gpu", "cpu")
SUBMITTED, RUNNING = "submitted", "running"
TIME_MODES: tuple[str, ...] = (SUBMITTED, RUNNING)  # what the window holds: jobs submitted in it, or running in it
_TUPLE_FIELDS: tuple[str, ...] = ("clusters", "vcs", "users", "states")
_MAX_VALUES = 1000


def _as_tuple(name: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = (value,)
    items = tuple(value)
    if len(items) > _MAX_VALUES:
        raise ValueError(f"filter {name}: at most {_MAX_VALUES} values, got {len(items)}")
    for item in items:
        if not isinstance(item, str) or not item:
            raise ValueError(f"filter {name}: every value must be a non-empty string, got {item!r}")
    return tuple(dict.fromkeys(items))


def _as_datetime(name: str, value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).replace(tzinfo=None)
        except ValueError:
            raise ValueError(f"filter {name}: {value!r} is not an ISO date/time (YYYY-MM-DD[ HH:MM:SS])") from None
    raise ValueError(f"filter {name}: expected a date/time, got {type(value).__name__}")


def _as_gpu_bound(name: str, value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"filter {name}: expected a whole number of GPUs, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"filter {name}: expected a whole number of GPUs, got {value!r}") from None
    if number < 0:
        raise ValueError(f"filter {name}: must be >= 0, got {number}")
    return number


@dataclass(frozen=True)
class JobFilter:
    """Which jobs a query looks at; every field left at its default selects everything."""

    clusters: tuple[str, ...] = ()
    vcs: tuple[str, ...] = ()
    start: datetime | None = None
    end: datetime | None = None
    users: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    job_kind: str = "all"
    gpu_min: int | None = None
    gpu_max: int | None = None
    time_mode: str = SUBMITTED

    def __post_init__(self) -> None:
        for name in _TUPLE_FIELDS:
            object.__setattr__(self, name, _as_tuple(name, getattr(self, name)))
        object.__setattr__(self, "start", _as_datetime("start", self.start))
        object.__setattr__(self, "end", _as_datetime("end", self.end))
        object.__setattr__(self, "gpu_min", _as_gpu_bound("gpu_min", self.gpu_min))
        object.__setattr__(self, "gpu_max", _as_gpu_bound("gpu_max", self.gpu_max))
        if self.start is None and self.end is None and self.time_mode == RUNNING:
            object.__setattr__(self, "time_mode", SUBMITTED)  # no window: both modes select every job
        self._validate()

    def _validate(self) -> None:
        bad = [s for s in self.states if s not in schema.STATES]
        if bad:
            raise ValueError(f"filter states: unknown {', '.join(bad)}; expected some of {', '.join(schema.STATES)}")
        if self.job_kind not in JOB_KINDS:
            raise ValueError(f"filter job_kind: {self.job_kind!r} is not one of {', '.join(JOB_KINDS)}")
        if self.time_mode not in TIME_MODES:
            raise ValueError(f"filter time_mode: {self.time_mode!r} is not one of {', '.join(TIME_MODES)}")
        if self.start and self.end and self.start >= self.end:
            raise ValueError(f"filter window: start {self.start} must be before end {self.end}")
        if self.gpu_min is not None and self.gpu_max is not None and self.gpu_min > self.gpu_max:
            raise ValueError(f"filter gpu range: gpu_min {self.gpu_min} > gpu_max {self.gpu_max}")

    def where(self, alias: str = "", *, window: bool = True) -> tuple[str, list]:
        """Return the SQL predicate (`TRUE` when empty) and its bound parameters; window=False ignores start/end.

        In the running mode a job is in the window [start, end) when it started before the end and its end (end_time,
        else start_time + duration: how long a still-running job had run when the trace was cut) is after the start,
        the jobs the utilisation series count in the window; a job that never started is not."""
        prefix = f"{_check_alias(alias)}." if alias else ""
        parts: list[str] = []
        params: list[Any] = []

        def col(name: str) -> str:
            return f'{prefix}"{schema.check_identifier(name)}"'

        for name, values in (("cluster", self.clusters), ("vc", self.vcs), ("user", self.users)):
            if values:
                parts.append(f"{col(name)} IN ({', '.join('?' * len(values))})")
                params.extend(values)
        if self.states:
            parts.append(f"{col('state')} IN ({', '.join('?' * len(self.states))})")
            params.extend(self.states)
        if window and self.time_mode == RUNNING:
            parts.append(f"{col('start_time')} IS NOT NULL")
            if self.start is not None:
                parts.append(f"coalesce({col('end_time')}, {col('start_time')} + to_seconds({col('duration')})) > ?")
                params.append(self.start)
            if self.end is not None:
                parts.append(f"{col('start_time')} < ?")
                params.append(self.end)
        else:
            if window and self.start is not None:
                parts.append(f"{col('submit_time')} >= ?")
                params.append(self.start)
            if window and self.end is not None:
                parts.append(f"{col('submit_time')} < ?")
                params.append(self.end)
        if self.job_kind == "gpu":
            parts.append(f"{col('gpu_num')} > 0")
        elif self.job_kind == "cpu":
            parts.append(f"{col('gpu_num')} = 0")
        if self.gpu_min is not None:
            parts.append(f"{col('gpu_num')} >= ?")
            params.append(self.gpu_min)
        if self.gpu_max is not None:
            parts.append(f"{col('gpu_num')} <= ?")
            params.append(self.gpu_max)
        return (" AND ".join(parts) or "TRUE"), params

    def to_dict(self) -> dict[str, Any]:
        """A JSON/URL-safe dict of the non-default fields (datetimes as ISO strings, tuples as lists)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            if isinstance(value, datetime):
                value = value.isoformat(sep=" ")
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    def cache_key(self) -> str:
        """A stable string naming this filter's selection (order of values does not matter)."""
        d = self.to_dict()
        for name in _TUPLE_FIELDS:
            if name in d:
                d[name] = sorted(d[name])
        text = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _check_alias(alias: str) -> str:
    if not alias.isidentifier():
        raise ValueError(f"invalid SQL table alias {alias!r}")
    return alias


NO_FILTER = JobFilter()  # the default of every query: all jobs of the dataset


# --- the URL <-> view state <-> JobFilter codec ---

LIST_KEYS: dict[str, str] = {"cluster": "clusters", "vc": "vcs", "user": "users", "state": "states"}
MAX_GPUS = 4096
# Relative time ranges (URL `range=`): they stay relative in a shared link and are resolved against the trace's end.
RANGES: dict[str, str] = {
    "24h": "Last 24 hours",
    "7d": "Last 7 days",
    "30d": "Last 30 days",
    "month": "This month",
    "all": "Whole trace",
}
_RANGE_SPANS: dict[str, timedelta] = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
LIVE_WITHIN = timedelta(days=1)  # a trace whose newest record is this recent is live: ranges count back from now


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
        "time": SUBMITTED,
        "range": None,
        "window": None,  # a resolved range: [start, end) as ISO date-times
    }


def _cut(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _shown(value: str) -> str:
    return _cut(repr(value))


def split_values(value: str) -> list[str]:
    """The non-empty comma-separated values of a URL parameter, stripped."""
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
    """Turn query parameters (one string per key) into a filter state plus the problems found in them (`dataset=` is
    read as `ds=`)."""
    state = empty_state(params.get("ds") or params.get("dataset") or default_dataset)
    problems: list[str] = []
    for key, field in LIST_KEYS.items():
        state[field] = split_values(params.get(key, ""))
    bad = [s for s in state["states"] if s not in schema.STATES]
    if bad:
        problems.append(f"URL parameter state: unknown state(s) {_cut(', '.join(bad))}; ignored")
        state["states"] = [s for s in state["states"] if s in schema.STATES]
    _parse_window(params, state, problems)
    kind = params.get("kind", "all")
    if kind not in JOB_KINDS:
        problems.append(f"URL parameter kind={_shown(kind)} must be one of {', '.join(JOB_KINDS)}; ignored")
        kind = "all"
    state["job_kind"] = kind
    for key, field in (("gmin", "gpu_min"), ("gmax", "gpu_max")):
        if params.get(key):
            state[field] = _parse_gpus(params[key], key, problems)
    if state["gpu_min"] is not None and state["gpu_max"] is not None and state["gpu_min"] > state["gpu_max"]:
        problems.append(f"URL parameters gmin={state['gpu_min']} > gmax={state['gpu_max']}: an empty range; ignored")
        state["gpu_min"] = state["gpu_max"] = None
    return state, problems


def _parse_window(params: dict[str, str], state: dict[str, Any], problems: list[str]) -> None:
    """The time mode, the relative range or the start and end days of query parameters, into state."""
    mode = params.get("time", SUBMITTED)
    if mode not in TIME_MODES:
        problems.append(f"URL parameter time={_shown(mode)} must be one of {', '.join(TIME_MODES)}; ignored")
        mode = SUBMITTED
    state["time"] = mode
    span = params.get("range")
    if span and span not in RANGES:
        problems.append(f"URL parameter range={_shown(span)} must be one of {', '.join(RANGES)}; ignored")
    elif span:
        state["range"] = span
        given = [k for k in ("start", "end") if params.get(k)]
        if given:
            problems.append(f"URL parameter {' and '.join(given)} ignored: range={span} sets the window")
        return
    for key in ("start", "end"):
        if params.get(key):
            state[key] = _parse_day(params[key], key, problems)
    if state["start"] and state["end"] and state["start"] > state["end"]:
        problems.append(f"URL parameters start={state['start']} is after end={state['end']}; both ignored")
        state["start"] = state["end"] = None


@dataclass(frozen=True)
class Known:
    """What a dataset holds, to check a filter state against: names of clusters, (cluster, VC) pairs and users,
    its first and last days (ISO), and why the running time mode cannot apply to it (None when it can)."""

    clusters: tuple[str, ...] = ()
    cluster_vcs: tuple[tuple[str, str], ...] = ()
    users: tuple[str, ...] = ()
    first_day: str | None = None
    last_day: str | None = None
    no_running: str | None = None


def check_dataset(state: dict[str, Any], names: list[str], default: str) -> list[str]:
    """Replace an unknown dataset of a state by the default one, returning the problem (empty when it is known)."""
    if state["dataset"] in names or not names:
        return []
    problem = f"URL parameter ds={_shown(state['dataset'])}: no dataset of that name; showing {default!r} instead"
    state["dataset"] = default
    return [problem]


def has_checked_values(state: dict[str, Any]) -> bool:
    """Whether a state holds values that check_known checks (a state without them needs no look at its dataset)."""
    return any(state[f] for f in ("clusters", "vcs", "users", "start", "end")) or state["time"] == RUNNING


def check_known(state: dict[str, Any], known: Known) -> list[str]:
    """Drop from a state the values its dataset does not have, returning one problem naming each and why."""
    problems: list[str] = []
    where = f"in dataset {state['dataset']!r}"
    _drop_unknown(state, "clusters", "cluster", set(known.clusters), where, problems)
    chosen = set(state["clusters"])
    vcs = {vc for c, vc in known.cluster_vcs if not chosen or c in chosen}
    scope = f"in cluster(s) {', '.join(sorted(chosen))}" if chosen else where
    _drop_unknown(state, "vcs", "VC", vcs, scope, problems)
    if state["users"] and known.users:
        _drop_unknown(state, "users", "user", set(known.users), where, problems)
    elif state["users"]:
        problems.append(f"URL parameter user ignored: dataset {state['dataset']!r} has no users")
        state["users"] = []
    _check_days(state, known, problems)
    if state["time"] == RUNNING and known.no_running:
        problems.append(
            f"URL parameter time=running cannot be applied on dataset {state['dataset']!r}: {known.no_running}; "
            "showing the jobs submitted in the window instead"
        )
        state["time"] = SUBMITTED
    return problems


def _drop_unknown(
    state: dict[str, Any], field: str, what: str, known: set[str], where: str, problems: list[str]
) -> None:
    unknown = [v for v in state[field] if v not in known]
    if unknown:
        key = next(k for k, f in LIST_KEYS.items() if f == field)
        problems.append(f"URL parameter {key}: no {what} {_cut(', '.join(unknown))} {where}; ignored")
        state[field] = [v for v in state[field] if v in known]


def _check_days(state: dict[str, Any], known: Known, problems: list[str]) -> None:
    if not (known.first_day and known.last_day):
        return
    span = f"the trace runs {known.first_day} – {known.last_day}"
    if state["start"] and not state["range"] and state["start"] > known.last_day:
        problems.append(f"URL parameter start={state['start']} is after the trace's last day ({span}); ignored")
        state["start"] = None
    if state["end"] and not state["range"] and state["end"] < known.first_day:
        problems.append(f"URL parameter end={state['end']} is before the trace's first day ({span}); ignored")
        state["end"] = None


def resolve_range(state: dict[str, Any], last_submit: datetime | None, now: datetime) -> str | None:
    """Fill in the window of a state's relative range, counted back from now on a live trace (its last submission
    within LIVE_WITHIN of now) else from its last submission, and return the sentence saying which time it covers
    (None without a range)."""
    span = state.get("range")
    if not span or last_submit is None:
        return None
    ends = f"the trace's last job was submitted {last_submit:%Y-%m-%d %H:%M}"
    if span == "all":
        state["start"] = state["end"] = state["window"] = None
        return f"{RANGES[span]}: every job of {state['dataset']} ({ends})"
    live = now - last_submit <= LIVE_WITHIN
    anchor = now if live else last_submit
    end = anchor.replace(second=0, microsecond=0) + timedelta(minutes=1)
    start = datetime(anchor.year, anchor.month, 1) if span == "month" else end - _RANGE_SPANS[span]
    state["window"] = [start.isoformat(sep=" "), end.isoformat(sep=" ")]
    state["start"], state["end"] = start.date().isoformat(), anchor.date().isoformat()
    times = f"{start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M}"
    if live:
        return f"{RANGES[span]}: {times}"
    label = "The trace's last calendar month" if span == "month" else f"{RANGES[span]} of the trace"
    return f"{label}: {times} ({ends}; the range counts back from there, not from today)"


def query_params(search: str | None) -> dict[str, str]:
    """A URL query string (with or without the leading '?') as one string per key, the last one winning."""
    raw = parse_qs((search or "").lstrip("?"), keep_blank_values=False)
    return {k: v[-1] for k, v in raw.items()}


def flat_params(params: dict[str, Any]) -> dict[str, str]:
    """A page's query parameters as Dash passes them (a string or a list of strings) as one string per key."""
    return {k: (v[-1] if isinstance(v, list) else v) for k, v in params.items() if isinstance(v, str | list)}


def parse_query(search: str | None, default_dataset: str = "") -> tuple[dict[str, Any], list[str]]:
    """Parse a URL query string (with or without the leading '?') into a filter state and its problems."""
    return parse_params(query_params(search), default_dataset)


def to_params(state: dict[str, Any]) -> dict[str, str]:
    """The non-default parts of a filter state as query parameters."""
    params: dict[str, str] = {}
    if state.get("dataset"):
        params["ds"] = state["dataset"]
    for key, field in LIST_KEYS.items():
        if state.get(field):
            params[key] = ",".join(state[field])
    if state.get("range"):
        params["range"] = state["range"]
    else:
        params.update({key: state[key] for key in ("start", "end") if state.get(key)})
    if state.get("time", SUBMITTED) != SUBMITTED:
        params["time"] = state["time"]
    if state.get("job_kind", "all") != "all":
        params["kind"] = state["job_kind"]
    for key, field in (("gmin", "gpu_min"), ("gmax", "gpu_max")):
        if state.get(field) is not None:
            params[key] = str(state[field])
    return params


FILTER_PARAMS: frozenset[str] = frozenset(
    {"ds", "dataset", "start", "end", "range", "time", "kind", "gmin", "gmax", *LIST_KEYS}
)


def page_params(search: str | None) -> dict[str, str]:
    """The query parameters of a URL that are a page's own settings rather than filters."""
    return {k: v for k, v in query_params(search).items() if k not in FILTER_PARAMS}


def to_query(state: dict[str, Any], extra: dict[str, str] | None = None) -> str:
    """Encode a filter state (plus a page's own parameters) as a URL query string ('' when there is nothing)."""
    params = {**to_params(state), **(extra or {})}
    return "?" + urlencode(params, safe=",") if params else ""


def to_filter(state: dict[str, Any]) -> JobFilter:
    """Build the analytics JobFilter of a filter state (the end day is inclusive in the UI, exclusive in SQL; a
    resolved relative range gives its exact window)."""
    start, end = _state_window(state)
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
        time_mode=state.get("time") or SUBMITTED,
    )


def _state_window(state: dict[str, Any]) -> tuple[datetime | None, datetime | None]:
    if state.get("range") == "all":
        return None, None
    if state.get("range") and state.get("window"):
        return datetime.fromisoformat(state["window"][0]), datetime.fromisoformat(state["window"][1])
    start = datetime.fromisoformat(state["start"]) if state.get("start") else None
    end = datetime.fromisoformat(state["end"]) + timedelta(days=1) if state.get("end") else None
    return start, end
