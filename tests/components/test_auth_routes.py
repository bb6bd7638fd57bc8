"""Access control over every route family of a Dash app: Basic, /login session, proxy header, roles."""

from __future__ import annotations

import base64
import functools
import hmac
import json
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import flask
import pytest
from dash import Dash, Input, Output, dcc, html

from components.server import auth
from components.server import cache as query_cache
from components.server import users as auth_users
from components.server.auth import AuthSettings, VerifiedCache, has_role, install_auth, parse_networks
from components.server.health import install_health
from components.server.users import UserRecord, UsersFileError, check_role, hash_password, save_users

PASSWORDS = {"alice": "alice-admin-pw", "victor": "victor-viewer-pw"}
ROLES = {"alice": "admin", "victor": "viewer"}
SECRET_MARK = "TOP-SECRET-DATA"
JSON = {"Accept": "application/json"}
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
TRUSTED = {"REMOTE_ADDR": "10.1.2.3"}
UNTRUSTED = {"REMOTE_ADDR": "192.168.7.9"}


def basic(name: str, password: str) -> dict[str, str]:
    """An HTTP Basic Authorization header."""
    token = base64.b64encode(f"{name}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def echo_payload(value: str = "x") -> dict:
    """A /_dash-update-component body for the echo callback."""
    inputs = [{"id": "in", "property": "value", "value": value}]
    outputs = {"id": "out", "property": "children"}
    return {"output": "out.children", "outputs": outputs, "inputs": inputs, "changedPropIds": ["in.value"]}


def admin_payload() -> dict:
    """A /_dash-update-component body for the admin-only callback."""
    inputs = [{"id": "btn", "property": "n_clicks", "value": 1}]
    outputs = {"id": "admin-out", "property": "children"}
    return {
        "output": "admin-out.children",
        "outputs": outputs,
        "inputs": inputs,
        "changedPropIds": ["btn.n_clicks"],
    }


def write_users_file(path: Path, names: tuple[str, ...] = ("alice", "victor")) -> Path:
    """Write a users file with alice (admin) and victor (viewer)."""
    save_users(path, {n: UserRecord(n, ROLES[n], hash_password(PASSWORDS[n])) for n in names})
    return path


def settings_for(users_file: Path | None, proxies: str = "10.0.0.0/8") -> AuthSettings:
    """Auth settings over a users file and trusted proxies, with a fixed secret and a role header."""
    return AuthSettings(
        auth_file=users_file,
        trusted_proxies=parse_networks(proxies),
        proxy_role_header="X-Forwarded-Role",
        secret_key="test-secret-key",
    )


F = TypeVar("F", bound=Callable[..., Any])


def require_role(role: str) -> Callable[[F], F]:
    """Test views and callbacks guarded like the admin actions: 403 (JSON error) unless the user has role."""
    check_role(role)

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not has_role(role):
                resp = flask.jsonify(error=f"the {role} role is required")
                resp.status_code = 403
                flask.abort(resp)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def _register_callbacks(app: Dash) -> None:
    @app.callback(Output("out", "children"), Input("in", "value"))
    def echo(value):
        return f"{SECRET_MARK}:{value}"

    @app.callback(Output("admin-out", "children"), Input("btn", "n_clicks"), prevent_initial_call=True)
    @require_role("admin")
    def delete_dataset(n_clicks):
        return f"deleted after {n_clicks} clicks"


def _csv_view() -> tuple[str, int, dict[str, str]]:
    return f"job_id\n{SECRET_MARK}\n", 200, {"Content-Type": "text/csv"}


def build_app(tmp_path: Path, settings: AuthSettings) -> Dash:
    """A Dash app (page, callbacks, an asset, a CSV download, /healthz, an admin view) guarded by settings."""
    assets = tmp_path / "assets"
    assets.mkdir(exist_ok=True)
    (assets / "x.css").write_text(f"/* {SECRET_MARK} */ body {{ color: black; }}\n")
    app = Dash(__name__, assets_folder=str(assets), title="auth test")
    widgets = [dcc.Input(id="in"), html.Div(id="out"), html.Button(id="btn"), html.Div(id="admin-out")]
    app.layout = html.Div(widgets)
    _register_callbacks(app)
    server = app.server
    server.add_url_rule("/download/jobs.csv", "jobs_csv", _csv_view)
    admin_view = require_role("admin")(lambda: flask.jsonify(deleted=True))
    server.add_url_rule("/admin/delete", "admin_delete", admin_view, methods=["POST"])
    install_health(server, {"data_dir": lambda: {"ok": True, "path": SECRET_MARK}}, public_details=False)
    install_auth(server, settings)
    return app


def login_post(client, form: dict):
    """Post the login form as a browser does: first GET it, for the session cookie and its CSRF token."""
    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)
    return client.post("/login", data={**form, "csrf": token})


