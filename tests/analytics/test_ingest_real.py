"""Ingest of the real public Philly and Alibaba files bundled in data/public (see data/SOURCES.md)."""

from __future__ import annotations

import gzip
import shutil
from datetime import date, datetime
from pathlib import Path

import polars as pl
import pytest

from analytics import reference, schema, store
from analytics.ingest import IngestError, IngestOptions, ingest
from analytics.ingest.bundled import ALIBABA_FOLDER, PHILLY_JOBS, PHILLY_VC_NODES

PHILLY_NODES = PHILLY_VC_NODES
ALIBABA = ALIBABA_FOLDER
EARTH_GPUS = Path(reference.__file__).parent / "earth_vc_gpu_number.csv"
PHILLY_JOB_LINES = 82_248  # data lines of the file; the last one is empty
PHILLY_TOTAL_GPUS = 352 * 8  # 11 VCs, 352 nodes of 8 GPUs
ALIBABA_PODS = 8_152


@pytest.fixture(scope="module")
def philly(tmp_path_factory):
    """The whole real Philly job file ingested once (with the node table found beside it)."""
    root = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HELIOS_DATA_DIR", str(root))
        return ingest(PHILLY_JOBS, "philly", "philly")


@pytest.fixture(scope="module")
def alibaba(tmp_path_factory):
    """The real Alibaba openb pod and node lists ingested once."""
    root = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HELIOS_DATA_DIR", str(root))
        return ingest(ALIBABA, "alibaba-openb", "alibaba")


def test_philly_rows_ids_and_quality(philly):
    quality = philly.meta["quality"]
    assert quality["rows_in"] == PHILLY_JOB_LINES
    assert quality["issues"]["blank_row"]["count"] == 1  # the trailing empty line
    assert quality["rows_out"] == PHILLY_JOB_LINES - 1
    jobs = philly.jobs().collect()
    assert jobs.height == PHILLY_JOB_LINES - 1 and jobs["cluster"].unique().to_list() == ["Philly"]
    first = jobs.filter(pl.col("job_id") == 1).row(0, named=True)
    assert first["submit_time"] == datetime(2017, 10, 9, 7, 1, 55)
    assert (first["vc"], first["gpu_num"], first["duration"]) == ("11cb48", 1, 66)
    assert sorted(jobs["job_id"]) == list(range(1, PHILLY_JOB_LINES))


def test_philly_missing_columns_stay_null_and_are_reported(philly):
    quality = philly.meta["quality"]
    absent = ["user", "job_name", "gpu_type", "cpu_num", "node_num", "state", "start_time", "end_time", "queue"]
    absent += schema.SCHEDULER_COLUMNS
    assert quality["absent_columns"] == absent
    assert all(quality["null_counts"][c] == PHILLY_JOB_LINES - 1 for c in absent)
    jobs = philly.jobs().collect()
    assert jobs.select(pl.col(absent).null_count()).row(0) == (PHILLY_JOB_LINES - 1,) * len(absent)


def test_philly_capacity_is_nodes_times_8_per_day(philly):
    capacity = philly.vc_gpus()
    days = (date(2017, 12, 22) - date(2017, 9, 4)).days + 1
    assert capacity.height == 11 * days
    per_day = capacity.group_by("date").agg(pl.col("gpus").sum())
    assert per_day["gpus"].unique().to_list() == [PHILLY_TOTAL_GPUS]
    assert capacity.filter(pl.col("vc") == "6214e9")["gpus"].unique().to_list() == [64 * 8]
    # the 4 VCs the artifact drops (51b7ef 4 jobs, 925e2b 3, 795a4c 3, 23dbec 8) have no node count
    without = philly.meta["quality"]["issues"]["vc_without_capacity"]
    assert without["count"] == 18 and without["action"] == "kept"
    assert {e["detail"] for e in without["examples"]} <= {"vc=51b7ef", "vc=925e2b", "vc=795a4c", "vc=23dbec"}


def test_philly_meta(philly):
    meta = philly.meta
    assert meta["format"] == "philly" and meta["clusters"] == ["Philly"]
    assert meta["period"] == {"start": "2017-09-04 10:30:41", "end": "2017-12-22 08:02:11"}
    assert meta["vc_nodes"] == str(PHILLY_NODES) and meta["gpus_per_node"] == 8
    assert "Jeon et al." in meta["attribution"] and "CC BY 4.0" in meta["attribution"]


def test_philly_head_without_node_table(tmp_path, data_root):
    jobs_path = tmp_path / "philly_head.csv"
    jobs_path.write_text("".join(gzip.decompress(PHILLY_JOBS.read_bytes()).decode().splitlines(keepends=True)[:101]))
    dataset = ingest(jobs_path, "philly", "head")
    assert dataset.meta["row_counts"]["jobs"] == 100 and dataset.meta["vc_nodes"] is None
    assert dataset.vc_gpus().height == 0
    assert dataset.meta["quality"]["issues"]["vc_without_capacity"]["count"] == 100


def test_philly_explicit_node_table(tmp_path, data_root):
    jobs_path = tmp_path / "jobs.csv"
    shutil.copy(PHILLY_JOBS, jobs_path)
    nodes = tmp_path / "nodes.csv"
    nodes.write_text('vc,"node num"\n11cb48,2\n')
    dataset = ingest(jobs_path, "philly", "p2", IngestOptions(vc_nodes=nodes))
    assert dataset.vc_gpus()["gpus"].unique().to_list() == [16]
    assert dataset.vc_gpus()["vc"].unique().to_list() == ["11cb48"]


