"""Row-level validation of ingested jobs and the data-quality report kept in meta.json["quality"].

Dropped kinds are exclusive (a row is counted under the first that applies, in DROPPED_KINDS order), so
rows_in - rows_out equals the sum of their counts; kept kinds flag rows that stay in the dataset.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from analytics import schema
from analytics.ingest.parse import ISSUE_PREFIX, ROW, text

MAX_EXAMPLES = 5
DROPPED = "dropped"
KEPT = "kept"
# Rows a reader rejects (a flag column `_issue:<kind>` says why), before the checks of the canonical columns.
READER_DROPPED_KINDS = ("blank_row", "wrong_field_count", "unparsable_required")
DROPPED_KINDS = (*READER_DROPPED_KINDS, "missing_required", "negative_gpu_num", "duplicate_job_id")
KEPT_KINDS = (
    "end_before_start",
    "negative_duration",
    "duration_mismatch",
    "negative_queue",
    "queue_mismatch",
    "unknown_state",
    "missing_optional",
    "unparsable_value",
    "never_started",
    "vc_without_capacity",
)
KIND_DESCRIPTIONS = {
    "blank_row": "empty line in the file",
    "wrong_field_count": "line with another number of fields than the header or field list (a '|' in a value?)",
    "unparsable_required": "value of a required column that could not be parsed (a job id, a submit time)",
    "missing_required": f"null in a required column ({', '.join(schema.JOB_REQUIRED_NON_NULL)})",
    "negative_gpu_num": "gpu_num < 0",
    "duplicate_job_id": "job_id seen before in the same cluster (the first row is kept)",
    "end_before_start": "end_time < start_time",
    "negative_duration": "duration < 0",
    "duration_mismatch": "duration != end_time - start_time",
    "negative_queue": "queue < 0",
    "queue_mismatch": "queue != start_time - submit_time",
    "unknown_state": "state not one of the schema's states (set to null)",
    "missing_optional": "null in an optional column the source supplies",
    "unparsable_value": "value of an optional column that could not be parsed (set to null)",
    "never_started": "job never started (duration set to 0)",
    "vc_without_capacity": "the job's VC has no row in the capacity table",
}
_DROP = "_drop"
Checks = dict[str, tuple[pl.Expr, pl.Expr]]  # kind -> (row mask, detail text)


def _issue(kind: str, columns: list[str]) -> pl.Expr:
    name = f"{ISSUE_PREFIX}{kind}"
    return pl.col(name) if name in columns else pl.lit(None, pl.String)


def _null_names(cols: list[str]) -> pl.Expr:
    names = [pl.when(pl.col(c).is_null()).then(pl.lit(c)) for c in cols]
    return pl.concat_str(names, separator=",", ignore_nulls=True)


def _show(col: str) -> pl.Expr:
    return text(f"{col}=", pl.col(col))


def _seconds_between(later: str, earlier: str) -> pl.Expr:
    return (pl.col(later) - pl.col(earlier)).dt.total_seconds()


def drop_reasons(columns: list[str]) -> pl.Expr:
    """Expression naming the first drop kind of each row (null for rows that stay), duplicates excepted."""
    required = list(schema.JOB_REQUIRED_NON_NULL)
    missing = pl.any_horizontal(pl.col(c).is_null() for c in required)
    checks = [(_issue(k, columns).is_not_null(), k) for k in READER_DROPPED_KINDS]
    checks += [(missing, "missing_required"), (pl.col("gpu_num") < 0, "negative_gpu_num")]
    reason = pl.when(checks[0][0]).then(pl.lit(checks[0][1]))
    for mask, kind in checks[1:]:
        reason = reason.when(mask).then(pl.lit(kind))
    return reason.alias(_DROP)


def duplicate_expr() -> pl.Expr:
    """Expression true for a non-dropped row whose job_id appeared earlier among its cluster's kept rows."""
    alive = pl.col(_DROP).is_null()
    return alive & ~pl.col("job_id").is_first_distinct().over("cluster", alive)


def drop_details(columns: list[str]) -> dict[str, pl.Expr]:
    """Per dropped kind, the text shown in its examples (a reader's rejections: the reason it gave)."""
    return {
        **{kind: _issue(kind, columns) for kind in READER_DROPPED_KINDS},
        "blank_row": pl.lit("empty row"),
        "missing_required": text("null ", _null_names(list(schema.JOB_REQUIRED_NON_NULL))),
        "negative_gpu_num": _show("gpu_num"),
        "duplicate_job_id": _show("job_id"),
    }


