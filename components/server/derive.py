"""Derived files written in the background while the server runs: a dataset version that lacks a derived part (each
cluster's rollups, which the commands leave to the server) gets it from a spawned process, so that no web worker keeps
the memory the build takes; the first process builds, the others wait on the part's lock. Only a served process
(gunicorn's workers, after enable()) starts such builds: tests and one-off scripts compute what is missing instead."""

from __future__ import annotations

import logging
import multiprocessing
import threading

from analytics import queries, store

log = logging.getLogger(__name__)
_started: set[tuple[str, str]] = set()  # (dataset folder, version) whose build this process started
_guard = threading.Lock()
_enabled = threading.Event()


def enable() -> None:
    """Let this process start background builds (a server's worker)."""
    _enabled.set()


def derive_in_child(ds: store.Dataset) -> None:
    """Write ds's missing derived files in a spawned process and wait for it (raises when it fails)."""
    if queries.is_derived(ds):
        return
    child = multiprocessing.get_context("spawn").Process(target=queries.derive, args=(ds,), name="helios-derive")
    child.start()
    child.join()
    if child.exitcode != 0:
        raise RuntimeError(f"writing the derived files failed (exit code {child.exitcode})")


def soon(ds: store.Dataset) -> None:
    """Start derive_in_child(ds) in a background thread, once per dataset version in this process, when this process
    is enabled and ds lacks a derived part."""
    if not _enabled.is_set() or queries.is_derived(ds):
        return
    key = (str(ds.path), ds.version)
    with _guard:
        if key in _started:
            return
        _started.add(key)
    threading.Thread(target=_quietly, args=(ds,), name="helios-derive", daemon=True).start()


def _quietly(ds: store.Dataset) -> None:
    try:
        derive_in_child(ds)
    except Exception as exc:  # noqa: BLE001 - derived files only save time; requests compute without them
        log.warning("dataset %s: derived files not written in the background: %s", ds.name, exc)
