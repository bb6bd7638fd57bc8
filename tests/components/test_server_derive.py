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


@pytest.fixture
def served(monkeypatch) -> None:
    """This process as a served worker (enabled), with no build started yet."""
    monkeypatch.setattr(derive, "_enabled", threading.Event())
    monkeypatch.setattr(derive, "_settled", set())
    derive.enable()


def test_a_served_process_writes_a_missing_part_once_in_the_background(commanded, served):
    derive.soon(commanded)
    derive.soon(commanded)
    started = _builds()
    assert len(started) == 1
    started[0].join(timeout=120)
    assert queries.is_derived(commanded)
    assert any(store.derived_path(commanded, rollups.CLUSTER_ROLLUPS_PART).iterdir())


def test_the_warm_up_maps_the_columns_at_once_and_leaves_the_missing_part_to_one_background_build(
    commanded, served, monkeypatch
):
    mapped = []
    monkeypatch.setattr(derive.colstore, "columns", lambda ds: mapped.append(ds.name))
    derive.warm(commanded)
    derive.soon(commanded)  # a request meeting the same version meanwhile
    started = _builds()
    assert mapped == ["two"] and len(started) == 1
    started[0].join(timeout=120)
    assert queries.is_derived(commanded)


def test_any_other_process_starts_nothing(commanded):
    derive.soon(commanded)
    assert not _builds()
    assert not queries.is_derived(commanded)
