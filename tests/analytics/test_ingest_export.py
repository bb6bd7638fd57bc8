"""Export of a dataset in the published Helios CSV format, and export -> ingest round trips."""

from __future__ import annotations

import zipfile
from datetime import date, datetime, timedelta

import polars as pl
import pytest

import cli
from analytics import schema, store
from analytics.export import export_dataset, gpu_number_frame
from analytics.ingest import ingest
from analytics.ingest.bundled import PHILLY_JOBS
from analytics.ingest.helios import LOG_COLUMNS

T0 = datetime(2020, 4, 1)


def jobs_frame(cluster: str, n: int, vcs: list[str]) -> pl.DataFrame:
    """A small varied jobs table with nulls in optional columns and censored states."""
    submit = [T0 + timedelta(minutes=7 * i) for i in range(n)]
    queue = [i % 3 * 5 for i in range(n)]
    duration = [10 + 13 * i for i in range(n)]
    start = [s + timedelta(seconds=q) for s, q in zip(submit, queue, strict=True)]
    return pl.DataFrame(
        {
            "cluster": [cluster] * n,
            "job_id": [1000 + i for i in range(n)],
            "user": [None if i % 5 == 0 else f"u{i % 4}" for i in range(n)],
            "vc": [vcs[i % len(vcs)] for i in range(n)],
            "gpu_num": [[0, 1, 2, 8][i % 4] for i in range(n)],
            "cpu_num": [float(4 * (i % 4) + 1) for i in range(n)],
            "node_num": [1] * n,
            "state": [schema.STATES[i % len(schema.STATES)] for i in range(n)],
            "submit_time": submit,
            "start_time": start,
            "end_time": [s + timedelta(seconds=d) for s, d in zip(start, duration, strict=True)],
            "duration": duration,
            "queue": queue,
        }
    )


def capacity_frame(cluster: str, vcs: list[str], days: int) -> pl.DataFrame:
    """Per-VC daily GPUs, one VC missing on the last day."""
    rows = [
        (cluster, vc, date(2020, 4, 1) + timedelta(days=d), 8 * (k + 1) + d)
        for k, vc in enumerate(vcs)
        for d in range(days)
        if not (k == 0 and d == days - 1)
    ]
    return pl.DataFrame(rows, schema=["cluster", "vc", "date", "gpus"], orient="row")


@pytest.fixture
def source(data_root) -> store.Dataset:
    """A two-cluster dataset written straight through the store."""
    jobs = pl.concat([jobs_frame("Saturn", 40, ["vcS1", "vcS2"]), jobs_frame("Venus", 25, ["vcV"])])
    capacity = pl.concat([capacity_frame("Saturn", ["vcS1", "vcS2"], 3), capacity_frame("Venus", ["vcV"], 2)])
    return store.write_dataset("src", jobs, capacity, {"clusters": ["Saturn", "Venus"]})


def test_export_writes_published_layout(source, tmp_path):
    paths = export_dataset(source, tmp_path / "out")
    assert [p.relative_to(tmp_path / "out").as_posix() for p in paths] == [
        "Saturn/cluster_log.csv",
        "Saturn/cluster_gpu_number.csv",
        "Venus/cluster_log.csv",
        "Venus/cluster_gpu_number.csv",
    ]
    lines = (tmp_path / "out" / "Venus" / "cluster_log.csv").read_text().splitlines()
    assert lines[0] == ",".join(LOG_COLUMNS)
    times = "2020-04-01 00:00:00,2020-04-01 00:00:00,2020-04-01 00:00:10"
    assert lines[1] == f"1000,,vcV,0,1,1,COMPLETED,{times},10,0"
    gpu_lines = (tmp_path / "out" / "Saturn" / "cluster_gpu_number.csv").read_text().splitlines()
    assert gpu_lines == [
        "date,vcS1,vcS2,total",
        "2020-04-01,8,16,24",
        "2020-04-02,9,17,26",
        "2020-04-03,,18,18",
    ]


def test_gpu_number_frame_of_empty_capacity():
    assert gpu_number_frame(schema.empty_vc_gpus()).columns == ["date", "total"]


@pytest.mark.parametrize("zipped", [False, True])
def test_export_ingest_round_trip_is_equal(source, tmp_path, zipped):
    paths = export_dataset(source, tmp_path / "out", zipped=zipped)
    again = ingest(paths[0] if zipped else tmp_path / "out", "helios", "again")
    assert again.jobs().collect().equals(source.jobs().collect())
    assert again.vc_gpus().equals(source.vc_gpus())
    issues = again.meta["quality"]["issues"]
    assert issues["missing_optional"]["count"] == 8 + 5  # the null users (every 5th job), nothing else
    assert sum(e["count"] for k, e in issues.items() if k != "missing_optional") == 0


def test_zip_holds_a_top_data_folder(source, tmp_path):
    (path,) = export_dataset(source, tmp_path / "out", clusters=["Venus"], zipped=True)
    assert path == tmp_path / "out" / "data.zip"
    with zipfile.ZipFile(path) as archive:
        assert archive.namelist() == ["data/Venus/cluster_log.csv", "data/Venus/cluster_gpu_number.csv"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["data.zip"]  # no temporary files left


def test_fractional_cpus_stay_fractional(data_root, tmp_path):
    jobs = jobs_frame("A", 3, ["v"]).with_columns(pl.Series("cpu_num", [0.5, 1.0, 2.25]))
    dataset = store.write_dataset("frac", jobs, capacity_frame("A", ["v"], 1), {"clusters": ["A"]})
    export_dataset(dataset, tmp_path)
    assert (tmp_path / "A" / "cluster_log.csv").read_text().splitlines()[1].split(",")[4] == "0.5"


def test_unknown_cluster_is_rejected(source, tmp_path):
    with pytest.raises(ValueError, match="cluster\\(s\\) Mars not in dataset 'src'"):
        export_dataset(source, tmp_path, clusters=["Mars"])


def test_cli_export(source, tmp_path, capsys):
    assert cli.main(["export", "src", "--out", str(tmp_path / "o"), "--zip"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "o" / "data.zip")
    assert cli.main(["export", "nope", "--out", str(tmp_path / "o")]) == 2
    assert "dataset 'nope' not found" in capsys.readouterr().err


def test_real_philly_dataset_exports_and_reingests(data_root, tmp_path):
    philly = ingest(PHILLY_JOBS, "philly", "philly")
    export_dataset(philly, tmp_path)
    again = ingest(tmp_path, "helios", "philly-again")
    assert again.jobs().collect().equals(philly.jobs().collect())
    assert again.vc_gpus().equals(philly.vc_gpus())
