"""The what-if page's default window: a cluster's last week up to its last busy day, past a trace's sparse tail."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import polars as pl

from analytics import store
from analytics.queries import catalog


def _jobs(per_day: dict[tuple[str, int], tuple[int, int]]) -> pl.DataFrame:
    """Jobs submitted at noon of September days: {(cluster, day): (GPU jobs, CPU-only jobs)}."""
    rows = []
    for (cluster, day), (n_gpu, n_cpu) in per_day.items():
        for i in range(n_gpu + n_cpu):
            submit = datetime(2020, 9, day, 12) + timedelta(minutes=i)
            gpus = 1 if i < n_gpu else 0
            rows.append((cluster, len(rows), "u1", "vc1", gpus, 4.0, 1, "COMPLETED", submit, submit, submit, 60, 0))
    names = ["cluster", "job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state"]
    names += ["submit_time", "start_time", "end_time", "duration", "queue"]
    jobs = pl.DataFrame(rows, schema=names, orient="row")
    return jobs.with_columns(pl.col("end_time") + pl.duration(seconds=60))


def _dataset(tmp_path, per_day) -> store.Dataset:
    caps = pl.DataFrame(
        [(c, "vc1", date(2020, 9, d), 8) for c in ("A", "B") for d in range(1, 13)],
        schema=["cluster", "vc", "date", "gpus"],
        orient="row",
    )
    return store.write_dataset("recent", _jobs(per_day), caps, {}, root=tmp_path)


def test_the_window_ends_on_the_last_busy_day_and_counts_only_gpu_jobs(tmp_path):
    per_day = {("A", d): (20, 5) for d in range(1, 11)}
    per_day |= {("A", 11): (1, 0), ("A", 12): (1, 300), ("B", 12): (0, 40)}  # A's tail: 1 GPU job a day
    ds = _dataset(tmp_path, per_day)
    assert catalog.recent_days(ds, "A", 7) == ("2020-09-04", "2020-09-10")
    assert catalog.recent_days(ds, "A", 30)[1] == "2020-09-10"  # longer than the trace: the page clips its start
    assert catalog.recent_days(ds, "B", 7) == (None, None)  # CPU jobs only: nothing to replay
    assert catalog.recent_days(ds, "Nope", 7) == (None, None)


def test_a_day_at_a_tenth_of_the_median_still_counts(tmp_path):
    per_day = {("A", d): (20, 0) for d in range(1, 11)} | {("A", 11): (2, 0)}
    assert catalog.recent_days(_dataset(tmp_path, per_day), "A", 7) == ("2020-09-05", "2020-09-11")
