"""Repeat the security findings of the hosting probe against a loopback server and print held/failed per item.

Loopback only and bounded: a gunicorn (2 workers) on 127.0.0.1 over a small copy of a dataset, a users file with an
admin and a viewer, at most a few dozen requests per check. Findings that live below HTTP (scenario bounds, archive
limits, the store) are exercised where the server applies them. The what-if runs are hand-made callback requests (as
a script, not the page, would send them), on a server that stops a run after RUN_UNPOLLED_S without polls; the first
run is held (its process stopped with SIGSTOP once it has started), so that it outlasts that limit on any machine,
idle or busy, however fast the simulation (the server's watch of a run lives in its parent, which goes on).

    python bench/attack.py [--dataset philly] [--data-dir data]
"""

from __future__ import annotations

import argparse
import http.client
import http.cookiejar
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analytics import store  # noqa: E402
from analytics.ingest import IngestError, ingest  # noqa: E402
from components.server.users import UserRecord, hash_password, save_users  # noqa: E402
from sim.scenario import ScenarioConfig, ScenarioError, config_from_dict, config_to_dict  # noqa: E402
from sim.sweep import grid_points  # noqa: E402

PASSWORDS = {"ada": "ada-admin-password-1", "vic": "vic-viewer-password-1"}
Check = Callable[[str], str]  # base URL -> what was seen; raises AssertionError when the finding is not held
RUN_UNPOLLED_S = 10  # the server's HELIOS_RUN_UNPOLLED_S here (default 90): a run nobody polls stops this soon
RUN_DATASET = "philly"  # always served too: the what-if runs are of its trace
DEADLINE_S = 300  # the longest wait for anything the server does (start, a run, a refusal), on a busy machine
JSON = {"Content-Type": "application/json"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))


def _request(opener, url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, dict, str]:
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with opener.open(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode(errors="replace")


def _login(opener, base: str, user: str, password: str) -> int:
    _, _, page = _request(opener, f"{base}/login")
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)
    form = urllib.parse.urlencode({"username": user, "password": password, "csrf": token, "next": "/"}).encode()
    status, _, _ = _request(opener, f"{base}/login", form, {"Content-Type": "application/x-www-form-urlencoded"})
    return status


def check_brute_force(base: str) -> str:
    opener = _opener()
    codes = [_login(opener, base, "ada", f"guess-{i}") for i in range(8)]
    assert 429 in codes, codes
    return f"guesses answered {codes}: back-off after {codes.index(429)} failures"


