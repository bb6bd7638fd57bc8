"""The real app factory wires access control and /healthz: with a users file, nothing is served anonymously."""

from __future__ import annotations

import base64

import pytest

from components.server.users import UserRecord, hash_password, save_users


@pytest.fixture
def secured_client(small_data, tmp_path, monkeypatch):
    """A test client of the real dashboard with one admin in its users file."""
    users = tmp_path / "users.json"
    save_users(users, {"ada": UserRecord("ada", "admin", hash_password("s3cret-pass"))})
    monkeypatch.setenv("HELIOS_AUTH_FILE", str(users))
    monkeypatch.setenv("HELIOS_SECRET_KEY", "test-secret")
    from app import create_app
    from components.server.settings import Settings

    return create_app(Settings(data_dir=small_data, cache_dir=tmp_path / "cache")).server.test_client()


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.mark.parametrize("path", ["/", "/cluster", "/_dash-layout", "/_dash-dependencies", "/download/jobs.csv"])
def test_every_route_needs_credentials(secured_client, path):
    anonymous = secured_client.get(path, headers={"Accept": "application/json"})
    assert anonymous.status_code == 401
    assert b"helios-synth" not in anonymous.data
    wrong = secured_client.get(path, headers=_basic("ada", "wrong"))
    assert wrong.status_code == 401
    assert secured_client.get(path, headers=_basic("ada", "s3cret-pass")).status_code == 200


def test_health_is_public_but_terse(secured_client):
    anonymous = secured_client.get("/healthz")
    assert anonymous.status_code == 200
    assert set(anonymous.get_json()) == {"status"}
    detailed = secured_client.get("/healthz", headers=_basic("ada", "s3cret-pass")).get_json()
    assert detailed["status"] in {"ok", "degraded"} and len(detailed) > 1
