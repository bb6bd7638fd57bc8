"""Benchmark every study query on a full-scale dataset and check the performance budgets.

Usage: python bench/queries.py [--dataset helios-synth] [--repeat 5]
Prints the one-time load of the in-memory column store, then one line per query (cold s = first call, warm s =
median of --repeat further calls, cpu s = median process CPU time of those calls over all threads, rows), the
per-minute utilisation of the largest cluster, and the peak RSS of the process; exits 1 when a budget is missed.
Budgets: each study query <= 0.3 s warm; per-minute series <= 2 s warm; peak RSS <= 4 GB.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polars as pl  # noqa: E402

from analytics import queries, store
from analytics.filters import JobFilter  # noqa: E402
from analytics.queries import colstore

QUERY_BUDGET_S = 0.3
MINUTE_SERIES_BUDGET_S = 2.0
PEAK_RSS_BUDGET_MB = 4096
MINUTE_SERIES = {"utilization_minutes"}
VARIANTS: dict[str, list[dict]] = {
    "duration_cdf": [{"kind": "gpu"}, {"kind": "cpu"}],
    "queue_cdf": [{"kind": "gpu"}],
    "gpu_num_cdf": [{"weight": "jobs"}, {"weight": "gpu_time"}],
    "user_concentration": [{"metric": m} for m in queries.CONCENTRATION_METRICS],
    "utilization_resampled": [{"every": "1h"}],
}


def timed(fn: Callable[[], pl.DataFrame], repeat: int) -> tuple[float, float, float, int]:
    """Cold wall time, median warm wall time and median CPU time over `repeat` further calls, and the row count."""
    t0 = time.perf_counter()
    rows = fn().height
    cold = time.perf_counter() - t0
    walls, cpus = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return cold, statistics.median(walls), statistics.median(cpus), rows


def load_column_store(ds: store.Dataset) -> None:
    """Load the dataset's in-memory column store once and print its wall and CPU time."""
    colstore.clear()
    t0, c0 = time.perf_counter(), time.process_time()
    colstore.columns(ds)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"{'column store load (one-time, per process)':<44} {wall:8.3f} {'':>8} {cpu:7.3f}", flush=True)


def largest_cluster(ds: store.Dataset) -> str:
    """The cluster with the most jobs."""
    counts = ds.jobs().group_by("cluster").len().sort("len", descending=True).collect()
    return str(counts["cluster"][0])


def peak_rss_mb() -> float:
    """Peak resident set size of this process, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(label: str, times: tuple[float, float, float, int], budget: float) -> bool:
    """Print one result line and return whether its warm wall time met the budget."""
    cold, warm, cpu, rows = times
    ok = warm <= budget
    line = f"{label:<44} {cold:8.3f} {warm:8.3f} {cpu:7.3f} {rows:>9} {budget:6.1f}  {'ok' if ok else 'MISS'}"
    print(line, flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and return the exit code (1 when a budget is missed)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=store.DEFAULT_DATASET)
    parser.add_argument("--repeat", type=int, default=5, help="warm calls per query (the median is reported)")
    args = parser.parse_args(argv)
    try:
        ds = store.open_dataset(args.dataset)
    except store.DatasetError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    n_jobs = ds.jobs().select(pl.len()).collect().item()
    print(f"dataset {ds.name}: {n_jobs:,} jobs, clusters {', '.join(ds.clusters)}")
    load = os.getloadavg()[0]
    print(f"load average {load:.2f} on {os.cpu_count()} CPUs (other processes slow the wall times down)")
    print(f"{'query':<44} {'cold s':>8} {'warm s':>8} {'cpu s':>7} {'rows':>9} {'budget':>6}")
    load_column_store(ds)
    all_ok = True
    for name, fn in queries.QUERIES.items():
        for opts in VARIANTS.get(name, [{}]):
            label = name + "".join(f" {k}={v}" for k, v in opts.items())
            times = timed(lambda fn=fn, opts=opts: fn(ds, **opts), args.repeat)
            budget = MINUTE_SERIES_BUDGET_S if name in MINUTE_SERIES else QUERY_BUDGET_S
            all_ok &= report(label, times, budget)
    big = JobFilter(clusters=(largest_cluster(ds),))
    times = timed(lambda: queries.utilization_minutes(ds, big), args.repeat)
    all_ok &= report(f"utilization_minutes cluster={big.clusters[0]}", times, MINUTE_SERIES_BUDGET_S)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    rss = peak_rss_mb()
    rss_ok = rss <= PEAK_RSS_BUDGET_MB
    print(f"peak RSS {rss:.0f} MiB (budget {PEAK_RSS_BUDGET_MB} MiB) {'ok' if rss_ok else 'MISS'}")
    all_ok &= rss_ok
    print("all budgets met" if all_ok else "BUDGET MISSED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