def leaks(resp) -> bool:
    """True when a response body carries the app's data marker or the Dash page shell."""
    body = resp.get_data(as_text=True)
    return SECRET_MARK in body or "_dash-config" in body or "dash-renderer" in body


@pytest.fixture(scope="module")
def users_file(tmp_path_factory) -> Path:
    """A users file with alice (admin) and victor (viewer), shared by the module (hashing is slow)."""
    return write_users_file(tmp_path_factory.mktemp("auth") / "users.json")


@pytest.fixture(scope="module")
def app(users_file, tmp_path_factory) -> Dash:
    """The guarded test app."""
    return build_app(tmp_path_factory.mktemp("app"), settings_for(users_file))


@pytest.fixture
def client(app):
    """A fresh client (no cookies), with no failed logins counted yet."""
    query_cache._local.clear()  # the failure counts of the earlier tests (this app has no shared cache)
    return app.server.test_client()


ROUTES = {
    "page": ("GET", "/", None),
    "deep page": ("GET", "/some/page?x=1", None),
    "dash layout": ("GET", "/_dash-layout", None),
    "dash dependencies": ("GET", "/_dash-dependencies", None),
    "dash callback": ("POST", "/_dash-update-component", echo_payload()),
    "favicon": ("GET", "/_favicon.ico", None),
    "asset": ("GET", "/assets/x.css", None),
    "download": ("GET", "/download/jobs.csv", None),
}


def call(client, route: str, headers: dict | None = None, environ: dict | None = None):
    """Request one route family with the given headers and WSGI environ."""
    method, path, payload = ROUTES[route]
    return client.open(path, method=method, json=payload, headers=headers or {}, environ_base=environ or {})


@pytest.mark.parametrize("route", ROUTES)
def test_missing_credentials_get_401_without_data(client, route):
    resp = call(client, route, JSON)
    assert resp.status_code == 401
    assert resp.headers["WWW-Authenticate"].startswith("Basic realm=")
    assert resp.get_json() == {"error": "authentication required"}
    assert not leaks(resp)


@pytest.mark.parametrize("route", ["page", "deep page", "download"])
def test_browser_page_without_credentials_redirects_to_login(client, route):
    resp = call(client, route, BROWSER)
    assert resp.status_code == 302
    assert resp.headers["Location"].startswith("/login?next=%2F")
    assert not leaks(resp)


@pytest.mark.parametrize("route", ["dash layout", "dash callback", "asset"])
def test_browser_non_page_requests_get_401_not_redirect(client, route):
    assert call(client, route, BROWSER).status_code == 401


WRONG = {
    "wrong password": basic("alice", "not-her-password"),
    "unknown user": basic("mallory", "whatever-password"),
    "empty password": basic("alice", ""),
    "malformed basic": {"Authorization": "Basic !!!not-base64"},
    "bearer token": {"Authorization": "Bearer abc.def"},
}


@pytest.mark.parametrize("creds", WRONG)
@pytest.mark.parametrize("route", ROUTES)
def test_wrong_credentials_get_401_on_every_route(client, route, creds):
    resp = call(client, route, {**BROWSER, **WRONG[creds]})
    assert resp.status_code == 401
    assert "WWW-Authenticate" in resp.headers
    assert not leaks(resp)


