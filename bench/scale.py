"""Issue #15 at scale: an N-times Helios trace built, ingested, served and visited on this machine, with its figures.

    python bench/scale.py --factor 10 [--demo-dir DATA] [--work data/scale] [--skip ingest,pages,memory,whatif]

1. build: the N-times trace from the demo dataset in the published Helios layout under WORK/src-<N>x (method in
   bench/scale_trace.py; skipped when it is there already).
2. ingest: `helios ingest` of it in a child process (the real command, derived files included): wall time, peak
   RSS (the child's ru_maxrss) and the peak RSS of its process tree sampled every 0.1 s.
3. pages: gunicorn with gunicorn.conf.py and 2 workers on it; once both are warm, headless Chromium visits every page
   twice through the navbar (first visit on an empty query cache, then again) and times it until the charts of its
   first screen are drawn (cards below it draw when scrolled to: after the first visit the bench scrolls through the
   page and times that too); it starts clicking once plotly.js has loaded in the idle time after the first page, as
   a reader of that page would; one filtered view (a single cluster) is timed as well: it is answered from that
   cluster's rollups once the server's warm-up has written them (`helios ingest` leaves them to it), else computed
   from the columns.
4. memory: RSS, PSS and USS (/proc/PID/smaps_rollup) of each worker after the visits; then a third worker (TTIN) and
   what it adds once it is warm and the pages were visited again.
5. whatif: FIFO and QSSF each on one month of the largest cluster, and a year-long window: its progress reports.
Every timing is printed with the load average at that moment.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import date, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[0] = str(REPO)  # NOTE: run as a script, this folder comes first on sys.path; the repository must
sys.path.insert(1, str(REPO / "bench"))

import dashboard as page_bench  # noqa: E402
import psutil  # noqa: E402
import scale_trace  # noqa: E402

from analytics import store  # noqa: E402

PAGES = ("/", "/cluster", "/jobs", "/users", "/compare", "/data", "/whatif")
READY_JS = {**page_bench.READY_JS, "/whatif": "!!document.querySelector('#whatif-run')"}
TITLES = {**page_bench.TITLES, "/whatif": "What-if"}
GIB = 2**30
GB_IN_GIB = 1e9 / GIB  # the budgets are in decimal GB and MB; the figures are printed in GiB
BUDGETS = {  # factor -> (ingest s, ingest GiB, first visit s, second visit s, worker GiB)
    1: (None, None, 1.5, None, 0.5 * GB_IN_GIB),
    10: (120.0, 6.0 * GB_IN_GIB, 3.0, 1.0, 1.5 * GB_IN_GIB),
}
TODAY_10X = {"ingest_s": 98.5, "ingest_gib": 11.0, "worker_gib": 9.0}  # issue #15's measurements of the old code
TODAY_10X_PAGES = {"/cluster": (48.4, 24.4), "/jobs": (14.9, 2.4), "/users": (8.1, 2.0), "/compare": (15.5, 5.3)}


def load() -> str:
    """The 1-minute load average, for the line of every timing."""
    return f"load {os.getloadavg()[0]:.2f}"


def say(text: str) -> None:
    """Print one progress or result line at once."""
    print(text, flush=True)


# --- ingest -------------------------------------------------------------------------------------------------------


class TreePeak:
    """Samples the summed RSS of a process and its children every interval_s, keeping the peak."""

    def __init__(self, pid: int, interval_s: float = 0.1):
        self.proc, self.interval_s, self.peak_bytes = psutil.Process(pid), interval_s, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.interval_s):
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
                self.peak_bytes = max(self.peak_bytes, sum(p.memory_info().rss for p in procs))
            except psutil.Error:
                continue

    def done(self) -> int:
        """Stop sampling; the peak in bytes."""
        self.stop.set()
        self.thread.join()
        return self.peak_bytes


def read_source(folder: Path) -> tuple[float, float]:
    """Read every file of folder once (into the page cache, where an export just written is); its GiB and seconds."""
    t0, size = time.perf_counter(), 0
    for path in sorted(folder.rglob("*.csv")):
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 24):
                size += len(chunk)
    return size / GIB, time.perf_counter() - t0


def ingest(source: Path, data_dir: Path, name: str) -> dict[str, Any]:
    """Run `helios ingest` on source in a child process; its wall time, peak RSS and printed stages."""
    shutil.rmtree(data_dir, ignore_errors=True)
    env = {**os.environ, "HELIOS_DATA_DIR": str(data_dir), "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "cli.py", "ingest", str(source), "--format", "helios", "--name", name]
    before = load()
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = TreePeak(child.pid)
    out, err = child.communicate()
    wall_s = time.perf_counter() - t0
    tree_bytes = sampler.done()
    maxrss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the ingest is this script's first child
    if child.returncode != 0:
        raise SystemExit(f"ingest failed ({child.returncode}): {err[-2000:]}")
    return {
        "wall_s": wall_s,
        "maxrss_gib": maxrss_kib * 1024 / GIB,
        "tree_gib": tree_bytes / GIB,
        "stages": [line.strip() for line in err.splitlines() if line.startswith("[")],
        "load": f"{before} -> {load()}",
        "summary": out.splitlines()[0],
    }


# --- pages and memory ---------------------------------------------------------------------------------------------


class Server:
    """gunicorn with the production settings (gunicorn.conf.py) on one data folder, its log in a file."""

    def __init__(self, data_dir: Path, dataset: str, workers: int = 2):
        self.cache_dir = Path(tempfile.mkdtemp(prefix="helios-scale-cache-"))
        self.port = page_bench._free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.gettempdir()) / f"helios-scale-gunicorn-{self.port}.log"
        env = {
            **os.environ,
            "HELIOS_DATA_DIR": str(data_dir),
            "HELIOS_CACHE_DIR": str(self.cache_dir),
            "HELIOS_DEFAULT_DATASET": dataset,
            "WEB_CONCURRENCY": str(workers),
            "HELIOS_BIND_HOST": "127.0.0.1",
            "PORT": str(self.port),
        }
        with self.log_path.open("w") as log:
            cmd = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "app:server"]
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=log)

    def warm(self, workers: int, timeout_s: float = 900.0) -> float:
        """Wait until `workers` workers logged their warm-up as done; the seconds waited."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < timeout_s:
            if self.log_path.read_text().count("warm-up: dataset") >= workers:
                urllib.request.urlopen(self.url + "/healthz", timeout=30)
                return time.perf_counter() - t0
            if self.proc.poll() is not None:
                raise SystemExit(f"gunicorn stopped; see {self.log_path}")
            time.sleep(0.2)
        raise SystemExit(f"workers not warm after {timeout_s:.0f} s; see {self.log_path}")

    def workers(self) -> list[psutil.Process]:
        """The worker processes (children of the master)."""
        return psutil.Process(self.proc.pid).children()

    def add_worker(self) -> None:
        """Ask the master for one more worker."""
        os.kill(self.proc.pid, signal.SIGTTIN)

    def stop(self) -> None:
        """Stop gunicorn and remove its cache."""
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.cache_dir, ignore_errors=True)


