"""Ingest of real traces (Helios, Philly, Alibaba openb, Slurm sacct, any CSV through a column mapping) into
validated datasets with a data-quality report.

A failed ingest raises IngestError before anything is written; a successful one swaps the dataset in. `append`
refreshes a dataset with a newer export of a source whose job ids are stable (Slurm, a CSV with an id column).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from analytics import schema, store
from analytics.ingest import quality
from analytics.ingest.alibaba import DEFAULT_ORIGIN, open_alibaba_source
from analytics.ingest.archive import DEFAULT_MAX_MEMBER_BYTES
from analytics.ingest.helios import open_helios
from analytics.ingest.mapped_csv import CsvOptions, open_mapped_csv
from analytics.ingest.parse import IngestError, Source
from analytics.ingest.philly import open_philly
from analytics.ingest.refresh import job_totals, merged_capacity, refreshed_meta
from analytics.ingest.slurm import SlurmOptions, open_slurm
from analytics.ingest.slurm_conf import captured_meta
from analytics.progress import Progress
from analytics.scheduler import CAPTURE_KEY, CONFIG_KEY


@dataclass(frozen=True)
class IngestOptions:
    """Format options: Helios clusters to keep, Philly node table, Alibaba origin, zip member size limit; for Slurm
    and CSV the cluster name, pseudonym salt and capacity file; Slurm's VC column and the field names of an export
    without a header line; CSV's column mapping."""

    clusters: tuple[str, ...] = ()
    vc_nodes: Path | None = None
    origin: str = DEFAULT_ORIGIN
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES
    cluster: str = ""
    anonymise_salt: str | None = None
    capacity: Path | None = None
    vc_from: str = "partition"
    sacct_fields: tuple[str, ...] = ()
    column_map: tuple[tuple[str, str], ...] = ()
    slurm_config: Path | None = None  # slurm: folder of the scheduler's settings (analytics.ingest.slurm_conf)
    slurm_config_source: str = ""  # how a capture helios ran itself is named ("" = the folder's files)


class SourceInput(Protocol):
    """An opened source: how many progress stages reading takes, and the read itself."""

    steps: int

    def read(self, progress: Progress) -> Source:
        """Read the source into parsed jobs and capacity."""
        ...


@contextmanager
def _open_helios(path: Path, options: IngestOptions) -> Iterator[SourceInput]:
    with open_helios(path, list(options.clusters), options.max_member_bytes) as helios_input:
        yield helios_input


@contextmanager
def _open_philly(path: Path, options: IngestOptions) -> Iterator[SourceInput]:
    yield open_philly(path, options.vc_nodes)


@contextmanager
def _open_alibaba(path: Path, options: IngestOptions) -> Iterator[SourceInput]:
    with open_alibaba_source(path, options.origin, options.max_member_bytes) as alibaba_input:
        yield alibaba_input


@contextmanager
def _open_slurm(path: Path, options: IngestOptions) -> Iterator[SourceInput]:
    slurm = SlurmOptions(
        options.cluster, options.vc_from, options.anonymise_salt, options.capacity, options.sacct_fields
    )
    yield open_slurm(path, slurm)


@contextmanager
def _open_csv(path: Path, options: IngestOptions) -> Iterator[SourceInput]:
    cluster = options.cluster or CsvOptions.cluster
    yield open_mapped_csv(path, CsvOptions(options.column_map, cluster, options.anonymise_salt, options.capacity))


@dataclass(frozen=True)
class Format:
    """A source format: how to open a trace of it (a context manager yielding its SourceInput), whom to credit, and
    whether the Data page may take it as an upload (a format that needs options, such as csv's mapping, may not)."""

    open: Callable[[Path, IngestOptions], AbstractContextManager[SourceInput]]
    attribution: str
    uploadable: bool = True


FORMATS: dict[str, Format] = {
    "helios": Format(
        _open_helios,
        "Helios trace of SenseTime (Hu et al., 'Characterization and Prediction of Deep Learning "
        "Workloads in Large-Scale GPU Datacenters', SC'21), S-Lab-System-Group/HeliosData, CC BY 4.0",
    ),
    "philly": Format(
        _open_philly,
        "Microsoft Philly trace (Jeon et al., 'Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN "
        "Training Workloads', USENIX ATC'19), CC BY 4.0; job list from petuum/adaptdl (osdi21-artifact) "
        "simulator/traces/philly.csv (Apache-2.0 repository); VC node counts from "
        "S-Lab-System-Group/HeliosArtifact framework/QSSF Service/data/philly_vc.csv (MIT)",
    ),
    "alibaba-openb": Format(
        _open_alibaba,
        "Alibaba GPU cluster trace v2023 (Weng et al., 'Beware of Fragmentation: Scheduling GPU-Sharing "
        "Workloads with Fragmentation Gradient Descent', USENIX ATC'23), alibaba/clusterdata "
        "cluster-trace-gpu-v2023, CC BY 4.0",
    ),
    "slurm": Format(_open_slurm, "Slurm accounting records (sacct) of the cluster named in the dataset"),
    "csv": Format(
        _open_csv, "Job records of the scheduler named in the dataset, read through a column mapping", uploadable=False
    ),
}
OWN_CLUSTER_FORMATS = ("slurm", "csv")  # formats of one's own cluster: cluster name, capacity file, pseudonyms


