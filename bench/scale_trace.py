"""An N-times longer Helios trace built from the demo dataset, written in the published Helios CSV layout.

Method (issue #15): the demo's 26 weeks are repeated N times, copy k shifted by k x 26 weeks (182 days, so
weekdays and hours line up); each copy gets its own job ids (id + k x 10^digits of the largest id); a user of
copy k >= 1 returns under the same name with probability 1/3 (a deterministic hash of user and copy) and is a new
user `<name>.<k>` otherwise, so the user count grows as a longer real trace's would (most people come and go, some
stay); clusters and VCs keep their names and the VC capacities are repeated with the same shift, the one day
between two copies (the demo has 181 days of capacity) taking the capacity of its copy's last day.
"""

from __future__ import annotations

import json
import zlib
from datetime import timedelta
from pathlib import Path

import polars as pl

from analytics import store
from analytics.export import gpu_number_frame, log_frame
from analytics.ingest.helios import GPU_FILE, LOG_FILE
from analytics.ingest.parse import DATE_FORMAT, TIME_FORMAT

COPY_SHIFT = timedelta(weeks=26)
RETURNING_USERS = 3  # one user in RETURNING_USERS keeps their name in the next copies
STAMP_FILE = "scale.json"


def user_names(users: list[str], copy: int) -> dict[str, str]:
    """The names of the demo's users in copy `copy`: the same name for returning users, `<name>.<copy>` else."""
    if copy == 0:
        return {u: u for u in users}
    return {u: u if zlib.crc32(f"{u}:{copy}".encode()) % RETURNING_USERS == 0 else f"{u}.{copy}" for u in users}


def id_offset(max_job_id: int) -> int:
    """The job-id step between copies: the power of ten above the largest id."""
    return 10 ** len(str(max_job_id))


def copy_jobs(jobs: pl.DataFrame, copy: int, step: int, names: dict[str, str]) -> pl.DataFrame:
    """Copy `copy` of a cluster's jobs: times shifted, ids offset, users renamed."""
    shift = COPY_SHIFT * copy
    return jobs.with_columns(
        pl.col("job_id") + step * copy,
        pl.col("user").replace_strict(names, default=None),
        *(pl.col(c) + shift for c in ("submit_time", "start_time", "end_time")),
    )


def repeated_capacity(vc_gpus: pl.DataFrame, factor: int) -> pl.DataFrame:
    """A cluster's daily VC capacity repeated factor times with the copies' shift, gaps filled by the last day."""
    first, last = vc_gpus["date"].min(), vc_gpus["date"].max()
    period_days = COPY_SHIFT.days
    filler = vc_gpus.filter(pl.col("date") == last)
    gap_days = (first + COPY_SHIFT - last).days
    gap = [filler.with_columns(pl.col("date") + timedelta(days=d)) for d in range(1, gap_days)]
    one_copy = pl.concat([vc_gpus, *gap]).filter(pl.col("date") < first + COPY_SHIFT)
    copies = [one_copy.with_columns(pl.col("date") + timedelta(days=period_days * k)) for k in range(factor)]
    return pl.concat(copies).sort("vc", "date")


def write_cluster(ds: store.Dataset, cluster: str, factor: int, out_dir: Path) -> int:
    """Write one cluster's repeated log and capacity CSV files under out_dir/<cluster>/; return its job count."""
    folder = out_dir / cluster
    folder.mkdir(parents=True, exist_ok=True)
    jobs = ds.jobs().filter(pl.col("cluster") == cluster).collect()
    step = id_offset(int(ds.jobs().select(pl.col("job_id").max()).collect().item()))
    users = jobs["user"].drop_nulls().unique().sort().to_list()
    with (folder / LOG_FILE).open("w") as fh:
        for k in range(factor):
            part = log_frame(copy_jobs(jobs, k, step, user_names(users, k)))
            part.write_csv(fh, include_header=k == 0, datetime_format=TIME_FORMAT)
    capacity = repeated_capacity(ds.vc_gpus().filter(pl.col("cluster") == cluster).drop("cluster"), factor)
    gpu_number_frame(capacity).write_csv(folder / GPU_FILE, date_format=DATE_FORMAT)
    return jobs.height * factor


def build(ds: store.Dataset, factor: int, out_dir: Path) -> dict:
    """Write the factor-times trace of ds under out_dir (skipped when its stamp says it is there); return the stamp."""
    stamp_path = out_dir / STAMP_FILE
    wanted = {"source": ds.name, "version": ds.version, "factor": factor, "method": __doc__.split("\n\n")[1]}
    if stamp_path.is_file():
        stamp = json.loads(stamp_path.read_text())
        if {k: stamp.get(k) for k in wanted} == wanted:
            return stamp
    stamp_path.unlink(missing_ok=True)
    clusters = ds.clusters or sorted(ds.jobs().select("cluster").unique().collect()["cluster"])
    counts = {c: write_cluster(ds, c, factor, out_dir) for c in clusters}
    stamp = {**wanted, "jobs": sum(counts.values()), "jobs_per_cluster": counts}
    stamp_path.write_text(json.dumps(stamp, indent=2) + "\n")
    return stamp
