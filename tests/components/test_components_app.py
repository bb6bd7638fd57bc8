"""The app factory, its settings, the query cache and the `helios serve` command."""

from __future__ import annotations

import flask
import polars as pl

from analytics.filters import empty_state
from components.datasets import access
from components.server import cache as query_cache
from components.server.settings import Settings


def test_settings_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HELIOS_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("HELIOS_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("HELIOS_REDIS_URL", "redis://127.0.0.1:6399/0")
    monkeypatch.setenv("HELIOS_CACHE_TIMEOUT_S", "60")
    s = Settings.from_env()
    assert s.data_dir == tmp_path / "d" and s.cache_dir == tmp_path / "c"
    assert s.redis_url == "redis://127.0.0.1:6399/0" and s.cache_timeout_s == 60


def test_the_cache_is_a_file_cache_by_default_and_redis_when_a_url_is_set(tmp_path):
    files, redis = flask.Flask("files"), flask.Flask("redis")
    query_cache.init_cache(files, Settings(cache_dir=tmp_path / "c"))
    query_cache.init_cache(redis, Settings(redis_url="redis://127.0.0.1:6399/0"))
    with files.app_context():
        assert type(query_cache.cache.cache).__name__ == "FileSystemCache"
        query_cache.cache.set("k", 1)
        assert query_cache.cache.get("k") == 1 and any((tmp_path / "c" / "queries").iterdir())
    with redis.app_context():
        assert type(query_cache.cache.cache).__name__ == "RedisCache"


def test_cached_queries_follow_the_dataset_version(dash_app, small_data, write_small):
    state = {**empty_state("helios-synth"), "clusters": ["Venus"]}
    with dash_app.server.test_request_context():
        before = access.query("cluster_summary", state)
        write_small("helios-synth", small_data, n_jobs=500)  # the dataset is rewritten: a new version
        after = access.query("cluster_summary", state)
    jobs = pl.col("job_num")
    assert (
        before.filter(pl.col("id") == "Venus").select(jobs).item()
        > after.filter(pl.col("id") == "Venus").select(jobs).item()
    )


def test_the_app_module_builds_nothing_but_the_app(small_data):
    import app

    assert callable(app.create_app) and app.server is app.app.server
    assert {r.rule for r in app.server.url_map.iter_rules()} >= {"/download/jobs.csv", "/_dash-update-component"}


def test_helios_serve_is_registered_with_safe_defaults():
    from cli import build_parser

    args = build_parser().parse_args(["serve"])
    assert (args.host, args.port, args.debug) == ("127.0.0.1", 8050, False)
    args = build_parser().parse_args(["serve", "--host", "0.0.0.0", "--port", "9000", "--debug"])
    assert (args.host, args.port, args.debug) == ("0.0.0.0", 9000, True)
    assert args.func.__module__ == "components.commands.serve"
