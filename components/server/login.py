"""The /login form of the dashboard (plain HTML, no Dash assets, so it renders before anyone is logged in)."""

from __future__ import annotations

from html import escape
from urllib.parse import urlsplit

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Log in - Helios Dashboard</title>
<style>
body {{ font-family: system-ui, sans-serif; background: #f4f5f7; display: flex; justify-content: center; }}
form {{ background: #fff; margin-top: 12vh; padding: 2rem; border-radius: 8px; width: 20rem;
       box-shadow: 0 1px 4px rgba(0, 0, 0, .15); }}
label, input, button {{ display: block; width: 100%; box-sizing: border-box; }}
input {{ margin: .25rem 0 1rem; padding: .5rem; }}
button {{ padding: .6rem; background: #1f4e79; color: #fff; border: 0; border-radius: 4px; }}
.error {{ color: #b00020; }}
</style></head>
<body><form method="post" action="/login">
<h1>Helios Dashboard</h1>
{error}
<label for="username">User name</label>
<input id="username" name="username" autocomplete="username" required autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<input type="hidden" name="next" value="{next_path}">
<input type="hidden" name="csrf" value="{csrf}">
<button type="submit">Log in</button>
</form></body></html>
"""


def safe_next(target: str) -> str:
    """The path to go to after login: target when it is a local path, else '/' (no open redirects)."""
    parts = urlsplit(target or "/")
    local = target.startswith("/") and not target.startswith("//") and "\\" not in target
    if not local or parts.scheme or parts.netloc or len(target) > 2048:
        return "/"
    return target


def login_page(next_path: str, error: str = "", csrf: str = "") -> str:
    """The login form HTML, posting back to /login with the escaped next path, its CSRF token and an error line."""
    message = f'<p class="error" role="alert">{escape(error)}</p>' if error else ""
    return _PAGE.format(error=message, next_path=escape(next_path, quote=True), csrf=escape(csrf, quote=True))
