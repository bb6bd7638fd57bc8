"""Reader of Alibaba's GPU trace v2023: a pod list (`openb_pod_list_default.csv` or any published variant such as
`_gpushare20`, `_cpu050`, `_gpuspec10`) and `openb_node_list_gpu_node.csv`."""

from __future__ import annotations

import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath

import polars as pl

from analytics import schema
from analytics.ingest.archive import extract_members, member_path, open_zip
from analytics.ingest.parse import (
    INT32_MAX,
    ISSUE_PREFIX,
    ROW,
    TIME_FORMAT,
    IngestError,
    Source,
    check_span,
    first_last_day,
    parse_columns,
    read_header,
    read_text_csv,
    show_names,
)
from analytics.progress import Progress

CLUSTER = "Alibaba-openb"
POD_FILE = "openb_pod_list_default.csv"
POD_PATTERN = "openb_pod_list_*.csv"
TIME_COLUMNS = ("creation_time", "scheduled_time", "deletion_time")
NODE_FILE = "openb_node_list_gpu_node.csv"
DEFAULT_ORIGIN = "2023-01-01 00:00:00"
POD_REQUIRED = ("qos", "num_gpu", "creation_time", "scheduled_time", "deletion_time")
POD_OPTIONAL = ("name", "cpu_milli", "pod_phase")
POD_KINDS = {
    "num_gpu": "int32",
    "cpu_milli": "float",
    "creation_time": "offset_s",
    "scheduled_time": "offset_s",
    "deletion_time": "offset_s",
}
NODE_REQUIRED = ("gpu",)
PHASE_STATES = {
    "Succeeded": schema.COMPLETED,
    "Failed": schema.FAILED,
    "Running": schema.RUNNING,
    "Pending": schema.PENDING,
}
_NOT_IN_PODS = ("user", "node_num", "gpu_type", *schema.SCHEDULER_COLUMNS)
SOURCE_COLUMNS = tuple(c for c in schema.JOB_COLUMNS if c not in _NOT_IN_PODS)
OPTIONAL_SOURCE = {
    "job_name": "name",
    "cpu_num": "cpu_milli",
    "state": "pod_phase",
}  # canonical <- pod column


def supplied_columns(pod_columns: set[str]) -> tuple[str, ...]:
    """The canonical columns a pod list supplies, given which optional pod columns it has."""
    return tuple(c for c in SOURCE_COLUMNS if c not in OPTIONAL_SOURCE or OPTIONAL_SOURCE[c] in pod_columns)


def parse_origin(text: str) -> datetime:
    """Parse the --origin wall-clock time, raising IngestError when it is not `YYYY-MM-DD HH:MM:SS`."""
    try:
        return datetime.strptime(text, TIME_FORMAT)
    except ValueError as exc:
        raise IngestError(f"--origin {text!r}: expected YYYY-MM-DD HH:MM:SS") from exc


def _at(col: str, origin: datetime) -> pl.Expr:
    return pl.lit(origin) + pl.duration(seconds=pl.col(col))


def pods_to_jobs(pods: pl.DataFrame, origin: datetime) -> pl.DataFrame:
    """Map parsed pods to canonical job columns; a pod that never started runs 0 s and is flagged."""
    started = pl.col("scheduled_time").is_not_null()
    has = set(pods.columns)
    state = pl.col("pod_phase").replace(PHASE_STATES) if "pod_phase" in has else pl.lit(None, pl.String)
    cpu = pl.col("cpu_milli") / 1000 if "cpu_milli" in has else pl.lit(None, pl.Float64)
    name = pl.col("name") if "name" in has else pl.lit(None, pl.String)
    run_s = pl.col("deletion_time") - pl.col("scheduled_time")
    never_started = pl.lit("scheduled_time empty: duration set to 0")
    return pods.select(
        ROW,
        pl.lit(CLUSTER).alias("cluster"),
        (pl.col(ROW) - 1).alias("job_id"),
        pl.col("qos").alias("vc"),
        name.alias("job_name"),
        pl.col("num_gpu").alias("gpu_num"),
        cpu.alias("cpu_num"),
        state.alias("state"),
        _at("creation_time", origin).alias("submit_time"),
        _at("scheduled_time", origin).alias("start_time"),
        _at("deletion_time", origin).alias("end_time"),
        pl.when(started).then(run_s).otherwise(0).alias("duration"),
        (pl.col("scheduled_time") - pl.col("creation_time")).alias("queue"),
        pl.when(~started).then(never_started).alias(f"{ISSUE_PREFIX}never_started"),
        *[pl.col(c) for c in pods.columns if c.startswith(ISSUE_PREFIX)],
    )


def daily_capacity(total_gpus: int, first_day: object, last_day: object) -> pl.DataFrame:
    """One row per day under vc `*` holding the whole cluster's GPUs (the GPU nodes are not split by qos)."""
    if first_day is None:
        return schema.empty_vc_gpus()
    days = pl.date_range(first_day, last_day, interval="1d", eager=True)
    frame = pl.DataFrame({"date": days}).with_columns(
        pl.lit(CLUSTER).alias("cluster"),
        pl.lit(schema.WHOLE_CLUSTER_VC).alias("vc"),
        pl.lit(total_gpus).alias("gpus"),
    )
    return schema.conform_vc_gpus(frame)


