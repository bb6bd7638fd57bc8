"""The job explorer's queries: every job matching the dashboard filters plus a grid's own filter and sort model
(AG Grid's JSON), a block of rows at a time, a count, or all of them as CSV chunks; values are bound parameters."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import polars as pl

from analytics import capabilities, db, schema
from analytics.csv_safety import csv_text
from analytics.filters import JobFilter
from analytics.store import Dataset

COLUMNS: tuple[str, ...] = schema.JOB_COLUMNS  # job_name: null in Helios, Slurm's name (and array/het id) else
NUMBER_COLUMNS = frozenset({"job_id", "gpu_num", "cpu_num", "node_num", "duration", "queue", "timelimit_s", "priority"})
DATE_COLUMNS = frozenset({"submit_time", "start_time", "end_time"})
TEXT_OPS: dict[str, tuple[str, str]] = {
    "contains": ("ILIKE", "%{}%"),
    "notContains": ("NOT ILIKE", "%{}%"),
    "equals": ("=", "{}"),
    "notEqual": ("<>", "{}"),
    "startsWith": ("ILIKE", "{}%"),
    "endsWith": ("ILIKE", "%{}"),
}
COMPARE_OPS: dict[str, str] = {
    "equals": "=",
    "notEqual": "<>",
    "lessThan": "<",
    "lessThanOrEqual": "<=",
    "greaterThan": ">",
    "greaterThanOrEqual": ">=",
}
MAX_PAGE_ROWS = 1000
MAX_CONDITIONS = 10
MAX_ROW_INDEX = 2**53
EXPORT_CHUNK_ROWS = 200_000
ORDER_KEY = '"cluster", "submit_time", "job_id"'


class GridFilterError(ValueError):
    """A grid filter or sort the explorer cannot translate into SQL."""


def _condition(col: str, model: dict[str, Any]) -> tuple[str, list]:
    if not isinstance(model, dict):
        raise GridFilterError(f"column {col}: a filter must be an object")
    ident = f'"{schema.check_identifier(col)}"'
    op = model.get("type")
    if op == "blank":
        return f"{ident} IS NULL", []
    if op == "notBlank":
        return f"{ident} IS NOT NULL", []
    ftype = model.get("filterType")
    if ftype == "text" and op in TEXT_OPS:
        sql_op, pattern = TEXT_OPS[op]
        return f"CAST({ident} AS VARCHAR) {sql_op} ?", [pattern.format(str(model.get("filter", "")))]
    if ftype in ("number", "date"):
        lo, hi = ("dateFrom", "dateTo") if ftype == "date" else ("filter", "filterTo")
        cast = _parse_date if ftype == "date" else _parse_number
        if op == "inRange":
            return f"{ident} BETWEEN ? AND ?", [cast(model.get(lo), col), cast(model.get(hi), col)]
        if op in COMPARE_OPS:
            return f"{ident} {COMPARE_OPS[op]} ?", [cast(model.get(lo), col)]
    raise GridFilterError(f"column {col}: unsupported filter {ftype}/{op}")


def _parse_number(value: Any, col: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise GridFilterError(f"column {col}: {value!r} is not a number") from None


def _parse_date(value: Any, col: str) -> datetime:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        raise GridFilterError(f"column {col}: {value!r} is not a date") from None


def grid_where(filter_model: dict[str, Any] | None) -> tuple[str, list]:
    """Translate an AG Grid filter model into a SQL predicate with bound parameters."""
    if not isinstance(filter_model, dict | None):
        raise GridFilterError("the grid filter must be an object of column filters")
    parts, params = [], []
    for col, model in (filter_model or {}).items():
        if col not in COLUMNS:
            raise GridFilterError(f"unknown column {_shown(col)} in grid filter")
        if isinstance(model, dict) and "conditions" in model:
            joiner = " OR " if model.get("operator") == "OR" else " AND "
            subs = [_condition(col, m) for m in _conditions(col, model["conditions"])]
            parts.append("(" + joiner.join(s for s, _ in subs) + ")")
            params.extend(p for _, ps in subs for p in ps)
        else:
            sql, ps = _condition(col, model)
            parts.append(sql)
            params.extend(ps)
    return (" AND ".join(parts) or "TRUE"), params


def _shown(value: Any) -> str:
    """A value as it appears in a message: its repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _conditions(col: str, conditions: Any) -> list:
    if not isinstance(conditions, list) or not 0 < len(conditions) <= MAX_CONDITIONS:
        raise GridFilterError(f"column {col}: a combined filter needs a list of 1-{MAX_CONDITIONS} conditions")
    return conditions