@pytest.mark.parametrize("route", ROUTES)
def test_valid_basic_credentials_work_on_every_route(client, route):
    resp = call(client, route, {**JSON, **basic("victor", PASSWORDS["victor"])})
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]


def test_valid_basic_reaches_the_data(client):
    creds = basic("victor", PASSWORDS["victor"])
    assert SECRET_MARK in call(client, "dash callback", creds).get_data(as_text=True)
    assert SECRET_MARK in call(client, "asset", creds).get_data(as_text=True)
    assert SECRET_MARK in call(client, "download", creds).get_data(as_text=True)


def test_healthz_answers_status_only_without_credentials(client):
    resp = client.get("/healthz")
    assert resp.status_code == 200 and resp.get_json() == {"status": "ok"}


def test_healthz_rejects_wrong_credentials(client):
    resp = client.get("/healthz", headers=basic("alice", "bad-password-1"))
    assert resp.status_code == 401 and not leaks(resp)


def test_healthz_details_for_authenticated_users(client):
    body = client.get("/healthz", headers=basic("victor", PASSWORDS["victor"])).get_json()
    assert body["status"] == "ok" and body["user"] == "victor"
    assert body["checks"]["data_dir"] == {"ok": True, "path": SECRET_MARK}
    assert body["checks"]["process"]["ok"] is True


def test_login_form_renders_without_credentials(client):
    resp = client.get("/login?next=/jobs")
    assert resp.status_code == 200
    html_text = resp.get_data(as_text=True)
    assert 'name="password"' in html_text and 'value="/jobs"' in html_text
    assert not leaks(resp)


def test_login_form_escapes_next(client):
    html_text = client.get('/login?next=/x"><script>alert(1)</script>').get_data(as_text=True)
    assert "<script>alert" not in html_text


WRONG_LOGINS = [("alice", "wrong-password"), ("nobody", "alice-admin-pw"), ("", "")]


@pytest.mark.parametrize("name,password", WRONG_LOGINS)
def test_login_with_wrong_credentials_gets_401_and_no_session(client, name, password):
    resp = login_post(client, {"username": name, "password": password, "next": "/"})
    assert resp.status_code == 401
    assert "Wrong user name or password" in resp.get_data(as_text=True)
    assert call(client, "dash callback", JSON).status_code == 401


def test_session_login_and_logout(client):
    form = {"username": "victor", "password": PASSWORDS["victor"], "next": "/jobs?a=1"}
    resp = login_post(client, form)
    assert resp.status_code == 303 and resp.headers["Location"] == "/jobs?a=1"
    cookie = resp.headers["Set-Cookie"]
    assert "helios_session=" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    for route in ROUTES:
        assert call(client, route, JSON).status_code == 200, route
    assert client.get("/healthz").get_json()["user"] == "victor"
    assert client.post("/logout").status_code == 303
    assert call(client, "dash callback", JSON).status_code == 401


OFF_SITE = ["//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:x"]


@pytest.mark.parametrize("target", OFF_SITE)
def test_login_never_redirects_off_site(client, target):
    resp = login_post(client, {"username": "victor", "password": PASSWORDS["victor"], "next": target})
    assert resp.status_code == 303 and resp.headers["Location"] == "/"


def test_forged_session_cookie_is_rejected(app, client):
    other = flask.Flask("forger")
    other.secret_key = "not-the-server-secret"
    with other.test_request_context():
        forged = other.session_interface.get_signing_serializer(other).dumps({"user": "alice", "pw": "x"})
    client.set_cookie("helios_session", forged)
    assert call(client, "dash callback", JSON).status_code == 401


def test_workers_sharing_the_secret_share_sessions(app, users_file, tmp_path):
    second_worker = build_app(tmp_path, settings_for(users_file)).server.test_client()
    first = app.server.test_client()
    login_post(first, {"username": "alice", "password": PASSWORDS["alice"]})
    second_worker.set_cookie("helios_session", first.get_cookie("helios_session").value)
    assert call(second_worker, "dash callback", JSON).status_code == 200


