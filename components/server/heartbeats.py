"""Heartbeats of background jobs: every poll of a job's result by its page marks the job as still wanted, so that a
run nobody polls any more (its tab closed) can be stopped; and cancel requests, which reach a run even when its page
does not know the job's id yet. Kept in the shared Redis when one is configured (the Celery worker may run on another
host), else in files of the host's private cache folder."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from pathlib import Path

import flask

from components.server.settings import Settings

log = logging.getLogger(__name__)

DASH_UPDATE = "/_dash-update-component"
BEAT_TTL_S = 24 * 3600  # a heartbeat older than this is swept
_JOB_RE = re.compile(r"^[A-Za-z0-9-]{1,64}$")  # a process id or a Celery task id
_REDIS_PREFIX = "helios:heartbeat:"


def _folder(settings: Settings) -> Path:
    folder = Path(settings.cache_dir) / "heartbeats"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def _redis(settings: Settings):
    import redis

    return redis.Redis.from_url(settings.redis_url, socket_timeout=2, socket_connect_timeout=2)


def beat(settings: Settings, job: str, now_s: float | None = None) -> None:
    """Record that somebody polled job just now (ignored for a malformed job id)."""
    if not _JOB_RE.match(job):
        return
    now_s = time.time() if now_s is None else now_s
    if settings.redis_url:
        _redis(settings).set(_REDIS_PREFIX + job, repr(now_s), ex=BEAT_TTL_S)
        return
    path = _folder(settings) / job
    path.touch()
    os.utime(path, (now_s, now_s))


def last_beat_s(settings: Settings, job: str) -> float | None:
    """When job was last polled (epoch seconds), None when it never was or the store cannot say."""
    if not _JOB_RE.match(job):
        return None
    try:
        if settings.redis_url:
            value = _redis(settings).get(_REDIS_PREFIX + job)
            return float(value) if value is not None else None
        return (_folder(settings) / job).stat().st_mtime
    except FileNotFoundError:
        return None
    except Exception as exc:  # a stalled Redis must not stop the runs it cannot vouch for
        log.warning("heartbeat of job %s unreadable: %s", job, exc)
        return None


def forget(settings: Settings, job: str) -> None:
    """Drop job's heartbeat (its run ended), and any file heartbeat older than BEAT_TTL_S."""
    if not _JOB_RE.match(job):
        return
    if settings.redis_url:
        try:
            _redis(settings).delete(_REDIS_PREFIX + job)
        except Exception as exc:
            log.warning("heartbeat of job %s not dropped: %s", job, exc)
        return
    folder = _folder(settings)
    (folder / job).unlink(missing_ok=True)
    cutoff_s = time.time() - BEAT_TTL_S
    for stale in folder.iterdir():
        try:
            if stale.stat().st_mtime < cutoff_s:
                stale.unlink(missing_ok=True)
        except FileNotFoundError:
            continue


def _cancel_name(client: str, token: str) -> str:
    """The heartbeat name under which client's cancel of its run token is kept (a digest: no user text in a path)."""
    return "cancel-" + hashlib.sha256(f"{client}\n{token}".encode()).hexdigest()[:40]


def request_cancel(settings: Settings, client: str, token: str) -> None:
    """Record that client cancelled its run token (its job may not have started yet)."""
    beat(settings, _cancel_name(client, token))


def cancel_requested(settings: Settings, client: str, token: str) -> bool:
    """Whether client cancelled its run token."""
    return last_beat_s(settings, _cancel_name(client, token)) is not None


def forget_cancel(settings: Settings, client: str, token: str) -> None:
    """Drop client's cancel of its run token (the run ended)."""
    forget(settings, _cancel_name(client, token))


def _polled_job() -> str | None:
    """The background job a Dash poll asks about, when its signed handle verifies for this page load."""
    if flask.request.path != DASH_UPDATE or "job" not in flask.request.args:
        return None
    from dash._callback import _read_request_handles  # Dash's own check of the handle it signed

    _, job = _read_request_handles()
    return job


def _beat_on_poll() -> None:
    job = _polled_job()
    if job is None:
        return
    settings: Settings = flask.current_app.config["HELIOS_SETTINGS"]
    try:
        beat(settings, job)
    except Exception as exc:  # a failed heartbeat must not fail the poll itself
        log.warning("heartbeat of job %s not recorded: %s", job, exc)


def install_heartbeats(server: flask.Flask) -> None:
    """Record a heartbeat for every poll of a background job's result (after the access rules)."""
    server.before_request(_beat_on_poll)
