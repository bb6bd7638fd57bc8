"""Load test on loopback: simulated users browse pages and change filters through the real Dash callback endpoint
while what-if runs execute, against gunicorn; prints the errors and the callback latency percentiles.

Budget (issue #7): 20 users for 60 s while two what-if runs execute: 0 errors, p95 callback latency <= 1 s.

    python bench/load.py [--users 20] [--duration-s 60] [--whatif-runs 2] [--data-dir DIR] [--dataset helios-synth]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from components.shell import controls  # noqa: E402

PAGES = ("/", "/cluster", "/jobs", "/users", "/compare", "/data")
KINDS = ("all", "gpu", "cpu")
P95_BUDGET_S = 1.0
MAX_USERS = 100
MAX_DURATION_S = 600
REQUEST_TIMEOUT_S = 60


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url: str, body: dict | None = None, timeout_s: float = REQUEST_TIMEOUT_S) -> tuple[int, bytes]:
    """POST body as JSON (GET when None); returns (status, body), HTTP errors included."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_up(url: str, timeout_s: float = 120) -> None:
    """Wait until url answers 200."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if http(url, timeout_s=5)[0] == 200:
                return
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.3)
    raise SystemExit(f"{url} did not answer within {timeout_s:g} s")


def start_gunicorn(env: dict[str, str], log_path: Path) -> tuple[subprocess.Popen, str]:
    """Start gunicorn with the repository's gunicorn.conf.py on a free loopback port."""
    port = free_port()
    env = {**env, "PORT": str(port), "HELIOS_BIND_HOST": "127.0.0.1"}
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    out = log_path.open("w")
    argv = [gunicorn, "-c", "gunicorn.conf.py", "app:server"]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_up(url + "/healthz")
    return proc, url


def stop(proc: subprocess.Popen) -> None:
    """Stop a process group started by this script (TERM, then KILL after 20 s)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def router_payload(path: str, search: str) -> dict:
    """The pages-router callback request the browser sends on navigation."""
    return {
        "output": ".._pages_content.children..._pages_store.data..",
        "outputs": [{"id": "_pages_content", "property": "children"}, {"id": "_pages_store", "property": "data"}],
        "inputs": [
            {"id": "_pages_location", "property": "pathname", "value": path},
            {"id": "_pages_location", "property": "search", "value": search},
        ],
        "state": [],
        "changedPropIds": ["_pages_location.pathname"],
    }


def graph_specs(node: Any) -> list[dict]:
    """The figure-card specs in a layout (as JSON)."""
    if isinstance(node, list):
        return [s for n in node for s in graph_specs(n)]
    if not isinstance(node, dict) or "props" not in node:
        return []
    cid = node["props"].get("id")
    if isinstance(cid, dict) and cid.get("type") == "graph-spec":
        return [node["props"]["data"]]
    return [s for v in node["props"].values() for s in graph_specs(v)]


def figure_payload(spec: dict) -> dict:
    """The figure callback request for a figure card, as the browser sends it once the card is shown."""
    return controls.figure_request(spec)


class Recorder:
    """Thread-safe latency and error bookkeeping."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies_s: list[float] = []
        self.errors: list[str] = []

    def call(self, url: str, payload: dict) -> dict | None:
        """POST one callback, recording its latency, or the error it ended with."""
        t0 = time.perf_counter()
        try:
            status, body = http(url + "/_dash-update-component", payload)
        except (OSError, urllib.error.URLError) as exc:
            status, body = 0, str(exc).encode()
        elapsed = time.perf_counter() - t0
        with self.lock:
            self.latencies_s.append(elapsed)
            if status not in (200, 204):
                self.errors.append(f"HTTP {status}: {body[:120]!r}")
        return json.loads(body) if status == 200 else None


def random_search(rng: random.Random, dataset: str, clusters: list[str], period: tuple[str, str]) -> str:
    """A random filter state as a URL query string (cluster, job kind and a date window)."""
    params = {"ds": dataset, "kind": rng.choice(KINDS)}
    if rng.random() < 0.6:
        params["cluster"] = rng.choice(clusters)
    if rng.random() < 0.5:
        first = time.strptime(period[0][:10], "%Y-%m-%d")
        start = time.mktime(first) + rng.randrange(0, 150) * 86_400
        params["start"] = time.strftime("%Y-%m-%d", time.localtime(start))
        params["end"] = time.strftime("%Y-%m-%d", time.localtime(start + rng.randrange(1, 30) * 86_400))
    return "?" + urllib.parse.urlencode(params)


