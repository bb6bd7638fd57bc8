"""`helios summary` and `helios query` through the real command-line dispatcher."""

from __future__ import annotations

import json

import pytest

import cli
from analytics import queries


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_summary_json_has_the_published_keys(small_ds, capsys):
    code, out, _ = _run(capsys, "summary", "--dataset", "small", "--json")
    rows = json.loads(out)
    assert code == 0
    assert [r["id"] for r in rows] == ["Alpha", "Beta", "total"]
    assert all(list(r) == list(queries.SUMMARY_COLUMNS) for r in rows)
    assert rows[-1]["gpu_num"] == 29 and rows[-1]["complete_rate"] == 0.545


def test_summary_cluster_filter_and_table(small_ds, capsys):
    code, out, _ = _run(capsys, "summary", "--dataset", "small", "--cluster", "Beta")
    assert code == 0
    assert "Beta" in out and "Alpha" not in out and "total" in out and "fail_gpu_time" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["summary", "--dataset", "missing"], "dataset 'missing' not found"),
        (["summary", "--dataset", "small", "--state", "DONE"], "unknown DONE"),
        (["summary", "--dataset", "small", "--start", "2020-04-03", "--end", "2020-04-01"], "must be before"),
        (["query", "duration_cdf", "--dataset", "small", "--option", "kind=tpu"], "kind must be one of"),
        (["query", "gpu_num_cdf", "--dataset", "small", "--option", "metric=x"], "expected one of: weight=..."),
    ],
)
def test_bad_input_is_a_one_line_error(small_ds, capsys, argv, message):
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1


def test_query_csv_with_option(small_ds, capsys):
    code, out, _ = _run(
        capsys,
        "query",
        "gpu_num_cdf",
        "--dataset",
        "small",
        "--cluster",
        "Beta",
        "--option",
        "weight=gpu_time",
        "--csv",
    )
    lines = out.splitlines()
    assert code == 0 and lines[0] == "cluster,x_gpus,pct" and len(lines) == 1 + len(queries.GPU_NUM_X)
    assert lines[2] == "Beta,2,100.0"


def test_query_json_filters_and_lists(small_ds, capsys):
    code, out, _ = _run(capsys, "query", "user_table", "--dataset", "small", "--user", "u3", "--json")
    (row,) = json.loads(out)
    assert code == 0 and row["vc_list"] == ["vcA1", "vcA2"] and row["total_gpu_time"] == 640.0
    code, out, _ = _run(capsys, "query", "user_table", "--dataset", "small", "--user", "u3", "--csv")
    assert "vcA1;vcA2" in out
    code, out, _ = _run(capsys, "query", "period", "--dataset", "small", "--json")
    assert json.loads(out) == [{"start": "2020-04-01 00:00:00", "end": "2020-04-04 00:00:00"}]


def test_query_names_are_choices(small_ds, capsys):
    with pytest.raises(SystemExit):
        cli.main(["query", "no_such_query", "--dataset", "small"])
    assert "invalid choice" in capsys.readouterr().err


def test_summary_counts_the_jobs_running_in_the_window_with_time_running(small_ds, capsys):
    # In [04-01 00:02:00, 00:03:00): A2 and A6 were submitted; A1, A2 and B5 ran (A6 started at its end).
    window = ("--start", "2020-04-01 00:02:00", "--end", "2020-04-01 00:03:00")
    for mode, jobs in (("submitted", 2), ("running", 3)):
        code, out, _ = _run(capsys, "summary", "--dataset", "small", *window, "--time", mode, "--json")
        assert code == 0 and json.loads(out)[-1]["job_num"] == jobs
