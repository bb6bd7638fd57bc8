"""`helios simulate` end to end on a small stored dataset and on real Philly rows."""

from __future__ import annotations

import gzip
import json
from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

import cli
from analytics import schema
from analytics.ingest.bundled import PHILLY_JOBS, PHILLY_VC_NODES
from analytics.store import write_dataset

T0 = datetime(2020, 4, 1)


@pytest.fixture
def small_dataset(data_root):
    rng = np.random.default_rng(0)
    n = 300
    submit = [T0 + timedelta(seconds=int(s)) for s in np.sort(rng.integers(0, 3 * 86_400, n))]
    dur = rng.integers(0, 20_000, n)
    queue = rng.integers(0, 100, n)
    jobs = pl.DataFrame(
        {
            "cluster": "Earth",
            "job_id": np.arange(n),
            "user": rng.choice(["ua", "ub", "uc"], n),
            "vc": rng.choice(["vcA", "vcB"], n),
            "gpu_num": rng.choice([0, 1, 2, 8, 16], n),
            "cpu_num": 2.0,
            "node_num": 1,
            "state": "COMPLETED",
            "submit_time": submit,
            "start_time": [s + timedelta(seconds=int(q)) for s, q in zip(submit, queue, strict=True)],
            "duration": dur,
            "queue": queue,
        }
    )
    vc_gpus = pl.DataFrame({"cluster": "Earth", "vc": ["vcA", "vcB"], "date": date(2020, 4, 1), "gpus": [16, 8]})
    write_dataset("tiny", schema.conform_jobs(jobs), schema.conform_vc_gpus(vc_gpus), {"clusters": ["Earth"]})
    return "tiny"


def run_json(capsys, argv):
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("policy", ["fifo", "sjf", "srtf", "qssf", "las"])
def test_simulate_dataset_json(small_dataset, capsys, tmp_path, policy):
    out_dir = tmp_path / "out"
    report = run_json(
        capsys,
        [
            "simulate",
            "--dataset",
            "tiny",
            "--cluster",
            "Earth",
            "--start",
            "2020-04-02",
            "--policy",
            policy,
            "--estimator",
            "history",
            "--json",
            "--out",
            str(out_dir),
        ],
    )
    assert report["policy"] == policy and report["estimator"] == "history"
    assert report["vc_nodes"] == {"vcA": 2, "vcB": 1}
    assert set(report["vcs"]) == {"vcA", "vcB"}
    assert report["jobs"] == report["all"]["jobs"] + report["unplaceable"]
    assert report["unplaceable"] > 0  # 16-GPU jobs cannot fit vcB's single node
    assert report["all"]["avg_jct_s"] >= report["all"]["avg_queue_s"]
    assert set(report["estimator_quality"]) == {"mae_s", "median_ape_pct", "spearman"}
    assert report["recorded"]["all"]["avg_queue_s"] < 100
    jobs = pl.read_parquet(out_dir / "jobs.parquet")
    assert jobs.height == report["jobs"]
    assert pl.read_parquet(out_dir / "timeline.parquet").get_column("used_gpus").max() <= 16


def test_simulate_philly_rows(capsys, tmp_path):
    sample = tmp_path / "philly.csv"
    lines = gzip.decompress(PHILLY_JOBS.read_bytes()).decode().splitlines()[:3000]
    sample.write_text("\n".join(lines) + "\n\n")
    report = run_json(
        capsys,
        [
            "simulate",
            "--philly-csv",
            str(sample),
            "--vc-nodes",
            str(PHILLY_VC_NODES),
            "--policy",
            "qssf",
            "--estimator",
            "noisy-oracle",
            "--seed",
            "6",
            "--json",
        ],
    )
    assert report["cluster"] == "philly"
    assert set(report["vcs"]) <= set(pl.read_csv(PHILLY_VC_NODES).get_column("vc"))
    assert report["all"]["jobs"] > 1000


def test_simulate_reports_bad_input_in_one_line(small_dataset, capsys, tmp_path):
    bad = tmp_path / "nodes.csv"
    bad.write_text("vc,nodes\nvcA,two\n")
    code = cli.main(["simulate", "--dataset", "tiny", "--vc-nodes", str(bad), "--json"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0 and "row 2, column 'nodes'" in err