def memory(proc: psutil.Process) -> dict[str, float]:
    """RSS, PSS and USS of one process in GiB (/proc/PID/smaps_rollup), and RSS split into anonymous memory (its
    own heap) and mapped files (the column files, shared through the page cache)."""
    fields = {}
    for line in Path(f"/proc/{proc.pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, value = line.split(":", 1)
        fields[key] = int(value.split()[0]) * 1024
    uss = fields["Private_Clean"] + fields["Private_Dirty"]
    got = {"rss": fields["Rss"], "pss": fields["Pss"], "uss": uss, "anon": fields["Anonymous"]}
    got["file"] = got["rss"] - got["anon"]
    return {k: v / GIB for k, v in got.items()}


def _ready(path: str) -> str:
    title = f"(document.querySelector('#_pages_content h4') || {{}}).innerText === '{TITLES[path]}'"
    return f"{title} && ({READY_JS[path]}) && {page_bench.NOT_LOADING_IN_VIEW_JS}"


def _click_s(tab, path: str) -> float:
    t0 = time.perf_counter()
    tab.locator(f"#nav-{TITLES[path].lower()}").click()
    tab.wait_for_function(_ready(path), timeout=180_000, polling=50)
    return time.perf_counter() - t0


def _goto_s(tab, url: str, path: str) -> float:
    t0 = time.perf_counter()
    tab.goto(url)
    tab.wait_for_function(_ready(path), timeout=180_000, polling=50)
    return time.perf_counter() - t0


def visit_pages(server: Server, filtered: str) -> list[dict[str, Any]]:
    """Seconds until each page is drawn in Chromium: a navbar click on an empty query cache, then a second visit;
    and the filtered view (a full load of /cluster for one cluster), first and second time."""
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=page_bench.CHROMIUM_ARGS)
        tab = browser.new_page(viewport={"width": 1440, "height": 900})
        _goto_s(tab, server.url + "/data", "/data")  # the browser caches the JS bundles once
        page_bench.settle_first_page(tab)
        for path in PAGES:
            first = _click_s(tab, path)
            rest = page_bench.scroll_through_s(tab)
            _click_s(tab, "/data" if path != "/data" else "/")
            second = _click_s(tab, path)
            rows.append({"page": path, "first_s": first, "second_s": second, "scroll_s": rest, "load": load()})
            say(
                f"  {path:9} first {first:6.2f} s (then every chart drawn by scrolling through: {rest:5.2f} s)  "
                f"second {second:5.2f} s  ({load()})"
            )
        first = _goto_s(tab, server.url + "/cluster?" + filtered, "/cluster")
        second = _goto_s(tab, server.url + "/cluster?" + filtered, "/cluster")
        rows.append({"page": f"/cluster?{filtered}", "first_s": first, "second_s": second, "load": load()})
        say(f"  /cluster?{filtered} (one cluster) first {first:6.2f} s  second {second:5.2f} s ({load()})")
        browser.close()
    return rows


