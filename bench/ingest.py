"""Benchmark `helios ingest` on a full-size trace in the published Helios CSV format (time, rows/s, peak RSS).

The input is the synthetic dataset (default `helios-synth`, built by `helios demo` when missing) exported with
analytics/export.py as `data.zip` (default) or as a folder, or an existing export given with --csv-dir.
Budget: <= 60 s for 3.36 M jobs on 2 cores.

    .venv/bin/python bench/ingest.py [--dataset NAME] [--layout zip|folder] [--csv-dir PATH] [--runs N]
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analytics import store  # noqa: E402
from analytics.export import export_dataset  # noqa: E402

BUDGET_S = 60.0
BENCH_NAME = "bench-ingest"


def helios_command(*args: str) -> list[str]:
    """The `helios` command line run with this interpreter."""
    return [sys.executable, "-m", "cli", *args]


def ensure_dataset(name: str) -> store.Dataset:
    """Open the source dataset, building it with `helios demo` first when it is missing."""
    try:
        return store.open_dataset(name)
    except store.DatasetError:
        print(f"dataset {name} missing under {store.data_dir()}: running `helios demo`", flush=True)
        subprocess.run(helios_command("demo"), cwd=REPO, check=True)
        return store.open_dataset(name)


def export_source(name: str, layout: str, out_dir: Path) -> Path:
    """Export the dataset in the published CSV layout and return the path to ingest."""
    dataset = ensure_dataset(name)
    t0 = time.perf_counter()
    paths = export_dataset(dataset, out_dir, zipped=layout == "zip")
    print(f"exported {dataset.name} as {layout} in {time.perf_counter() - t0:.1f} s (not timed below)")
    return paths[0] if layout == "zip" else out_dir


def timed_ingest(source: Path, data_dir: Path) -> tuple[float, int]:
    """Run `helios ingest` in a child process; return its wall seconds and peak RSS in KiB."""
    env = dict(os.environ, HELIOS_DATA_DIR=str(data_dir))
    cmd = helios_command("ingest", str(source), "--format", "helios", "--name", BENCH_NAME, "--quiet")
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"ingest failed with exit code {child.returncode}")
    return seconds, usage.ru_maxrss


def report(source: Path, data_dir: Path, seconds: list[float], peak_kib: list[int]) -> None:
    """Print the figures of the runs."""
    meta = json.loads((data_dir / BENCH_NAME / "meta.json").read_text())
    rows = meta["row_counts"]["jobs"]
    median_s = statistics.median(seconds)
    verdict = "OK" if median_s <= BUDGET_S else "OVER BUDGET"
    size = f" ({source.stat().st_size / 2**20:.1f} MiB)" if source.is_file() else ""
    print(f"source: {source}{size}")
    print(f"jobs: {rows:,} in {len(meta['clusters'])} clusters; runs: {len(seconds)} ({os.cpu_count()} CPUs)")
    print(f"ingest time: {median_s:.2f} s median (runs: {', '.join(f'{s:.2f}' for s in seconds)})")
    print(f"throughput: {rows / median_s:,.0f} rows/s")
    print(f"peak RSS: {max(peak_kib) / 1024:,.0f} MiB")
    print(f"budget: {BUDGET_S:.0f} s -> {verdict}")


def main(argv: list[str] | None = None) -> int:
    """Export (or take) a Helios CSV trace, ingest it `--runs` times and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=store.DEFAULT_DATASET, help="dataset to export as the input")
    parser.add_argument("--layout", choices=("zip", "folder"), default="zip", help="exported input layout")
    parser.add_argument("--csv-dir", type=Path, help="existing Helios folder or data.zip (skips the export)")
    parser.add_argument("--runs", type=int, default=1, help="ingest runs (the median is reported)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        source = args.csv_dir or export_source(args.dataset, args.layout, Path(tmp) / "csv")
        data_dir = Path(tmp) / "data"
        runs = [timed_ingest(source, data_dir) for _ in range(args.runs)]
        report(source, data_dir, [s for s, _ in runs], [k for _, k in runs])
    return 0


if __name__ == "__main__":
    sys.exit(main())
