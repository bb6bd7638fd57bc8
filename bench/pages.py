"""Issue #37: every page over an emulated office link and over loopback, in Chromium, against the production server.

    python bench/pages.py [--factor 1] [--work /work/scale-data] [--links emulated,loopback] [--pages /cluster,/jobs]
                          [--rounds 5] [--json out.json]

The server is gunicorn with gunicorn.conf.py (2 workers) on the 1x demo (`helios-synth` in $HELIOS_DATA_DIR or
data/) or, with --factor N > 1, on `helios-Nx` under WORK/data-Nx (built by `python bench/scale.py --factor N --work
WORK --skip pages,memory,whatif`). Chromium (/usr/bin/chromium) has a 1440 x 5000 viewport, so that every figure
card and table of a page is in view and drawn. Per link (CDP network throttling: 20 Mbit/s down, 5 Mbit/s up,
40 ms round trip; or plain loopback), on an emptied server query cache:

- every page of the navigation, a job page and a filtered view (`/cluster?cluster=Saturn`, answered from that
  cluster's rollups): a first visit in a new browser profile (empty cache; the server's query cache empty too), then
  a revisit (a new page load, warm cache), then another first visit in a new profile with the server's cache now
  warm (a colleague opening a page someone opened before: "first-warm"), each timed from the navigation's start until
  every chart and table is drawn and nothing is loading;
- a new filter: on `/cluster`, already drawn, the cluster drop-down set to another cluster, timed until every chart
  has been drawn again with the new data.

With --rounds N all of it is done N times (each round on an emptied server query cache) and each figure is the
median round's, every round's seconds printed beside it: a shared machine's speed drifts by more than one change
saves. For each it prints the seconds, the bytes on the wire (CDP encodedDataLength: bodies as sent, headers included),
the requests made and those answered from the browser's cache, and the largest answer (its wire and decoded bytes);
then the page HTML's size, each worker's peak memory and the verdict against the budgets (emulated link only):
first visit (both kinds) <= 1.5 s, revisit <= 0.5 s, new filter <= 1.0 s at 1x and <= 2.0 s at 10x, and the
largest data answer (a figure) of every page <= 150 KB on the wire.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[0] = str(REPO)  # NOTE: run as a script, this folder comes first on sys.path; the repository must
sys.path.insert(1, str(REPO / "bench"))

import polars as pl  # noqa: E402
import psutil  # noqa: E402
import scale  # noqa: E402

from analytics import store  # noqa: E402

NAV_PAGES: tuple[tuple[str, str], ...] = (
    ("/", "Overview"),
    ("/cluster", "Cluster"),
    ("/jobs", "Jobs"),
    ("/users", "Users"),
    ("/compare", "Compare"),
    ("/data", "Data"),
    ("/whatif", "What-if"),
)
FILTER_CLUSTER = "Saturn"  # the filtered view's cluster (the largest)
NEW_FILTER_CLUSTER = "Earth"  # the new filter's (a view nobody asked for yet on this server)
VIEWPORT = {"width": 1440, "height": 5000}
LINKS: dict[str, dict[str, Any] | None] = {
    # CDP Network.emulateNetworkConditions: bytes per second, latency in ms (added to every request: the RTT)
    "emulated": {"offline": False, "latency": 40, "downloadThroughput": 20e6 / 8, "uploadThroughput": 5e6 / 8},
    "loopback": None,
}
BUDGETS_S: dict[int, dict[str, float]] = {
    1: {"first": 1.5, "first-warm": 1.5, "revisit": 0.5, "filter": 1.0},
    10: {"first": 1.5, "first-warm": 1.5, "revisit": 0.5, "filter": 2.0},
}
CALLBACK_PATH = "/_dash-update-component"  # a data answer: a figure, a table, a layout
MEASURES = ("first", "first-warm", "revisit", "filter")  # a page row's timed loads, in the order printed
DATA_ANSWER_BUDGET_BYTES = 150_000  # on the wire: each figure's answer, compressed
# The measurements of the code before this work (1x, loopback, 1440 x 5000, every chart drawn).
TODAY = {"/cluster": {"first_s": 3.2, "revisit_s": 1.6, "first_bytes": 10.5e6, "html_bytes": 1.35e6}}
TODAY_10X = {"/cluster": (2.9, 1.6), "/compare": (1.4, 1.3), "/jobs": (1.3, 1.1)}
TODAY_FILTER_S = (1.2, 2.1)  # a new filter at 1x

SLOTS_DRAWN_JS = "[...document.querySelectorAll('.figure-slot')].every(e => e.querySelector('.main-svg'))"
GRIDS_FILLED_JS = "[...document.querySelectorAll('.ag-root-wrapper')].every(g => g.querySelector('.ag-row'))"
NOT_LOADING_JS = "document.querySelectorAll('[data-dash-is-loading=true]').length === 0"
PAGE_READY_JS: dict[str, str] = {
    "/": "document.querySelectorAll('.cluster-card').length > 0 && !document.body.innerText.includes('…')",
    "/data": "document.querySelectorAll('.card').length > 0",
    "/whatif": "!!document.querySelector('#whatif-run')",
    "job": "!!document.querySelector('#job-record') && !!document.querySelector('#job-timeline .main-svg')",
}
# Every plot's data array when the filter changes: the new filter is drawn once every plot shows another one.
MARK_PLOTS_JS = "window.__oldPlots = new Set([...document.querySelectorAll('.js-plotly-plot')].map(g => g.data))"
REDRAWN_JS = (
    "[...document.querySelectorAll('.figure-slot')].every(e => { const g = e.querySelector('.js-plotly-plot'); "
    "return g && e.querySelector('.main-svg') && !window.__oldPlots.has(g.data); })"
)


def ready_js(title: str, kind: str) -> str:
    """JS: the page titled title is drawn: its header, every figure card drawn, every table filled, nothing loading."""
    header = "#job-page h4" if kind == "job" else "#_pages_content h4"
    shown = f"(document.querySelector({header!r}) || {{}}).innerText === {title!r}"
    extra = PAGE_READY_JS.get(kind)
    parts = [shown, SLOTS_DRAWN_JS, GRIDS_FILLED_JS, NOT_LOADING_JS, *([extra] if extra else [])]
    return " && ".join(f"({p})" for p in parts)


@dataclass
class Wire:
    """What one page load moved over the network, from the CDP Network events."""

    requests: dict[str, dict[str, Any]] = field(default_factory=dict)

    def attach(self, cdp) -> None:
        """Record every request's URL, status, encoding, cache use, wire bytes and decoded bytes."""
        cdp.on("Network.requestWillBeSent", self._sent)
        cdp.on("Network.responseReceived", self._response)
        cdp.on("Network.dataReceived", self._data)
        cdp.on("Network.loadingFinished", self._finished)
        cdp.on("Network.requestServedFromCache", self._from_cache)

    def _sent(self, ev: dict) -> None:
        self.requests[ev["requestId"]] = {"url": ev["request"]["url"], "wire": 0, "decoded": 0, "cached": False}

    def _response(self, ev: dict) -> None:
        r = self.requests.setdefault(ev["requestId"], {"url": ev["response"]["url"], "wire": 0, "decoded": 0})
        headers = {k.lower(): v for k, v in ev["response"]["headers"].items()}
        r.update(status=ev["response"]["status"], encoding=headers.get("content-encoding", ""))
        r["cached"] = r.get("cached") or ev["response"].get("fromDiskCache") or ev["response"].get("fromPrefetchCache")

    def _data(self, ev: dict) -> None:
        if ev["requestId"] in self.requests:
            self.requests[ev["requestId"]]["decoded"] += ev["dataLength"]

    def _finished(self, ev: dict) -> None:
        if ev["requestId"] in self.requests:
            self.requests[ev["requestId"]]["wire"] = ev["encodedDataLength"]

    def _from_cache(self, ev: dict) -> None:
        if ev["requestId"] in self.requests:
            self.requests[ev["requestId"]]["cached"] = True

    def summary(self) -> dict[str, Any]:
        """Bytes on the wire, requests, cached requests, and the largest answer."""
        done = list(self.requests.values())
        none = {"url": "-", "wire": 0, "decoded": 0, "encoding": ""}
        largest = max(done, key=lambda r: r["wire"], default=none)
        data = max((r for r in done if CALLBACK_PATH in r["url"]), key=lambda r: r["wire"], default=none)
        return {
            "wire_bytes": sum(r["wire"] for r in done),
            "requests": len(done),
            "cached": sum(1 for r in done if r.get("cached")),
            "largest": {k: largest.get(k) for k in ("url", "wire", "decoded", "encoding")},
            "largest_data": {k: data.get(k) for k in ("url", "wire", "decoded", "encoding")},
            "uncompressed_text": sorted(
                {
                    short(r["url"])
                    for r in done
                    if r["wire"] > 1500 and not r.get("encoding") and not r.get("cached") and r.get("status") == 200
                }
            ),
        }


