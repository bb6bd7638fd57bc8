"""Independent, deliberately plain Polars reference of every study query, used by the tests to cross-check the product
implementations of analytics.queries (DuckDB SQL, sweep lines). Eager and naive: meant for small traces only
(utilisation expands every job into its minutes)."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np
import polars as pl

from analytics import queries as q
from analytics.filters import NO_FILTER, JobFilter
from analytics.queries import base as queries_base
from analytics.queries import jobs as queries_jobs
from analytics.queries import series as queries_series
from analytics.queries import users as queries_users
from analytics.store import Dataset

_STATE_SHARES = (("completed_pct", "COMPLETED"), ("cancelled_pct", "CANCELLED"), ("failed_pct", "FAILED"))


def filter_expr(flt: JobFilter, *, window: bool = True) -> pl.Expr:
    """The filter's predicate as a Polars expression on the jobs columns; window=False ignores start/end."""
    preds: list[pl.Expr] = []
    for name, values in (("cluster", flt.clusters), ("vc", flt.vcs), ("user", flt.users), ("state", flt.states)):
        if values:
            preds.append(pl.col(name).is_in(list(values)))
    if window:
        preds.extend(_window_exprs(flt))
    if flt.job_kind != "all":
        preds.append(pl.col("gpu_num") > 0 if flt.job_kind == "gpu" else pl.col("gpu_num") == 0)
    if flt.gpu_min is not None:
        preds.append(pl.col("gpu_num") >= flt.gpu_min)
    if flt.gpu_max is not None:
        preds.append(pl.col("gpu_num") <= flt.gpu_max)
    return pl.all_horizontal(preds) if preds else pl.lit(True)


def _window_exprs(flt: JobFilter) -> list[pl.Expr]:
    """The filter's time window: submitted in [start, end), or running in it (started before the end and ended after
    the start, its end being end_time else start_time + duration)."""
    if flt.time_mode == "submitted":
        return [
            *([pl.col("submit_time") >= flt.start] if flt.start is not None else []),
            *([pl.col("submit_time") < flt.end] if flt.end is not None else []),
        ]
    preds = [pl.col("start_time").is_not_null()]
    if flt.start is not None:
        job_end = pl.coalesce("end_time", pl.col("start_time") + pl.duration(seconds=pl.col("duration")))
        preds.append((job_end > flt.start).fill_null(False))
    if flt.end is not None:
        preds.append(pl.col("start_time") < flt.end)
    return preds


def ref_jobs(ds: Dataset, flt: JobFilter, window: bool = True) -> pl.DataFrame:
    """All jobs of ds that the filter keeps, read eagerly; window=False ignores start/end."""
    return ds.jobs().collect().filter(filter_expr(flt, window=window))


UNFINISHED = ("RUNNING", "PENDING", "SUSPENDED", "REQUEUED")
FINAL = (
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
)


def _group(state: str | None) -> str | None:
    if state in UNFINISHED:
        return "UNFINISHED"
    if state not in FINAL:
        return None
    return state if state in ("COMPLETED", "CANCELLED") else "FAILED"