def _check_options(fmt: str, options: IngestOptions) -> None:
    if fmt not in FORMATS:
        raise IngestError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
    if options.clusters and fmt != "helios":
        raise IngestError("--clusters applies to --format helios only")
    if options.vc_nodes and fmt != "philly":
        raise IngestError("--vc-nodes applies to --format philly only")
    if options.max_member_bytes <= 0:
        raise IngestError("--max-member-bytes must be positive")
    own = options.cluster or options.capacity or options.anonymise_salt is not None
    if own and fmt not in OWN_CLUSTER_FORMATS:
        raise IngestError("--cluster, --capacity and --anonymise apply to --format slurm and csv only")
    if options.vc_from != "partition" and fmt != "slurm":
        raise IngestError("--vc-from applies to --format slurm only")
    if options.sacct_fields and fmt != "slurm":
        raise IngestError("--sacct-fields applies to --format slurm only")
    if options.column_map and fmt != "csv":
        raise IngestError("--map applies to --format csv only")
    if options.slurm_config and fmt != "slurm":
        raise IngestError("--slurm-config applies to --format slurm only")


@contextmanager
def open_source(path: Path, fmt: str, options: IngestOptions) -> Iterator[SourceInput]:
    """Open the source at path in format fmt (temporary files, if any, are removed on exit)."""
    _check_options(fmt, options)
    with FORMATS[fmt].open(path, options) as source_input:
        yield source_input


def build_meta(
    path: Path,
    fmt: str,
    source: Source,
    jobs: pl.LazyFrame,
    report: dict[str, Any],
) -> dict[str, Any]:
    """The dataset's meta.json content: source, format, clusters, period, row counts, attribution, quality."""
    return {
        "source": str(path),
        "format": fmt,
        **job_totals(jobs, source.vc_gpus.height),
        "attribution": FORMATS[fmt].attribution,
        **source.meta,
        "quality": report,
    }