def kept_checks(columns: list[str], optional_cols: list[str], capacity: pl.DataFrame) -> Checks:
    """Per kept kind, (mask, detail text) expressions over canonical job columns."""
    states = pl.col("state").is_not_null() & ~pl.col("state").is_in(schema.STATES)
    run_s, wait_s = _seconds_between("end_time", "start_time"), _seconds_between("start_time", "submit_time")
    return {
        "end_before_start": (
            pl.col("end_time") < pl.col("start_time"),
            text("start=", pl.col("start_time"), " end=", pl.col("end_time")),
        ),
        "negative_duration": (pl.col("duration") < 0, _show("duration")),
        "duration_mismatch": (
            pl.col("duration") != run_s,
            text("duration=", pl.col("duration"), " end-start=", run_s),
        ),
        "negative_queue": (pl.col("queue") < 0, _show("queue")),
        "queue_mismatch": (
            pl.col("queue") != wait_s,
            text("queue=", pl.col("queue"), " start-submit=", wait_s),
        ),
        "unknown_state": (states, _show("state")),
        "missing_optional": _missing_optional(optional_cols),
        "unparsable_value": _reader_flag("unparsable_value", columns),
        "never_started": _reader_flag("never_started", columns),
        "vc_without_capacity": (~_has_capacity(capacity), _show("vc")),
    }


def _missing_optional(optional_cols: list[str]) -> tuple[pl.Expr, pl.Expr]:
    if not optional_cols:
        return pl.lit(False), pl.lit(None, pl.String)
    mask = pl.any_horizontal(pl.col(c).is_null() for c in optional_cols)
    return mask, text("null ", _null_names(optional_cols))


def _reader_flag(kind: str, columns: list[str]) -> tuple[pl.Expr, pl.Expr]:
    flag = _issue(kind, columns)
    return flag.is_not_null(), flag


def _has_capacity(capacity: pl.DataFrame) -> pl.Expr:
    """True where the job's (cluster, vc) has capacity rows or its cluster has whole-cluster `*` rows."""
    known = capacity.select("cluster", "vc").unique()
    by_cluster = known.group_by("cluster").agg("vc").rows()
    tests = [(pl.col("cluster") == c) & (pl.lit("*" in v) | pl.col("vc").is_in(v)) for c, v in by_cluster]
    return pl.any_horizontal(tests) if tests else pl.lit(False)


