"""Ingest of small hand-made Helios traces: folder, zip with a top folder, cluster subsets, row issues."""

from __future__ import annotations

import json
import zipfile
from datetime import date, datetime
from pathlib import Path

import polars as pl
import pytest

import cli
from analytics import schema, store
from analytics.ingest import IngestError, IngestOptions, ingest, prepare

HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"
# One row per row-level kind (file rows 2..14); each comment names what the row below triggers.
VENUS_ROWS = [
    # clean
    "1,u1,vcA,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:10,2020-04-01 00:01:10,60,10",
    # end<start, dur<0
    "2,u1,vcA,1,4,1,FAILED,2020-04-01 00:00:00,2020-04-01 00:10:00,2020-04-01 00:05:00,-300,600",
    # dur mismatch
    "3,u2,vcA,2,8,1,COMPLETED,2020-04-01 01:00:00,2020-04-01 01:00:00,2020-04-01 01:01:00,999,0",
    # queue<0 + mismatch
    "4,u2,vcB,0,2,1,CANCELLED,2020-04-01 02:00:00,2020-04-01 02:00:10,2020-04-01 02:00:20,10,-5",
    # unknown state
    "5,u3,vcB,1,4,1,WEIRD,2020-04-01 03:00:00,2020-04-01 03:00:00,2020-04-01 03:00:30,30,0",
    # missing user
    "6,,vcB,1,4,1,TIMEOUT,2020-04-01 04:00:00,2020-04-01 04:00:00,2020-04-01 04:00:30,30,0",
    # bad cpu_num
    "7,u3,vcA,1,abc,1,COMPLETED,2020-04-01 05:00:00,2020-04-01 05:00:00,2020-04-01 05:00:30,30,0",
    # duplicate id
    "1,u4,vcA,1,4,1,COMPLETED,2020-04-01 06:00:00,2020-04-01 06:00:00,2020-04-01 06:00:30,30,0",
    # gpu_num<0
    "9,u4,vcA,-1,4,1,COMPLETED,2020-04-01 07:00:00,2020-04-01 07:00:00,2020-04-01 07:00:30,30,0",
    # missing submit_time
    "10,u4,vcA,1,4,1,COMPLETED,,2020-04-01 08:00:00,2020-04-01 08:00:30,30,0",
    # blank row
    "",
    # VC w/o capacity
    "12,u5,vcZ,1,4,1,NODE_FAIL,2020-04-02 00:00:00,2020-04-02 00:00:00,2020-04-02 00:00:30,30,0",
    # clean, censored
    "13,u5,vcA,8,32,1,RUNNING,2020-04-02 01:00:00,2020-04-02 01:00:00,2020-04-02 02:00:00,3600,0",
]
EARTH_ROWS = [
    "1,u9,vcE,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:00,2020-04-01 00:00:05,5,0",
    "2,u9,vcE,0,1,1,FAILED,2020-04-03 00:00:00,2020-04-03 00:00:01,2020-04-03 00:00:05,4,1",
]
EXPECTED_COUNTS = {
    "blank_row": 1,
    "wrong_field_count": 0,  # kinds the Slurm reader finds; none in a Helios log
    "unparsable_required": 0,
    "missing_required": 1,
    "negative_gpu_num": 1,
    "duplicate_job_id": 1,
    "end_before_start": 1,
    "negative_duration": 1,
    "duration_mismatch": 1,
    "negative_queue": 1,
    "queue_mismatch": 1,
    "unknown_state": 1,
    "missing_optional": 2,  # the empty user and the unparsable cpu_num (set to null)
    "unparsable_value": 1,
    "never_started": 0,
    "vc_without_capacity": 1,
}


