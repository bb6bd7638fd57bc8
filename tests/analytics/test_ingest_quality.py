"""Properties of row-level validation and of value parsing, over generated inputs (hypothesis)."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics import schema
from analytics.ingest.parse import ROW, IngestError, parse_columns
from analytics.ingest.quality import DROPPED, summary_lines, validate

T0 = datetime(2020, 4, 1)
SOURCE = ("cluster", "job_id", "vc", "gpu_num", "state", "submit_time", "start_time", "end_time")
SOURCE += ("duration", "queue")
CAPACITY = pl.DataFrame({"cluster": ["A", "A"], "vc": ["v1", "v2"], "date": [T0.date()] * 2, "gpus": [8, 8]})
STATES = [*schema.STATES, "WEIRD", None]

job_rows = st.lists(
    st.fixed_dictionaries(
        {
            "cluster": st.sampled_from(["A", "B"]),
            "job_id": st.one_of(st.none(), st.integers(1, 6)),
            "vc": st.one_of(st.none(), st.sampled_from(["v1", "v2", "v3"])),
            "gpu_num": st.one_of(st.none(), st.integers(-2, 8)),
            "state": st.sampled_from(STATES),
            "submit_s": st.one_of(st.none(), st.integers(0, 1000)),
            "queue": st.one_of(st.none(), st.integers(-5, 50)),
            "duration": st.one_of(st.none(), st.integers(-5, 500)),
            "skew_s": st.sampled_from([0, 0, 0, 3]),
        }
    ),
    min_size=1,
    max_size=40,
)


FRAME_SCHEMA = {ROW: pl.Int64} | {c: schema.JOB_SCHEMA[c] for c in SOURCE}


def to_frame(rows: list[dict]) -> pl.DataFrame:
    """Parsed-jobs frame (as a reader makes it) from generated rows; skew_s makes end-start disagree."""
    records = []
    for i, r in enumerate(rows):
        submit = T0 + timedelta(seconds=r["submit_s"]) if r["submit_s"] is not None else None
        start = submit + timedelta(seconds=r["queue"]) if submit and r["queue"] is not None else None
        end = start + timedelta(seconds=(r["duration"] or 0) + r["skew_s"]) if start else None
        records.append(
            {
                ROW: i + 2,
                "cluster": r["cluster"],
                "job_id": r["job_id"],
                "vc": r["vc"],
                "gpu_num": r["gpu_num"],
                "state": r["state"],
                "submit_time": submit,
                "start_time": start,
                "end_time": end,
                "duration": r["duration"],
                "queue": r["queue"],
            }
        )
    return pl.DataFrame(records, schema=FRAME_SCHEMA)


@settings(max_examples=40, deadline=None)
@given(job_rows)
def test_validation_invariants(rows):
    jobs = to_frame(rows)
    out, report = validate(jobs, schema.conform_vc_gpus(CAPACITY), {"A": "a.csv", "B": "b.csv"}, SOURCE)
    dropped = sum(e["count"] for e in report["issues"].values() if e["action"] == DROPPED)
    assert report["rows_in"] == jobs.height and report["rows_out"] == out.height
    assert out.height + dropped == jobs.height
    assert out.select(pl.col(schema.JOB_REQUIRED_NON_NULL).null_count()).sum_horizontal().item() == 0
    assert (out["gpu_num"] >= 0).all()
    assert not out.select(pl.struct("cluster", "job_id").is_duplicated().any()).item()
    assert out["state"].drop_nulls().is_in(schema.STATES).all()
    for entry in report["issues"].values():
        assert len(entry["examples"]) == min(entry["count"], 5)
        assert all(e["file"] in ("a.csv", "b.csv") for e in entry["examples"])
    assert report["issues"]["unknown_state"]["count"] <= jobs.filter(pl.col("state") == "WEIRD").height
    assert summary_lines(report)[0] == f"rows: {jobs.height} read, {out.height} kept"


def test_first_duplicate_is_kept_after_earlier_drops():
    rows = [
        {"cluster": "A", "job_id": 1, "vc": "v1", "gpu_num": -1, "state": None, "submit_s": 0, "queue": 0,
         "duration": 1, "skew_s": 0},
        {"cluster": "A", "job_id": 1, "vc": "v1", "gpu_num": 1, "state": None, "submit_s": 5, "queue": 0,
         "duration": 1, "skew_s": 0},
        {"cluster": "B", "job_id": 1, "vc": "v1", "gpu_num": 1, "state": None, "submit_s": 9, "queue": 0,
         "duration": 1, "skew_s": 0},
    ]  # fmt: skip
    out, report = validate(to_frame(rows), schema.conform_vc_gpus(CAPACITY), {}, SOURCE)
    assert report["issues"]["negative_gpu_num"]["count"] == 1
    assert report["issues"]["duplicate_job_id"]["count"] == 0  # a dropped row does not make row 2 a duplicate
    assert sorted(out["cluster"]) == ["A", "B"]


@given(st.integers(-(2**62), 2**62))
def test_integers_parse_exactly(value):
    frame = pl.DataFrame({ROW: [2], "n": [str(value)]})
    assert parse_columns(frame, {"n": "int"}, "f", required=("n",))["n"].item() == value


@given(st.integers(-(2**40), 2**40))
def test_integral_floats_parse_as_integers(value):
    frame = pl.DataFrame({ROW: [2], "n": [f"{value}.0"]})
    assert parse_columns(frame, {"n": "int"}, "f", required=("n",))["n"].item() == value


@pytest.mark.parametrize("bad", ["1.5", "inf", "1e400", "x", "--1"])
def test_non_integers_are_rejected(bad):
    frame = pl.DataFrame({ROW: [2, 3], "n": ["1", bad]})
    with pytest.raises(IngestError, match=rf"f row 3, column 'n': cannot parse '{bad}' as an integer"):
        parse_columns(frame, {"n": "int"}, "f", required=("n",))


def test_bad_optional_values_are_nulled_and_flagged():
    frame = pl.DataFrame({ROW: [2, 3, 4], "a": ["1", "z", None], "b": ["2.5", "nan?", "3"]})
    out = parse_columns(frame, {"a": "int", "b": "float"}, "f")
    assert out["a"].to_list() == [1, None, None] and out["b"].to_list() == [2.5, None, 3.0]
    assert out["_issue:unparsable_value"].to_list() == [None, "a=z; b=nan?", None]
