"""Benchmark refreshing a year-long Slurm dataset: `helios ingest --format slurm --append` of one more day.

A synthetic cluster (tests/slurm/synthetic.py: 4 partitions, 150 users, --jobs-per-day jobs a day) is exported for
365 days and ingested (the one-off full build, timed for comparison); the refresh is the export a day later of the
jobs active in its last two days (`helios sync slurm --since 2d`), appended in a child process whose wall time and
peak RSS are reported; a second, identical append must change nothing. Budget: a few seconds per refresh.

    .venv/bin/python bench/slurm_append.py [--days 365] [--jobs-per-day 5000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.slurm.synthetic import exports, write_capacity  # noqa: E402

BUDGET_S = 10.0
NAME = "bench-slurm"


def timed_helios(data_dir: Path, *args: str) -> tuple[float, int, str]:
    """Run `helios ARGS` in a child process; return its wall seconds, peak RSS in KiB and its output."""
    env = dict(os.environ, HELIOS_DATA_DIR=str(data_dir))
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "cli", *args], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    out = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"helios {' '.join(args)} failed:\n{out}")
    return seconds, usage.ru_maxrss, out


def main(argv: list[str] | None = None) -> int:
    """Build the year, append the next day --runs times (fresh copy each time) and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=365, help="length of the stored history")
    parser.add_argument("--jobs-per-day", type=int, default=5000, help="jobs submitted a day")
    parser.add_argument("--runs", type=int, default=3, help="timed appends (each on a fresh copy; median reported)")
    parser.add_argument("--exports-only", type=Path, metavar="DIR", help="only write the two exports into DIR")
    args = parser.parse_args(argv)
    if args.exports_only:
        exports(args.exports_only, datetime(2025, 1, 1), args.days, args.jobs_per_day)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-slurm-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        # NOTE: generated in a child, so that this process stays small: a child forked from a big parent would
        # report the parent's pages in its peak RSS.
        sizes = ("--days", str(args.days), "--jobs-per-day", str(args.jobs_per_day))
        subprocess.run([sys.executable, __file__, *sizes, "--exports-only", str(folder)], check=True)
        first, refresh, caps = folder / "first.txt", folder / "refresh.txt", write_capacity(folder / "caps.csv")
        print(f"generated the exports in {time.perf_counter() - t0:.1f} s (not timed below)")
        print(f"year: {first.stat().st_size / 2**20:.0f} MiB; refresh: {refresh.stat().st_size / 2**20:.1f} MiB")
        ingest_args = ("--format", "slurm", "--name", NAME, "--quiet")
        build_s, build_kib, _ = timed_helios(
            folder / "data", "ingest", str(first), *ingest_args, "--capacity", str(caps)
        )
        meta = json.loads((folder / "data" / NAME / "meta.json").read_text())
        print(f"full build of the year: {meta['row_counts']['jobs']:,} jobs, {len(meta['monthly_parts'])} monthly "
              f"files, {build_s:.2f} s, peak RSS {build_kib / 1024:,.0f} MiB")  # fmt: skip
        runs = []
        for run in range(args.runs):
            data = folder / f"run{run}"
            subprocess.run(["cp", "-a", str(folder / "data"), str(data)], check=True)
            runs.append(timed_helios(data, "ingest", str(refresh), *ingest_args, "--append"))
        again_s, again_kib, again_out = timed_helios(data, "ingest", str(refresh), *ingest_args, "--append")
    seconds = [s for s, _, _ in runs]
    median_s = statistics.median(seconds)
    print(runs[0][2].splitlines()[0])
    print(f"append of one day: {median_s:.2f} s median (runs: {', '.join(f'{s:.2f}' for s in seconds)}), "
          f"peak RSS {max(k for _, k, _ in runs) / 1024:,.0f} MiB")  # fmt: skip
    print(f"the same append again: {again_s:.2f} s, peak RSS {again_kib / 1024:,.0f} MiB; {again_out.splitlines()[0]}")
    print(f"budget: {BUDGET_S:.0f} s -> {'OK' if median_s <= BUDGET_S else 'OVER BUDGET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