def _examples(frame: pl.DataFrame, mask: pl.Series, detail: pl.Expr, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The first MAX_EXAMPLES rows of frame where mask holds, as report examples."""
    first = frame[mask.arg_true().head(MAX_EXAMPLES)].with_columns(detail.alias("detail"))
    rows = first.select("cluster", ROW, "job_id", "detail").rows()
    return [{"file": labels.get(c, c), "row": r, "job_id": j, "detail": d or ""} for c, r, j, d in rows]


def _issue_entry(count: int, action: str, kind: str, examples: list[dict[str, Any]]) -> dict[str, Any]:
    return {"count": count, "action": action, "description": KIND_DESCRIPTIONS[kind], "examples": examples}


def _with_canonical(jobs: pl.DataFrame) -> pl.DataFrame:
    missing = [pl.lit(None, dtype=t).alias(c) for c, t in schema.JOB_SCHEMA.items() if c not in jobs.columns]
    return jobs.with_columns(missing) if missing else jobs


def _any_duplicate(frame: pl.DataFrame) -> bool:
    """Whether any cluster has a job_id twice among its rows not dropped yet (cheap: distinct ids per cluster)."""
    alive = frame.lazy().filter(pl.col(_DROP).is_null())
    repeats = alive.group_by("cluster").agg((pl.col("job_id").n_unique() < pl.len()).alias("repeats"))
    return bool(repeats.select(pl.col("repeats").any()).collect().item())


def mark_drops(jobs: pl.DataFrame) -> pl.DataFrame:
    """Jobs with every canonical column and a `_drop` column naming each dropped row's kind (null = kept)."""
    frame = _with_canonical(jobs)
    frame = frame.with_columns(drop_reasons(frame.columns))
    if not _any_duplicate(frame):
        return frame
    duplicate = pl.when(duplicate_expr()).then(pl.lit("duplicate_job_id")).otherwise(pl.col(_DROP))
    return frame.with_columns(duplicate.alias(_DROP))


def dropped_issues(marked: pl.DataFrame, labels: dict[str, str]) -> dict[str, Any]:
    """Report entries of the dropped kinds of jobs marked by mark_drops."""
    count_of = dict(marked.group_by(_DROP).len().drop_nulls(_DROP).rows())
    details = drop_details(marked.columns)
    issues = {}
    for kind in DROPPED_KINDS:
        n = count_of.get(kind, 0)
        examples = _examples(marked, (marked[_DROP] == kind).fill_null(False), details[kind], labels) if n else []
        issues[kind] = _issue_entry(n, DROPPED, kind, examples)
    return issues


def kept_issues(kept: pl.DataFrame, checks: Checks, labels: dict[str, str]) -> dict[str, Any]:
    """Report entries of the kept kinds, checked over the rows that stay."""
    masks = kept.select(mask.fill_null(False).alias(kind) for kind, (mask, _) in checks.items())
    totals = masks.sum().row(0, named=True)
    issues = {}
    for kind in KEPT_KINDS:
        n = int(totals[kind])
        examples = _examples(kept, masks[kind], checks[kind][1], labels) if n else []
        issues[kind] = _issue_entry(n, KEPT, kind, examples)
    return issues


def validate(
    jobs: pl.DataFrame,
    capacity: pl.DataFrame,
    labels: dict[str, str],
    source_columns: tuple[str, ...],
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Drop and flag problem rows of parsed jobs; return the canonical jobs and the data-quality report."""
    marked = mark_drops(jobs)
    kept = marked.filter(pl.col(_DROP).is_null())
    exempt = (*schema.JOB_REQUIRED_NON_NULL, *schema.JOB_NULL_BY_MEANING)
    optional = [c for c in source_columns if c not in exempt]
    checks = kept_checks(marked.columns, optional, capacity)
    issues = dropped_issues(marked, labels) | kept_issues(kept, checks, labels)
    known_state = pl.when(pl.col("state").is_in(schema.STATES)).then(pl.col("state")).alias("state")
    out = schema.conform_jobs(kept.with_columns(known_state))
    report = {
        "rows_in": jobs.height,
        "rows_out": out.height,
        "issues": issues,
        "null_counts": out.null_count().row(0, named=True),
        "absent_columns": [c for c in schema.JOB_COLUMNS if c not in source_columns],
    }
    return out, report


def merge_reports(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The report of a whole source from the reports of its parts (in source order): counts add up, examples are
    the first ones."""
    first = reports[0]
    issues = {}
    for kind, entry in first["issues"].items():
        examples = [e for r in reports for e in r["issues"][kind]["examples"]][:MAX_EXAMPLES]
        issues[kind] = {**entry, "count": sum(r["issues"][kind]["count"] for r in reports), "examples": examples}
    nulls = {c: sum(r["null_counts"][c] for r in reports) for c in first["null_counts"]}
    return {
        "rows_in": sum(r["rows_in"] for r in reports),
        "rows_out": sum(r["rows_out"] for r in reports),
        "issues": issues,
        "null_counts": nulls,
        "absent_columns": first["absent_columns"],
    }


SHOWN_EXAMPLES = 3  # examples a summary line of a dropped kind names (one for a kept kind)


def _where(entry: dict[str, Any], n_examples: int) -> str:
    """` (e.g. FILE row R: detail; row R2: detail ...)`: where an issue was seen, each file named once in a row."""
    places, last_file = [], None
    for example in entry["examples"][:n_examples]:
        file = "" if example["file"] == last_file else f"{example['file']} "
        places.append(f"{file}row {example['row']}: {example['detail']}")
        last_file = example["file"]
    return f" (e.g. {'; '.join(places)})" if places else ""


def rejections(report: dict[str, Any]) -> str:
    """Each dropped kind of a report with its count, meaning and first examples, in one line (empty when none)."""
    parts = [
        f"{kind} {entry['count']} ({entry['description']}){_where(entry, SHOWN_EXAMPLES)}"
        for kind, entry in report["issues"].items()
        if entry["count"] and entry["action"] == DROPPED
    ]
    return "; ".join(parts)


def summary_lines(report: dict[str, Any]) -> list[str]:
    """A short human-readable summary of a data-quality report."""
    lines = [f"rows: {report['rows_in']} read, {report['rows_out']} kept"]
    for kind, entry in report["issues"].items():
        if entry["count"]:
            where = _where(entry, SHOWN_EXAMPLES if entry["action"] == DROPPED else 1)
            lines.append(f"  {kind}: {entry['count']} {entry['action']}{where}")
    nulls = {c: n for c, n in report["null_counts"].items() if n and c not in report["absent_columns"]}
    if nulls:
        lines.append("nulls: " + ", ".join(f"{c} {n}" for c, n in nulls.items()))
    if report["absent_columns"]:
        lines.append("not in source: " + ", ".join(report["absent_columns"]))
    return lines
