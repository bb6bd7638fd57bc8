"""The client behind a reverse proxy: X-Forwarded-For ignored by default (a client could forge it), honoured for
exactly HELIOS_PROXY_COUNT proxies, by the login back-off and by the per-user run cap alike."""

from __future__ import annotations

import re

import flask
import pytest
from dash import Dash, html

from components.server import cache as query_cache
from components.server.auth import AuthSettings, install_auth, parse_networks
from components.server.hardening import install_hardening
from components.server.runs import client_of_request
from components.server.settings import Settings
from components.server.users import UserRecord, hash_password, save_users

PEER = {"REMOTE_ADDR": "10.1.2.3"}  # the proxy (or whoever connects)


@pytest.fixture(scope="module")
def users_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("proxy") / "users.json"
    save_users(path, {"ada": UserRecord("ada", "viewer", hash_password("ada-password-1"))})
    return path


def _client(tmp_path, users_file, proxy_count: int):
    """A test client connecting from PEER to an app with auth (users file, proxies in 10/8) or, without a users
    file, anonymous viewers; /whoami answers the client the run cap counts."""
    query_cache._local.clear()  # failures counted by earlier tests (no shared cache here)
    app = Dash(__name__, assets_folder=str(tmp_path / "none"))
    app.layout = html.Div()
    app.server.add_url_rule("/whoami", "whoami", lambda: flask.jsonify(client=client_of_request()))
    auth = AuthSettings()
    if users_file is not None:
        auth = AuthSettings(auth_file=users_file, trusted_proxies=parse_networks("10.0.0.0/8"), secret_key="k")
    install_auth(app.server, auth)
    install_hardening(app.server, Settings(cache_dir=tmp_path / "cache", proxy_count=proxy_count))
    client = app.server.test_client()
    client.environ_base.update(PEER)
    return client


def _failed_login(client, forwarded_for: str, account: str) -> int:
    headers = {"X-Forwarded-For": forwarded_for}
    page = client.get("/login", headers=headers).get_data(as_text=True)
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)
    form = {"username": account, "password": "wrong", "csrf": token}
    return client.post("/login", data=form, headers=headers).status_code


def test_a_forged_forwarded_for_is_ignored_by_default(tmp_path, users_file):
    client = _client(tmp_path, users_file, proxy_count=0)
    codes = [_failed_login(client, f"203.0.113.{i}", f"ghost{i}") for i in range(7)]
    assert codes[:5] == [401] * 5 and codes[5:] == [429, 429]  # one client: the peer, whatever the header says
    whoami = client.get("/whoami", headers={"X-Forwarded-For": "203.0.113.9", "X-Forwarded-User": "ada"})
    assert whoami.get_json() == {"client": "user:ada"}


def test_with_one_proxy_each_forwarded_client_backs_off_on_its_own(tmp_path, users_file):
    client = _client(tmp_path, users_file, proxy_count=1)
    codes = [_failed_login(client, "203.0.113.1", f"ghost{i}") for i in range(6)]
    assert codes == [401] * 5 + [429]
    assert _failed_login(client, "203.0.113.2", "ghost-other") == 401  # another client behind the same proxy
    # Only the address the proxy appended counts: a client's own (forged) entries before it are ignored.
    assert _failed_login(client, "203.0.113.2, 203.0.113.1", "ghost-next") == 429


def test_the_run_cap_keys_anonymous_clients_by_their_forwarded_address(tmp_path):
    headers = {"X-Forwarded-For": "1.1.1.1, 203.0.113.5"}  # a forged entry, then the one the proxy appended
    direct = _client(tmp_path, None, proxy_count=0)
    assert direct.get("/whoami", headers=headers).get_json() == {"client": "ip:10.1.2.3"}
    behind = _client(tmp_path / "b", None, proxy_count=1)
    assert behind.get("/whoami", headers=headers).get_json() == {"client": "ip:203.0.113.5"}


def test_the_proxy_identity_header_is_still_checked_against_the_proxy_itself(tmp_path, users_file):
    client = _client(tmp_path, users_file, proxy_count=1)
    trusted = client.get("/whoami", headers={"X-Forwarded-For": "198.51.100.4", "X-Forwarded-User": "ada"})
    assert trusted.get_json() == {"client": "user:ada"}  # the peer 10.1.2.3 is a trusted proxy
    client.environ_base["REMOTE_ADDR"] = "192.168.7.9"
    forged = client.get("/whoami", headers={"X-Forwarded-For": "10.1.2.3", "X-Forwarded-User": "ada"})
    assert forged.status_code == 401  # a forwarded address never makes a client a trusted proxy
