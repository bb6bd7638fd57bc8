"""CSV downloads quote text cells a spreadsheet would run as formulas."""

from __future__ import annotations

import polars as pl

from analytics.csv_safety import csv_text, spreadsheet_safe


def test_formula_like_text_is_quoted_and_numbers_are_not():
    df = pl.DataFrame(
        {
            "user": ['=HYPERLINK("http://x")', "+1", "-2", "@SUM(A1)", "\tcmd", "alice", None],
            "queue_s": [-5, 1, 2, 3, 4, 5, 6],
        }
    )
    safe = spreadsheet_safe(df)
    assert safe["user"].to_list() == ['\'=HYPERLINK("http://x")', "'+1", "'-2", "'@SUM(A1)", "'\tcmd", "alice", None]
    assert safe["queue_s"].to_list() == df["queue_s"].to_list()
    assert csv_text(df).splitlines()[1].startswith("\"'=HYPERLINK")
