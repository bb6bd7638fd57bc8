"""Reader of the published Helios trace: `data.zip` or its unpacked folder, one `<Cluster>/` per cluster."""

from __future__ import annotations

import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import polars as pl

from analytics import schema
from analytics.ingest.archive import extract_members, member_path, open_zip
from analytics.ingest.parse import (
    IngestError,
    Source,
    parse_columns,
    read_header,
    read_text_batches,
    read_text_csv,
    text_columns,
)
from analytics.progress import Progress

LOG_FILE = "cluster_log.csv"
GPU_FILE = "cluster_gpu_number.csv"
LOG_REQUIRED = ("job_id", "vc", "gpu_num", "submit_time", "duration")
LOG_OPTIONAL = ("user", "cpu_num", "node_num", "state", "start_time", "end_time", "queue")
# The published columns, in their order (no cluster: the folder names it; no job names, no GPU types).
LOG_COLUMNS = (
    "job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time", "start_time", "end_time",
    "duration", "queue",
)  # fmt: skip
LOG_KINDS = {
    "job_id": "int",
    "gpu_num": "int32",
    "cpu_num": "float",
    "node_num": "int32",
    "submit_time": "datetime",
    "start_time": "datetime",
    "end_time": "datetime",
    "duration": "int",
    "queue": "int",
}
TOTAL_COLUMN = "total"
_IGNORED_TOP = "__MACOSX"


def find_cluster_dirs(log_paths: list[PurePosixPath], root_name: str, label: str) -> dict[str, PurePosixPath]:
    """Map cluster name -> folder from the `cluster_log.csv` paths found (at most two folders deep)."""
    found: dict[str, PurePosixPath] = {}
    for path in log_paths:
        if path.name != LOG_FILE or len(path.parts) > 3 or path.parts[0] == _IGNORED_TOP:
            continue
        cluster = path.parent.name or root_name
        if cluster in found:
            raise IngestError(f"{label}: cluster {cluster!r} twice ({found[cluster]} and {path.parent})")
        found[cluster] = path.parent
    if not found:
        raise IngestError(f"{label}: no <Cluster>/{LOG_FILE} found (expected Helios data.zip or its folder)")
    return found


def choose_clusters(found: dict[str, PurePosixPath], wanted: list[str] | None, label: str) -> list[str]:
    """The clusters to read, sorted: all found or those requested, raising IngestError for unknown ones."""
    if not wanted:
        return sorted(found)
    unknown = [c for c in wanted if c not in found]
    if unknown:
        available = ", ".join(sorted(found))
        raise IngestError(f"{label}: cluster(s) {', '.join(unknown)} not found (available: {available})")
    return sorted(set(wanted))  # in the dataset's order: each cluster's jobs are written as they are read


def read_cluster_log(path: Path, label: str, cluster: str) -> pl.DataFrame:
    """Read and parse one `cluster_log.csv` into canonical columns (state as given) plus row numbers, a batch of
    rows at a time (only one batch is ever held as text)."""
    batches = read_text_batches(path, label, LOG_REQUIRED, LOG_OPTIONAL)
    parsed = [parse_columns(text, LOG_KINDS, label, required=LOG_REQUIRED) for text in batches]
    return pl.concat(parsed, how="diagonal_relaxed", rechunk=False).with_columns(pl.lit(cluster).alias("cluster"))


def read_gpu_number(path: Path, label: str, cluster: str) -> pl.DataFrame:
    """Turn one wide `cluster_gpu_number.csv` (date, one column per VC, total) into long capacity rows."""
    header = read_header(path, label)
    vcs = tuple(c for c in header if c not in ("date", TOTAL_COLUMN))
    text = read_text_csv(path, label, ("date", *vcs))
    kinds = {"date": "date"} | dict.fromkeys(vcs, "int32")
    wide = parse_columns(text, kinds, label, required=tuple(kinds))
    long = wide.unpivot(index="date", on=list(vcs), variable_name="vc", value_name="gpus")
    return long.drop_nulls(["date", "gpus"]).with_columns(pl.lit(cluster).alias("cluster"))


