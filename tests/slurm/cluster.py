"""A throw-away single-node Slurm cluster with accounting, for the real-Slurm test and for a demo.

It runs Debian's Slurm 22.05 (`slurm-wlm`, `slurmdbd`), MariaDB and munge without systemd: every daemon in its
foreground mode in the background, all state in one private folder on free ports (two clusters can run side by
side), stopped by PID on exit. A ClusterSpec sets the node's CPUs and fake GPUs (character devices made with mknod),
the partitions, the accounts with their shares and users, and any slurm.conf setting (the scheduler's); the default
spec is the real-Slurm test's: 8 GPUs, 8 CPUs, partitions vcA, vcB and vcC, users daemon (teama) and nobody (teamb).

Demo (as root, the packages installed, from the repository's root): `.venv/bin/python -m tests.slurm.cluster --demo`
starts the cluster, runs the test's workload, exports it with sacct, ingests it into `slurm-demo/data` (dataset
`slurm-real`), refreshes it with `helios sync slurm` and prints what it found.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from analytics.ingest.slurm import SACCT_FIELDS
from tests.system import require

NODE = "node1"
GPUS = 8
CPUS = 8
PARTITIONS = ("vcA", "vcB", "vcC")
CLUSTER = "heliostest"
ACCOUNTS = {"daemon": "teama", "nobody": "teamb"}  # existing system users who submit the jobs -> their account
START_ATTEMPTS = 3  # a port taken between choosing and binding it (another cluster starting): retry on new ports
PACKAGES = "slurm-wlm slurmdbd mariadb-server munge"
SACCT_FORMAT = ",".join(SACCT_FIELDS)  # the README's export
ACTIVE_STATES = {"PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "COMPLETING"}
START_TIMEOUT_S = 60.0


class SlurmMissing(RuntimeError):
    """The Slurm, MariaDB or munge programs are not installed (or this is not root)."""


def missing_programs() -> list[str]:
    """The programs this cluster needs that are not installed (empty when it can start)."""
    programs = ("munged", "mungekey", "mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "slurmctld")
    programs += ("slurmd", "sbatch", "sacct", "sacctmgr", "scontrol", "scancel", "sinfo", "squeue")
    found = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [p for p in programs if shutil.which(p, path=found) is None]


def check_can_start() -> None:
    """Raise SlurmMissing naming what is missing, when the cluster cannot start here."""
    missing = missing_programs()
    if missing:
        raise SlurmMissing(f"Slurm not installed: {', '.join(missing)} missing (apt-get install -y {PACKAGES})")
    if os.geteuid() != 0:
        raise SlurmMissing("the Slurm test cluster needs root (it runs slurmd and mknod)")


def require_slurm() -> None:
    """Skip the calling test without REQUIRE_SLURM=1; with it, fail when no Slurm test cluster can start here."""
    if os.environ.get("REQUIRE_SLURM") != "1":
        pytest.skip(f"real Slurm test: set REQUIRE_SLURM=1 with Slurm installed (apt-get install -y {PACKAGES})")
    try:
        check_can_start()
    except SlurmMissing as exc:
        require("Slurm", str(exc))


@dataclass(frozen=True)
class Partition:
    """A partition over the one node: its name, MaxTime (minutes) and PriorityJobFactor."""

    name: str
    max_time_min: int = 30
    priority_job_factor: int = 1


@dataclass(frozen=True)
class Account:
    """An account under root with its Fairshare (raw shares) and the users associated with it."""

    name: str
    users: tuple[str, ...]
    fairshare: int = 1


# slurm.conf settings a ClusterSpec may override (the scheduler's and the timing's); the rest is fixed.
DEFAULT_SETTINGS: dict[str, str] = {
    "SchedulerType": "sched/backfill",
    "SchedulerParameters": "bf_interval=5",
    "DependencyParameters": "kill_invalid_depend",
    "OverTimeLimit": "0",
    "KillWait": "2",
    "MinJobAge": "600",
    "InactiveLimit": "0",
}


@dataclass(frozen=True)
class ClusterSpec:
    """What the cluster is made of: the node's CPUs and GPUs, partitions (the first is the default), accounts and
    users, and slurm.conf settings laid over DEFAULT_SETTINGS."""

    cpus: int = CPUS
    gpus: int = GPUS
    partitions: tuple[Partition, ...] = tuple(Partition(p) for p in PARTITIONS)
    accounts: tuple[Account, ...] = (Account("teama", ("root", "daemon")), Account("teamb", ("nobody",)))
    settings: tuple[tuple[str, str], ...] = ()

    def slurm_settings(self) -> dict[str, str]:
        """DEFAULT_SETTINGS with this spec's settings laid over them."""
        return {**DEFAULT_SETTINGS, **dict(self.settings)}


