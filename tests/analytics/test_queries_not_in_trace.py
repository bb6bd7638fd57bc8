"""`helios query` and `helios summary` on the bundled datasets: a query made of what a trace lacks exits 2 with the
pages' "Not in this trace: <reason>", never rows of zeros; a query answered on any dataset leaves the columns the
trace lacks empty and names them on stderr."""

from __future__ import annotations

import json

import pytest

import cli
from analytics import queries

PHILLY_NO_STARTS = "the Philly job list has no start times"
PHILLY_NO_STATES = "the Philly job list has no final states"
PHILLY_NO_USERS = "the Philly job list has no users"
# Per bundled dataset, what it lacks (tests/analytics/test_bundled_datasets.py checks its absent columns) and the
# queries made of it, with the reason each is refused.
REFUSED: dict[str, dict[str, str]] = {
    "philly": {
        "utilization_minutes": PHILLY_NO_STARTS,
        "utilization_resampled": PHILLY_NO_STARTS,
        "monthly_utilization": PHILLY_NO_STARTS,
        "diurnal_utilization": PHILLY_NO_STARTS,
        "vc_utilization": PHILLY_NO_STARTS,
        "throughput_10min": PHILLY_NO_STARTS + " or queueing delays",
        "queue_cdf": PHILLY_NO_STARTS + " or queueing delays",
        "job_states": PHILLY_NO_STATES,
        "final_state_by_gpu_num": PHILLY_NO_STATES,
        "final_state_cpu_vs_gpu": PHILLY_NO_STATES,
        "gpu_time_share_by_state": PHILLY_NO_STATES,
        "user_table": PHILLY_NO_USERS,
        "user_concentration": PHILLY_NO_USERS,
        "user_completion_histogram": PHILLY_NO_USERS,
    },
    "alibaba": {
        "user_table": "the Alibaba pod list has no users",
        "user_concentration": "the Alibaba pod list has no users",
        "user_completion_histogram": "the Alibaba pod list has no users",
        "vc_utilization": "its GPU capacity is known for the whole cluster only, not per VC",
    },
}
CASES = [(ds, name, why) for ds, refused in REFUSED.items() for name, why in refused.items()]


@pytest.fixture
def bundled_env(bundled_root, monkeypatch):
    monkeypatch.setenv("HELIOS_DATA_DIR", str(bundled_root))
    return bundled_root


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_issue_example_is_refused_with_the_pages_reason(bundled_env, capsys):
    argv = ("query", "utilization_resampled", "--dataset", "philly", "--option", "every=1d", "--json")
    code, out, err = _run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err == (
        "helios: error: utilization_resampled on dataset philly: Not in this trace: the Philly job list has no start "
        "times, needed for GPU utilisation over time.\n"
    )


@pytest.mark.parametrize(("dataset", "name", "why"), CASES)
@pytest.mark.parametrize("output", ["--json", "--csv"])
def test_a_query_made_of_what_the_trace_lacks_exits_2_with_why(bundled_env, capsys, dataset, name, why, output):
    code, out, err = _run(capsys, "query", name, "--dataset", dataset, output)
    assert (code, out) == (2, "")
    assert f"{name} on dataset {dataset}: Not in this trace: {why}" in err


@pytest.mark.parametrize(
    ("name", "option", "why"),
    [
        ("duration_cdf", "kind=cpu", "the Philly job list has GPU jobs only"),
        ("user_concentration", "metric=cpu_only_time", PHILLY_NO_USERS),
    ],
)
def test_an_option_made_of_what_the_trace_lacks_is_refused(bundled_env, capsys, name, option, why):
    code, out, err = _run(capsys, "query", name, "--dataset", "philly", "--option", option, "--csv")
    assert (code, out) == (2, "") and f"Not in this trace: {why}" in err


@pytest.mark.parametrize("dataset", list(REFUSED))
def test_every_other_query_is_answered(bundled_env, capsys, dataset):
    for name in set(queries.QUERIES) - set(REFUSED[dataset]):
        code, out, err = _run(capsys, "query", name, "--dataset", dataset, "--json")
        assert code == 0 and "error" not in err, (name, err)
        assert isinstance(json.loads(out), list)


def test_the_philly_summary_leaves_what_it_lacks_empty_and_says_why(bundled_env, capsys):
    code, out, err = _run(capsys, "summary", "--dataset", "philly", "--json")
    philly = json.loads(out)[0]
    assert code == 0 and philly["job_num"] == philly["gpu_job_num"] == 82_247
    lacking = ("cpu_job_num", "avg_que_time_gpu", "complete_rate", "fail_rate_gpu", "complete_gpu_time")
    assert all(philly[c] is None for c in lacking)  # never 0: Philly has no CPU jobs, start times or states
    assert philly["avg_run_time_gpu"] > 0 and philly["avg_gpu_num"] > 1
    assert err.startswith("helios: note: left empty: cpu_job_num, ")
    for why in ("GPU jobs only", "no start times or queueing delays", "no final states"):
        assert f"(not in this trace: the Philly job list has {why}" in err


def test_monthly_jobs_leaves_philly_cpu_jobs_empty(bundled_env, capsys):
    code, out, err = _run(capsys, "query", "monthly_jobs", "--dataset", "philly", "--csv")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "cluster,month,job_num,cpu_job_num,gpu_job_num,single_gpu_jobs,multi_gpu_jobs"
    assert lines[1] == "Philly,2017-09-01,5657,,5657,5216,441"
    assert "left empty: cpu_job_num (not in this trace: the Philly job list has GPU jobs only)" in err


def test_alibaba_answers_its_summary_whole(bundled_env, capsys):
    code, out, err = _run(capsys, "summary", "--dataset", "alibaba", "--json")
    alibaba = json.loads(out)[0]
    assert code == 0 and err == "" and all(v is not None for v in alibaba.values())


def test_the_philly_export_leaves_what_it_lacks_empty_and_names_it(bundled_env, capsys, tmp_path):
    code, out, err = _run(capsys, "export", "philly", "--out", str(tmp_path))
    log = (tmp_path / "Philly" / "cluster_log.csv").read_text().splitlines()
    assert code == 0 and out.splitlines()[0] == str(tmp_path / "Philly" / "cluster_log.csv")
    assert log[0] == "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"
    assert log[1].split(",")[4:7] == ["", "", ""] and log[1].split(",")[-1] == ""  # empty, never 0
    assert err.startswith("helios: note: left empty, not in this trace: user (the Philly job list has no users); ")
    assert "queue (the Philly job list has no queueing delays)" in err
