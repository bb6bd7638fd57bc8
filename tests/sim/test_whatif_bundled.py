"""The what-if scenario on the bundled public datasets: it runs where it applies and says why where it does not."""

from __future__ import annotations

import json
from datetime import datetime

import polars as pl
import pytest

import cli
from analytics import store
from analytics.ingest.bundled import build
from sim.scenario import ScenarioConfig, open_request, run_request
from sim.scenario.config import CES_MIN_HISTORY_DAYS, CesOptions, ScenarioError


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundled")
    for name in ("philly", "alibaba"):
        build(name, root)
    return root


def _placed(result, policy: str) -> tuple[int, int]:
    """(jobs, placed jobs) of one policy's replay."""
    records = result.records.filter(pl.col("scheme") == policy)
    return records.height, int(records["placed"].sum())


@pytest.mark.parametrize(
    ("dataset", "cluster", "start", "end"),
    [("philly", "Philly", "2017-12-01", "2017-12-07"), ("alibaba", "Alibaba-openb", "2023-05-20", "2023-05-30")],
)
def test_fifo_sjf_qssf_place_every_job(root, dataset, cluster, start, end):
    config = ScenarioConfig(dataset=dataset, cluster=cluster, start=start, end=end, policies=("fifo", "sjf", "qssf"))
    result = run_request(open_request(config, root))
    for policy in ("fifo", "sjf", "qssf"):
        jobs, placed = _placed(result, policy)
        assert jobs > 100 and placed >= 0.99 * jobs, (policy, jobs, placed)


def test_alibaba_vcs_share_the_whole_cluster_pool(root):
    config = ScenarioConfig(dataset="alibaba", cluster="Alibaba-openb", start="2023-05-20", policies=("fifo",))
    result = run_request(open_request(config, root))
    jobs, placed = _placed(result, "fifo")
    assert result.vc_nodes == {"*": 6212 // 8} and placed == jobs > 0


def test_ces_without_start_times_is_refused_before_running(root):
    config = ScenarioConfig(dataset="philly", cluster="Philly", start="2017-12-01", ces=CesOptions(enabled=True))
    with pytest.raises(ScenarioError, match="CES does not apply to dataset philly: the Philly job list has no start"):
        open_request(config, root)


def test_ces_needs_history_before_the_window(root):
    config = ScenarioConfig(dataset="alibaba", cluster="Alibaba-openb", ces=CesOptions(enabled=True))
    with pytest.raises(ScenarioError, match=f"{CES_MIN_HISTORY_DAYS} days or more before the window"):
        open_request(config, root)
    later = ScenarioConfig(
        dataset="alibaba", cluster="Alibaba-openb", start="2023-05-01", policies=("fifo",), ces=CesOptions(enabled=True)
    )
    result = run_request(open_request(later, root))
    assert result.ces["metrics"]["steps"] > 0


def test_helios_whatif_runs_the_panel_scenario(root, monkeypatch, capsys):
    monkeypatch.setenv("HELIOS_DATA_DIR", str(root))
    argv = ["whatif", "--dataset", "alibaba", "--cluster", "Alibaba-openb", "--start", "2023-05-25", "--json"]
    assert cli.main([*argv, "--policies", "fifo,qssf"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [row["scheme"] for row in out["summary"]] == ["recorded", "twin", "fifo", "qssf"]
    assert out["vc_nodes"] == {"*": 776} and out["ces"] is None
    assert out["baseline"] == "twin" and out["twin"]["source"] == "calibrated" and out["twin"]["rules"]
    assert out["replay"]["band"]["avg_queue_x"] >= 1 and out["replay"]["lines"][-1]["metric"].startswith("start order")


def test_helios_whatif_and_sweep_refuse_what_the_dataset_cannot_do(root, monkeypatch, capsys):
    monkeypatch.setenv("HELIOS_DATA_DIR", str(root))
    scope = ["--dataset", "philly", "--cluster", "Philly", "--start", "2017-12-01", "--ces"]
    assert cli.main(["whatif", *scope]) == 2
    assert cli.main(["sweep", *scope, "--grid", "load_factor=1,2"]) == 2
    err = capsys.readouterr().err
    assert err.count("CES does not apply to dataset philly") == 2


def test_recorded_jcts_leave_out_jobs_that_had_not_ended(root):
    config = ScenarioConfig(dataset="alibaba", cluster="Alibaba-openb", start="2023-05-20", policies=("fifo",))
    result = run_request(open_request(config, root))
    recorded = result.records.filter(pl.col("scheme") == "recorded")
    jobs = store.open_dataset("alibaba", root).jobs().select("job_id", "state").collect()
    joined = recorded.join(jobs, on="job_id")
    unfinished = joined.filter(pl.col("state").is_in(["RUNNING", "PENDING"]))
    assert unfinished.height > 1000 and unfinished["jct_s"].null_count() == unfinished.height
    ended = joined.filter(pl.col("state").is_in(["COMPLETED", "FAILED"]) & pl.col("placed"))
    assert ended["jct_s"].null_count() == 0
    # jobs that started after the window's end are left out of the figures (and counted)
    end_s = (datetime.fromisoformat(result.window[1]) - datetime.fromisoformat(result.window[0])).total_seconds()
    row = result.summary.filter(pl.col("scheme") == "recorded").row(0, named=True)
    assert row["avg_jct_s"] == pytest.approx(ended.filter(pl.col("start_s") <= end_s)["jct_s"].mean(), rel=1e-3)
    assert row["waiting_at_end"] == recorded.filter(pl.col("placed") & (pl.col("start_s") > end_s)).height


def test_whatif_jobs_out_and_start_order_tau(root, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("HELIOS_DATA_DIR", str(root))
    argv = ["whatif", "--dataset", "alibaba", "--cluster", "Alibaba-openb", "--start", "2023-05-25", "--json"]
    out_file = tmp_path / "jobs.parquet"
    assert cli.main([*argv, "--policies", "fifo,sjf", "--jobs-out", str(out_file)]) == 0
    out = json.loads(capsys.readouterr().out)
    taus = {row["scheme"]: row["start_order_tau"] for row in out["summary"]}
    assert taus["recorded"] is None and 0.9 < taus["fifo"] <= 1  # a lightly loaded pool: nearly the recorded order
    assert {r["scheme"] for r in out["per_account"]} == {"recorded", "twin", "fifo", "sjf"}
    jobs = pl.read_parquet(out_file)
    assert jobs.columns == [
        "scheme", "job_id", "user", "account", "partition", "gpu_num",
        "submit_time", "start_time", "end_time", "queue_s",
    ]  # fmt: skip
    fifo = jobs.filter(pl.col("scheme") == "fifo")
    assert fifo.height == jobs.filter(pl.col("scheme") == "recorded").height
    started = fifo.filter(pl.col("start_time").is_not_null())
    waited = (started["start_time"] - started["submit_time"]).dt.total_seconds()
    assert (waited == started["queue_s"]).all()
    csv_file = tmp_path / "jobs.csv"
    assert cli.main([*argv, "--policies", "fifo", "--jobs-out", str(csv_file)]) == 0
    assert csv_file.read_text().splitlines()[0].startswith("scheme,job_id,user,account")
