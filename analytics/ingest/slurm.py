"""Reader of Slurm accounting exports: `sacct --parsable2` text (a header line, `|` between fields), one job a row.

Steps (`123.batch`, `123.extern`, `123.0`) are skipped; array elements (`123_4`) and heterogeneous job components
(`123+1`) are jobs; a job listed more than once (requeued and exported with `--duplicates`, or exported twice)
counts once, as its last row. docs/formats.md has the column mapping and the state table.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from analytics import schema
from analytics.ingest.capacity import Capacity, daily_capacity, read_capacity
from analytics.ingest.parse import (
    FIRST_DATA_ROW,
    ISSUE_PREFIX,
    ROW,
    IngestError,
    Source,
    check_field_lengths,
    check_span,
    clip,
    first_last_day,
    parse_columns,
    show_names,
)
from analytics.progress import Progress

# The export an administrator runs (README, docs/formats.md); `helios sync slurm` adds Cluster in front.
SACCT_FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "State", "ExitCode", "Submit", "Eligible",
    "Start", "End", "Elapsed", "ElapsedRaw", "Timelimit", "NNodes", "NCPUS", "ReqTRES", "AllocTRES", "NodeList", "QOS",
)  # fmt: skip
KNOWN = (*SACCT_FIELDS, "Cluster", "AllocCPUS", "ReqCPUS", "AllocNodes")  # the columns read; others are ignored
DEFAULT_CLUSTER = "slurm"
# sacct leaves out jobs whose eligible time is after --endtime (a job cancelled before its --begin time): look ahead.
SYNC_END = "now+7days"
VC_FROM = ("partition", "account")
# Slurm job state (its first word: `CANCELLED by 1234` is CANCELLED) -> the schema's state.
STATE_MAP: dict[str, str] = {
    "COMPLETED": schema.COMPLETED,
    "CANCELLED": schema.CANCELLED,
    "REVOKED": schema.CANCELLED,  # a federated sibling withdrawn because another cluster ran the job
    "FAILED": schema.FAILED,
    "TIMEOUT": "TIMEOUT",
    "OUT_OF_MEMORY": "OUT_OF_MEMORY",
    "NODE_FAIL": "NODE_FAIL",
    "PREEMPTED": "PREEMPTED",
    "BOOT_FAIL": "BOOT_FAIL",
    "DEADLINE": "DEADLINE",
    "RUNNING": schema.RUNNING,
    "COMPLETING": schema.RUNNING,
    "CONFIGURING": schema.RUNNING,
    "RESIZING": schema.RUNNING,
    "SIGNALING": schema.RUNNING,
    "STAGE_OUT": schema.RUNNING,
    "PENDING": schema.PENDING,
    "RESV_DEL_HOLD": schema.PENDING,
    "SUSPENDED": "SUSPENDED",
    "STOPPED": "SUSPENDED",
    "REQUEUED": "REQUEUED",
    "REQUEUE_FED": "REQUEUED",
    "REQUEUE_HOLD": "REQUEUED",
    "SPECIAL_EXIT": "REQUEUED",
}
_NO_TIME = ("Unknown", "None", "N/A", "")
_JOB_ID = r"^(\d+)(?:_(\d+)|_\[([^\]]*)\]|\+(\d+))?$"
# Without JobIDRaw, array elements and het components get ids above 2**61 (their text stays in job_name).
ARRAY_BIT, HET_BIT, INDEX_BITS = 1 << 62, 1 << 61, 24
PENDING_RANGE_INDEX = (1 << INDEX_BITS) - 1  # the not yet split elements of a pending array, `123_[4-9]`
_TRES_GPU = r"(?:^|,)gres/gpu=(\d+)(?:,|$)"
_TRES_TYPED_GPU = r"(?:^|,)gres/gpu:[^=,]+=(\d+)"
_ELAPSED = r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?$"


@dataclass(frozen=True)
class SlurmOptions:
    """How to read an export: the cluster name (given: it overrides the Cluster column), VC source, pseudonym salt,
    capacity file."""

    cluster: str = ""
    vc_from: str = "partition"
    anonymise_salt: str | None = None
    capacity: Path | None = None


@dataclass
class Columns:
    """The export's header: each known column's position by its canonical sacct name."""

    label: str
    names: list[str]
    index: dict[str, int] = field(default_factory=dict)

    def has(self, *names: str) -> bool:
        """True when every named column is present."""
        return all(n in self.index for n in names)

    def first(self, *names: str) -> str | None:
        """The first of the named columns that is present."""
        return next((n for n in names if n in self.index), None)


def read_header(line: str | None, label: str) -> Columns:
    """The columns of a sacct header line (case-insensitive names; a trailing `|` of `--parsable` is allowed)."""
    if not line:
        raise IngestError(f"{label}: empty file (expected sacct --parsable2 output with its header line)")
    names = line.rstrip("\r\n").split("|")
    if names and names[-1] == "":
        names = names[:-1]
    canonical = {k.lower(): k for k in KNOWN}
    cols = Columns(label, names)
    for i, name in enumerate(names):
        known = canonical.get(name.strip().lower())
        if known and known not in cols.index:
            cols.index[known] = i
    return cols


def check_columns(cols: Columns, vc_from: str) -> None:
    """Raise IngestError naming what a usable export lacks: JobID, State, Submit, the VC column, a TRES column."""
    vc_col = "Account" if vc_from == "account" else "Partition"
    missing = [c for c in ("JobID", "State", "Submit", vc_col) if not cols.has(c)]
    if not cols.first("AllocTRES", "ReqTRES"):
        missing.append("AllocTRES or ReqTRES")
    if missing:
        raise IngestError(
            f"{cols.label}: missing required sacct column(s) {', '.join(missing)} (found: {show_names(cols.names)}); "
            f"export with sacct --parsable2 --format={','.join(SACCT_FIELDS)}"
        )


def read_lines(path: Path, label: str) -> pl.DataFrame:
    """The file's lines as one text column `line` with file row numbers (header = row 1), blank lines dropped."""
    if not path.is_file():
        raise IngestError(f"{label}: no such file")
    try:
        lines = pl.read_csv(
            path,
            has_header=False,
            separator="\x1f",
            quote_char=None,
            infer_schema=False,
            new_columns=["line"],
            encoding="utf8-lossy",
        )
    except pl.exceptions.NoDataError as exc:
        raise IngestError(f"{label}: empty file (expected sacct --parsable2 output with its header line)") from exc
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise IngestError(f"{label}: cannot read ({clip(str(exc).splitlines()[0])})") from exc
    numbered = lines.with_row_index(ROW, offset=1).with_columns(pl.col(ROW).cast(pl.Int64))
    return numbered.filter(pl.col("line").is_not_null() & (pl.col("line").str.strip_chars() != ""))


