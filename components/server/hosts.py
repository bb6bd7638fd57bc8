"""Where the server listens and which Host names it answers: a request naming any other host (a DNS-rebinding page,
a proxy passing the wrong name) gets 400 before any route, hook or access rule sees it; and anonymous admin only on
a server that listens on loopback only. Standard library only: gunicorn's master process uses it before it forks."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping

log = logging.getLogger(__name__)

# Set by the launchers (gunicorn.conf.py, `helios serve`) before the app is built: the addresses the server listens on,
# comma-separated `host:port` (IPv6 in brackets) or `unix:PATH`. Unset: not known (a launcher that does not say).
LISTEN_ENV = "HELIOS_LISTEN_ADDRESSES"
ALLOWED_HOSTS_ENV = "HELIOS_ALLOWED_HOSTS"
ANONYMOUS_ROLE_ENV = "HELIOS_ANONYMOUS_ROLE"
LOOPBACK_NAMES: tuple[str, ...] = ("localhost", "127.0.0.1", "[::1]")
UNIX_PREFIX = "unix:"
_NAME_RE = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")  # DNS labels (IDNs arrive as punycode) or an IPv4 address
_PORT_RE = re.compile(r"^[0-9]{0,5}$")  # RFC 9110: the port after the colon may be empty


class UnsafeServing(ValueError):
    """A setting that would expose the server: the message says which and what to do."""


def _ipv6(text: str) -> str | None:
    """text as a bracketed, compressed IPv6 address, or None when it is not one."""
    try:
        return f"[{ipaddress.IPv6Address(text).compressed}]"
    except ValueError:
        return None


def host_name(value: str) -> str | None:
    """The host a Host header names: lower case, without its port or a trailing dot, an IPv6 address in brackets;
    None when the header is malformed (a bare IPv6 address, a port that is not a number, an empty name)."""
    text = value.strip().lower()
    if text.startswith("["):
        inside, closed, rest = text[1:].partition("]")
        if not closed or (rest and not (rest.startswith(":") and _PORT_RE.match(rest[1:]))):
            return None
        return _ipv6(inside)
    name, colon, port = text.partition(":")
    if colon and not _PORT_RE.match(port):
        return None
    name = name.removesuffix(".")
    return name if _NAME_RE.match(name) else None


def entry_name(value: str) -> str | None:
    """As host_name, for a name a setting lists (a bare IPv6 address is taken as one)."""
    text = value.strip()
    return _ipv6(text) if text.count(":") > 1 and not text.startswith("[") else host_name(text)


def address_text(host: str, port: int) -> str:
    """A listening address as LISTEN_ENV writes it: `host:port`, an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def announce(addresses: Iterable[str]) -> None:
    """Tell the app built in this process (and its children) where the server listens (see LISTEN_ENV)."""
    os.environ[LISTEN_ENV] = ",".join(addresses)


def listen_addresses(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The addresses the launcher announced, () when it did not."""
    text = (os.environ if env is None else env).get(LISTEN_ENV, "")
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _is_loopback(address: str) -> bool:
    if address.startswith(UNIX_PREFIX):
        return False  # a socket file: a local proxy may publish it; not loopback as far as a browser is concerned
    name = entry_name(address)
    if name == "localhost":
        return True
    try:
        return name is not None and ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def loopback_only(addresses: tuple[str, ...]) -> bool:
    """True when the server is known to listen, and only on loopback addresses."""
    return bool(addresses) and all(_is_loopback(a) for a in addresses)


def check_anonymous_role(role: str, addresses: tuple[str, ...]) -> None:
    """Refuse (UnsafeServing) to make every visitor an admin unless the server listens on loopback only."""
    if role != "admin" or loopback_only(addresses):
        return
    where = f"listens on {', '.join(addresses)}" if addresses else "does not say where it listens"
    raise UnsafeServing(
        f"{ANONYMOUS_ROLE_ENV}=admin makes every visitor an admin, so it is allowed only on a server that listens on "
        f"loopback only (127.0.0.1, [::1], localhost), and this one {where}: serve on 127.0.0.1, or unset "
        f"{ANONYMOUS_ROLE_ENV} and give admins an account (HELIOS_AUTH_FILE, `helios user add`)"
    )


def default_hosts(addresses: tuple[str, ...]) -> tuple[str, ...]:
    """The Host names answered when HELIOS_ALLOWED_HOSTS is unset: the loopback names and the listening hosts."""
    bound = (entry_name(a) for a in addresses if not a.startswith(UNIX_PREFIX))
    return tuple(dict.fromkeys([*LOOPBACK_NAMES, *(b for b in bound if b)]))


def parse_allowed_hosts(text: str) -> tuple[str, ...]:
    """The names of HELIOS_ALLOWED_HOSTS (comma-separated; () when unset); a malformed one raises ValueError naming
    it."""
    names = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name = entry_name(item)
        if name is None:
            raise ValueError(f"{ALLOWED_HOSTS_ENV}: {item!r} is not a host name or IP address")
        names.append(name)
    return tuple(dict.fromkeys(names))


REFUSAL = b"400 Bad Request: this server does not answer to that host name (HELIOS_ALLOWED_HOSTS)\n"
REFUSAL_HEADERS = [
    ("Content-Type", "text/plain; charset=utf-8"),
    ("Content-Length", str(len(REFUSAL))),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
]


class AllowedHosts:
    """WSGI middleware: a request whose Host header names none of allowed gets 400 before the app sees it."""

    def __init__(self, app: Callable, allowed: Iterable[str]):
        self.app = app
        self.allowed = frozenset(allowed)

    def __call__(self, environ: dict, start_response: Callable):
        """Pass the request on, or answer 400 and log the refused name."""
        raw = environ.get("HTTP_HOST", "")
        if host_name(raw) in self.allowed:
            return self.app(environ, start_response)
        log.warning(
            "refused Host %r (%s %s from %s)",
            raw[:200],
            environ.get("REQUEST_METHOD"),
            environ.get("PATH_INFO", "")[:200],
            environ.get("REMOTE_ADDR"),
        )
        start_response("400 Bad Request", list(REFUSAL_HEADERS))
        return [REFUSAL]


def install_allowed_hosts(server, allowed: Iterable[str]) -> None:
    """Answer only requests naming one of allowed in their Host header: installed last, it runs first."""
    server.wsgi_app = AllowedHosts(server.wsgi_app, allowed)