def test_session_ends_when_user_removed_or_password_changed(tmp_path):
    users_file = write_users_file(tmp_path / "users.json")
    client = build_app(tmp_path, settings_for(users_file)).server.test_client()
    login_post(client, {"username": "victor", "password": PASSWORDS["victor"]})
    assert call(client, "dash callback", JSON).status_code == 200
    save_users(users_file, {"victor": UserRecord("victor", "viewer", hash_password("a-new-password"))})
    assert call(client, "dash callback", JSON).status_code == 401
    login_post(client, {"username": "victor", "password": "a-new-password"})
    assert call(client, "dash callback", JSON).status_code == 200
    save_users(users_file, {})
    assert call(client, "dash callback", JSON).status_code == 401


def test_new_user_in_file_can_log_in_without_restart(tmp_path):
    users_file = write_users_file(tmp_path / "users.json", ("alice",))
    client = build_app(tmp_path, settings_for(users_file)).server.test_client()
    assert call(client, "download", basic("victor", PASSWORDS["victor"])).status_code == 401
    write_users_file(users_file)
    assert call(client, "download", basic("victor", PASSWORDS["victor"])).status_code == 200


def test_proxy_header_trusted_from_trusted_address(client):
    resp = call(client, "dash callback", {"X-Forwarded-User": "pat@example.org"}, TRUSTED)
    assert resp.status_code == 200 and SECRET_MARK in resp.get_data(as_text=True)
    body = client.get("/healthz", headers={"X-Forwarded-User": "pat"}, environ_base=TRUSTED).get_json()
    assert body["user"] == "pat"


@pytest.mark.parametrize("route", ROUTES)
def test_proxy_header_ignored_from_untrusted_address(client, route):
    resp = call(client, route, {**JSON, "X-Forwarded-User": "alice", "X-Forwarded-Role": "admin"}, UNTRUSTED)
    assert resp.status_code == 401 and not leaks(resp)


def test_proxy_role_header_and_default_viewer_role(client):
    viewer = {"X-Forwarded-User": "pat"}
    assert client.post("/admin/delete", headers=viewer, environ_base=TRUSTED).status_code == 403
    admin = {"X-Forwarded-User": "pat", "X-Forwarded-Role": "admin"}
    assert client.post("/admin/delete", headers=admin, environ_base=TRUSTED).status_code == 200
    known = {"X-Forwarded-User": "alice"}  # no role header: the users file's role applies
    assert client.post("/admin/delete", headers=known, environ_base=TRUSTED).status_code == 200


def test_proxy_unknown_role_is_rejected(client):
    headers = {"X-Forwarded-User": "pat", "X-Forwarded-Role": "root"}
    assert call(client, "dash callback", headers, TRUSTED).status_code == 401


@pytest.mark.parametrize("name,status", [("victor", 403), ("alice", 200)])
def test_admin_view_needs_admin_role(client, name, status):
    resp = client.post("/admin/delete", headers=basic(name, PASSWORDS[name]))
    assert resp.status_code == status
    if status == 403:
        assert resp.get_json() == {"error": "the admin role is required"}


@pytest.mark.parametrize("name,status", [("victor", 403), ("alice", 200)])
def test_admin_callback_needs_admin_role(client, name, status):
    resp = client.post("/_dash-update-component", json=admin_payload(), headers=basic(name, PASSWORDS[name]))
    assert resp.status_code == status
    assert ("deleted after 1 clicks" in resp.get_data(as_text=True)) == (status == 200)


def test_require_role_rejects_unknown_role_names():
    with pytest.raises(UsersFileError, match="invalid role 'root'"):
        require_role("root")


def test_password_check_uses_constant_time_comparison(monkeypatch):
    calls = []
    real = hmac.compare_digest
    monkeypatch.setattr(hmac, "compare_digest", lambda a, b: calls.append(1) or real(a, b))
    record = UserRecord("alice", "admin", hash_password(PASSWORDS["alice"]))
    assert not auth_users.verify_password(record, "wrong-password")
    assert auth_users.verify_password(record, PASSWORDS["alice"])
    assert not auth_users.verify_password(None, PASSWORDS["alice"])
    assert len(calls) == 3