def _ended(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter(~pl.col("state").is_in(UNFINISHED) | pl.col("state").is_null())


def _with_group(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(grp=pl.col("state").map_elements(_group, return_dtype=pl.String, skip_nulls=False))


def ref_clusters(ds: Dataset, flt: JobFilter) -> list[str]:
    """Clusters of the jobs and capacity tables, restricted to the filter's."""
    names = set(ds.jobs().collect()["cluster"]) | set(ds.vc_gpus()["cluster"])
    return sorted(n for n in names if not flt.clusters or n in flt.clusters)


def ref_period(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """[start, end): the filter's window, else the first day to the day after the last day of the capacity table."""
    clusters = ref_clusters(ds, flt)
    caps = ds.vc_gpus().filter(pl.col("cluster").is_in(clusters))
    if not clusters or caps.is_empty():
        return pl.DataFrame(schema=queries_base.PERIOD_SCHEMA)
    first, last = caps["date"].min(), caps["date"].max()
    start = flt.start or datetime.combine(first, datetime.min.time())
    end = flt.end or datetime.combine(last, datetime.min.time()) + timedelta(days=1)
    return pl.DataFrame({"start": [start], "end": [end]}, schema=queries_base.PERIOD_SCHEMA)


def ref_capacity(ds: Dataset, flt: JobFilter, cluster: str, day: date) -> int | None:
    """GPUs of the cluster on that day: selected VCs, else its "*" rows, else all its VCs; None without rows."""
    rows = ds.vc_gpus().filter((pl.col("cluster") == cluster) & (pl.col("date") == day))
    if flt.vcs:
        rows = rows.filter(pl.col("vc").is_in(list(flt.vcs)))
    elif (rows["vc"] == "*").any():
        rows = rows.filter(pl.col("vc") == "*")
    return int(rows["gpus"].sum()) if rows.height else None


def ref_cluster_summary(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """helios_cluster_summary.csv rows, cluster by cluster with Series statistics."""
    jobs = _with_group(ref_jobs(ds, flt))
    if jobs.is_empty():
        return pl.DataFrame(schema=queries_jobs.SUMMARY_SCHEMA)
    period = ref_period(ds, flt).row(0)
    order = [c for c in ds.clusters if c in set(jobs["cluster"])] + sorted(set(jobs["cluster"]) - set(ds.clusters))
    rows, means = [], []
    for cluster in order:
        days = [d for d in _days(period[0], period[1])]
        caps = [ref_capacity(ds, flt, cluster, d) for d in days]
        caps = [c for c in caps if c is not None]
        row = _summary_row(jobs.filter(pl.col("cluster") == cluster))
        rows.append({"id": cluster, "gpu_num": int(sum(caps) / len(caps)) if caps else None, **row})
        means.append(sum(caps) / len(caps) if caps else None)
    known = [m for m in means if m is not None]
    total_gpus = int(sum(known)) if known else None
    rows.append({"id": "total", "gpu_num": total_gpus, **_summary_row(jobs)})
    out = pl.DataFrame(rows, schema=queries_jobs.SUMMARY_SCHEMA)
    return out.with_columns(pl.col(queries_jobs.SUMMARY_ROUNDED_COLUMNS).round(3))


def _days(start: datetime, end: datetime) -> list[date]:
    out, day = [], start.date()
    while datetime.combine(day, datetime.min.time()) < end:
        out.append(day)
        day += timedelta(days=1)
    return out


def _summary_row(jobs: pl.DataFrame) -> dict:
    cpu, gpu = jobs.filter(pl.col("gpu_num") == 0), jobs.filter(pl.col("gpu_num") > 0)
    row = {"job_num": jobs.height, "cpu_job_num": cpu.height, "gpu_job_num": gpu.height}
    for kind, part in (("cpu", cpu), ("gpu", gpu)):
        row[f"avg_run_time_{kind}"] = _ended(part)["duration"].mean()
        row[f"avg_que_time_{kind}"] = part["queue"].mean()
        row[f"med_run_time_{kind}"] = _ended(part)["duration"].median()
        row[f"med_que_time_{kind}"] = part["queue"].median()
    row["avg_gpu_num"] = gpu["gpu_num"].mean()
    row["med_gpu_num"] = gpu["gpu_num"].median()
    for short, grp in (("complete", "COMPLETED"), ("cancel", "CANCELLED"), ("fail", "FAILED")):
        for suffix, part in (("", jobs), ("_cpu", cpu), ("_gpu", gpu)):
            known = part["grp"].drop_nulls().filter(part["grp"].drop_nulls() != "UNFINISHED")
            row[f"{short}_rate{suffix}"] = (known == grp).sum() / known.len() if known.len() else None
        hit = jobs.filter(pl.col("grp") == grp)
        final = jobs["grp"].is_in(["COMPLETED", "CANCELLED", "FAILED"]).sum()  # none: no GPU time by final state
        row[f"{short}_gpu_time"] = float((hit["gpu_num"].cast(pl.Int64) * hit["duration"]).sum()) if final else None
    return row


def ref_utilization_minutes(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster and minute, by expanding every GPU job into the minutes it covers."""
    period = ref_period(ds, flt)
    if period.is_empty() or ref_jobs(ds, flt, window=False).is_empty():
        return pl.DataFrame(schema=queries_series.UTIL_SCHEMA)
    start, end = period.row(0)
    start = start.replace(second=0, microsecond=0)
    expanded = _expand_minutes(ds, flt, start, end, ["cluster"])
    minutes = pl.datetime_range(start, end, "1m", closed="left", eager=True).alias("time").to_frame()
    grid = pl.DataFrame({"cluster": ref_clusters(ds, flt)}).join(minutes, how="cross")
    frame = grid.join(expanded, on=["cluster", "time"], how="left").fill_null(0)
    caps = [
        {"cluster": c, "date": d, "total_gpu_num": ref_capacity(ds, flt, c, d)}
        for c in ref_clusters(ds, flt)
        for d in _days(start, end)
    ]
    caps_df = pl.DataFrame(caps, schema={"cluster": pl.String(), "date": pl.Date(), "total_gpu_num": pl.Int64()})
    frame = frame.with_columns(date=pl.col("time").dt.date()).join(caps_df, on=["cluster", "date"], how="left")
    total = pl.col("total_gpu_num")
    frame = frame.with_columns(
        running_gpu_num=pl.when(total.is_null() | (pl.col("running_gpu_num") <= total))
        .then(pl.col("running_gpu_num"))
        .otherwise(total)
    )
    for out, col in (
        ("gpu_utilization", "running_gpu_num"),
        ("gpu_utilization_multi", "running_gpu_multi"),
        ("gpu_utilization_single", "running_gpu_single"),
    ):
        frame = frame.with_columns(pl.when(total > 0).then((pl.col(col) / total).round(3)).alias(out))
    return frame.select(queries_series.UTIL_SCHEMA.keys()).cast(queries_series.UTIL_SCHEMA).sort("cluster", "time")


def _expand_minutes(ds: Dataset, flt: JobFilter, start: datetime, end: datetime, by: list[str]) -> pl.DataFrame:
    jobs = ref_jobs(ds, flt, window=False).filter((pl.col("gpu_num") > 0) & pl.col("start_time").is_not_null())
    stop = pl.coalesce("end_time", pl.col("start_time") + pl.duration(seconds="duration"))
    jobs = jobs.with_columns(
        time=pl.datetime_ranges(pl.col("start_time").dt.truncate("1m"), stop.dt.truncate("1m"), "1m")
    ).explode("time")
    jobs = jobs.filter((pl.col("time") >= start) & (pl.col("time") < end))
    g = pl.col("gpu_num").cast(pl.Int64)
    return jobs.group_by(*by, "time").agg(
        running_gpujob_num=pl.len().cast(pl.Int64),
        running_gpu_num=g.sum(),
        running_gpu_multi=g.filter(g > 1).sum(),
        running_gpu_single=g.filter(g == 1).sum(),
    )


def ref_monthly_utilization(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Monthly means of the reference per-minute utilisation, in %."""
    m = ref_utilization_minutes(ds, flt).with_columns(month=pl.col("time").dt.month_start().dt.date())
    return (
        m.group_by("cluster", "month")
        .agg(
            gpu_utilization_pct=pl.col("gpu_utilization").mean() * 100,
            multi_gpu_utilization_pct=pl.col("gpu_utilization_multi").mean() * 100,
            single_gpu_utilization_pct=pl.col("gpu_utilization_single").mean() * 100,
        )
        .sort("cluster", "month")
    )


def ref_diurnal_utilization(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Hour-of-day means of the reference per-minute utilisation, in %."""
    m = ref_utilization_minutes(ds, flt).with_columns(hour=pl.col("time").dt.hour().cast(pl.Int64))
    return (
        m.group_by("cluster", "hour")
        .agg(gpu_utilization_pct=pl.col("gpu_utilization").mean() * 100)
        .sort("cluster", "hour")
    )


def ref_utilization_resampled(ds: Dataset, flt: JobFilter = NO_FILTER, every: str = "1h") -> pl.DataFrame:
    """Bucket means of the reference per-minute series, with the bucket's lowest and highest GPU utilisation."""
    m = ref_utilization_minutes(ds, flt)
    cols = [c for c in m.columns if c not in ("cluster", "time")]
    out = (
        m.with_columns(pl.col("time").dt.truncate(every))
        .group_by("cluster", "time")
        .agg(
            pl.col(cols).mean(),
            pl.col("gpu_utilization").min().alias("gpu_utilization_min"),
            pl.col("gpu_utilization").max().alias("gpu_utilization_max"),
        )
    )
    return out.with_columns(pl.exclude("cluster", "time").cast(pl.Float64)).sort("cluster", "time")


def ref_throughput_10min(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """10-minute event counts by truncating each event time."""
    period = ref_period(ds, flt)
    jobs = ref_jobs(ds, flt, window=False)
    if period.is_empty() or jobs.is_empty():
        return pl.DataFrame(schema=queries_series.THROUGHPUT_SCHEMA)
    start, end = period.row(0)
    minutes = pl.datetime_range(start, end, "1m", closed="left", eager=True)
    bins = minutes.dt.truncate("10m").unique().sort().alias("time")
    out = pl.DataFrame({"cluster": ref_clusters(ds, flt)}).join(bins.to_frame(), how="cross")
    jobs = jobs.with_columns(
        dequeue_time=pl.coalesce("start_time", "end_time"),
        end_time=pl.coalesce("end_time", pl.col("start_time") + pl.duration(seconds="duration")),
    )
    for kind in ("submit", "start", "end", "dequeue"):
        ev = jobs if kind in ("submit", "dequeue") else jobs.filter(pl.col("start_time").is_not_null())
        ev = ev.filter((pl.col(f"{kind}_time") >= start) & (pl.col(f"{kind}_time") < end))
        counts = ev.group_by("cluster", pl.col(f"{kind}_time").dt.truncate("10m").alias("time")).agg(
            pl.len().cast(pl.Int64).alias(f"{kind}_job_all"),
            (pl.col("gpu_num") != 0).sum().cast(pl.Int64).alias(f"{kind}_gpu_job"),
            pl.col("gpu_num").cast(pl.Int64).sum().alias(f"{kind}_gpu_num"),
        )
        out = out.join(counts, on=["cluster", "time"], how="left")
    return out.fill_null(0).select(queries_series.THROUGHPUT_SCHEMA.keys()).sort("cluster", "time")


def ref_monthly_jobs(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Job counts per cluster and submit month."""
    jobs = ref_jobs(ds, flt).with_columns(month=pl.col("submit_time").dt.month_start().dt.date())
    g = pl.col("gpu_num")
    return (
        jobs.group_by("cluster", "month")
        .agg(
            job_num=pl.len(),
            cpu_job_num=(g == 0).sum(),
            gpu_job_num=(g > 0).sum(),
            single_gpu_jobs=(g == 1).sum(),
            multi_gpu_jobs=(g > 1).sum(),
        )
        .with_columns(pl.exclude("cluster", "month").cast(pl.Int64))
        .sort("cluster", "month")
    )


def ref_hour_weekday_submissions(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Submissions per cluster, weekday and hour, with a Python loop."""
    jobs = ref_jobs(ds, flt)
    rows = []
    for cluster in sorted(set(jobs["cluster"])):
        times = jobs.filter(pl.col("cluster") == cluster)["submit_time"].to_list()
        for wd in range(7):
            for h in range(24):
                rows.append((cluster, wd, h, sum(1 for t in times if t.weekday() == wd and t.hour == h)))
    schema = {"cluster": pl.String(), "weekday": pl.Int64(), "hour": pl.Int64(), "jobs": pl.Int64()}
    return pl.DataFrame(rows, schema=schema, orient="row")


def ref_diurnal_submissions(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Mean GPU-job submissions per clock hour, from hourly counts over the period's hours."""
    period = ref_period(ds, flt)
    jobs = ref_jobs(ds, flt, window=False)
    out_schema = {"cluster": pl.String(), "hour": pl.Int64(), "gpu_jobs_per_hour": pl.Float64()}
    if period.is_empty():
        return pl.DataFrame(schema=out_schema)
    start, end = period.row(0)
    jobs = jobs.filter((pl.col("submit_time") >= start) & (pl.col("submit_time") < end))
    if jobs.is_empty():
        return pl.DataFrame(schema=out_schema)
    hours = pl.datetime_range(start, end, "1m", closed="left", eager=True).dt.truncate("1h").unique().alias("t")
    grid = pl.DataFrame({"cluster": ref_clusters(ds, flt)}).join(hours.to_frame(), how="cross")
    counts = (
        jobs.filter(pl.col("gpu_num") > 0).group_by("cluster", pl.col("submit_time").dt.truncate("1h").alias("t")).len()
    )
    hourly = grid.join(counts, on=["cluster", "t"], how="left").fill_null(0)
    out = hourly.group_by("cluster", pl.col("t").dt.hour().cast(pl.Int64).alias("hour")).agg(
        gpu_jobs_per_hour=pl.col("len").mean()
    )
    return out.sort("cluster", "hour").cast(out_schema)  # type: ignore[arg-type]


def _threshold_cdf(values: pl.DataFrame, col: str, xs: list[int]) -> pl.DataFrame:
    rows = []
    for cluster in sorted(set(values["cluster"])):
        v = values.filter(pl.col("cluster") == cluster)[col]
        rows += [(cluster, x, 100 * (v <= x).sum() / v.len()) for x in xs]
    return pl.DataFrame(rows, schema={"cluster": pl.String(), "x_s": pl.Int64(), "pct": pl.Float64()}, orient="row")


def ref_duration_cdf(ds: Dataset, flt: JobFilter = NO_FILTER, kind: str = "gpu", pooled: str = "") -> pl.DataFrame:
    """% jobs of the kind with duration <= x for x = 1, 2, 4, ... 2^21 s, per cluster and (pooled) all together."""
    jobs = ref_jobs(ds, flt).filter(pl.col("gpu_num") > 0 if kind == "gpu" else pl.col("gpu_num") == 0)
    ended = _ended(jobs).drop_nulls("duration")
    if pooled and ended.height:
        ended = pl.concat([ended, ended.with_columns(pl.lit(pooled).alias("cluster"))])
    return _threshold_cdf(ended, "duration", [2**k for k in range(22)])


def ref_queue_cdf(ds: Dataset, flt: JobFilter = NO_FILTER, kind: str = "gpu") -> pl.DataFrame:
    """% jobs of the kind (with a known queue delay) with queue <= x for x = 1, 2, 4, ... 2^21 s."""
    jobs = ref_jobs(ds, flt).filter(pl.col("gpu_num") > 0 if kind == "gpu" else pl.col("gpu_num") == 0)
    return _threshold_cdf(jobs.drop_nulls("queue"), "queue", [2**k for k in range(22)])


def ref_gpu_num_cdf(ds: Dataset, flt: JobFilter = NO_FILTER, weight: str = "jobs") -> pl.DataFrame:
    """% GPU jobs (or GPU time) with gpu_num <= each threshold; ">64" = all."""
    jobs = ref_jobs(ds, flt).filter(pl.col("gpu_num") > 0)
    jobs = jobs.with_columns(
        w=pl.lit(1.0) if weight == "jobs" else (pl.col("gpu_num") * pl.col("duration")).cast(pl.Float64)
    )
    rows = []
    for cluster in sorted(set(jobs["cluster"])):
        part = jobs.filter(pl.col("cluster") == cluster)
        total = part["w"].sum()
        for label in q.GPU_NUM_X:
            hit = part if label == ">64" else part.filter(pl.col("gpu_num") <= int(label))
            rows.append((cluster, label, 100 * hit["w"].sum() / total if total > 0 else None))
    return pl.DataFrame(rows, schema={"cluster": pl.String(), "x_gpus": pl.String(), "pct": pl.Float64()}, orient="row")


def _state_shares(jobs: pl.DataFrame, key: str, labels: list[str]) -> pl.DataFrame:
    rows = []
    for label in labels:
        part = jobs.filter(pl.col(key) == label)
        if part.height:
            rows.append({key: label, **{n: 100 * (part["grp"] == g).sum() / part.height for n, g in _STATE_SHARES}})
    schema = {key: pl.String(), **dict.fromkeys((n for n, _ in _STATE_SHARES), pl.Float64())}
    return pl.DataFrame(rows, schema=schema)


def ref_final_state_by_gpu_num(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Final-state shares of GPU jobs with exactly 1, 2, 4, 8, 16, 32 and >= 64 GPUs."""
    jobs = _with_group(ref_jobs(ds, flt)).drop_nulls("grp").filter(pl.col("grp") != "UNFINISHED")
    label = pl.when(pl.col("gpu_num") >= 64).then(pl.lit(">=64")).otherwise(pl.col("gpu_num").cast(pl.String))
    return _state_shares(jobs.with_columns(b=label), "b", list(q.STATE_BUCKETS)).rename({"b": "gpu_num"})


def ref_final_state_cpu_vs_gpu(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Final-state shares of CPU and of GPU jobs."""
    jobs = _with_group(ref_jobs(ds, flt)).drop_nulls("grp").filter(pl.col("grp") != "UNFINISHED")
    kind = pl.when(pl.col("gpu_num") > 0).then(pl.lit("GPU")).otherwise(pl.lit("CPU"))
    return _state_shares(jobs.with_columns(job_type=kind), "job_type", ["CPU", "GPU"])


def ref_gpu_time_share_by_state(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """GPU time and its share per final-state group (jobs of unknown state left out)."""
    jobs = _with_group(ref_jobs(ds, flt)).drop_nulls("grp")
    schema = {"state_group": pl.String(), "gpu_time": pl.Float64(), "pct": pl.Float64()}
    if jobs.is_empty():
        return pl.DataFrame(schema=schema)
    groups = ["COMPLETED", "CANCELLED", "FAILED"] + (["UNFINISHED"] if (jobs["grp"] == "UNFINISHED").any() else [])
    times = {
        g: float((jobs.filter(pl.col("grp") == g).select(pl.col("gpu_num") * pl.col("duration"))).sum().item())
        for g in groups
    }
    total = sum(times.values())
    rows = [(g, t, 100 * t / total if total else None) for g, t in times.items()]
    return pl.DataFrame(rows, schema=schema, orient="row")


def ref_user_table(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """cluster_user.pkl fields per (cluster, user), one user at a time."""
    jobs = ref_jobs(ds, flt).drop_nulls("user")
    rows = []
    for (cluster, user), part in sorted(jobs.group_by("cluster", "user"), key=lambda kv: kv[0]):
        rows.append({"cluster": cluster, "user": user, **_user_row(part)})
    out = pl.DataFrame(rows, schema=queries_users.USER_SCHEMA)
    return out.sort(["cluster", "job_num", "user"], descending=[False, True, False])


def _mean_or_zero(s: pl.Series) -> float:
    return float(s.mean()) if s.len() else 0.0  # type: ignore[arg-type]


def _user_row(part: pl.DataFrame) -> dict:
    gpu, cpu = part.filter(pl.col("gpu_num") > 0), part.filter(pl.col("gpu_num") == 0)
    row = {
        "cpu_only": gpu.is_empty(),
        "vc_list": sorted(set(part["vc"])),
        "vc_num": len(set(part["vc"])),
        "vc_list_gpu": sorted(set(gpu["vc"])),
        "vc_num_gpu": len(set(gpu["vc"])),
        "job_num": part.height,
        "gpu_job_num": gpu.height,
        "cpu_job_num": cpu.height,
        "avg_run_time": part["duration"].mean(),
        "avg_gpu_run_time": _mean_or_zero(gpu["duration"]),
        "avg_cpu_run_time": _mean_or_zero(cpu["duration"]),
        "avg_pend_time": part["queue"].mean(),
        "avg_gpu_pend_time": _mean_or_zero(gpu["queue"].drop_nulls()),
        "avg_cpu_pend_time": _mean_or_zero(cpu["queue"].drop_nulls()),
        "avg_gpu_num": part["gpu_num"].mean(),
        "avg_cpu_num": part["cpu_num"].mean(),
        "total_gpu_time": float((gpu["gpu_num"].cast(pl.Int64) * gpu["duration"]).sum()),
        "total_cpu_time": float((part["cpu_num"] * part["duration"]).sum()),
        "total_cpu_only_time": float((cpu["cpu_num"] * cpu["duration"]).sum()),
        "total_gpu_pend_time": float(gpu["queue"].sum()),
    }
    for name, state in (("completed", "COMPLETED"), ("cancelled", "CANCELLED"), ("failed", "FAILED")):
        for suffix, sub in (("", part), ("_gpu", gpu), ("_cpu", cpu)):
            row[f"{name}{suffix}_percent"] = (sub["state"] == state).sum() / sub.height if sub.height else 0.0
    return row


def ref_user_concentration(ds: Dataset, flt: JobFilter = NO_FILTER, metric: str = "gpu_time") -> pl.DataFrame:
    """Cumulative share of the top users on x = linspace(0, 100, n), interpolated with numpy at integer x."""
    users = ref_user_table(ds, flt)
    col = q.CONCENTRATION_METRICS[metric]
    rows = []
    for cluster in sorted(set(users["cluster"])):
        values = np.sort(users.filter(pl.col("cluster") == cluster)[col].to_numpy())[::-1]
        if values.sum() <= 0:
            continue
        y = 100 * np.cumsum(values) / values.sum()
        x = np.linspace(0, 100, len(values))
        rows += [(cluster, p, float(np.interp(p, x, y))) for p in range(101)]
    schema = {"cluster": pl.String(), "user_pct": pl.Int64(), "share_pct": pl.Float64()}
    return pl.DataFrame(rows, schema=schema, orient="row")


def ref_user_completion_histogram(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """numpy histogram (10 bins over 0-100) of each user's GPU-job completion % (0 for CPU-only users)."""
    jobs = ref_jobs(ds, flt).drop_nulls("user")
    schema = {"bin": pl.String(), "users": pl.Int64()}
    if jobs.is_empty():
        return pl.DataFrame(schema=schema)
    ratios = []
    for _, part in jobs.group_by("user"):
        gpu = part.filter(pl.col("gpu_num") > 0)
        ratios.append(100 * (gpu["state"] == "COMPLETED").sum() / gpu.height if gpu.height else 0.0)
    counts, _ = np.histogram(ratios, bins=10, range=(0, 100))
    return pl.DataFrame({"bin": list(q.HIST_BINS), "users": counts.tolist()}, schema=schema)


def ref_vc_utilization(
    ds: Dataset, flt: JobFilter = NO_FILTER, exclude_days: str = "", top: int | str = 0
) -> pl.DataFrame:
    """Per VC, box statistics of the expanded per-minute VC utilisation (Polars quantiles), mean GPUs over the days
    and job means; excluded days left out; the `top` largest VCs per cluster; duration and queue min-max normalised."""
    period = ref_period(ds, flt)
    if period.is_empty() or ref_jobs(ds, flt, window=False).is_empty():
        return pl.DataFrame(schema=queries_series.VC_UTIL_SCHEMA)
    excluded = [date.fromisoformat(d) for d in exclude_days.split(",") if d]
    start, end = period.row(0)
    start = start.replace(second=0, microsecond=0)
    caps = ds.vc_gpus().filter(pl.col("cluster").is_in(ref_clusters(ds, flt)) & (pl.col("vc") != "*"))
    if flt.vcs:
        caps = caps.filter(pl.col("vc").is_in(list(flt.vcs)))
    last_day = (end - timedelta(microseconds=1)).date()
    caps = caps.filter(pl.col("date").is_between(start.date(), last_day) & ~pl.col("date").is_in(excluded))
    expanded = _expand_minutes(ds, flt, start, end, ["cluster", "vc"]).select(
        "cluster", "vc", "time", "running_gpu_num"
    )
    minutes = pl.datetime_range(start, end, "1m", closed="left", eager=True).alias("time").to_frame()
    grid = caps.select("cluster", "vc").unique().join(minutes, how="cross").with_columns(date=pl.col("time").dt.date())
    per_min = grid.join(caps, on=["cluster", "vc", "date"]).filter(pl.col("gpus") > 0)
    per_min = per_min.join(expanded, on=["cluster", "vc", "time"], how="left").fill_null(0)
    per_min = per_min.with_columns(
        u=100
        * pl.when(pl.col("running_gpu_num") > pl.col("gpus")).then(pl.col("gpus")).otherwise("running_gpu_num")
        / pl.col("gpus")
    )
    rows = []
    jobs = ref_jobs(ds, flt).filter((pl.col("gpu_num") > 0) & ~pl.col("submit_time").dt.date().is_in(excluded))
    for (cluster, vc), part in sorted(per_min.group_by("cluster", "vc"), key=lambda kv: kv[0]):
        u = part["u"]
        q1, q3 = u.quantile(0.25, "linear"), u.quantile(0.75, "linear")
        iqr = q3 - q1  # type: ignore[operator]
        mine = jobs.filter((pl.col("cluster") == cluster) & (pl.col("vc") == vc))
        days = caps.filter((pl.col("cluster") == cluster) & (pl.col("vc") == vc))
        box = {"mean_pct": u.mean(), "median_pct": u.quantile(0.5, "linear"), "q1_pct": q1, "q3_pct": q3}
        box["whisker_low_pct"] = u.filter(u >= q1 - 1.5 * iqr).min()
        box["whisker_high_pct"] = u.filter(u <= q3 + 1.5 * iqr).max()
        job_means = {
            "gpu_jobs": mine.height,
            "avg_gpus_per_job": mine["gpu_num"].mean(),
            "avg_duration_s": mine["duration"].mean(),
            "avg_queue_s": mine["queue"].mean(),
        }
        rows.append({"cluster": cluster, "vc": vc, "mean_gpus": days["gpus"].mean(), **box, **job_means})
    frame = pl.DataFrame(rows, schema={k: v for k, v in queries_series.VC_UTIL_SCHEMA.items() if "norm" not in k})
    if int(top) > 0 and frame.height:
        frame = pl.concat(
            part.sort(["mean_gpus", "gpu_jobs", "vc"], descending=[True, True, False]).head(int(top))
            for _, part in frame.group_by("cluster", maintain_order=True)
        )
    norms = []
    for col in ("avg_duration_s", "avg_queue_s"):
        low, high = pl.col(col).min().over("cluster"), pl.col(col).max().over("cluster")
        name = "norm_" + col.removesuffix("_s") + "_pct"
        norms.append(pl.when(high > low).then(100 * (pl.col(col) - low) / (high - low)).alias(name))
    return frame.with_columns(norms).sort("cluster", "vc").cast(queries_series.VC_UTIL_SCHEMA)


def ref_job_states(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """Per cluster: jobs per state group and the GPU-seconds of all its jobs."""
    jobs = _with_group(ref_jobs(ds, flt))
    rows = []
    for cluster in sorted(set(jobs["cluster"])):
        part = jobs.filter(pl.col("cluster") == cluster)
        row = {"cluster": cluster}
        for g in ("COMPLETED", "CANCELLED", "FAILED", "UNFINISHED"):
            row[f"{g.lower()}_jobs"] = (part["grp"] == g).sum()
        row["unknown_state_jobs"] = part["grp"].is_null().sum()
        row["gpu_time"] = float((part["gpu_num"].cast(pl.Int64) * part["duration"]).sum())
        rows.append(row)
    return pl.DataFrame(rows, schema=queries_jobs.JOB_STATES_SCHEMA)


REFERENCES = {
    "job_states": ref_job_states,
    "cluster_summary": ref_cluster_summary,
    "utilization_minutes": ref_utilization_minutes,
    "utilization_resampled": ref_utilization_resampled,
    "throughput_10min": ref_throughput_10min,
    "monthly_jobs": ref_monthly_jobs,
    "monthly_utilization": ref_monthly_utilization,
    "diurnal_utilization": ref_diurnal_utilization,
    "diurnal_submissions": ref_diurnal_submissions,
    "hour_weekday_submissions": ref_hour_weekday_submissions,
    "duration_cdf": ref_duration_cdf,
    "gpu_num_cdf": ref_gpu_num_cdf,
    "final_state_by_gpu_num": ref_final_state_by_gpu_num,
    "final_state_cpu_vs_gpu": ref_final_state_cpu_vs_gpu,
    "gpu_time_share_by_state": ref_gpu_time_share_by_state,
    "queue_cdf": ref_queue_cdf,
    "user_table": ref_user_table,
    "user_concentration": ref_user_concentration,
    "user_completion_histogram": ref_user_completion_histogram,
    "vc_utilization": ref_vc_utilization,
    "period": ref_period,
}


def ref_wait_holders(ds: Dataset, job: dict) -> pl.DataFrame:
    """The GPU jobs of the job's cluster and VC running at some time between its submit and start: job_id, gpu_num and
    the seconds each held its GPUs in that wait."""
    jobs = ds.jobs().collect()
    t0, t1 = job["submit_time"], job["start_time"]
    job_end = pl.coalesce("end_time", pl.col("start_time") + pl.duration(seconds=pl.col("duration")))
    running = job_end > t0
    held = jobs.filter(
        (pl.col("cluster") == job["cluster"])
        & (pl.col("vc") == job["vc"])
        & (pl.col("gpu_num") > 0)
        & pl.col("start_time").is_not_null()
        & (pl.col("start_time") < t1)
        & running.fill_null(False)
        & ~(pl.col("job_id") == job["job_id"])
    )
    overlap = pl.min_horizontal(job_end, pl.lit(t1)) - pl.max_horizontal(pl.col("start_time"), pl.lit(t0))
    return held.select("job_id", "gpu_num", overlap.dt.total_seconds().alias("held_s"))


def ref_queued_jobs(ds: Dataset, cluster: str, vc: str, times: list[datetime]) -> list[int]:
    """At each time, the jobs of the VC submitted at or before it and not started by then: started later, or never
    started and ended (left the queue) later, or never started, no end and unfinished."""
    jobs = ds.jobs().collect().filter((pl.col("cluster") == cluster) & (pl.col("vc") == vc))
    out = []
    for t in times:
        unstarted = pl.col("start_time").is_null() & (
            (pl.col("end_time") > t) | (pl.col("end_time").is_null() & pl.col("state").is_in(UNFINISHED))
        )
        waiting = (pl.col("submit_time") <= t) & ((pl.col("start_time") > t) | unstarted)
        out.append(jobs.filter(waiting.fill_null(False)).height)
    return out
