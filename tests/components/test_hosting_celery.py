"""Several hosts behave as one: two gunicorn processes share the Redis query cache and the Celery background jobs.

Needs `redis-server` on PATH (Debian package redis-server): skipped without it unless REQUIRE_REDIS=1 (CI sets it).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.shell import controls
from components.whatif.state import default_form, form_to_config
from sim.scenario import config_to_dict
from tests import system
from tests.waiting import free_port, wait_for, wait_until_serving

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def _http(url: str, body: dict | None = None, timeout_s: float = 30) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class Processes:
    """Processes started by a test, stopped (TERM, then KILL) at its end."""

    def __init__(self, logs: Path):
        self.logs, self.procs = logs, []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        """Start argv with its output in logs/<name>.log."""
        out = (self.logs / f"{name}.log").open("w")
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        """Stop every started process group, newest first."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.fixture
def cluster(small_data, tmp_path) -> Iterator[dict]:
    """A local Redis, one Celery worker and two gunicorn hosts (one worker process each) over the small data."""
    system.require_program("Redis", "redis-server")
    procs = Processes(tmp_path)
    redis_port, ports = free_port(), (free_port(), free_port())
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    env = {
        **os.environ,
        "HELIOS_REDIS_URL": redis_url,
        "HELIOS_DATA_DIR": str(small_data),
        "HELIOS_SECRET_KEY": "shared-test-secret",
        "HELIOS_BG_INTERVAL_MS": "250",
        "HELIOS_CACHE_TIMEOUT_S": "100",
        "HELIOS_BIND_HOST": "127.0.0.1",
        "WEB_CONCURRENCY": "1",
        "HELIOS_THREADS": "2",
    }
    env.pop("HELIOS_AUTH_FILE", None)
    try:
        redis_argv = ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", ""]
        procs.start("redis", [*redis_argv, "--appendonly", "no"], env)
        worker_env = {**env, "HELIOS_CACHE_DIR": str(tmp_path / "worker-cache")}
        celery_argv = [
            str(BIN / "celery"),
            "-A",
            "components.commands.celery_worker",
            "worker",
            "-P",
            "threads",
            "-c",
            "2",
        ]
        procs.start("celery", [*celery_argv, "--without-gossip", "--without-mingle", "-l", "INFO"], worker_env)
        for name, port in zip(("a", "b"), ports, strict=True):
            host_env = {**env, "PORT": str(port), "HELIOS_CACHE_DIR": str(tmp_path / f"{name}-cache")}
            procs.start(f"host-{name}", [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "app:server"], host_env)
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        for url in urls:
            wait_until_serving(url + "/healthz")
        yield {"a": urls[0], "b": urls[1], "redis_url": redis_url, "logs": tmp_path}
    finally:
        procs.stop_all()


def _callback(url: str, payload: dict, query: str = "") -> dict:
    status, body = _http(f"{url}/_dash-update-component{query}", payload)
    assert status == 200, body[:500]
    return json.loads(body)


def _router(path: str, search: str) -> dict:
    return {
        "output": ".._pages_content.children..._pages_store.data..",
        "outputs": [{"id": "_pages_content", "property": "children"}, {"id": "_pages_store", "property": "data"}],
        "inputs": [
            {"id": "_pages_location", "property": "pathname", "value": path},
            {"id": "_pages_location", "property": "search", "value": search},
        ],
        "state": [],
        "changedPropIds": ["_pages_location.pathname"],
    }


def _first_spec(node) -> dict:
    """The data of the first figure card's spec store in a layout (as JSON)."""
    if isinstance(node, list):
        found = [_first_spec(n) for n in node]
        return next((f for f in found if f), {})
    if not isinstance(node, dict) or "props" not in node:
        return {}
    cid = node["props"].get("id")
    if isinstance(cid, dict) and cid.get("type") == "graph-spec":
        return node["props"]["data"]
    return next((f for f in (_first_spec(v) for v in node["props"].values()) if f), {})


def test_two_hosts_share_the_redis_query_cache(cluster):
    import redis

    layout = _callback(cluster["a"], _router("/cluster", "?ds=helios-synth"))["response"]["_pages_content"]
    spec = _first_spec(layout["children"])
    assert spec, "no figure card on the page"
    payload = controls.figure_request(spec)
    from_a = _callback(cluster["a"], payload)
    client = redis.Redis.from_url(cluster["redis_url"])
    keys = client.keys("helios:*")
    assert keys, "host A wrote nothing to the shared cache"
    wait_for(lambda: max(client.ttl(k) for k in keys) <= 98, "host A's entries 2 s older")  # 100 s when written
    from_b = _callback(cluster["b"], payload)
    assert from_b == from_a
    # Host B answered from the entries host A wrote: it rewrote none of them (their TTLs kept running down).
    assert max(client.ttl(k) for k in keys) <= 98


def _end_id(url: str) -> str:
    status, body = _http(url + "/whatif")
    assert status == 200
    config = re.search(rb'<script id="_dash-config" type="application/json">(.*?)</script>', body, re.S)
    return json.loads(config.group(1))["end_id"]


def _background_payload(url: str, config: dict) -> dict:
    deps = json.loads(_http(url + "/_dash-dependencies")[1])
    dep = next(d for d in deps if d["inputs"] == [{"id": "whatif-config", "property": "data"}])
    outputs = []
    for part in dep["output"].strip(".").split("..."):
        cid, prop = part.split(".", 1)
        outputs.append({"id": cid, "property": prop.split("@")[0]})
    return {
        "output": dep["output"],
        "outputs": outputs,
        "inputs": [{"id": "whatif-config", "property": "data", "value": {"config": config, "nonce": time.time()}}],
        "state": [],
        "changedPropIds": ["whatif-config.data"],
    }


def test_a_whatif_run_queued_on_one_host_is_collected_on_the_other(cluster):
    form = default_form("helios-synth", "Earth", "2020-04-15", "2020-04-20")
    form["policies"] = ["fifo", "sjf"]
    payload = _background_payload(cluster["a"], config_to_dict(form_to_config(form)))
    end_id = _end_id(cluster["a"])
    handles = _callback(cluster["a"], payload, f"?endId={end_id}")
    assert {"cacheKey", "job"} <= set(handles), handles
    query = "?" + urllib.parse.urlencode({"endId": end_id, "cacheKey": handles["cacheKey"], "job": handles["job"]})

    def result() -> dict | None:
        out = _callback(cluster["b"], payload, query)
        return out if "response" in out else None

    out = wait_for(result, "the Celery worker's result of the scenario, asked of host B", interval_s=0.25)
    status = out["response"]["whatif-status"]["children"]
    assert "fifo" in json.dumps(out["response"]["whatif-results"]) and status, out["response"].keys()
    assert re.search(r"Task background_callback_\w+\[[-\w]+\] succeeded", (cluster["logs"] / "celery.log").read_text())
