"""What a dataset has: which job columns are real, derived or absent, and so which views and experiments work.

Everything follows from the dataset's meta.json (its format, the columns its source lacks, the null counts and
capacity rows of its ingest), so datasets written before this module existed are described too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analytics import schema

REAL, DERIVED, ABSENT = "real", "derived", "absent"

# What each format's reader computes rather than reads (column -> how); a reader may add its own under
# meta["derived_columns"].
FORMAT_DERIVED: dict[str, dict[str, str]] = {
    "philly": {"job_id": "row order of the job file", "cluster": "the constant 'Philly'"},
    "slurm": {
        "queue": "Start − Eligible (Start − Submit where Eligible is unknown)",
        "gpu_num": "the first of AllocTRES, AllocGRES, ReqTRES, ReqGRES, Gres naming GPUs (the request for a job "
        "never allocated)",
        "duration": "ElapsedRaw",
    },
    "alibaba-openb": {
        "submit_time": "creation_time seconds after the nominal origin",
        "start_time": "scheduled_time seconds after the nominal origin",
        "end_time": "deletion_time seconds after the nominal origin",
        "duration": "deletion_time − scheduled_time",
        "queue": "scheduled_time − creation_time",
        "cpu_num": "cpu_milli / 1000",
        "job_id": "row order of the pod list",
    },
}
# A label of the source for sentences such as "the Philly job list has no start times".
FORMAT_LABELS: dict[str, str] = {
    "helios": "this Helios trace",
    "synthetic": "this synthetic trace",
    "philly": "the Philly job list",
    "alibaba-openb": "the Alibaba pod list",
    "slurm": "this Slurm export",
    "csv": "this CSV",
}
# What a format's source leaves out by construction, beyond absent columns (feature -> reason).
FORMAT_LACKS: dict[str, dict[str, str]] = {
    "philly": {"cpu_jobs": "the Philly job list has GPU jobs only"},
}
# How each format gets its GPU capacity, for the sentence that says a dataset has none.
CAPACITY_HINTS: dict[str, str] = {
    "philly": "ingest with --vc-nodes",
    "alibaba-openb": "put openb_node_list_gpu_node.csv beside the pod list",
    "slurm": "ingest with --capacity: scontrol show nodes -o, sinfo output or a vc,gpus CSV",
    "csv": "ingest with --capacity",
}
COLUMN_WORDS: dict[str, str] = {
    "cluster": "cluster names",
    "job_id": "job ids",
    "vc": "virtual clusters (VCs)",
    "user": "users",
    "state": "final states",
    "start_time": "start times",
    "end_time": "end times",
    "queue": "queueing delays",
    "duration": "durations",
    "submit_time": "submit times",
    "gpu_num": "GPU counts",
    "gpu_type": "GPU types",
    "cpu_num": "CPU counts",
    "node_num": "node counts",
    "job_name": "job names",
    "account": "accounts",
    "partition": "partitions",
    "qos": "QOS",
    "timelimit_s": "time limits",
    "priority": "recorded priorities",
}


@dataclass(frozen=True)
class Feature:
    """A family of views or an experiment, and what it needs: job columns and, optionally, GPU capacity."""

    label: str
    columns: tuple[str, ...]
    capacity: bool = False
    per_vc_capacity: bool = False


FEATURES: dict[str, Feature] = {
    "durations": Feature("job durations and GPU time", ("duration",)),
    "cpu_jobs": Feature("CPU jobs", ()),
    "utilisation": Feature("GPU utilisation over time", ("start_time", "duration"), capacity=True),
    "queueing": Feature("queueing delays and queued jobs", ("start_time", "queue")),
    "final_states": Feature("final states (completed, cancelled, failed)", ("state",)),
    "users": Feature("per-user views", ("user",)),
    "vc_utilisation": Feature("per-VC utilisation", ("start_time", "duration"), capacity=True, per_vc_capacity=True),
    "whatif": Feature("what-if scheduling replay (FIFO, SJF, QSSF, ...)", ("submit_time", "duration", "gpu_num"), True),
    "ces": Feature("CES energy saving from the dataset's busy nodes", ("start_time", "duration"), capacity=True),
}
# Which features each page needs for its main content ("" = the page works on any dataset).
PAGES: dict[str, tuple[str, ...]] = {
    "Overview": (),
    "Cluster": ("utilisation",),
    "Jobs": ("durations",),
    "Users": ("users",),
    "Compare": (),
    "What-if": ("whatif",),
    "CES (what-if energy)": ("ces",),
}


def column_status(meta: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Per job column: {"status": real|derived|absent, "note": how it is derived or why it is absent}."""
    quality = meta.get("quality") or {}
    absent = set(quality.get("absent_columns") or ())
    nulls = quality.get("null_counts") or {}
    rows = (meta.get("row_counts") or {}).get("jobs") or quality.get("rows_out")
    derived = {**FORMAT_DERIVED.get(meta.get("format", ""), {}), **(meta.get("derived_columns") or {})}
    source = FORMAT_LABELS.get(meta.get("format", ""), "this trace")
    out = {}
    for col in schema.JOB_COLUMNS:
        if col in absent:
            out[col] = {"status": ABSENT, "note": f"{source} has no {COLUMN_WORDS.get(col, col)}"}
        elif col in schema.JOB_COLUMNS_ADDED and col not in nulls:
            note = f"{source} has no {COLUMN_WORDS.get(col, col)} (ingested before helios kept them)"
            out[col] = {"status": ABSENT, "note": note}
        elif rows and nulls.get(col) == rows:
            out[col] = {"status": ABSENT, "note": f"{source} has no {COLUMN_WORDS.get(col, col)} (every value empty)"}
        elif col in derived:
            out[col] = {"status": DERIVED, "note": derived[col]}
        else:
            out[col] = {"status": REAL, "note": ""}
    return out


