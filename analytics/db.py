"""The one choke point for SQL: DuckDB over a dataset's Parquet files, bound parameters, a cursor per call."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa

from analytics import schema
from analytics.store import Dataset

DEFAULT_MAX_ROWS = 2_000_000
DEFAULT_TIMEOUT_S = 60.0
_BATCH_ROWS = 131_072

log = logging.getLogger(__name__)
_lock = threading.Lock()
_state: dict[str, object] = {}


class QueryError(Exception):
    """A query failed, timed out or returned more rows than allowed."""


def _connection() -> duckdb.DuckDBPyConnection:
    """The process's shared in-memory DuckDB database, recreated after a fork."""
    with _lock:
        if _state.get("pid") != os.getpid():
            config = {"enable_object_cache": True, "memory_limit": os.environ.get("HELIOS_DUCKDB_MEMORY", "2GB")}
            _state["conn"] = duckdb.connect(":memory:", config=config)
            _state["pid"] = os.getpid()
        return _state["conn"]  # type: ignore[return-value]


def _sql_path(path: Path | str) -> str:
    """A file path (or glob) as a SQL string literal (paths come from the dataset store, never from the user)."""
    return "'" + str(path).replace("'", "''") + "'"


# The SQL type of each job column dtype, for the null columns of a dataset written before the column existed.
_SQL_TYPES = {pl.String(): "VARCHAR", pl.Int64(): "BIGINT", pl.Int32(): "INTEGER", pl.Float64(): "DOUBLE"}
_SQL_TYPES[schema.TIMESTAMP] = "TIMESTAMP"


def _missing_columns(ds: Dataset) -> str:
    """`, CAST(NULL AS type) AS "column"` for each job column the dataset's files lack (identifiers of the schema)."""
    stored = set(ds.stored_job_columns())
    missing = [(c, t) for c, t in schema.JOB_SCHEMA.items() if c not in stored]
    return "".join(f', CAST(NULL AS {_SQL_TYPES[t]}) AS "{schema.check_identifier(c)}"' for c, t in missing)


def _attach_views(cur: duckdb.DuckDBPyConnection, ds: Dataset) -> None:
    jobs = f"SELECT *{_missing_columns(ds)} FROM read_parquet({_sql_path(ds.jobs_glob)})"
    cur.execute(f"CREATE TEMP VIEW jobs AS {jobs}")
    cur.execute(f"CREATE TEMP VIEW vc_gpus AS SELECT * FROM read_parquet({_sql_path(ds.vc_gpus_path)})")


def _fetch(rel: duckdb.DuckDBPyRelation | None, max_rows: int) -> pl.DataFrame:
    if rel is None:
        return pl.DataFrame()
    reader = rel.to_arrow_reader(_BATCH_ROWS)
    batches: list[pa.RecordBatch] = []
    rows = 0
    for batch in reader:
        rows += batch.num_rows
        if rows > max_rows:
            raise QueryError(f"query returned more than {max_rows:,} rows; narrow the filter or aggregate")
        batches.append(batch)
    return pl.from_arrow(pa.Table.from_batches(batches, schema=reader.schema))  # type: ignore[return-value]


def run(
    sql: str,
    params: list | dict | None = None,
    *,
    ds: Dataset | None = None,
    max_rows: int = DEFAULT_MAX_ROWS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> pl.DataFrame:
    """Run one SQL statement with bound params on a fresh cursor (views `jobs`, `vc_gpus` of ds) as a DataFrame."""
    cur = _connection().cursor()
    timer = threading.Timer(timeout_s, cur.interrupt)
    t0 = time.perf_counter()
    try:
        if ds is not None:
            _attach_views(cur, ds)
        timer.start()
        df = _fetch(cur.sql(sql, params=params or None), max_rows)
    except duckdb.InterruptException:
        raise QueryError(f"query cancelled after {timeout_s:g} s") from None
    except duckdb.Error as exc:
        raise QueryError(f"query failed: {str(exc).splitlines()[0]}") from exc
    finally:
        timer.cancel()
        cur.close()
    log.debug("sql %.1f ms, %d rows: %s", (time.perf_counter() - t0) * 1000, df.height, " ".join(sql.split())[:200])
    return df
