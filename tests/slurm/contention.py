"""The contention experiment on a real Slurm: one seeded job list, run under named scheduler presets, recorded.

A job list (`make_jobs`) is drawn from a seed: users in accounts with different Fairshare submit `sleep D` jobs
(D of 10-90 s, 1/2/4 GPUs with one CPU each, whole-minute `--time` limits, about 10 % below D so they end TIMEOUT),
some in bursts, some spread over the submission span, on two partitions that share the node's 8 GPUs. Each run
starts a fresh cluster (so the accounting database, and with it every association's usage, starts empty), dumps
the scheduler's settings, submits the jobs at their offsets while snapshotting `sprio` and `sshare`, waits until
every job is final and exports `sacct`. The recordings are the reference the scheduler twin is checked against.

    python -m tests.slurm.contention jobs                 # the job list and its oversubscription
    python -m tests.slurm.contention run fairshare fairshare age builtin --out tests/slurm/recordings
    python -m tests.slurm.contention report tests/slurm/recordings/*   # tables and comparisons, no Slurm needed
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path

from tests.slurm.cluster import Account, ClusterSpec, Partition, SlurmCluster, slurm_cluster

SEED = 38
SNAPSHOT_INTERVAL_S = 3.0
START_DELAY_S = 2.0  # the first offset is this long after the cluster is ready
IDLE_TIMEOUT_S = 3600.0
SACCT_FIELDS = (
    "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "Submit", "Eligible", "Start", "End",
    "State", "ExitCode", "NNodes", "NCPUS", "ReqTRES", "AllocTRES", "Timelimit", "TimelimitRaw", "Priority",
    "Elapsed", "ElapsedRaw", "NodeList", "Reason", "Cluster",
)  # fmt: skip
ASSOC_FORMAT = (
    "Cluster,Account,User,Partition,ParentName,Share,Priority,GrpJobs,GrpTRES,GrpSubmit,GrpTRESMins,MaxJobs,"
    "MaxTRES,MaxTRESPerNode,MaxSubmit,MaxWall,QOS,DefaultQOS"
)
SQUEUE_FORMAT = "%i|%j|%u|%a|%P|%T|%r|%Q|%V|%S"  # id, name, user, account, partition, state, reason, priority,
# submit time and (for a pending job) the start the scheduler expects
DUMPS: dict[str, tuple[str, ...]] = {
    "config.txt": ("scontrol", "show", "config"),
    "partitions.txt": ("scontrol", "show", "partition", "-o"),
    "nodes.txt": ("scontrol", "show", "nodes", "-o"),
    "assoc.txt": ("sacctmgr", "show", "assoc", "-P", f"format={ASSOC_FORMAT}"),
    "qos.txt": ("sacctmgr", "show", "qos", "-P"),
}
SNAPSHOTS: dict[str, tuple[str, ...]] = {
    "sprio.txt": ("sprio", "-l", "-h"),
    "sshare.txt": ("sshare", "-a", "-l", "-P"),
    "squeue.txt": ("squeue", "--all", "-h", "-t", "PD,R", f"--format={SQUEUE_FORMAT}"),
}
EPOCH_PREFIX = "# epoch="  # the line before each snapshot block
RECORDING_FILES = (*DUMPS, *SNAPSHOTS, "sacct.txt", "submit.csv", "jobs.json", "run.json", "slurmctld.log")
SUBMIT_FIELDS = ("job_name", "job_id", "planned_offset_s", "sbatch_start_epoch", "sbatch_end_epoch", "actual_offset_s")


# --- The job list ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Submitter:
    """One user's submissions: bursts (offset, jobs submitted back to back) and jobs spread over the span."""

    user: str
    account: str
    bursts: tuple[tuple[float, int], ...] = ()
    spread_jobs: int = 0


@dataclass(frozen=True)
class Design:
    """How a job list is drawn: who submits what, over which span, with which durations, GPUs and limits."""

    submitters: tuple[Submitter, ...]
    span_s: float  # spread jobs are submitted in [0, span_s]
    duration_s: tuple[int, int] = (10, 90)
    timeout_share: float = 0.10  # jobs whose limit (1 minute) is below their duration (the longest one)
    gpu_weights: tuple[tuple[int, float], ...] = ((1, 0.5), (2, 0.35), (4, 0.15))
    burst_gap_s: float = 0.3  # between two jobs of one burst
    extra_limit_weights: tuple[float, ...] = (0.4, 0.4, 0.2)  # 0, 1, 2 minutes of slack beyond ceil((D + 5) / 60)


