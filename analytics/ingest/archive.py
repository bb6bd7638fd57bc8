"""Safe extraction of zip members: no path escapes, and a size limit checked as declared and while reading."""

from __future__ import annotations

import stat
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from analytics.ingest.parse import IngestError

DEFAULT_MAX_MEMBER_BYTES = 2 * 1024**3
MAX_TOTAL_BYTES = 4 * 1024**3  # all members together, uncompressed
MAX_MEMBERS = 10_000
MAX_RATIO = 200  # uncompressed / compressed size of one member (CSV traces compress 5-20x; zip bombs 1,000x+)
_CHUNK_BYTES = 1 << 20
_SUPPORTED_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
_ENCRYPTED_FLAG = 0x1


def member_path(name: str, label: str) -> PurePosixPath:
    """The relative path of a zip member, raising IngestError when it is absolute or climbs with `..`."""
    posix = name.replace("\\", "/")
    path = PurePosixPath(posix)
    drive_letter = len(posix) > 1 and posix[1] == ":"
    if path.is_absolute() or drive_letter or ".." in path.parts:
        raise IngestError(f"{label}: member {name!r} escapes the extraction folder (absolute or '..' path)")
    return path


def check_member(info: zipfile.ZipInfo, label: str) -> None:
    """Raise IngestError for a member that escapes the folder, is a symlink, is encrypted or unreadable."""
    member_path(info.filename, label)
    if stat.S_ISLNK(info.external_attr >> 16):
        raise IngestError(f"{label}: member {info.filename!r} is a symbolic link (not extracted)")
    if info.flag_bits & _ENCRYPTED_FLAG:
        raise IngestError(f"{label}: member {info.filename!r} is encrypted (zip passwords are not supported)")
    if info.compress_type not in _SUPPORTED_METHODS:
        method = info.compress_type
        raise IngestError(f"{label}: member {info.filename!r} uses unsupported compression {method}")


def copy_limited(src: BinaryIO, dst: BinaryIO, max_bytes: int, label: str) -> int:
    """Copy src to dst and return the byte count, raising IngestError once more than max_bytes are read."""
    total = 0
    while chunk := src.read(_CHUNK_BYTES):
        total += len(chunk)
        if total > max_bytes:
            raise IngestError(f"{label}: more than {max_bytes} bytes uncompressed (limit --max-member-bytes)")
        dst.write(chunk)
    return total


def open_zip(path: Path) -> zipfile.ZipFile:
    """Open a zip file and check every member, raising IngestError when unreadable or unsafe."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise IngestError(f"{path}: cannot read zip file ({exc})") from exc
    try:
        for info in archive.infolist():
            check_member(info, f"{path}")
        check_totals(archive.infolist(), f"{path}")
    except IngestError:
        archive.close()
        raise
    return archive


def check_totals(infos: list[zipfile.ZipInfo], label: str) -> None:
    """Raise IngestError when an archive has too many members, too much data or a member that expands too much
    (zipfile stops each member at its declared size, so the declared sizes bound what reading yields)."""
    if len(infos) > MAX_MEMBERS:
        raise IngestError(f"{label}: {len(infos)} members (at most {MAX_MEMBERS})")
    total = sum(info.file_size for info in infos)
    if total > MAX_TOTAL_BYTES:
        raise IngestError(f"{label}: {total} bytes uncompressed in all (at most {MAX_TOTAL_BYTES})")
    for info in infos:
        if info.file_size > MAX_RATIO * max(info.compress_size, 1) and info.file_size > 1024**2:
            ratio = info.file_size // max(info.compress_size, 1)
            raise IngestError(f"{label}: member {info.filename!r} expands {ratio}x (at most {MAX_RATIO}x): refused")


def extract_members(
    archive: zipfile.ZipFile,
    names: list[str],
    target: Path,
    max_member_bytes: int,
    label_of: Callable[[str], str],
) -> None:
    """Extract the named members under target, refusing any member above max_member_bytes uncompressed."""
    for name in names:
        info = archive.getinfo(name)
        label = label_of(name)
        if info.file_size > max_member_bytes:
            raise IngestError(
                f"{label}: declared size {info.file_size} bytes exceeds the limit of "
                f"{max_member_bytes} bytes "
                "(--max-member-bytes)"
            )
        dest = target / member_path(name, label)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            with archive.open(info) as src, dest.open("wb") as dst:
                copy_limited(src, dst, max_member_bytes, label)
        except (OSError, zipfile.BadZipFile, EOFError) as exc:
            raise IngestError(f"{label}: cannot extract ({exc})") from exc