def test_unknown_user_runs_the_same_scrypt_check(monkeypatch):
    seen = []
    real = auth_users.check_password_hash
    monkeypatch.setattr(auth_users, "check_password_hash", lambda h, p: seen.append(h) or real(h, p))
    assert not auth_users.verify_password(None, "whatever-password")
    assert len(seen) == 1 and seen[0].startswith("scrypt:32768:8:1$")


def test_unknown_user_takes_as_long_as_a_wrong_password(users_file):
    state = auth.AuthState(settings_for(users_file), auth.UserDirectory(users_file), VerifiedCache())
    auth.password_user(state, "nobody", "x")  # build the dummy hash outside the timing

    # The two kinds of attempt alternate, so a change of the machine's load (another test worker, another process)
    # during the measurement falls on both medians alike.
    times: dict[str, list[float]] = {"alice": [], "nobody": []}
    for _ in range(5):
        for name, seen in times.items():
            t0 = time.perf_counter()
            assert auth.password_user(state, name, "definitely-wrong") is None
            seen.append(time.perf_counter() - t0)
    known_s, unknown_s = statistics.median(times["alice"]), statistics.median(times["nobody"])
    assert known_s > 0.005  # scrypt, not a plain comparison
    assert 0.4 < unknown_s / known_s < 2.5


def test_repeated_basic_requests_do_not_rerun_scrypt(client, monkeypatch):
    creds = basic("alice", PASSWORDS["alice"])
    assert call(client, "download", creds).status_code == 200
    seen = []
    real = auth_users.check_password_hash
    monkeypatch.setattr(auth_users, "check_password_hash", lambda h, p: seen.append(h) or real(h, p))
    for _ in range(5):
        assert call(client, "download", creds).status_code == 200
    assert seen == []
    assert call(client, "download", basic("alice", "wrong-password")).status_code == 401
    assert len(seen) == 1


def test_auth_off_lets_everyone_in_as_the_anonymous_role(tmp_path):
    client = build_app(tmp_path, AuthSettings(anonymous_role="admin")).server.test_client()
    for route in ROUTES:
        assert call(client, route, JSON).status_code == 200, route
    assert client.post("/admin/delete").status_code == 200
    assert 'name="password"' not in client.get("/login").get_data(as_text=True)  # no login form
    assert client.get("/healthz").get_json() == {"status": "ok"}


def test_auth_off_with_viewer_anonymous_role_blocks_admin_actions(tmp_path):
    assert AuthSettings().anonymous_role == "viewer"  # the default: nobody is admin without being made one
    client = build_app(tmp_path, AuthSettings()).server.test_client()
    assert client.post("/admin/delete").status_code == 403
    assert client.post("/_dash-update-component", json=admin_payload()).status_code == 403


def test_current_user_reports_name_role_and_method(app):
    with app.server.test_request_context("/", headers=basic("alice", PASSWORDS["alice"])):
        assert app.server.preprocess_request() is None
        assert auth.current_user() == auth.User("alice", "admin", "basic")
        assert auth.has_role("viewer") and auth.has_role("admin")


def test_proxy_only_auth_needs_no_users_file(tmp_path):
    client = build_app(tmp_path, settings_for(None, "127.0.0.1")).server.test_client()
    assert call(client, "download", JSON).status_code == 401
    assert call(client, "download", {"X-Forwarded-User": "pat"}).status_code == 200
    assert call(client, "download", basic("alice", PASSWORDS["alice"])).status_code == 401


