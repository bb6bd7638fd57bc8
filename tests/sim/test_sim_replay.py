"""slurm_schedule, the demo generator's queue on the one Slurm model: on random traces and daily VC capacities, the
GPUs in use never exceed a day's given capacity but by the jobs started before its last drop (a drained node's jobs
run on), and the capacities it returns are the given ones raised only from a drop on, never above the VC's most."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics import schema
from analytics.fidelity.capacity import peak_excess_gpus
from analytics.synth.build import apply_schedule
from sim.synthetic_queue.calibration import slurm_schedule

T0 = datetime(2020, 4, 1)


@st.composite
def traces(draw):
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.integers(0, 20_000), min_size=n, max_size=n))
    return (
        np.cumsum(gaps).tolist(),
        draw(st.lists(st.integers(0, 100_000), min_size=n, max_size=n)),
        draw(st.lists(st.sampled_from([1, 2, 4, 8, 16, 64]), min_size=n, max_size=n)),
        draw(st.lists(st.sampled_from([0, 8, 16, 24]), min_size=3, max_size=12)),
    )


def frames(trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    submit, dur, gpu, caps = trace
    n = len(submit)
    jobs = schema.conform_jobs(
        pl.DataFrame(
            {
                "cluster": "C",
                "job_id": np.arange(n),
                "user": "u",
                "vc": "v",
                "gpu_num": gpu,
                "submit_time": [T0 + timedelta(seconds=s) for s in submit],
                "duration": dur,
                "queue": 0,
            }
        )
    )
    days = [date(2020, 4, 1) + timedelta(days=d) for d in range(len(caps))]
    vc_gpus = pl.DataFrame({"cluster": "C", "vc": "v", "date": days, "gpus": caps})
    return jobs, schema.conform_vc_gpus(vc_gpus)


def assert_raised_only_by_drains(held: pl.DataFrame, given: pl.DataFrame) -> None:
    """held (a scheduler's capacities) equals given but on days at or after a drop of its VC, where it is never above
    the most the VC had up to that day."""
    both = given.join(held, on=["cluster", "vc", "date"], suffix="_held").sort("cluster", "vc", "date")
    both = both.with_columns(
        pl.col("gpus").cum_max().over("cluster", "vc").alias("most"),
        (pl.col("gpus").diff().over("cluster", "vc") < 0)
        .fill_null(False)
        .cum_sum()
        .over("cluster", "vc")
        .alias("drops"),
    )
    assert held.height == given.height
    raised = both.filter(pl.col("gpus_held") != pl.col("gpus"))
    assert (raised["gpus_held"] > raised["gpus"]).all()
    assert (raised["drops"] > 0).all() and (raised["gpus_held"] <= raised["most"]).all(), raised


def _in_use_within_capacity(out: pl.DataFrame, caps: list[int]) -> bool:
    """Whether at every start and midnight the GPUs in use are within the day's capacity plus those of the jobs started
    before the day's last drop (ended jobs first at equal seconds)."""
    ran = out.filter(pl.col("start_time").is_not_null())
    start = ((ran["start_time"] - T0).dt.total_seconds()).to_numpy()
    end = ((ran["end_time"] - T0).dt.total_seconds()).to_numpy()
    gpus = ran["gpu_num"].to_numpy()
    drops = [d for d in range(1, len(caps)) if caps[d] < caps[d - 1]]
    for t in np.unique(np.concatenate([start, np.arange(len(caps)) * 86_400])):
        day = min(int(t // 86_400), len(caps) - 1)
        last_drop_s = max((d * 86_400 for d in drops if d <= day), default=-1)
        running = (start <= t) & (end > t)
        carried = gpus[running & (start < last_drop_s)].sum()
        if gpus[running].sum() > caps[day] + carried:
            return False
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces())
def test_usage_stays_within_the_nodes_in_service(trace):
    jobs, vc_gpus = frames(trace)
    timed, held = slurm_schedule(jobs, vc_gpus)
    out = apply_schedule(jobs, timed)
    assert out.height == jobs.height
    assert (out["queue"].drop_nulls() >= 0).all()
    never = out.filter(pl.col("start_time").is_null())
    assert never["queue"].null_count() == never.height
    assert _in_use_within_capacity(out, trace[3])
    assert_raised_only_by_drains(held, vc_gpus)
    assert (peak_excess_gpus(out.lazy(), held)["excess_gpus"].fill_null(0) <= 0).all()


def test_a_job_on_a_node_drained_at_midnight_runs_on_and_its_gpus_count_that_day():
    # 8 GPUs on April 1, none from April 2: the job started at 23:00 runs two hours into April 2
    jobs, vc_gpus = frames(([82_800], [7_200], [8], [8, 0, 0]))
    timed, held = slurm_schedule(jobs, vc_gpus)
    assert timed["start_time"].to_list() == [T0 + timedelta(seconds=82_800)]
    assert held.sort("date")["gpus"].to_list() == [8, 8, 0]