@dataclass(frozen=True)
class Job:
    """One submission: its name, who, where, GPUs (one CPU each), true duration, limit and offset."""

    name: str
    user: str
    account: str
    partition: str
    gpus: int
    duration_s: int
    timelimit_min: int
    offset_s: float


# The experiment's cluster: 32 CPUs so that CPUs never bind, 8 GPUs shared by two partitions, three accounts.
CONTENTION_CLUSTER = ClusterSpec(
    cpus=32,
    gpus=8,
    partitions=(Partition("short", max_time_min=2, priority_job_factor=2), Partition("long", max_time_min=5)),
    accounts=(
        Account("vision", ("daemon", "bin"), fairshare=5),
        Account("nlp", ("nobody",), fairshare=2),
        Account("speech", ("sys",), fairshare=1),
    ),
)
# speech (1 share) and nlp (2) submit in bursts and so run up usage; vision's two users (5 shares) trickle in.
FULL_DESIGN = Design(
    submitters=(
        Submitter("sys", "speech", bursts=((0.0, 8), (100.0, 7), (200.0, 7))),
        Submitter("nobody", "nlp", bursts=((40.0, 6), (160.0, 6))),
        Submitter("daemon", "vision", spread_jobs=20),
        Submitter("bin", "vision", spread_jobs=12),
    ),
    span_s=300.0,
)
# The suite's short run: 14 jobs of 5-20 s over 20 s, no TIMEOUT (a limit is enforced only after a minute or more).
SMALL_DESIGN = Design(
    submitters=(
        Submitter("sys", "speech", bursts=((0.0, 5),)),
        Submitter("nobody", "nlp", bursts=((6.0, 3),)),
        Submitter("daemon", "vision", spread_jobs=4),
        Submitter("bin", "vision", spread_jobs=2),
    ),
    span_s=20.0,
    duration_s=(5, 20),
    timeout_share=0.0,
)


def _offsets(design: Design, rng: random.Random) -> list[tuple[float, Submitter]]:
    out = []
    for sub in design.submitters:
        for start_s, count in sub.bursts:
            out += [(round(start_s + i * design.burst_gap_s, 1), sub) for i in range(count)]
        out += [(round(rng.uniform(0, design.span_s), 1), sub) for _ in range(sub.spread_jobs)]
    return sorted(out, key=lambda pair: pair[0])


def _limit_min(duration_s: int, design: Design, rng: random.Random, max_min: int) -> int:
    extra = rng.choices(range(len(design.extra_limit_weights)), weights=design.extra_limit_weights)[0]
    return min(math.ceil((duration_s + 5) / 60) + extra, max_min)


def make_jobs(seed: int = SEED, design: Design = FULL_DESIGN, cluster: ClusterSpec = CONTENTION_CLUSTER) -> list[Job]:
    """The job list the seed draws from the design, in submission order (the same for every preset)."""
    low_s, high_s = design.duration_s
    if design.timeout_share and high_s <= 60:
        raise ValueError("TIMEOUT jobs need durations over 60 s: the shortest limit is one minute")
    rng = random.Random(seed)
    offsets = _offsets(design, rng)
    timeouts = set(rng.sample(range(len(offsets)), round(design.timeout_share * len(offsets))))
    gpus, weights = zip(*design.gpu_weights, strict=True)
    max_min = max(p.max_time_min for p in cluster.partitions)
    jobs = []
    for i, (offset_s, sub) in enumerate(offsets):
        duration_s = high_s if i in timeouts else rng.randint(low_s, high_s)
        limit = 1 if i in timeouts else _limit_min(duration_s, design, rng, max_min)
        partition = rng.choice([p.name for p in cluster.partitions if p.max_time_min >= limit])
        gpu = rng.choices(gpus, weights=weights)[0]
        jobs.append(Job(f"c{i:03d}", sub.user, sub.account, partition, gpu, duration_s, limit, offset_s))
    return jobs


def oversubscription(jobs: Sequence[Job], gpus: int) -> float:
    """GPU-seconds asked (true durations) over the GPU-seconds the submission span offers."""
    span_s = max(j.offset_s for j in jobs) - min(j.offset_s for j in jobs)
    return sum(j.gpus * j.duration_s for j in jobs) / (gpus * span_s)


