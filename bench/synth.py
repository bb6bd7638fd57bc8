"""Benchmark: wall time and peak memory of `helios demo` (build + write of the synthetic trace), then fidelity.

Usage: .venv/bin/python bench/synth.py [--scale 1] [--seed 0] [--queue slurm|sampled] [--runs 1] [--fidelity]
Each run builds into a fresh temporary HELIOS_DATA_DIR (your ./data is never touched). Budgets at scale 1 on 2 cores:
<= 3 min with the scheduled queue (`--queue slurm`, the default of `helios demo`), <= 90 s with sampled queues.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HELIOS = REPO / ".venv" / "bin" / "helios"


def run_child(args: list[str], data_dir: str) -> tuple[float, float, int]:
    """Run one `helios` command in a child process: (wall seconds, peak RSS MiB of the child, exit code)."""
    env = dict(os.environ, HELIOS_DATA_DIR=data_dir)
    command = [str(HELIOS) if HELIOS.exists() else "helios", *args]
    wrapped = [sys.executable, "-c", _MEASURE, *command]
    t0 = time.perf_counter()
    done = subprocess.run(wrapped, env=env, capture_output=True, text=True, check=False)
    wall_s = time.perf_counter() - t0
    rss_mib = float(done.stdout.strip().splitlines()[-1]) if done.returncode in (0, 1) else float("nan")
    if done.returncode not in (0, 1):
        print(done.stderr, file=sys.stderr)
    return wall_s, rss_mib, done.returncode


# The child runs the command and reports its own children's peak RSS (Linux ru_maxrss is in KiB).
_MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
    "sys.exit(code)\n"
)


def main() -> int:
    """Time the build (and optionally `helios fidelity`) and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="1")
    parser.add_argument("--seed", default="0")
    parser.add_argument("--queue", default="slurm", choices=("slurm", "sampled"))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--fidelity", action="store_true", help="also time `helios fidelity` on the result")
    args = parser.parse_args()
    print(f"helios demo --scale {args.scale} --seed {args.seed} --queue {args.queue} ({os.cpu_count()} CPUs)")
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="helios-bench-") as data_dir:
            wall_s, rss_mib, code = run_child(
                ["demo", "--scale", args.scale, "--seed", args.seed, "--queue", args.queue, "--quiet"], data_dir
            )
            size_mib = sum(p.stat().st_size for p in Path(data_dir).rglob("*") if p.is_file()) / 2**20
            figures = f"peak RSS {rss_mib:.0f} MiB, dataset {size_mib:.1f} MiB, exit {code}"
            print(f"run {run}: build+write {wall_s:.1f} s, {figures}")
            if args.fidelity:
                wall_s, rss_mib, code = run_child(["fidelity"], data_dir)
                verdict = "all pass" if code == 0 else "some checks FAIL"
                print(f"run {run}: fidelity {wall_s:.1f} s, peak RSS {rss_mib:.0f} MiB, {verdict} (exit {code})")
    print(f"self peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
