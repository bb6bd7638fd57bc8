"""What-if results are shared across hosts through Redis when HELIOS_REDIS_URL is set, with a local fallback."""

from __future__ import annotations

from types import SimpleNamespace

from components.whatif.run import SharedResults, results_cache
from tests.waiting import free_port


def _host(tmp_path, name: str, url: str | None):
    return results_cache(SimpleNamespace(cache_dir=str(tmp_path / name), redis_url=url))


def test_a_result_stored_on_one_host_is_found_on_another(tmp_path, redis_url):
    host_a, host_b = _host(tmp_path, "a", redis_url), _host(tmp_path, "b", redis_url)
    assert isinstance(host_a, SharedResults)
    host_a.set("k1", {"avg_jct_s": 12.5})
    assert host_b.get("k1") == {"avg_jct_s": 12.5}
    assert host_b.get("missing") is None


def test_without_redis_each_host_keeps_its_own(tmp_path):
    host_a, host_b = _host(tmp_path, "a", None), _host(tmp_path, "b", None)
    host_a.set("k1", 1)
    assert host_a.get("k1") == 1 and host_b.get("k1") is None


def test_an_unreachable_redis_falls_back_to_the_local_cache(tmp_path, caplog):
    host = _host(tmp_path, "a", f"redis://127.0.0.1:{free_port()}/0")
    host.set("k1", "kept")
    assert host.get("k1") == "kept"
    assert "Redis unreachable" in caplog.text
