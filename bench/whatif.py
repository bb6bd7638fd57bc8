"""Benchmark the what-if runner (issue #6 item 5): a one-month single-cluster scenario with four policies.

Budget: <= 10 s from reading the dataset to the full result (window, predictions, four simulations,
records, CDFs, timelines, comparison table), with progress reported at least every second; the same
scenario again comes from the results cache at once. Needs the bundled dataset at scale 1 (`helios demo`).
Usage: python bench/whatif.py [--dataset helios-synth] [--cluster Earth] [--start 2020-07-01]
       [--end 2020-07-31] [--policies fifo,sjf,srtf,qssf] [--estimator history] [--repeat 1] [--ces]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

# NOTE: run as a script, this file's folder comes first on sys.path and its name could shadow packages.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from analytics.store import DatasetError  # noqa: E402
from components.server.settings import Settings  # noqa: E402
from components.whatif.callbacks import render_scenario  # noqa: E402
from components.whatif.run import get_or_run, results_cache, run_in_subprocess  # noqa: E402
from sim.scenario import CesOptions, ScenarioConfig, config_to_dict, open_request  # noqa: E402

BUDGET_S = 10.0
PROGRESS_GAP_BUDGET_S = 1.0


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="helios-synth")
    p.add_argument("--cluster", default="Earth")
    p.add_argument("--start", default="2020-07-01")
    p.add_argument("--end", default="2020-07-31")
    p.add_argument("--policies", default="fifo,sjf,srtf,qssf")
    p.add_argument("--estimator", default="history")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--ces", action="store_true", help="also run CES (replay on nodes + forecast)")
    return p.parse_args()


def one_run(config: ScenarioConfig, cache) -> tuple[float, float, int, dict]:
    """Wall time, largest gap between progress reports, number of reports and stage times of a fresh run."""
    stamps: list[float] = []
    t0 = time.perf_counter()
    result, _, cached = get_or_run(open_request(config), cache, lambda f, m: stamps.append(time.perf_counter()))
    wall = time.perf_counter() - t0
    assert not cached, "the results cache must start empty"
    marks = [t0, *stamps, time.perf_counter()]
    gap = max(b - a for a, b in zip(marks, marks[1:], strict=False))
    return wall, gap, len(stamps), {"jobs": result.jobs, **result.stage_s}


def main() -> int:
    """Run the benchmark and print its figures; exit 1 when a budget is missed."""
    args = parse_args()
    config = ScenarioConfig(
        dataset=args.dataset,
        cluster=args.cluster,
        start=args.start,
        end=args.end,
        policies=tuple(p for p in args.policies.split(",") if p),
        estimator=args.estimator,
        ces=CesOptions(enabled=args.ces, preset=args.cluster.lower()),
    )
    print(f"## what-if: {args.dataset}/{args.cluster} {args.start}..{args.end}, policies {args.policies}")
    walls, gaps = [], []
    try:
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                cache = results_cache(Settings(cache_dir=Path(tmp)))
                wall, gap, reports, stages = one_run(config, cache)
                t = time.perf_counter()
                _, _, cached = get_or_run(open_request(config), cache)
                again_s = time.perf_counter() - t
            walls.append(wall)
            gaps.append(gap)
            print(f"run: {wall:.2f} s, {reports} progress reports, largest gap {gap:.2f} s; stages {stages}")
            print(f"same scenario again: {again_s * 1000:.0f} ms (from cache: {cached})")
    except DatasetError as exc:
        print(f"bench/whatif.py: {exc} (build it with `helios demo`)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        out = run_in_subprocess(render_scenario, (config_to_dict(config), Settings(cache_dir=Path(tmp))))
        web_s = time.perf_counter() - t
    print(f"web path (spawned process + run + render, no polling): {web_s:.2f} s, {out['status']}")
    wall, gap = statistics.median(walls), max(gaps)
    ok = wall <= BUDGET_S and gap <= PROGRESS_GAP_BUDGET_S
    verdict = "OK" if ok else "OVER"
    print(f"median wall {wall:.2f} s (budget {BUDGET_S:g} s), largest progress gap {gap:.2f} s: {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
