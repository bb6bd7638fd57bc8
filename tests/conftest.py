"""Shared test set-up: every test run gets its own data and cache folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.ingest.bundled import PUBLIC_DIR

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """A fresh, empty HELIOS_DATA_DIR for one test."""
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("HELIOS_DATA_DIR", str(root))
    return root


@pytest.fixture(scope="session")
def public_data_dir():
    """The real public files bundled in the repository (`data/public`, sources in `data/SOURCES.md`)."""
    return PUBLIC_DIR
