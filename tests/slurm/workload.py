"""The real-Slurm scenario: two batches of short jobs as two users, exported, ingested, refreshed, checked.

Batch 1 covers GPU counts 0-8, exits 0/1/3, a cancelled running job, a cancelled pending job, a job past its time
limit, a job array, a job with steps, jobs queueing behind others and a job submitted to two partitions. It is
exported (`sacct --parsable2`, steps included) while two of its jobs still run, and ingested; batch 2 follows, and
once every job is final `helios sync slurm` refreshes the dataset (twice: the second run must change nothing).
"""

from __future__ import annotations

import io
import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from analytics import queries, store
from analytics.filters import NO_FILTER
from tests.slurm.cluster import ACCOUNTS, CLUSTER, SlurmCluster

U1, U2 = sorted(ACCOUNTS)  # "daemon", "nobody"


@dataclass(frozen=True)
class Spec:
    """One submission: who, where, how many GPUs, what it runs and how it must end."""

    label: str
    user: str
    partition: str
    gpus: int
    script: str
    state: str
    options: tuple[str, ...] = ()
    elements: int = 1  # array elements (jobs) it makes
    cancel: str = ""  # "running": cancel once it runs; "pending": cancel while it waits


def _sleep(s: int, code: int = 0) -> str:
    return f"sleep {s}; exit {code}"


BATCH_1: tuple[Spec, ...] = (
    Spec("timeout", U1, "vcA", 0, "sleep 600", "TIMEOUT", ("--time=1",)),
    Spec("long", U2, "vcC", 1, _sleep(45), "COMPLETED"),
    Spec("cancel-running", U1, "vcA", 2, "sleep 600", "CANCELLED", cancel="running"),
    Spec("cancel-pending", U2, "vcB", 8, _sleep(1), "CANCELLED", cancel="pending"),  # 8 GPUs: waits for "long"
    Spec("cancel-begin", U1, "vcC", 1, _sleep(1), "CANCELLED", ("--begin=now+3600",), cancel="pending"),
    Spec("exit1", U2, "vcB", 1, _sleep(1, 1), "FAILED"),
    Spec("exit3", U1, "vcC", 0, "exit 3", "FAILED"),
    Spec("g1", U1, "vcA", 1, _sleep(2), "COMPLETED"),
    Spec("g2", U2, "vcB", 2, _sleep(2), "COMPLETED"),
    Spec("g3", U1, "vcC", 3, _sleep(2), "COMPLETED"),
    Spec("g4", U2, "vcA", 4, _sleep(5), "COMPLETED"),
    Spec("g2b", U1, "vcB", 2, _sleep(2), "COMPLETED"),
    Spec("g5", U2, "vcC", 5, _sleep(2), "COMPLETED"),
    Spec("g6", U1, "vcA", 6, _sleep(2), "COMPLETED"),
    Spec("g7", U2, "vcB", 7, _sleep(2), "COMPLETED"),
    Spec("arr", U2, "vcC", 1, _sleep(2), "COMPLETED", ("--array=0-3",), elements=4),
    Spec("steps", U1, "vcA", 1, "srun -n1 sleep 1; srun -n1 true; exit 0", "COMPLETED"),
    Spec("two-partitions", U2, "vcB,vcC", 2, _sleep(2), "COMPLETED"),
    *(Spec(f"cpu{i}", (U1, U2)[i % 2], ("vcA", "vcB")[i % 2], 0, _sleep(1), "COMPLETED") for i in range(8)),
)
STILL_RUNNING_AT_FIRST_EXPORT = ("timeout", "long")
BATCH_2: tuple[Spec, ...] = (
    Spec("b2-g2", U1, "vcA", 2, _sleep(2), "COMPLETED"),
    Spec("b2-fail", U2, "vcC", 1, _sleep(1, 1), "FAILED"),
    Spec("b2-cpu", U1, "vcB", 0, _sleep(1), "COMPLETED"),
    Spec("b2-arr", U2, "vcA", 1, _sleep(1), "COMPLETED", ("--array=0-1",), elements=2),
    Spec("b2-g8", U2, "vcA", 8, _sleep(1), "COMPLETED"),
    Spec("b2-g3", U1, "vcC", 3, _sleep(1, 3), "FAILED"),
    Spec("b2-cpu2", U2, "vcB", 0, _sleep(1), "COMPLETED"),
)


@dataclass
class Submitted:
    """The specs submitted and the job id sbatch gave each."""

    ids: dict[str, int] = field(default_factory=dict)
    specs: dict[str, Spec] = field(default_factory=dict)


