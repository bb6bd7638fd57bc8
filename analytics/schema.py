"""The one canonical trace schema: column names, dtypes, units and allowed states.

Every other module refers to these names; nothing else spells them.
Times are the trace's naive wall clock (no time zone); durations and queue delays are whole seconds.
"""

from __future__ import annotations

import polars as pl

SCHEMA_VERSION = 1

TIME_UNIT = "us"
TIMESTAMP = pl.Datetime(TIME_UNIT)

# Jobs table: one row per job, Helios names and meanings.
JOB_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(),  # cluster name (Venus, Earth, ... or the dataset's own)
    "job_id": pl.Int64(),  # Slurm id (increasing in submit order per cluster) or the source's row order
    "user": pl.String(),  # user hash; null when the source has none (Philly)
    "vc": pl.String(),  # virtual cluster (partition)
    "job_name": pl.String(),  # nullable: Helios publishes no job names
    "gpu_num": pl.Int32(),  # GPUs requested; 0 = CPU job
    "gpu_type": pl.String(),  # the GPUs' type(s) where the source names them (`a100`, `a100,v100`); else null
    "cpu_num": pl.Float64(),  # CPU cores requested (fractional for Alibaba's cpu_milli/1000)
    "node_num": pl.Int32(),  # nodes; nullable
    "state": pl.String(),  # final state, one of STATES; null when unknown
    "submit_time": TIMESTAMP,
    "start_time": TIMESTAMP,  # nullable: never started or not recorded
    "end_time": TIMESTAMP,  # nullable
    "duration": pl.Int64(),  # seconds, end - start
    "queue": pl.Int64(),  # seconds, start - submit; nullable
    # The scheduler's view of a job, where the trace records it (Slurm: Account, Partition, QOS, Timelimit,
    # Priority); absent from the Helios, Philly and Alibaba traces.
    "account": pl.String(),  # the job's account (Slurm's fair-share and limits key)
    "partition": pl.String(),  # the partition it ran in (the first of a pending job's list)
    "qos": pl.String(),  # its quality of service
    "timelimit_s": pl.Int64(),  # its time limit in seconds; null = the partition's (Partition_Limit) or unlimited
    "priority": pl.Int64(),  # the priority the scheduler recorded for it
}
JOB_COLUMNS: tuple[str, ...] = tuple(JOB_SCHEMA)
JOB_REQUIRED_NON_NULL: tuple[str, ...] = ("cluster", "job_id", "vc", "gpu_num", "submit_time", "duration")
# Columns null by meaning on some rows (a CPU job or an untyped GPU has no GPU type): such a null is no missing value.
JOB_NULL_BY_MEANING: tuple[str, ...] = ("gpu_type", "timelimit_s")
SCHEDULER_COLUMNS: tuple[str, ...] = ("account", "partition", "qos", "timelimit_s", "priority")
# Job columns added after datasets were first written: a dataset ingested before lacks them (its files and its
# meta.json's null counts).
JOB_COLUMNS_ADDED: tuple[str, ...] = ("gpu_type", *SCHEDULER_COLUMNS)

# VC capacity table: GPUs of each VC per day.
WHOLE_CLUSTER_VC = "*"  # a capacity row for the whole cluster, not split by VC (when VCs share the nodes)
VC_GPU_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(),
    "vc": pl.String(),
    "date": pl.Date(),
    "gpus": pl.Int32(),
}

# Final states (the job ended). Every final state but COMPLETED and CANCELLED counts as failed in the study.
COMPLETED = "COMPLETED"
CANCELLED = "CANCELLED"
FAILED = "FAILED"
FINAL_STATES: tuple[str, ...] = (
    COMPLETED,
    CANCELLED,
    FAILED,
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
)
# Unfinished states (the job had not ended when the trace was cut): never failed nor completed, and left out of
# rates, durations and JCTs that need an end.
RUNNING = "RUNNING"
PENDING = "PENDING"
UNFINISHED_STATES: tuple[str, ...] = (RUNNING, PENDING, "SUSPENDED", "REQUEUED")
STATES: tuple[str, ...] = FINAL_STATES + UNFINISHED_STATES
STATE_GROUPS: tuple[str, ...] = (COMPLETED, CANCELLED, FAILED)  # the study's final-state groups
UNFINISHED = "UNFINISHED"  # the group of unfinished jobs, shown as its own category


def state_group(state: str | None) -> str | None:
    """The group of a state: COMPLETED, CANCELLED, FAILED (other final states), UNFINISHED, or None when unknown."""
    if state in (COMPLETED, CANCELLED):
        return state
    if state in FINAL_STATES:
        return FAILED
    if state in UNFINISHED_STATES:
        return UNFINISHED
    return None


GPUS_PER_NODE = 8

JOBS_FILE = "jobs.parquet"
JOBS_DIR = "jobs"  # a refreshable dataset's jobs instead: one Parquet file per submit month, `jobs/YYYY-MM.parquet`
VC_GPUS_FILE = "vc_gpus.parquet"
META_FILE = "meta.json"


def empty_vc_gpus() -> pl.DataFrame:
    """An empty VC capacity frame with the canonical schema."""
    return pl.DataFrame(schema=VC_GPU_SCHEMA)


def conform_jobs(df: pl.DataFrame) -> pl.DataFrame:
    """Select and cast the canonical job columns (missing optional columns become null) in schema order."""
    exprs = []
    for name, dtype in JOB_SCHEMA.items():
        if name in df.columns:
            exprs.append(pl.col(name).cast(dtype))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(exprs)


def with_job_columns(frame: pl.LazyFrame, names: list[str]) -> pl.LazyFrame:
    """frame (whose columns are names) with every job column it lacks added as nulls: the jobs of a dataset written
    before that column existed."""
    missing = [pl.lit(None, dtype=t).alias(c) for c, t in JOB_SCHEMA.items() if c not in names]
    return frame.with_columns(missing) if missing else frame


def conform_vc_gpus(df: pl.DataFrame) -> pl.DataFrame:
    """Select and cast the canonical VC capacity columns in schema order."""
    return df.select([pl.col(n).cast(t) for n, t in VC_GPU_SCHEMA.items()])


def check_identifier(name: str, allowed: tuple[str, ...] = JOB_COLUMNS) -> str:
    """Return name if it is a known schema column, else raise ValueError (guards SQL identifiers)."""
    if name not in allowed:
        raise ValueError(f"unknown column {name!r}; expected one of {', '.join(allowed)}")
    return name