def prepare(
    path: Path,
    fmt: str,
    options: IngestOptions,
    progress: Progress | None = None,
    stored_capacity: pl.DataFrame | None = None,
    allow_empty: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """Read and validate a source without writing it: (jobs, vc_gpus, meta); raises IngestError when fatal. A
    refresh passes the dataset's stored capacity, which jobs are checked against when the source brings none, and
    allows a source without any row (a quiet cluster)."""
    progress = progress or Progress(0, quiet=True)
    with open_source(path, fmt, options) as source_input:
        progress.total = source_input.steps + 2  # reading stages + validating + writing
        source = source_input.read(progress)
        capacity = stored_capacity if source.vc_gpus.is_empty() and stored_capacity is not None else source.vc_gpus
        reports: list[dict[str, Any]] = []
        parts = list(_checked_parts(source, capacity, progress, reports))
    with _summary_stage(source, progress):
        report = _merged_report(path, reports, allow_empty)
        jobs = pl.concat(parts) if len(parts) > 1 else parts[0]
    return jobs, source.vc_gpus, build_meta(path, fmt, source, jobs.lazy(), report)


def _checked_parts(
    source: Source, capacity: pl.DataFrame, progress: Progress, reports: list[dict[str, Any]]
) -> Iterator[pl.DataFrame]:
    """The source's jobs validated a part at a time, each part's quality report appended to reports: a source read
    whole is checked in a `validating` stage, a source read in parts checks each in the stage reading it."""
    if isinstance(source.jobs, pl.DataFrame):
        with progress.stage("validating"):
            jobs, report = quality.validate(source.jobs, capacity, source.labels, source.source_columns)
        reports.append(report)
        yield jobs
        return
    for part in source.jobs:
        jobs, report = quality.validate(part, capacity, source.labels, source.source_columns)
        del part  # the parsed part is freed before the next one is read
        reports.append(report)
        yield jobs


def _summary_stage(source: Source, progress: Progress) -> AbstractContextManager:
    """The `validating` stage of a source read in parts (whose report and totals are summed up there)."""
    return nullcontext() if isinstance(source.jobs, pl.DataFrame) else progress.stage("validating")


def _merged_report(path: Path, reports: list[dict[str, Any]], allow_empty: bool = False) -> dict[str, Any]:
    """The quality report of the whole source, raising IngestError when no row is left (and some were read, or
    a source without rows is not allowed)."""
    report = quality.merge_reports(reports)
    if report["rows_out"] == 0 and not (allow_empty and report["rows_in"] == 0):
        why = quality.rejections(report)
        raise IngestError(
            f"{path}: no valid rows left after validation ({report['rows_in']} rows read)" + (f": {why}" if why else "")
        )
    return report


def ingest(
    path: Path,
    fmt: str,
    name: str,
    options: IngestOptions | None = None,
    progress: Progress | None = None,
    root: Path | None = None,
    source: str | None = None,
) -> store.Dataset:
    """Ingest the trace at path (format fmt) as dataset name under root (default the data folder), replacing an
    older one only on success; source, when given, is how meta.json names where the trace came from."""
    try:
        store.check_name(name)
    except store.DatasetError as exc:
        raise IngestError(str(exc)) from exc
    progress = progress or Progress(0, quiet=True)
    with open_source(path, fmt, options or IngestOptions()) as source_input:
        progress.total = source_input.steps + 2  # reading stages + validating + writing
        found = source_input.read(progress)
        with store.dataset_writer(name, root, monthly=bool(found.meta.get("stable_job_ids"))) as out:
            reports: list[dict[str, Any]] = []
            for jobs in _checked_parts(found, found.vc_gpus, progress, reports):
                out.add(jobs)
                del jobs  # written: nothing keeps it in memory
            with _summary_stage(found, progress):
                meta = build_meta(path, fmt, found, out.jobs(), _merged_report(path, reports))
            if source:
                meta = named_as(meta, path, source)
            meta.update(scheduler_meta(options))
            with progress.stage(f"writing dataset {name}"):
                dataset = out.commit(found.vc_gpus, meta)
    progress.done(f"ingested {dataset.meta['row_counts']['jobs']} jobs into {name}")
    return dataset


def named_as(meta: dict[str, Any], path: Path, source: str) -> dict[str, Any]:
    """meta with source as its source and in place of path wherever the quality report names a file (an upload's
    staging path, or any server path, never reaches a page)."""
    text = json.dumps(meta, default=str).replace(json.dumps(str(path))[1:-1], json.dumps(source)[1:-1])
    return {**json.loads(text), "source": source}


def scheduler_meta(options: IngestOptions | None) -> dict[str, Any]:
    """meta.json's scheduler configuration entries of --slurm-config ({} without it: a refresh keeps the stored)."""
    if options is None or options.slurm_config is None:
        return {}
    return captured_meta(options.slurm_config, options.slurm_config_source)


def _new_scheduler(meta: dict[str, Any], name: str, root: Path | None) -> bool:
    """Whether a refresh brings another scheduler configuration (or another reason for none) than the stored one."""
    if CAPTURE_KEY not in meta:
        return False
    try:
        stored = store.open_dataset(name, root).meta
    except store.DatasetError:
        return True

    def error(m: dict[str, Any]) -> Any:
        return (m.get(CAPTURE_KEY) or {}).get("error")

    return stored.get(CONFIG_KEY) != meta[CONFIG_KEY] or error(stored) != error(meta)


def _stored_capacity(name: str, root: Path | None) -> pl.DataFrame | None:
    try:
        return store.open_dataset(name, root).vc_gpus()
    except store.DatasetError:
        return None


def append(
    path: Path,
    fmt: str,
    name: str,
    options: IngestOptions | None = None,
    progress: Progress | None = None,
    root: Path | None = None,
    source: str | None = None,
) -> store.Upsert:
    """Add the new jobs of the trace at path to dataset name and update its changed ones (same cluster and job id),
    rewriting only the months they touch; the dataset is created when absent, and a second run changes nothing (the
    result carries the batch's data-quality report either way)."""
    try:
        store.check_name(name)
    except store.DatasetError as exc:
        raise IngestError(str(exc)) from exc
    progress = progress or Progress(0, quiet=True)
    stored_capacity = _stored_capacity(name, root)
    jobs, vc_gpus, meta = prepare(path, fmt, options or IngestOptions(), progress, stored_capacity, allow_empty=True)
    meta.update(scheduler_meta(options))
    if not meta.get("stable_job_ids"):
        raise IngestError(f"{path}: --append needs job ids that stay the same between exports (for csv: map id=...)")
    if jobs.is_empty():
        if stored_capacity is None:
            raise IngestError(f"{path}: no jobs, and dataset {name!r} does not exist yet")
        progress.done(f"{name}: no jobs in {path.name}, nothing changed")
        return store.Upsert(store.open_dataset(name, root), 0, 0, 0, (), meta["quality"])
    if source:
        meta["source"] = source

    def plan(current: store.Dataset | None) -> store.Plan:
        stored = schema.conform_vc_gpus(current.vc_gpus()) if current else schema.empty_vc_gpus()
        capacity = merged_capacity(stored, vc_gpus, jobs)
        facts = meta
        if vc_gpus.is_empty() and capacity.height:  # the stored capacity stands: keep its facts in meta.json
            facts = {k: v for k, v in meta.items() if k != "capacity_source"}
        return capacity, refreshed_meta(facts, current.meta if current else None, capacity.height)

    with progress.stage(f"merging into dataset {name}"):
        result = store.upsert_jobs(name, jobs, plan, root, new_meta=_new_scheduler(meta, name, root))
    progress.done(f"{name}: {result.added} jobs added, {result.updated} updated, {result.unchanged} unchanged")
    return replace(result, quality=meta["quality"])
