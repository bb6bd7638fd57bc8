"""Long work of a request (what-if runs, sweeps, uploads) in a spawned child process, within the host's run slots and
its user's, a memory and a time limit, stopped when the job waiting for it is gone or its page stopped polling."""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import hashlib
import multiprocessing
import os
import re
import resource
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from queue import Empty

import dash
import flask

from components.server import heartbeats
from components.server.auth import current_user
from components.server.background import cache_dir
from components.server.settings import Settings

PR_SET_PDEATHSIG = 1  # prctl option: the signal this process gets when its parent exits (Linux)


class RunError(RuntimeError):
    """A limited run failed or was refused: the message is the user-facing reason."""


class RunCancelled(RunError):
    """The run's client cancelled it (by its token), before it started or while it ran."""


def _limit_memory(memory_mb: int) -> None:
    """Cap the heap of this (child) process: an allocation beyond it fails with MemoryError."""
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _exit_with_parent(parent_pid: int) -> None:
    """Have the kernel stop this child as soon as the process that waits for it is gone (a cancelled or killed job)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(3)


def _subprocess_entry(target: Callable, args: tuple, queue, memory_mb: int, parent_pid: int, expected: tuple) -> None:
    _exit_with_parent(parent_pid)
    _limit_memory(memory_mb)

    def report(fraction: float, message: str) -> None:
        queue.put(("progress", fraction, message))

    try:
        value = target(*args, report)
    except expected as exc:
        queue.put(("error", str(exc)))
        return
    except MemoryError:
        queue.put(("error", f"the run needed more than {memory_mb} MB and was stopped (HELIOS_RUN_MEMORY_MB)"))
        return
    except Exception as exc:
        queue.put(("error", f"the run failed: {type(exc).__name__}: {exc}"))
        raise
    queue.put(("done", value))


@dataclass(frozen=True)
class Caller:
    """Who started a run (a signed-in user, or an anonymous client by address), the background job whose polls
    show that its page still waits for the result, and the kind of work (a page's run and its sweep hold separate
    slots, so that a shared link that starts both is not refused)."""

    client: str
    job: str
    kind: str = "run"
    token: str = ""  # the page's id of this run, which its Cancel button names (see cancel_run)


CLIENT_DATA = "helios_client"  # the key of the client in a callback's custom data
_TOKEN_RE = re.compile(r"^[0-9a-f]{32}$")  # a run token: uuid4().hex, made by the server when the run is asked for


def run_token() -> str:
    """A new run token, which the page keeps to name its run when it cancels it."""
    return uuid.uuid4().hex


def client_of_request() -> str:
    """The client of the current request: `user:<name>` when signed in, else `ip:<address>` (the proxy's client
    with HELIOS_PROXY_COUNT)."""
    user = current_user()
    if user is not None and user.via != "anonymous":
        return f"user:{user.name}"
    return f"ip:{flask.request.remote_addr}"


# Every callback request records its client, which Dash hands to the background job it starts.
dash.hooks.custom_data(CLIENT_DATA)(lambda _ctx: client_of_request())


def _job_id() -> str:
    """The id of the background job this process runs: its Celery task id, else (Dash's disk-cache jobs) its pid."""
    try:
        from celery import current_task
    except ImportError:
        return str(os.getpid())
    return str(current_task.request.id) if current_task and current_task.request.id else str(os.getpid())


def job_caller(kind: str, token: str = "") -> Caller | None:
    """The caller of the background callback being run for work of this kind, whose page names the run token (None
    outside one, e.g. a script)."""
    try:
        client = dash.callback_context.custom_data.get(CLIENT_DATA)
    except dash.exceptions.MissingCallbackContextException:
        return None
    token = token if _TOKEN_RE.match(token) else ""
    return Caller(str(client), _job_id(), kind, token) if client else None


def cancel_run(settings: Settings, token: str) -> None:
    """Record that the client of the current request cancelled its run token: the run stops at its next check, or
    before it starts. Dash's own cancel reaches only a job whose id the page has already received."""
    if _TOKEN_RE.match(token):
        heartbeats.request_cancel(settings, client_of_request(), token)


@contextmanager
def _slot(folder: Path, prefix: str, count: int, refusal: str) -> Iterator[None]:
    """Hold one of count file-lock slots named prefix-<i> in folder, or raise RunError(refusal) at once."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for slot in range(count):
        handle = (folder / f"{prefix}-{slot}.lock").open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
        return
    raise RunError(refusal)


def run_slot(settings: Settings):
    """A context holding one of the host's settings.max_runs run slots (file locks in the cache folder), or refusing
    at once."""
    refusal = f"this server is already running {settings.max_runs} long jobs (HELIOS_MAX_RUNS); try again when one ends"
    return _slot(cache_dir(settings) / "run-slots", "slot", settings.max_runs, refusal)


KIND_NOUNS = {"run": "what-if run(s)", "sweep": "sweep(s)"}


def user_slot(settings: Settings, client: str, kind: str = "run"):
    """A context holding one of client's settings.max_runs_per_user slots for work of this kind on this host, or
    refusing at once."""
    digest = hashlib.sha256(client.encode()).hexdigest()[:24]
    who = "you are" if client.startswith("user:") else "your address is"
    refusal = (
        f"{who} already running {settings.max_runs_per_user} {KIND_NOUNS[kind]} "
        "(HELIOS_MAX_RUNS_PER_USER): wait for it to finish or cancel it, then try again"
    )
    return _slot(cache_dir(settings) / "run-slots", f"user-{digest}-{kind}", settings.max_runs_per_user, refusal)


def _resident_mb(pid: int) -> float:
    """Resident memory of process pid in MB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return 0.0
    return 0.0


def _unpolled_s(settings: Settings, caller: Caller | None, started_wall_s: float) -> float:
    """Seconds since caller's page last polled its job (or since the run started, when it has not polled yet)."""
    if caller is None:
        return 0.0
    last_s = heartbeats.last_beat_s(settings, caller.job) or 0.0
    return time.time() - max(last_s, started_wall_s)


def _stop_if_cancelled(settings: Settings, caller: Caller | None, proc=None) -> None:
    """Stop proc (if started) and raise RunCancelled when caller's client cancelled the run's token."""
    if caller is None or not caller.token or not heartbeats.cancel_requested(settings, caller.client, caller.token):
        return
    if proc is not None:
        proc.kill()
    raise RunCancelled("cancelled")


def _check_limits(proc, settings: Settings, started_s: float, caller: Caller | None, started_wall_s: float) -> None:
    """Stop proc and raise when it has run longer or grown larger than the settings allow, or nobody polls it."""
    _stop_if_cancelled(settings, caller, proc)
    if time.monotonic() - started_s > settings.run_timeout_s:
        proc.kill()
        raise RunError(f"the run took longer than {settings.run_timeout_s} s and was stopped")
    if _resident_mb(proc.pid) > settings.run_memory_mb:
        proc.kill()
        raise RunError(f"the run used more than {settings.run_memory_mb} MB and was stopped")
    if _unpolled_s(settings, caller, started_wall_s) > settings.run_unpolled_s:
        proc.kill()
        raise RunError(
            f"nobody polled the run's result for {settings.run_unpolled_s} s (its page was closed): it was stopped"
        )


def run_in_subprocess(
    target: Callable,
    args: tuple,
    on_progress: Callable[[float, str], None] | None = None,
    poll_s: float = 0.2,
    settings: Settings | None = None,
    expected: tuple[type[Exception], ...] = (ValueError,),
    caller: Caller | None = None,
):
    """Run target(*args, report) in a fresh spawned interpreter within the host's run slots and the memory and time
    limits of settings, forwarding its progress; return its value (an expected exception becomes a RunError). With
    a caller, the run also takes one of its client's slots and stops when its job is no longer polled or its token
    is cancelled (RunCancelled)."""
    settings = settings or Settings()
    with ExitStack() as held:
        if caller is not None and caller.token:
            held.callback(heartbeats.forget_cancel, settings, caller.client, caller.token)
            _stop_if_cancelled(settings, caller)
        if caller is not None:
            held.enter_context(user_slot(settings, caller.client, caller.kind))
            held.callback(heartbeats.forget, settings, caller.job)
        held.enter_context(run_slot(settings))
        return _run_limited(target, args, on_progress, poll_s, settings, expected, caller)


def _run_limited(
    target: Callable, args: tuple, on_progress, poll_s: float, settings: Settings, expected: tuple, caller
):
    # Dash starts background jobs by forking the web worker, and Polars' thread pool does not survive a fork
    # (the forked child can hang on a lock), so the work itself runs in a spawned process.
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    entry_args = (target, args, queue, settings.run_memory_mb, os.getpid(), expected)
    proc = ctx.Process(target=_subprocess_entry, args=entry_args)  # may start Dask workers
    proc.start()
    started_s, started_wall_s = time.monotonic(), time.time()
    checked_s = started_s
    try:
        while True:
            try:
                kind, *payload = queue.get(timeout=poll_s)
            except Empty:
                if not proc.is_alive():
                    raise RunError(f"the worker process stopped (exit code {proc.exitcode})") from None
                kind, payload = "wait", []
            if kind == "done":
                return payload[0]
            if kind == "error":
                raise RunError(payload[0])
            if kind == "progress" and on_progress is not None:
                on_progress(*payload)
            if time.monotonic() - checked_s >= poll_s:  # also while progress keeps coming
                _check_limits(proc, settings, started_s, caller, started_wall_s)
                checked_s = time.monotonic()
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=10)
