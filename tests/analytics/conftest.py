"""A small hand-checked trace for the study queries: 11 jobs over clusters Alpha and Beta, 2020-04-01..04-03.

Capacity (vc_gpus): Alpha vcA1 = 8 GPUs every day; vcA2 = 4, 4, 8 (Apr 1, 2, 3), so Alpha has 12, 12, 16 GPUs,
mean 13.33 -> summary gpu_num 13. Beta vcB1 = 8 every day plus a whole-cluster "*" row of 16 GPUs, so Beta counts
16 GPUs when no VC is selected (gpu_num 16) and 8 with --vc vcB1. Total gpu_num = the sum of the mean capacities
truncated once: int(13.33 + 16) = 29. The period the series cover is [2020-04-01 00:00, 2020-04-04 00:00) = 4,320
minutes. 2020-04-01 is a Wednesday (weekday 2).

job  cluster vc    user gpu cpu state      submit           start            end              dur   queue
A1   Alpha   vcA1  u1   2   4   COMPLETED  04-01 00:00:30   04-01 00:01:10   04-01 00:03:20   130   40
A2   Alpha   vcA1  u1   8   16  CANCELLED  04-01 00:02:00   04-01 00:02:00   04-01 00:02:50   50    0
A3   Alpha   vcA2  u2   0   2   COMPLETED  04-01 10:00:00   04-01 10:00:05   04-01 10:00:06   1     5
A4   Alpha   vcA2  u2   1   1   FAILED     04-02 23:59:00   04-02 23:59:30   04-03 00:00:30   60    30
A5   Alpha   vcA1  u3   0   8   TIMEOUT    04-03 05:00:00   04-03 05:00:00   04-03 05:10:00   600   0
A6   Alpha   vcA2  u3   16  32  COMPLETED  04-01 00:02:30   04-01 00:03:00   04-01 00:03:40   40    30
B1   Beta    vcB1  u1   4   8   COMPLETED  04-01 12:00:00   04-01 12:00:00   04-01 12:00:00   0     0
B2   Beta    vcB1  u4   1   2   CANCELLED  04-02 08:00:00   04-02 08:30:00   04-02 10:30:00   7200  1800
B3   Beta    vcB1  u4   0   4   COMPLETED  04-02 08:00:10   04-02 08:00:10   04-02 08:01:00   50    0
B4   Beta    vcB1  u5   2   4   NODE_FAIL  04-03 23:00:00   04-03 23:00:00   04-04 01:00:00   7200  0
B5   Beta    vcB1  u5   1   2   COMPLETED  03-31 23:50:00   03-31 23:55:00   04-01 00:05:00   600   300

Minutes each GPU job counts in (start..end truncated to the minute, both inclusive, clipped to the period):
A1 04-01 00:01-00:03 (3), A2 00:02 (1), A6 00:03 (1), A4 04-02 23:59 and 04-03 00:00 (2), B1 04-01 12:00 (1, zero
duration still counts), B2 04-02 08:30-10:30 (121), B4 04-03 23:00-23:59 (60 of its 121; the rest is after the
period), B5 04-01 00:00-00:05 (6; it was submitted and started before the period).
"""

from __future__ import annotations

from datetime import date, datetime

import polars as pl
import pytest

from analytics import store
from analytics.ingest.bundled import BUNDLED, build

SMALL_NAME = "small"

_JOBS = [
    # job, cluster, vc, user, gpu, cpu, state, submit, start, end, duration, queue
    ("A1", "Alpha", "vcA1", "u1", 2, 4, "COMPLETED", "04-01 00:00:30", "04-01 00:01:10", "04-01 00:03:20", 130, 40),
    ("A2", "Alpha", "vcA1", "u1", 8, 16, "CANCELLED", "04-01 00:02:00", "04-01 00:02:00", "04-01 00:02:50", 50, 0),
    ("A3", "Alpha", "vcA2", "u2", 0, 2, "COMPLETED", "04-01 10:00:00", "04-01 10:00:05", "04-01 10:00:06", 1, 5),
    ("A4", "Alpha", "vcA2", "u2", 1, 1, "FAILED", "04-02 23:59:00", "04-02 23:59:30", "04-03 00:00:30", 60, 30),
    ("A5", "Alpha", "vcA1", "u3", 0, 8, "TIMEOUT", "04-03 05:00:00", "04-03 05:00:00", "04-03 05:10:00", 600, 0),
    ("A6", "Alpha", "vcA2", "u3", 16, 32, "COMPLETED", "04-01 00:02:30", "04-01 00:03:00", "04-01 00:03:40", 40, 30),
    ("B1", "Beta", "vcB1", "u1", 4, 8, "COMPLETED", "04-01 12:00:00", "04-01 12:00:00", "04-01 12:00:00", 0, 0),
    ("B2", "Beta", "vcB1", "u4", 1, 2, "CANCELLED", "04-02 08:00:00", "04-02 08:30:00", "04-02 10:30:00", 7200, 1800),
    ("B3", "Beta", "vcB1", "u4", 0, 4, "COMPLETED", "04-02 08:00:10", "04-02 08:00:10", "04-02 08:01:00", 50, 0),
    ("B4", "Beta", "vcB1", "u5", 2, 4, "NODE_FAIL", "04-03 23:00:00", "04-03 23:00:00", "04-04 01:00:00", 7200, 0),
    ("B5", "Beta", "vcB1", "u5", 1, 2, "COMPLETED", "03-31 23:50:00", "03-31 23:55:00", "04-01 00:05:00", 600, 300),
]


def _ts(text: str) -> datetime:
    return datetime.strptime(f"2020-{text}", "%Y-%m-%d %H:%M:%S")


def small_jobs() -> pl.DataFrame:
    """The 11 jobs of the module docstring in the canonical columns."""
    cols = list(zip(*_JOBS, strict=True))
    return pl.DataFrame(
        {
            "cluster": cols[1],
            "job_id": [int(j[1:]) + (0 if j[0] == "A" else 100) for j in cols[0]],
            "user": cols[3],
            "vc": cols[2],
            "gpu_num": cols[4],
            "cpu_num": [float(c) for c in cols[5]],
            "node_num": [1] * len(_JOBS),
            "state": cols[6],
            "submit_time": [_ts(t) for t in cols[7]],
            "start_time": [_ts(t) for t in cols[8]],
            "end_time": [_ts(t) for t in cols[9]],
            "duration": cols[10],
            "queue": cols[11],
        }
    )


def small_vc_gpus() -> pl.DataFrame:
    """Daily GPUs per VC of the module docstring (with Beta's whole-cluster "*" row)."""
    rows = []
    for day in (1, 2, 3):
        d = date(2020, 4, day)
        rows += [("Alpha", "vcA1", d, 8), ("Alpha", "vcA2", d, 8 if day == 3 else 4)]
        rows += [("Beta", "vcB1", d, 8), ("Beta", "*", d, 16)]
    return pl.DataFrame(rows, schema=["cluster", "vc", "date", "gpus"], orient="row")


@pytest.fixture
def small_ds(data_root):
    """The small hand-checked trace written as dataset "small" in a fresh data folder."""
    return store.write_dataset(SMALL_NAME, small_jobs(), small_vc_gpus(), {"clusters": ["Alpha", "Beta"]})


@pytest.fixture(scope="session")
def bundled_root(tmp_path_factory):
    """A data folder holding the bundled public datasets (philly, alibaba), built from data/public."""
    root = tmp_path_factory.mktemp("bundled")
    for name in BUNDLED:
        build(name, root)
    return root
