"""Datasets on disk: `$HELIOS_DATA_DIR/<name>/{jobs.parquet, vc_gpus.parquet, meta.json}`, written atomically.

A refreshable dataset holds `jobs/YYYY-MM.parquet` (one file per submit month) instead of `jobs.parquet`, so that
`upsert_jobs` rewrites only the months a batch touches and hard-links the others into the new version.

Files computed from one version (the column files and rollups of analytics.queries) live in its `derived-N/` folder,
one sub-folder per part, each built once under a lock and renamed into place whole; every process reads them.

`<name>` is a link to the current version's folder `.<name>.v-...`. A reader resolves the link once, when it opens
the dataset, and reads that version's folder to the end; a replaced version stays RETIRED_GRACE_S on disk for the
readers that still hold it, so that a reader during a replacement sees the old or the new version whole.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from analytics import capabilities, schema
from analytics.scheduler import CONFIG_KEY

log = logging.getLogger(__name__)
DEFAULT_DATA_DIR = "data"
DEFAULT_DATASET = "helios-synth"
STALE_AFTER_S = 3600  # staging folders older than this were left by a killed writer
RETIRED_GRACE_S = 600  # a replaced version stays this long for its readers (a page's queries, a run's first read)
# Hidden copies of a dataset folder `.<name><mark>...`: being written, stored (the link points at it), replaced, gone.
_STAGING, _STORED, _REPLACED, _DELETING = ".tmp-", ".v-", ".legacy-", ".deleting-"
_COPY_MARKS = (_STAGING, _STORED, _REPLACED, _DELETING)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
RESERVED_NAMES = frozenset({"public"})  # data/public holds the bundled source files, not a dataset
MONTH_FORMAT = "%Y-%m"  # the partition key of a refreshable dataset: the submit month
MONTHLY_PARTS = "monthly_parts"  # meta.json key: month -> digest of its file (so a refresh re-hashes only its months)
JOB_KEY = ("cluster", "job_id")  # a job's identity across refreshes
JOB_ORDER = ("cluster", "submit_time", "job_id")  # the row order of every jobs table
DERIVED_DIR = "derived-3"  # files computed from a dataset version; the number changes when their format does
_DERIVED_STAGING = "-tmp-"


class DatasetError(Exception):
    """A dataset is missing, malformed or badly named."""


class DiskFullError(DatasetError, OSError):
    """A dataset could not be written because its disk is full (nothing was changed)."""


DISK_FULL_FREE_BYTES = 1 << 20  # a write that fails with less than this left on its disk failed for lack of room


def disk_full(exc: BaseException, folder: Path) -> bool:
    """Whether exc (or what caused it) comes from a full disk under folder: ENOSPC as the OS, Arrow or Polars report
    it, or any failed write (NumPy reports a short write only) with almost nothing left there."""
    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen)
        if getattr(seen, "errno", None) == errno.ENOSPC or "No space left on device" in text or "os error 28" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    try:
        return isinstance(exc, OSError) and shutil.disk_usage(folder).free < DISK_FULL_FREE_BYTES
    except OSError:
        return False


def disk_full_error(folder: Path) -> DiskFullError:
    """The one-line error of a write to folder that ran out of room (naming no server path)."""
    try:
        free = f" ({shutil.disk_usage(folder).free / 2**20:.1f} MiB free)"
    except OSError:
        free = ""
    return DiskFullError(
        f"the disk is full: the data folder's disk has no room for this dataset{free}; nothing was changed "
        "(every dataset is as it was): free some space, then try again"
    )


def data_dir() -> Path:
    """The root folder of all datasets: `$HELIOS_DATA_DIR`, default `./data`."""
    return Path(os.environ.get("HELIOS_DATA_DIR", DEFAULT_DATA_DIR))


def check_name(name: str) -> str:
    """Return name if it is a safe dataset name (letters, digits, `.`, `_`, `-`; no path tricks), else raise."""
    if not _NAME_RE.match(name or "") or name in {".", ".."} or ".." in name:
        raise DatasetError(
            f"invalid dataset name {name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    if name in RESERVED_NAMES:
        raise DatasetError(f"dataset name {name!r} is reserved (data/{name} holds the bundled source files)")
    return name


@dataclass(frozen=True)
class Dataset:
    """A dataset folder and its metadata."""

    name: str
    path: Path
    meta: dict[str, Any]

    @property
    def jobs_path(self) -> Path:
        """Path of the jobs table: its Parquet file, or the folder of monthly files of a refreshable dataset."""
        folder = self.path / schema.JOBS_DIR
        return folder if folder.is_dir() else self.path / schema.JOBS_FILE

    @property
    def jobs_glob(self) -> str:
        """The jobs table for Parquet readers (Polars, DuckDB): its file, or a glob of its monthly files."""
        path = self.jobs_path
        return str(path / "*.parquet") if path.is_dir() else str(path)

    @property
    def vc_gpus_path(self) -> Path:
        """Path of the VC capacity Parquet file."""
        return self.path / schema.VC_GPUS_FILE

    @property
    def version(self) -> str:
        """A short content version for cache keys (changes whenever the dataset is rewritten)."""
        return str(self.meta.get("version", "0"))

    @property
    def clusters(self) -> list[str]:
        """Cluster names in the dataset."""
        return list(self.meta.get("clusters", []))

    def stored_job_columns(self) -> list[str]:
        """The job columns its Parquet files hold (a dataset written before a column existed lacks it; a refresh
        rewrites every month of such a dataset, so its files never differ)."""
        path = self.jobs_path
        first = min(path.glob("*.parquet"), default=None) if path.is_dir() else path
        return list(pl.read_parquet_schema(first)) if first else list(schema.JOB_COLUMNS)

    def jobs(self) -> pl.LazyFrame:
        """Lazily scan the jobs table (with every job column: one the files lack is null)."""
        return schema.with_job_columns(pl.scan_parquet(self.jobs_glob), self.stored_job_columns())

    def vc_gpus(self) -> pl.DataFrame:
        """Read the VC capacity table."""
        return pl.read_parquet(self.vc_gpus_path)


def open_dataset(name: str, root: Path | None = None) -> Dataset:
    """Open dataset `name` under root (default `data_dir()`) at its current version (the version's own folder, which
    a later replacement leaves in place), raising DatasetError when absent or incomplete."""
    check_name(name)
    link = (root or data_dir()) / name
    path = link.resolve()  # once: every later read of this Dataset is of this version
    meta_path = path / schema.META_FILE
    if not meta_path.is_file():
        known = ", ".join(d.name for d in list_datasets(root)) or "none"
        raise DatasetError(f"dataset {name!r} not found under {link.parent} (available: {known})")
    meta = _read_meta(meta_path, name)
    if not (path / schema.JOBS_FILE).exists() and not (path / schema.JOBS_DIR).is_dir():
        raise DatasetError(f"dataset {name!r} is incomplete: {path / schema.JOBS_FILE} is missing")
    if not (path / schema.VC_GPUS_FILE).exists():
        raise DatasetError(f"dataset {name!r} is incomplete: {path / schema.VC_GPUS_FILE} is missing")
    return Dataset(name=name, path=path, meta=meta)


def _read_meta(meta_path: Path, name: str) -> dict[str, Any]:
    """A dataset's metadata, or DatasetError naming the file when it cannot be read."""
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"dataset {name!r} cannot be read: {meta_path}: {exc}") from exc
    if not isinstance(meta, dict):
        raise DatasetError(f"dataset {name!r} cannot be read: {meta_path} holds no JSON object")
    return meta