def short(url: str) -> str:
    """A URL without its origin, shortened for a table."""
    path = url.split("://", 1)[-1].split("/", 1)[-1]
    return "/" + (path if len(path) <= 70 else path[:40] + "…" + path[-29:])


def open_tab(context, link: str):
    """A new tab in context with its CDP session, throttled as link says, recording its network use."""
    tab = context.new_page()
    cdp = context.new_cdp_session(tab)
    cdp.send("Network.enable")
    if LINKS[link]:
        cdp.send("Network.emulateNetworkConditions", LINKS[link])
    return tab, cdp


def timed_load(tab, cdp, url: str, title: str, kind: str) -> dict[str, Any]:
    """Load url in tab and time it until drawn; its seconds and network use."""
    wire = Wire()
    wire.attach(cdp)
    t0 = time.perf_counter()
    tab.goto(url, wait_until="commit")
    tab.wait_for_function(ready_js(title, kind), timeout=300_000, polling=25)
    seconds = time.perf_counter() - t0
    detach(cdp, wire)
    return {"seconds": seconds, **wire.summary()}


def detach(cdp, wire: Wire) -> None:
    """Stop recording wire's events on cdp."""
    for event, handler in (
        ("Network.requestWillBeSent", wire._sent),
        ("Network.responseReceived", wire._response),
        ("Network.dataReceived", wire._data),
        ("Network.loadingFinished", wire._finished),
        ("Network.requestServedFromCache", wire._from_cache),
    ):
        cdp.remove_listener(event, handler)


