"""Screenshots of every page at 1280 and 1920 px wide and on a phone (390 px) into docs/screenshots/.

Usage: python bench/screenshots.py http://127.0.0.1:8050 [docs/screenshots]  (a running server, headless Chromium)
Each shot is the top of the page, cut at a height that keeps the PNGs small (the README lists what each shows).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

WHATIF = (
    "/whatif?ds=helios-synth&cluster=Venus&start=2020-09-25&end=2020-09-27&pol=fifo,sjf,qssf&placer=consolidate"
    "&bf=0&est=history&noise=1&load=1&cap=1&run=1&sx=load_factor&sxv=0.8,1,1.2&sy=policy&syv=fifo,qssf"
    "&sm=avg_queue_s&sweep=1"
)
PAGES: dict[str, str] = {
    "overview": "/?ds=helios-synth",
    "cluster": "/cluster?ds=helios-synth",
    "jobs": "/jobs?ds=helios-synth",
    "jobs-running": "/jobs?ds=helios-synth&range=7d&time=running",
    "job": "/jobs/1248?ds=helios-synth&cluster=Earth",
    "users": "/users?ds=helios-synth",
    "compare": "/compare?ds=helios-synth&cmp=helios-synth,philly&ref=1",
    "whatif": WHATIF,
    "whatif-twin": "/whatif?ds=helios-synth&cluster=Earth&start=2020-07-01&end=2020-07-31&pol=qssf&run=1",
    "data": "/data",
}
# (name, viewport width, viewport height, the most page height kept in px)
SIZES: tuple[tuple[str, int, int, int], ...] = (("1280", 1280, 900, 3000), ("1920", 1920, 1080, 1700))
SIZES += (("phone", 390, 844, 2400),)
BUSY = """() => document.querySelectorAll('[data-dash-is-loading="true"]').length
    + (document.body.innerText.includes('running…') ? 1 : 0)"""


def settle(tab, timeout_s: float = 240) -> None:
    """Wait until no Dash callback is loading and no what-if run is going."""
    tab.wait_for_load_state("networkidle", timeout=timeout_s * 1000)
    tab.wait_for_function("document.querySelectorAll('#_pages_content *').length > 20", timeout=timeout_s * 1000)
    deadline = time.time() + timeout_s
    while time.time() < deadline and tab.evaluate(BUSY):
        time.sleep(0.5)
    time.sleep(2)


def shoot(base: str, out: Path) -> list[Path]:
    """Every page at every size as PNG under out; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
        for size, width, height, max_height in SIZES:
            context = browser.new_context(viewport={"width": width, "height": height})
            context.add_init_script("window.HELIOS_DRAW_ALL = true;")  # a full-page picture: every figure drawn
            tab = context.new_page()
            for name, path in PAGES.items():
                tab.goto(base + path, timeout=240_000)
                settle(tab)
                full = tab.evaluate("document.documentElement.scrollHeight")
                clip = {"x": 0, "y": 0, "width": width, "height": min(full, max_height)}
                target = out / f"{name}-{size}.png"
                tab.screenshot(path=str(target), full_page=True, clip=clip)
                written.append(target)
                print(target, f"{target.stat().st_size / 1e3:.0f} kB", flush=True)
            context.close()
        browser.close()
    return written


if __name__ == "__main__":
    files = shoot(sys.argv[1].rstrip("/"), Path(sys.argv[2] if len(sys.argv) > 2 else "docs/screenshots"))
    print(f"{len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB")