def list_datasets(root: Path | None = None) -> list[Dataset]:
    """All complete datasets under root, sorted by name (one whose metadata cannot be read is left out, logged)."""
    base = root or data_dir()
    if not base.is_dir():
        return []
    out = []
    for p in sorted(base.iterdir()):
        folder = p.resolve()  # the current version, as open_dataset reads it
        if _NAME_RE.match(p.name) and folder.is_dir() and (folder / schema.META_FILE).is_file():
            try:
                out.append(Dataset(name=p.name, path=folder, meta=_read_meta(folder / schema.META_FILE, p.name)))
            except DatasetError as exc:
                log.warning("%s", exc)
    return out


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _retire(folder: Path) -> None:
    """Mark a replaced version's folder with the time it was replaced (its modification time): sweep_stale removes
    it RETIRED_GRACE_S later."""
    now_s = time.time()
    os.utime(folder, (now_s, now_s))


def _age_limit_s(name: str, max_age_s: float) -> float | None:
    """How old a hidden copy named name may get: retired versions RETIRED_GRACE_S, the rest max_age_s; None when
    name is not a hidden copy."""
    if not name.startswith(".") or not any(mark in name for mark in _COPY_MARKS):
        return None
    if _STAGING in name or _DELETING in name:  # checked first: the longer limit when a dataset's name has a mark
        return max_age_s
    return min(RETIRED_GRACE_S, max_age_s)