def set_cluster_js(cluster: str) -> str:
    """JS: pick cluster in the filter bar's cluster drop-down, as a reader choosing it does."""
    return f"window.dash_clientside.set_props('f-clusters', {{value: [{json.dumps(cluster)}]}})"


def new_filter(tab, cdp) -> dict[str, Any]:
    """On the drawn /cluster page, pick another cluster and time until every chart is drawn again."""
    wire = Wire()
    wire.attach(cdp)
    tab.evaluate(MARK_PLOTS_JS)
    t0 = time.perf_counter()
    tab.evaluate(set_cluster_js(NEW_FILTER_CLUSTER))
    tab.wait_for_function(
        f"location.search.includes('cluster={NEW_FILTER_CLUSTER}') && ({REDRAWN_JS}) && ({NOT_LOADING_JS})",
        timeout=300_000,
        polling=25,
    )
    seconds = time.perf_counter() - t0
    detach(cdp, wire)
    return {"seconds": seconds, **wire.summary()}


def a_job(data_dir: Path, dataset: str) -> tuple[int, str]:
    """A GPU job of the filtered cluster that waited over ten minutes (the job page's every section is filled)."""
    jobs = store.open_dataset(dataset, data_dir).jobs()
    row = (
        jobs.filter((pl.col("cluster") == FILTER_CLUSTER) & (pl.col("queue") > 600) & (pl.col("gpu_num") >= 8))
        .select("job_id", "cluster")
        .head(1)
        .collect()
    )
    return int(row["job_id"][0]), str(row["cluster"][0])


def targets(dataset: str, job: tuple[int, str]) -> list[tuple[str, str, str, str]]:
    """(label, address, title, kind) of every page visited."""
    ds = f"ds={dataset}"
    rows = [(path, f"{path}?{ds}", title, path) for path, title in NAV_PAGES]
    rows.append((f"/jobs/{job[0]}", f"/jobs/{job[0]}?{ds}&cluster={job[1]}", f"Job {job[0]}", "job"))
    filtered = f"/cluster?cluster={FILTER_CLUSTER}"
    rows.append((filtered, f"/cluster?{ds}&cluster={FILTER_CLUSTER}", "Cluster", "/cluster"))
    return rows


def chosen(pages: list[tuple[str, str, str, str]], labels: str | None) -> list[tuple[str, str, str, str]]:
    """The pages whose label is one of the comma-separated labels ("job" for the job page; every page when labels is
    None)."""
    if labels is None:
        return pages
    wanted = labels.split(",")
    return [page for page in pages if page[0] in wanted or (page[3] == "job" and "job" in wanted)]


def empty_query_cache(server: scale.Server) -> None:
    """Forget every cached answer of the server (its files; the folder stays, as FileSystemCache expects)."""
    folder = server.cache_dir / "queries"
    for path in folder.glob("*") if folder.is_dir() else ():
        path.unlink(missing_ok=True) if path.is_file() else shutil.rmtree(path, ignore_errors=True)


