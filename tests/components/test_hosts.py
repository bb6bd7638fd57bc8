"""Allowed Host names (400 for any other, before auth, on every route) and anonymous admin only on loopback."""

from __future__ import annotations

import pytest

from app import create_app  # imported before a test sets HELIOS_ANONYMOUS_ROLE: the module builds an app too
from components.server import hosts
from components.server.settings import Settings
from components.server.users import UserRecord, hash_password, save_users


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost", "localhost"),
        ("LocalHost:8050", "localhost"),
        ("localhost.", "localhost"),
        ("localhost.:8050", "localhost"),
        ("127.0.0.1:8050", "127.0.0.1"),
        ("[::1]", "[::1]"),
        ("[::1]:8050", "[::1]"),
        ("[0:0:0:0:0:0:0:1]:8050", "[::1]"),
        ("Dash.Example.ORG:443", "dash.example.org"),
        ("localhost:", "localhost"),  # RFC 9110: the port may be empty
        (" localhost ", "localhost"),
    ],
)
def test_a_host_header_is_read_without_port_case_or_trailing_dot(header, name):
    assert hosts.host_name(header) == name


@pytest.mark.parametrize(
    "header",
    [
        "",
        ":8050",
        "::1",
        "[::1",
        "[::1]x",
        "[::1]:80a",
        "[127.0.0.1]",
        "localhost:abc",
        "a..b",
        "user@localhost",
        "local host",
        "localhost:8050:1",
        "evil.example/x",
        "localhost..",
        ".",
    ],
)
def test_a_malformed_host_header_names_no_host(header):
    assert hosts.host_name(header) is None


def test_the_default_allowed_hosts_are_the_loopback_names_and_the_bound_address():
    assert Settings().host_names == ("localhost", "127.0.0.1", "[::1]")
    listen = ("10.1.2.3:8050", "[fe80::1]:8050", "unix:/run/helios.sock", "127.0.0.1:8050")
    assert Settings(listen=listen).host_names == ("localhost", "127.0.0.1", "[::1]", "10.1.2.3", "[fe80::1]")


def test_helios_allowed_hosts_replaces_the_default_and_names_a_bad_entry():
    names = hosts.parse_allowed_hosts("Dash.Example.org., ::1, 192.0.2.7:443")
    assert names == ("dash.example.org", "[::1]", "192.0.2.7")
    assert Settings(listen=("127.0.0.1:8050",), allowed_hosts=names).host_names == names
    assert hosts.parse_allowed_hosts(" , ") == ()
    with pytest.raises(ValueError, match=r"HELIOS_ALLOWED_HOSTS: 'dash example' is not a host name"):
        hosts.parse_allowed_hosts("ok.example, dash example")


def test_settings_read_the_allowed_hosts_and_where_the_launcher_said_the_server_listens(monkeypatch):
    monkeypatch.setenv(hosts.LISTEN_ENV, "0.0.0.0:9000")
    monkeypatch.delenv(hosts.ALLOWED_HOSTS_ENV, raising=False)
    settings = Settings.from_env()
    assert settings.listen == ("0.0.0.0:9000",)
    assert settings.host_names == ("localhost", "127.0.0.1", "[::1]", "0.0.0.0")
    monkeypatch.setenv(hosts.ALLOWED_HOSTS_ENV, "dash.example.org")
    assert Settings.from_env().host_names == ("dash.example.org",)
    monkeypatch.delenv(hosts.LISTEN_ENV)
    assert Settings.from_env().listen == ()  # not known: no launcher said


@pytest.mark.parametrize(
    ("listen", "loopback"),
    [
        (("127.0.0.1:8050",), True),
        (("127.0.0.2:8050", "[::1]:8050", "localhost:8050"), True),
        ((), False),  # not known
        (("0.0.0.0:8050",), False),
        (("[::]:8050",), False),
        (("127.0.0.1:8050", "192.168.1.4:8050"), False),
        (("unix:/run/helios.sock",), False),  # a local proxy may publish a socket file
        (("localhost.example.org:8050",), False),
    ],
)
def test_loopback_only_means_known_and_every_address_loopback(listen, loopback):
    assert hosts.loopback_only(listen) is loopback


