"""Study queries on real public data bundled in the repository (analytics/reference/ and data/public/, sources in
data/SOURCES.md): Earth's daily VC capacities and the Philly GPU job log."""

from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path

import polars as pl
import pytest

from analytics import queries, reference, store
from analytics.filters import JobFilter
from analytics.ingest import ingest
from analytics.ingest.bundled import PHILLY_JOBS

REFERENCE_DIR = Path(reference.__file__).parent
REFERENCE = REFERENCE_DIR / "helios_reference.json"


def earth_vc_gpus() -> pl.DataFrame:
    """The real Earth cluster_gpu_number.csv as canonical capacity rows (the `total` column is their sum)."""
    wide = pl.read_csv(REFERENCE_DIR / "earth_vc_gpu_number.csv", try_parse_dates=True)
    long = wide.drop("total").unpivot(index="date", variable_name="vc", value_name="gpus")
    return long.with_columns(cluster=pl.lit("Earth"), date=pl.col("date").cast(pl.Date))


@pytest.fixture(scope="module")
def earth(tmp_path_factory):
    """Earth's real capacities with two GPU jobs on vc6YE (8 GPUs, 2020-05-01 00:00-00:59 and 2020-09-28 23:59)."""
    jobs = pl.DataFrame(
        {
            "cluster": ["Earth", "Earth"],
            "job_id": [1, 2],
            "user": ["u1", "u2"],
            "vc": ["vc6YE", "vc6YE"],
            "gpu_num": [8, 8],
            "state": ["COMPLETED", "FAILED"],
            "submit_time": [datetime(2020, 5, 1), datetime(2020, 9, 28, 23, 59)],
            "start_time": [datetime(2020, 5, 1), datetime(2020, 9, 28, 23, 59)],
            "end_time": [datetime(2020, 5, 1, 0, 59, 59), datetime(2020, 9, 28, 23, 59, 30)],
            "duration": [3599, 30],
            "queue": [0, 0],
        }
    )
    return store.write_dataset(
        "earth", jobs, earth_vc_gpus(), {"clusters": ["Earth"]}, root=tmp_path_factory.mktemp("d")
    )


def test_earth_gpu_num_is_the_published_mean_daily_total(earth):
    summary = queries.cluster_summary(earth)
    published = json.loads(REFERENCE.read_text())["summary"]["Earth"]["gpu_num"]
    assert (
        summary.select("id", "gpu_num").rows()
        == [("Earth", published), ("total", published)]
        == [
            ("Earth", 997),
            ("total", 997),
        ]
    )


def test_earth_period_is_the_artifacts_minute_grid(earth):
    assert queries.period(earth).row(0) == (datetime(2020, 4, 1), datetime(2020, 9, 29))
    minutes = queries.utilization_minutes(earth)
    assert minutes.height == 260_640  # spec §2: 2020-04-01 00:00 .. 2020-09-28 23:59
    busy = minutes.filter(pl.col("running_gpu_num") > 0)
    assert busy.height == 60 + 1
    may_1 = busy.row(0, named=True)
    assert may_1["total_gpu_num"] == 856  # Earth's GPUs that day = the CSV's total column
    assert may_1["gpu_utilization"] == round(8 / 856, 3)


def test_earth_may_vc_gpus_are_those_of_fig_4(earth):
    may = JobFilter(start=datetime(2020, 5, 1), end=datetime(2020, 6, 1))
    vcs = queries.vc_utilization(earth, may, exclude_days="2020-05-10", top=10)
    published = json.loads(REFERENCE.read_text())["earth_may_vc_utilization"]
    # The 10 largest: vccaA and vcSoL tie at 32 GPUs and neither has a GPU job here, so the name decides (the paper
    # took vccaA, the earlier column of the capacity file).
    assert set(vcs["vc"]) == set(published) - {"vccaA"} | {"vcSoL"}
    # VC size = mean GPUs over the 30 days: the file books every GPU on vcIya on May 9 (0 for the others).
    gpus = dict(vcs.select("vc", "mean_gpus").rows())
    assert gpus == pytest.approx(
        {vc: v["gpus"] * 29 / 30 for vc, v in published.items() if vc != "vccaA"} | {"vcSoL": 32 * 29 / 30}
    )
    row = vcs.filter(pl.col("vc") == "vc6YE").row(0, named=True)
    # One job: 8 of 208 GPUs for 60 minutes; May 9 (0 GPUs) and May 10 (excluded) leave 29 days of minutes.
    assert row["mean_pct"] == pytest.approx(100 * 8 / 208 * 60 / (29 * 1440))
    assert (row["avg_gpus_per_job"], row["avg_duration_s"]) == (8.0, 3599.0)


@pytest.fixture(scope="module")
def philly(tmp_path_factory):
    """The real Philly GPU job log (82,247 jobs; no user, state, start or queue) ingested once."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HELIOS_DATA_DIR", str(tmp_path_factory.mktemp("data")))
        return ingest(PHILLY_JOBS, "philly", "philly")


@pytest.mark.parametrize("name", sorted(queries.QUERIES))
def test_every_query_runs_on_philly(philly, name):
    out = queries.QUERIES[name](philly)
    assert isinstance(out, pl.DataFrame)
    if name in ("user_table", "user_concentration", "user_completion_histogram", "queue_cdf"):
        assert out.is_empty()  # Philly publishes no user and no queue delay


def test_philly_summary_and_unknown_states(philly):
    summary = queries.cluster_summary(philly).row(0, named=True)
    assert (summary["id"], summary["job_num"], summary["gpu_job_num"], summary["gpu_num"]) == (
        "Philly",
        82_247,
        82_247,
        352 * 8,
    )
    assert summary["complete_rate"] is None and summary["fail_gpu_time"] is None  # not in this trace, never 0
    assert queries.final_state_by_gpu_num(philly).is_empty()
    assert queries.monthly_jobs(philly)["month"].to_list() == [date(2017, m, 1) for m in (9, 10, 11, 12)]
    cdf = queries.duration_cdf(philly)["pct"]
    assert cdf.is_sorted() and cdf[0] > 0 and cdf[-1] <= 100
