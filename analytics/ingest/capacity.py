"""GPUs of each partition (VC) of a cluster from `scontrol show nodes -o`, `sinfo` output or a small `vc,gpus` CSV.

Partitions may share nodes, so besides each VC's GPUs the capacity keeps the whole cluster's (its distinct nodes'
GPUs) under the VC `*`, which the cluster-wide views use; a CSV gives the whole cluster as a `*` row when it knows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import polars as pl

from analytics import schema
from analytics.ingest.gpus import count_gpus
from analytics.ingest.parse import INT32_MAX, IngestError, clip, show_names

_NODE_NAME = re.compile(r"(?:^|\s)NodeName=(\S+)")
_FIELD = r"(?:^|\s){}=(\S*)"


@dataclass(frozen=True)
class Capacity:
    """GPUs per VC, of the whole cluster (None when unknown) and per GPU node (None when nodes differ)."""

    vc_gpus: dict[str, int]
    total_gpus: int | None
    gpus_per_node: int | None
    source: str


def node_gpus(tres: str | None, gres: str | None) -> int:
    """A node's GPUs from its CfgTRES (`gres/gpu=8`), else its Gres (`gpu:8`, `gpu:a100:4(S:0-1)`, summed), else 0
    (analytics.ingest.gpus reads both)."""
    found = count_gpus(tres)
    return found if found is not None else count_gpus(gres) or 0


def _field(line: str, name: str) -> str | None:
    found = re.search(_FIELD.format(name), line)
    return found.group(1) if found else None


def _partitions(text: str | None) -> list[str]:
    return [p.rstrip("*") for p in (text or "").split(",") if p and p != "(null)"]


def _from_nodes(nodes: dict[str, tuple[int, list[str]]], source: str) -> Capacity:
    """Capacity of nodes {name: (GPUs, partitions)}: per partition the GPUs of its nodes, the total of all."""
    per_vc: dict[str, int] = {}
    for gpus, partitions in nodes.values():
        for vc in partitions:
            per_vc[vc] = per_vc.get(vc, 0) + gpus
    counts = {gpus for gpus, _ in nodes.values() if gpus > 0}
    per_node = counts.pop() if len(counts) == 1 else None
    return Capacity(dict(sorted(per_vc.items())), sum(g for g, _ in nodes.values()), per_node, source)


def parse_scontrol_nodes(text: str, label: str) -> Capacity:
    """Capacity from `scontrol show nodes -o` output (one `NodeName=...` line per node)."""
    nodes: dict[str, tuple[int, list[str]]] = {}
    for row, line in enumerate(text.splitlines(), start=1):
        name = _NODE_NAME.search(line)
        if not line.strip():
            continue
        if name is None:
            raise IngestError(f"{label} row {row}: expected a NodeName=... line, got {clip(repr(line), 80)}")
        gpus = node_gpus(_field(line, "CfgTRES"), _field(line, "Gres"))
        nodes[name.group(1)] = (gpus, _partitions(_field(line, "Partitions")))
    return _from_nodes(nodes, label)


def _split(line: str, separator: str | None) -> list[str]:
    return [part.strip() for part in (line.split(separator) if separator else line.split())]


def parse_sinfo(text: str, label: str) -> Capacity:
    """Capacity from `sinfo -N -o '%N|%P|%G'` (or space-separated `sinfo -N -O NodeList,Partition,Gres`) output."""
    lines = [line for line in text.splitlines() if line.strip()]
    separator = "|" if "|" in lines[0] else None
    header = [h.upper() for h in _split(lines[0], separator)]
    node_col = next((c for c in ("NODELIST", "HOSTNAMES", "NODE_NAME") if c in header), None)
    if node_col is None or "PARTITION" not in header or "GRES" not in header:
        found = show_names(header)
        raise IngestError(f"{label}: sinfo output needs NODELIST, PARTITION and GRES columns (found: {found})")
    at = {c: header.index(c) for c in (node_col, "PARTITION", "GRES")}
    nodes: dict[str, tuple[int, list[str]]] = {}
    for row, line in enumerate(lines[1:], start=2):
        fields = _split(line, separator)
        if len(fields) != len(header):
            raise IngestError(f"{label} row {row}: {len(fields)} fields, the header has {len(header)}")
        name = fields[at[node_col]]
        gpus, partitions = nodes.get(name, (node_gpus(None, fields[at["GRES"]]), []))
        nodes[name] = (gpus, partitions + _partitions(fields[at["PARTITION"]]))
    return _from_nodes(nodes, label)


def parse_capacity_csv(path: Path, label: str) -> Capacity:
    """Capacity from a `vc,gpus` CSV (`partition` for `vc` also accepted; vc `*` = the whole cluster)."""
    try:
        df = pl.read_csv(path, infer_schema=False)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise IngestError(f"{label}: cannot read CSV file ({clip(str(exc).splitlines()[0])})") from exc
    vc_col = next((c for c in ("vc", "partition") if c in df.columns), None)
    if vc_col is None or "gpus" not in df.columns:
        raise IngestError(f"{label}: expected columns vc,gpus (found: {show_names(df.columns)})")
    per_vc: dict[str, int] = {}
    for row, (vc, raw) in enumerate(df.select(vc_col, "gpus").iter_rows(), start=2):
        text = (raw or "").strip()
        if not vc or not text.isdigit() or int(text) > INT32_MAX:
            raise IngestError(f"{label} row {row}, column 'gpus': expected a whole number of GPUs, got {raw!r}")
        per_vc[vc.strip()] = int(text)
    total = per_vc.pop(schema.WHOLE_CLUSTER_VC, None)
    return Capacity(dict(sorted(per_vc.items())), total, None, label)


def read_capacity(path: Path) -> Capacity:
    """Read a capacity file of any of the three kinds, told apart by its first line."""
    label = str(path)
    if not path.is_file():
        raise IngestError(f"{label}: no such file (--capacity)")
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise IngestError(f"{label}: cannot read ({exc.strerror})") from exc
    first = next((line for line in text.splitlines() if line.strip()), "")
    if not first:
        raise IngestError(f"{label}: empty capacity file")
    if first.lstrip().startswith("NodeName="):
        return parse_scontrol_nodes(text, label)
    if any(name in first.upper() for name in ("GRES", "NODELIST", "HOSTNAMES")) and "," not in first:
        return parse_sinfo(text, label)
    return parse_capacity_csv(path, label)


def daily_capacity(capacity: Capacity, cluster: str, first_day: date | None, last_day: date | None) -> pl.DataFrame:
    """One row per VC (and `*` for the whole cluster, when known) per day from first_day to last_day."""
    if first_day is None or last_day is None:
        return schema.empty_vc_gpus()
    per_vc = dict(capacity.vc_gpus)
    if capacity.total_gpus is not None:
        per_vc[schema.WHOLE_CLUSTER_VC] = capacity.total_gpus
    if not per_vc:
        return schema.empty_vc_gpus()
    days = pl.DataFrame({"date": pl.date_range(first_day, last_day, interval="1d", eager=True)})
    vcs = pl.DataFrame({"vc": list(per_vc), "gpus": list(per_vc.values())})
    rows = vcs.join(days, how="cross").with_columns(pl.lit(cluster).alias("cluster"))
    return schema.conform_vc_gpus(rows)


def latest_capacity(vc_gpus: pl.DataFrame, cluster: str, source: str) -> Capacity | None:
    """The capacity of a cluster's last recorded day in a stored capacity table (None when it has none)."""
    rows = vc_gpus.filter(pl.col("cluster") == cluster)
    if rows.is_empty():
        return None
    last = rows.filter(pl.col("date") == rows["date"].max())
    per_vc = {vc: int(g) for vc, g in last.select("vc", "gpus").iter_rows()}
    total = per_vc.pop(schema.WHOLE_CLUSTER_VC, None)
    return Capacity(dict(sorted(per_vc.items())), total, None, source)
