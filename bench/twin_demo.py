"""The twin against the demo's record (issue #39 item 3): Earth in July 2020, first as the What-if runs it (the
twin calibrated from the record, sim.slurm.calibrate, on nodes or on pools as fits the record best, as the baseline,
and QSSF measured against it with the band of the twin's own error), then replayed by the `slurm` policy under
candidate calibrations of a trace without a scheduler configuration, each beside the record's mean and median queue
and GPU utilisation, with the issue's targets (mean queue within 1.25x, utilisation within 1.05x).

    .venv/bin/python bench/twin_demo.py [--dataset helios-synth]

Candidates (each VC a partition, priority/basic = FIFO, sched/backfill with Slurm's defaults):
  nodes        the VC's nodes of 8 GPUs (sim.slurm.calibrate.vc_cluster), no time limits (the product's calibration
               adds per-user caps, which change nothing here)
  nodes+q90    the same, each job's limit the larger of its run time and its user's 90th-percentile run time
  pool         each VC one pool of its GPUs (placement by GPU count, as the demo's generator places), no limits
  pool+q90     the pool with the q90 limits
Utilisation is GPU-seconds run inside the window over the capacity's, for the record and each replay alike.

Last, one model with drawn waits: each candidate schedules the jobs as submitted (the generator's part), the record
becomes its start times with the demo's recorded waits put before them (submit = start - wait, as the generator
records them), and the same candidate replays that record: what remains is the drawn waits' share of the gap.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # this folder's name would shadow the `sim` package

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from analytics.slurm_config import NodeSpec, PartitionSpec, SlurmConfig  # noqa: E402
from bench.twin_speed import load_workload  # noqa: E402
from sim.model import GPUS_PER_NODE, SimConfig, Workload  # noqa: E402
from sim.scenario import ScenarioConfig, open_request, run_request  # noqa: E402
from sim.slurm import warm  # noqa: E402
from sim.slurm.calibrate import CPUS_PER_NODE, vc_cluster  # noqa: E402
from sim.slurm.workload import simulate_slurm  # noqa: E402

CLUSTER, START, END = "Earth", datetime(2020, 7, 1), datetime(2020, 8, 1)
TARGET_QUEUE_X, TARGET_UTIL_X = 1.25, 1.05
LIMIT_QUANTILE = 0.9


def utilisation_pct(start_s: np.ndarray, end_s: np.ndarray, gpus: np.ndarray, span_s: int, capacity: int) -> float:
    """GPU-seconds of the jobs inside [0, span_s) over capacity x span_s, in percent (jobs with start -1 left out)."""
    ran = start_s >= 0
    inside = np.clip(end_s[ran], 0, span_s) - np.clip(start_s[ran], 0, span_s)
    return 100.0 * float((inside * gpus[ran]).sum()) / (capacity * span_s)


def q90_limits(w: Workload) -> np.ndarray:
    """Each job's time limit: the larger of its run time and its user's LIMIT_QUANTILE run time (at least 60 s)."""
    frame = pl.DataFrame({"user": w.scheduler.user, "run_s": w.duration_s})
    user_q = frame.select(pl.col("run_s").quantile(LIMIT_QUANTILE).over("user"))["run_s"].to_numpy()
    return np.maximum(np.maximum(w.duration_s, user_q), 60).astype(np.int64)


def pooled(w: Workload) -> SlurmConfig:
    """Each VC one node holding all its GPUs (no fragmentation), a partition over it."""
    sizes = zip(w.vc_names, w.vc_nodes, strict=True)
    nodes = tuple(NodeSpec(name, n * GPUS_PER_NODE, CPUS_PER_NODE * n) for name, n in sizes)
    parts = tuple(PartitionSpec(name, (i,)) for i, name in enumerate(w.vc_names))
    return SlurmConfig(nodes=nodes, partitions=parts)


def prepared(w: Workload, limit_s: np.ndarray | None, pool: bool) -> Workload:
    """w with every job's time limit set (None: none), and on a pool without the node counts the trace recorded."""
    limits = np.full(len(w), -1, dtype=np.int64) if limit_s is None else limit_s
    nodes = None if pool else w.scheduler.nodes
    return dataclasses.replace(w, scheduler=dataclasses.replace(w.scheduler, timelimit_s=limits, nodes=nodes))


