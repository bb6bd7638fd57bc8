"""components.server.derive: a served process writes the derived parts a dataset version lacks (each cluster's
rollups, which the commands leave out) in a spawned child, once per version; any other process starts nothing."""

from __future__ import annotations

import threading

import pytest

from analytics import queries, store
from analytics.queries import rollups
from components.server import derive
from tests.analytics.conftest import small_jobs, small_vc_gpus


@pytest.fixture
def commanded(tmp_path) -> store.Dataset:
    """A two-cluster dataset derived as the commands derive it (without each cluster's rollups)."""
    ds = store.write_dataset("two", small_jobs(), small_vc_gpus(), {}, root=tmp_path)
    queries.derive(ds, by_cluster=False)
    assert not queries.is_derived(ds)
    return ds


def _builds() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "helios-derive"]


def test_a_served_process_writes_a_missing_part_once_in_the_background(commanded, monkeypatch):
    monkeypatch.setattr(derive, "_enabled", threading.Event())
    derive.enable()
    derive.soon(commanded)
    derive.soon(commanded)
    started = _builds()
    assert len(started) == 1
    started[0].join(timeout=120)
    assert queries.is_derived(commanded)
    assert any(store.derived_path(commanded, rollups.CLUSTER_ROLLUPS_PART).iterdir())


def test_any_other_process_starts_nothing(commanded):
    derive.soon(commanded)
    assert not _builds()
    assert not queries.is_derived(commanded)