def revisit(server: Server) -> None:
    """Visit every page once more (the query cache is warm), so that a new worker answers some of them."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=page_bench.CHROMIUM_ARGS)
        tab = browser.new_page(viewport={"width": 1440, "height": 900})
        for _ in range(2):
            for path in PAGES:
                _goto_s(tab, server.url + path, path)
        browser.close()


def worker_memory(server: Server) -> list[dict[str, float]]:
    """Memory of every worker, printed."""
    rows = []
    for proc in server.workers():
        mem = {"pid": proc.pid, **memory(proc)}
        rows.append(mem)
        say(
            f"  worker {proc.pid}: RSS {mem['rss']:.2f} GiB (anonymous {mem['anon']:.2f}, mapped files "
            f"{mem['file']:.2f}), PSS {mem['pss']:.2f} GiB, USS {mem['uss']:.2f} GiB"
        )
    return rows


def third_worker(server: Server) -> dict[str, Any]:
    """Add a worker, let it warm up and serve the pages again; the memory it adds."""
    before = {p.pid for p in server.workers()}
    available_before = psutil.virtual_memory().available
    server.add_worker()
    server.warm(3)
    revisit(server)
    rows = worker_memory(server)
    new = [r for r in rows if r["pid"] not in before]
    added = {
        "new_worker": new[0] if new else None,
        "available_drop_gib": (available_before - psutil.virtual_memory().available) / GIB,
        "workers": rows,
    }
    say(f"  machine's available memory dropped by {added['available_drop_gib']:.2f} GiB ({load()})")
    return added


# --- what-if ------------------------------------------------------------------------------------------------------


def whatif(data_dir: Path, dataset: str, cluster: str, month: date) -> dict[str, Any]:
    """Wall time of FIFO and of QSSF on one month of cluster, and of FIFO over the year from that month with the
    largest gap between its progress reports."""
    os.environ["HELIOS_DATA_DIR"] = str(data_dir)
    from components.server.settings import Settings
    from components.whatif.run import get_or_run, results_cache
    from sim.scenario import ScenarioConfig, open_request

    def run(policy: str, end: date) -> dict[str, Any]:
        config = ScenarioConfig(
            dataset=dataset, cluster=cluster, start=month.isoformat(), end=end.isoformat(), policies=(policy,)
        )
        stamps: list[float] = []
        with tempfile.TemporaryDirectory() as tmp:
            cache = results_cache(Settings(cache_dir=Path(tmp)))
            t0 = time.perf_counter()
            result, _, _ = get_or_run(open_request(config), cache, lambda f, m: stamps.append(time.perf_counter()))
            wall = time.perf_counter() - t0
        marks = [t0, *stamps, t0 + wall]
        gap = max(b - a for a, b in zip(marks, marks[1:], strict=False))
        say(
            f"  {policy} {month}..{end}: {result.jobs:,} GPU jobs, {wall:.2f} s (stages {result.stage_s}), "
            f"largest progress gap {gap:.2f} s ({load()})"
        )
        return {"policy": policy, "end": end.isoformat(), "jobs": result.jobs, "wall_s": wall, "gap_s": gap}

    month_end = (month.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
    year_end = month.replace(year=month.year + 1) - timedelta(days=1)
    return {"month": [run("fifo", month_end), run("qssf", month_end)], "year": run("fifo", year_end)}


# --- the run ------------------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--factor", type=int, default=10, help="how many times the demo trace is repeated (default 10)")
    p.add_argument(
        "--demo-dir",
        type=Path,
        default=Path(os.environ.get("HELIOS_DATA_DIR", REPO / "data")),
        help="the data folder holding the helios-synth demo (default $HELIOS_DATA_DIR or data/)",
    )
    p.add_argument(
        "--work", type=Path, default=REPO / "data" / "scale", help="where the trace and dataset go (default data/scale)"
    )
    p.add_argument("--skip", default="", help="comma-separated steps to skip: ingest, pages, memory, whatif")
    p.add_argument("--cluster", default="Saturn", help="the what-if cluster (default Saturn, the largest)")
    p.add_argument("--month", default=None, help="the what-if month (default: the middle copy's July)")
    p.add_argument("--json", type=Path, help="also write the figures as JSON here")
    return p.parse_args()


def main() -> int:
    """Build, ingest, serve, visit and simulate; print the figures; exit 1 when a budget is missed."""
    args = parse_args()
    skip = set(filter(None, args.skip.split(",")))
    name, data_dir = f"helios-{args.factor}x", args.work / f"data-{args.factor}x"
    figures: dict[str, Any] = {"factor": args.factor, "cpus": os.cpu_count()}
    say(f"## {args.factor}x trace ({load()}, {psutil.virtual_memory().available / GIB:.1f} GiB available)")
    demo = store.open_dataset(store.DEFAULT_DATASET, args.demo_dir)
    t0 = time.perf_counter()
    stamp = scale_trace.build(demo, args.factor, args.work / f"src-{args.factor}x")
    say(f"  source: {stamp['jobs']:,} jobs in {args.work / f'src-{args.factor}x'} ({time.perf_counter() - t0:.0f} s)")
    if "ingest" not in skip:
        size_gib, read_s = read_source(args.work / f"src-{args.factor}x")
        say(f"  source read into the page cache: {size_gib:.2f} GiB in {read_s:.1f} s (not timed below; {load()})")
        figures["ingest"] = got = ingest(args.work / f"src-{args.factor}x", data_dir, name)
        say(f"## ingest: {got['summary']}")
        for line in got["stages"]:
            say(f"  {line}")
        say(
            f"  wall {got['wall_s']:.1f} s, peak RSS {got['maxrss_gib']:.2f} GiB (process), "
            f"{got['tree_gib']:.2f} GiB (process tree, sampled) ({got['load']})"
        )
    ds = store.open_dataset(name, data_dir)
    derived = _size_gib(ds.path / store.DERIVED_DIR)
    say(f"  dataset on disk: {_size_gib(ds.path):.2f} GiB (of which derived {derived:.2f})")
    if "pages" not in skip:
        server = Server(data_dir, name)
        try:
            say(f"## pages: gunicorn 2 workers, warm after {server.warm(2):.1f} s ({load()})")
            figures["pages"] = visit_pages(server, f"ds={name}&cluster={args.cluster}")
            if "memory" not in skip:
                say("## memory after the visits")
                figures["memory"] = worker_memory(server)
                say("## a third worker")
                figures["third_worker"] = third_worker(server)
        finally:
            server.stop()
    if "whatif" not in skip:
        month = date.fromisoformat(args.month) if args.month else _middle_july(ds)
        say(f"## what-if on {args.cluster}")
        figures["whatif"] = whatif(data_dir, name, args.cluster, month)
    met = report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    say("ALL BUDGETS MET" if met else "SOME BUDGETS MISSED")
    return 0 if met else 1


def _size_gib(path: Path) -> float:
    return sum(p.stat().st_size for p in Path(path).resolve().rglob("*") if p.is_file()) / GIB


def _middle_july(ds: store.Dataset) -> date:
    first = date.fromisoformat(ds.meta["period"]["start"][:10])
    last = date.fromisoformat(ds.meta["period"]["end"][:10])
    middle = first + (last - first) / 2
    return date(middle.year, 7, 1)


def report(figures: dict[str, Any]) -> bool:
    """Print the table of figures against the budgets (and, at 10x, against issue #15's measurements); whether every
    budget was met."""
    factor = figures["factor"]
    budget = BUDGETS.get(factor, (None,) * 5)
    today = factor == 10
    rows: list[tuple[str, float, str, float | None, float | None]] = []
    if "ingest" in figures:
        got = figures["ingest"]
        rows.append(("ingest wall", got["wall_s"], "s", budget[0], TODAY_10X["ingest_s"] if today else None))
        peak = max(got["maxrss_gib"], got["tree_gib"])
        rows.append(("ingest peak RSS", peak, "GiB", budget[1], TODAY_10X["ingest_gib"] if today else None))
    for row in figures.get("pages", []):
        page = row["page"] in PAGES  # the filtered view has no budget
        first, second = TODAY_10X_PAGES.get(row["page"], (None, None)) if today else (None, None)
        rows.append((f"{row['page']} first visit", row["first_s"], "s", budget[2] if page else None, first))
        rows.append((f"{row['page']} second visit", row["second_s"], "s", budget[3] if page else None, second))
    for row in figures.get("memory", []):
        what = f"worker {row['pid']} RSS (PSS {row['pss']:.2f}, USS {row['uss']:.2f})"
        rows.append((what, row["rss"], "GiB", budget[4], TODAY_10X["worker_gib"] if today else None))
    whatif = figures.get("whatif", {})
    for run in whatif.get("month", []):
        rows.append((f"what-if {run['policy']} to {run['end']} ({run['jobs']:,} jobs)", run["wall_s"], "s", 10.0, None))
    if whatif:
        year = whatif["year"]
        what = f"what-if {year['policy']} to {year['end']} ({year['jobs']:,} jobs)"
        rows.append((what, year["wall_s"], "s", None, None))
    say(f"## table ({factor}x)")
    for row in rows:
        say(_row(*row))
    third = figures.get("third_worker")
    if third and third["new_worker"]:
        new = third["new_worker"]
        say(f"| third worker | RSS {new['rss']:.2f} GiB, PSS {new['pss']:.2f} GiB, USS {new['uss']:.2f} GiB | | |")
    return all(limit is None or value <= limit for _, value, _, limit, _ in rows)


def _row(what: str, value: float, unit: str, budget: float | None, today: float | None) -> str:
    verdict = "" if budget is None else ("OK" if value <= budget else "OVER")
    ratio = f"{value / budget:.2f}" if budget else "-"
    vs_today = f"{today:g} -> {value:.2f} ({today / value:.1f}x)" if today else "-"
    shown = "-" if budget is None else f"{budget:.2f}"
    return f"| {what} | {value:.2f} {unit} | {shown} | {ratio} {verdict} | {vs_today} |"


if __name__ == "__main__":
    sys.exit(main())
