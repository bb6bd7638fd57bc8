"""Dataset uploads and deletion for admins: size-checked staging, background ingest, atomic replace or removal."""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analytics import queries, store
from analytics.ingest import FORMATS, IngestError, IngestOptions, ingest
from analytics.progress import Progress

MAX_MB_ENV = "HELIOS_UPLOAD_MAX_MB"
DEFAULT_MAX_MB = 512
SUFFIXES = (".zip", ".csv", ".txt")  # .txt: a Slurm sacct export
UPLOAD_FORMATS: tuple[str, ...] = tuple(name for name, spec in FORMATS.items() if spec.uploadable)
TOKEN_RE = re.compile(r"^[0-9a-f]{32}$")


class UploadError(ValueError):
    """An upload or deletion that cannot be done, with a one-line reason."""


def max_upload_bytes() -> int:
    """The upload size limit from HELIOS_UPLOAD_MAX_MB (default 512 MiB)."""
    raw = os.environ.get(MAX_MB_ENV, str(DEFAULT_MAX_MB))
    try:
        return int(float(raw) * 1024 * 1024)
    except ValueError:
        raise UploadError(f"{MAX_MB_ENV}={raw!r} is not a number of megabytes") from None


def _suffix(filename: str) -> str:
    suffix = Path(str(filename)).suffix.lower()
    if suffix not in SUFFIXES:
        raise UploadError(f"{str(filename)[:80]!r}: upload a {' or '.join(SUFFIXES)} file")
    return suffix


def decode_upload(contents: str, filename: str, max_bytes: int) -> bytes:
    """The bytes of a dcc.Upload data URL, refusing anything over max_bytes before decoding it."""
    if not isinstance(contents, str) or ";base64," not in contents[:200]:
        raise UploadError("the upload is not a base64 data URL")
    payload = contents.split(";base64,", 1)[1]
    if len(payload) * 3 // 4 > max_bytes + 3:
        raise UploadError(f"{str(filename)[:80]!r} is larger than the {max_bytes / 2**20:g} MiB upload limit")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise UploadError(f"{str(filename)[:80]!r}: the upload is not valid base64") from None
    if not raw:
        raise UploadError(f"{str(filename)[:80]!r} is empty")
    return raw


def uploads_dir(cache_dir: Path) -> Path:
    """The folder holding staged uploads until their ingest ends."""
    path = Path(cache_dir) / "uploads"
    path.mkdir(parents=True, exist_ok=True)
    return path


def stage_upload(raw: bytes, filename: str, fmt: str, name: str, cache_dir: Path) -> dict[str, str]:
    """Check format and dataset name, save the file under an unguessable token and return the ingest request."""
    if fmt not in UPLOAD_FORMATS:
        raise UploadError(f"unknown format {str(fmt)[:40]!r}; choose one of {', '.join(UPLOAD_FORMATS)}")
    try:
        store.check_name(name)
    except store.DatasetError as exc:
        raise UploadError(str(exc)[:300]) from None
    token = secrets.token_hex(16)
    path = uploads_dir(cache_dir) / f"{token}{_suffix(filename)}"
    try:
        path.write_bytes(raw)
    except OSError as exc:
        path.unlink(missing_ok=True)
        if store.disk_full(exc, path.parent):
            raise UploadError("the disk is full: no room to receive the upload; free some space, then retry") from None
        raise
    return {"token": token, "suffix": _suffix(filename), "format": fmt, "name": name, "filename": str(filename)[:200]}


def staged_path(request: dict[str, Any], cache_dir: Path) -> Path:
    """The staged file of an ingest request, refusing tokens this server did not hand out."""
    token, suffix = str(request.get("token", "")), str(request.get("suffix", ""))
    path = uploads_dir(cache_dir) / f"{token}{suffix}"
    if not TOKEN_RE.match(token) or suffix not in SUFFIXES or not path.is_file():
        raise UploadError("unknown or expired upload; upload the file again")
    return path


STALE_AFTER_S = 6 * 3600  # a staged upload older than this was left by a stopped or killed server


def discard_staged(request: dict[str, Any], cache_dir: Path) -> None:
    """Remove a request's staged file if it is still there (after a failed or killed ingest)."""
    try:
        staged_path(request, cache_dir).unlink(missing_ok=True)
    except UploadError:
        return


def sweep_stale(cache_dir: Path, now_s: float | None = None) -> int:
    """Remove staged uploads older than STALE_AFTER_S; return how many were removed."""
    cutoff = (now_s if now_s is not None else time.time()) - STALE_AFTER_S
    removed = 0
    for path in uploads_dir(cache_dir).iterdir():
        if path.is_file() and path.stat().st_mtime < cutoff:
            path.unlink(missing_ok=True)
            removed += 1
    return removed


class _Reporter(Progress):
    """Ingest progress forwarded to a callback as (fraction, label)."""

    def __init__(self, report: Callable[[float, str], None]):
        super().__init__(0, quiet=True)
        self.report = report

    def stage(self, label: str):
        """Report one stage as it starts."""
        self.report(min(self.step / max(self.total, 1), 0.95), label)
        return super().stage(label)


def ingest_staged(
    request: dict[str, Any], cache_dir: Path, data_dir: Path, report: Callable[[float, str], None]
) -> store.Dataset:
    """Ingest a staged upload as dataset request['name'] (replacing it only on success); the file is removed."""
    path = staged_path(request, cache_dir)
    source = f"upload {request.get('filename', path.name)}"
    try:
        dataset = ingest(path, request["format"], request["name"], IngestOptions(), _Reporter(report), data_dir, source)
        report(0.97, f"deriving the column files, rollups and catalog of {dataset.name}")
        queries.derive(dataset)
    except (IngestError, store.DatasetError, OSError) as exc:
        raise UploadError(" ".join(str(exc).replace(str(path), str(request.get("filename"))).split())[:500]) from None
    finally:
        path.unlink(missing_ok=True)
    report(1.0, f"ingested {dataset.meta.get('row_counts', {}).get('jobs', '?')} jobs into {dataset.name}")
    return dataset


def delete_dataset(name: str, data_dir: Path) -> None:
    """Remove dataset name from data_dir (see analytics.store.delete_dataset), as an UploadError when it cannot."""
    try:
        store.delete_dataset(name, data_dir)
    except store.DatasetError as exc:
        raise UploadError(str(exc)[:300]) from None
