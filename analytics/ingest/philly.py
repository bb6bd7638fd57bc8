"""Reader of the Philly GPU job list (timestamp, duration, num_gpus, cluster) and its VC node table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analytics import schema
from analytics.ingest.parse import (
    INT32_MAX,
    ROW,
    IngestError,
    Source,
    check_span,
    first_last_day,
    parse_columns,
    read_text_csv,
)
from analytics.progress import Progress

CLUSTER = "Philly"
NODES_FILE = "philly_vc_nodes.csv"
JOB_REQUIRED = ("timestamp", "duration", "num_gpus", "cluster")
JOB_KINDS = {"timestamp": "datetime", "duration": "int", "num_gpus": "int32"}
MAX_VC_NODES = INT32_MAX // schema.GPUS_PER_NODE
NODES_REQUIRED = ("vc", "node num")
SOURCE_COLUMNS = ("cluster", "job_id", "vc", "gpu_num", "submit_time", "duration")


def read_jobs(path: Path) -> pl.DataFrame:
    """Read the Philly job list: cluster `Philly`, VC from `cluster`, job_id = 1-based data row order."""
    label = str(path)
    parsed = parse_columns(read_text_csv(path, label, JOB_REQUIRED), JOB_KINDS, label, required=JOB_REQUIRED)
    return parsed.rename({"timestamp": "submit_time", "num_gpus": "gpu_num", "cluster": "vc"}).with_columns(
        pl.lit(CLUSTER).alias("cluster"), (pl.col(ROW) - 1).alias("job_id")
    )


def read_vc_nodes(path: Path) -> pl.DataFrame:
    """Read the VC node table (columns `vc`, `node num`) as VC -> node count."""
    label = str(path)
    text = read_text_csv(path, label, NODES_REQUIRED)
    parsed = parse_columns(text, {"node num": "int"}, label, required=NODES_REQUIRED)
    too_big = parsed.filter(pl.col("node num").abs() > MAX_VC_NODES)
    if too_big.height:
        row, nodes = too_big.select(ROW, "node num").row(0)
        raise IngestError(f"{label} row {row}, column 'node num': {nodes} nodes is more than {MAX_VC_NODES}")
    return parsed.select("vc", pl.col("node num").alias("nodes"))


def daily_capacity(nodes: pl.DataFrame, first_day: object, last_day: object) -> pl.DataFrame:
    """One capacity row per VC per day from first_day to last_day, with nodes x 8 GPUs."""
    if first_day is None or nodes.height == 0:
        return schema.empty_vc_gpus()
    days = pl.DataFrame({"date": pl.date_range(first_day, last_day, interval="1d", eager=True)})
    gpus = nodes.select("vc", (pl.col("nodes") * schema.GPUS_PER_NODE).alias("gpus"))
    return schema.conform_vc_gpus(gpus.join(days, how="cross").with_columns(pl.lit(CLUSTER).alias("cluster")))


def default_vc_nodes(jobs_path: Path) -> Path | None:
    """The node table beside the job file, when present."""
    candidate = jobs_path.parent / NODES_FILE
    return candidate if candidate.is_file() else None


@dataclass
class PhillyInput:
    """A Philly job file and its optional VC node table."""

    jobs_path: Path
    nodes_path: Path | None
    steps: int = 1

    def read(self, progress: Progress) -> Source:
        """Read jobs and node table into one Source (capacity spans the submit dates of the trace)."""
        if not self.jobs_path.is_file():
            raise IngestError(f"{self.jobs_path}: no such file")
        with progress.stage(f"reading {self.jobs_path.name}"):
            jobs = read_jobs(self.jobs_path)
            no_nodes = pl.DataFrame(schema={"vc": pl.String})
            nodes = read_vc_nodes(self.nodes_path) if self.nodes_path else no_nodes
            span = jobs.select(first_last_day("submit_time", "submit_time")).row(0)
            check_span(*span, str(self.jobs_path))
        return Source(
            jobs=jobs,
            vc_gpus=daily_capacity(nodes, *span),
            labels={CLUSTER: str(self.jobs_path)},
            source_columns=SOURCE_COLUMNS,
            meta={
                "vc_nodes": str(self.nodes_path) if self.nodes_path else None,
                "gpus_per_node": schema.GPUS_PER_NODE,
                "notes": [
                    "job_id = 1-based data row order of the job file; cluster = 'Philly'; vc = its 'cluster'",
                    "user, state, start_time, end_time and queue are not in the source and stay null",
                    "vc_gpus: node count x 8 GPUs for every day from the first to the last submit date",
                ],
            },
        )


def open_philly(path: Path, vc_nodes: Path | None) -> PhillyInput:
    """Prepare a Philly ingest: the job file and the node table given (or found beside it)."""
    return PhillyInput(path, vc_nodes or default_vc_nodes(path))
