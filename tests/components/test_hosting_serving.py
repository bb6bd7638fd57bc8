"""Production serving: JSON request logs, no debug or dev tools outside `helios serve --debug`, gunicorn settings."""

from __future__ import annotations

import base64
import json
import logging
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from components.server.access_log import LOGGER_NAME
from components.server.users import UserRecord, hash_password, save_users
from tests.waiting import DEADLINE_S, free_port, http_status, stop, wait_until_serving

ROOT = Path(__file__).resolve().parents[2]
FIELDS = {"time", "method", "path", "status", "duration_ms", "user", "remote"}


@pytest.fixture
def access_lines(caplog):
    """The JSON request-log lines written during the test, decoded."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    yield lambda: [json.loads(r.getMessage()) for r in caplog.records if r.name == LOGGER_NAME]
    logger.removeHandler(caplog.handler)


def test_every_request_writes_one_json_line(ui, access_lines):
    ui.client.get("/healthz")
    ui.client.get("/_dash-component-suites/nope/x.js")
    lines = access_lines()[-2:]
    assert [(r["method"], r["path"], r["status"]) for r in lines] == [
        ("GET", "/healthz", 200),
        ("GET", "/_dash-component-suites/nope/x.js", 404),
    ]
    assert all(set(r) == FIELDS and r["duration_ms"] >= 0 and r["remote"] == "127.0.0.1" for r in lines)


def test_helios_access_log_0_writes_no_line_per_request(small_data, tmp_path, monkeypatch, access_lines):
    from app import create_app
    from components.server.settings import Settings

    monkeypatch.setenv("HELIOS_ACCESS_LOG", "0")
    settings = Settings.from_env()
    assert settings.access_log is False
    server = create_app(Settings(data_dir=small_data, cache_dir=tmp_path / "cache", access_log=False)).server
    assert server.test_client().get("/healthz").status_code == 200
    assert access_lines() == []
    monkeypatch.setenv("HELIOS_ACCESS_LOG", "maybe")
    with pytest.raises(ValueError, match="HELIOS_ACCESS_LOG='maybe': expected 1 or 0"):
        Settings.from_env()


def test_make_run_serves_gunicorn_on_loopback_and_make_dev_the_debug_server():
    """What `make run` and `make dev` would run (`make -n`); tests/components/test_make_run_browser.py runs the
    first for real."""

    def commands(*args: str) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "PORT")}
        return subprocess.run(["make", "-n", *args], cwd=ROOT, env=env, capture_output=True, text=True).stdout

    run = commands("run")
    assert "gunicorn -c gunicorn.conf.py app:server" in run and "HELIOS_BIND_HOST=127.0.0.1 PORT=8050" in run
    assert "--debug" not in run and "helios serve" not in run
    assert "PORT=8060" in commands("run", "PORT=8060")
    dev = commands("dev", "PORT=8060")
    assert "helios serve --host 127.0.0.1 --port 8060 --debug" in dev and "gunicorn" not in dev


def test_refused_requests_are_logged_with_the_user(small_data, tmp_path, monkeypatch, access_lines):
    users = tmp_path / "users.json"
    save_users(users, {"ada": UserRecord("ada", "viewer", hash_password("s3cret-pass"))})
    monkeypatch.setenv("HELIOS_AUTH_FILE", str(users))
    monkeypatch.setenv("HELIOS_SECRET_KEY", "test-secret")
    from app import create_app
    from components.server.settings import Settings

    client = create_app(Settings(data_dir=small_data, cache_dir=tmp_path / "cache")).server.test_client()
    client.get("/cluster", headers={"Accept": "application/json"})
    auth = "Basic " + base64.b64encode(b"ada:s3cret-pass").decode()
    client.get("/cluster", headers={"Authorization": auth})
    refused, served = access_lines()[-2:]
    assert (refused["status"], refused["user"]) == (401, None)
    assert (served["status"], served["user"], served["path"]) == (200, "ada", "/cluster")


def test_the_app_has_no_debug_or_dev_tools(dash_app):
    assert not dash_app.server.debug
    assert not dash_app._dev_tools.ui and not dash_app._dev_tools.hot_reload
    assert not dash_app._dev_tools.props_check and not dash_app._dev_tools.serve_dev_bundles
    html = dash_app.server.test_client().get("/").get_data(as_text=True)
    assert ".dev.js" not in html and "_reload-hash" not in html


@pytest.mark.parametrize(("argv", "debug"), [(["serve"], False), (["serve", "--debug"], True)])
def test_only_serve_debug_turns_on_debug_mode(small_data, monkeypatch, argv, debug):
    import dash

    import cli
    from components.server import hosts

    seen = {}
    monkeypatch.setattr(dash.Dash, "run", lambda self, **kwargs: seen.update(kwargs))
    monkeypatch.setenv(hosts.LISTEN_ENV, "")  # restored after the test: `serve` announces where it listens
    assert cli.main(argv) == 0
    assert seen["debug"] is debug and seen["dev_tools_ui"] is debug and seen["host"] == "127.0.0.1"
    assert seen["dev_tools_disable_version_check"] is True  # the page's CSP refuses plotly.com: no console errors
    assert os.environ[hosts.LISTEN_ENV] == "127.0.0.1:8050"


def test_serve_refuses_anonymous_admin_off_loopback(small_data, monkeypatch, capsys):
    import dash

    import cli
    from components.server import hosts

    monkeypatch.setattr(dash.Dash, "run", lambda self, **kwargs: pytest.fail("served"))
    monkeypatch.setenv(hosts.LISTEN_ENV, "")
    monkeypatch.setenv(hosts.ANONYMOUS_ROLE_ENV, "admin")
    assert cli.main(["serve", "--host", "0.0.0.0", "--port", "9000"]) == 2
    assert "HELIOS_ANONYMOUS_ROLE=admin makes every visitor an admin" in capsys.readouterr().err


def test_the_procfile_runs_gunicorn_with_the_config_file():
    line = (ROOT / "Procfile").read_text().strip()
    assert line == "web: gunicorn -c gunicorn.conf.py app:server"
    assert "--reload" not in line and "debug" not in line


def test_gunicorn_settings_come_from_the_environment(monkeypatch):
    for name in ("PORT", "WEB_CONCURRENCY", "HELIOS_THREADS", "HELIOS_TIMEOUT", "HELIOS_BIND_HOST"):
        monkeypatch.delenv(name, raising=False)
    defaults = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    assert (defaults["bind"], defaults["workers"], defaults["threads"], defaults["timeout"]) == (
        "127.0.0.1:8050",
        2,
        4,
        120,
    )
    assert defaults["reload"] is False and defaults["accesslog"] is None
    monkeypatch.setenv("PORT", "9123")
    monkeypatch.setenv("WEB_CONCURRENCY", "5")
    monkeypatch.setenv("HELIOS_THREADS", "8")
    monkeypatch.setenv("HELIOS_TIMEOUT", "300")
    monkeypatch.setenv("HELIOS_BIND_HOST", "127.0.0.1")
    custom = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    assert (custom["bind"], custom["workers"], custom["threads"], custom["timeout"]) == ("127.0.0.1:9123", 5, 8, 300)


def test_a_bad_gunicorn_setting_names_the_variable(monkeypatch):
    monkeypatch.setenv("HELIOS_THREADS", "four")
    with pytest.raises(SystemExit, match="HELIOS_THREADS='four' is not a whole number"):
        runpy.run_path(str(ROOT / "gunicorn.conf.py"))


@pytest.mark.slow
def test_gunicorn_serves_the_app_with_json_request_logs(small_data, tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "HELIOS_BIND_HOST": "127.0.0.1",
        "WEB_CONCURRENCY": "1",
        "HELIOS_THREADS": "2",
        "HELIOS_DATA_DIR": str(small_data),
        "HELIOS_CACHE_DIR": str(tmp_path / "cache"),
    }
    env.pop("HELIOS_REDIS_URL", None)
    gunicorn = Path(sys.executable).with_name("gunicorn")
    errors = tmp_path / "gunicorn.err"
    with errors.open("w") as err:
        proc = subprocess.Popen(
            [str(gunicorn), "-c", "gunicorn.conf.py", "app:server"], cwd=ROOT, env=env, stderr=err, stdout=err
        )
        try:
            wait_until_serving(f"http://127.0.0.1:{port}/healthz", proc, errors)
            assert http_status(f"http://127.0.0.1:{port}/cluster?ds=helios-synth", timeout_s=DEADLINE_S) == 200
            assert http_status(f"http://127.0.0.1:{port}/cluster?ds=helios-synth&user={'u' * 8190}") == 414
        finally:
            stop(proc)
    lines = [json.loads(x) for x in errors.read_text().splitlines() if x.startswith("{")]
    assert {("/healthz", 200), ("/cluster", 200)} <= {(r["path"], r["status"]) for r in lines}
    assert ("/cluster", 414) not in {(r["path"], r["status"]) for r in lines}  # refused by gunicorn, not the app


def test_a_stopped_redis_degrades_to_the_local_cache(small_data, tmp_path, caplog):
    from app import create_app
    from components.server.settings import Settings

    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    app = create_app(Settings(data_dir=small_data, cache_dir=tmp_path / "cache", redis_url=url))
    client = app.server.test_client()
    caplog.set_level(logging.WARNING, logger="components.server.cache")
    from components.server import cache as query_cache

    with app.server.test_request_context():
        first = query_cache.cached("k", lambda: 41 + 1)
        again = query_cache.cached("k", lambda: pytest.fail("the local cache should have answered"))
    assert first == again == 42
    assert "serving with this worker's local cache" in caplog.text
    health = client.get("/healthz").get_json()
    assert health["status"] == "degraded"
    assert client.get("/cluster?ds=helios-synth").status_code == 200