def check_csrf(base: str) -> str:
    form = urllib.parse.urlencode({"username": "vic", "password": PASSWORDS["vic"]}).encode()
    status, _, _ = _request(_opener(), f"{base}/login", form, {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 400, status
    return "login post without the form's token: 400"


def check_logout(base: str) -> str:
    opener = _opener()
    _login(opener, base, "vic", PASSWORDS["vic"])
    cookie = _session_cookie(opener)
    _request(opener, f"{base}/logout", b"")
    status, _, _ = _request(_opener(), f"{base}/_dash-layout", headers={"Cookie": cookie})
    assert status == 401, status
    return "the session cookie copied before logout answers 401 after it"


def _declared_body_status(base: str, path: str, size_bytes: int, cookie: str) -> int:
    """The status the server answers to a POST that declares size_bytes of body, before any of it is sent."""
    parts = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.putrequest("POST", path)
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(size_bytes))
    conn.putheader("Cookie", cookie)
    conn.endheaders()
    status = conn.getresponse().status
    conn.close()
    return status


def _session_cookie(opener) -> str:
    jar = next(h for h in opener.handlers if isinstance(h, urllib.request.HTTPCookieProcessor)).cookiejar
    return "; ".join(f"{c.name}={c.value}" for c in jar)


def check_body_limit(base: str) -> str:
    viewer, admin = _opener(), _opener()
    _login(viewer, base, "vic", PASSWORDS["vic"])
    _login(admin, base, "ada", PASSWORDS["ada"])
    size = 650 * 1024**2
    as_viewer = _declared_body_status(base, "/_dash-update-component", size, _session_cookie(viewer))
    elsewhere = _declared_body_status(base, "/login", 20 * 1024**2, _session_cookie(admin))
    assert as_viewer == 413 and elsewhere == 413, (as_viewer, elsewhere)
    return f"a viewer's 650 MiB callback body: {as_viewer}; a 20 MiB body on /login: {elsewhere}"


def check_malformed(base: str) -> str:
    opener = _opener()
    _login(opener, base, "vic", PASSWORDS["vic"])
    status, _, _ = _request(opener, f"{base}/_dash-update-component", b"[1,2]", {"Content-Type": "application/json"})
    assert status == 400, status
    return "a malformed callback payload: 400"


def check_headers(base: str) -> str:
    status, headers, _ = _request(_opener(), f"{base}/login")
    needed = {"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
    for name, value in needed.items():
        assert headers.get(name) == value, (name, headers.get(name))
    assert "frame-ancestors 'none'" in headers.get("Content-Security-Policy", "")
    return "CSP frame-ancestors, nosniff, DENY, no-store present"


def _status_for_host(base: str, path: str, host: str) -> int:
    """The status a loopback connection to base answers for path when the request names host (a rebinding page)."""
    parts = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.putrequest("GET", path, skip_host=True)
    conn.putheader("Host", host)
    conn.endheaders()
    status = conn.getresponse().status
    conn.close()
    return status


def check_allowed_hosts(base: str) -> str:
    port = urllib.parse.urlsplit(base).port
    foreign = {path: _status_for_host(base, path, f"rebind.example:{port}") for path in ("/", "/login", "/healthz")}
    own = _status_for_host(base, "/login", f"127.0.0.1:{port}")
    assert set(foreign.values()) == {400} and own == 200, (foreign, own)
    codes = sorted(set(foreign.values()))
    return f"a loopback request naming Host rebind.example: {codes} on /, /login, /healthz; as 127.0.0.1: {own}"


def check_scenario_bounds(_base: str) -> str:
    data = {**config_to_dict(ScenarioConfig(dataset="d", cluster="c")), "gpus_per_node": 10**9}
    try:
        config_from_dict(data)
    except ScenarioError as exc:
        refused = str(exc)
    else:
        raise AssertionError("gpus_per_node 1e9 accepted")
    try:
        grid_points({"load_factor": [1 + i / 100 for i in range(65)]})
    except ScenarioError:
        return f"replayed gpus_per_node 1e9 refused ({refused}); a 65-point grid refused"
    raise AssertionError("a 65-point grid accepted")


def check_zip_bomb(_base: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        bomb = Path(tmp) / "bomb.zip"
        with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("Venus/cluster_log.csv", b"0" * 300_000_000)
        started = time.perf_counter()
        try:
            ingest(bomb, "helios", "bomb", root=Path(tmp) / "data")
        except IngestError as exc:
            return f"{bomb.stat().st_size // 1024} KiB zip refused in {time.perf_counter() - started:.2f} s: {exc}"
    raise AssertionError("zip bomb ingested")


def check_symlink_delete(_base: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        outside, root = Path(tmp) / "outside", Path(tmp) / "data"
        outside.mkdir()
        root.mkdir()
        (outside / "meta.json").write_text("{}")
        (root / "evil").symlink_to(outside)
        store.delete_dataset("evil", root)
        assert (outside / "meta.json").exists()
    return "deleting a dataset link leaves the folder it points to"


def _post_login_form(source: str, base: str, account: str, forwarded_for: str) -> int:
    """A failed login from the loopback address source, claiming to be forwarded_for; the status answered."""
    parts = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30, source_address=(source, 0))
    conn.request("GET", "/login", headers={"X-Forwarded-For": forwarded_for})
    resp = conn.getresponse()
    cookie = resp.getheader("Set-Cookie", "").split(";", 1)[0]
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', resp.read().decode()).group(1)
    form = urllib.parse.urlencode({"username": account, "password": "wrong", "csrf": token, "next": "/"})
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie, "X-Forwarded-For": forwarded_for}
    conn.request("POST", "/login", form, headers)
    status = conn.getresponse().status
    conn.close()
    return status


def check_forwarded_for(base: str) -> str:
    codes = [_post_login_form("127.0.0.2", base, f"ghost{i}", f"203.0.113.{i}") for i in range(7)]
    assert codes == [401] * 5 + [429, 429], codes
    return f"7 failed logins from one address, each claiming another X-Forwarded-For: {codes}"


@dataclass
class Run:
    """A what-if run started by hand-made callback requests: the page load's endId and the job's signed handles."""

    opener: urllib.request.OpenerDirector
    base: str
    body: bytes
    end_id: str
    handles: dict

    def poll(self) -> dict:
        """One poll of the run's result, as the page sends it every second; {} while it runs."""
        query = urllib.parse.urlencode({"endId": self.end_id, **self.handles})
        status, _, text = _request(self.opener, f"{self.base}/_dash-update-component?{query}", self.body, JSON)
        assert status in (200, 204), (status, text[:200])
        answer = json.loads(text) if status == 200 and text else {}
        return answer if "response" in answer else {}


def _start_run(opener, base: str, config: dict) -> Run:
    """Start the What-if page's background run of config, as its callback request would."""
    _, _, page = _request(opener, f"{base}/whatif")
    end_id = json.loads(re.search(r'id="_dash-config"[^>]*>(.*?)</script>', page, re.S).group(1))["end_id"]
    _, _, deps = _request(opener, f"{base}/_dash-dependencies")
    spec = next(c for c in json.loads(deps) if c["inputs"] == [{"id": "whatif-config", "property": "data"}])
    outputs = [dict(zip(("id", "property"), o.rsplit(".", 1), strict=True)) for o in spec["output"][2:-2].split("...")]
    value = {"config": config, "token": os.urandom(8).hex()}
    payload = {
        "output": spec["output"],
        "outputs": outputs,
        "inputs": [{"id": "whatif-config", "property": "data", "value": value}],
        "changedPropIds": ["whatif-config.data"],
        "state": [],
    }
    body = json.dumps(payload).encode()
    status, _, text = _request(opener, f"{base}/_dash-update-component?endId={urllib.parse.quote(end_id)}", body, JSON)
    assert status == 200, (status, text[:300])
    handles = {k: v for k, v in json.loads(text).items() if k in ("cacheKey", "job")}
    return Run(opener, base, body, end_id, handles)


def _run_processes(server_pid: int) -> list[psutil.Process]:
    """The spawned run processes of the server: master -> worker -> background job -> run."""
    found = []
    for worker in psutil.Process(server_pid).children():
        for job in worker.children():
            try:
                found += [p for p in job.children() if "spawn_main" in " ".join(p.cmdline())]
            except psutil.Error:
                continue
    return found


def _run_config(load_factor: float) -> dict:
    """A what-if of the whole Philly trace (each load factor its own result)."""
    return config_to_dict(ScenarioConfig(dataset="philly", cluster="Philly", load_factor=load_factor))


def _held_first_run(server_pid: int, first: Run) -> list[psutil.Process]:
    """Poll the first run as its page would until its process is there, then stop that process (SIGSTOP)."""
    deadline = time.monotonic() + DEADLINE_S
    while not (runs := _run_processes(server_pid)):
        assert time.monotonic() < deadline, f"the first run did not start within {DEADLINE_S} s"
        first.poll()
        time.sleep(0.05)
    for run in runs:
        run.suspend()
    return runs


def _refusal_of_second(first: Run, second: Run) -> tuple[str, float]:
    """Poll both runs until the second is answered; that answer and when the first was last polled."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        last_poll_s = time.monotonic()  # the server records the poll after this
        first.poll()
        answer = second.poll()
        if answer:
            return json.dumps(answer), last_poll_s
        assert time.monotonic() < deadline, f"the second run was not answered within {DEADLINE_S} s"
        time.sleep(1.0)


def _ending(run: Run) -> str:
    """The answer a poll of an ended run gets (its error or its result)."""
    deadline = time.monotonic() + DEADLINE_S
    while (ending := json.dumps(run.poll())) == "{}":
        assert time.monotonic() < deadline, f"the stopped run was not answered within {DEADLINE_S} s"
        time.sleep(0.5)
    return ending


def check_runs(server_pid: int) -> Check:
    def check(base: str) -> str:
        viewer = _opener()
        _login(viewer, base, "vic", PASSWORDS["vic"])
        first = _start_run(viewer, base, _run_config(1.1))
        runs = _held_first_run(server_pid, first)
        try:
            second = _start_run(viewer, base, _run_config(1.2))
            refusal, last_poll_s = _refusal_of_second(first, second)
            assert "already running 1" in refusal, refusal[:300]
            assert all(p.status() == psutil.STATUS_STOPPED for p in runs), "the first run stopped while polled"
            # From here the first run's page is "closed": no more polls. Held, the run cannot end by itself.
            _, alive = psutil.wait_procs(runs, timeout=DEADLINE_S)
            waited_s = time.monotonic() - last_poll_s
        finally:
            for run in runs:
                if run.is_running():
                    run.resume()
        assert not alive, f"the unpolled run still runs after {waited_s:.0f} s"
        assert waited_s >= RUN_UNPOLLED_S, f"the run stopped {waited_s:.1f} s after its last poll, before the limit"
        ending = _ending(first)
        assert "nobody polled the run" in ending, f"the first run ended otherwise: {ending[:300]}"
        return (
            f"a viewer's second run at once refused ('you are already running 1 ...'); the first run (held), no "
            f"longer polled, stopped {waited_s:.1f} s after its last poll (limit {RUN_UNPOLLED_S} s)"
        )

    return check


def check_cache_folder(cache_dir: Path) -> Check:
    def check(_base: str) -> str:
        mode = stat.S_IMODE(cache_dir.stat().st_mode)
        assert mode == 0o700, oct(mode)
        return f"cache folder mode {oct(mode)}"

    return check


def _serve(data_dir: Path, cache_dir: Path, auth_file: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {**os.environ, "HELIOS_DATA_DIR": str(data_dir), "HELIOS_CACHE_DIR": str(cache_dir), "PORT": str(port)}
    env.update(HELIOS_AUTH_FILE=str(auth_file), HELIOS_SECRET_KEY="attack-bench", WEB_CONCURRENCY="2")
    env.update(HELIOS_RUN_UNPOLLED_S=str(RUN_UNPOLLED_S), HELIOS_BG_INTERVAL_MS="1000")
    for name in ("HELIOS_BIND_HOST", "HELIOS_REDIS_URL", "HELIOS_ANONYMOUS_ROLE", "HELIOS_PROXY_COUNT"):
        env.pop(name, None)
    for name in ("HELIOS_MAX_RUNS", "HELIOS_MAX_RUNS_PER_USER"):
        env.pop(name, None)  # the defaults: 2 per host, 1 per user
    cmd = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "app:server"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"  # the default bind: loopback only
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{base}/healthz", timeout=10)
            return proc, base
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the server did not start within {DEADLINE_S} s")


def main() -> int:
    """Start the loopback server, run every check, print held/failed per finding; exit 1 when one failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="philly")
    parser.add_argument("--data-dir", type=Path, default=REPO / "data")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="helios-attack-"))
    data = work / "data"
    for name in {args.dataset, RUN_DATASET}:
        shutil.copytree(args.data_dir / name, data / name, symlinks=False)
    users = {n: UserRecord(n, "admin" if n == "ada" else "viewer", hash_password(p)) for n, p in PASSWORDS.items()}
    save_users(work / "users.json", users)
    proc, base = _serve(data, work / "cache", work / "users.json")
    checks: dict[str, Check] = {
        "login form has a CSRF token": check_csrf,
        "logout ends the session on the server": check_logout,
        "large bodies refused for viewers": check_body_limit,
        "malformed payloads get 4xx": check_malformed,
        "security headers and no-store": check_headers,
        "a foreign Host header (DNS rebinding) gets 400 before auth": check_allowed_hosts,
        "what-if and sweep inputs bounded on the server": check_scenario_bounds,
        "zip bombs refused": check_zip_bomb,
        "delete does not follow links out": check_symlink_delete,
        "cache folder is private": check_cache_folder(work / "cache"),
        "one run at a time per user; unpolled runs stop": check_runs(proc.pid),
        "a forged X-Forwarded-For does not dodge the back-off": check_forwarded_for,  # locks 127.0.0.2
        "login brute force is throttled": check_brute_force,  # last: it locks this client address for a while
    }
    failed = 0
    try:
        for name, check in checks.items():
            try:
                print(f"HELD    {name}: {check(base)}", flush=True)
            except AssertionError as exc:
                failed += 1
                print(f"FAILED  {name}: {exc}", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"held": len(checks) - failed, "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