# --- The presets -------------------------------------------------------------------------------------------------
SCHEDULER_PARAMETERS = ",".join(
    (
        "bf_interval=1",  # a backfill pass every second (default 30)
        "bf_resolution=1",  # plan starts and ends to the second (default 60)
        "bf_continue",  # carry on through the queue after releasing the locks
        "bf_window=60",  # plan an hour ahead (minutes): beyond the whole run's backlog
        "sched_interval=1",  # a full main-scheduler pass every second (default 60)
        "sched_min_interval=0",  # no throttle on the event-driven passes (submit, job end)
        "batch_sched_delay=0",  # schedule a batch job at once (default: up to 3 s later)
        "default_queue_depth=500",  # event-driven passes test the whole queue (default 100 jobs)
    )
)
_COMMON: dict[str, str] = {
    "PriorityType": "priority/multifactor",
    "PriorityCalcPeriod": "1",  # minutes: usage decayed and priorities recomputed every minute
    "PriorityDecayHalfLife": "5",  # minutes
    "PriorityMaxAge": "15",  # minutes
    "PriorityFavorSmall": "NO",
    "PriorityWeightJobSize": "100",
    "PriorityWeightPartition": "500",
    "PriorityWeightQOS": "0",
    "PriorityWeightAssoc": "0",
    "AccountingStorageEnforce": "associations",
    "SchedulerType": "sched/backfill",
    "SchedulerParameters": SCHEDULER_PARAMETERS,
    "MessageTimeout": "10",
    "KillWait": "2",
    "OverTimeLimit": "0",
    "MinJobAge": "3600",  # finished jobs stay visible to scontrol for the whole run
}
PRESETS: dict[str, dict[str, str]] = {
    "fairshare": {**_COMMON, "PriorityWeightFairshare": "10000", "PriorityWeightAge": "100"},
    "age": {**_COMMON, "PriorityWeightFairshare": "100", "PriorityWeightAge": "10000"},
    "builtin": {**_COMMON, "PriorityWeightFairshare": "10000", "PriorityWeightAge": "100",
                "SchedulerType": "sched/builtin"},
}  # fmt: skip


