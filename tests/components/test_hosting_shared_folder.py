"""Several web hosts on one dataset folder (a shared file system): the first to start derives the dataset's files
once, and every host serves the same numbers, whole-dataset and one-cluster answers from the rollups (once written)
and other filtered ones from the shared column files."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from analytics import queries, store
from analytics.filters import empty_state
from components.shell import controls
from tests.components.test_hosting_celery import Processes, _http
from tests.waiting import free_port, wait_for, wait_until_serving

CHARTS = ("vc_util", "monthly", "duration_gpu", "conc_gpu")


def _figure(url: str, name: str, state: dict) -> dict:
    """A chart's figure as the page's graph callback returns it."""
    body = controls.figure_request({"name": name, "state": state})
    status, raw = _http(url + "/_dash-update-component", body, timeout_s=120)
    assert status == 200, raw[:300]
    return controls.figure_of(json.loads(raw), name)


@pytest.mark.slow
def test_two_hosts_on_one_folder_derive_once_and_serve_the_same_numbers(tmp_path, write_small):
    shared = tmp_path / "shared"
    write_small("helios-synth", shared, n_jobs=20_000)
    ds = store.open_dataset("helios-synth", shared)
    assert not queries.is_derived(ds)
    procs = Processes(tmp_path)
    ports = (free_port(), free_port())
    try:
        for name, port in zip("ab", ports, strict=True):
            env = {
                **os.environ,
                "HELIOS_DATA_DIR": str(shared),
                "HELIOS_CACHE_DIR": str(tmp_path / f"{name}-cache"),
                "HELIOS_BIND_HOST": "127.0.0.1",
                "PORT": str(port),
                "WEB_CONCURRENCY": "1",
                "HELIOS_THREADS": "2",
            }
            env.pop("HELIOS_REDIS_URL", None)
            gunicorn = str(Path(sys.executable).with_name("gunicorn"))
            procs.start(f"host-{name}", [gunicorn, "-c", "gunicorn.conf.py", "app:server"], env)
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        for url in urls:
            wait_until_serving(url + "/healthz")
        whole, earth = empty_state("helios-synth"), {**empty_state("helios-synth"), "clusters": ["Earth"]}
        for chart in CHARTS:
            (a_whole, b_whole), (a_earth, b_earth) = ([_figure(url, chart, s) for url in urls] for s in (whole, earth))
            assert a_whole == b_whole and a_earth == b_earth, chart
            assert a_whole != a_earth, chart  # the filter was applied
            assert any(trace.get("x") or trace.get("y") for trace in a_whole["data"]), chart
        wait_for(lambda: queries.is_derived(ds), "each cluster's rollups, written by the hosts in the background")
    finally:
        procs.stop_all()
    assert queries.is_derived(ds)
    derived = store.derived_path(ds, "columns").parent
    assert sorted(p.name for p in derived.iterdir() if not p.name.endswith(".lock")) == sorted(queries.DERIVED_PARTS)
