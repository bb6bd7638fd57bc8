"""Access control for the whole Flask server: a users file (HTTP Basic or /login session) or a trusted proxy.

When auth is configured, a before_request hook guards every route (pages, /_dash-*, /assets, downloads); only
/login, /logout and the open paths (/healthz, which then shows no details) answer without credentials, and
wrong credentials get 401 everywhere. Roles: admin (may upload and delete datasets) and viewer.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

import flask
from flask import g, request, session

from components.server import login as auth_login
from components.server.cache import recall, remember
from components.server.hosts import ANONYMOUS_ROLE_ENV
from components.server.throttle import HashBusy, Throttle, hash_slot
from components.server.users import ROLES, UserRecord, UsersFileError, check_role, load_users, verify_password

log = logging.getLogger(__name__)

EXTENSION = "helios_auth"
ADMIN = "admin"
VIEWER = "viewer"
# Paths answering without credentials (showing less); wrong credentials still get 401 there.
HEALTH_PATH = "/healthz"
OPEN_PATHS: tuple[str, ...] = (HEALTH_PATH,)
LOGIN_PATH = "/login"
LOGOUT_PATH = "/logout"
REALM = "Helios Dashboard"
_NON_PAGE_PREFIXES = ("/_dash-", "/assets/", "/_favicon", "/_reload-hash")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_MISSING = (-1, -1)


@dataclass(frozen=True)
class AuthSettings:
    """Where users come from (users file, trusted proxies), the session secret and the anonymous role."""

    auth_file: Path | None = None
    trusted_proxies: tuple[Network, ...] = ()
    proxy_user_header: str = "X-Forwarded-User"
    proxy_role_header: str | None = None
    secret_key: str | None = None
    session_hours: float = 12.0
    cookie_secure: bool = False
    anonymous_role: str = VIEWER  # role of everyone when auth is off (admin: loopback only, hosts.py)

    @property
    def enabled(self) -> bool:
        """True when a users file or trusted proxies are configured."""
        return self.auth_file is not None or bool(self.trusted_proxies)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AuthSettings:
        """Build settings from HELIOS_AUTH_FILE, HELIOS_TRUSTED_PROXIES, HELIOS_PROXY_*_HEADER and friends."""
        env = os.environ if env is None else env
        auth_file = env.get("HELIOS_AUTH_FILE") or None
        return cls(
            auth_file=Path(auth_file) if auth_file else None,
            trusted_proxies=parse_networks(env.get("HELIOS_TRUSTED_PROXIES", "")),
            proxy_user_header=env.get("HELIOS_PROXY_USER_HEADER") or cls.proxy_user_header,
            proxy_role_header=env.get("HELIOS_PROXY_ROLE_HEADER") or None,
            secret_key=env.get("HELIOS_SECRET_KEY") or None,
            session_hours=_positive_float(env, "HELIOS_SESSION_HOURS", cls.session_hours),
            cookie_secure=env.get("HELIOS_COOKIE_SECURE", "0").lower() in ("1", "true", "yes"),
            anonymous_role=check_role(env.get(ANONYMOUS_ROLE_ENV) or cls.anonymous_role),
        )


def parse_networks(text: str) -> tuple[Network, ...]:
    """Parse a comma list of addresses or CIDRs, raising ValueError naming the bad entry."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise ValueError(f"HELIOS_TRUSTED_PROXIES: {item!r} is not an IP address or CIDR") from exc
    return tuple(out)


def _positive_float(env: Mapping[str, str], key: str, default: float) -> float:
    try:
        value = float(env.get(key) or default)
    except ValueError as exc:
        raise ValueError(f"{key}: expected a number, got {env.get(key)!r}") from exc
    if value <= 0:
        raise ValueError(f"{key}: must be positive")
    return value


@dataclass(frozen=True)
class User:
    """The authenticated user of a request: name, role and how they were identified."""

    name: str
    role: str
    via: str  # "basic", "session", "proxy" or "anonymous" (auth off)

    def has_role(self, role: str) -> bool:
        """True when this user may act as role (admin may act as viewer)."""
        return self.role == role or self.role == ADMIN


