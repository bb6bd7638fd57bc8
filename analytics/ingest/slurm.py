"""Reader of Slurm accounting exports: `sacct --parsable2` text (`|` between fields), one job a row, its columns
named by its header line or, for an export without one (`--noheader`, as Open XDMoD takes it), by a field list.

Steps (`123.batch`, `123.extern`, `123.0`) are skipped; array elements (`123_4`) and heterogeneous job components
(`123+1`) are jobs; a job listed more than once (requeued and exported with `--duplicates`, or exported twice)
counts once, as its last row. A line that is not a job (blank, another number of fields, an unparsable job id or
submit time) is rejected with its reason for the data-quality report; a job without a partition is in VC `(none)`.
docs/formats.md has the column mapping, the field lists, the GPU forms and the state table.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from analytics import schema
from analytics.ingest.capacity import Capacity, daily_capacity, read_capacity
from analytics.ingest.gpus import gpu_count, gpu_types
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
    text,
)
from analytics.ingest.quality import READER_DROPPED_KINDS
from analytics.progress import Progress

# The export an administrator runs (README, docs/formats.md); `helios sync slurm` adds Cluster in front.
SACCT_FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "State", "ExitCode", "Submit", "Eligible",
    "Start", "End", "Elapsed", "ElapsedRaw", "Timelimit", "NNodes", "NCPUS", "ReqTRES", "AllocTRES", "NodeList", "QOS",
    "Priority",
)  # fmt: skip
# Open XDMoD's field lists, in its order (its Slurm shredder reads `sacct --noheader --parsable2` exports of them).
FIELD_LISTS: dict[str, tuple[str, ...]] = {
    "xdmod": (
        "JobID", "JobIDRaw", "Cluster", "Partition", "QOS", "Account", "Group", "GID", "User", "UID", "Submit",
        "Eligible", "Start", "End", "Elapsed", "ExitCode", "State", "NNodes", "NCPUS", "ReqCPUS", "ReqMem",
        "ReqTRES", "AllocTRES", "Timelimit", "NodeList", "JobName",
    ),
    "xdmod-legacy": (
        "JobID", "JobIDRaw", "Cluster", "Partition", "Account", "Group", "GID", "User", "UID", "Submit", "Eligible",
        "Start", "End", "Elapsed", "ExitCode", "State", "NNodes", "NCPUS", "ReqCPUS", "ReqMem", "ReqGRES", "ReqTRES",
        "Timelimit", "NodeList", "JobName",
    ),
}  # fmt: skip
# Where a job's GPUs are read, in this order: the first of these texts that names GPUs (analytics.ingest.gpus).
GPU_COLUMNS = ("AllocTRES", "AllocGRES", "ReqTRES", "ReqGRES", "Gres")
GRES_COLUMNS = ("AllocGRES", "ReqGRES", "Gres")  # GRES strings: empty means no GRES (so no GPU), not unknown
KNOWN = (
    *SACCT_FIELDS,
    "Cluster",
    "AllocCPUS",
    "ReqCPUS",
    "AllocNodes",
    "TimelimitRaw",
    *GRES_COLUMNS,
)  # read; others ignored
# Any name of a field list: a first line holding one is a header line, not a job.
FIELD_NAMES = frozenset(n.lower() for n in (*KNOWN, *(n for names in FIELD_LISTS.values() for n in names)))
NO_VC = "(none)"  # the VC of a job without a partition (or account, with --vc-from account)
NEVER_RAN = "None assigned"  # sacct's NodeList of a job that never had nodes
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
_ELAPSED = r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?$"


@dataclass(frozen=True)
class SlurmOptions:
    """How to read an export: the cluster name (given: it overrides the Cluster column), VC source, pseudonym salt,
    capacity file, and the field names of an export without a header line (empty: it has one)."""

    cluster: str = ""
    vc_from: str = "partition"
    anonymise_salt: str | None = None
    capacity: Path | None = None
    sacct_fields: tuple[str, ...] = ()


def sacct_fields(text: str) -> tuple[str, ...]:
    """The field names `--sacct-fields` gives: a list of FIELD_LISTS by name, or names separated by `,` or `|` as
    given to `sacct --format` (a `%width` suffix dropped); raises IngestError on an empty name."""
    named = FIELD_LISTS.get(text.strip().lower())
    if named:
        return named
    names = [re.sub(r"%-?\d*$", "", n.strip()) for n in re.split(r"[,|]", text.strip().strip(",|"))]
    if not all(names):
        lists = ", ".join(f"{k} ({len(v)} fields)" for k, v in FIELD_LISTS.items())
        raise IngestError(
            f"--sacct-fields {clip(repr(text), 80)}: expected {lists} or the field names of the export, separated by "
            "',' or '|' as given to sacct --format"
        )
    return tuple(names)


@dataclass
class Columns:
    """The export's columns, from its header line or a field list: each known column's position by its canonical
    sacct name."""

    label: str
    names: list[str]
    index: dict[str, int] = field(default_factory=dict)
    from_header: bool = True

    @property
    def first_data_row(self) -> int:
        """The file row of the first job: after the header line, else the first line."""
        return FIRST_DATA_ROW if self.from_header else 1

    @property
    def described(self) -> str:
        """What named the columns, for messages: `the header` or `the field list`."""
        return "the header" if self.from_header else "the field list"

    def has(self, *names: str) -> bool:
        """True when every named column is present."""
        return all(n in self.index for n in names)

    def first(self, *names: str) -> str | None:
        """The first of the named columns that is present."""
        return next((n for n in names if n in self.index), None)


def _named(label: str, names: list[str], from_header: bool) -> Columns:
    """Columns of these names (case-insensitive; the first of a name repeated counts)."""
    canonical = {k.lower(): k for k in KNOWN}
    cols = Columns(label, names, from_header=from_header)
    for i, name in enumerate(names):
        known = canonical.get(name.strip().lower())
        if known and known not in cols.index:
            cols.index[known] = i
    return cols


def _fields_of(line: str) -> list[str]:
    names = line.rstrip("\r\n").split("|")
    return names[:-1] if len(names) > 1 and names[-1] == "" else names  # `--parsable` ends lines with `|`


_A_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}")  # Submit, Start ...: on every job line, in no header


def is_header(line: str) -> bool:
    """Whether a first line names sacct fields (a header line) rather than holding a job: it has a field name and
    no time (a job named `state` or a user `user` leaves a job line a job line)."""
    fields = [name.strip() for name in _fields_of(line)]
    return any(f.lower() in FIELD_NAMES for f in fields) and not any(_A_TIME.match(f) for f in fields)


def _not_a_header(line: str, label: str) -> IngestError:
    """The error of an export whose first line holds a job and no field list was given: its field count, the lists
    of that length."""
    n_fields = len(_fields_of(line))
    fitting = [f"--sacct-fields {k}" for k, v in FIELD_LISTS.items() if len(v) == n_fields]
    hint = f" ({' or '.join(fitting)} has {n_fields} fields)" if fitting else ""
    return IngestError(
        f"{label}: the first line is not a sacct header but a row of {n_fields} fields ({clip(repr(line), 80)}): "
        "export with the header line (sacct without --noheader), or name the fields with helios ingest "
        f"--sacct-fields LIST|{'|'.join(FIELD_LISTS)}{hint}"
    )


def read_header(line: str | None, label: str, fields: tuple[str, ...] = ()) -> Columns:
    """The columns of an export from its first line: its header's names (case-insensitive; a trailing `|` of
    `--parsable` is allowed), or the given field names when it has no header (IngestError when it has one)."""
    if not line:
        raise IngestError(f"{label}: empty file (expected sacct --parsable2 output)")
    header = is_header(line)
    if fields and header:
        raise IngestError(
            f"{label}: the first line is a header ({clip(repr(line.strip()), 80)}); --sacct-fields names the fields "
            "of an export without one (sacct --noheader): leave it out"
        )
    if not fields and not header:
        raise _not_a_header(line, label)
    return _named(label, list(fields) or _fields_of(line), from_header=header)


def check_columns(cols: Columns, vc_from: str) -> None:
    """Raise IngestError naming what a usable export lacks: JobID, State, Submit, the VC column, a GPU column."""
    vc_col = "Account" if vc_from == "account" else "Partition"
    missing = [c for c in ("JobID", "State", "Submit", vc_col) if not cols.has(c)]
    if not cols.first(*GPU_COLUMNS):
        missing.append(f"a GPU column ({', '.join(GPU_COLUMNS[:-1])} or {GPU_COLUMNS[-1]})")
    if missing:
        raise IngestError(
            f"{cols.label}: missing required sacct column(s) {', '.join(missing)} (found in {cols.described}: "
            f"{show_names(cols.names)}); export with sacct --parsable2 --format={','.join(SACCT_FIELDS)}"
        )


def read_lines(path: Path, label: str) -> pl.DataFrame:
    """The file's lines as one text column `line` with file row numbers (the first line = row 1; a blank line is
    an empty text)."""
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
        raise IngestError(f"{label}: empty file (expected sacct --parsable2 output)") from exc
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise IngestError(f"{label}: cannot read ({clip(str(exc).splitlines()[0])})") from exc
    numbered = lines.with_row_index(ROW, offset=1).with_columns(pl.col(ROW).cast(pl.Int64))
    return numbered.with_columns(pl.col("line").fill_null("").str.strip_chars_end("\r"))


def _issue(kind: str, mask: pl.Expr, detail: pl.Expr) -> pl.Expr:
    return pl.when(mask).then(detail).alias(f"{ISSUE_PREFIX}{kind}")


_SHOWN_CHARS = 120  # of a rejected line, in its reason


def split_fields(lines: pl.DataFrame, cols: Columns) -> pl.DataFrame:
    """The known columns of the data lines as text (empty = null); a blank line and a line with another number of
    fields than the columns are kept without values, flagged `blank_row` and `wrong_field_count`."""
    n_fields = len(cols.names)
    body = lines.filter(pl.col(ROW) >= cols.first_data_row).with_columns(pl.col("line").str.split("|").alias("_f"))
    trailing = (pl.col("_f").list.len() == n_fields + 1) & (pl.col("_f").list.last() == "")
    counted = body.with_columns(pl.when(trailing).then(n_fields).otherwise(pl.col("_f").list.len()).alias("_n"))
    blank = pl.col("line").str.strip_chars() == ""
    wrong = ~blank & (pl.col("_n") != n_fields)
    cut = pl.when(pl.col("line").str.len_chars() > _SHOWN_CHARS).then(pl.lit("...")).otherwise(pl.lit(""))
    shown = pl.col("line").str.head(_SHOWN_CHARS)
    detail = text(pl.col("_n"), f" fields, {cols.described} has {n_fields}: ", shown, cut)
    good = ~blank & ~wrong
    values = [pl.when(good).then(pl.col("_f").list.get(i, null_on_oob=True)).alias(n) for n, i in cols.index.items()]
    out = counted.select(
        ROW, *values, _issue("blank_row", blank, pl.lit("empty row")), _issue("wrong_field_count", wrong, detail)
    )
    out = out.with_columns(pl.when(pl.col(c) != "").then(pl.col(c)).alias(c) for c in cols.index)
    check_field_lengths(out.select(ROW, *cols.index), cols.label)
    return out


def _is_step() -> pl.Expr:
    return pl.col("JobID").str.contains(".", literal=True)


def _job_id_parts() -> pl.Expr:
    return pl.col("JobID").str.extract_groups(_JOB_ID).alias("_id")


def _add_issue(jobs: pl.DataFrame, kind: str, mask: pl.Expr, detail: pl.Expr) -> pl.DataFrame:
    """jobs with rows where mask holds flagged `_issue:<kind>` (beside a flag of the same kind they may have)."""
    name = f"{ISSUE_PREFIX}{kind}"
    earlier = pl.col(name) if name in jobs.columns else pl.lit(None, pl.String)
    both = pl.concat_str([earlier, pl.when(mask).then(detail)], separator="; ", ignore_nulls=True)
    return jobs.with_columns(pl.when(mask | earlier.is_not_null()).then(both).alias(name))


def flag_job_ids(jobs: pl.DataFrame) -> pl.DataFrame:
    """jobs with each JobID that is not `N`, `N_i`, `N_[range]` or `N+k` flagged `unparsable_required`."""
    bad = pl.col("JobID").is_not_null() & pl.col("_id").struct.field("1").is_null()
    detail = text("JobID=", pl.col("JobID"), " (expected a Slurm job id: N, N_index, N_[range], N+offset or a step)")
    return _add_issue(jobs, "unparsable_required", bad, detail)


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
    """Parse times, ids and counts (a row with a bad required value is flagged for validation to reject, a bad
    optional value nulled and flagged)."""
    kinds = dict.fromkeys(_TIME_COLUMNS, "iso_datetime") | {
        "JobIDRaw": "int",
        "ElapsedRaw": "int",
        "NCPUS": "float",
        "AllocCPUS": "float",
        "ReqCPUS": "float",
        "NNodes": "int32",
        "AllocNodes": "int32",
        "Priority": "int",
    }
    required = ("Submit", "JobIDRaw")
    return parse_columns(raw.with_columns(_null_times(cols)), kinds, cols.label, required, reject_required=True)


def _col(cols: Columns, *names: str, dtype: pl.DataType | None = None) -> pl.Expr:
    found = cols.first(*names)
    return pl.col(found) if found else pl.lit(None, dtype=dtype or pl.String())


def never_started(cols: Columns) -> pl.Expr:
    """True for a job without a start: Start unknown, PENDING, no allocation or no nodes (a job cancelled while
    pending has its cancel time as Start and End, but an empty AllocTRES and NodeList `None assigned`)."""
    signs = [pl.col("Start").is_null() if cols.has("Start") else pl.lit(True), state_word("State") == schema.PENDING]
    if cols.has("AllocTRES"):
        signs.append(pl.col("AllocTRES").is_null())
    if cols.has("NodeList"):
        signs.append(pl.col("NodeList") == NEVER_RAN)
    return pl.any_horizontal(signs)


def _when_started(cols: Columns, name: str) -> pl.Expr:
    """A time column, null for a job that never started (whatever time sacct printed for it)."""
    return pl.when(~never_started(cols)).then(pl.col(name)) if cols.has(name) else pl.lit(None, schema.TIMESTAMP)


def _start(cols: Columns) -> pl.Expr:
    return _when_started(cols, "Start")


def _cluster(cols: Columns, given: str) -> pl.Expr:
    """The given cluster name, else the Cluster column, else DEFAULT_CLUSTER (a job's key is its cluster and id)."""
    return pl.lit(given) if given else pl.coalesce(_col(cols, "Cluster"), pl.lit(DEFAULT_CLUSTER))


def _duration(cols: Columns) -> pl.Expr:
    """ElapsedRaw, else Elapsed, else End - Start; 0 for a job that never started."""
    run_s = (pl.col("End") - _start(cols)).dt.total_seconds() if cols.has("End") else pl.lit(None, pl.Int64)
    raw = pl.col("ElapsedRaw") if cols.has("ElapsedRaw") else pl.lit(None, pl.Int64)
    shown = elapsed_s("Elapsed") if cols.has("Elapsed") else pl.lit(None, pl.Int64)
    return pl.when(never_started(cols)).then(0).otherwise(pl.coalesce(raw, shown, run_s))


def _queue(cols: Columns) -> pl.Expr:
    start = _start(cols)
    since_submit = (start - pl.col("Submit")).dt.total_seconds()
    if not cols.has("Eligible"):
        return since_submit
    eligible = pl.col("Eligible")
    usable = eligible.is_not_null() & (eligible >= pl.col("Submit")) & (eligible <= start)
    return pl.when(usable).then((start - eligible).dt.total_seconds()).otherwise(since_submit)


def _gpus(cols: Columns) -> pl.Expr:
    """The GPUs of the first GPU column (GPU_COLUMNS order) that names any; 0 when none does but one has a text or
    the export has a GRES column (an empty GRES string: no GRES); null when every GPU column is empty."""
    present = [c for c in GPU_COLUMNS if cols.has(c)]
    any_text = pl.any_horizontal(pl.col(c).is_not_null() for c in present) | pl.lit(bool(cols.first(*GRES_COLUMNS)))
    return pl.coalesce(*(gpu_count(c) for c in present), pl.when(any_text).then(0))


def _gpu_type(cols: Columns) -> pl.Expr:
    """The GPU types named by the first GPU column that names any, for a job with GPUs."""
    named = pl.coalesce(*(gpu_types(c) for c in GPU_COLUMNS if cols.has(c)))
    return pl.when(_gpus(cols) > 0).then(named)


def _vc(cols: Columns, vc_from: str) -> pl.Expr:
    """The job's partition (or account), the first of a pending job's list; NO_VC when it has none."""
    name = pl.col("Account" if vc_from == "account" else "Partition").str.split(",").list.first()
    return pl.when(name.is_not_null() & (name != "")).then(name).otherwise(pl.lit(NO_VC))


def _partition(cols: Columns) -> pl.Expr:
    """The job's partition, the first of a pending job's list; null when it has none."""
    name = _col(cols, "Partition").str.split(",").list.first()
    return pl.when(name != "").then(name)


def _timelimit_s(cols: Columns) -> pl.Expr:
    """Seconds of Timelimit (`[D-]HH:MM:SS`), else of TimelimitRaw (minutes); null for `Partition_Limit` and
    `UNLIMITED`."""
    shown = elapsed_s("Timelimit") if cols.has("Timelimit") else pl.lit(None, pl.Int64)
    raw_min = (
        pl.col("TimelimitRaw").cast(pl.Int64, strict=False) if cols.has("TimelimitRaw") else pl.lit(None, pl.Int64)
    )
    return pl.coalesce(shown, raw_min * 60)


def _job_name(cols: Columns, anonymise: bool) -> pl.Expr:
    name = pl.lit(None, pl.String) if anonymise or not cols.has("JobName") else pl.col("JobName")
    tag = pl.concat_str([pl.lit("["), pl.col("JobID"), pl.lit("]")])
    tagged = pl.concat_str([name, tag], separator=" ", ignore_nulls=True)
    return pl.when(plain_job()).then(name).otherwise(tagged)


def to_jobs(parsed: pl.DataFrame, cols: Columns, options: SlurmOptions) -> pl.DataFrame:
    """Canonical job columns from the parsed job rows (steps already left out), with the rows' issue flags."""
    job_id = pl.col("JobIDRaw") if cols.has("JobIDRaw") else derived_job_id()
    note = pl.when(never_started(cols)).then(pl.lit("no Start, no allocation or PENDING: never started"))
    return parsed.select(
        ROW,
        _cluster(cols, options.cluster).alias("cluster"),
        job_id.alias("job_id"),
        _col(cols, "User").alias("user"),
        _vc(cols, options.vc_from).alias("vc"),
        _job_name(cols, options.anonymise_salt is not None).alias("job_name"),
        _gpus(cols).alias("gpu_num"),
        _gpu_type(cols).alias("gpu_type"),
        _col(cols, "NCPUS", "AllocCPUS", "ReqCPUS", dtype=pl.Float64()).alias("cpu_num"),
        _col(cols, "NNodes", "AllocNodes", dtype=pl.Int32()).alias("node_num"),
        state_word("State").alias("state"),
        pl.col("Submit").alias("submit_time"),
        _start(cols).alias("start_time"),
        _when_started(cols, "End").alias("end_time"),
        _duration(cols).alias("duration"),
        _queue(cols).alias("queue"),
        _col(cols, "Account").alias("account"),
        _partition(cols).alias("partition"),
        _col(cols, "QOS").alias("qos"),
        _timelimit_s(cols).alias("timelimit_s"),
        _col(cols, "Priority", dtype=pl.Int64()).alias("priority"),
        note.alias(f"{ISSUE_PREFIX}never_started"),
        *[pl.col(c) for c in parsed.columns if c.startswith(ISSUE_PREFIX)],
    )


def supplied_columns(cols: Columns) -> tuple[str, ...]:
    """The canonical columns an export with these columns supplies."""
    optional = {
        "user": cols.has("User"),
        "job_name": cols.has("JobName"),
        "gpu_type": cols.first(*GPU_COLUMNS) is not None,
        "cpu_num": cols.first("NCPUS", "AllocCPUS", "ReqCPUS") is not None,
        "node_num": cols.first("NNodes", "AllocNodes") is not None,
        "start_time": cols.has("Start"),
        "end_time": cols.has("End"),
        "queue": cols.has("Start"),
        "account": cols.has("Account"),
        "partition": cols.has("Partition"),
        "qos": cols.has("QOS"),
        "timelimit_s": cols.first("Timelimit", "TimelimitRaw") is not None,
        "priority": cols.has("Priority"),
    }
    return tuple(c for c in schema.JOB_COLUMNS if optional.get(c, True))


def rejected(columns: list[str]) -> pl.Expr:
    """True for a row the reader rejected (flagged with a kind validation drops)."""
    names = [f"{ISSUE_PREFIX}{k}" for k in READER_DROPPED_KINDS]
    flags = [pl.col(n).is_not_null() for n in names if n in columns]
    return pl.any_horizontal(flags) if flags else pl.lit(False)


@dataclass(frozen=True)
class Export:
    """The jobs of one export (its rejected rows last, each with its reason) and what reading it found: steps
    skipped and earlier rows of a job superseded."""

    jobs: pl.DataFrame
    columns: Columns
    steps_skipped: int
    rows_superseded: int

    @property
    def accepted(self) -> pl.DataFrame:
        """The jobs without the rows the reader rejected."""
        return self.jobs.filter(~rejected(self.jobs.columns))


def read_export(path: Path, options: SlurmOptions) -> Export:
    """Read a sacct export into canonical jobs (state mapped, steps left out, each job's last row kept; the rows
    that are no jobs kept last, flagged with why)."""
    label = str(path)
    lines = read_lines(path, label)
    first = lines.filter(pl.col(ROW) == 1)["line"]
    cols = read_header(first[0] if first.len() else None, label, options.sacct_fields)
    check_columns(cols, options.vc_from)
    raw = split_fields(lines, cols)
    steps = raw.filter(_is_step() & pl.col("JobID").is_not_null())
    job_rows = raw.filter(~_is_step() | pl.col("JobID").is_null()).with_columns(_job_id_parts())
    jobs = to_jobs(flag_job_ids(parse_values(job_rows, cols)), cols, options)
    bad = rejected(jobs.columns)
    kept = jobs.filter(~bad)
    last = kept.unique(["cluster", "job_id"], keep="last", maintain_order=True)
    out = pl.concat([last, jobs.filter(bad)])
    if options.anonymise_salt is not None:
        out = out.with_columns(pseudonymise(out["user"], options.anonymise_salt))
    return Export(out, cols, steps.height, kept.height - last.height)


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
            "columns_from": "header line" if cols.from_header else "--sacct-fields",
            "gpus_from": [c for c in GPU_COLUMNS if cols.has(c)],
        },
        "notes": [
            "steps (N.batch, N.extern, N.0 ...) are not jobs; array elements and het components are",
            "a job listed more than once (requeued, exported twice) is counted once, as its last row",
            "state = the first word of State mapped by the table of docs/formats.md",
            "array elements and het components keep their Slurm id text in job_name, e.g. 'train [123_4]'",
            "a job that never started has no start_time, end_time and queue, and duration 0 (Slurm reports the "
            "time it was cancelled as its Start and End)",
            f"a job without a {options.vc_from} is in VC {NO_VC}",
            "GPUs: the first of AllocTRES, AllocGRES, ReqTRES, ReqGRES, Gres that names any (gres/gpu[:type]=N, "
            "gpu[:type]:N); gpu_type: the types it names",
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
            span = export.accepted.select(first_last_day("submit_time", "end_time")).row(0)
            check_span(*span, str(self.path))
            capacity = read_capacity(self.options.capacity) if self.options.capacity else None
        return Source(
            jobs=export.jobs,
            vc_gpus=capacity_rows(capacity, export.accepted),
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
