"""The two servers as users start them, over real sockets: `make run`'s gunicorn (gunicorn.conf.py) and `helios
serve` refuse a DNS-rebinding-style request (a loopback connection naming a foreign Host) and serve a normal one,
answer /console without a debugger, and refuse to start with anonymous admin on an address that is not loopback."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from components.server import hosts
from tests.waiting import DEADLINE_S, free_port, stop, wait_until_serving

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "app:server"]
HELIOS = [sys.executable, "-m", "cli"]


def _get(port: int, path: str, host: str, address: str = "127.0.0.1") -> tuple[int, bytes]:
    """GET path over a connection to address:port, sending host as the Host header (as a rebinding page's browser
    would: the connection is the victim's loopback, the name the attacker's)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family) as sock:
        sock.settimeout(30)
        sock.connect((address, port))
        conn = http.client.HTTPConnection(address, port, timeout=30)
        conn.sock = sock
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()


def _env(data: Path, cache: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "HELIOS_DATA_DIR": str(data), "HELIOS_CACHE_DIR": str(cache), **extra}
    for name in ("HELIOS_REDIS_URL", "HELIOS_AUTH_FILE", hosts.ALLOWED_HOSTS_ENV, hosts.LISTEN_ENV):
        env.pop(name, None)
    return env


@contextmanager
def _serving(cmd: list[str], env: dict[str, str], port: int, log: Path) -> Iterator[subprocess.Popen]:
    """Run cmd until it answers /healthz on port, then yield it; stop it afterwards."""
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until_serving(f"http://127.0.0.1:{port}/healthz", proc, log)
            yield proc
        finally:
            stop(proc)


def _refused_and_served(port: int) -> None:
    for foreign in ("attacker.example", f"attacker.example:{port}", f"127.0.0.1.attacker.example:{port}"):
        for path in ("/", "/data", "/_dash-layout", "/healthz"):
            status, body = _get(port, path, foreign)
            assert status == 400 and b"HELIOS_ALLOWED_HOSTS" in body, (foreign, path, status)
    for name in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST.:{port}", "localhost"):
        status, body = _get(port, "/", name)
        assert status == 200 and b"_dash-config" in body, (name, status)


@pytest.fixture
def small_folders(small_data, tmp_path):
    return small_data, tmp_path / "cache"


def test_make_runs_gunicorn_refuses_a_foreign_host_serves_loopback_and_has_no_debugger(small_folders, tmp_path):
    port = free_port()
    env = _env(*small_folders, HELIOS_BIND_HOST="127.0.0.1", PORT=str(port), HELIOS_ANONYMOUS_ROLE="admin")
    env["WEB_CONCURRENCY"] = "1"
    with _serving(GUNICORN, env, port, tmp_path / "gunicorn.log"):
        _refused_and_served(port)
        status, body = _get(port, "/console", f"127.0.0.1:{port}")
        assert status == 404 and b"Werkzeug" not in body and b"EVALEX" not in body and b"debugger" not in body
        _, page = _get(port, "/", f"127.0.0.1:{port}")
        assert b'"ui":false' in page and b'"hot_reload"' not in page  # no dev tools
    assert "refused Host 'attacker.example'" in (tmp_path / "gunicorn.log").read_text()


def test_gunicorn_on_ipv6_loopback_answers_its_bracketed_name(small_folders, tmp_path):
    port = free_port()
    env = _env(*small_folders, HELIOS_ANONYMOUS_ROLE="admin", WEB_CONCURRENCY="1")
    cmd = [*GUNICORN, "--bind", f"[::1]:{port}", "--bind", f"127.0.0.1:{port}"]
    with _serving(cmd, env, port, tmp_path / "gunicorn.log"):
        assert _get(port, "/healthz", f"[::1]:{port}", address="::1")[0] == 200
        assert _get(port, "/healthz", f"[0:0::1]:{port}", address="::1")[0] == 200
        assert _get(port, "/healthz", f"[::2]:{port}", address="::1")[0] == 400


def test_helios_serve_refuses_a_foreign_host_and_serves_loopback(small_folders, tmp_path):
    port = free_port()
    env = _env(*small_folders, HELIOS_ANONYMOUS_ROLE="admin")
    with _serving([*HELIOS, "serve", "--port", str(port)], env, port, tmp_path / "serve.log"):
        _refused_and_served(port)
        assert _get(port, "/console", f"127.0.0.1:{port}")[0] == 404  # without --debug, no debugger either


def _refused_to_start(cmd: list[str], env: dict[str, str]) -> tuple[int, str]:
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=DEADLINE_S)
    return proc.returncode, proc.stdout + proc.stderr


ANONYMOUS_ADMIN_OFF_LOOPBACK = "HELIOS_ANONYMOUS_ROLE=admin makes every visitor an admin"


def test_anonymous_admin_on_an_address_that_is_not_loopback_does_not_start(small_folders):
    port = free_port()
    env = _env(*small_folders, HELIOS_ANONYMOUS_ROLE="admin", PORT=str(port), WEB_CONCURRENCY="1")
    code, out = _refused_to_start(GUNICORN, {**env, "HELIOS_BIND_HOST": "0.0.0.0"})
    assert code != 0 and ANONYMOUS_ADMIN_OFF_LOOPBACK in out and f"listens on 0.0.0.0:{port}" in out, out
    assert "Booting worker" not in out  # refused by the master, before any worker loaded the app
    # A bind given on gunicorn's command line counts too: the app is told where the sockets really are.
    code, out = _refused_to_start([*GUNICORN, "--bind", f"0.0.0.0:{port}"], {**env, "HELIOS_BIND_HOST": "127.0.0.1"})
    assert code != 0 and f"listens on 0.0.0.0:{port}" in out, out
    code, out = _refused_to_start([*HELIOS, "serve", "--host", "0.0.0.0", "--port", str(port)], env)
    assert code == 2 and ANONYMOUS_ADMIN_OFF_LOOPBACK in out, out