class UserDirectory:
    """The users file, re-read whenever its modification time or size changes; unreadable means no users."""

    def __init__(self, path: Path | None):
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, UserRecord] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> UserRecord | None:
        """The record of user name, or None."""
        return self.users().get(name)

    def users(self) -> dict[str, UserRecord]:
        """All users of the file as it is now."""
        if self.path is None:
            return {}
        try:
            st = self.path.stat()
        except OSError as exc:
            return self._missing(exc)
        stamp = (st.st_mtime_ns, st.st_size)
        with self._lock:
            if stamp != self._stamp:
                self._reload(stamp)
            return self._users

    def _reload(self, stamp: tuple[int, int]) -> None:
        try:
            self._users = load_users(self.path)
        except UsersFileError as exc:
            self._users = {}
            log.error("%s: nobody can log in until it is fixed", exc)
        self._stamp = stamp

    def _missing(self, exc: OSError) -> dict[str, UserRecord]:
        with self._lock:
            if self._stamp != _MISSING:
                log.error("users file %s unreadable (%s): nobody can log in", self.path, exc)
            self._stamp, self._users = _MISSING, {}
        return {}


class VerifiedCache:
    """Keyed digests of recently verified passwords, so HTTP Basic on every request does not rerun scrypt."""

    def __init__(self, ttl_s: float = 300.0, max_entries: int = 1024):
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._key = secrets.token_bytes(32)
        self._seen: dict[bytes, float] = {}
        self._lock = threading.Lock()

    def _digest(self, record: UserRecord, password: str) -> bytes:
        text = "\0".join((record.name, record.password_hash, password)).encode()
        return hmac.new(self._key, text, hashlib.sha256).digest()

    def check(self, record: UserRecord | None, password: str) -> bool:
        """True when password matches record; a verification cached within ttl_s skips the scrypt work."""
        if record is None:
            return verify_password(None, password)
        digest, now = self._digest(record, password), time.monotonic()
        with self._lock:
            if self._seen.get(digest, 0.0) > now:
                return True
        if not verify_password(record, password):
            return False
        with self._lock:
            if len(self._seen) >= self.max_entries:
                self._seen.clear()
            self._seen[digest] = now + self.ttl_s
        return True


@dataclass
class AuthState:
    """What install_auth keeps on the server: the settings, the users file and the verified-password cache."""

    settings: AuthSettings
    directory: UserDirectory
    verified: VerifiedCache
    throttle: Throttle = field(default_factory=Throttle)


class BadCredentials(Exception):
    """Credentials were sent but are wrong (always 401, never a redirect)."""


class LoginThrottled(Exception):
    """Too many failed logins from this client or for this account: wait wait_s seconds."""

    def __init__(self, wait_s: float):
        super().__init__(f"too many failed logins; try again in {wait_s:.0f} s")
        self.wait_s = wait_s


def _state() -> AuthState | None:
    return flask.current_app.extensions.get(EXTENSION)


def _password_fingerprint(record: UserRecord) -> str:
    return hashlib.sha256(record.password_hash.encode()).hexdigest()[:16]


def check_login(state: AuthState, name: str, password: str) -> User | None:
    """The user for a name and password, or None; refused without hashing while the client or the account is in its
    back-off after repeated failures (LoginThrottled), or when too many hashes run at once (HashBusy)."""
    client = f"ip:{request.remote_addr}"
    account = f"user:{name[:128]}"
    wait_s = max(state.throttle.wait_s(client), state.throttle.wait_s(account))
    if wait_s > 0:
        raise LoginThrottled(wait_s)
    with hash_slot():
        user = password_user(state, name, password)
    for key in (client, account):
        if user is None:
            state.throttle.failed(key)
        else:
            state.throttle.succeeded(key)
    return user


