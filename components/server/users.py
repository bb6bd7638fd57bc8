"""The users file of the dashboard: names, roles and salted scrypt password hashes, written atomically (0600).

Format (JSON): {"version": 1, "users": {"alice": {"role": "admin", "password_hash": "scrypt:32768:8:1$..."}}}
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from werkzeug.security import check_password_hash, generate_password_hash

ROLES: tuple[str, ...] = ("admin", "viewer")
FILE_VERSION = 1
MIN_PASSWORD_CHARS = 8
MAX_PASSWORD_CHARS = 1024
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


class UsersFileError(Exception):
    """The users file is missing, malformed or cannot be written; or a name, role or password is invalid."""


@dataclass(frozen=True)
class UserRecord:
    """One user of the users file."""

    name: str
    role: str
    password_hash: str


def check_user_name(name: str) -> str:
    """Return name if it is a valid user name (1-64 letters, digits, '.', '_', '@' or '-'), else raise."""
    if not _NAME_RE.match(name or ""):
        raise UsersFileError(
            f"invalid user name {name!r}: use 1-64 letters, digits, '.', '_', '@' or '-', "
            "starting with a letter or digit"
        )
    return name


def check_role(role: str) -> str:
    """Return role if it is one of ROLES, else raise."""
    if role not in ROLES:
        raise UsersFileError(f"invalid role {role!r}: expected one of {', '.join(ROLES)}")
    return role


def check_password(password: str) -> str:
    """Return password if its length is within MIN_PASSWORD_CHARS..MAX_PASSWORD_CHARS, else raise."""
    if not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        raise UsersFileError(f"password must have {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters")
    return password


def hash_password(password: str) -> str:
    """A salted scrypt hash of password (werkzeug format `scrypt:N:r:p$salt$hex`)."""
    return generate_password_hash(check_password(password), method="scrypt")


def verify_password(record: UserRecord | None, password: str) -> bool:
    """True when password matches the record's hash (constant time); an unknown user (None) costs the same."""
    stored = record.password_hash if record is not None else _dummy_hash()
    matches = check_password_hash(stored, password)
    return matches and record is not None


@functools.cache
def _dummy_hash() -> str:
    """The hash checked for unknown users, so an unknown name costs the same scrypt work as a bad password."""
    return generate_password_hash("helios-unknown-user-placeholder", method="scrypt")


def _record(name: str, entry: object, label: str) -> UserRecord:
    if not isinstance(entry, dict) or not isinstance(entry.get("password_hash"), str):
        raise UsersFileError(f"{label}: user {name!r} needs an object with 'role' and 'password_hash'")
    try:
        return UserRecord(check_user_name(name), check_role(entry.get("role", "")), entry["password_hash"])
    except UsersFileError as exc:
        raise UsersFileError(f"{label}: {exc}") from exc


def parse_users(text: str, label: str) -> dict[str, UserRecord]:
    """Parse users-file text into name -> UserRecord, raising UsersFileError naming label on bad content."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise UsersFileError(f"{label}: not valid JSON ({where}: {exc.msg})") from exc
    users = doc.get("users") if isinstance(doc, dict) else None
    if not isinstance(users, dict):
        raise UsersFileError(f"{label}: expected an object with a 'users' object")
    return {name: _record(name, entry, label) for name, entry in users.items()}


def load_users(path: Path) -> dict[str, UserRecord]:
    """Read the users file at path, raising UsersFileError when it is missing or malformed."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise UsersFileError(f"{path}: no such users file (create it with 'helios user add')") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UsersFileError(f"{path}: cannot read users file ({exc})") from exc
    return parse_users(text, str(path))


def dump_users(users: dict[str, UserRecord]) -> str:
    """The users-file text of users (sorted by name)."""
    body = {n: {"role": u.role, "password_hash": u.password_hash} for n, u in sorted(users.items())}
    return json.dumps({"version": FILE_VERSION, "users": body}, indent=2) + "\n"


def save_users(path: Path, users: dict[str, UserRecord]) -> None:
    """Write users to path atomically (temp file in the same folder, fsync, rename) with permissions 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(dump_users(users))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def locked_users(path: Path) -> Iterator[dict[str, UserRecord]]:
    """Hold an exclusive lock on the users file while the caller edits the yielded dict, then save it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.with_name(f".{path.name}.lock")
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        users = load_users(path) if path.exists() else {}
        yield users
        save_users(path, users)