def test_missing_or_broken_users_file_fails_at_start(tmp_path):
    with pytest.raises(UsersFileError, match="no such users file"):
        install_auth(flask.Flask("x"), settings_for(tmp_path / "absent.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"users": {"eve": {"role": "root", "password_hash": "x"}}}')
    with pytest.raises(UsersFileError, match="bad.json: invalid role 'root'"):
        install_auth(flask.Flask("y"), settings_for(bad))


def test_users_file_broken_at_run_time_locks_everyone_out(tmp_path):
    users_file = write_users_file(tmp_path / "users.json")
    client = build_app(tmp_path, settings_for(users_file)).server.test_client()
    users_file.write_text("{not json")
    assert call(client, "download", basic("alice", PASSWORDS["alice"])).status_code == 401
    users_file.unlink()
    assert call(client, "download", basic("alice", PASSWORDS["alice"])).status_code == 401


def test_settings_from_env():
    env = {
        "HELIOS_AUTH_FILE": "/etc/helios/users.json",
        "HELIOS_TRUSTED_PROXIES": "10.0.0.1, 192.168.0.0/16,::1",
        "HELIOS_PROXY_USER_HEADER": "X-Auth-User",
        "HELIOS_PROXY_ROLE_HEADER": "X-Auth-Role",
        "HELIOS_SECRET_KEY": "s3cret",
        "HELIOS_SESSION_HOURS": "2",
        "HELIOS_COOKIE_SECURE": "1",
        "HELIOS_ANONYMOUS_ROLE": "viewer",
    }
    settings = AuthSettings.from_env(env)
    assert settings.auth_file == Path("/etc/helios/users.json") and settings.enabled
    assert [str(n) for n in settings.trusted_proxies] == ["10.0.0.1/32", "192.168.0.0/16", "::1/128"]
    assert (settings.proxy_user_header, settings.proxy_role_header) == ("X-Auth-User", "X-Auth-Role")
    assert (settings.secret_key, settings.session_hours, settings.cookie_secure) == ("s3cret", 2.0, True)
    assert settings.anonymous_role == "viewer"
    defaults = AuthSettings.from_env({})
    assert not defaults.enabled and defaults.proxy_user_header == "X-Forwarded-User"


@pytest.mark.parametrize(
    "env,message",
    [
        ({"HELIOS_TRUSTED_PROXIES": "10.0.0.1,not-an-ip"}, "'not-an-ip' is not an IP address or CIDR"),
        ({"HELIOS_SESSION_HOURS": "soon"}, "HELIOS_SESSION_HOURS: expected a number"),
        ({"HELIOS_SESSION_HOURS": "-1"}, "HELIOS_SESSION_HOURS: must be positive"),
    ],
)
def test_settings_from_env_rejects_bad_values(env, message):
    with pytest.raises(ValueError, match=message):
        AuthSettings.from_env(env)


def test_users_file_never_holds_plain_passwords(users_file):
    text = users_file.read_text()
    assert all(p not in text for p in PASSWORDS.values())
    assert json.loads(text)["users"]["alice"]["password_hash"].startswith("scrypt:")
    assert users_file.stat().st_mode & 0o777 == 0o600


def test_a_login_post_without_the_forms_csrf_token_is_refused(client):
    resp = client.post("/login", data={"username": "alice", "password": PASSWORDS["alice"]})
    assert resp.status_code == 400 and "expired" in resp.get_data(as_text=True)
    assert client.get("/", headers=JSON).status_code == 401


def test_repeated_failures_earn_a_back_off_without_hashing(client, app):
    for _ in range(5):
        assert login_post(client, {"username": "alice", "password": "wrong"}).status_code == 401
    throttled = login_post(client, {"username": "alice", "password": PASSWORDS["alice"]})
    assert throttled.status_code == 429 and int(throttled.headers["Retry-After"]) >= 1
    other = app.server.test_client()
    other.environ_base["REMOTE_ADDR"] = "10.9.9.9"
    assert login_post(other, {"username": "alice", "password": "x"}).status_code == 429  # the account backs off too


def test_logout_ends_the_session_on_the_server(client):
    login_post(client, {"username": "alice", "password": PASSWORDS["alice"]})
    cookie = client.get_cookie("helios_session").value
    assert client.get("/", headers=JSON).status_code == 200
    client.post("/logout")
    replay = client.application.test_client()
    replay.set_cookie("helios_session", cookie)
    assert replay.get("/", headers=JSON).status_code == 401  # the old cookie no longer works
