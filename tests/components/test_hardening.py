"""Safe answers: security headers, no caching of data, small bodies except an admin's upload."""

from __future__ import annotations

import os

import pytest
from dash import Dash, Input, Output, html

from components.server.auth import AuthSettings, install_auth
from components.server.hardening import SMALL_BODY_BYTES, install_hardening
from components.server.settings import Settings, private_folder


def _app(tmp_path, role: str) -> Dash:
    (tmp_path / "assets").mkdir(parents=True, exist_ok=True)
    (tmp_path / "assets" / "x.css").write_text("body { color: black; }\n")
    app = Dash(__name__, assets_folder=str(tmp_path / "assets"))
    app.layout = html.Div([html.Button(id="btn"), html.Div(id="out")])
    app.callback(Output("out", "children"), Input("btn", "n_clicks"))(lambda n: f"clicked {n}")
    install_auth(app.server, AuthSettings(anonymous_role=role))
    install_hardening(app.server, Settings(cache_dir=tmp_path / "cache"))
    return app


def _update(n_clicks, pad_bytes: int = 0) -> dict:
    return {
        "output": "out.children",
        "outputs": {"id": "out", "property": "children"},
        "inputs": [{"id": "btn", "property": "n_clicks", "value": n_clicks}],
        "changedPropIds": ["btn.n_clicks"],
        "pad": "x" * pad_bytes,
    }


@pytest.mark.parametrize("path", ["/", "/_dash-layout"])
def test_pages_and_data_carry_security_headers_and_no_store(tmp_path, path):
    resp = _app(tmp_path, "viewer").server.test_client().get(path)
    assert resp.headers["X-Frame-Options"] == "DENY" and resp.headers["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in resp.headers["Content-Security-Policy"]
    assert resp.headers["Cache-Control"] == "no-store" and resp.headers["Referrer-Policy"] == "same-origin"


def test_static_assets_may_be_cached(tmp_path):
    resp = _app(tmp_path, "viewer").server.test_client().get("/assets/x.css")
    assert resp.status_code == 200 and resp.headers.get("Cache-Control") != "no-store"


def test_a_viewer_cannot_send_a_large_body_but_an_admin_can_upload(tmp_path):
    big = SMALL_BODY_BYTES + 1024
    viewer = _app(tmp_path, "viewer").server.test_client()
    assert viewer.post("/_dash-update-component", json=_update(1, big)).status_code == 413
    assert viewer.post("/_dash-update-component", json=_update(1)).status_code == 200
    assert viewer.post("/anything", data=b"x" * big).status_code == 413
    admin = _app(tmp_path / "a", "admin").server.test_client()
    assert admin.post("/_dash-update-component", json=_update(2, big)).status_code == 200


def test_the_cache_folder_is_private(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    assert private_folder(folder) == folder and folder.stat().st_mode & 0o777 == 0o700
    assert f"helios-cache-{os.getuid()}" in str(Settings().cache_dir)


def test_a_cache_folder_owned_by_someone_else_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "getuid", lambda: 4242)
    with pytest.raises(RuntimeError, match="belongs to uid"):
        private_folder(tmp_path)