def _free_ports(names: Sequence[str]) -> dict[str, int]:
    """One distinct free port per name (all sockets held open together, so no two names share one)."""
    sockets = [socket.socket() for _ in names]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return {name: s.getsockname()[1] for name, s in zip(names, sockets, strict=True)}
    finally:
        for s in sockets:
            s.close()


def _program(name: str) -> str:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") or name


@dataclass
class SlurmCluster:
    """A running cluster: its folder, ports and daemon processes; `run` calls Slurm commands against it."""

    root: Path
    ports: dict[str, int]
    spec: ClusterSpec = ClusterSpec()
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        """The cluster's slurm.conf (SLURM_CONF of every command)."""
        return self.root / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment Slurm commands need: SLURM_CONF, ISO times, sbin on PATH."""
        path = os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
        return {**os.environ, "SLURM_CONF": str(self.conf), "SLURM_TIME_FORMAT": "standard", "PATH": path}

    def run(self, *args: str, user: str | None = None, check: bool = True, timeout_s: float = 60) -> str:
        """Run a command (as user, when given) with the cluster's environment and return its stdout."""
        command = list(args)
        if user:
            uid, gid = _ids(user)
            command = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *command]
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=timeout_s, cwd="/tmp")
        if check and done.returncode:
            raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-800:]}")
        return done.stdout

    def sbatch(self, user: str, *options: str, script: str) -> int:
        """Submit a batch script as user and return its job id."""
        path = self.root / "jobs" / f"job-{time.monotonic_ns()}.sh"
        path.write_text("#!/bin/sh\n" + script + "\n")
        path.chmod(0o755)
        out = self.run("sbatch", "--parsable", "--output=/dev/null", "--chdir=/tmp", *options, str(path), user=user)
        return int(out.strip().split(";")[0].split("_")[0])

    def states(self) -> dict[str, str]:
        """Current state of every job and array element slurmctld still knows, by job id text."""
        out = self.run("squeue", "--all", "--noheader", "--array", "--format=%i|%T")
        return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)

    def wait_until_idle(self, timeout_s: float = 300) -> None:
        """Wait until no job is pending or running, in slurmctld and in the accounting (raises TimeoutError)."""
        deadline = time.monotonic() + timeout_s
        while self.states():
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs still queued after {timeout_s:g} s: {self.states()}")
            time.sleep(2)
        self.wait_until_accounted(set(), max(deadline - time.monotonic(), 30))

    def accounted_active(self) -> dict[str, str]:
        """Jobs the accounting (sacct, slurmdbd) still has pending or running, by job id text: slurmdbd hears of
        a job's end after slurmctld, so a job squeue no longer lists may still be RUNNING in sacct for a while."""
        out = self.run("sacct", "--allusers", "--parsable2", "--noheader", "-X", "--starttime=2000-01-01T00:00:00",
                       "--endtime=now+7days", "--format=JobID,State")  # fmt: skip
        rows = (line.split("|", 1) for line in out.splitlines() if "|" in line)
        return {job: state for job, state in rows if state.split()[0] in ACTIVE_STATES}

    def wait_until_accounted(self, allowed: set[str], timeout_s: float = 60) -> None:
        """Wait until every job sacct still has pending or running is one of allowed (raises TimeoutError)."""
        deadline = time.monotonic() + timeout_s
        while set(self.accounted_active()) - allowed:
            if time.monotonic() > deadline:
                raise TimeoutError(f"sacct still has active jobs after {timeout_s:g} s: {self.accounted_active()}")
            time.sleep(1)

    def wait_for_state(self, job: str, state: str, timeout_s: float = 60) -> None:
        """Wait until job (an id text) reaches state in squeue."""
        deadline = time.monotonic() + timeout_s
        while self.states().get(job) != state:
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job} not {state} after {timeout_s:g} s (now {self.states().get(job)})")
            time.sleep(1)

    def sacct(self, starttime: str = "2000-01-01T00:00:00", fields: str = SACCT_FORMAT, *extra: str) -> str:
        """The administrator's export: `sacct --allusers --parsable2 --starttime ... --endtime=now+7days
        --format=...` (the end in the future keeps jobs cancelled before their --begin time)."""
        window = (f"--starttime={starttime}", "--endtime=now+7days")
        return self.run("sacct", "--allusers", "--parsable2", *window, f"--format={fields}", *extra)

    def cancel_all(self, timeout_s: float = 20) -> None:
        """Cancel every job still queued or running and wait until they are gone (so no job step outlives slurmd)."""
        try:
            active = list(self.states())
            if active:
                self.run("scancel", *active, check=False)
                self.wait_until_idle(timeout_s)
        except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as exc:
            print(f"could not cancel every job: {exc}", file=sys.stderr)

    def stop(self) -> None:
        """Cancel the jobs left, stop every daemon by its PID (newest first), then remove the folder."""
        if "slurmd" in self.procs and self.procs["slurmd"].poll() is None:
            self.cancel_all()
        for name in reversed(list(self.procs)):
            _stop(self.procs[name])
        self.procs.clear()
        shutil.rmtree(self.root, ignore_errors=True)