def split_fields(lines: pl.DataFrame, cols: Columns) -> pl.DataFrame:
    """The known columns of the data lines as text (empty = null), failing on a line with the wrong field count."""
    n_fields = len(cols.names)
    body = lines.filter(pl.col(ROW) >= FIRST_DATA_ROW).with_columns(
        pl.col("line").str.strip_chars_end("\r").str.split("|").alias("_fields")
    )
    trailing = (pl.col("_fields").list.len() == n_fields + 1) & (pl.col("_fields").list.last() == "")
    counted = body.with_columns(pl.when(trailing).then(n_fields).otherwise(pl.col("_fields").list.len()).alias("_n"))
    bad = counted.filter(pl.col("_n") != n_fields)
    if bad.height:
        row, n, line = bad.select(ROW, "_n", "line").row(0)
        raise IngestError(
            f"{cols.label} row {row}: {n} fields, the header has {n_fields} ({clip(repr(line), 120)}); "
            "a '|' inside a value (e.g. a job name) breaks --parsable2 output"
        )
    values = [pl.col("_fields").list.get(i).alias(name) for name, i in cols.index.items()]
    out = counted.select(ROW, *values)
    texts = [pl.when(pl.col(c) != "").then(pl.col(c)).alias(c) for c in cols.index]
    out = out.with_columns(texts)
    check_field_lengths(out.select(list(cols.index)), cols.label)
    return out