def _capacity_problem(meta: dict[str, Any], feature: Feature) -> str | None:
    if not (meta.get("row_counts") or {}).get("vc_gpus"):
        hint = CAPACITY_HINTS.get(meta.get("format", ""), "ingest it with its GPU capacity")
        return f"it has no GPU capacity table ({hint})"
    if feature.per_vc_capacity and meta.get("capacity_scope") == "cluster":
        return "its GPU capacity is known for the whole cluster only, not per VC"
    return None


def feature_problem(meta: dict[str, Any], name: str, columns: dict[str, dict[str, str]] | None = None) -> str | None:
    """Why a dataset cannot support the feature (one sentence), or None when it can."""
    feature = FEATURES[name]
    lacks = FORMAT_LACKS.get(meta.get("format", ""), {})
    if name in lacks:
        return lacks[name]
    columns = columns or column_status(meta)
    missing = [c for c in feature.columns if columns[c]["status"] == ABSENT]
    if missing:
        source = FORMAT_LABELS.get(meta.get("format", ""), "this trace")
        words = " or ".join(dict.fromkeys(COLUMN_WORDS.get(c, c) for c in missing))
        return f"{source} has no {words}, needed for {feature.label}"
    if feature.capacity:
        return _capacity_problem(meta, feature)
    return None


def capacity_disabled(meta: dict[str, Any]) -> list[str]:
    """The features a dataset lacks only because it has no GPU capacity table (empty when it has one)."""
    features = capabilities(meta)["features"]
    missing_capacity = _capacity_problem(meta, Feature("", ()))
    return [FEATURES[n].label for n, problem in features.items() if problem and problem == missing_capacity]


def capabilities(meta: dict[str, Any]) -> dict[str, Any]:
    """The dataset's columns (status, note), features and pages, each with the reason when it does not apply."""
    recorded = meta.get("capabilities")
    if isinstance(recorded, dict) and set(schema.JOB_COLUMNS) <= set(recorded.get("columns") or ()):
        return recorded
    columns = column_status(meta)
    features = {name: feature_problem(meta, name, columns) for name in FEATURES}
    pages = {page: next((features[f] for f in needs if features[f]), None) for page, needs in PAGES.items()}
    return {"columns": columns, "features": features, "pages": pages}


def not_in_trace(meta: dict[str, Any], needs: tuple[str, ...]) -> str | None:
    """A 'Not in this trace: ...' sentence for the first of the needed features the dataset lacks, else None."""
    features = capabilities(meta)["features"]
    for name in needs:
        problem = features.get(name) or (feature_problem(meta, name) if name not in features else None)
        if problem:
            return f"Not in this trace: {problem}."
    return None