def _ids(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def _stop(proc: subprocess.Popen, grace_s: float = 10) -> None:
    """Terminate one daemon we started (its PID still names our process), then kill it if it lingers."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(grace_s)


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _slurm_conf(root: Path, ports: dict[str, int], host: str, spec: ClusterSpec) -> str:
    sock = root / "munge" / "munge.socket"
    nodes = f"NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={spec.cpus} RealMemory=16000"
    parts = "\n".join(
        f"PartitionName={p.name} Nodes={NODE} MaxTime={p.max_time_min} PriorityJobFactor={p.priority_job_factor}"
        f" State=UP{' Default=YES' if i == 0 else ''}"
        for i, p in enumerate(spec.partitions)
    )
    settings = "\n".join(f"{key}={value}" for key, value in spec.slurm_settings().items())
    return f"""ClusterName={CLUSTER}
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ports["slurmctld"]}
SlurmdPort={ports["slurmd"]}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={root}/spool/ctld
SlurmdSpoolDir={root}/spool/d
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={ports["slurmdbd"]}
AccountingStoragePass={sock}
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
{settings}
{nodes} Gres=gpu:{spec.gpus} State=UNKNOWN
{parts}
"""


def _slurmdbd_conf(root: Path, ports: dict[str, int], host: str) -> str:
    return f"""AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket
