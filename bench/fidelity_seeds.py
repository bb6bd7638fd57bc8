"""Fidelity of the demo generator over several seeds: builds `helios demo --seed S` for each seed into a fresh
temporary folder, runs every fidelity check on it, and prints the checks passed per seed and each failing check with
the seeds it fails on (a check failing on every seed is a bias of the generator; one failing on some is seed noise).

Usage: .venv/bin/python bench/fidelity_seeds.py [--seeds 0,1,2,3] [--jobs 2]
One build takes about 2 minutes and 1.9 GiB on 2 cores; --jobs builds that many seeds at once.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[0] = str(REPO)  # NOTE: run as a script, this folder comes first on sys.path; the repository must
sys.path.insert(1, str(REPO / "bench"))

from synth import run_child  # noqa: E402

from analytics import store  # noqa: E402
from analytics.fidelity import fidelity_checks  # noqa: E402

MAX_SEEDS = 32


def parse_seeds(text: str) -> list[int]:
    """The comma-separated seeds, each a non-negative integer, at most MAX_SEEDS, no repeats."""
    seeds = [int(s) for s in text.split(",") if s.strip()]
    if not seeds or len(seeds) > MAX_SEEDS or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"give 1 to {MAX_SEEDS} distinct non-negative seeds, e.g. 0,1,2,3")
    return seeds


Key = tuple[str, str, str]  # (source, cluster, statistic) of a check
Result = tuple[int, int, dict[Key, tuple[float | None, float | None]], str]


def failing_checks(seed: int) -> Result:
    """Build the seed's demo in a temporary folder: (checks passed, checks, failing checks with their (published,
    value), build figures)."""
    with tempfile.TemporaryDirectory(prefix=f"helios-seed{seed}-") as data_dir:
        wall_s, rss_mib, code = run_child(["demo", "--seed", str(seed), "--quiet"], data_dir)
        if code != 0:
            raise SystemExit(f"seed {seed}: helios demo exited {code}")
        checks = fidelity_checks(store.open_dataset(store.DEFAULT_DATASET, Path(data_dir)))
    failed = {(c.source, c.cluster, c.statistic): (c.published, c.value) for c in checks if not c.passed}
    return len(checks) - len(failed), len(checks), failed, f"build {wall_s:.0f} s, peak RSS {rss_mib:.0f} MiB"


def _number(value: float | None) -> str:
    return "none" if value is None else f"{value:.4g}"


def report(seeds: list[int], results: list[Result]) -> list[str]:
    """Lines: checks passed per seed and their mean, then each failing check with the seeds it fails on, its published
    value and its value on each of those seeds (so a bias shows its direction)."""
    pairs = list(zip(seeds, results, strict=True))
    lines = [f"seed {s}: {ok} of {n} checks pass ({figures})" for s, (ok, n, _, figures) in pairs]
    lines.append(f"mean: {sum(r[0] for r in results) / len(results):.2f} of {results[0][1]}")
    fails: dict[Key, list[tuple[int, float | None, float | None]]] = {}
    for seed, (_, _, failed, _) in pairs:
        for key, (published, value) in failed.items():
            fails.setdefault(key, []).append((seed, published, value))
    lines.append(f"failing checks ({len(fails)}), most seeds first:")
    for key, on in sorted(fails.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        values = ", ".join(f"{seed}: {_number(value)}" for seed, _, value in on)
        lines.append(f"  {len(on)}/{len(seeds)}  {' | '.join(key)}  (published {_number(on[0][1])}; {values})")
    return lines


def main() -> int:
    """Build each seed's demo, check it and print the report."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=parse_seeds, default=[0, 1, 2, 3], help="comma-separated (default 0,1,2,3)")
    parser.add_argument("--jobs", type=int, choices=range(1, 5), default=1, help="seeds built at once (default 1)")
    args = parser.parse_args()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(failing_checks, args.seeds))
    print("\n".join(report(args.seeds, results)))
    print(f"self peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