def _is_step() -> pl.Expr:
    return pl.col("JobID").str.contains(".", literal=True)


def _job_id_parts() -> pl.Expr:
    return pl.col("JobID").str.extract_groups(_JOB_ID).alias("_id")


def check_job_ids(jobs: pl.DataFrame, label: str) -> None:
    """Raise IngestError at the first JobID that is not `N`, `N_i`, `N_[range]` or `N+k`."""
    bad = jobs.filter(pl.col("_id").struct.field("1").is_null())
    if bad.height:
        row, value = bad.select(ROW, "JobID").row(0)
        raise IngestError(
            f"{label} row {row}, column 'JobID': cannot parse {clip(repr(value))} as a Slurm job id "
            "(N, N_index, N_[range], N+offset or a step N.step)"
        )


def derived_job_id() -> pl.Expr:
    """A collision-free Int64 id from the JobID text: N; N_i and N_[range] with bit 62, N+k with bit 61."""
    part = pl.col("_id").struct
    base = part.field("1").cast(pl.Int64)
    shifted = base * (1 << INDEX_BITS)
    return (
        pl.when(part.field("2").is_not_null())
        .then(ARRAY_BIT + shifted + part.field("2").cast(pl.Int64))
        .when(part.field("3").is_not_null())
        .then(ARRAY_BIT + shifted + PENDING_RANGE_INDEX)
        .when(part.field("4").is_not_null())
        .then(HET_BIT + shifted + part.field("4").cast(pl.Int64))
        .otherwise(base)
    )


def plain_job() -> pl.Expr:
    """True for a JobID that is a plain number (not an array element or het component)."""
    part = pl.col("_id").struct
    return part.field("2").is_null() & part.field("3").is_null() & part.field("4").is_null()


def state_word(col: str) -> pl.Expr:
    """A state text mapped to the schema: its first word, upper-cased, through STATE_MAP (else kept, flagged later)."""
    word = pl.col(col).str.strip_chars().str.split(" ").list.first().str.strip_chars_end("+").str.to_uppercase()
    return word.replace(STATE_MAP)


def gpus_of(col: str) -> pl.Expr:
    """GPUs in a TRES text: `gres/gpu=N`, else the sum of typed `gres/gpu:TYPE=N`, else 0 (null for no text)."""
    text = pl.col(col)
    untyped = text.str.extract(_TRES_GPU, 1).cast(pl.Int64)
    typed = text.str.extract_all(_TRES_TYPED_GPU).list.eval(pl.element().str.extract(r"=(\d+)$", 1).cast(pl.Int64))
    return pl.when(text.is_not_null()).then(pl.coalesce(untyped, typed.list.sum(), pl.lit(0)))


def elapsed_s(col: str) -> pl.Expr:
    """Seconds of an Elapsed text `[D-][HH:]MM:SS` (null when it is not one)."""
    part = pl.col(col).str.extract_groups(_ELAPSED).struct
    days, hours = part.field("1").cast(pl.Int64).fill_null(0), part.field("2").cast(pl.Int64).fill_null(0)
    minutes, seconds = part.field("3").cast(pl.Int64), part.field("4").cast(pl.Int64)
    return days * 86_400 + hours * 3_600 + minutes * 60 + seconds


def pseudonym(user: str, salt: str) -> str:
    """A user name's salted SHA-256 pseudonym (`u-` and 12 hex digits), the same for the same salt."""
    return "u-" + hashlib.sha256(f"{salt}\0{user}".encode()).hexdigest()[:12]


