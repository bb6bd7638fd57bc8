"""What-if scenarios for the page: load inputs, run, keep results in an on-disk cache by scenario key."""

from __future__ import annotations

import json
import logging
import pickle
import time
from pathlib import Path

from dash.exceptions import PreventUpdate

from analytics import store
from components.server.background import cache_dir
from components.server.runs import cancel_run
from components.server.settings import Settings
from components.whatif.form import CANCELLED_STATUS
from components.whatif.labels import METRICS
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
        "baseline": result.baseline,
        "twin": result.twin,
        "replay": result.replay,
        "predictor": {k: v for k, v in result.predictor.items() if k != "density"},
        "ladder": result.ladder.to_dicts() if result.ladder is not None else None,
        "feature_importance_gain_pct": result.importance,
        "ces": result.ces["metrics"] if result.ces else None,
        "stage_s": result.stage_s,
        "metric_names": {name: metric.label for name, metric in METRICS.items()},
        "metric_meanings": {name: metric.help for name, metric in METRICS.items()},
    }
    return json.dumps(payload, indent=2, default=str)


SCENARIO_ERRORS = (ScenarioError, store.DatasetError, ValueError)  # what a run reports as a user-facing reason


def cancel_request(n_clicks, request: dict | None, settings: Settings) -> str:
    """Cancel the page's current run or sweep by its request's token (it may not have started yet); say so."""
    if not n_clicks:
        raise PreventUpdate
    if request:
        cancel_run(settings, str(request.get("token", "")))
    return CANCELLED_STATUS
