"""Long work of a request (what-if runs, sweeps, uploads) in a spawned child process, within the host's run slots
and a memory and a time limit, stopped when the job waiting for it is gone."""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import multiprocessing
import os
import resource
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from queue import Empty

from components.server.background import cache_dir
from components.server.settings import Settings

PR_SET_PDEATHSIG = 1  # prctl option: the signal this process gets when its parent exits (Linux)


class RunError(RuntimeError):
    """A limited run failed or was refused: the message is the user-facing reason."""


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


@contextmanager
def run_slot(settings: Settings) -> Iterator[None]:
    """Hold one of the host's settings.max_runs run slots (file locks in the cache folder), or refuse at once."""
    folder = cache_dir(settings) / "run-slots"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for slot in range(settings.max_runs):
        handle = (folder / f"slot-{slot}.lock").open("a")
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
    raise RunError(
        f"this server is already running {settings.max_runs} long jobs (HELIOS_MAX_RUNS); try again when one ends"
    )


def _resident_mb(pid: int) -> float:
    """Resident memory of process pid in MB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return 0.0
    return 0.0


def _check_limits(proc, settings: Settings, started_s: float) -> None:
    """Stop proc and raise when it has run longer or grown larger than the settings allow."""
    if time.monotonic() - started_s > settings.run_timeout_s:
        proc.kill()
        raise RunError(f"the run took longer than {settings.run_timeout_s} s and was stopped")
    if _resident_mb(proc.pid) > settings.run_memory_mb:
        proc.kill()
        raise RunError(f"the run used more than {settings.run_memory_mb} MB and was stopped")


def run_in_subprocess(
    target: Callable,
    args: tuple,
    on_progress: Callable[[float, str], None] | None = None,
    poll_s: float = 0.2,
    settings: Settings | None = None,
    expected: tuple[type[Exception], ...] = (ValueError,),
):
    """Run target(*args, report) in a fresh spawned interpreter within the host's run slots and the memory and time
    limits of settings, forwarding its progress; return its value (an expected exception becomes a RunError)."""
    settings = settings or Settings()
    with run_slot(settings):
        return _run_limited(target, args, on_progress, poll_s, settings, expected)


def _run_limited(target: Callable, args: tuple, on_progress, poll_s: float, settings: Settings, expected: tuple):
    # Dash starts background jobs by forking the web worker, and Polars' thread pool does not survive a fork
    # (the forked child can hang on a lock), so the work itself runs in a spawned process.
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    entry_args = (target, args, queue, settings.run_memory_mb, os.getpid(), expected)
    proc = ctx.Process(target=_subprocess_entry, args=entry_args)  # may start Dask workers
    proc.start()
    started_s = time.monotonic()
    try:
        while True:
            try:
                kind, *payload = queue.get(timeout=poll_s)
            except Empty:
                if not proc.is_alive():
                    raise RunError(f"the worker process stopped (exit code {proc.exitcode})") from None
                _check_limits(proc, settings, started_s)
                continue
            if kind == "progress":
                if on_progress is not None:
                    on_progress(*payload)
            elif kind == "done":
                return payload[0]
            else:
                raise RunError(payload[0])
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=10)
