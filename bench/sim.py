"""Simulator speed: artifact-sized trace, a six-month Saturn-sized cluster, scaling (the demo generator's queue is
timed by bench/synth.py).

Run: `.venv/bin/python bench/sim.py [--dataset helios-synth] [--cluster Saturn] [--quick]`. Prints wall time,
jobs/s and peak RSS. The Saturn cluster comes from the named dataset when it exists, else from
`analytics.synth.build.generate` at scale 1 (the bundled dataset's generator).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

# NOTE: run as a script, this file's folder comes first on sys.path and its name would shadow the `sim` package.
sys.path[0] = str(Path(__file__).resolve().parents[1])

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from sim import engine, estimators, workload  # noqa: E402
from sim.model import SimConfig, Workload  # noqa: E402


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def artifact_sized_trace(copies: int = 1, seed: int = 0) -> Workload:
    """A congested 3,000-job, 3-day, 4-VC trace; `copies` > 1 adds independent copies on further VCs."""
    rng = np.random.default_rng(seed)
    n, span_s = 3000, 3 * 86_400
    submit = np.sort(rng.integers(0, span_s, n))
    dur = rng.lognormal(6.5, 1.8, n).astype(np.int64)
    gpu = rng.choice([1, 1, 1, 2, 4, 8, 8, 16, 32], n)
    vc = rng.integers(0, 4, n).astype(np.int32)
    cat = np.concatenate
    return Workload(
        job_id=np.arange(n * copies, dtype=np.int64),
        vc_index=cat([vc + 4 * k for k in range(copies)]).astype(np.int32),
        submit_s=np.tile(submit, copies).astype(np.int64),
        duration_s=cat([dur] * copies),
        gpu_num=cat([gpu] * copies).astype(np.int64),
        predicted_s=cat([dur] * copies).astype(np.float64),
        vc_names=tuple(f"vc{k}" for k in range(4 * copies)),
        vc_nodes=(4, 8, 8, 16) * copies,
    )


def timed(config: SimConfig, w: Workload, repeat: int = 1) -> tuple[float, float]:
    """Median wall time in s of `repeat` runs and the mean queueing delay (s) of the placed jobs."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        res = engine.run(config, w)
        times.append(time.perf_counter() - t)
    queue = np.concatenate([vc.queue_s[vc.start_s >= 0] for vc in res.vcs.values()])
    return statistics.median(times), float(queue.mean())


def bench_artifact_size() -> None:
    """The artifact needs 47 s for FIFO on this size; print ours for every policy."""
    w = artifact_sized_trace()
    print(f"## artifact-sized trace: {len(w)} jobs, 3 days, 4 VCs ({sum(w.vc_nodes)} nodes)")
    for policy in ("fifo", "sjf", "qssf", "srtf", "las"):
        wall, queue_s = timed(SimConfig(policy=policy), w, repeat=3)
        print(f"{policy:<5} wall {wall:.3f} s  ({len(w) / wall:,.0f} jobs/s)  mean queue {queue_s:,.0f} s")


def load_cluster(dataset: str, cluster: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Jobs and VC capacities of one cluster from the dataset, or from the synthetic generator."""
    from analytics.store import DatasetError, open_dataset

    try:
        ds = open_dataset(dataset)
        return ds.jobs().filter(pl.col("cluster") == cluster).collect(), ds.vc_gpus()
    except DatasetError:
        from analytics.synth.build import SynthParams, generate

        print(f"(dataset {dataset!r} not found: generating the synthetic trace at scale 1)")
        jobs, vc_gpus = generate(SynthParams(scale=1.0))
        return jobs.filter(pl.col("cluster") == cluster), vc_gpus


def bench_cluster(jobs: pl.DataFrame, vc_gpus: pl.DataFrame, cluster: str, policies: list[str]) -> None:
    """Whole-trace runs of one cluster for the given policies."""
    win = workload.select_window(jobs, cluster)
    last_day = win.jobs.get_column("submit_time").max().date()
    nodes = workload.vc_nodes_on(vc_gpus, cluster, last_day)
    t = time.perf_counter()
    pred = estimators.predict("noisy-oracle", win.history, win.jobs)
    est_s = time.perf_counter() - t
    w = workload.to_workload(win, nodes, pred)
    print(f"## {cluster}: {len(w):,} GPU jobs, {win.start} .. {win.end}, {sum(w.vc_nodes)} nodes (sizes of {last_day})")
    print(f"noisy-oracle estimator {est_s:.2f} s (the six months have no earlier history to learn from)")
    for policy in policies:
        t = time.perf_counter()
        res = engine.run(SimConfig(policy=policy), w)
        wall = time.perf_counter() - t
        print(
            f"{policy:<5} wall {wall:.1f} s  ({len(w) / wall:,.0f} jobs/s)  unplaceable {res.unplaceable}  "
            f"peak RSS {peak_rss_mb():,.0f} MiB"
        )
    bench_scaling(w)


def bench_scaling(w: Workload) -> None:
    """Wall time of FIFO on the first 1/4, 1/2 and all of the cluster's jobs."""
    print("## scaling (FIFO, the first 1/4, 1/2 and all of the cluster's jobs; later months are busier)")
    n = len(w)
    for frac in (4, 2, 1):
        k = n // frac
        part = Workload(**{**w.__dict__, **{f: getattr(w, f)[:k] for f in _ARRAYS}, "recorded_start_s": None})
        wall, _ = timed(SimConfig(policy="fifo"), part)
        print(f"{k:>9,} jobs  wall {wall:.2f} s  ({k / wall:,.0f} jobs/s)")


_ARRAYS = ("job_id", "vc_index", "submit_s", "duration_s", "gpu_num", "predicted_s")


def main() -> None:
    """Run the benchmarks and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", default="helios-synth")
    parser.add_argument("--cluster", default="Saturn")
    parser.add_argument("--quick", action="store_true", help="only the artifact-sized trace")
    args = parser.parse_args()
    bench_artifact_size()
    print("## scaling 1x, 2x, 4x: 8, 16, 32 copies of that trace, each on its own 4 VCs (same load per VC)")
    for copies in (8, 16, 32):
        w = artifact_sized_trace(copies)
        walls = [timed(SimConfig(policy=p), w, repeat=3)[0] for p in ("fifo", "qssf", "srtf")]
        print(f"{len(w):>9,} jobs  wall fifo {walls[0]:.3f} s  qssf {walls[1]:.3f} s  srtf {walls[2]:.3f} s")
    if args.quick:
        return
    jobs, vc_gpus = load_cluster(args.dataset, args.cluster)
    bench_cluster(jobs, vc_gpus, args.cluster, ["fifo", "qssf", "srtf"])


if __name__ == "__main__":
    main()
