"""Fault drills on loopback: kill a gunicorn worker mid-request and mid-simulation, stop Redis, and kill or starve
(file-size limit, like a full disk) an ingest midway; prints what the user saw and whether the next request works.

    python bench/faults.py [--data-dir DIR] [--dataset helios-synth]
"""

from __future__ import annotations

import argparse
import io
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
import urllib.error
import zipfile
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load  # noqa: E402  (the sibling bench script: gunicorn start/stop and the callback payloads)

REPO = load.REPO


def workers_of(master: subprocess.Popen) -> list[int]:
    """The pids of a gunicorn master's worker processes."""
    pids = []
    for child in psutil.Process(master.pid).children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "gunicorn" in " ".join(child.cmdline()):
                pids.append(child.pid)
        except psutil.Error:
            continue  # it ended while we looked
    return pids


def wait_for_workers(master: subprocess.Popen, count: int, old: set[int], timeout_s: float = 60) -> None:
    """Wait until the master runs count workers none of which is in old."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = set(workers_of(master))
        if len(pids) == count and not pids & old:
            return
        time.sleep(0.2)


def attempt(url: str, payload: dict | None = None) -> str:
    """One request, described the way the user experiences it."""
    try:
        status, body = load.http(url, payload, timeout_s=120)
    except (urllib.error.URLError, ConnectionError, OSError) as exc:
        return f"connection failed ({type(exc).__name__}): the browser shows a callback error; the next action retries"
    return f"HTTP {status}" + ("" if status == 200 else f": {body[:100]!r}")


def heavy_figure(url: str, dataset: str) -> dict:
    """A cold, slow figure request (the utilisation series over the whole dataset)."""
    out = json.loads(load.http(url + "/_dash-update-component", load.router_payload("/cluster", f"?ds={dataset}"))[1])
    specs = load.graph_specs(out["response"]["_pages_content"]["children"])
    return load.figure_payload(specs[0])


def drill_worker_killed_mid_request(url: str, master: subprocess.Popen, dataset: str) -> None:
    """Kill the worker while it computes a cold figure; then repeat the request."""
    payload = heavy_figure(url, dataset)
    payload["inputs"][0]["value"]["state"]["job_kind"] = "gpu"  # a filter nothing has cached yet
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(attempt(url + "/_dash-update-component", payload)))
    old = set(workers_of(master))
    thread.start()
    time.sleep(0.3)
    for pid in old:
        os.kill(pid, signal.SIGKILL)
    thread.join()
    wait_for_workers(master, len(old), old)
    print(f"  user saw: {seen[0]}")
    print(f"  next request (same figure): {attempt(url + '/_dash-update-component', payload)}")
    print(f"  /healthz afterwards: {load.http(url + '/healthz')[1].decode().strip()}")


def drill_worker_killed_mid_simulation(url: str, master: subprocess.Popen, scope: dict) -> None:
    """Start a what-if run, kill every worker while it runs, then poll it to its end through the new workers."""
    config = load.whatif_config(scope["dataset"], scope["clusters"][0], scope["period"][1], 7, days=60)
    outcome: list[dict] = []
    thread = threading.Thread(target=lambda: outcome.append(load.run_whatif(url, config, timeout_s=300)))
    old = set(workers_of(master))
    thread.start()
    time.sleep(1.0)
    for pid in old:
        os.kill(pid, signal.SIGKILL)
    thread.join()
    wait_for_workers(master, len(old), old)
    run = outcome[0]
    state = "finished" if run["ok"] else "failed"
    print(f"  user saw: the run {state} after {run['seconds']:.1f} s ({run['detail']})")
    if run["detail"].startswith("HTTP 204"):
        print("  (204 = Dash found the job's process gone and ended the run without output)")
    retry = load.run_whatif(url, config, timeout_s=300)
    print(f"  next run of the same scenario: {'ok' if retry['ok'] else 'FAILED'} in {retry['seconds']:.1f} s")


def drill_redis_stopped(args: argparse.Namespace, tmp: Path, scope: dict) -> None:
    """Serve with a Redis cache, stop Redis, keep browsing; print what the pages and /healthz say."""
    if not shutil.which("redis-server"):
        print("  redis-server is not installed: drill not run")
        return
    port = load.free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    env = load.server_env(args, tmp / "redis-cache")
    env["HELIOS_REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
    log_path = tmp / "gunicorn-redis.log"
    master, url = load.start_gunicorn(env, log_path)
    try:
        payload = load.router_payload("/cluster", f"?ds={scope['dataset']}")
        print(f"  with Redis: {attempt(url + '/_dash-update-component', payload)}")
        load.stop(redis)
        print(f"  Redis stopped, page: {attempt(url + '/_dash-update-component', payload)}")
        print(
            f"  Redis stopped, figure: {attempt(url + '/_dash-update-component', heavy_figure(url, scope['dataset']))}"
        )
        print(f"  /healthz: {load.http(url + '/healthz')[1].decode().strip()}")
        warnings = [x for x in log_path.read_text().splitlines() if "local cache" in x or "health degraded" in x]
        print(f"  log: {warnings[0][:160] if warnings else '(no warning logged)'}")
    finally:
        load.stop(master)
        load.stop(redis)


def big_helios_zip(path: Path, rows: int) -> None:
    """A Helios data.zip with one cluster of rows jobs (slow enough to interrupt)."""
    header = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
    buf = io.StringIO()
    buf.write(header)
    for i in range(rows):
        minute = i % 40_000
        day, rest = 1 + minute // 1440, minute % 1440
        stamp = f"2020-04-{day:02d} {rest // 60:02d}:{rest % 60:02d}:00"
        buf.write(f"{i},u{i % 97},vc{i % 5},{i % 9},4,1,COMPLETED,{stamp},{stamp},{stamp},0,0\n")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("Venus/cluster_log.csv", buf.getvalue())
        vcs = [f"vc{v}" for v in range(5)]
        zf.writestr("Venus/cluster_gpu_number.csv", f"date,{','.join(vcs)},total\n2020-04-01,8,8,8,8,8,40\n")


def snapshot(data_dir: Path) -> dict[str, str]:
    """Every visible dataset and its version."""
    from analytics import store

    return {d.name: d.version for d in store.list_datasets(data_dir)}


def store_ok(data_dir: Path, name: str) -> bool:
    """Whether dataset name opens and its jobs can be counted."""
    from analytics import store

    try:
        return store.open_dataset(name, data_dir).jobs().select("job_id").collect().height > 0
    except (store.DatasetError, OSError):
        return False


def _file_size_limit(limit_bytes: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return apply


def drill_ingest(data_dir: Path, source: Path, name: str, kill_on_write: bool, fsize: int | None) -> None:
    """Run `helios ingest` over an existing dataset name and kill it (or starve its writes); check nothing changed."""
    before = snapshot(data_dir)
    helios = str(Path(sys.executable).with_name("helios"))
    argv = [helios, "ingest", str(source), "--format", "helios", "--name", name]
    env = {**os.environ, "HELIOS_DATA_DIR": str(data_dir)}
    pre = _file_size_limit(fsize) if fsize else None
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, preexec_fn=pre)
    if kill_on_write:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if any(p.name.startswith(f".{name}.tmp-") for p in data_dir.iterdir()):
                proc.kill()  # the new copy is being written: the worst moment to die
                break
            time.sleep(0.005)
    _, err = proc.communicate(timeout=600)
    last = (err.decode(errors="replace").strip().splitlines() or ["(nothing)"])[-1]
    after = snapshot(data_dir)
    hidden = [p.name for p in data_dir.iterdir() if p.name.startswith(f".{name}.tmp-")]
    readable = all(store_ok(data_dir, n) for n in after)
    print(f"  exit code {proc.returncode}; last message: {last[:160]}")
    print(
        f"  datasets unchanged: {after == before}, all readable: {readable}; hidden staging folders left: {len(hidden)}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run every drill and print what happened."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, default=Path(os.environ.get("HELIOS_DATA_DIR", REPO / "data")))
    p.add_argument("--dataset", default="helios-synth")
    p.add_argument("--ingest-rows", type=int, default=1_500_000)
    args = p.parse_args(argv)
    args.workers, args.threads = 1, 4
    scope = load.dataset_scope(args.data_dir, args.dataset)
    with tempfile.TemporaryDirectory(prefix="helios-faults-") as tmp_name:
        tmp = Path(tmp_name)
        master, url = load.start_gunicorn(load.server_env(args, tmp / "cache"), tmp / "gunicorn.log")
        try:
            print("1. gunicorn worker killed mid-request")
            drill_worker_killed_mid_request(url, master, args.dataset)
            print("2. gunicorn worker killed mid-simulation")
            drill_worker_killed_mid_simulation(url, master, scope)
        finally:
            load.stop(master)
        print("3. Redis stopped while serving")
        drill_redis_stopped(args, tmp, scope)
        work = tmp / "ingest-data"
        shutil.copytree(args.data_dir / args.dataset, work / "victim", symlinks=False)
        source = tmp / "data.zip"
        big_helios_zip(source, args.ingest_rows)
        print(f"4. ingest killed midway (SIGKILL once it starts writing the new copy, {args.ingest_rows:,} rows)")
        drill_ingest(work, source, "victim", kill_on_write=True, fsize=None)
        print("5. disk full during ingest (writes capped at 4 MiB)")
        drill_ingest(work, source, "victim", kill_on_write=False, fsize=4 * 2**20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