def pseudonymise(users: pl.Series, salt: str) -> pl.Series:
    """Every user name replaced by its pseudonym (nulls stay null)."""
    names = users.drop_nulls().unique().to_list()
    return users.replace_strict(names, [pseudonym(n, salt) for n in names], default=None, return_dtype=pl.String)


_TIME_COLUMNS = ("Submit", "Eligible", "Start", "End")


def _null_times(cols: Columns) -> list[pl.Expr]:
    present = [c for c in _TIME_COLUMNS if cols.has(c)]
    return [pl.when(~pl.col(c).is_in(_NO_TIME)).then(pl.col(c)).alias(c) for c in present]


def parse_values(raw: pl.DataFrame, cols: Columns) -> pl.DataFrame:
    """Parse times, ids and counts (bad required values are fatal, bad optional ones nulled and flagged)."""
    kinds = dict.fromkeys(_TIME_COLUMNS, "iso_datetime") | {
        "JobIDRaw": "int",
        "ElapsedRaw": "int",
        "NCPUS": "float",
        "AllocCPUS": "float",
        "ReqCPUS": "float",
        "NNodes": "int32",
        "AllocNodes": "int32",
    }
    required = ("Submit", "JobIDRaw")
    return parse_columns(raw.with_columns(_null_times(cols)), kinds, cols.label, required=required)


def _col(cols: Columns, *names: str, dtype: pl.DataType | None = None) -> pl.Expr:
    found = cols.first(*names)
    return pl.col(found) if found else pl.lit(None, dtype=dtype or pl.String())


def never_started(cols: Columns) -> pl.Expr:
    """True for a job without a start: Start unknown, or no allocation (a job cancelled while pending has its
    cancel time as Start but an empty AllocTRES)."""
    unknown = pl.col("Start").is_null() if cols.has("Start") else pl.lit(True)
    return unknown | pl.col("AllocTRES").is_null() if cols.has("AllocTRES") else unknown


def _start(cols: Columns) -> pl.Expr:
    return pl.when(~never_started(cols)).then(pl.col("Start")) if cols.has("Start") else pl.lit(None, schema.TIMESTAMP)


def _cluster(cols: Columns, given: str) -> pl.Expr:
    """The given cluster name, else the Cluster column, else DEFAULT_CLUSTER (a job's key is its cluster and id)."""
    return pl.lit(given) if given else pl.coalesce(_col(cols, "Cluster"), pl.lit(DEFAULT_CLUSTER))


def _duration(cols: Columns) -> pl.Expr:
    run_s = (pl.col("End") - _start(cols)).dt.total_seconds() if cols.has("End") else pl.lit(None, pl.Int64)
    raw = pl.col("ElapsedRaw") if cols.has("ElapsedRaw") else pl.lit(None, pl.Int64)
    text = elapsed_s("Elapsed") if cols.has("Elapsed") else pl.lit(None, pl.Int64)
    return pl.coalesce(raw, text, run_s, pl.when(never_started(cols)).then(0))


def _queue(cols: Columns) -> pl.Expr:
    start = _start(cols)
    since_submit = (start - pl.col("Submit")).dt.total_seconds()
    if not cols.has("Eligible"):
        return since_submit
    eligible = pl.col("Eligible")
    usable = eligible.is_not_null() & (eligible >= pl.col("Submit")) & (eligible <= start)
    return pl.when(usable).then((start - eligible).dt.total_seconds()).otherwise(since_submit)


def _gpus(cols: Columns) -> pl.Expr:
    alloc = gpus_of("AllocTRES") if cols.has("AllocTRES") else pl.lit(None, pl.Int64)
    req = gpus_of("ReqTRES") if cols.has("ReqTRES") else pl.lit(None, pl.Int64)
    return pl.coalesce(alloc, req)


