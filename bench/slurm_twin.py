"""The scheduler twin against a real Slurm 22.05 (issue 38 item 4): the contention experiment run under its presets,
each recording replayed by the `slurm` policy with its captured configuration, and the table of record vs twin,
the real run-to-run spread, the configuration changes and the issue's targets.

    .venv/bin/python bench/slurm_twin.py --replay-only          # the committed recordings (no Slurm needed)
    .venv/bin/python bench/slurm_twin.py --out /tmp/twin-runs   # run fairshare twice, age and builtin (as root,
                                                                # Slurm installed; about 15 minutes a run), then replay

With --parallel, two presets run side by side on two clusters (the submission offsets are kept; sleep jobs use
little CPU). Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.slurm import contention as ct  # noqa: E402
from tests.slurm.twin import compare_recordings, format_comparison  # noqa: E402

RECORDINGS = REPO / "tests" / "slurm" / "recordings"
RUNS = ("fairshare-1", "fairshare-2", "age-1", "builtin-1")
LANES = (("fairshare", "fairshare"), ("age", "builtin"))  # with --parallel: fairshare-1 beside age-1, -2 beside builtin


def _run_lane(presets: tuple[str, ...], out: Path, interval_s: float) -> None:
    jobs = ct.make_jobs()
    for preset in presets:
        folder = ct.next_folder(out, preset)
        began = time.monotonic()
        ct.run_preset(preset, jobs, folder, interval_s=interval_s)
        print(f"{folder.name}: recorded in {time.monotonic() - began:.0f} s", flush=True)


def run_experiment(out: Path, parallel: bool, interval_s: float) -> None:
    """Record every preset's run into out (fresh cluster each, daemons stopped by PID)."""
    if not parallel:
        _run_lane(sum(LANES, ()), out, interval_s)
        return
    threads = [threading.Thread(target=_run_lane, args=(lane, out, interval_s)) for lane in LANES]
    threads[0].start()
    time.sleep(20)  # the second cluster starts once the first is up (ports and CPU)
    threads[1].start()
    for thread in threads:
        thread.join()


def main(argv: list[str] | None = None) -> int:
    """Run (or only replay) the experiment and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    replay_help = f"only replay the recordings in --out (default {RECORDINGS})"
    parser.add_argument("--replay-only", action="store_true", help=replay_help)
    parser.add_argument("--out", type=Path, default=RECORDINGS, help="folder of the recordings")
    parser.add_argument("--parallel", action="store_true", help="two clusters side by side")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between sprio/sshare/squeue snapshots")
    args = parser.parse_args(argv)
    if not args.replay_only:
        if args.out == RECORDINGS:
            parser.error("give --out for a new run: the committed recordings are never overwritten")
        run_experiment(args.out, args.parallel, args.interval)
    missing = [run for run in RUNS if not (args.out / run).is_dir()]
    if missing:
        parser.error(f"{args.out}: no recording {', '.join(missing)}")
    began = time.perf_counter()
    comparison = compare_recordings([args.out / run for run in RUNS])
    print(format_comparison(comparison))
    print(f"\n{len(RUNS)} replays and their checks in {time.perf_counter() - began:.1f} s")
    return 0 if all(c.passed for c in comparison.checks) else 1


if __name__ == "__main__":
    sys.exit(main())
