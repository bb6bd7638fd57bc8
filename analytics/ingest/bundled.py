"""The real public traces that ship with the product (`data/public/`, see `data/SOURCES.md`) and their datasets."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from analytics import store
from analytics.ingest import IngestOptions, ingest
from analytics.progress import Progress

PUBLIC_DIR = Path(__file__).resolve().parents[2] / "data" / "public"
PHILLY_JOBS = PUBLIC_DIR / "philly" / "philly_gpu_jobs.csv.gz"
PHILLY_VC_NODES = PUBLIC_DIR / "philly" / "philly_vc_nodes.csv"
ALIBABA_FOLDER = PUBLIC_DIR / "alibaba_openb"
PHILLY_NODE_SEQUENCE = PUBLIC_DIR / "ces" / "philly_node_sequence.csv.gz"
CES_ARTIFACT_PREDICTIONS = PUBLIC_DIR / "ces" / "ces_philly_artifact_predictions.csv"


@dataclass(frozen=True)
class Bundled:
    """One bundled dataset: the public file it is ingested from, in which format, with which options."""

    path: Path
    fmt: str
    options: IngestOptions

    @property
    def source(self) -> str:
        """How meta.json names the source: its path inside the repository."""
        return str(self.path.relative_to(PUBLIC_DIR.parents[1]))


BUNDLED: dict[str, Bundled] = {
    "philly": Bundled(PHILLY_JOBS, "philly", IngestOptions(vc_nodes=PHILLY_VC_NODES)),
    "alibaba": Bundled(ALIBABA_FOLDER, "alibaba-openb", IngestOptions()),
}


def missing(root: Path | None = None) -> list[str]:
    """The bundled datasets not yet built under root (default the data folder)."""
    have = {d.name for d in store.list_datasets(root)}
    return [name for name in BUNDLED if name not in have]


def build(name: str, root: Path | None = None, progress: Progress | None = None) -> store.Dataset:
    """Ingest one bundled dataset from its public file into root, replacing an older copy."""
    spec = BUNDLED[name]
    return ingest(spec.path, spec.fmt, name, spec.options, progress, root, spec.source)