def password_user(state: AuthState, name: str, password: str) -> User | None:
    """The user for a name and password from the users file, or None (unknown users cost the same time)."""
    record = state.directory.get(name)
    if not state.verified.check(record, password) or record is None:
        return None
    return User(record.name, record.role, "basic")


def _remote_trusted(settings: AuthSettings) -> bool:
    # The peer itself, also when X-Forwarded-For (HELIOS_PROXY_COUNT) named the client behind it as remote_addr.
    peer = request.environ.get("werkzeug.proxy_fix.orig", {}).get("REMOTE_ADDR", request.remote_addr)
    try:
        addr = ipaddress.ip_address(peer or "")
    except ValueError:
        return False
    return any(addr in net for net in settings.trusted_proxies)


def _proxy_user(state: AuthState) -> User | None:
    settings = state.settings
    name = request.headers.get(settings.proxy_user_header, "").strip()
    if not name or not _remote_trusted(settings):
        return None
    role = request.headers.get(settings.proxy_role_header, "").strip() if settings.proxy_role_header else ""
    if role and role not in ROLES:
        raise BadCredentials(f"unknown role {role!r} in {settings.proxy_role_header}")
    record = state.directory.get(name)
    return User(name, role or (record.role if record else VIEWER), "proxy")


def _basic_user(state: AuthState) -> User | None:
    header = request.headers.get("Authorization")
    if not header:
        return None
    auth = request.authorization
    if auth is None or auth.type != "basic" or not auth.username or auth.password is None:
        raise BadCredentials("unsupported or malformed Authorization header")
    user = check_login(state, auth.username, auth.password)
    if user is None:
        raise BadCredentials("wrong user name or password")
    return user


def _session_user(state: AuthState) -> User | None:
    name = session.get("user")
    if not isinstance(name, str):
        return None
    sid = session.get("sid")
    if not isinstance(sid, str) or recall(f"helios:revoked:{sid}"):
        session.clear()  # logged out (on any worker or host sharing the cache)
        return None
    record = state.directory.get(name)
    if record is None or session.get("pw") != _password_fingerprint(record):
        session.clear()  # user removed or password changed since login
        return None
    return User(record.name, record.role, "session")


def identify(state: AuthState) -> User | None:
    """The user of the current request (proxy header, then HTTP Basic, then session), or None."""
    return _proxy_user(state) or _basic_user(state) or _session_user(state)


def _wants_html() -> bool:
    if request.method != "GET" or request.path.startswith(_NON_PAGE_PREFIXES):
        return False
    return request.accept_mimetypes.best_match(["application/json", "text/html"]) == "text/html"


def unauthorized(message: str) -> flask.Response:
    """A 401 response with a JSON error and a Basic challenge (no data)."""
    resp = flask.jsonify(error=message)
    resp.status_code = 401
    resp.headers["WWW-Authenticate"] = f'Basic realm="{REALM}", charset="UTF-8"'
    return resp


def _login_redirect() -> flask.Response:
    target = request.full_path if request.query_string else request.path
    return flask.redirect(f"{LOGIN_PATH}?{urlencode({'next': target})}", code=302)


def _guard() -> flask.Response | None:
    state = _state()
    g.helios_user = None
    if state is None or not state.settings.enabled or request.path in (LOGIN_PATH, LOGOUT_PATH):
        return None
    try:
        g.helios_user = identify(state)
    except BadCredentials as exc:
        return unauthorized(str(exc))
    except LoginThrottled as exc:
        resp = flask.jsonify(error=str(exc))
        resp.status_code, resp.headers["Retry-After"] = 429, str(int(exc.wait_s) + 1)
        return resp
    except HashBusy as exc:
        resp = flask.jsonify(error=str(exc))
        resp.status_code = 503
        return resp
    if g.helios_user is not None or request.path in OPEN_PATHS:
        return None
    return _login_redirect() if _wants_html() else unauthorized("authentication required")