def figures(queue_s: np.ndarray, util_pct: float) -> str:
    """Mean and median queue and utilisation, in words."""
    return f"mean queue {queue_s.mean():9,.1f} s  median {np.median(queue_s):7,.1f} s  utilisation {util_pct:5.1f} %"


def product_scenario(dataset: str) -> None:
    """The What-if's scenario on the window: the calibrated twin's replay against the record, and QSSF against it."""
    began = time.perf_counter()
    last_day = END - timedelta(days=1)  # the scenario's end day is inclusive
    config = ScenarioConfig(dataset=dataset, cluster=CLUSTER, start=f"{START:%Y-%m-%d}", end=f"{last_day:%Y-%m-%d}")
    result = run_request(open_request(dataclasses.replace(config, policies=("qssf",))))
    took_s = time.perf_counter() - began
    print(f"What-if (twin {result.twin['source']}, {took_s:.1f} s); jobs that started in the window:")
    print("  " + next((r for r in result.twin["rules"] if r.startswith("placement")), "placement: not chosen"))
    for line in result.replay["lines"]:
        ratio = "" if line["ratio"] is None else f"  {line['ratio']:.2f}x"
        print(f"  {line['metric']:<24} recorded {line['recorded']!s:>9}  twin {line['replayed']!s:>9}{ratio}")
    queue_x, util_x = result.replay["lines"][0]["ratio"], result.replay["lines"][2]["ratio"]
    within = abs(np.log(queue_x)) <= np.log(TARGET_QUEUE_X) and abs(np.log(util_x)) <= np.log(TARGET_UTIL_X)
    verdict = "met" if within else "not met"
    print(f"  target: mean queue within {TARGET_QUEUE_X}x, utilisation within {TARGET_UTIL_X}x: {verdict}")
    row = result.summary.filter(pl.col("scheme") == "qssf").row(0, named=True)
    print(
        f"  QSSF against the twin: mean queue {row['avg_queue_x_vs_baseline']:.2f}x "
        f"({row['avg_queue_x_vs_baseline_lo']:.2f}-{row['avg_queue_x_vs_baseline_hi']:.2f}x within the twin's error), "
        f"utilisation {row['gpu_util_pp_vs_baseline']:+.1f} points "
        f"({row['gpu_util_pp_vs_baseline_lo']:+.1f} to {row['gpu_util_pp_vs_baseline_hi']:+.1f})"
    )