def preset_cluster(preset: str, base: ClusterSpec = CONTENTION_CLUSTER) -> ClusterSpec:
    """The experiment's cluster with the preset's slurm.conf settings."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    return replace(base, settings=tuple(PRESETS[preset].items()))


# --- A run -----------------------------------------------------------------------------------------------------
def _write_dumps(cluster: SlurmCluster, folder: Path) -> None:
    for name, command in DUMPS.items():
        (folder / name).write_text(cluster.run(*command))


class Snapshots:
    """A thread appending timestamped `sprio`, `sshare` and `squeue` outputs to their files every interval."""

    def __init__(self, cluster: SlurmCluster, folder: Path, interval_s: float = SNAPSHOT_INTERVAL_S):
        self.cluster, self.folder, self.interval_s = cluster, folder, interval_s
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="slurm-snapshots", daemon=True)
        self.count = 0

    def take(self) -> None:
        """Append one block to each snapshot file (a failed command leaves its error as the block)."""
        for name, command in SNAPSHOTS.items():
            epoch = time.time()
            try:
                text = self.cluster.run(*command, timeout_s=20)
            except (RuntimeError, OSError) as exc:
                text = f"# error: {exc}\n"
            with (self.folder / name).open("a") as out:
                out.write(f"{EPOCH_PREFIX}{epoch:.3f}\n{text}")
        self.count += 1

    def _loop(self) -> None:
        while not self.stopping.is_set():
            started = time.monotonic()
            self.take()
            self.stopping.wait(max(self.interval_s - (time.monotonic() - started), 0.2))

    def __enter__(self) -> Snapshots:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.thread.join(60)


def _job_options(job: Job) -> tuple[str, ...]:
    return ("--job-name", job.name, "-p", job.partition, "-A", job.account, "-N", "1", "-n", "1",
            "-c", str(job.gpus), f"--gres=gpu:{job.gpus}", f"--time={job.timelimit_min}")  # fmt: skip


def submit_all(cluster: SlurmCluster, jobs: Sequence[Job], t0_epoch: float, log: Path) -> dict[str, int]:
    """Submit each job at t0 + its offset (as its user) and log planned and actual times; job name -> id."""
    ids = {}
    with log.open("w") as out:
        out.write(",".join(SUBMIT_FIELDS) + "\n")
        for job in sorted(jobs, key=lambda j: j.offset_s):
            time.sleep(max(t0_epoch + job.offset_s - time.time(), 0))
            before = time.time()
            ids[job.name] = cluster.sbatch(job.user, *_job_options(job), script=f"sleep {job.duration_s}")
            after = time.time()
            row = (job.name, ids[job.name], job.offset_s, f"{before:.3f}", f"{after:.3f}", f"{before - t0_epoch:.3f}")
            out.write(",".join(map(str, row)) + "\n")
            out.flush()
    return ids


@dataclass
class RunInfo:
    """What run.json records beside the files: preset, seed, times (epoch seconds) and how the run went."""

    preset: str
    seed: int
    jobs: int
    t0_epoch: float
    cluster_up_s: float = 0.0
    run_s: float = 0.0
    snapshots: int = 0
    slurm_version: str = ""
    timezone: str = field(default_factory=lambda: time.strftime("%Z"))
    settings: dict[str, str] = field(default_factory=dict)


def _slurm_version(config_text: str) -> str:
    for line in config_text.splitlines():
        if line.startswith("SLURM_VERSION"):
            return line.split("=", 1)[1].strip()
    return "not in scontrol show config"


def _record(cluster: SlurmCluster, jobs: Sequence[Job], folder: Path, info: RunInfo, interval_s: float) -> None:
    _write_dumps(cluster, folder)
    info.slurm_version = _slurm_version((folder / "config.txt").read_text())
    info.t0_epoch = time.time() + START_DELAY_S
    started = time.monotonic()
    with Snapshots(cluster, folder, interval_s) as snapshots:
        submit_all(cluster, jobs, info.t0_epoch, folder / "submit.csv")
        cluster.wait_until_idle(IDLE_TIMEOUT_S)
        snapshots.stopping.set()
    snapshots.take()  # the final state: nothing pending, every usage charged
    info.snapshots = snapshots.count
    info.run_s = round(time.monotonic() - started, 1)
    export = cluster.sacct("2000-01-01T00:00:00", ",".join(SACCT_FIELDS), "-X")
    (folder / "sacct.txt").write_text(export)
    shutil.copyfile(cluster.root / "log" / "slurmctld.log", folder / "slurmctld.log")


def run_preset(preset: str, jobs: Sequence[Job], out: Path, seed: int = SEED,
               interval_s: float = SNAPSHOT_INTERVAL_S, base: ClusterSpec = CONTENTION_CLUSTER) -> Path:  # fmt: skip
    """Run the jobs on a fresh cluster with the preset's settings and write the recording folder out (written
    beside it first, renamed when complete)."""
    if out.exists():
        raise FileExistsError(f"{out} exists: a recording is never overwritten")
    spec = preset_cluster(preset, base)
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    info = RunInfo(preset, seed, len(jobs), 0.0, settings=dict(spec.settings))
    began = time.monotonic()
    with slurm_cluster(spec) as cluster:
        info.cluster_up_s = round(time.monotonic() - began, 1)
        _record(cluster, jobs, partial, info, interval_s)
    (partial / "jobs.json").write_text(json.dumps([asdict(j) for j in jobs], indent=1) + "\n")
    (partial / "run.json").write_text(json.dumps(asdict(info), indent=1) + "\n")
    partial.rename(out)
    return out


def next_folder(out_dir: Path, preset: str) -> Path:
    """out_dir/<preset>-<n> for the first n not yet used."""
    n = 1
    while (out_dir / f"{preset}-{n}").exists():
        n += 1
    return out_dir / f"{preset}-{n}"


# --- Reading a recording back ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Recorded:
    """One recorded job: the submitted job and what sacct says happened (times in epoch seconds, None if absent)."""

    job: Job
    job_id: int
    state: str
    submit_s: float
    start_s: float | None
    end_s: float | None
    timelimit_min: int | None
    priority: int | None

    @property
    def queue_s(self) -> float | None:
        """Start minus submit, for a job that started."""
        return None if self.start_s is None else self.start_s - self.submit_s


def _epoch(text: str) -> float | None:
    if text in ("", "Unknown", "None"):
        return None
    return datetime.fromisoformat(text).timestamp()


def _int_or_none(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def read_sacct(path: Path) -> list[dict[str, str]]:
    """The rows of a `sacct --parsable2` export (header first) as dicts; a short row names its line."""
    lines = [line for line in path.read_text().splitlines() if line]
    if not lines:
        raise ValueError(f"{path}: empty, expected a sacct --parsable2 header")
    header = lines[0].split("|")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("|")
        if len(cells) != len(header):
            raise ValueError(f"{path}, line {number}: {len(cells)} fields, the header has {len(header)}")
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def load_jobs(path: Path) -> list[Job]:
    """The job list of a recording's jobs.json."""
    return [Job(**row) for row in json.loads(path.read_text())]


