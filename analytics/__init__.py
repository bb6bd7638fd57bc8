"""Trace schema, ingest, storage and the study's queries; imports nothing else of ours (no Dash, Plotly or sim)."""