def run_link(
    browser, server: scale.Server, link: str, pages: list[tuple[str, str, str, str]], rounds: int = 1
) -> list[dict]:
    """Every page's first visit and revisit over link, then the new filter, in each of rounds rounds (each on an
    emptied server query cache); one row per page, its median round's, printed."""
    runs = []
    for done in range(rounds):
        if rounds > 1:
            scale.say(f"  round {done + 1} of {rounds} ({scale.load()})")
        empty_query_cache(server)
        runs.append([visit(browser, server, link, page) for page in pages])
    rows = [median_row(list(visits)) for visits in zip(*runs, strict=True)]
    for row in rows:
        print_row(row)
    return rows


def visit(browser, server: scale.Server, link: str, page: tuple[str, str, str, str]) -> dict:
    """One page's first visit and revisit in a new browser profile (and the new filter on /cluster), then a first
    visit in another new profile, the server's cache warm: its row."""
    label, address, title, kind = page
    context = browser.new_context(viewport=VIEWPORT)
    tab, cdp = open_tab(context, link)
    first = timed_load(tab, cdp, server.url + address, title, kind)
    revisit = timed_load(tab, cdp, server.url + address, title, kind)
    row = {"link": link, "page": label, "first": first, "revisit": revisit, "load": scale.load()}
    if label == "/cluster":
        row["filter"] = new_filter(tab, cdp)
    context.close()
    context = browser.new_context(viewport=VIEWPORT)
    row["first-warm"] = timed_load(*open_tab(context, link), server.url + address, title, kind)
    context.close()
    return row