def _job_name(cols: Columns, anonymise: bool) -> pl.Expr:
    name = pl.lit(None, pl.String) if anonymise or not cols.has("JobName") else pl.col("JobName")
    tag = pl.concat_str([pl.lit("["), pl.col("JobID"), pl.lit("]")])
    tagged = pl.concat_str([name, tag], separator=" ", ignore_nulls=True)
    return pl.when(plain_job()).then(name).otherwise(tagged)


def to_jobs(parsed: pl.DataFrame, cols: Columns, options: SlurmOptions) -> pl.DataFrame:
    """Canonical job columns from the parsed job rows (steps already left out)."""
    vc_col = "Account" if options.vc_from == "account" else "Partition"
    job_id = pl.col("JobIDRaw") if cols.has("JobIDRaw") else derived_job_id()
    note = pl.when(never_started(cols)).then(pl.lit("no Start or no allocation: never started"))
    return parsed.select(
        ROW,
        _cluster(cols, options.cluster).alias("cluster"),
        job_id.alias("job_id"),
        _col(cols, "User").alias("user"),
        pl.col(vc_col).str.split(",").list.first().alias("vc"),
        _job_name(cols, options.anonymise_salt is not None).alias("job_name"),
        _gpus(cols).alias("gpu_num"),
        _col(cols, "NCPUS", "AllocCPUS", "ReqCPUS", dtype=pl.Float64()).alias("cpu_num"),
        _col(cols, "NNodes", "AllocNodes", dtype=pl.Int32()).alias("node_num"),
        state_word("State").alias("state"),
        pl.col("Submit").alias("submit_time"),
        _start(cols).alias("start_time"),
        _col(cols, "End", dtype=schema.TIMESTAMP).alias("end_time"),
        _duration(cols).alias("duration"),
        _queue(cols).alias("queue"),
        note.alias(f"{ISSUE_PREFIX}never_started"),
        *[pl.col(c) for c in parsed.columns if c.startswith(ISSUE_PREFIX)],
    )


def supplied_columns(cols: Columns) -> tuple[str, ...]:
    """The canonical columns an export with these columns supplies."""
    optional = {
        "user": cols.has("User"),
        "job_name": cols.has("JobName"),
        "cpu_num": cols.first("NCPUS", "AllocCPUS", "ReqCPUS") is not None,
        "node_num": cols.first("NNodes", "AllocNodes") is not None,
        "start_time": cols.has("Start"),
        "end_time": cols.has("End"),
        "queue": cols.has("Start"),
    }
    return tuple(c for c in schema.JOB_COLUMNS if optional.get(c, True))


@dataclass(frozen=True)
class Export:
    """The jobs of one export and what reading it found: steps skipped and earlier rows of a job superseded."""

    jobs: pl.DataFrame
    columns: Columns
    steps_skipped: int
    rows_superseded: int


def read_export(path: Path, options: SlurmOptions) -> Export:
    """Read a sacct export into canonical jobs (state mapped, steps left out, each job's last row kept)."""
    label = str(path)
    lines = read_lines(path, label)
    header = lines.filter(pl.col(ROW) == 1)["line"]
    cols = read_header(header[0] if header.len() else None, label)
    check_columns(cols, options.vc_from)
    raw = split_fields(lines, cols)
    steps = raw.filter(_is_step() & pl.col("JobID").is_not_null())
    job_rows = raw.filter(~_is_step() | pl.col("JobID").is_null()).with_columns(_job_id_parts())
    check_job_ids(job_rows, label)
    jobs = to_jobs(parse_values(job_rows, cols), cols, options)
    last = jobs.unique(["cluster", "job_id"], keep="last", maintain_order=True)
    if options.anonymise_salt is not None:
        last = last.with_columns(pseudonymise(last["user"], options.anonymise_salt))
    return Export(last, cols, steps.height, jobs.height - last.height)


