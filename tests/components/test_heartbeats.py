"""Heartbeats of polled jobs: in files of the cache folder, or in Redis (several hosts and their Celery workers), and
the job id a run watches (a Celery task's id, else the job process's pid)."""

from __future__ import annotations

import os

import pytest

from components.server import heartbeats
from components.server.runs import _job_id
from components.server.settings import Settings
from tests.waiting import free_port


def _round_trip(settings: Settings) -> None:
    assert heartbeats.last_beat_s(settings, "4242") is None
    heartbeats.beat(settings, "4242", now_s=1_000_000.0)
    assert heartbeats.last_beat_s(settings, "4242") == pytest.approx(1_000_000.0)
    heartbeats.beat(settings, "../../etc/passwd")  # not a job id: ignored
    assert heartbeats.last_beat_s(settings, "../../etc/passwd") is None
    heartbeats.forget(settings, "4242")
    assert heartbeats.last_beat_s(settings, "4242") is None
    token = "0123456789abcdef0123456789abcdef"
    heartbeats.request_cancel(settings, "user:ada", token)
    assert heartbeats.cancel_requested(settings, "user:ada", token)
    assert not heartbeats.cancel_requested(settings, "user:bob", token)  # a cancel is its client's only
    heartbeats.forget_cancel(settings, "user:ada", token)
    assert not heartbeats.cancel_requested(settings, "user:ada", token)


def test_file_heartbeats_round_trip(tmp_path):
    _round_trip(Settings(cache_dir=tmp_path))
    assert os.listdir(tmp_path / "heartbeats") == []


def test_redis_heartbeats_round_trip(tmp_path, redis_url):
    _round_trip(Settings(cache_dir=tmp_path, redis_url=redis_url))
    assert not (tmp_path / "heartbeats").exists()  # nothing on this host's disk: every host reads Redis


def test_an_unreachable_redis_vouches_for_no_heartbeat_but_stops_nothing(tmp_path):
    settings = Settings(cache_dir=tmp_path, redis_url=f"redis://127.0.0.1:{free_port()}/0")
    assert heartbeats.last_beat_s(settings, "4242") is None  # the run then counts from its start


def test_a_run_watches_its_celery_task_or_its_own_process():
    from celery import Celery

    app = Celery("heartbeat-test")
    app.conf.task_always_eager = True
    task = app.task(_job_id, name="job-id")
    result = task.apply()
    assert result.get() == result.id
    assert _job_id() == str(os.getpid())
