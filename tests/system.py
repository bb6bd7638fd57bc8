"""System components some tests need (a browser, Redis, Slurm): skip without them, fail when CI requires them."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = "/usr/bin/chromium"
# component -> (environment variable that makes it required, Debian packages that provide it)
COMPONENTS: dict[str, tuple[str, str]] = {
    "Chromium": ("REQUIRE_BROWSER", "chromium chromium-driver"),
    "Redis": ("REQUIRE_REDIS", "redis-server"),
    "Slurm": ("REQUIRE_SLURM", "slurm-wlm slurmdbd mariadb-server munge"),
}


def require(component: str, missing: str | None) -> None:
    """Skip the test because `missing` says what of component is absent, or fail it when REQUIRE_... is 1."""
    if missing is None:
        return
    env, packages = COMPONENTS[component]
    reason = f"{component} is not installed: {missing} (apt-get install -y {packages}; set {env}=1 to require it)"
    if os.environ.get(env) == "1":
        pytest.fail(f"{reason}, but {env}=1")
    pytest.skip(reason)


def require_program(component: str, *programs: str) -> None:
    """Skip (or fail, when required) unless every program is on PATH."""
    absent = [p for p in programs if shutil.which(p) is None]
    require(component, f"{', '.join(absent)} not found on PATH" if absent else None)