def sweep_stale(root: Path, max_age_s: float = STALE_AFTER_S, now_s: float | None = None) -> list[Path]:
    """Remove what no dataset link points at: replaced versions RETIRED_GRACE_S after their replacement, staging
    folders left by killed writers after max_age_s."""
    if not root.is_dir():
        return []
    live = {p.resolve() for p in root.iterdir() if p.is_symlink()}
    now_s = time.time() if now_s is None else now_s
    removed = []
    for p in root.iterdir():
        limit_s = _age_limit_s(p.name, max_age_s)
        if limit_s is None or p.is_symlink() or not p.is_dir() or p.resolve() in live:
            continue
        try:
            expired = p.stat().st_mtime < now_s - limit_s
        except FileNotFoundError:
            continue  # removed by another writer's sweep
        if expired:
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


@contextmanager
def _staging(root: Path, name: str) -> Iterator[Path]:
    """A fresh hidden folder under root to write a version in, removed afterwards whatever happens; a write that
    runs out of room raises DiskFullError."""
    tmp: Path | None = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        sweep_stale(root)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}{_STAGING}", dir=root))
        tmp.chmod(0o755)
        yield tmp
    except Exception as exc:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)  # first: the room it took is what the check below looks at
        if not isinstance(exc, DiskFullError) and disk_full(exc, root):
            raise disk_full_error(root) from exc
        raise
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _swap_in(base: Path, name: str, staged: Path, version: str) -> None:
    """Make `base/name` point at the staged folder in one atomic rename of a symlink, then retire the old copy (its
    readers finish on it; sweep_stale removes it after RETIRED_GRACE_S)."""
    final = base / f".{name}{_STORED}{version}-{os.getpid()}-{secrets.token_hex(4)}"
    staged.rename(final)
    os.utime(final)  # fresh: no sweep takes it for a retired version before the link points at it
    link = base / name
    previous = link.resolve() if link.is_symlink() else None
    if link.exists() and not link.is_symlink():
        legacy = base / f".{name}{_REPLACED}{os.getpid()}"
        link.rename(legacy)
        previous = legacy
    tmp_link = base / f".{name}.link-{os.getpid()}"
    tmp_link.unlink(missing_ok=True)
    tmp_link.symlink_to(final.name)
    os.replace(tmp_link, link)
    if previous is not None and previous != final.resolve():
        _retire(previous)
    sweep_stale(base)


def _in_order(jobs: pl.DataFrame) -> bool:
    """Whether the jobs are already in dataset order (no key is null, each row's keys <= the next row's)."""
    if jobs.height < 2:
        return True
    now = [pl.col(k) for k in JOB_ORDER]
    after = [k.shift(-1) for k in now]
    # Lexicographic (cluster, submit_time, job_id) <= the next row's, decided from the last key back.
    ordered = now[2] <= after[2]
    for key, nxt in ((now[1], after[1]), (now[0], after[0])):
        ordered = (key < nxt) | ((key == nxt) & ordered)
    return jobs.select(ordered.head(jobs.height - 1).fill_null(False).all()).item()


