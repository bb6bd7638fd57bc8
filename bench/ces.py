"""Benchmark `helios ces` (issue #5 item 6): wall times of the Philly series and of a six-month cluster.

Budgets: the whole Philly series (read + forecast + policy + accounting) <= 15 s; a six-month cluster of the
bundled dataset (read + replay on nodes + forecast + policy + accounting) <= 30 s.
Usage: python bench/ces.py [--shared DIR] [--dataset helios-synth] [--cluster Saturn] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analytics.store import DatasetError  # noqa: E402
from sim.ces.forecast_artifact import feature_set_for  # noqa: E402
from sim.ces.policy import PRESETS  # noqa: E402
from sim.ces.run import CesConfig, run_ces  # noqa: E402
from sim.ces.series import load_node_series  # noqa: E402
from sim.commands.ces import load_dataset_series  # noqa: E402

PHILLY_BUDGET_S = 15.0
CLUSTER_BUDGET_S = 30.0


def _timed(fn, repeat: int) -> tuple[float, float, dict]:
    walls, out = [], {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), max(walls), out


def philly(shared: Path, mode: str) -> dict:
    """Read the Philly minute series and run one mode end to end."""
    series = load_node_series(shared / "philly_node_sequence.csv")
    return run_ces(series, CesConfig(mode=mode, policy=PRESETS["philly"])).metrics


def cluster(dataset: str, name: str, mode: str) -> dict:
    """Load one cluster of a dataset, replay its GPU jobs on nodes and run one mode on Sep 1-21."""
    series, starts, _ = load_dataset_series(dataset, name)
    preset_name = name.lower() if name.lower() in PRESETS else "saturn"
    config = CesConfig(
        mode=mode,
        start=datetime(2020, 9, 1),
        end=datetime(2020, 9, 22),
        policy=PRESETS[preset_name],
        artifact_features=feature_set_for(preset_name),
    )
    return run_ces(series, config, job_starts=starts).metrics | {"bins": len(series.time)}


def _report(label: str, median_s: float, max_s: float, budget_s: float, metrics: dict) -> None:
    verdict = "ok" if max_s <= budget_s else "OVER BUDGET"
    print(
        f"{label:<34} median {median_s:6.2f} s  max {max_s:6.2f} s  (budget {budget_s:.0f} s: {verdict})  "
        f"optimized {metrics['optimized_used_pct']:.2f} %  off {metrics['poweroff_mean_nodes']:.1f} nodes"
    )


def main() -> int:
    """Run the benchmarks and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_shared = Path(os.environ.get("HELIOS_SHARED_DIR", REPO.parent / "shared")) / "data"
    parser.add_argument("--shared", type=Path, default=default_shared)
    parser.add_argument("--dataset", default="helios-synth")
    parser.add_argument("--cluster", default="Saturn")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"CES benchmark, {os.cpu_count()} CPUs, median/max of {args.repeat} runs")
    for mode in ("artifact", "honest"):
        med, worst, m = _timed(lambda mode=mode: philly(args.shared, mode), args.repeat)
        _report(f"Philly 2017-12-01..14, {mode}", med, worst, PHILLY_BUDGET_S, m)
    for mode in ("artifact", "honest"):
        try:
            med, worst, m = _timed(lambda mode=mode: cluster(args.dataset, args.cluster, mode), args.repeat)
        except DatasetError as exc:
            print(f"six-month cluster skipped: {exc} (build it with `helios demo`)")
            return 1
        label = f"{args.dataset} {args.cluster} ({m['bins']} bins), {mode}"
        _report(label, med, worst, CLUSTER_BUDGET_S, m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
