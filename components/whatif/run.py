"""What-if scenarios for the page: load inputs, run, keep results in an on-disk cache by scenario key."""

from __future__ import annotations

import fcntl
import json
import logging
import multiprocessing
import os
import pickle
import resource
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from queue import Empty

from analytics import store
from components.server.background import cache_dir
from components.server.settings import Settings
from sim.scenario import ProgressCallback, ScenarioError, ScenarioRequest, ScenarioResult, run_request

RESULTS_SIZE_LIMIT_BYTES = 2 * 1024**3
RESULTS_TTL_S = 7 * 24 * 3600
REDIS_PREFIX = "helios:whatif:"
log = logging.getLogger(__name__)


class SharedResults:
    """Scenario results in the shared Redis, so every host sees them; this host's disk cache backs it up."""

    def __init__(self, url: str, local):
        import redis

        self._errors = redis.RedisError
        self._redis = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self._local = local

    def get(self, key: str):
        """The result stored under key, from Redis or else from the local disk cache."""
        try:
            raw = self._redis.get(REDIS_PREFIX + key)
        except self._errors as exc:
            log.warning("what-if results: Redis unreachable (%s); using this host's cache", exc)
            raw = None
        # NOTE: Redis is the deployment's own trusted store (like the Celery broker), so unpickling is safe here.
        return pickle.loads(raw) if raw is not None else self._local.get(key)

    def set(self, key: str, value) -> None:
        """Store value under key locally and, when reachable, in Redis for every other host."""
        self._local.set(key, value)
        try:
            self._redis.set(REDIS_PREFIX + key, pickle.dumps(value), ex=RESULTS_TTL_S)
        except self._errors as exc:
            log.warning("what-if results: Redis unreachable (%s); result kept on this host only", exc)


def results_cache(settings: Settings | None = None):
    """The scenario results cache: this host's diskcache, shared across hosts through Redis when one is set."""
    import diskcache

    path = Path(cache_dir(settings)).parent / "whatif-results"
    local = diskcache.Cache(str(path), size_limit=RESULTS_SIZE_LIMIT_BYTES)
    redis_url = (settings or Settings.from_env()).redis_url
    return SharedResults(redis_url, local) if redis_url else local


def get_or_run(
    request: ScenarioRequest, cache, progress: ProgressCallback | None = None
) -> tuple[ScenarioResult, float, bool]:
    """The request's result from the cache, else run and store it under its key: (result, seconds, from cache)."""
    t0 = time.perf_counter()
    hit = cache.get(request.key)
    if hit is not None:
        return hit, time.perf_counter() - t0, True
    result = run_request(request, progress)
    cache.set(request.key, result)
    return result, time.perf_counter() - t0, False


def metrics_json(result: ScenarioResult) -> str:
    """The scenario's metrics (no per-job records) as JSON text."""
    payload = {
        "config": result.config,
        "window": result.window,
        "jobs": result.jobs,
        "vc_nodes": result.vc_nodes,
        "summary": result.summary.to_dicts(),
        "per_vc": result.per_vc.to_dicts(),
        "predictor": {k: v for k, v in result.predictor.items() if k != "density"},
        "ladder": result.ladder.to_dicts() if result.ladder is not None else None,
        "feature_importance_gain_pct": result.importance,
        "ces": result.ces["metrics"] if result.ces else None,
        "stage_s": result.stage_s,
    }
    return json.dumps(payload, indent=2, default=str)


class ScenarioProcessError(RuntimeError):
    """The scenario's subprocess failed: the message is the user-facing reason."""


def _limit_memory(memory_mb: int) -> None:
    """Cap the heap of this (child) process: an allocation beyond it fails with MemoryError."""
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _exit_with_parent(parent_pid: int) -> None:
    """Stop this child as soon as the process that waits for it is gone (a cancelled or killed job)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def _subprocess_entry(target: Callable, args: tuple, queue, memory_mb: int, parent_pid: int) -> None:
    _exit_with_parent(parent_pid)
    _limit_memory(memory_mb)

    def report(fraction: float, message: str) -> None:
        queue.put(("progress", fraction, message))

    try:
        value = target(*args, report)
    except (ScenarioError, store.DatasetError, ValueError) as exc:
        queue.put(("error", str(exc)))
        return
    except MemoryError:
        queue.put(("error", f"the run needed more than {memory_mb} MB and was stopped (HELIOS_RUN_MEMORY_MB)"))
        return
    except Exception as exc:
        queue.put(("error", f"the scenario failed: {type(exc).__name__}: {exc}"))
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
    raise ScenarioProcessError(
        f"this server is already running {settings.max_runs} what-if runs (HELIOS_MAX_RUNS); try again when one ends"
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
        raise ScenarioProcessError(f"the run took longer than {settings.run_timeout_s} s and was stopped")
    if _resident_mb(proc.pid) > settings.run_memory_mb:
        proc.kill()
        raise ScenarioProcessError(f"the run used more than {settings.run_memory_mb} MB and was stopped")


def run_in_subprocess(
    target: Callable,
    args: tuple,
    on_progress: ProgressCallback | None = None,
    poll_s: float = 0.2,
    settings: Settings | None = None,
):
    """Run target(*args, report) in a fresh spawned interpreter within the host's run slots and the memory and time
    limits of settings, forwarding its progress; return its value."""
    settings = settings or Settings()
    with run_slot(settings):
        return _run_limited(target, args, on_progress, poll_s, settings)


def _run_limited(target: Callable, args: tuple, on_progress, poll_s: float, settings: Settings):
    # Dash starts background jobs by forking the web worker, and Polars' thread pool does not survive a fork
    # (the forked child can hang on a lock), so the work itself runs in a spawned process.
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    entry_args = (target, args, queue, settings.run_memory_mb, os.getpid())
    proc = ctx.Process(target=_subprocess_entry, args=entry_args)  # may start Dask workers
    proc.start()
    started_s = time.monotonic()
    try:
        while True:
            try:
                kind, *payload = queue.get(timeout=poll_s)
            except Empty:
                if not proc.is_alive():
                    raise ScenarioProcessError(f"the scenario process stopped (exit code {proc.exitcode})") from None
                _check_limits(proc, settings, started_s)
                continue
            if kind == "progress":
                if on_progress is not None:
                    on_progress(*payload)
            elif kind == "done":
                return payload[0]
            else:
                raise ScenarioProcessError(payload[0])
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=10)