def main(argv: list[str] | None = None) -> int:
    """Print the What-if's figures, then the record's and each candidate's against them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="helios-synth")
    args = parser.parse_args(argv)
    warm.main()
    product_scenario(args.dataset)
    w = load_workload(args.dataset, CLUSTER, START, END)
    span_s, capacity = int((END - START).total_seconds()), sum(w.vc_nodes) * GPUS_PER_NODE
    known = w.recorded_start_s >= 0
    rec_queue = (w.recorded_start_s - w.submit_s)[known]
    rec_util = utilisation_pct(w.recorded_start_s, w.recorded_start_s + w.duration_s, w.gpu_num, span_s, capacity)
    print(f"{CLUSTER} {START:%Y-%m-%d}..{END:%Y-%m-%d}: {len(w):,} GPU jobs, {capacity:,} GPUs")
    print(f"{'record':<10} {figures(rec_queue, rec_util)}")
    limits = q90_limits(w)
    candidates = {
        "nodes": (vc_cluster(w, GPUS_PER_NODE), None, False),
        "nodes+q90": (vc_cluster(w, GPUS_PER_NODE), limits, False),
        "pool": (pooled(w), None, True),
        "pool+q90": (pooled(w), limits, True),
    }
    for name, (config, limit_s, pool) in candidates.items():
        began = time.perf_counter()
        result = simulate_slurm(config, SimConfig(policy="slurm"), prepared(w, limit_s, pool))
        rows = np.concatenate([v.rows for v in result.vcs.values()])
        start_s = np.concatenate([v.start_s for v in result.vcs.values()])
        end_s = np.concatenate([v.end_s for v in result.vcs.values()])
        queue = np.concatenate([v.queue_s[v.start_s >= 0] for v in result.vcs.values()])
        util = utilisation_pct(start_s, end_s, w.gpu_num[rows], span_s, capacity)
        queue_x, util_x = queue.mean() / rec_queue.mean(), util / rec_util
        within = abs(np.log(queue_x)) <= np.log(TARGET_QUEUE_X) and abs(np.log(util_x)) <= np.log(TARGET_UTIL_X)
        print(
            f"{name:<10} {figures(queue, util)}  queue {queue_x:5.2f}x  utilisation {util_x:5.3f}x  "
            f"({'within' if within else 'outside'} {TARGET_QUEUE_X}x / {TARGET_UTIL_X}x; "
            f"{time.perf_counter() - began:.1f} s)"
        )
    drawn_waits(w, candidates, span_s, capacity)
    return 0


def starts_ends(config: SlurmConfig, w: Workload) -> tuple[np.ndarray, np.ndarray]:
    """Each job's start and end second under the `slurm` policy (-1: never started), in w's row order."""
    result = simulate_slurm(config, SimConfig(policy="slurm"), w)
    start, end = np.full(len(w), -1, dtype=np.int64), np.full(len(w), -1, dtype=np.int64)
    for v in result.vcs.values():
        start[v.rows], end[v.rows] = v.start_s, v.end_s
    return start, end


def recorded_as_drawn(w: Workload, start_s: np.ndarray, wait_s: np.ndarray) -> Workload:
    """w with start_s as its record and submit = start - wait (at least 0), in submit order again."""
    started = start_s >= 0
    submit = np.maximum(np.where(started, start_s - wait_s, w.submit_s), 0)
    order = np.lexsort((np.arange(len(w)), submit))
    cols = {f.name: getattr(w.scheduler, f.name) for f in dataclasses.fields(w.scheduler)}
    scheduler = dataclasses.replace(w.scheduler, **{k: None if v is None else v[order] for k, v in cols.items()})
    arrays = ("job_id", "vc_index", "duration_s", "gpu_num", "predicted_s")
    return dataclasses.replace(
        w,
        submit_s=submit[order],
        recorded_start_s=start_s[order],
        scheduler=scheduler,
        **{k: getattr(w, k)[order] for k in arrays},
    )


def drawn_waits(w: Workload, candidates: dict, span_s: int, capacity: int) -> None:
    """Each candidate without limits as both generator and twin, with the demo's drawn waits recorded."""
    wait_s = np.where(w.recorded_start_s >= 0, w.recorded_start_s - w.submit_s, 0)
    print("one model, drawn waits (the candidate schedules, the demo's waits are recorded before its starts):")
    for name, (config, limit_s, pool) in candidates.items():
        if limit_s is not None:
            continue
        base = prepared(w, None, pool)
        made = recorded_as_drawn(base, starts_ends(config, base)[0], wait_s)
        start, end = starts_ends(config, made)
        known = made.recorded_start_s >= 0
        rec_queue = (made.recorded_start_s - made.submit_s)[known]
        queue = (start - made.submit_s)[start >= 0]
        rec_util = utilisation_pct(made.recorded_start_s, made.recorded_start_s + made.duration_s, made.gpu_num,
                                   span_s, capacity)  # fmt: skip
        util = utilisation_pct(start, end, made.gpu_num, span_s, capacity)
        print(
            f"{name:<10} record {figures(rec_queue, rec_util)}\n{'':<10} twin   {figures(queue, util)}  "
            f"queue {queue.mean() / rec_queue.mean():5.2f}x  utilisation {util / rec_util:5.3f}x"
        )


if __name__ == "__main__":
    raise SystemExit(main())