def write_cluster(root: Path, cluster: str, rows: list[str], vcs: dict[str, list[int]]) -> None:
    """Write one hand-made cluster folder in the published layout."""
    folder = root / cluster
    folder.mkdir(parents=True)
    (folder / "cluster_log.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    names = list(vcs)
    lines = ["date," + ",".join(names) + ",total"]
    for day in range(3):
        values = [vcs[v][day] for v in names]
        lines.append(f"2020-04-0{day + 1}," + ",".join(map(str, values)) + f",{sum(values)}")
    (folder / "cluster_gpu_number.csv").write_text("\n".join(lines) + "\n")


@pytest.fixture
def helios_dir(tmp_path: Path) -> Path:
    """A two-cluster Helios folder (Venus with one row per issue kind, Earth clean)."""
    root = tmp_path / "helios"
    write_cluster(root, "Venus", VENUS_ROWS, {"vcA": [16, 16, 24], "vcB": [8, 8, 8]})
    write_cluster(root, "Earth", EARTH_ROWS, {"vcE": [32, 32, 32]})
    return root


def zip_folder(folder: Path, zip_path: Path, top: str = "data") -> Path:
    """Zip every file under folder with the given top folder inside the archive."""
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, f"{top}/{path.relative_to(folder).as_posix()}")
    return zip_path


def test_folder_ingest_counts_every_row_level_kind(helios_dir, data_root):
    dataset = ingest(helios_dir, "helios", "hand")
    quality = dataset.meta["quality"]
    assert {k: v["count"] for k, v in quality["issues"].items()} == EXPECTED_COUNTS
    assert quality["rows_in"] == len(VENUS_ROWS) + len(EARTH_ROWS)
    dropped = sum(v["count"] for v in quality["issues"].values() if v["action"] == "dropped")
    assert quality["rows_out"] == quality["rows_in"] - dropped == 11
    actions = {k: v["action"] for k, v in quality["issues"].items()}
    assert [k for k, a in actions.items() if a == "dropped"] == [
        "blank_row",
        "wrong_field_count",
        "unparsable_required",
        "missing_required",
        "negative_gpu_num",
        "duplicate_job_id",
    ]


def test_examples_name_file_row_and_job(helios_dir, data_root):
    issues = ingest(helios_dir, "helios", "hand").meta["quality"]["issues"]
    venus_log = str(helios_dir / "Venus" / "cluster_log.csv")
    duplicate = {"file": venus_log, "row": 9, "job_id": 1, "detail": "job_id=1"}
    assert issues["duplicate_job_id"]["examples"] == [duplicate]
    assert issues["blank_row"]["examples"][0]["row"] == 12
    assert issues["unknown_state"]["examples"][0] == {
        "file": venus_log,
        "row": 6,
        "job_id": 5,
        "detail": "state=WEIRD",
    }
    assert issues["unparsable_value"]["examples"][0]["detail"] == "cpu_num=abc"
    assert issues["missing_required"]["examples"][0]["detail"] == "null submit_time"
    assert issues["duration_mismatch"]["examples"][0]["detail"] == "duration=999 end-start=60"


def test_jobs_table_is_canonical_and_cleaned(helios_dir, data_root):
    jobs = ingest(helios_dir, "helios", "hand").jobs().collect()
    assert jobs.schema == pl.Schema(schema.JOB_SCHEMA)
    venus = jobs.filter(pl.col("cluster") == "Venus").sort("job_id")
    assert venus["job_id"].to_list() == [1, 2, 3, 4, 5, 6, 7, 12, 13]
    assert venus.filter(pl.col("job_id") == 1)["user"].item() == "u1"  # the first of the duplicates is kept
    assert venus.filter(pl.col("job_id") == 5)["state"].item() is None
    assert venus.filter(pl.col("job_id") == 7)["cpu_num"].item() is None
    row = venus.filter(pl.col("job_id") == 2).row(0, named=True)
    assert row["submit_time"] == datetime(2020, 4, 1) and row["duration"] == -300 and row["queue"] == 600
    assert jobs.filter(pl.col("cluster") == "Earth").height == 2


def test_gpu_number_becomes_long_table_without_total(helios_dir, data_root):
    capacity = ingest(helios_dir, "helios", "hand").vc_gpus()
    assert capacity.schema == pl.Schema(schema.VC_GPU_SCHEMA)
    assert sorted(capacity["vc"].unique()) == ["vcA", "vcB", "vcE"]
    venus_a = capacity.filter((pl.col("cluster") == "Venus") & (pl.col("vc") == "vcA")).sort("date")
    assert venus_a["gpus"].to_list() == [16, 16, 24]
    assert venus_a["date"].to_list() == [date(2020, 4, 1), date(2020, 4, 2), date(2020, 4, 3)]
    assert capacity.height == 3 * 3