def test_philly_missing_column_is_fatal(tmp_path, data_root):
    bad = tmp_path / "jobs.csv"
    bad.write_text("timestamp,duration,cluster\n2017-10-09 07:01:55,66.0,11cb48\n")
    with pytest.raises(IngestError, match=r"jobs.csv: missing required column\(s\) num_gpus"):
        ingest(bad, "philly", "p")
    assert list(data_root.iterdir()) == []


def test_alibaba_mapping(alibaba):
    jobs = alibaba.jobs().collect()
    assert jobs.height == ALIBABA_PODS and jobs.schema == pl.Schema(schema.JOB_SCHEMA)
    states = dict(jobs.group_by("state").len().rows())
    assert states == {"RUNNING": 5193, "PENDING": 897, "FAILED": 1870, "COMPLETED": 192}
    assert sorted(jobs["vc"].unique()) == ["BE", "Burstable", "Guaranteed", "LS"]
    last = jobs.filter(pl.col("job_id") == ALIBABA_PODS).row(0, named=True)
    # openb-pod-8151,3152,5600,1,590,,BE,Failed,12901761,12901792,12901762
    origin = datetime(2023, 1, 1)
    assert last["job_name"] == "openb-pod-8151" and last["cpu_num"] == pytest.approx(3.152)
    assert (last["submit_time"] - origin).total_seconds() == 12901761
    assert (last["start_time"] - origin).total_seconds() == 12901762
    assert (last["end_time"] - origin).total_seconds() == 12901792
    assert (last["duration"], last["queue"], last["state"]) == (30, 1, "FAILED")


def test_alibaba_pods_never_started(alibaba):
    jobs = alibaba.jobs().collect()
    pending = jobs.filter(pl.col("start_time").is_null())
    assert pending.height == 897
    assert pending["duration"].unique().to_list() == [0] and pending["queue"].null_count() == 897
    issues = alibaba.meta["quality"]["issues"]
    assert issues["never_started"]["count"] == 897 and issues["never_started"]["action"] == "kept"
    assert issues["duration_mismatch"]["count"] == 0 and issues["queue_mismatch"]["count"] == 0


def test_alibaba_capacity_is_whole_cluster(alibaba):
    capacity = alibaba.vc_gpus()
    assert capacity["vc"].unique().to_list() == ["*"]
    assert capacity["gpus"].unique().to_list() == [alibaba.meta["total_gpus"]]
    assert capacity["date"].min() == date(2023, 1, 1)
    assert alibaba.meta["capacity_scope"] == "cluster"
    assert any("'*' = whole-cluster" in note for note in alibaba.meta["notes"])
    assert alibaba.meta["quality"]["issues"]["vc_without_capacity"]["count"] == 0


def test_alibaba_origin_option(tmp_path, data_root):
    dataset = ingest(ALIBABA, "alibaba-openb", "a2", IngestOptions(origin="2020-06-01 12:00:00"))
    assert dataset.meta["origin"] == "2020-06-01 12:00:00"
    assert dataset.meta["period"]["start"] == "2020-06-01 12:00:00"
    with pytest.raises(IngestError, match="--origin 'June': expected YYYY-MM-DD HH:MM:SS"):
        ingest(ALIBABA, "alibaba-openb", "a3", IngestOptions(origin="June"))


def test_alibaba_unknown_phase_and_bad_time(tmp_path, data_root):
    folder = tmp_path / "openb"
    folder.mkdir()
    shutil.copy(ALIBABA / "openb_node_list_gpu_node.csv", folder)
    header = (
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
    )
    rows = ["p0,1000,1,1,1000,,LS,Succeeded,0,50,10", "p1,1000,1,1,1000,,LS,Evicted,5,20,6"]
    pods = folder / "openb_pod_list_default.csv"
    pods.write_text("\n".join([header, *rows]) + "\n")
    issues = ingest(folder, "alibaba-openb", "a4").meta["quality"]["issues"]
    assert issues["unknown_state"]["count"] == 1 and issues["unknown_state"]["examples"][0]["row"] == 3
    pods.write_text("\n".join([header, *rows, "p2,1000,1,1,1000,,LS,Failed,later,20,6"]) + "\n")
    with pytest.raises(IngestError, match=r"row 4, column 'creation_time': cannot parse 'later' as an int"):
        ingest(folder, "alibaba-openb", "a4")
    assert store.open_dataset("a4").meta["row_counts"]["jobs"] == 2  # the earlier ingest is intact


def test_real_earth_capacity_file(tmp_path, data_root):
    folder = tmp_path / "helios" / "Earth"
    folder.mkdir(parents=True)
    shutil.copy(EARTH_GPUS, folder / "cluster_gpu_number.csv")
    log = "job_id,vc,gpu_num,submit_time,duration\n1,vc6YE,8,2020-04-01 00:00:00,60\n"
    (folder / "cluster_log.csv").write_text(log)
    capacity = ingest(tmp_path / "helios", "helios", "earth").vc_gpus()
    assert capacity.height == 25 * 181 and "total" not in capacity["vc"].to_list()
    daily = capacity.group_by("date").agg(pl.col("gpus").sum()).sort("date")
    totals = pl.read_csv(EARTH_GPUS, try_parse_dates=True).select("date", "total")
    assert daily["gpus"].to_list() == totals.sort("date")["total"].to_list()
    assert daily["gpus"].min() == 784 and daily["gpus"].max() == 1232
    assert int(daily["gpus"].mean()) == 997  # the `gpu_num` of Earth in helios_cluster_summary.csv
