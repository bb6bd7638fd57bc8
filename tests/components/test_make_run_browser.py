"""`make run` as a new user meets it, in Chromium: every page of the navigation and a job page, over the bundled
datasets, without a console error, without Dash's dev tools and without a request to anywhere but the server.

The server is `make run` itself (gunicorn with gunicorn.conf.py on loopback), over $HELIOS_DATA_DIR (default ./data,
which `make test` fills); skipped when the demo dataset is not there, failed instead with REQUIRE_DEMO=1.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from analytics import store
from components.shell.controls import NAV_LINKS, job_href
from tests.waiting import open_settled, wait_until_serving

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("HELIOS_DATA_DIR", ROOT / "data"))
DEV_TOOLS = ".dash-debug-menu__outer, .dash-debug-menu, .dash-fe-error__title"


def _demo() -> store.Dataset:
    try:
        return store.open_dataset(store.DEFAULT_DATASET, DATA_DIR)
    except store.DatasetError as exc:
        reason = f"`make run` serves the demo dataset, not in {DATA_DIR}: {exc} (run `make demo`)"
        if os.environ.get("REQUIRE_DEMO") == "1":
            pytest.fail(f"{reason}, but REQUIRE_DEMO=1")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def make_run(tmp_path_factory, chromium_path, free_port):
    """`make run PORT=<free port>` over the bundled datasets, with its own cache folder; yields its base URL and the
    file its output goes to."""
    _demo()
    root = tmp_path_factory.mktemp("make-run")
    env = {**os.environ, "HELIOS_DATA_DIR": str(DATA_DIR), "HELIOS_CACHE_DIR": str(root / "cache")}
    for name in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "HELIOS_REDIS_URL", "HELIOS_AUTH_FILE", "HELIOS_BIND_HOST"):
        env.pop(name, None)  # not the outer `make test`'s jobserver; nothing `make run` does not set itself
    port = free_port()
    log = root / "make-run.log"
    with log.open("w") as out:
        cmd = ["make", "--no-print-directory", "run", f"PORT={port}"]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url + "/healthz", proc, log)  # two workers load the app and warm the demo dataset
        yield url, log
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # make, its shell and gunicorn: the group this test started
        proc.wait(timeout=60)


def _nav_paths(tab, url: str) -> list[str]:
    open_settled(tab, url + "/")
    hrefs = tab.locator(f"#{NAV_LINKS} a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    return [href.split("?", 1)[0] for href in hrefs]


@pytest.mark.draw_all
def test_every_page_under_make_run_has_no_console_error_no_dev_tools_and_stays_on_the_machine(page, make_run, tmp_path):
    url, log = make_run
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith((url + "/", "data:")) else None)
    paths = _nav_paths(page, url)
    assert len(paths) >= 7 and "/" in paths and "/whatif" in paths, paths
    job = _demo().jobs().head(1).collect().row(0, named=True)
    paths.append(job_href(job["job_id"], store.DEFAULT_DATASET, job["cluster"]))
    seen: dict[str, list[str]] = {}
    for path in paths:
        before = len(page.errors)
        open_settled(page, url + path)  # with the figures and tables it asked for
        assert page.locator(DEV_TOOLS).count() == 0, f"Dash's dev tools on {path}"
        page.screenshot(path=str(tmp_path / f"{path.strip('/').split('?')[0].replace('/', '-') or 'overview'}.png"))
        seen[path] = page.errors[before:]
    assert page.evaluate("JSON.parse(document.getElementById('_dash-config').textContent).ui") is False
    assert {path: errors for path, errors in seen.items() if errors} == {}
    assert outside == []
    output = log.read_text()
    assert "Helios Dashboard on " + url in output and "Listening at: " + url in output
    assert '"method": "GET"' not in output  # quiet: no line per request (HELIOS_ACCESS_LOG=1 turns them on)
    print(f"visited {len(paths)} pages; screenshots in {tmp_path}")