def current_user() -> User | None:
    """The request's user: anonymous with the anonymous role when auth is off, None when not logged in."""
    state = _state()
    if state is None or not state.settings.enabled:
        role = state.settings.anonymous_role if state else ADMIN
        return User("anonymous", role, "anonymous")
    return g.get("helios_user")


def auth_enabled() -> bool:
    """True when the current app has auth configured."""
    state = _state()
    return state is not None and state.settings.enabled


def has_role(role: str) -> bool:
    """True when the current user may act as role."""
    user = current_user()
    return user is not None and user.has_role(role)


def login_session(user_record: UserRecord) -> None:
    """Start a signed-cookie session for a user who logged in with the form."""
    session.clear()
    session["user"] = user_record.name
    session["pw"] = _password_fingerprint(user_record)
    session["sid"] = secrets.token_hex(16)
    session.permanent = True


def _csrf_token() -> str:
    token = session.get("csrf")
    if not isinstance(token, str):
        token = session["csrf"] = secrets.token_hex(16)
    return token


def _login_view() -> flask.Response | tuple[str, int]:
    next_path = auth_login.safe_next(request.values.get("next", "/"))
    if request.method == "GET":
        return auth_login.login_page(next_path, csrf=_csrf_token()), 200
    if not hmac.compare_digest(str(request.form.get("csrf", "")), str(session.get("csrf", "-"))):
        return auth_login.login_page(next_path, "The form expired; log in again.", csrf=_csrf_token()), 400
    state = _state()
    name, password = request.form.get("username", ""), request.form.get("password", "")
    record = state.directory.get(name) if state else None
    try:
        user = check_login(state, name, password) if state else None
    except LoginThrottled as exc:
        page = auth_login.login_page(next_path, str(exc).capitalize() + ".", csrf=_csrf_token())
        return flask.Response(page, status=429, headers={"Retry-After": str(int(exc.wait_s) + 1)})
    except HashBusy as exc:
        return flask.Response(auth_login.login_page(next_path, str(exc), csrf=_csrf_token()), status=503)
    if user is None or record is None:
        return auth_login.login_page(next_path, "Wrong user name or password.", csrf=_csrf_token()), 401
    login_session(record)
    return flask.redirect(next_path, code=303)


def _logout_view() -> flask.Response:
    sid = session.get("sid")
    if isinstance(sid, str):
        lifetime_s = int(flask.current_app.permanent_session_lifetime.total_seconds())
        remember(f"helios:revoked:{sid}", True, lifetime_s)
    session.clear()
    return flask.redirect(LOGIN_PATH, code=303)


def _configure_session(server: flask.Flask, settings: AuthSettings) -> None:
    if settings.secret_key:
        server.secret_key = settings.secret_key
    elif not server.secret_key and settings.enabled:
        server.secret_key = secrets.token_hex(32)
        log.warning("HELIOS_SECRET_KEY is not set: login sessions are valid in this worker process only")
    server.config.update(
        SESSION_COOKIE_NAME="helios_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.cookie_secure,
        PERMANENT_SESSION_LIFETIME=timedelta(hours=settings.session_hours),
    )


def install_auth(server: flask.Flask, settings: AuthSettings | None = None) -> None:
    """Guard every route of server per settings (default: from env); a bad users file raises an error."""
    settings = settings or AuthSettings.from_env()
    directory = UserDirectory(settings.auth_file)
    if settings.auth_file is not None:
        load_users(settings.auth_file)  # fail at start-up on a missing or bad users file
    server.extensions[EXTENSION] = AuthState(settings, directory, VerifiedCache(), Throttle())
    _configure_session(server, settings)
    server.before_request_funcs.setdefault(None, []).insert(0, _guard)
    if settings.enabled:
        server.add_url_rule(LOGIN_PATH, "helios_login", _login_view, methods=["GET", "POST"])
        server.add_url_rule(LOGOUT_PATH, "helios_logout", _logout_view, methods=["GET", "POST"])
    log.info("auth %s", "on" if settings.enabled else f"off (everyone is {settings.anonymous_role})")