DbdHost={host}
DbdAddr=127.0.0.1
DbdPort={ports["slurmdbd"]}
SlurmUser=root
PidFile={root}/run/slurmdbd.pid
LogFile={root}/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={ports["mariadb"]}
StorageUser=slurm
StoragePass=slurm-test
StorageLoc=slurm_acct_db
"""


def _configure(root: Path, ports: dict[str, int], spec: ClusterSpec) -> None:
    host = socket.gethostname().split(".")[0]
    for sub in ("spool/ctld", "spool/d", "run", "log", "munge", "db", "dev", "jobs"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "jobs").chmod(0o755)
    (root / "munge").chmod(0o755)
    _write(root / "etc" / "slurm.conf", _slurm_conf(root, ports, host, spec))
    _write(root / "etc" / "slurmdbd.conf", _slurmdbd_conf(root, ports, host), 0o600)
    _write(root / "etc" / "gres.conf", f"NodeName={NODE} Name=gpu File={root}/dev/nvidia[0-{spec.gpus - 1}]\n")
    for n in range(spec.gpus):
        subprocess.run(["mknod", str(root / "dev" / f"nvidia{n}"), "c", "195", str(n)], check=True)


def _wait(check, what: str, proc: subprocess.Popen | None = None, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the daemon exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not ready after {timeout_s:g} s")
        time.sleep(0.3)


def _ok(cluster: SlurmCluster, *args: str) -> bool:
    try:
        cluster.run(*args, timeout_s=10)
    except (RuntimeError, subprocess.TimeoutExpired):
        return False
    return True


def _start(cluster: SlurmCluster, name: str, args: Sequence[str]) -> subprocess.Popen:
    log = (cluster.root / "log" / f"{name}.out").open("w")
    proc = subprocess.Popen(
        [_program(args[0]), *args[1:]], env=cluster.env, stdout=log, stderr=subprocess.STDOUT, cwd=cluster.root
    )
    cluster.procs[name] = proc
    return proc


def _start_munge(cluster: SlurmCluster) -> None:
    m = cluster.root / "munge"
    subprocess.run([_program("mungekey"), "--create", f"--keyfile={m}/munge.key"], check=True, capture_output=True)
    (m / "munge.key").chmod(0o600)
    args = ["munged", "--foreground", "--force", f"--socket={m}/munge.socket", f"--key-file={m}/munge.key"]
    args += [f"--pid-file={m}/munged.pid", f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"]
    proc = _start(cluster, "munged", args)
    _wait(lambda: (m / "munge.socket").exists(), "munged", proc)
    (m / "munge.socket").chmod(0o777)


def _start_mariadb(cluster: SlurmCluster) -> None:
    db, port = cluster.root / "db", cluster.ports["mariadb"]
    install = [_program("mariadb-install-db"), "--no-defaults", "--user=root", f"--datadir={db}/data"]
    subprocess.run([*install, "--auth-root-authentication-method=socket"], check=True, capture_output=True)
    args = ["mariadbd", "--no-defaults", "--user=root", f"--datadir={db}/data", f"--socket={db}/mysql.sock"]
    args += ["--bind-address=127.0.0.1", f"--port={port}", f"--pid-file={db}/mariadbd.pid", "--skip-name-resolve"]
    proc = _start(cluster, "mariadbd", args)
    client = ["mariadb", "--no-defaults", f"--socket={db}/mysql.sock", "-uroot"]
    _wait(lambda: _ok(cluster, *client, "-e", "SELECT 1"), "mariadbd", proc)
    grants = "".join(
        f"CREATE USER 'slurm'@'{h}' IDENTIFIED BY 'slurm-test'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'{h}';"
        for h in ("127.0.0.1", "localhost")
    )
    cluster.run(*client, "-e", grants)


def _start_slurm(cluster: SlurmCluster) -> None:
    dbd = _start(cluster, "slurmdbd", ["slurmdbd", "-D"])  # reads slurmdbd.conf beside SLURM_CONF
    _wait(lambda: _ok(cluster, "sacctmgr", "-n", "list", "cluster"), "slurmdbd", dbd)
    cluster.run("sacctmgr", "-i", "add", "cluster", CLUSTER)
    for account in cluster.spec.accounts:
        cluster.run("sacctmgr", "-i", "add", "account", account.name, f"Fairshare={account.fairshare}",
                    f"cluster={CLUSTER}")  # fmt: skip
        for user in account.users:
            cluster.run("sacctmgr", "-i", "add", "user", user, f"account={account.name}", f"cluster={CLUSTER}")
    ctld = _start(cluster, "slurmctld", ["slurmctld", "-D", "-i"])
    _wait(lambda: _ok(cluster, "scontrol", "ping"), "slurmctld", ctld)
    slurmd = _start(cluster, "slurmd", ["slurmd", "-D", "-N", NODE])
    idle = ("idle", "mixed", "allocated")
    _wait(lambda: cluster.run("sinfo", "-h", "-n", NODE, "-o", "%T", check=False).strip() in idle, "slurmd", slurmd)


def _start_once(spec: ClusterSpec) -> SlurmCluster:
    """Configure a fresh private folder on free ports and start every daemon (stopping them if one fails)."""
    root = Path(tempfile.mkdtemp(prefix="helios-slurm-"))
    root.chmod(0o755)
    cluster = SlurmCluster(root, _free_ports(("mariadb", "slurmdbd", "slurmctld", "slurmd")), spec)
    try:
        _configure(root, cluster.ports, spec)
        _start_munge(cluster)
        _start_mariadb(cluster)
        _start_slurm(cluster)
    except BaseException:
        _print_logs(root)
        cluster.stop()
        raise
    return cluster


def _start_cluster(spec: ClusterSpec) -> SlurmCluster:
    """A started cluster, retried on new ports when a start fails (a port taken by another cluster meanwhile)."""
    attempt = 1
    while True:
        try:
            return _start_once(spec)
        except (RuntimeError, TimeoutError, subprocess.CalledProcessError) as exc:
            if attempt == START_ATTEMPTS:
                raise
            print(f"cluster start {attempt} failed ({exc}); retrying on new ports", file=sys.stderr)
            attempt += 1


@contextmanager
def slurm_cluster(spec: ClusterSpec = ClusterSpec(), keep: bool = False) -> Iterator[SlurmCluster]:
    """Start a cluster made as spec says (munged, mariadbd, slurmdbd, slurmctld, slurmd), yield it, stop it on
    exit (every daemon by its PID, even on failure)."""
    check_can_start()
    cluster = _start_cluster(spec)
    try:
        yield cluster
    except BaseException:
        _print_logs(cluster.root)
        raise
    finally:
        if keep:
            print(f"cluster folder kept: {cluster.root}", file=sys.stderr)
            cluster.cancel_all()
            for proc in reversed(list(cluster.procs.values())):
                _stop(proc)
        else:
            cluster.stop()


def _print_logs(root: Path) -> None:
    for log in sorted((root / "log").glob("*")):
        lines = log.read_text(errors="replace").splitlines()[-15:]
        print(f"--- {log.name}\n" + "\n".join(lines), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Start the cluster, run the workload, export, ingest and summarise it (the demo)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", action="store_true", help="run the test workload, ingest it and refresh it")
    parser.add_argument("--out", type=Path, default=Path("slurm-demo"), help="folder for the sacct exports")
    parser.add_argument("--keep", action="store_true", help="keep the cluster folder (logs) after stopping")
    args = parser.parse_args(argv)
    from tests.slurm import workload

    with slurm_cluster(keep=args.keep) as cluster:
        print(f"cluster up in {cluster.root}; ports {cluster.ports}")
        if args.demo:
            workload.demo(cluster, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