def load_recording(folder: Path) -> list[Recorded]:
    """Every submitted job of a recording with its sacct row (matched by job name; a job sacct lacks is an error)."""
    rows = {row["JobName"]: row for row in read_sacct(folder / "sacct.txt")}
    out = []
    for job in load_jobs(folder / "jobs.json"):
        if job.name not in rows:
            raise ValueError(f"{folder / 'sacct.txt'}: job {job.name} of jobs.json is missing")
        row = rows[job.name]
        submit_s = _epoch(row["Submit"])
        if submit_s is None:
            raise ValueError(f"{folder / 'sacct.txt'}: job {job.name} has no Submit time")
        times = (submit_s, _epoch(row["Start"]), _epoch(row["End"]))
        limit, priority = _int_or_none(row["TimelimitRaw"]), _int_or_none(row["Priority"])
        out.append(Recorded(job, int(row["JobIDRaw"]), row["State"].split()[0], *times, limit, priority))
    return out


def read_blocks(path: Path) -> list[tuple[float, list[str]]]:
    """A snapshot file's blocks: (epoch, lines) in the order taken."""
    blocks: list[tuple[float, list[str]]] = []
    for line in path.read_text().splitlines():
        if line.startswith(EPOCH_PREFIX):
            blocks.append((float(line[len(EPOCH_PREFIX) :]), []))
        elif blocks:
            blocks[-1][1].append(line)
        else:
            raise ValueError(f"{path}, line 1: expected '{EPOCH_PREFIX}<seconds>' before the first block")
    return blocks


# --- Summaries and comparisons -------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSummary:
    """A run's figures: jobs, states, mean and median queue (jobs that started) and each account's mean queue."""

    name: str
    jobs: int
    states: dict[str, int]
    mean_queue_s: float
    median_queue_s: float
    account_mean_queue_s: dict[str, float]


def summarize(name: str, recorded: Sequence[Recorded]) -> RunSummary:
    """The run's figures (queues over the jobs that started)."""
    queues = [r.queue_s for r in recorded if r.queue_s is not None]
    accounts = sorted({r.job.account for r in recorded})
    per_account = {
        a: statistics.fmean(q for r in recorded if r.job.account == a and (q := r.queue_s) is not None)
        for a in accounts
    }
    states = dict(sorted(Counter(r.state for r in recorded).items()))
    return RunSummary(name, len(recorded), states, statistics.fmean(queues), statistics.median(queues), per_account)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of two paired sequences (ties in either count as neither concordant nor discordant)."""
    if len(x) != len(y) or len(x) < 2:
        raise ValueError("tau needs two paired sequences of at least two values")
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    return (concordant - discordant) / denominator if denominator else 0.0


@dataclass(frozen=True)
class Comparison:
    """Run b against run a: mean-queue spread (% of their average), start-order tau, per-account queue ratio b/a."""

    a: str
    b: str
    mean_queue_spread_pct: float
    start_order_tau: float
    account_queue_ratio: dict[str, float]


def compare(a: RunSummary, ra: Sequence[Recorded], b: RunSummary, rb: Sequence[Recorded]) -> Comparison:
    """Compare two runs of the same job list (jobs matched by name; tau over the jobs that started in both)."""
    starts_b = {r.job.name: r.start_s for r in rb}
    pairs = [
        (r.start_s, starts_b[r.job.name]) for r in ra if r.start_s is not None and starts_b.get(r.job.name) is not None
    ]
    tau = kendall_tau_b([p[0] for p in pairs], [p[1] for p in pairs])
    spread = abs(a.mean_queue_s - b.mean_queue_s) / ((a.mean_queue_s + b.mean_queue_s) / 2) * 100
    ratio = {acc: b.account_mean_queue_s[acc] / q for acc, q in a.account_mean_queue_s.items() if q}
    return Comparison(a.name, b.name, spread, tau, ratio)


def format_summary(s: RunSummary) -> str:
    """A small text table of one run."""
    states = ", ".join(f"{k} {v}" for k, v in s.states.items())
    lines = [f"{s.name}: {s.jobs} jobs ({states})",
             f"  queue (start - submit): mean {s.mean_queue_s:.1f} s, median {s.median_queue_s:.1f} s",
             "  account   mean queue (s)"]  # fmt: skip
    lines += [f"  {acc:<9} {q:>8.1f}" for acc, q in s.account_mean_queue_s.items()]
    return "\n".join(lines)


def format_comparison(c: Comparison) -> str:
    """A small text table of one comparison."""
    ratios = ", ".join(f"{acc} {r:.2f}x" for acc, r in c.account_queue_ratio.items())
    return (f"{c.b} vs {c.a}: mean-queue spread {c.mean_queue_spread_pct:.1f} %, start-order tau "
            f"{c.start_order_tau:.2f}; per-account mean queue {c.b}/{c.a}: {ratios}")  # fmt: skip


def report(folders: Sequence[Path]) -> str:
    """Every run's table, then each run compared with the first folder (the baseline)."""
    loaded = [(f.name, load_recording(f)) for f in folders]
    summaries = [summarize(name, rec) for name, rec in loaded]
    parts = [format_summary(s) for s in summaries]
    base, base_rec = summaries[0], loaded[0][1]
    parts += [
        format_comparison(compare(base, base_rec, s, rec))
        for s, (_, rec) in zip(summaries[1:], loaded[1:], strict=True)
    ]
    return "\n\n".join(parts)


