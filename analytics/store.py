"""Datasets on disk: `$HELIOS_DATA_DIR/<name>/{jobs.parquet, vc_gpus.parquet, meta.json}`, written atomically."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from analytics import capabilities, schema

DEFAULT_DATA_DIR = "data"
DEFAULT_DATASET = "helios-synth"
STALE_AFTER_S = 3600  # staging folders older than this were left by a killed writer
# Hidden copies of a dataset folder `.<name><mark>...`: being written, stored (the link points at it), replaced, gone.
_STAGING, _STORED, _REPLACED, _DELETING = ".tmp-", ".v-", ".legacy-", ".deleting-"
_COPY_MARKS = (_STAGING, _STORED, _REPLACED, _DELETING)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
RESERVED_NAMES = frozenset({"public"})  # data/public holds the bundled source files, not a dataset


class DatasetError(Exception):
    """A dataset is missing, malformed or badly named."""


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
        """Path of the jobs Parquet file."""
        return self.path / schema.JOBS_FILE

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

    def jobs(self) -> pl.LazyFrame:
        """Lazily scan the jobs table."""
        return pl.scan_parquet(self.jobs_path)

    def vc_gpus(self) -> pl.DataFrame:
        """Read the VC capacity table."""
        return pl.read_parquet(self.vc_gpus_path)


def open_dataset(name: str, root: Path | None = None) -> Dataset:
    """Open dataset `name` under root (default `data_dir()`), raising DatasetError when absent or incomplete."""
    check_name(name)
    path = (root or data_dir()) / name
    meta_path = path / schema.META_FILE
    if not meta_path.is_file():
        known = ", ".join(d.name for d in list_datasets(root)) or "none"
        raise DatasetError(f"dataset {name!r} not found under {path.parent} (available: {known})")
    meta = json.loads(meta_path.read_text())
    for f in (schema.JOBS_FILE, schema.VC_GPUS_FILE):
        if not (path / f).exists():
            raise DatasetError(f"dataset {name!r} is incomplete: {path / f} is missing")
    return Dataset(name=name, path=path, meta=meta)


def list_datasets(root: Path | None = None) -> list[Dataset]:
    """All complete datasets under root, sorted by name."""
    base = root or data_dir()
    if not base.is_dir():
        return []
    out = []
    for p in sorted(base.iterdir()):
        if p.is_dir() and (p / schema.META_FILE).is_file() and _NAME_RE.match(p.name):
            out.append(Dataset(name=p.name, path=p, meta=json.loads((p / schema.META_FILE).read_text())))
    return out


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sweep_stale(root: Path, max_age_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove staging folders and unreferenced stored copies older than max_age_s left by killed writers."""
    if not root.is_dir():
        return []
    live = {p.resolve() for p in root.iterdir() if p.is_symlink()}
    cutoff = time.time() - max_age_s
    removed = []
    for p in root.iterdir():
        hidden_copy = p.name.startswith(".") and any(mark in p.name for mark in _COPY_MARKS)
        if hidden_copy and p.is_dir() and not p.is_symlink() and p.resolve() not in live and p.stat().st_mtime < cutoff:
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


@contextmanager
def _staging(root: Path, name: str) -> Iterator[Path]:
    root.mkdir(parents=True, exist_ok=True)
    sweep_stale(root)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}{_STAGING}", dir=root))
    tmp.chmod(0o755)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _swap_in(base: Path, name: str, staged: Path, version: str) -> None:
    """Make `base/name` point at the staged folder in one atomic rename of a symlink, then drop the old copy."""
    final = base / f".{name}{_STORED}{version}-{os.getpid()}-{secrets.token_hex(4)}"
    staged.rename(final)
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
        shutil.rmtree(previous, ignore_errors=True)


def write_dataset(
    name: str,
    jobs: pl.DataFrame,
    vc_gpus: pl.DataFrame,
    meta: dict[str, Any],
    root: Path | None = None,
) -> Dataset:
    """Write a dataset atomically: build it in a temp folder, then swap the `name` symlink to it in one rename."""
    check_name(name)
    base = root or data_dir()
    jobs = schema.conform_jobs(jobs).sort(["cluster", "submit_time", "job_id"])
    vc_gpus = schema.conform_vc_gpus(vc_gpus).sort(["cluster", "vc", "date"])
    with _staging(base, name) as tmp:
        jobs.write_parquet(tmp / schema.JOBS_FILE, compression="zstd", row_group_size=256_000, statistics=True)
        vc_gpus.write_parquet(tmp / schema.VC_GPUS_FILE, compression="zstd")
        full_meta = dict(meta)
        row_counts = {**(meta.get("row_counts") or {}), "jobs": jobs.height, "vc_gpus": vc_gpus.height}
        full_meta.update(row_counts=row_counts)
        full_meta.update(
            capabilities=capabilities.capabilities({k: v for k, v in full_meta.items() if k != "capabilities"}),
            name=name,
            schema_version=schema.SCHEMA_VERSION,
            version=_file_digest(tmp / schema.JOBS_FILE)[:12] + _file_digest(tmp / schema.VC_GPUS_FILE)[:4],
        )
        (tmp / schema.META_FILE).write_text(json.dumps(full_meta, indent=2, default=str) + "\n")
        _swap_in(base, name, tmp, full_meta["version"])
    return open_dataset(name, base)


def delete_dataset(name: str, root: Path | None = None) -> None:
    """Remove dataset name under root (default `data_dir()`): its link disappears in one step, then its files."""
    check_name(name)
    link = (root or data_dir()) / name
    if link.is_symlink():
        target = link.resolve()
        link.unlink()
        shutil.rmtree(target, ignore_errors=True)
    elif link.is_dir():
        doomed = link.with_name(f".{name}{_DELETING}{secrets.token_hex(4)}")
        link.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
    else:
        raise DatasetError(f"dataset {name!r} not found")
