"""Source CSV files read as text, then parsed column by column with errors naming file, row, column and value.

Row numbers are file line numbers: the header is row 1, the first data row is row 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

ROW = "_row"  # file row number of each data row
ISSUE_PREFIX = "_issue:"  # text columns a reader adds: non-null = that row has the issue (kept and flagged)
FIRST_DATA_ROW = 2
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
DATE_FORMAT = "%Y-%m-%d"
NULL_TOKENS = ["", "NaN", "nan"]
_PARSED = "_parsed:"
_MAX_EXACT_FLOAT_INT = 2**53
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MAX_FIELD_CHARS = 4096  # longer values are a fatal error (a gigantic line is a broken file, not data)
MAX_MESSAGE_CHARS = 300
MAX_OFFSET_S = 100 * 365 * 86_400  # trace-relative times (Alibaba) beyond a century are broken values
MAX_SPAN_DAYS = 20 * 366  # a daily capacity table longer than this means a broken date
BATCH_ROWS = 1_000_000  # rows of a large file read and parsed at a time (bounds the memory its text takes)
_MAX_NAMES_SHOWN = 20


class IngestError(Exception):
    """A fatal ingest problem in one line naming the file (and row, column and value when known)."""


@dataclass
class Source:
    """What a format reader hands to validation: parsed jobs, capacity, file labels and format facts."""

    # Canonical columns found in the source (state as given) + ROW + ISSUE_PREFIX columns: one frame, or parts read
    # one at a time, each holding whole clusters (a large source never sits in memory at once).
    jobs: pl.DataFrame | Iterator[pl.DataFrame]
    vc_gpus: pl.DataFrame  # canonical VC capacity table
    labels: dict[str, str]  # cluster -> the file its rows come from, as named in the report
    source_columns: tuple[str, ...]  # canonical job columns the source supplies
    meta: dict[str, Any] = field(default_factory=dict)  # format-specific facts for meta.json


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return clip(text.splitlines()[0]) if text else type(exc).__name__


def clip(text: str, max_chars: int = MAX_MESSAGE_CHARS) -> str:
    """text cut to max_chars (with a note of the length), non-printable characters escaped."""
    shown = text if text.isprintable() else repr(text)[1:-1]
    return shown if len(shown) <= max_chars else f"{shown[:max_chars]}... ({len(text)} characters)"


def show_names(names: list[str]) -> str:
    """A short, printable list of column names for messages."""
    shown = ", ".join(clip(n, 40) for n in names[:_MAX_NAMES_SHOWN]) or "none"
    extra = len(names) - _MAX_NAMES_SHOWN
    return f"{shown} and {extra} more" if extra > 0 else shown


def read_header(path: Path, label: str) -> list[str]:
    """The column names of a CSV file, raising IngestError when it is missing, empty or unreadable."""
    if not path.is_file():
        raise IngestError(f"{label}: no such file")
    try:
        return pl.scan_csv(path, infer_schema=False).collect_schema().names()
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise IngestError(f"{label}: cannot read CSV file ({_first_line(exc)})") from exc


def text_columns(path: Path, label: str, required: tuple[str, ...], optional: tuple[str, ...]) -> list[str]:
    """The required and present optional columns of a CSV file, raising IngestError when a required one is missing."""
    header = read_header(path, label)
    missing = [c for c in required if c not in header]
    if missing:
        found = show_names(header)
        raise IngestError(f"{label}: missing required column(s) {', '.join(missing)} (found: {found})")
    return list(required) + [c for c in optional if c in header and c not in required]


def read_text_csv(
    path: Path,
    label: str,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
) -> pl.DataFrame:
    """Read the required and present optional columns of a CSV as text plus `_row`, failing on a bad file."""
    columns = text_columns(path, label, required, optional)
    try:
        df = pl.read_csv(path, infer_schema=False, columns=columns, null_values=NULL_TOKENS)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise IngestError(f"{label}: cannot read CSV file ({_first_line(exc)})") from exc
    if df.height == 0:
        raise IngestError(f"{label}: no data rows")
    check_field_lengths(df, label)
    blank = pl.all_horizontal(pl.col(c).is_null() for c in columns)
    return df.with_row_index(ROW, offset=FIRST_DATA_ROW).with_columns(
        pl.col(ROW).cast(pl.Int64), pl.when(blank).then(pl.lit("empty row")).alias(f"{ISSUE_PREFIX}blank_row")
    )


def read_text_batches(
    path: Path,
    label: str,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pl.DataFrame]:
    """read_text_csv a batch of at most batch_rows rows at a time (row numbers run on across batches); a batch gets
    the blank-row issue column only when it has a blank row."""
    columns = text_columns(path, label, required, optional)
    lazy = pl.scan_csv(path, infer_schema=False, null_values=NULL_TOKENS).select(columns)
    rows = 0
    try:
        for df in lazy.collect_batches(chunk_size=batch_rows):
            check_field_lengths(df, label, first_row=rows)
            blank = df.select(pl.all_horizontal(pl.col(c).is_null() for c in columns).alias("blank"))["blank"]
            df = df.with_row_index(ROW, offset=FIRST_DATA_ROW + rows).with_columns(pl.col(ROW).cast(pl.Int64))
            if blank.any():
                df = df.with_columns(pl.when(blank).then(pl.lit("empty row")).alias(f"{ISSUE_PREFIX}blank_row"))
            rows += df.height
            yield df
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise IngestError(f"{label}: cannot read CSV file ({_first_line(exc)})") from exc
    if rows == 0:
        raise IngestError(f"{label}: no data rows")


def check_field_lengths(df: pl.DataFrame, label: str, first_row: int = 0) -> None:
    """Raise IngestError naming the first row of the first column holding a value over MAX_FIELD_CHARS (rows of df
    counted from first_row, or as its ROW column numbers them)."""
    texts = [c for c in df.columns if c != ROW]
    longest = df.select(pl.col(c).str.len_chars().max().fill_null(0) for c in texts).row(0, named=True)
    too_long = [c for c, n_chars in longest.items() if n_chars > MAX_FIELD_CHARS]
    if not too_long:
        return
    lengths = df[too_long[0]].str.len_chars()
    index = int((lengths > MAX_FIELD_CHARS).arg_true()[0])
    row = df[ROW][index] if ROW in df.columns else first_row + index + FIRST_DATA_ROW
    raise IngestError(
        f"{label} row {row}, column {too_long[0]!r}: value of {lengths[index]} characters "
        f"(the limit is {MAX_FIELD_CHARS})"
    )


def _int_expr(col: str) -> pl.Expr:
    text = pl.col(col)
    as_float = text.cast(pl.Float64, strict=False)
    integral = as_float.is_finite() & (as_float == as_float.floor()) & (as_float.abs() < _MAX_EXACT_FLOAT_INT)
    return pl.coalesce(text.cast(pl.Int64, strict=False), pl.when(integral).then(as_float.cast(pl.Int64)))


def _in_int32(value: pl.Expr) -> pl.Expr:
    return pl.when(value.is_between(INT32_MIN, INT32_MAX)).then(value)


def _int32_expr(col: str) -> pl.Expr:
    return _in_int32(_int_expr(col))


def _offset_expr(col: str) -> pl.Expr:
    value = _int_expr(col)
    return pl.when(value.abs() <= MAX_OFFSET_S).then(value)


def _float_expr(col: str) -> pl.Expr:
    as_float = pl.col(col).cast(pl.Float64, strict=False)
    return pl.when(as_float.is_finite()).then(as_float)


def _iso_datetime_expr(col: str) -> pl.Expr:
    text = pl.col(col).str.replace("T", " ", literal=True).str.replace(r"\.\d+$", "")
    return text.str.strptime(pl.Datetime("us"), TIME_FORMAT, strict=False)


PARSERS = {
    "int": (_int_expr, "an integer"),
    "int32": (_int32_expr, f"an integer from {INT32_MIN} to {INT32_MAX}"),
    "offset_s": (_offset_expr, f"an integer number of seconds from -{MAX_OFFSET_S} to {MAX_OFFSET_S}"),
    "float": (_float_expr, "a finite number"),
    "datetime": (lambda c: pl.col(c).str.strptime(pl.Datetime("us"), TIME_FORMAT, strict=False), TIME_FORMAT),
    "date": (lambda c: pl.col(c).str.strptime(pl.Date(), DATE_FORMAT, strict=False), DATE_FORMAT),
    "iso_datetime": (_iso_datetime_expr, "YYYY-MM-DD HH:MM:SS or YYYY-MM-DDTHH:MM:SS"),
}


# Integer parsers without the whole-float fallback (`3.0`): the same result wherever a value parses as an integer,
# so a column is parsed by them first and again in full only when some value did not parse.
FAST_PARSERS = {
    "int": lambda c: pl.col(c).cast(pl.Int64, strict=False),
    "int32": lambda c: _in_int32(pl.col(c).cast(pl.Int64, strict=False)),
}


def _parsed(df: pl.DataFrame, present: dict[str, str]) -> pl.DataFrame:
    """df with each present column parsed into `_parsed:<column>` (fast parser first where there is one)."""
    parsed = df.with_columns((FAST_PARSERS.get(k) or PARSERS[k][0])(c).alias(_PARSED + c) for c, k in present.items())
    fast = [c for c, k in present.items() if k in FAST_PARSERS]
    if not fast:
        return parsed
    failed = parsed.select((pl.col(c).is_not_null() & pl.col(_PARSED + c).is_null()).any().alias(c) for c in fast)
    redo = [c for c, bad in failed.row(0, named=True).items() if bad]
    return parsed.with_columns(PARSERS[present[c]][0](c).alias(_PARSED + c) for c in redo) if redo else parsed


def parse_columns(
    df: pl.DataFrame,
    kinds: dict[str, str],
    label: str,
    required: tuple[str, ...] = (),
    reject_required: bool = False,
) -> pl.DataFrame:
    """Parse text columns to `kinds`; a bad value is fatal in a required column (with reject_required: the row is
    flagged `unparsable_required`, for validation to drop), else nulled and flagged `unparsable_value`."""
    present = {c: k for c, k in kinds.items() if c in df.columns}
    if not present:
        return df
    parsed = _parsed(df, present)
    bad_exprs = {c: pl.col(c).is_not_null() & pl.col(_PARSED + c).is_null() for c in present}
    any_bad = parsed.select(e.any().alias(c) for c, e in bad_exprs.items()).row(0, named=True)
    flagged = [c for c, is_bad in any_bad.items() if is_bad and c not in required]
    bad_required = [c for c, is_bad in any_bad.items() if is_bad and c in required]
    if bad_required and not reject_required:
        col = bad_required[0]
        row, value = parsed.filter(bad_exprs[col]).select(ROW, col).row(0)
        expected = PARSERS[present[col]][1]
        raise IngestError(f"{label} row {row}, column {col!r}: cannot parse {clip(repr(value))} as {expected}")
    renamed = [pl.col(_PARSED + c).alias(c) for c in present]
    out = parsed.with_columns(renamed).drop([_PARSED + c for c in present])
    flags = []
    if flagged:
        flags.append(_bad_values_expr(flagged, bad_exprs, "unparsable_value"))
    if bad_required:
        expected = {c: f" (expected {PARSERS[present[c]][1]})" for c in bad_required}
        flags.append(_bad_values_expr(bad_required, bad_exprs, "unparsable_required", expected))
    return out.with_columns(parsed.select(flags).get_columns()) if flags else out


def _bad_values_expr(
    cols: list[str], bad_exprs: dict[str, pl.Expr], kind: str, notes: dict[str, str] | None = None
) -> pl.Expr:
    """The `_issue:<kind>` text of each row with a bad value: `column=value` for each (and its note, if any)."""
    texts = [pl.when(bad_exprs[c]).then(text(f"{c}=", pl.col(c), (notes or {}).get(c, ""))) for c in cols]
    detail = pl.concat_str(texts, separator="; ", ignore_nulls=True)
    any_bad = pl.any_horizontal(bad_exprs[c] for c in cols)
    return pl.when(any_bad).then(detail).alias(f"{ISSUE_PREFIX}{kind}")


def check_span(first_day: Any, last_day: Any, label: str) -> None:
    """Raise IngestError when the trace spans more than MAX_SPAN_DAYS days (a broken date somewhere)."""
    if first_day is not None and last_day is not None and (last_day - first_day).days > MAX_SPAN_DAYS:
        raise IngestError(
            f"{label}: times span {first_day} to {last_day}, more than {MAX_SPAN_DAYS} days (a broken date?)"
        )


def first_last_day(first_col: str, last_col: str) -> list[pl.Expr]:
    """Expressions for the first day of first_col and the last day of first_col or last_col (a day span)."""
    last = pl.max_horizontal(first_col, last_col).max().dt.date().alias("last_day")
    return [pl.col(first_col).min().dt.date().alias("first_day"), last]


def text(*parts: str | pl.Expr) -> pl.Expr:
    """Concatenate literal strings and expressions (nulls shown as `null`) into one text expression."""
    # NOTE: pl.format panics in polars 2.1.0 on frames filtered after with_row_index; concat_str does not.
    exprs = [pl.lit(p) if isinstance(p, str) else p.cast(pl.String).fill_null("null") for p in parts]
    return pl.concat_str(exprs)
