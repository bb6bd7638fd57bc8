"""Reader of any scheduler's job CSV through a column mapping: `--map submit=SubmitTime,gpus=ngpu,...`.

Each mapping names a schema column (or its short alias) and the CSV column holding it. Times are
`YYYY-MM-DD HH:MM:SS` (or with `T`) or, when every value of a column is a number, Unix epoch seconds; durations and
queues are seconds; states go through the Slurm state table (case-insensitive, first word).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from analytics import schema
from analytics.ingest.capacity import read_capacity
from analytics.ingest.parse import (
    ISSUE_PREFIX,
    ROW,
    IngestError,
    Source,
    check_span,
    first_last_day,
    parse_columns,
    read_header,
    read_text_csv,
    show_names,
)
from analytics.ingest.slurm import capacity_meta, capacity_rows, pseudonymise, state_word
from analytics.progress import Progress

DEFAULT_CLUSTER = "cluster"
ALIASES: dict[str, str] = {
    "id": "job_id",
    "name": "job_name",
    "gpus": "gpu_num",
    "cpus": "cpu_num",
    "nodes": "node_num",
    "submit": "submit_time",
    "start": "start_time",
    "end": "end_time",
}
TARGETS: tuple[str, ...] = schema.JOB_COLUMNS
REQUIRED: tuple[str, ...] = ("vc", "gpu_num", "submit_time")
TIMES = ("submit_time", "start_time", "end_time")
KINDS = {"job_id": "int", "gpu_num": "int32", "cpu_num": "float", "node_num": "int32", "duration": "float"}
KINDS |= {"queue": "float"}


def _field_name(name: str) -> str:
    field = ALIASES.get(name.strip(), name.strip())
    if field not in TARGETS:
        known = ", ".join([*TARGETS, *(f"{a} ({t})" for a, t in ALIASES.items())])
        raise IngestError(f"--map: unknown field {name.strip()!r} (expected one of {known})")
    return field


def parse_mapping(text: str) -> tuple[tuple[str, str], ...]:
    """`field=Column` pairs (comma- or newline-separated, `#` comments) as (schema column, CSV column) pairs."""
    pairs: dict[str, str] = {}
    for item in text.replace("\n", ",").split(","):
        item = item.split("#", 1)[0].strip()
        if not item:
            continue
        if "=" not in item:
            raise IngestError(f"--map: expected FIELD=COLUMN, got {item!r}")
        name, column = item.split("=", 1)
        field = _field_name(name)
        if field in pairs:
            raise IngestError(f"--map: {field} mapped twice ({pairs[field]!r} and {column.strip()!r})")
        pairs[field] = column.strip()
    return tuple(pairs.items())


def check_mapping(mapping: dict[str, str], header: list[str], label: str) -> None:
    """Raise IngestError for a missing required field, an unusable duration or a column not in the header."""
    missing = [f for f in REQUIRED if f not in mapping]
    if "duration" not in mapping and not {"start_time", "end_time"} <= set(mapping):
        missing.append("duration (or start and end)")
    if missing:
        raise IngestError(f"--map: no column for {', '.join(missing)} (give FIELD=COLUMN)")
    for field, column in mapping.items():
        if column not in header:
            raise IngestError(f"{label}: --map {field}={column}: no column {column!r} (found: {show_names(header)})")


def _time_kinds(text: pl.DataFrame, fields: list[str]) -> dict[str, str]:
    """Per time column: epoch seconds when every value is a number, else a date and time text."""
    numeric = text.select(
        (pl.col(f).is_null() | pl.col(f).cast(pl.Float64, strict=False).is_not_null()).all().alias(f) for f in fields
    )
    flags = numeric.row(0, named=True) if fields else {}
    return {f: "float" if flags[f] else "iso_datetime" for f in fields}


def _epoch(field: str) -> pl.Expr:
    return pl.from_epoch((pl.col(field) * 1_000_000).round().cast(pl.Int64), time_unit="us").alias(field)


def _seconds(later: str, earlier: str) -> pl.Expr:
    return (pl.col(later) - pl.col(earlier)).dt.total_seconds()


@dataclass(frozen=True)
class CsvOptions:
    """The column mapping, the cluster name when none is mapped, the pseudonym salt and the capacity file."""

    mapping: tuple[tuple[str, str], ...]
    cluster: str = DEFAULT_CLUSTER
    anonymise_salt: str | None = None
    capacity: Path | None = None


def read_mapped(path: Path, options: CsvOptions) -> tuple[pl.DataFrame, tuple[str, ...]]:
    """Read and parse the mapped columns into canonical jobs; also return the canonical columns supplied."""
    label = str(path)
    mapping = dict(options.mapping)
    check_mapping(mapping, read_header(path, label), label)
    required = tuple(mapping[f] for f in REQUIRED if f in mapping)
    text = read_text_csv(path, label, required, tuple(dict.fromkeys(mapping.values())))
    named = text.select(ROW, *[pl.col(c).alias(f) for f, c in mapping.items()], pl.col(f"^{ISSUE_PREFIX}.*$"))
    times = [f for f in TIMES if f in mapping]
    kinds = {f: k for f, k in KINDS.items() if f in mapping} | _time_kinds(named, times)
    parsed = parse_columns(named, kinds, label, required=("gpu_num", "submit_time", "duration", "job_id"))
    epochs = [_epoch(f) for f in times if kinds[f] == "float"]
    jobs = parsed.with_columns(epochs) if epochs else parsed
    return _complete(jobs, mapping, options), supplied_columns(mapping)


def supplied_columns(mapping: dict[str, str]) -> tuple[str, ...]:
    """The canonical columns a mapping supplies, read or derived (cluster, ids, duration; queue from start)."""
    derived = {"cluster", "job_id", "duration"} | ({"queue"} if "start_time" in mapping else set())
    return tuple(c for c in schema.JOB_COLUMNS if c in mapping or c in derived)


def _complete(jobs: pl.DataFrame, mapping: dict[str, str], options: CsvOptions) -> pl.DataFrame:
    """Fill what the mapping leaves out: cluster, row-order ids, duration (0 when never started), queue; map states;
    pseudonymise."""
    never_started = pl.col("start_time").is_null() if "start_time" in mapping else pl.lit(False)
    run_s = pl.when(never_started).then(0).otherwise(_seconds("end_time", "start_time"))
    filled = [
        pl.col("duration").round().cast(pl.Int64) if "duration" in mapping else run_s,
        pl.col("queue").round().cast(pl.Int64)
        if "queue" in mapping
        else (_seconds("start_time", "submit_time") if "start_time" in mapping else pl.lit(None, pl.Int64)),
    ]
    out = jobs.with_columns(
        pl.col("cluster") if "cluster" in mapping else pl.lit(options.cluster).alias("cluster"),
        pl.col("job_id") if "job_id" in mapping else (pl.col(ROW) - 1).alias("job_id"),
        filled[0].alias("duration"),
        filled[1].alias("queue"),
        pl.when(never_started).then(pl.lit("no start time: never started")).alias(f"{ISSUE_PREFIX}never_started"),
    )
    if "state" in mapping:
        out = out.with_columns(state_word("state").alias("state"))
    if options.anonymise_salt is not None and "user" in mapping:
        out = out.with_columns(pseudonymise(out["user"], options.anonymise_salt))
    return out


@dataclass
class MappedCsvInput:
    """A CSV file and how its columns map to the schema."""

    path: Path
    options: CsvOptions
    steps: int = 1

    def read(self, progress: Progress) -> Source:
        """Read the mapped columns (and the capacity file, if any) into one Source."""
        with progress.stage(f"reading {self.path.name}"):
            jobs, supplied = read_mapped(self.path, self.options)
            last = "end_time" if "end_time" in jobs.columns else "submit_time"
            check_span(*jobs.select(first_last_day("submit_time", last)).row(0), str(self.path))
            capacity = read_capacity(self.options.capacity) if self.options.capacity else None
        return Source(
            jobs=jobs,
            vc_gpus=capacity_rows(capacity, jobs),
            labels={c: str(self.path) for c in jobs["cluster"].drop_nulls().unique()},
            source_columns=supplied,
            meta=self._meta() | capacity_meta(capacity),
        )

    def _meta(self) -> dict[str, Any]:
        mapping = dict(self.options.mapping)
        return {
            "stable_job_ids": "job_id" in mapping,
            "column_map": mapping,
            "notes": [
                "columns as mapped by --map; job_id = the data row order when no id column is mapped",
                "duration = end - start and queue = start - submit when not mapped",
                "states through the Slurm state table (first word, case-insensitive)",
            ],
        }


def open_mapped_csv(path: Path, options: CsvOptions) -> MappedCsvInput:
    """Prepare a CSV ingest through a column mapping (raises IngestError when there is none)."""
    if not options.mapping:
        raise IngestError("--format csv needs --map FIELD=COLUMN,... (or --map-file)")
    return MappedCsvInput(path, options)
