"""Shared test set-up: every test run gets its own data and cache folders."""

from __future__ import annotations

import pytest


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """A fresh, empty HELIOS_DATA_DIR for one test."""
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("HELIOS_DATA_DIR", str(root))
    return root