def describe_jobs(jobs: Sequence[Job], gpus: int) -> str:
    """The job list in a few lines: counts by user, account, partition, GPUs, TIMEOUT jobs, oversubscription."""
    span_s = max(j.offset_s for j in jobs) - min(j.offset_s for j in jobs)
    short = [j for j in jobs if j.timelimit_min * 60 < j.duration_s]
    per_job = Counter(j.gpus for j in jobs)
    return "\n".join(
        [
            f"{len(jobs)} jobs over {span_s:.0f} s; durations {min(j.duration_s for j in jobs)}-"
            f"{max(j.duration_s for j in jobs)} s; {len(short)} with a limit below their duration",
            f"users {dict(Counter(j.user for j in jobs))}; accounts {dict(Counter(j.account for j in jobs))}",
            f"partitions {dict(Counter(j.partition for j in jobs))}; GPUs {dict(sorted(per_job.items()))}",
            f"limits (min) {dict(sorted(Counter(j.timelimit_min for j in jobs).items()))}",
            f"oversubscription: {oversubscription(jobs, gpus):.2f}x (GPU-seconds asked / ({gpus} GPUs x span))",
        ]
    )


@contextmanager
def _timed(what: str) -> Iterator[None]:
    began = time.monotonic()
    print(f"{time.strftime('%H:%M:%S')} {what} ...", flush=True)
    yield
    print(f"{time.strftime('%H:%M:%S')} {what}: done in {time.monotonic() - began:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    """The command line: `jobs`, `run PRESET...` and `report FOLDER...`."""
    parser = argparse.ArgumentParser(prog="python -m tests.slurm.contention", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=SEED, help=f"the job list's seed (default {SEED})")
    parser.add_argument("--small", action="store_true", help="the suite's short job list (14 jobs, about a minute)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("jobs", help="print the job list's make-up and oversubscription")
    run = commands.add_parser("run", help="run presets one after another, each on a fresh cluster (root, Slurm)")
    run.add_argument("presets", nargs="+", choices=sorted(PRESETS), help="presets to run, in order")
    run.add_argument("--out", type=Path, required=True, help="folder for the recordings (<preset>-<n>)")
    run.add_argument("--interval", type=float, default=SNAPSHOT_INTERVAL_S, help="seconds between snapshots")
    rep = commands.add_parser("report", help="tables of recorded runs, each compared with the first")
    rep.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args(argv)
    jobs = make_jobs(args.seed, SMALL_DESIGN if args.small else FULL_DESIGN)
    if args.command == "jobs":
        print(describe_jobs(jobs, CONTENTION_CLUSTER.gpus))
    elif args.command == "run":
        print(describe_jobs(jobs, CONTENTION_CLUSTER.gpus), flush=True)
        done = []
        for preset in args.presets:
            folder = next_folder(args.out, preset)
            with _timed(f"run {folder.name}"):
                done.append(run_preset(preset, jobs, folder, args.seed, args.interval))
        print(report(done))
    else:
        print(report(args.folders))
    return 0


if __name__ == "__main__":
    sys.exit(main())
