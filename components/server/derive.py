"""Derived files written while the server runs: a dataset version that lacks a derived part (each cluster's rollups,
which the commands leave out: analytics.commands.common.derive) gets it from a spawned process, so that no web worker
keeps the memory the build takes; the first process builds, the others wait on the part's lock. Only a served
process (a gunicorn worker, after enable()) starts such builds, at most once per dataset version: tests, scripts and
the development server compute what is missing instead, and a build that failed is not tried again by that worker
(the next worker or version tries; requests meanwhile compute)."""

from __future__ import annotations

import logging
import multiprocessing
import threading

from analytics import queries, store
from analytics.queries import colstore

log = logging.getLogger(__name__)
_settled: set[tuple[str, str]] = set()  # (dataset folder, version) found derived or whose build this process started
_guard = threading.Lock()
_enabled = threading.Event()


def enable() -> None:
    """Let this process start builds (a server's worker)."""
    _enabled.set()


def warm(ds: store.Dataset) -> None:
    """Make ds ready to serve: wait for a build when it lacks its column files, else build what it lacks in the
    background; then map its columns."""
    if not store.derived_path(ds, colstore.COLUMNS_PART).is_dir() and _claim(ds):
        _derive_in_child(ds)
    else:
        soon(ds)
    colstore.columns(ds)


def soon(ds: store.Dataset) -> None:
    """Build what ds lacks in a background thread, once per dataset version in this process, when enabled."""
    if _claim(ds):
        threading.Thread(target=_quietly, args=(ds,), name="helios-derive", daemon=True).start()


def _claim(ds: store.Dataset) -> bool:
    """Whether this process is enabled and ds's version is neither found derived nor being built here (it is then
    marked, so that a request looks at a version's folders once)."""
    key = (str(ds.path), ds.version)
    if not _enabled.is_set() or key in _settled:
        return False
    derived = queries.is_derived(ds)
    with _guard:
        if key in _settled:
            return False
        _settled.add(key)
    return not derived


def _derive_in_child(ds: store.Dataset) -> None:
    """Write ds's missing derived files in a spawned process and wait for it (raises when it fails)."""
    child = multiprocessing.get_context("spawn").Process(target=queries.derive, args=(ds,), name="helios-derive")
    child.start()
    child.join()
    if child.exitcode != 0:
        raise RuntimeError(f"writing the derived files failed (exit code {child.exitcode})")


def _quietly(ds: store.Dataset) -> None:
    """_derive_in_child, its failure logged (derived files only save time)."""
    try:
        _derive_in_child(ds)
    except Exception as exc:  # noqa: BLE001 - requests compute without the derived files
        log.warning("dataset %s: derived files not written in the background: %s", ds.name, exc)