def capacity_rows(capacity: Capacity | None, jobs: pl.DataFrame) -> pl.DataFrame:
    """Daily capacity rows of every cluster of jobs over their days (first submit to last end), none without one."""
    if capacity is None:
        return schema.empty_vc_gpus()
    first_day, last_day = jobs.select(first_last_day("submit_time", "end_time")).row(0)
    frames = [daily_capacity(capacity, c, first_day, last_day) for c in jobs["cluster"].unique().sort()]
    return pl.concat(frames) if frames else schema.empty_vc_gpus()


def capacity_meta(capacity: Capacity | None) -> dict[str, Any]:
    """meta.json facts about the capacity: its source, GPUs per node, and the views disabled without it."""
    if capacity is None:
        return {"capacity_source": None}
    facts: dict[str, Any] = {"capacity_source": capacity.source}
    if capacity.gpus_per_node:
        facts["gpus_per_node"] = capacity.gpus_per_node
    return facts


def export_meta(export: Export, options: SlurmOptions) -> dict[str, Any]:
    """meta.json facts of a Slurm export: how ids, VCs, users, durations and queues were read."""
    cols = export.columns
    id_source = "JobIDRaw" if cols.has("JobIDRaw") else "JobID (array and het ids above 2**61)"
    queue = "Start - Eligible (Start - Submit when Eligible is unknown)" if cols.has("Eligible") else "Start - Submit"
    return {
        "stable_job_ids": True,
        "slurm": {
            "steps_skipped": export.steps_skipped,
            "rows_superseded": export.rows_superseded,
            "job_id_from": id_source,
            "vc_from": options.vc_from,
            "duration_from": cols.first("ElapsedRaw", "Elapsed") or "End - Start",
            "queue_from": queue,
            "users": "pseudonymised (salted SHA-256)" if options.anonymise_salt is not None else "as exported",
            "columns": cols.names,
        },
        "notes": [
            "steps (N.batch, N.extern, N.0 ...) are not jobs; array elements and het components are",
            "a job listed more than once (requeued, exported twice) is counted once, as its last row",
            "state = the first word of State mapped by the table of docs/formats.md",
            "array elements and het components keep their Slurm id text in job_name, e.g. 'train [123_4]'",
            "a job cancelled before it started has no start_time and queue (Slurm reports its cancel time as Start)",
        ],
    }


@dataclass
class SlurmInput:
    """A sacct export and how to read it."""

    path: Path
    options: SlurmOptions
    steps: int = 1

    def read(self, progress: Progress) -> Source:
        """Read the export (and the capacity file, if any) into one Source."""
        with progress.stage(f"reading {self.path.name}"):
            export = read_export(self.path, self.options)
            span = export.jobs.select(first_last_day("submit_time", "end_time")).row(0)
            check_span(*span, str(self.path))
            capacity = read_capacity(self.options.capacity) if self.options.capacity else None
        return Source(
            jobs=export.jobs,
            vc_gpus=capacity_rows(capacity, export.jobs),
            labels={c: str(self.path) for c in export.jobs["cluster"].unique()},
            source_columns=supplied_columns(export.columns),
            meta=export_meta(export, self.options) | capacity_meta(capacity),
        )


def open_slurm(path: Path, options: SlurmOptions) -> SlurmInput:
    """Prepare a Slurm ingest of the export at path."""
    if options.vc_from not in VC_FROM:
        raise IngestError(f"--vc-from must be one of {', '.join(VC_FROM)}, got {options.vc_from!r}")
    return SlurmInput(path, options)


def sacct_command(start: str, end: str = SYNC_END, fields: tuple[str, ...] = ("Cluster", *SACCT_FIELDS)) -> list[str]:
    """The sacct command line of a refresh: every user's jobs (no steps) active between start and end."""
    return [
        "sacct",
        "--allusers",
        "--allocations",
        "--parsable2",
        f"--starttime={start}",
        f"--endtime={end}",
        f"--format={','.join(fields)}",
    ]
