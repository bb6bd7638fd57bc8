"""gunicorn.conf.py: settings from the environment and the per-worker warm-up of the default dataset."""

from __future__ import annotations

import datetime as dt
import importlib.util
import logging
from pathlib import Path

import polars as pl
import pytest

from analytics import store
from analytics.queries import colstore

CONF = Path(__file__).resolve().parents[1] / "gunicorn.conf.py"


def _load_conf():
    spec = importlib.util.spec_from_file_location("helios_gunicorn_conf", CONF)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("PORT", "9123")
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    conf = _load_conf()
    assert conf.bind.endswith(":9123") and conf.workers == 3 and conf.reload is False
    monkeypatch.setenv("HELIOS_THREADS", "many")
    with pytest.raises(SystemExit, match="HELIOS_THREADS"):
        _load_conf()


def _tiny_dataset(name: str) -> None:
    t0 = dt.datetime(2020, 4, 1)
    jobs = pl.DataFrame(
        {"cluster": ["C"], "job_id": [1], "vc": ["v"], "gpu_num": [1], "submit_time": [t0], "duration": [5]}
    )
    caps = pl.DataFrame({"cluster": ["C"], "vc": ["v"], "date": [t0.date()], "gpus": [8]})
    store.write_dataset(name, jobs, caps, {})


def test_warm_up_loads_the_default_dataset(data_root, monkeypatch, caplog):
    _tiny_dataset("warm")
    monkeypatch.setenv("HELIOS_DEFAULT_DATASET", "warm")
    colstore.clear()
    calls = []
    monkeypatch.setattr(colstore, "load", lambda ds: calls.append(ds.name) or object())
    _load_conf()._warm_default_dataset(logging.getLogger("test.warm"))
    assert calls == ["warm"]


def test_warm_up_of_a_missing_dataset_only_logs(data_root, monkeypatch, caplog):
    monkeypatch.setenv("HELIOS_DEFAULT_DATASET", "absent")
    with caplog.at_level(logging.WARNING, logger="test.warm"):
        _load_conf()._warm_default_dataset(logging.getLogger("test.warm"))
    assert "warm-up of dataset 'absent' skipped" in caplog.text
