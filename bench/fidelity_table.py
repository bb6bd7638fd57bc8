"""Print the tables of docs/fidelity.md for a dataset: Fig 4 per VC (Earth, May 2020 without May 10) and the spread
of every cluster's VCs beside the published values, then each check family's verdicts.

Usage: HELIOS_DATA_DIR=DIR .venv/bin/python bench/fidelity_table.py [--dataset helios-synth]
"""

from __future__ import annotations

import argparse
from collections import Counter

from analytics import store
from analytics.fidelity import fidelity_checks
from analytics.fidelity.vcs import fig4_frame, spread
from analytics.reference import CLUSTERS, FIG4, reference

_COLUMNS = (
    ("mean_pct", "mean %"),
    ("q1_pct", "q1"),
    ("median_pct", "median"),
    ("q3_pct", "q3"),
    ("avg_gpus_per_job", "GPUs/job"),
    ("norm_avg_duration_pct", "norm. duration"),
    ("norm_avg_queue_pct", "norm. queue"),
)


def _cell(published: float, value: float | None) -> str:
    return f"{published:.1f} / " + ("-" if value is None else f"{value:.1f}")


def vc_table(ds: store.Dataset) -> list[str]:
    """Markdown rows: each published Earth VC, published / dataset for every Fig 4 statistic."""
    published = reference()["earth_may_vc_utilization"]
    rows = {r["vc"]: r for r in fig4_frame(ds, FIG4.cluster, tuple(published)).iter_rows(named=True)}
    lines = ["| VC (GPUs) | " + " | ".join(label for _, label in _COLUMNS) + " |", "|---" * (len(_COLUMNS) + 1) + "|"]
    for vc, pub in published.items():
        got = rows.get(vc, {})
        cells = [_cell(pub[col], got.get(col)) for col, _ in _COLUMNS]
        lines.append(f"| {vc} ({pub['gpus']}) | " + " | ".join(cells) + " |")
    return lines


def spread_table(ds: store.Dataset) -> list[str]:
    """Markdown rows: min / q1 / median / q3 / max of the VCs' May means, published (Earth) and per cluster."""
    published = reference()["earth_may_vc_utilization"]
    lines = ["| VCs | min | q1 | median | q3 | max | VCs ≥ 90 % (mean / median) |", "|---|---|---|---|---|---|---|"]
    want = spread([p["mean_pct"] for p in published.values()])
    high = (
        sum(p["mean_pct"] >= 90 for p in published.values()),
        sum(p["median_pct"] >= 90 for p in published.values()),
    )
    lines.append(
        "| published, Earth's 10 | " + " | ".join(f"{v:.1f}" for v in want.values()) + f" | {high[0]} / {high[1]} |"
    )
    for cluster in CLUSTERS:
        frame = fig4_frame(ds, cluster, tuple(published) if cluster == FIG4.cluster else ())
        if frame.is_empty():
            continue
        got = spread(frame["mean_pct"].to_list())
        counts = (int((frame["mean_pct"] >= 90).sum()), int((frame["median_pct"] >= 90).sum()))
        lines.append(
            f"| {cluster}'s 10 | " + " | ".join(f"{v:.1f}" for v in got.values()) + f" | {counts[0]} / {counts[1]} |"
        )
    return lines


def verdict_table(ds: store.Dataset) -> list[str]:
    """Markdown rows: per source (figure or table), checks run and failed, and the first failing statistics."""
    checks = fidelity_checks(ds)
    total, failed = Counter(c.source for c in checks), Counter(c.source for c in checks if not c.passed)
    lines = ["| source | checks | fail | failing (first three) |", "|---|---|---|---|"]
    for source in total:
        names = [f"{c.cluster} {c.statistic}" for c in checks if c.source == source and not c.passed][:3]
        lines.append(f"| {source} | {total[source]} | {failed[source]} | {'; '.join(names)} |")
    lines.append(f"| all | {len(checks)} | {sum(failed.values())} | |")
    return lines


def main() -> int:
    """Print the three tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=store.DEFAULT_DATASET)
    ds = store.open_dataset(parser.parse_args().dataset)
    for lines in (vc_table(ds), spread_table(ds), verdict_table(ds)):
        print("\n".join(lines), end="\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
