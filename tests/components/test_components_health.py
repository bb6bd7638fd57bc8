"""/healthz: status for everyone, details for authenticated users, data folder and cache (folder or Redis)."""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import flask
import pytest

from components.server import health
from components.server.auth import AuthSettings, install_auth, parse_networks
from components.server.health import check_redis, install_health, redacted
from components.server.settings import Settings


class FakeRedisHandler(socketserver.StreamRequestHandler):
    """Answers RESP PING with +PONG and AUTH with +OK (or an error for a wrong password); records commands."""

    def _command(self) -> list[str]:
        header = self.rfile.readline()
        if not header.startswith(b"*"):
            return []
        words = []
        for _ in range(int(header[1:])):
            size = int(self.rfile.readline()[1:])
            words.append(self.rfile.read(size + 2)[:-2].decode())
        return words

    def handle(self) -> None:
        while words := self._command():
            self.server.commands.append(words)
            if words[0] == "AUTH":
                ok = words[-1] == self.server.password
                self.wfile.write(b"+OK\r\n" if ok else b"-WRONGPASS invalid username-password pair\r\n")
            elif words[0] == "PING":
                self.wfile.write(b"+PONG\r\n")


@pytest.fixture
def fake_redis() -> Iterator[socketserver.ThreadingTCPServer]:
    """A loopback fake Redis server (password 's3cret') running for one test."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), FakeRedisHandler)
    server.daemon_threads = True
    server.commands, server.password = [], "s3cret"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def closed_port() -> int:
    """A loopback port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def client_for(settings: Settings | dict, public_details: bool = True):
    """A test client of a bare Flask app serving /healthz."""
    server = flask.Flask("health-test")
    install_health(server, settings, public_details=public_details)
    return server.test_client()


@pytest.fixture
def good_settings(tmp_path) -> Settings:
    """Settings with an existing data folder and a writable cache folder."""
    (tmp_path / "data").mkdir()
    return Settings(data_dir=tmp_path / "data", cache_dir=tmp_path / "cache")


def test_anonymous_request_gets_status_only(good_settings):
    resp = client_for(good_settings, public_details=False).get("/healthz")
    assert resp.status_code == 200 and resp.get_json() == {"status": "ok"}
    assert resp.headers["Cache-Control"] == "no-store"


def test_details_report_every_check(good_settings):
    body = client_for(good_settings).get("/healthz").get_json()
    checks = body["checks"]
    assert body["status"] == "ok" and body["user"] == "anonymous"
    assert checks["process"]["ok"] and checks["process"]["pid"] > 0
    assert checks["data_dir"] == {"ok": True, "path": str(good_settings.data_dir), "datasets": 0}
    assert checks["cache"] == {"ok": True, "backend": "filesystem", "path": str(good_settings.cache_dir)}
    assert list(good_settings.cache_dir.iterdir()) == []  # the probe file is removed


def test_data_dir_counts_datasets(good_settings, write_small):
    write_small("one", good_settings.data_dir, n_jobs=20)
    body = client_for(good_settings).get("/healthz").get_json()
    assert body["checks"]["data_dir"]["datasets"] == 1


def test_unreadable_data_dir_is_degraded_but_alive(tmp_path):
    settings = Settings(data_dir=tmp_path / "missing", cache_dir=tmp_path / "cache")
    client = client_for(settings)
    resp = client.get("/healthz")
    assert resp.status_code == 200 and resp.get_json()["status"] == "degraded"
    assert "cannot list the data folder" in resp.get_json()["checks"]["data_dir"]["error"]
    assert client.get("/healthz?ready=1").status_code == 503