@dataclass
class HeliosInput:
    """An opened Helios source: where each chosen cluster's files are, and how to name them in messages."""

    root: Path
    dirs: dict[str, PurePosixPath]
    clusters: list[str]
    display: str
    archive: zipfile.ZipFile | None
    max_member_bytes: int

    @property
    def steps(self) -> int:
        """Number of progress stages `read` reports (one per cluster)."""
        return len(self.clusters)

    def file_label(self, cluster: str, name: str) -> str:
        """How a cluster's file is named in messages: `<source>:<member>` for zips, else its path."""
        rel = self.dirs[cluster] / name
        return f"{self.display}:{rel}" if self.archive else str(self.root / rel)

    def _local(self, cluster: str, name: str) -> Path:
        rel = self.dirs[cluster] / name
        if self.archive is None:
            return self.root / rel
        member = rel.as_posix()
        if member not in self.archive.NameToInfo:
            raise IngestError(f"{self.display}: member {member} is missing")
        limit = self.max_member_bytes
        extract_members(self.archive, [member], self.root, limit, lambda n: f"{self.display}:{n}")
        return self.root / rel

    def read(self, progress: Progress) -> Source:
        """Read every chosen cluster's capacity file now, and its job log as the Source's part of that cluster, read
        in its own progress stage when the part is taken (one cluster's jobs in memory at a time)."""
        logs = {c: self._local(c, LOG_FILE) for c in self.clusters}
        caps = [read_gpu_number(self._local(c, GPU_FILE), self.file_label(c, GPU_FILE), c) for c in self.clusters]
        present = {"cluster"}
        for cluster, path in logs.items():
            present.update(text_columns(path, self.file_label(cluster, LOG_FILE), LOG_REQUIRED, LOG_OPTIONAL))
        return Source(
            jobs=self._parts(logs, progress),
            vc_gpus=schema.conform_vc_gpus(pl.concat(caps)),
            labels={c: self.file_label(c, LOG_FILE) for c in self.clusters},
            source_columns=tuple(c for c in schema.JOB_COLUMNS if c in present),
        )

    def _parts(self, logs: dict[str, Path], progress: Progress) -> Iterator[pl.DataFrame]:
        for cluster, path in logs.items():
            with progress.stage(f"reading {cluster}"):
                yield read_cluster_log(path, self.file_label(cluster, LOG_FILE), cluster)


def _folder_logs(root: Path) -> list[PurePosixPath]:
    paths = [root / LOG_FILE, *root.glob(f"*/{LOG_FILE}"), *root.glob(f"*/*/{LOG_FILE}")]
    return [PurePosixPath(p.relative_to(root).as_posix()) for p in paths if p.is_file()]


@contextmanager
def open_helios(path: Path, clusters: list[str] | None, max_member_bytes: int) -> Iterator[HeliosInput]:
    """Open a Helios folder or zip and choose its clusters; a zip's members are extracted to a temp folder."""
    if path.is_dir():
        dirs = find_cluster_dirs(_folder_logs(path), path.resolve().name, str(path))
        chosen = choose_clusters(dirs, clusters, str(path))
        yield HeliosInput(path, dirs, chosen, str(path), None, max_member_bytes)
        return
    if not path.is_file():
        raise IngestError(f"{path}: no such file or folder")
    with open_zip(path) as archive, tempfile.TemporaryDirectory(prefix="helios-ingest-") as tmp:
        logs = [member_path(n, str(path)) for n in archive.namelist()]
        dirs = find_cluster_dirs(logs, path.stem, str(path))
        chosen = choose_clusters(dirs, clusters, str(path))
        yield HeliosInput(Path(tmp), dirs, chosen, str(path), archive, max_member_bytes)