def median_row(visits: list[dict]) -> dict:
    """One page's row from its rounds: each figure the median round's (the lower middle one of an even count), with
    every round's seconds."""
    row = dict(visits[0])
    for what in MEASURES:
        if what in row:
            ordered = sorted((v[what] for v in visits), key=lambda got: got["seconds"])
            row[what] = {**ordered[(len(ordered) - 1) // 2], "rounds_s": [v[what]["seconds"] for v in visits]}
    return row


def mb(n: float) -> str:
    """Bytes as MB (decimal, as the issue writes them)."""
    return f"{n / 1e6:6.3f} MB"


def print_row(row: dict) -> None:
    """One page's figures on a line each."""
    for what in MEASURES:
        got = row.get(what)
        if not got:
            continue
        big = got["largest"]
        label = row["page"] if what != "filter" else f"/cluster → cluster={NEW_FILTER_CLUSTER}"
        rounds = got.get("rounds_s", [])
        if len(rounds) > 1:
            scale.say(
                f"  {row['link']:8} {label:34} {what:10} median of {len(rounds)} rounds: {min(rounds):.2f}–"
                f"{max(rounds):.2f} s ({', '.join(f'{r:.2f}' for r in rounds)})"
            )
        scale.say(
            f"  {row['link']:8} {label:34} {what:10} {got['seconds']:6.2f} s  {mb(got['wire_bytes'])} on the wire, "
            f"{got['requests']:3d} requests ({got['cached']:3d} from cache); largest {big['wire'] / 1e3:7.1f} KB "
            f"({big['decoded'] / 1e3:7.1f} KB decoded, {big['encoding'] or 'identity'}) {short(big['url'])}"
            f"  ({row['load']})"
        )
        data = got["largest_data"]
        scale.say(
            f"           largest data answer {data['wire'] / 1e3:7.1f} KB on the wire ({data['decoded'] / 1e3:7.1f} KB "
            f"decoded, {data['encoding'] or 'identity'})"
        )
        if got["uncompressed_text"]:
            scale.say(f"           not compressed: {', '.join(got['uncompressed_text'][:5])}")


def page_html_bytes(server: scale.Server, pages: list[tuple[str, str, str, str]]) -> dict[str, int]:
    """The size of every page's HTML before compression."""
    import urllib.request

    sizes = {}
    for label, address, _, _ in pages:
        with urllib.request.urlopen(server.url + address, timeout=60) as resp:
            sizes[label] = len(resp.read())
    return sizes


def verdict(rows: list[dict], factor: int) -> bool:
    """Print every emulated-link figure against its budget; whether all are met."""
    budgets = BUDGETS_S.get(factor, BUDGETS_S[10])
    ok = True
    scale.say(f"## budgets over the emulated link ({factor}x)")
    for row in rows:
        if row["link"] != "emulated":
            continue
        for what in MEASURES:
            if what in row:
                seconds, limit = row[what]["seconds"], budgets[what]
                ok &= seconds <= limit
                mark = "OK" if seconds <= limit else "OVER"
                ratio = f"{seconds / limit:.2f} {mark}"
                scale.say(f"  {row['page']:34} {what:10} {seconds:5.2f} s / {limit:.1f} s  {ratio}")
        data = max(row[w]["largest_data"]["wire"] for w in MEASURES if w in row)
        ok &= data <= DATA_ANSWER_BUDGET_BYTES
        mark = "OK" if data <= DATA_ANSWER_BUDGET_BYTES else "OVER"
        scale.say(f"  {row['page']:34} largest data answer {data / 1e3:6.1f} KB / 150 KB  {mark}")
    return ok


class WorkerPeaks:
    """Samples every gunicorn worker's RSS and USS (its private memory) every interval_s, keeping each one's peak."""

    def __init__(self, server: scale.Server, interval_s: float = 0.5):
        self.server, self.interval_s = server, interval_s
        self.peaks: dict[int, dict[str, float]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.interval_s):
            for proc in self.server.workers():
                try:
                    info = proc.memory_full_info()
                except psutil.Error:
                    continue
                peak = self.peaks.setdefault(proc.pid, {"rss": 0.0, "uss": 0.0})
                peak["rss"] = max(peak["rss"], info.rss / scale.GIB)
                peak["uss"] = max(peak["uss"], info.uss / scale.GIB)

    def done(self) -> dict[int, dict[str, float]]:
        """Stop sampling; each worker's peaks in GiB, printed."""
        self.stop.set()
        self.thread.join()
        for pid, peak in self.peaks.items():
            scale.say(f"  worker {pid}: peak RSS {peak['rss']:.2f} GiB, peak USS (private) {peak['uss']:.2f} GiB")
        return self.peaks


def positive(text: str) -> int:
    """A whole number of at least 1, for argparse."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--factor", type=int, default=1, help="1: the demo; N > 1: helios-Nx under WORK (bench/scale.py)")
    p.add_argument("--work", type=Path, default=REPO / "data" / "scale", help="where bench/scale.py built helios-Nx")
    p.add_argument("--links", default="emulated,loopback", help="comma-separated: emulated, loopback")
    p.add_argument("--pages", help="comma-separated page labels to visit (/cluster, job, ...); all when absent")
    p.add_argument(
        "--rounds", type=positive, default=1, help="visit every page this many times (at least 1); report the median"
    )
    p.add_argument("--json", type=Path, help="also write the figures as JSON here")
    return p.parse_args()


def main() -> int:
    """Serve, visit every page over each link, print the figures; exit 1 when a budget is missed."""
    from playwright.sync_api import sync_playwright

    args = parse_args()
    if args.factor == 1:
        data_dir, dataset = Path(os.environ.get("HELIOS_DATA_DIR", REPO / "data")), store.DEFAULT_DATASET
    else:
        data_dir, dataset = args.work / f"data-{args.factor}x", f"helios-{args.factor}x"
    pages = chosen(targets(dataset, a_job(data_dir, dataset)), args.pages)
    server = scale.Server(data_dir, dataset)
    figures: dict[str, Any] = {"factor": args.factor, "dataset": dataset, "rows": []}
    try:
        scale.say(f"## {dataset}: gunicorn 2 workers, warm after {server.warm(2):.1f} s ({scale.load()})")
        peaks = WorkerPeaks(server)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=scale.page_bench.CHROMIUM_ARGS)
            for link in args.links.split(","):
                scale.say(f"## {link} link")
                figures["rows"] += run_link(browser, server, link, pages, args.rounds)
            browser.close()
        figures["html_bytes"] = page_html_bytes(server, pages)
        scale.say("## peak memory of the server's workers over the visits")
        figures["worker_peaks_gib"] = peaks.done()
        bench_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / scale.GIB
        scale.say(f"  this script: peak RSS {bench_gib:.2f} GiB ({scale.load()})")
    finally:
        server.stop()
    scale.say("## page HTML before compression (budget 150 KB)")
    for label, size in figures["html_bytes"].items():
        scale.say(f"  {label:34} {size / 1e3:7.1f} KB {'OK' if size <= 150e3 else 'OVER'}")
    ok = verdict(figures["rows"], args.factor) and all(s <= 150e3 for s in figures["html_bytes"].values())
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    scale.say("ALL BUDGETS MET" if ok else "SOME BUDGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