def _sorted_jobs(jobs: pl.DataFrame) -> pl.DataFrame:
    """The canonical jobs in dataset order (not copied when they already are: a large trace usually comes sorted)."""
    jobs = schema.conform_jobs(jobs)
    return jobs if _in_order(jobs) else jobs.sort(list(JOB_ORDER))


_PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "row_group_size": 256_000, "statistics": True}
_ARROW_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_statistics": True}  # the same, for pyarrow


def _write_table(frame: pl.DataFrame, path: Path) -> str:
    """Write one Parquet table and return its digest."""
    frame.write_parquet(path, **_PARQUET_OPTIONS)
    return _file_digest(path)


def _months(jobs: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Jobs split by submit month (`YYYY-MM`), each part in the dataset's row order."""
    month = pl.col("submit_time").dt.strftime(MONTH_FORMAT).alias("_month")
    parts = jobs.with_columns(month).partition_by("_month", as_dict=True, include_key=False)
    return {key[0]: part for key, part in parts.items()}


def _monthly_version(parts: dict[str, str], vc_digest: str) -> str:
    text = json.dumps(sorted(parts.items())) + vc_digest
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _with_config(version: str, meta: dict[str, Any]) -> str:
    """The version of the files, changed by the scheduler configuration meta.json keeps (when it keeps one)."""
    config = meta.get(CONFIG_KEY)
    if not config:
        return version
    text = version + json.dumps(config, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[: len(version)]


def _finish(tmp: Path, base: Path, name: str, meta: dict[str, Any], version: str) -> None:
    version = _with_config(version, meta)
    full_meta = {k: v for k, v in meta.items() if k != "capabilities"}
    full_meta.update(
        capabilities=capabilities.capabilities(full_meta),
        name=name,
        schema_version=schema.SCHEMA_VERSION,
        version=version,
    )
    (tmp / schema.META_FILE).write_text(json.dumps(full_meta, indent=2, default=str) + "\n")
    _swap_in(base, name, tmp, version)


class DatasetWriter:
    """A new version of a dataset written a part at a time, so that a large trace never sits in memory whole: each
    part holds whole clusters, all after the previous part's (the jobs table's order), and goes straight into the
    jobs table (a refreshable dataset's few parts are kept until `commit`, which splits them by month); `commit` adds
    the capacity table and meta.json and swaps the dataset in."""

    def __init__(self, base: Path, name: str, tmp: Path, monthly: bool):
        self.base, self.name, self.tmp, self.monthly = base, name, tmp, monthly
        self.last_cluster: str | None = None
        self.frames: list[pl.DataFrame] = []  # a refreshable dataset's parts
        self.table: pq.ParquetWriter | None = None
        self.finished = False

    def add(self, jobs: pl.DataFrame) -> None:
        """Write one part of the jobs."""
        if self.finished:
            raise ValueError("the jobs table is finished: no part can be added")
        jobs = _sorted_jobs(jobs)
        if jobs.is_empty():
            return
        if self.last_cluster is not None and jobs["cluster"][0] <= self.last_cluster:
            raise ValueError("parts must come in cluster order, each cluster in one part")
        self.last_cluster = jobs["cluster"][-1]
        if self.monthly:
            self.frames.append(jobs)
            return
        arrow = jobs.to_arrow(compat_level=pl.CompatLevel.newest())
        if self.table is None:
            strings = [name for name, dtype in schema.JOB_SCHEMA.items() if dtype == pl.String()]
            path = self.tmp / schema.JOBS_FILE
            self.table = pq.ParquetWriter(path, arrow.schema, use_dictionary=strings, **_ARROW_OPTIONS)
        self.table.write_table(arrow, row_group_size=_PARQUET_OPTIONS["row_group_size"])

    def jobs(self) -> pl.LazyFrame:
        """Every job written, in dataset order; the jobs table is finished (no part can be added after)."""
        self.finished = True
        if self.monthly:
            return pl.concat(self.frames).lazy() if self.frames else pl.LazyFrame(schema=schema.JOB_SCHEMA)
        if self.table is not None:
            self.table.close()
            self.table = None
        path = self.tmp / schema.JOBS_FILE
        if not path.exists():
            _write_table(pl.DataFrame(schema=schema.JOB_SCHEMA), path)
        return pl.scan_parquet(path)

    def commit(self, vc_gpus: pl.DataFrame, meta: dict[str, Any]) -> Dataset:
        """Write the capacity table and meta.json (with the row counts) and swap the dataset in."""
        jobs = self.jobs()
        vc_gpus = schema.conform_vc_gpus(vc_gpus).sort(["cluster", "vc", "date"])
        n_jobs = jobs.select(pl.len()).collect().item()
        meta = {**meta, "row_counts": {**(meta.get("row_counts") or {}), "jobs": n_jobs, "vc_gpus": vc_gpus.height}}
        vc_digest = _write_table(vc_gpus, self.tmp / schema.VC_GPUS_FILE)
        if self.monthly:
            (self.tmp / schema.JOBS_DIR).mkdir()
            months = _months(jobs.collect())
            self.frames.clear()
            parts = {m: _write_table(p, self.tmp / schema.JOBS_DIR / f"{m}.parquet") for m, p in months.items()}
            meta = {**meta, MONTHLY_PARTS: parts}
            version = _monthly_version(parts, vc_digest)
        else:
            version = _file_digest(self.tmp / schema.JOBS_FILE)[:12] + vc_digest[:4]
        _finish(self.tmp, self.base, self.name, meta, version)
        return open_dataset(self.name, self.base)


@contextmanager
def dataset_writer(name: str, root: Path | None = None, monthly: bool = False) -> Iterator[DatasetWriter]:
    """A DatasetWriter for dataset name under root (default `data_dir()`), monthly for a refreshable dataset (one
    jobs file per submit month); nothing stays behind unless it commits."""
    check_name(name)
    base = root or data_dir()
    with _staging(base, name) as tmp:
        writer = DatasetWriter(base, name, tmp, monthly)
        try:
            yield writer
        finally:
            if writer.table is not None:
                writer.table.close()


def write_dataset(
    name: str,
    jobs: pl.DataFrame,
    vc_gpus: pl.DataFrame,
    meta: dict[str, Any],
    root: Path | None = None,
    monthly: bool = False,
) -> Dataset:
    """Write a dataset atomically: build it in a temp folder, then swap the `name` symlink to it in one rename;
    monthly writes the jobs as one file per submit month (a refreshable dataset)."""
    with dataset_writer(name, root, monthly) as writer:
        writer.add(jobs)
        return writer.commit(vc_gpus, meta)


MetaFor = Callable[[pl.LazyFrame], dict[str, Any]]  # the new version's jobs -> its meta.json content
Plan = tuple[pl.DataFrame, MetaFor]  # the new version's capacity table and meta.json


@dataclass(frozen=True)
class Upsert:
    """What upsert_jobs did: the dataset now, jobs added, updated and unchanged, and the months rewritten (and, from
    analytics.ingest.append, the data-quality report of the batch read, which a refresh that changes nothing does
    not store)."""

    dataset: Dataset
    added: int
    updated: int
    unchanged: int
    months_rewritten: tuple[str, ...]
    quality: dict[str, Any] | None = None


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file at path (created when absent)."""
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def _locked(base: Path, name: str) -> Iterator[None]:
    """Hold an exclusive lock on dataset name (two refreshes of one dataset run one after the other)."""
    base.mkdir(parents=True, exist_ok=True)
    with _file_lock(base / f".{name}.lock"):
        yield


def _old_month(current: Dataset, month: str) -> pl.DataFrame:
    """The stored jobs of one submit month (empty when there are none)."""
    if current.jobs_path.is_dir():
        path = current.jobs_path / f"{month}.parquet"
        return schema.conform_jobs(pl.read_parquet(path)) if path.exists() else pl.DataFrame(schema=schema.JOB_SCHEMA)
    month_of = pl.col("submit_time").dt.strftime(MONTH_FORMAT)
    return current.jobs().filter(month_of == month).collect()


def _stored_months(current: Dataset) -> list[str]:
    if current.jobs_path.is_dir():
        return sorted(p.stem for p in current.jobs_path.glob("*.parquet"))
    months = current.jobs().select(pl.col("submit_time").dt.strftime(MONTH_FORMAT).unique()).collect()
    return sorted(months.to_series().drop_nulls().to_list())


def _batch_counts(current: Dataset, jobs: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
    """The stored rows of the batch's jobs, how many of the batch's jobs are new and how many differ."""
    keys = jobs.select(JOB_KEY)
    stored = current.jobs().join(keys.lazy(), on=list(JOB_KEY), how="semi").collect()
    same = jobs.join(stored, on=list(jobs.columns), how="semi", nulls_equal=True).height
    added = jobs.height - stored.height
    return stored, added, jobs.height - added - same


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def upsert_jobs(
    name: str,
    jobs: pl.DataFrame,
    plan: Callable[[Dataset | None], Plan],
    root: Path | None = None,
    new_meta: bool = False,
) -> Upsert:
    """Add a batch's new jobs and replace its changed ones (same cluster and job_id) in dataset name, rewriting
    only the submit months it touches, and swap the result in atomically with the capacity and meta.json that
    plan(the current version, None when absent) gives; all under the dataset's lock. A batch that changes nothing
    writes nothing (unless new_meta: meta.json gains facts, such as a new scheduler configuration), and an absent
    dataset is created."""
    check_name(name)
    base = root or data_dir()
    jobs = _sorted_jobs(schema.conform_jobs(jobs).unique(list(JOB_KEY), keep="last", maintain_order=True))
    with _locked(base, name):
        try:
            current: Dataset | None = open_dataset(name, base)
        except DatasetError:
            current = None
        capacity, meta_for = plan(current)
        vc_gpus = schema.conform_vc_gpus(capacity).sort(["cluster", "vc", "date"])
        if current is None:
            created = write_dataset(name, jobs, vc_gpus, meta_for(jobs.lazy()), base, monthly=True)
            return Upsert(created, jobs.height, 0, 0, tuple(sorted(created.meta[MONTHLY_PARTS])))
        stored, added, updated = _batch_counts(current, jobs)
        new_months = _months(jobs)
        touched = set(new_months) | set(_months(stored))
        # A single-file dataset becomes monthly, one written before a job column existed gets it: every month is
        # written.
        converting = not current.jobs_path.is_dir() or set(current.stored_job_columns()) != set(schema.JOB_COLUMNS)
        if converting:
            touched |= set(_stored_months(current))
        rewritten = _merged_months(current, sorted(touched), new_months, keep_same=converting)
        same_capacity = current.vc_gpus().sort(["cluster", "vc", "date"]).equals(vc_gpus)
        if not rewritten and same_capacity and not new_meta:
            return Upsert(current, 0, 0, jobs.height, ())
        dataset = _write_upsert(base, name, current, rewritten, vc_gpus, meta_for)
        return Upsert(dataset, added, updated, jobs.height - added - updated, tuple(sorted(rewritten)))


def _merged_months(
    current: Dataset, months: list[str], new_months: dict[str, pl.DataFrame], keep_same: bool = False
) -> dict[str, pl.DataFrame]:
    """Per touched month whose content changes (every one with keep_same): its stored jobs minus the batch's jobs,
    plus the batch's own."""
    batch_keys = pl.concat([p.select(JOB_KEY) for p in new_months.values()]) if new_months else None
    out = {}
    for month in months:
        old = _old_month(current, month)
        kept = old.join(batch_keys, on=list(JOB_KEY), how="anti") if batch_keys is not None else old
        merged = _sorted_jobs(pl.concat([kept, new_months[month]]) if month in new_months else kept)
        if keep_same or not merged.equals(schema.conform_jobs(old), null_equal=True):
            out[month] = merged
    return out


def _write_upsert(
    base: Path,
    name: str,
    current: Dataset,
    rewritten: dict[str, pl.DataFrame],
    vc_gpus: pl.DataFrame,
    meta_for: MetaFor,
) -> Dataset:
    """Stage the new version (untouched months hard-linked, rewritten ones written) and swap it in."""
    old_parts = dict(current.meta.get(MONTHLY_PARTS) or {}) if current.jobs_path.is_dir() else {}
    with _staging(base, name) as tmp:
        folder = tmp / schema.JOBS_DIR
        folder.mkdir()
        parts = {}
        for month in _stored_months(current) if current.jobs_path.is_dir() else []:
            if month not in rewritten:
                _link_or_copy(current.jobs_path / f"{month}.parquet", folder / f"{month}.parquet")
                parts[month] = old_parts.get(month) or _file_digest(folder / f"{month}.parquet")
        for month, frame in rewritten.items():
            if frame.height:
                parts[month] = _write_table(frame, folder / f"{month}.parquet")
        vc_digest = _write_table(vc_gpus, tmp / schema.VC_GPUS_FILE)
        meta = {**meta_for(pl.scan_parquet(str(folder / "*.parquet"))), MONTHLY_PARTS: dict(sorted(parts.items()))}
        _finish(tmp, base, name, meta, _monthly_version(parts, vc_digest))
    return open_dataset(name, base)


def derived_path(ds: Dataset, part: str) -> Path:
    """Where derived part `part` of ds lives (whether or not it is built)."""
    return ds.path / DERIVED_DIR / part


def derived_part(ds: Dataset, part: str, build: Callable[[Path], None]) -> Path | None:
    """The folder of ds's derived part `part`, built once by build(staging folder) under the part's lock and renamed
    into place whole; None when it is absent and ds's folder cannot be written (a read-only host or a full disk builds
    nothing: the queries compute without it)."""
    final = derived_path(ds, part)
    if final.is_dir():
        return final
    base = final.parent
    try:
        base.mkdir(exist_ok=True)
    except OSError:
        return None
    if not os.access(base, os.W_OK):
        return None
    with _file_lock(base / f".{part}.lock"):
        if final.is_dir():
            return final  # built by another process while this one waited
        for stale in base.glob(f".{part}{_DERIVED_STAGING}*"):
            shutil.rmtree(stale, ignore_errors=True)  # left by a killed builder (only lock holders stage)
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{part}{_DERIVED_STAGING}", dir=base))
            try:
                build(tmp)
                tmp.chmod(0o755)
                tmp.rename(final)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        except Exception as exc:
            if not disk_full(exc, base):
                raise
            log.warning("no room to write %s of dataset %s (the disk is full): computed without it", part, ds.name)
            return None
    for old in ds.path.glob("derived-*"):
        if old.name != DERIVED_DIR:
            shutil.rmtree(old, ignore_errors=True)  # an older format's files: never read again
    return final


def delete_dataset(name: str, root: Path | None = None) -> None:
    """Remove dataset name under root (default `data_dir()`): its link disappears in one step, then its files."""
    check_name(name)
    base = (root or data_dir()).resolve()
    link = base / name
    if not (link / schema.META_FILE).is_file():
        raise DatasetError(f"dataset {name!r} not found (no {schema.META_FILE} in {name}/)")
    if link.is_symlink():
        target = link.resolve()
        link.unlink()
        if target.parent == base and target.name.startswith(f".{name}{_STORED}"):
            shutil.rmtree(target, ignore_errors=True)  # only this dataset's own stored copy, never a link's far end
    elif link.is_dir():
        doomed = link.with_name(f".{name}{_DELETING}{secrets.token_hex(4)}")
        link.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