def submit(cluster: SlurmCluster, specs: tuple[Spec, ...], into: Submitted) -> None:
    """Submit specs in order (cancelling those that must be cancelled) and record their ids."""
    for spec in specs:
        options = ["--job-name", spec.label, "-p", spec.partition, "-c", "1", *spec.options]
        if spec.gpus:
            options.append(f"--gres=gpu:{spec.gpus}")
        into.ids[spec.label] = cluster.sbatch(spec.user, *options, script=spec.script)
        into.specs[spec.label] = spec
        if spec.cancel:
            cluster.wait_for_state(str(into.ids[spec.label]), spec.cancel.upper())
            time.sleep(1)
            cluster.run("scancel", str(into.ids[spec.label]))


def wait_until_only(cluster: SlurmCluster, submitted: Submitted, labels: tuple[str, ...], timeout_s: float = 120):
    """Wait until every active job is one of labels, in slurmctld and then in the accounting that sacct exports."""
    allowed = {str(submitted.ids[label]) for label in labels}
    deadline = time.monotonic() + timeout_s
    while set(cluster.states()) - allowed:
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs still active after {timeout_s:g} s: {cluster.states()}")
        time.sleep(1)
    cluster.wait_until_accounted(allowed, max(deadline - time.monotonic(), 30))


def expected_counts(specs: list[Spec]) -> dict[str, Counter]:
    """Jobs per state, user, VC and GPU count that the specs make (array elements counted one by one)."""
    out: dict[str, Counter] = {"state": Counter(), "user": Counter(), "gpus": Counter()}
    for spec in specs:
        out["state"][spec.state] += spec.elements
        out["user"][spec.user] += spec.elements
        out["gpus"][spec.gpus] += spec.elements
    return out


def capture(cluster: SlurmCluster, folder: Path) -> dict[str, Path]:
    """The first export in its three shapes, and the node list in two, written to folder."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "sacct": cluster.sacct(),
        "sacct_all": cluster.sacct("2000-01-01T00:00:00", "ALL"),
        "scontrol_nodes": cluster.run("scontrol", "show", "nodes", "--oneliner"),
        "sinfo": cluster.run("sinfo", "-N", "-o", "%N|%P|%G"),
    }
    paths = {}
    for name, text in files.items():
        paths[name] = folder / f"{name}.txt"
        paths[name].write_text(text)
    return paths


@dataclass
class Outcome:
    """What the scenario produced: the jobs after the first ingest and after the refresh, the refreshes' output."""

    submitted: Submitted
    first: pl.DataFrame
    final: pl.DataFrame
    summary: pl.DataFrame
    vc_gpus: pl.DataFrame
    outputs: list[str]
    versions: list[str]
    exports: dict[str, Path]
    seconds: float

    def report(self) -> str:
        """A short text of the outcome, for the demo."""
        states = dict(Counter(self.final["state"].to_list()))
        return "\n".join(
            [
                *self.outputs,
                f"final dataset: {self.final.height} jobs, states {states}",
                self.summary.select("id", "job_num", "gpu_job_num", "complete_rate", "fail_rate").__repr__(),
                f"scenario took {self.seconds:.0f} s",
            ]
        )


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def helios(*argv: str) -> str:
    """Run the helios command line in this process and return its stdout (raising on a non-zero exit)."""
    import cli

    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(list(argv))
    if code:
        raise RuntimeError(f"helios {' '.join(argv)} exited {code}: {out.getvalue()}")
    return out.getvalue()


def run_scenario(cluster: SlurmCluster, exports: Path, data_dir: Path, name: str = "slurm-real") -> Outcome:
    """Both batches: export and ingest after the first (two jobs still running), sync twice after the second."""
    t0 = time.monotonic()
    submitted = Submitted()
    submit(cluster, BATCH_1, submitted)
    wait_until_only(cluster, submitted, STILL_RUNNING_AT_FIRST_EXPORT)
    files = capture(cluster, exports)
    with _environment(**{**cluster.env, "HELIOS_DATA_DIR": str(data_dir)}):
        outputs = [helios("ingest", str(files["sacct"]), "--format", "slurm", "--name", name, "--cluster", CLUSTER,
                          "--capacity", str(files["scontrol_nodes"]), "--quiet")]  # fmt: skip
        first = store.open_dataset(name)
        first_jobs = first.jobs().collect()
        submit(cluster, BATCH_2, submitted)
        cluster.wait_until_idle()
        versions = [first.version]
        for keep in ("sync.txt", "sync-again.txt"):
            sync = ("sync", "slurm", "--name", name, "--since", "1d", "--keep-export", str(exports / keep), "--quiet")
            outputs.append(helios(*sync))
            versions.append(store.open_dataset(name).version)
        final = store.open_dataset(name)
        summary = queries.QUERIES["cluster_summary"](final, NO_FILTER)
        outcome = Outcome(
            submitted, first_jobs, final.jobs().collect(), summary, final.vc_gpus(), outputs, versions, files, 0.0
        )
    outcome.seconds = time.monotonic() - t0
    return outcome


def demo(cluster: SlurmCluster, out: Path) -> None:
    """Run the scenario with its exports in out and its dataset in out/data, and print what it found."""
    print(run_scenario(cluster, out, out / "data").report())