def user_loop(url: str, rec: Recorder, seed: int, stop_at: float, scope: dict) -> int:
    """One simulated user: open a page with some filters, draw its figures, think, repeat until stop_at."""
    rng = random.Random(seed)
    pages = 0
    while time.monotonic() < stop_at:
        search = random_search(rng, scope["dataset"], scope["clusters"], scope["period"])
        out = rec.call(url, router_payload(rng.choice(PAGES), search))
        pages += 1
        if out is None:
            continue
        for spec in graph_specs(out["response"]["_pages_content"]["children"]):
            if time.monotonic() >= stop_at:
                break
            rec.call(url, figure_payload(spec))
        time.sleep(rng.uniform(0.2, 1.0))
    return pages


def end_id(url: str) -> str:
    """The signed page-load id the Dash renderer sends with background callbacks."""
    status, body = http(url + "/whatif")
    match = re.search(rb'<script id="_dash-config" type="application/json">(.*?)</script>', body, re.S)
    if status != 200 or not match:
        raise RuntimeError(f"/whatif answered {status}")
    return json.loads(match.group(1))["end_id"]


def whatif_payload(url: str, config: dict) -> dict:
    """The background what-if callback request, built from the app's own dependency list."""
    deps = json.loads(http(url + "/_dash-dependencies")[1])
    dep = next(d for d in deps if d["inputs"] == [{"id": "whatif-config", "property": "data"}])
    outputs = []
    for part in dep["output"].strip(".").split("..."):
        cid, prop = part.split(".", 1)
        outputs.append({"id": cid, "property": prop.split("@")[0]})
    value = {"config": config, "nonce": time.time()}
    return {
        "output": dep["output"],
        "outputs": outputs,
        "inputs": [{"id": "whatif-config", "property": "data", "value": value}],
        "state": [],
        "changedPropIds": ["whatif-config.data"],
    }


def run_whatif(url: str, config: dict, timeout_s: float, poll_s: float = 0.5) -> dict:
    """Start a what-if run through the background-callback protocol and poll it to its end."""
    t0 = time.perf_counter()
    payload, eid = whatif_payload(url, config), end_id(url)
    status, body = http(f"{url}/_dash-update-component?endId={eid}", payload)
    if status != 200:
        return {"ok": False, "seconds": time.perf_counter() - t0, "detail": f"HTTP {status} starting the run"}
    handles = json.loads(body)
    query = urllib.parse.urlencode({"endId": eid, "cacheKey": handles["cacheKey"], "job": handles["job"]})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status, body = http(f"{url}/_dash-update-component?{query}", payload)
        if status != 200:
            return {"ok": False, "seconds": time.perf_counter() - t0, "detail": f"HTTP {status} while polling"}
        out = json.loads(body)
        if "response" in out:
            text = json.dumps(out["response"].get("whatif-status", {}))
            return {"ok": True, "seconds": time.perf_counter() - t0, "detail": text[:120]}
        time.sleep(poll_s)
    return {"ok": False, "seconds": time.perf_counter() - t0, "detail": f"not finished after {timeout_s:g} s"}


def whatif_config(dataset: str, cluster: str, last_day: str, seed: int, days: int = 7) -> dict:
    """A what-if scenario of days on cluster ending at last_day (load factor varies per run to avoid the cache)."""
    from components.whatif.state import default_form, form_to_config
    from sim.scenario import config_to_dict

    end = time.strptime(last_day[:10], "%Y-%m-%d")
    start = time.strftime("%Y-%m-%d", time.localtime(time.mktime(end) - (days - 1) * 86_400))
    form = default_form(dataset, cluster, start, last_day[:10])
    form.update(policies=["fifo", "sjf", "qssf"], load_factor=1.0 + seed / 100)
    return config_to_dict(form_to_config(form))