def read_total_gpus(path: Path) -> int:
    """Sum the `gpu` column of the GPU node list."""
    label = str(path)
    text = read_text_csv(path, label, NODE_REQUIRED)
    nodes = parse_columns(text, {"gpu": "int32"}, label, required=NODE_REQUIRED)
    total = int(nodes["gpu"].cast(pl.Int64).sum())
    if not 0 <= total <= INT32_MAX:
        raise IngestError(f"{label}: column 'gpu' sums to {total} GPUs (expected 0 to {INT32_MAX})")
    return total


@dataclass
class AlibabaInput:
    """The pod list and GPU node list of an Alibaba openb trace folder, anchored at a nominal origin."""

    pod_path: Path
    node_path: Path | None  # None: no GPU node list, capacity unknown
    origin: datetime
    steps: int = 1

    def read(self, progress: Progress) -> Source:
        """Read pods and nodes into one Source (capacity spans the first submit day to the last end day)."""
        with progress.stage(f"reading {self.pod_path.name}"):
            label = str(self.pod_path)
            text = read_text_csv(self.pod_path, label, POD_REQUIRED, POD_OPTIONAL)
            jobs = pods_to_jobs(parse_columns(text, POD_KINDS, label, required=POD_REQUIRED), self.origin)
            total_gpus = read_total_gpus(self.node_path) if self.node_path else None
            span = jobs.select(first_last_day("submit_time", "end_time")).row(0)
            check_span(*span, label)
        capacity = daily_capacity(total_gpus, *span) if total_gpus is not None else schema.empty_vc_gpus()
        return Source(
            jobs=jobs,
            vc_gpus=capacity,
            labels={CLUSTER: label},
            source_columns=supplied_columns(set(text.columns)),
            meta=self._meta(total_gpus),
        )

    def _meta(self, total_gpus: int | None) -> dict[str, object]:
        no_nodes = [f"no {NODE_FILE} beside the pod list: GPU capacity unknown"] if total_gpus is None else []
        return {
            "origin": self.origin.strftime(TIME_FORMAT),
            "node_list": self.node_path.name if self.node_path else None,
            "total_gpus": total_gpus,
            "capacity_scope": "cluster",
            "notes": [
                f"times are seconds from trace start, anchored at the origin {self.origin:%Y-%m-%d %H:%M}",
                "vc = qos; gpu_num = num_gpu; cpu_num = cpu_milli / 1000; job_name = pod name; job_id = row",
                "pod_phase Succeeded -> COMPLETED, Failed -> FAILED, Running/Pending -> RUNNING/PENDING",
                "a pod never scheduled has start_time and queue null and duration 0 (flagged never_started)",
                "vc_gpus: vc '*' = whole-cluster GPU capacity (sum of the node list), not split by VC (qos)",
                *no_nodes,
            ],
        }


def check_time_columns(pod_path: Path) -> None:
    """Raise IngestError, in one sentence, when a pod list lacks the time columns the dashboard needs."""
    header = read_header(pod_path, str(pod_path))
    missing = [c for c in TIME_COLUMNS if c not in header]
    if missing:
        raise IngestError(
            f"{pod_path}: this pod list has no {', '.join(missing)} column(s) (it has {show_names(header)}), so its "
            "pods have no submit, start or end time to show; ingest a variant with creation, scheduled and deletion "
            f"times instead, such as {POD_FILE} or the gpushare, cpu and gpuspec variants"
        )


def find_pod_list(folder: Path) -> Path:
    """The pod list of a trace folder: the default one, else the only `openb_pod_list_*.csv` there."""
    if (folder / POD_FILE).is_file():
        return folder / POD_FILE
    found = sorted(folder.glob(POD_PATTERN))
    if len(found) == 1:
        return found[0]
    if not found:
        raise IngestError(f"{folder}: no pod list ({POD_PATTERN}) in this folder")
    names = show_names([p.name for p in found])
    raise IngestError(f"{folder}: {len(found)} pod lists ({names}) and no {POD_FILE}; ingest one by its file path")


def open_alibaba(path: Path, origin: str) -> AlibabaInput:
    """Prepare an Alibaba ingest from the trace folder (its default or only pod list) or one pod list file, with the
    GPU node list beside it when there is one (without it the GPU capacity is unknown)."""
    if path.is_dir():
        folder, pod_path = path, find_pod_list(path)
    elif path.is_file():
        folder, pod_path = path.parent, path
    else:
        raise IngestError(f"{path}: no such file or folder")
    check_time_columns(pod_path)
    node_path = folder / NODE_FILE
    return AlibabaInput(pod_path, node_path if node_path.is_file() else None, parse_origin(origin))


@contextmanager
def open_alibaba_source(path: Path, origin: str, max_member_bytes: int) -> Iterator[AlibabaInput]:
    """Open an Alibaba trace folder, pod list file or zip of them (its CSV members extracted to a temp folder)."""
    if not zipfile.is_zipfile(path):
        yield open_alibaba(path, origin)
        return
    with open_zip(path) as archive, tempfile.TemporaryDirectory(prefix="helios-alibaba-") as tmp:
        members = [n for n in archive.namelist() if PurePosixPath(n).name.startswith("openb_") and n.endswith(".csv")]
        extract_members(archive, members, Path(tmp), max_member_bytes, lambda n: f"{path}:{n}")
        folders = {(Path(tmp) / member_path(n, str(path))).parent for n in members}
        if len(folders) != 1:
            raise IngestError(f"{path}: expected the openb_*.csv files of one trace folder, found {len(folders)}")
        yield open_alibaba(folders.pop(), origin)
