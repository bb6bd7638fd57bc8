"""Waiting in tests: for a condition, within a deadline generous enough for a machine whose cores are all busy, never
for a set time (a test that sleeps passes or fails with the machine's load)."""

from __future__ import annotations

import http.client
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# What a test waits for (a server to answer, a run to end, a page to settle) usually comes in seconds; on a loaded
# machine (`make test` under `stress-ng --cpu 2`) it may take many times longer. A deadline only decides how long a
# test that is going to fail anyway takes to say so.
DEADLINE_S = 300.0
BROWSER_DEADLINE_MS = 120_000  # Playwright's wait for one selector, function or navigation (its default is 30 s)
POLL_S = 0.1

# Dash has no callback to run, running or waiting for its answer (a page settled after a click or a run's end; an
# async clientside callback counts while it awaits).
DASH_IDLE_JS = """() => { const c = window.store && window.store.getState().callbacks;
  return !!c && ['requested', 'prioritized', 'blocked', 'executing', 'watched', 'executed', 'stored']
    .every(k => !(c[k] || []).length); }"""
# The page's content is laid out and Dash idle for three animation frames in a row. "networkidle" is not enough: on a
# loaded machine the network can be quiet for 500 ms before Dash sends its first callbacks, or between two.
SETTLED_JS = f"""() => {{ const content = document.getElementById('_pages_content');
  const laidOut = !!content && content.childElementCount > 0 && !document.querySelector('[data-dash-is-loading=true]');
  window.__heliosIdleFrames = laidOut && ({DASH_IDLE_JS})() ? (window.__heliosIdleFrames || 0) + 1 : 0;
  return window.__heliosIdleFrames >= 3; }}"""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition: Callable[[], T], what: str, timeout_s: float = DEADLINE_S, interval_s: float = POLL_S) -> T:
    """condition()'s first truthy value, asked every interval_s; AssertionError naming what after timeout_s."""
    deadline_s = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline_s, f"{what}: not within {timeout_s:g} s"
        time.sleep(interval_s)


def http_status(url: str, timeout_s: float = 10.0) -> int | None:
    """The status url answers (an error status included), None when nothing answers yet."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, http.client.HTTPException):  # refused, reset, closed mid-answer, or a worker still booting
        return None


def wait_until_serving(
    url: str, proc: subprocess.Popen | None = None, log: Path | None = None, timeout_s: float = DEADLINE_S
) -> None:
    """Wait until url answers 200; fail at once, with the end of log, when proc exits first."""

    def tail() -> str:
        return log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""

    def up() -> bool:
        assert proc is None or proc.poll() is None, f"the server of {url} exited ({proc.returncode}): {tail()}"
        return http_status(url) == 200

    try:
        wait_for(up, f"{url} answering 200", timeout_s, interval_s=0.25)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{tail()}") from None


def stop(proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Stop a process a test started: SIGTERM, then SIGKILL if it has not exited within timeout_s."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)


def new_context(browser, width: int = 1440, height: int = 900, **options):
    """A browser context (1440x900 unless told) whose waits (selectors, functions, navigations) have
    BROWSER_DEADLINE_MS."""
    context = browser.new_context(viewport={"width": width, "height": height}, **options)
    context.set_default_timeout(BROWSER_DEADLINE_MS)
    context.set_default_navigation_timeout(BROWSER_DEADLINE_MS)
    return context


def settle(tab) -> None:
    """Wait until tab's page is laid out and its callbacks have settled (SETTLED_JS)."""
    tab.evaluate("() => { window.__heliosIdleFrames = 0; }")
    tab.wait_for_function(SETTLED_JS, polling="raf")


def open_settled(tab, url: str):
    """Open url in tab and wait until it has settled; the navigation's response."""
    response = tab.goto(url)
    settle(tab)
    return response