def test_unwritable_cache_dir_is_degraded(good_settings, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    settings = Settings(data_dir=good_settings.data_dir, cache_dir=blocker / "cache")
    body = client_for(settings).get("/healthz").get_json()
    assert body["status"] == "degraded" and "not writable" in body["checks"]["cache"]["error"]


def test_redis_ping_with_password(good_settings, fake_redis):
    port = fake_redis.server_address[1]
    settings = Settings(data_dir=good_settings.data_dir, redis_url=f"redis://:s3cret@127.0.0.1:{port}/0")
    body = client_for(settings).get("/healthz").get_json()
    cache = body["checks"]["cache"]
    assert body["status"] == "ok" and cache["ok"] and cache["backend"] == "redis"
    assert cache["url"] == f"redis://:***@127.0.0.1:{port}/0" and cache["ping_ms"] >= 0
    assert fake_redis.commands == [["AUTH", "s3cret"], ["PING"]]


def test_redis_with_user_and_wrong_password(fake_redis):
    port = fake_redis.server_address[1]
    result = check_redis(f"redis://helios:wrong@127.0.0.1:{port}")
    assert not result["ok"] and "AUTH refused: -WRONGPASS" in result["error"]
    assert fake_redis.commands == [["AUTH", "helios", "wrong"]]


def test_redis_down_is_degraded_logged_once_and_recovery_logged(good_settings, caplog):
    url = f"redis://127.0.0.1:{closed_port()}"
    client = client_for(Settings(data_dir=good_settings.data_dir, redis_url=url))
    with caplog.at_level(logging.INFO, logger="components.server.health"):
        for _ in range(3):
            resp = client.get("/healthz")
            assert resp.status_code == 200 and resp.get_json()["status"] == "degraded"
    error = resp.get_json()["checks"]["cache"]["error"]
    assert error.startswith("Redis unreachable (") and "local cache" in error
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "health degraded: cache: Redis unreachable" in warnings[0].getMessage()


def test_recovery_is_logged(caplog):
    state = {"ok": False}
    client = client_for({"cache": lambda: {"ok": state["ok"], "error": "down"}})
    with caplog.at_level(logging.INFO, logger="components.server.health"):
        assert client.get("/healthz").get_json()["status"] == "degraded"
        state["ok"] = True
        assert client.get("/healthz").get_json()["status"] == "ok"
    assert [r.getMessage() for r in caplog.records] == [
        "health degraded: cache: down",
        "health recovered: all checks pass",
    ]


def test_redis_unix_socket(tmp_path):
    path = tmp_path / "redis.sock"
    server = socketserver.ThreadingUnixStreamServer(str(path), FakeRedisHandler)
    server.commands, server.password = [], None
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert check_redis(f"unix://{path}")["ok"]
    finally:
        server.shutdown()
        server.server_close()


def test_redis_that_never_answers_times_out(monkeypatch):
    monkeypatch.setattr(health, "REDIS_TIMEOUT_S", 0.2)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        result = check_redis(f"redis://127.0.0.1:{silent.getsockname()[1]}")
    assert not result["ok"] and "timed out" in result["error"]


def test_bad_redis_scheme_is_a_failed_check():
    result = check_redis("http://127.0.0.1:6379")
    assert not result["ok"] and "unsupported Redis URL scheme 'http'" in result["error"]


def test_crashing_check_does_not_break_the_endpoint():
    def boom() -> dict:
        raise RuntimeError("disk on fire")

    resp = client_for({"data_dir": boom}).get("/healthz")
    assert resp.status_code == 200
    assert resp.get_json()["checks"]["data_dir"] == {"ok": False, "error": "RuntimeError: disk on fire"}


def test_head_request_is_answered(good_settings):
    assert client_for(good_settings).head("/healthz").status_code == 200


def test_details_env_switch(good_settings, monkeypatch):
    monkeypatch.setenv("HELIOS_HEALTH_DETAILS", "1")
    server = flask.Flask("env-test")
    install_health(server, good_settings)
    assert "checks" in server.test_client().get("/healthz").get_json()


def test_with_auth_on_details_need_a_user_even_when_public(good_settings):
    server = flask.Flask("auth-health")
    install_health(server, good_settings, public_details=True)
    install_auth(server, AuthSettings(trusted_proxies=parse_networks("127.0.0.1")))
    client = server.test_client()
    assert client.get("/healthz").get_json() == {"status": "ok"}
    body = client.get("/healthz", headers={"X-Forwarded-User": "ops"}).get_json()
    assert body["user"] == "ops" and body["checks"]["data_dir"]["ok"]


@pytest.mark.parametrize(
    "url,shown",
    [
        ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
        ("rediss://user:pw@host", "rediss://user:***@host"),
        ("redis://host:6379", "redis://host:6379"),
    ],
)
def test_redacted(url, shown):
    assert redacted(url) == shown


def test_default_data_dir_is_the_store_default(tmp_path, monkeypatch):
    monkeypatch.setenv("HELIOS_DATA_DIR", str(tmp_path))
    checks = health.default_checks(Settings(cache_dir=tmp_path / "c"))
    assert checks["data_dir"]()["path"] == str(Path(tmp_path))
