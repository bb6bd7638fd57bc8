"""CSV downloads a spreadsheet opens safely: a text cell that would run as a formula is quoted (CSV injection)."""

from __future__ import annotations

import polars as pl

FORMULA_START = r"^[=+\-@\t\r]"  # what Excel, LibreOffice and Google Sheets treat as the start of a formula


def spreadsheet_safe(df: pl.DataFrame) -> pl.DataFrame:
    """df with every text cell that starts like a formula prefixed by a single quote (numbers are left alone)."""
    text = [name for name, dtype in df.schema.items() if dtype == pl.String]
    risky = [pl.col(c).str.contains(FORMULA_START).fill_null(False) for c in text]
    return df.with_columns(
        pl.when(is_risky).then(pl.lit("'") + pl.col(c)).otherwise(pl.col(c)).alias(c)
        for c, is_risky in zip(text, risky, strict=True)
    )


def csv_text(df: pl.DataFrame, include_header: bool = True) -> str:
    """df as CSV text for a download, formula-like text cells quoted."""
    return spreadsheet_safe(df).write_csv(include_header=include_header)