def test_meta_describes_source_period_counts_and_attribution(helios_dir, data_root):
    meta = ingest(helios_dir, "helios", "hand").meta
    assert meta["source"] == str(helios_dir) and meta["format"] == "helios"
    assert meta["clusters"] == ["Earth", "Venus"]
    assert meta["period"] == {"start": "2020-04-01 00:00:00", "end": "2020-04-03 00:00:00"}
    assert meta["row_counts"] == {"jobs": 11, "jobs_per_cluster": {"Earth": 2, "Venus": 9}, "vc_gpus": 9}
    assert "HeliosData" in meta["attribution"] and "CC BY 4.0" in meta["attribution"]
    assert meta["quality"]["absent_columns"] == ["job_name", "gpu_type", *schema.SCHEDULER_COLUMNS]
    on_disk = json.loads((data_root / "hand" / "meta.json").read_text())
    assert on_disk["quality"]["rows_out"] == 11


def test_zip_with_top_folder_equals_folder(helios_dir, data_root, tmp_path):
    archive = zip_folder(helios_dir, tmp_path / "data.zip")
    from_zip = ingest(archive, "helios", "z")
    from_dir = ingest(helios_dir, "helios", "d")
    assert from_zip.jobs().collect().equals(from_dir.jobs().collect())
    assert from_zip.vc_gpus().equals(from_dir.vc_gpus())
    example = from_zip.meta["quality"]["issues"]["blank_row"]["examples"][0]
    assert example["file"] == f"{archive}:data/Venus/cluster_log.csv"


def test_zip_without_top_folder(helios_dir, data_root, tmp_path):
    archive = tmp_path / "flat.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(helios_dir.rglob("*.csv")):
            zf.write(path, path.relative_to(helios_dir).as_posix())
    assert ingest(archive, "helios", "flat").meta["clusters"] == ["Earth", "Venus"]


@pytest.mark.parametrize("use_zip", [False, True])
def test_subset_of_clusters(helios_dir, data_root, tmp_path, use_zip):
    path = zip_folder(helios_dir, tmp_path / "data.zip") if use_zip else helios_dir
    dataset = ingest(path, "helios", "earth", IngestOptions(clusters=("Earth",)))
    assert dataset.meta["clusters"] == ["Earth"]
    assert dataset.jobs().collect()["cluster"].unique().to_list() == ["Earth"]
    assert dataset.vc_gpus()["cluster"].unique().to_list() == ["Earth"]


def test_single_cluster_folder_takes_its_name(helios_dir, data_root):
    assert ingest(helios_dir / "Earth", "helios", "e").meta["clusters"] == ["Earth"]


def test_unknown_cluster_is_fatal(helios_dir, data_root):
    with pytest.raises(IngestError, match=r"cluster\(s\) Mars not found \(available: Earth, Venus\)"):
        prepare(helios_dir, "helios", IngestOptions(clusters=("Mars",)))
    assert list(data_root.iterdir()) == []


def test_cli_ingest_prints_progress_and_summary(helios_dir, data_root, capsys):
    code = cli.main(["ingest", str(helios_dir), "--format", "helios", "--name", "cli-hand"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "[1/4] reading Earth ..." in err and "[4/4] writing dataset cli-hand ..." in err
    assert "dataset cli-hand: 11 jobs, clusters Earth, Venus" in out
    assert "rows: 15 read, 11 kept" in out
    assert "  duplicate_job_id: 1 dropped (e.g. " in out
    assert store.open_dataset("cli-hand").meta["quality"]["rows_in"] == 15


def test_cli_quiet_prints_no_progress(helios_dir, data_root, capsys):
    assert cli.main(["ingest", str(helios_dir), "--format", "helios", "--name", "q", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
