"""`helios datasets`: the list of datasets and one dataset's metadata and quality report."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl

import cli
from analytics import store


def _write(name: str, quality: dict) -> None:
    t0 = dt.datetime(2020, 4, 1)
    jobs = pl.DataFrame(
        {"cluster": ["C"], "job_id": [1], "vc": ["v"], "gpu_num": [1], "submit_time": [t0], "duration": [5]}
    )
    caps = pl.DataFrame({"cluster": ["C"], "vc": ["v"], "date": [t0.date()], "gpus": [8]})
    meta = {
        "source": "unit test",
        "format": "helios",
        "clusters": ["C"],
        "period": {"start": "2020-04-01", "end": "2020-04-02"},
        "row_counts": {"jobs": 1},
        "quality": quality,
        "attribution": "made up",
    }
    store.write_dataset(name, jobs, caps, meta)


QUALITY = {
    "rows_in": 3,
    "rows_out": 1,
    "issues": {"duplicate_job_id": {"count": 2, "action": "dropped", "examples": [{"row": 3, "job_id": 1}]}},
}


def test_list_and_show(data_root, capsys):
    _write("alpha", QUALITY)
    assert cli.main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert "alpha" in out and "2020-04-01 .. 2020-04-02" in out and "unit test" in out
    assert cli.main(["datasets", "--dataset", "alpha"]) == 0
    out = capsys.readouterr().out
    assert "duplicate_job_id: 2 rows, dropped" in out and "'row': 3" in out and "made up" in out


def test_json_and_unknown_dataset(data_root, capsys):
    _write("alpha", QUALITY)
    assert cli.main(["datasets", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in listed] == ["alpha"]
    assert cli.main(["datasets", "--dataset", "nope"]) == 2
    assert "'nope' not found" in capsys.readouterr().err


def test_empty_data_dir(data_root, capsys):
    assert cli.main(["datasets"]) == 0
    assert "no datasets under" in capsys.readouterr().out
