"""Trace schema, ingest, storage and the study's queries (no Dash or Plotly imports)."""
