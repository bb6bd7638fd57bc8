"""Any scheduler's CSV through a column mapping: mapping syntax, validation, times, states, refreshes, the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

import cli
from analytics import store
from analytics.ingest import IngestError, IngestOptions, append, ingest
from analytics.ingest.mapped_csv import parse_mapping

CSV = """JobNo,Queue,Owner,ngpu,SubmitTime,StartTime,EndTime,Status
501,gpu,ann,2,2025-05-01 10:00:00,2025-05-01 10:05:00,2025-05-01 11:05:00,Completed
502,gpu,bob,0,2025-05-01T10:10:00,2025-05-01T10:10:30,2025-05-01T10:20:30,FAILED
503,cpu,ann,1,2025-05-02 09:00:00,,,pending
"""
MAP = "id=JobNo,vc=Queue,user=Owner,gpus=ngpu,submit=SubmitTime,start=StartTime,end=EndTime,state=Status"


def write(tmp_path: Path, text: str = CSV, name: str = "jobs.csv") -> Path:
    """A CSV file with the given text."""
    path = tmp_path / name
    path.write_text(text)
    return path


def options(mapping: str = MAP, **extra) -> IngestOptions:
    """IngestOptions with a parsed --map."""
    return IngestOptions(column_map=parse_mapping(mapping), **extra)


def test_a_mapped_csv_becomes_jobs(data_root, tmp_path):
    dataset = ingest(write(tmp_path), "csv", "lsf", options(cluster="hpc"))
    jobs = dataset.jobs().collect().sort("job_id")
    assert jobs.select("cluster", "job_id", "vc", "user", "gpu_num").rows() == [
        ("hpc", 501, "gpu", "ann", 2),
        ("hpc", 502, "gpu", "bob", 0),
        ("hpc", 503, "cpu", "ann", 1),
    ]
    assert jobs["state"].to_list() == ["COMPLETED", "FAILED", "PENDING"]
    assert jobs["duration"].to_list()[:2] == [3600, 600] and jobs["queue"].to_list() == [300, 30, None]
    assert dataset.meta["column_map"]["gpu_num"] == "ngpu" and dataset.jobs_path.is_dir()


def test_epoch_seconds_and_a_duration_column(data_root, tmp_path):
    text = "id,p,g,t,run_s\n1,a,1,1735725600,90.4\n2,a,4,1735725660.5,7\n"
    dataset = ingest(write(tmp_path, text), "csv", "e", options("id=id,vc=p,gpus=g,submit=t,duration=run_s"))
    jobs = dataset.jobs().collect()
    assert [str(t) for t in jobs["submit_time"]] == ["2025-01-01 10:00:00", "2025-01-01 10:01:00.500000"]
    assert jobs["duration"].to_list() == [90, 7] and jobs["cluster"].to_list() == ["cluster"] * 2


def test_without_an_id_column_rows_are_numbered_and_append_is_refused(data_root, tmp_path):
    no_id = MAP.replace("id=JobNo,", "")
    assert ingest(write(tmp_path), "csv", "n", options(no_id)).jobs().collect()["job_id"].to_list() == [1, 2, 3]
    with pytest.raises(IngestError, match="--append needs job ids that stay the same.*map id="):
        append(write(tmp_path), "csv", "n", options(no_id))


def test_a_csv_with_ids_refreshes_like_slurm(data_root, tmp_path):
    ingest(write(tmp_path), "csv", "r", options())
    ran = "2025-05-02 09:00:00,2025-05-02 09:01:00,2025-05-02 09:02:00,ok"
    later = CSV.replace("2025-05-02 09:00:00,,,pending", ran)
    result = append(write(tmp_path, later + "504,gpu,bob,8,2025-05-03 00:00:00,,,RUNNING\n"), "csv", "r", options())
    assert (result.added, result.updated, result.unchanged) == (1, 1, 2)
    assert result.dataset.meta["quality"]["issues"]["unknown_state"]["count"] == 1  # "ok" is no state


@pytest.mark.parametrize(
    ("mapping", "match"),
    [
        ("gpuz=ngpu", r"--map: unknown field 'gpuz' \(expected one of cluster, job_id"),
        ("vc=Queue,gpus=ngpu", r"--map: no column for submit_time, duration \(or start and end\)"),
        ("id=JobNo,id=Owner", r"--map: job_id mapped twice"),
        ("vc Queue", r"--map: expected FIELD=COLUMN, got 'vc Queue'"),
    ],
)
def test_a_bad_mapping_is_explained(mapping, match, data_root, tmp_path):
    with pytest.raises(IngestError, match=match):
        ingest(write(tmp_path), "csv", "x", options(mapping))


def test_a_mapped_column_missing_from_the_file_is_named(data_root, tmp_path):
    with pytest.raises(IngestError, match=r"jobs.csv: --map gpu_num=GPUs: no column 'GPUs' \(found: JobNo, Queue"):
        ingest(write(tmp_path), "csv", "x", options(MAP.replace("ngpu", "GPUs")))


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (("2,", "two,"), r"row 2, column 'gpu_num': cannot parse 'two' as an integer"),
        (("2025-05-01 10:00:00", "May 1st"), r"row 2, column 'submit_time': cannot parse 'May 1st' as YYYY-MM-DD"),
        (("501,", "x501,"), r"row 2, column 'job_id': cannot parse 'x501' as an integer"),
    ],
)
def test_a_bad_required_value_is_fatal_with_file_row_and_column(data_root, tmp_path, bad, match):
    with pytest.raises(IngestError, match=match):
        ingest(write(tmp_path, CSV.replace(*bad, 1)), "csv", "x", options())
    assert store.list_datasets() == []


def test_the_cli_takes_a_mapping_file_and_flags(data_root, tmp_path, capsys):
    mapping = write(tmp_path, "# our LSF export\n" + MAP.replace(",", "\n") + "\n", "map.txt")
    argv = ["ingest", str(write(tmp_path)), "--format", "csv", "--map-file", str(mapping), "--name", "lsf", "--quiet"]
    assert cli.main(argv) == 0
    assert "dataset lsf: 3 jobs, clusters cluster" in capsys.readouterr().out
    assert cli.main([*argv[:4], "--map", "gpus=ngpu", "--name", "bad", "--quiet"]) == 2
    assert "helios: error: --map: no column for vc, submit_time" in capsys.readouterr().err
    assert cli.main(["ingest", str(write(tmp_path)), "--format", "slurm", "--map", MAP, "--name", "y"]) == 2
    assert "--map applies to --format csv only" in capsys.readouterr().err