def order_by(sort_model: list[dict[str, Any]] | None) -> str:
    """Translate an AG Grid sort model into an ORDER BY list (ties broken by cluster, submit time, job id)."""
    if not isinstance(sort_model, list | None):
        raise GridFilterError("the grid sort must be a list of {colId, sort} objects")
    keys = []
    for item in sort_model or []:
        col = item.get("colId", "") if isinstance(item, dict) else item
        if col not in COLUMNS:
            raise GridFilterError(f"unknown column {_shown(col)} in grid sort")
        keys.append(f'"{col}" {"DESC" if item.get("sort") == "desc" else "ASC"} NULLS LAST')
    return ", ".join([*keys, ORDER_KEY])


def shown_columns(ds: Dataset) -> tuple[str, ...]:
    """The job columns a dataset has, which the explorer shows and exports (one its trace lacks is neither: it is
    "not in this trace", never a column of empty cells)."""
    status = capabilities.column_status(ds.meta)
    return tuple(c for c in COLUMNS if status[c]["status"] != capabilities.ABSENT)


def _where(flt: JobFilter, filter_model: dict[str, Any] | None) -> tuple[str, list]:
    base, params = flt.where()
    extra, extra_params = grid_where(filter_model)
    return f"({base}) AND ({extra})", [*params, *extra_params]


def count_rows(ds: Dataset, flt: JobFilter, filter_model: dict[str, Any] | None) -> int:
    """How many jobs match the dashboard filters and the grid filter."""
    where, params = _where(flt, filter_model)
    return int(db.run(f"SELECT count(*) AS n FROM jobs WHERE {where}", params, ds=ds)["n"][0])


def _select(ds: Dataset, flt: JobFilter, filter_model: dict | None, sort_model: list | None) -> tuple[str, list]:
    """The SQL selecting the matching jobs in order, a block at a time (LIMIT ? OFFSET ? come last), and its params.
    Without a sort, a dataset's single jobs file is read as it is stored, already in ORDER_KEY's order
    (store.JOB_ORDER): no sort of the whole table for its first rows."""
    where, params = _where(flt, filter_model)
    stored_order = not sort_model and ds.jobs_path.is_file()
    order = "" if stored_order else f" ORDER BY {order_by(sort_model)}"
    return f"SELECT {', '.join(shown_columns(ds))} FROM jobs WHERE {where}{order} LIMIT ? OFFSET ?", params


def page(
    ds: Dataset, flt: JobFilter, filter_model: dict | None, sort_model: list | None, start: int, limit: int
) -> pl.DataFrame:
    """The matching jobs from row start (0-based), at most limit of them, in the sort model's order."""
    sql, params = _select(ds, flt, filter_model, sort_model)
    return db.run(sql, [*params, limit, start], ds=ds)


def block_bounds(request: dict[str, Any]) -> tuple[int, int]:
    """The first row and the row count of an infinite-row-model block request (at most MAX_PAGE_ROWS rows)."""
    start, end = _row_index(request, "startRow", 0), _row_index(request, "endRow", None)
    return start, min(max((start + 100 if end is None else end) - start, 0), MAX_PAGE_ROWS)


def _row_index(request_: dict[str, Any], key: str, default: int | None) -> int | None:
    value = request_.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_ROW_INDEX:
        raise GridFilterError(f"{key} must be a row number from 0 to {MAX_ROW_INDEX:,}, not {_shown(value)}")
    return value


def export_chunks(ds: Dataset, flt: JobFilter, filter_model: dict | None, sort_model: list | None) -> Iterator[str]:
    """Yield the matching jobs as CSV text, header first, in chunks of EXPORT_CHUNK_ROWS rows."""
    sql, params = _select(ds, flt, filter_model, sort_model)
    offset = 0
    while True:
        df = db.run(sql, [*params, EXPORT_CHUNK_ROWS, offset], ds=ds)
        yield csv_text(df, include_header=offset == 0)
        if df.height < EXPORT_CHUNK_ROWS:
            return
        offset += EXPORT_CHUNK_ROWS
