"""Shared test set-up: every test run gets its own data and cache folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """A fresh, empty HELIOS_DATA_DIR for one test."""
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("HELIOS_DATA_DIR", str(root))
    return root


@pytest.fixture(scope="session")
def shared_data_dir():
    """The shared real-data folder (`$HELIOS_SHARED_DIR/data`, default `../shared/data` beside the repo)."""
    root = Path(os.environ.get("HELIOS_SHARED_DIR", REPO_ROOT.parent / "shared"))
    data = root / "data"
    assert data.is_dir(), f"shared data folder {data} is missing: set HELIOS_SHARED_DIR"
    return data