def test_anonymous_admin_is_refused_unless_the_server_listens_on_loopback_only():
    hosts.check_anonymous_role("admin", ("127.0.0.1:8050",))
    hosts.check_anonymous_role("viewer", ("0.0.0.0:8050",))
    with pytest.raises(hosts.UnsafeServing, match=r"HELIOS_ANONYMOUS_ROLE=admin .* listens on 0\.0\.0\.0:8050"):
        hosts.check_anonymous_role("admin", ("0.0.0.0:8050",))
    with pytest.raises(hosts.UnsafeServing, match="does not say where it listens"):
        hosts.check_anonymous_role("admin", ())


def _app(small_data, tmp_path, listen: tuple[str, ...]):
    return create_app(Settings(data_dir=small_data, cache_dir=tmp_path / "cache", listen=listen))


def test_the_app_refuses_to_be_built_with_anonymous_admin_off_loopback(small_data, tmp_path, monkeypatch):
    monkeypatch.setenv(hosts.ANONYMOUS_ROLE_ENV, "admin")
    for listen in (("0.0.0.0:8050",), ()):
        with pytest.raises(hosts.UnsafeServing, match="HELIOS_ANONYMOUS_ROLE=admin"):
            _app(small_data, tmp_path, listen)
    app = _app(small_data, tmp_path, ("127.0.0.1:8050",))
    with app.server.test_request_context("/"):
        from components.server.auth import current_user

        assert current_user().role == "admin"


# Every kind of route: a page, Dash's own endpoints, a static asset, the CSV download, health, login, a 404.
ROUTES = (
    "/",
    "/cluster",
    "/_dash-layout",
    "/_dash-dependencies",
    "/assets/style.css",
    "/download/jobs.csv",
    "/healthz",
    "/login",
    "/no-such-page",
)


def test_a_foreign_host_gets_400_on_every_route_and_an_allowed_one_is_served(small_data, tmp_path):
    client = _app(small_data, tmp_path, ("127.0.0.1:8050",)).server.test_client()
    for route in ROUTES:
        for host in ("evil.example", "evil.example:8050", "127.0.0.1.evil.example", "localhost.evil.example"):
            resp = client.get(route, headers={"Host": host})
            assert resp.status_code == 400, (route, host, resp.status_code)
            assert b"HELIOS_ALLOWED_HOSTS" in resp.data and resp.headers["Cache-Control"] == "no-store"
        assert client.post("/_dash-update-component", json={}, headers={"Host": "evil.example"}).status_code == 400
    for host in ("localhost", "127.0.0.1:8050", "[::1]:8050", "LOCALHOST.:8050"):
        assert client.get("/healthz", headers={"Host": host}).status_code == 200, host


def test_a_foreign_host_gets_400_before_auth_looks_at_it(small_data, tmp_path, monkeypatch):
    users = tmp_path / "users.json"
    save_users(users, {"ada": UserRecord("ada", "admin", hash_password("s3cret-pass"))})
    monkeypatch.setenv("HELIOS_AUTH_FILE", str(users))
    monkeypatch.setenv("HELIOS_SECRET_KEY", "test-secret")
    client = _app(small_data, tmp_path, ("0.0.0.0:8050",)).server.test_client()
    assert client.get("/cluster", headers={"Host": "evil.example"}).status_code == 400  # not a redirect to /login
    assert client.get("/login", headers={"Host": "evil.example"}).status_code == 400
    assert client.get("/cluster", headers={"Accept": "application/json"}).status_code == 401  # localhost: auth asks
    assert client.get("/healthz", headers={"Host": "0.0.0.0:8050"}).status_code == 200  # the bound address