def dataset_scope(data_dir: Path, name: str) -> dict:
    """The clusters and period of the dataset under test."""
    from analytics import store

    meta = store.open_dataset(name, data_dir).meta
    period = meta.get("period") or {}
    return {"dataset": name, "clusters": list(meta["clusters"]), "period": (period["start"], period["end"])}


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of values, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command-line options, bounded."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--duration-s", type=float, default=60.0)
    p.add_argument("--whatif-runs", type=int, default=2)
    p.add_argument("--data-dir", type=Path, default=Path(os.environ.get("HELIOS_DATA_DIR", REPO / "data")))
    p.add_argument("--dataset", default="helios-synth")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=4)
    args = p.parse_args(argv)
    if not 1 <= args.users <= MAX_USERS or not 1 <= args.duration_s <= MAX_DURATION_S:
        p.error(f"--users must be 1-{MAX_USERS} and --duration-s 1-{MAX_DURATION_S}")
    return args


def server_env(args: argparse.Namespace, cache_dir: Path) -> dict[str, str]:
    """The environment of the gunicorn under test: its own caches, no Redis, fast background polling."""
    env = {**os.environ, "HELIOS_DATA_DIR": str(args.data_dir.resolve()), "HELIOS_CACHE_DIR": str(cache_dir)}
    env.update(WEB_CONCURRENCY=str(args.workers), HELIOS_THREADS=str(args.threads), HELIOS_BG_INTERVAL_MS="500")
    env.update(HELIOS_SECRET_KEY="bench-secret")
    for name in ("HELIOS_REDIS_URL", "HELIOS_AUTH_FILE", "HELIOS_TRUSTED_PROXIES"):
        env.pop(name, None)
    return env


def run_load(url: str, args: argparse.Namespace, scope: dict) -> tuple[Recorder, list[dict], int]:
    """Run the users and the what-if runs side by side; returns the recorder, the run outcomes and pages shown."""
    rec, runs, pages = Recorder(), [], []
    stop_at = time.monotonic() + args.duration_s
    cluster = scope["clusters"][0]
    whatifs = [
        threading.Thread(
            target=lambda i=i: runs.append(
                run_whatif(url, whatif_config(scope["dataset"], cluster, scope["period"][1], i), args.duration_s + 240)
            )
        )
        for i in range(args.whatif_runs)
    ]
    users = [
        threading.Thread(target=lambda i=i: pages.append(user_loop(url, rec, i, stop_at, scope)))
        for i in range(args.users)
    ]
    for t in (*whatifs, *users):
        t.start()
    for t in (*users, *whatifs):
        t.join()
    return rec, runs, sum(pages)


def report(rec: Recorder, runs: list[dict], pages: int, args: argparse.Namespace) -> int:
    """Print the figures and the verdict; 0 when the budget holds."""
    lat = rec.latencies_s
    p95 = percentile(lat, 0.95) if lat else float("nan")
    print(f"users {args.users}, {args.duration_s:g} s, gunicorn {args.workers} workers x {args.threads} threads")
    print(f"page views {pages}, callback requests {len(lat)}, errors {len(rec.errors)}")
    if lat:
        print(
            f"callback latency: p50 {statistics.median(lat) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
            f"max {max(lat) * 1000:.0f} ms"
        )
    for i, run in enumerate(runs, 1):
        print(f"what-if run {i}: {'ok' if run['ok'] else 'FAILED'} in {run['seconds']:.1f} s ({run['detail']})")
    for err in rec.errors[:5]:
        print("error:", err)
    ok = not rec.errors and p95 <= P95_BUDGET_S and all(r["ok"] for r in runs) and len(runs) == args.whatif_runs
    print(f"budget (0 errors, p95 <= {P95_BUDGET_S:g} s, what-if runs finish): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    """Start gunicorn, run the load, print the figures, stop gunicorn."""
    args = parse_args(argv)
    scope = dataset_scope(args.data_dir, args.dataset)
    with tempfile.TemporaryDirectory(prefix="helios-load-") as tmp:
        proc, url = start_gunicorn(server_env(args, Path(tmp) / "cache"), Path(tmp) / "gunicorn.log")
        try:
            rec, runs, pages = run_load(url, args, scope)
        finally:
            stop(proc)
        return report(rec, runs, pages, args)


if __name__ == "__main__":
    sys.exit(main())
