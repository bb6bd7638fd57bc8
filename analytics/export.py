"""Write a dataset back out in the published Helios CSV format, optionally zipped as `data.zip`.

Layout: `<Cluster>/cluster_log.csv` (the 12 published columns, times `YYYY-MM-DD HH:MM:SS`, nulls empty) and
`<Cluster>/cluster_gpu_number.csv` (date, one column per VC, total); a zip holds them under `data/`.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

import polars as pl

from analytics import store
from analytics.ingest.helios import GPU_FILE, LOG_COLUMNS, LOG_FILE, TOTAL_COLUMN
from analytics.ingest.parse import DATE_FORMAT, TIME_FORMAT

ZIP_NAME = "data.zip"
ZIP_TOP = "data"


def log_frame(jobs: pl.DataFrame) -> pl.DataFrame:
    """The published `cluster_log.csv` columns of jobs (cpu_num written as integers when all are whole)."""
    whole = jobs.select((pl.col("cpu_num").drop_nulls() % 1 == 0).all()).item()
    cpu = pl.col("cpu_num").cast(pl.Int64) if whole else pl.col("cpu_num")
    return jobs.select(*LOG_COLUMNS).with_columns(cpu)


def gpu_number_frame(vc_gpus: pl.DataFrame) -> pl.DataFrame:
    """One cluster's capacity rows as the wide `cluster_gpu_number.csv` table (date, VC columns, total)."""
    if vc_gpus.height == 0:
        return pl.DataFrame({"date": [], TOTAL_COLUMN: []}, schema={"date": pl.Date, TOTAL_COLUMN: pl.Int64})
    wide = vc_gpus.pivot(on="vc", index="date", values="gpus", sort_columns=True).sort("date")
    vcs = [c for c in wide.columns if c != "date"]
    return wide.with_columns(pl.sum_horizontal(vcs).cast(pl.Int64).alias(TOTAL_COLUMN))


def _cluster_folder(cluster: str) -> str:
    try:
        return store.check_name(cluster)
    except store.DatasetError as exc:
        raise ValueError(f"cluster name {cluster!r} cannot be a folder name") from exc


def write_cluster(dataset: store.Dataset, cluster: str, out_dir: Path) -> list[Path]:
    """Write one cluster's log and capacity CSV files under out_dir/<cluster>/."""
    folder = out_dir / _cluster_folder(cluster)
    folder.mkdir(parents=True, exist_ok=True)
    jobs = dataset.jobs().filter(pl.col("cluster") == cluster).collect()
    log_frame(jobs).write_csv(folder / LOG_FILE, datetime_format=TIME_FORMAT)
    capacity = dataset.vc_gpus().filter(pl.col("cluster") == cluster)
    gpu_number_frame(capacity).write_csv(folder / GPU_FILE, date_format=DATE_FORMAT)
    return [folder / LOG_FILE, folder / GPU_FILE]


def _zip_folder(src: Path, files: list[Path], zip_path: Path) -> None:
    tmp = zip_path.with_name(f".{zip_path.name}.tmp-{os.getpid()}")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, f"{ZIP_TOP}/{path.relative_to(src).as_posix()}")
    tmp.replace(zip_path)


def export_dataset(
    dataset: store.Dataset, out_dir: Path, clusters: list[str] | None = None, zipped: bool = False
) -> list[Path]:
    """Write the dataset's clusters (all or those named) under out_dir, or as out_dir/data.zip if zipped."""
    known = dataset.clusters or sorted(dataset.jobs().select("cluster").unique().collect()["cluster"])
    chosen = clusters or known
    unknown = [c for c in chosen if c not in known]
    if unknown:
        raise ValueError(f"cluster(s) {', '.join(unknown)} not in dataset {dataset.name!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    if not zipped:
        return [p for c in chosen for p in write_cluster(dataset, c, out_dir)]
    with tempfile.TemporaryDirectory(prefix="helios-export-", dir=out_dir) as tmp:
        files = [p for c in chosen for p in write_cluster(dataset, c, Path(tmp))]
        _zip_folder(Path(tmp), files, out_dir / ZIP_NAME)
    return [out_dir / ZIP_NAME]
