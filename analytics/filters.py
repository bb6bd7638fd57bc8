"""Filter state of every study query: a frozen dataclass that becomes a SQL predicate or Polars expression."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import polars as pl

from analytics import schema

JOB_KINDS: tuple[str, ...] = ("all", "gpu", "cpu")
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

    def __post_init__(self) -> None:
        for name in _TUPLE_FIELDS:
            object.__setattr__(self, name, _as_tuple(name, getattr(self, name)))
        object.__setattr__(self, "start", _as_datetime("start", self.start))
        object.__setattr__(self, "end", _as_datetime("end", self.end))
        object.__setattr__(self, "gpu_min", _as_gpu_bound("gpu_min", self.gpu_min))
        object.__setattr__(self, "gpu_max", _as_gpu_bound("gpu_max", self.gpu_max))
        self._validate()

    def _validate(self) -> None:
        bad = [s for s in self.states if s not in schema.STATES]
        if bad:
            raise ValueError(f"filter states: unknown {', '.join(bad)}; expected some of {', '.join(schema.STATES)}")
        if self.job_kind not in JOB_KINDS:
            raise ValueError(f"filter job_kind: {self.job_kind!r} is not one of {', '.join(JOB_KINDS)}")
        if self.start and self.end and self.start >= self.end:
            raise ValueError(f"filter window: start {self.start} must be before end {self.end}")
        if self.gpu_min is not None and self.gpu_max is not None and self.gpu_min > self.gpu_max:
            raise ValueError(f"filter gpu range: gpu_min {self.gpu_min} > gpu_max {self.gpu_max}")

    def where(self, alias: str = "", *, window: bool = True) -> tuple[str, list]:
        """Return the SQL predicate (`TRUE` when empty) and its bound parameters; window=False ignores start/end."""
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

    def expr(self, *, window: bool = True) -> pl.Expr:
        """Return the same predicate as a Polars expression on the jobs columns."""
        preds: list[pl.Expr] = []
        for name, values in (
            ("cluster", self.clusters),
            ("vc", self.vcs),
            ("user", self.users),
            ("state", self.states),
        ):
            if values:
                preds.append(pl.col(name).is_in(list(values)))
        if window and self.start is not None:
            preds.append(pl.col("submit_time") >= self.start)
        if window and self.end is not None:
            preds.append(pl.col("submit_time") < self.end)
        if self.job_kind != "all":
            preds.append(pl.col("gpu_num") > 0 if self.job_kind == "gpu" else pl.col("gpu_num") == 0)
        if self.gpu_min is not None:
            preds.append(pl.col("gpu_num") >= self.gpu_min)
        if self.gpu_max is not None:
            preds.append(pl.col("gpu_num") <= self.gpu_max)
        return pl.all_horizontal(preds) if preds else pl.lit(True)

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

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> JobFilter:
        """Build and validate a filter from a dict such as `to_dict()` returns, rejecting unknown keys."""
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"filter: unknown field(s) {', '.join(unknown)}; expected {', '.join(sorted(known))}")
        return cls(**d)

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
