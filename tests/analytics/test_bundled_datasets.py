"""The bundled public traces: built by `helios bundled`, honest about what they lack, Alibaba variants accepted."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import polars as pl
import pytest

import cli
from analytics import capabilities, queries, schema, store
from analytics.filters import NO_FILTER
from analytics.ingest import IngestError, ingest
from analytics.ingest.bundled import BUNDLED, PUBLIC_DIR

VARIANTS = Path(__file__).resolve().parents[1] / "fixtures" / "alibaba_variants"


def test_every_bundled_file_is_in_the_repository_and_credited():
    sources = (PUBLIC_DIR.parent / "SOURCES.md").read_text()
    files = [p for p in PUBLIC_DIR.rglob("*") if p.is_file()]
    assert len(files) == 6
    for path in files:
        assert path.name in sources, path
        assert path.stat().st_size < 5 * 1024**2, path


def test_helios_bundled_builds_only_what_is_missing(data_root, capsys):
    assert cli.main(["bundled", "--quiet"]) == 0
    assert {d.name for d in store.list_datasets(data_root)} == set(BUNDLED)
    first = {d.name: d.version for d in store.list_datasets(data_root)}
    assert cli.main(["bundled", "--quiet"]) == 0
    assert "present" in capsys.readouterr().out
    assert {d.name: d.version for d in store.list_datasets(data_root)} == first
    assert cli.main(["bundled", "nope"]) == 2


def test_public_is_not_a_dataset_name(data_root):
    with pytest.raises(store.DatasetError, match="reserved"):
        store.check_name("public")


def test_philly_capabilities_say_what_is_absent(bundled_root):
    caps = store.open_dataset("philly", bundled_root).meta["capabilities"]
    assert {c for c, v in caps["columns"].items() if v["status"] == capabilities.ABSENT} == {
        "user", "job_name", "gpu_type", "cpu_num", "node_num", "state", "start_time", "end_time", "queue",
        *schema.SCHEDULER_COLUMNS,
    }  # fmt: skip
    assert caps["features"]["durations"] is None and caps["features"]["whatif"] is None
    for feature in ("utilisation", "queueing", "final_states", "users", "ces"):
        assert "Philly job list has no" in caps["features"][feature]
    assert caps["pages"]["Cluster"] and caps["pages"]["Jobs"] is None


@pytest.mark.parametrize("name", ["philly", "alibaba"])
def test_the_public_traces_have_no_scheduler_columns(bundled_root, name):
    ds = store.open_dataset(name, bundled_root)
    columns = capabilities.capabilities(ds.meta)["columns"]
    for col in schema.SCHEDULER_COLUMNS:
        assert columns[col]["status"] == capabilities.ABSENT, col
        assert columns[col]["note"].endswith(f"has no {capabilities.COLUMN_WORDS[col]}")
    assert (
        ds.jobs().select(schema.SCHEDULER_COLUMNS).collect().null_count().row(0) == (ds.meta["row_counts"]["jobs"],) * 5
    )


def test_philly_gpu_hours_come_from_durations(bundled_root):
    ds = store.open_dataset("philly", bundled_root)
    states = queries.job_states(ds, NO_FILTER)
    jobs = ds.jobs().collect()
    expected = float((jobs["gpu_num"].cast(pl.Int64) * jobs["duration"]).sum())
    assert states["gpu_time"].item() == pytest.approx(expected) and expected > 0
    assert states["unknown_state_jobs"].item() == jobs.height


def test_alibaba_unfinished_pods_are_not_failures(bundled_root):
    ds = store.open_dataset("alibaba", bundled_root)
    jobs = ds.jobs().collect()
    counts = dict(jobs.group_by("state").len().iter_rows())
    assert counts == {"RUNNING": 5193, "FAILED": 1870, "PENDING": 897, "COMPLETED": 192}
    states = queries.job_states(ds, NO_FILTER).row(0, named=True)
    assert states["unfinished_jobs"] == 5193 + 897 and states["failed_jobs"] == 1870
    summary = queries.cluster_summary(ds, NO_FILTER).row(0, named=True)
    assert summary["fail_rate"] == pytest.approx(round(1870 / (1870 + 192), 3))
    assert summary["complete_rate"] == pytest.approx(round(192 / (1870 + 192), 3))
    ended = jobs.filter(pl.col("state").is_in(schema.FINAL_STATES))
    assert summary["avg_run_time_gpu"] == pytest.approx(
        round(ended.filter(pl.col("gpu_num") > 0)["duration"].mean(), 3)
    )
    shares = queries.gpu_time_share_by_state(ds, NO_FILTER)
    assert shares["state_group"].to_list() == [*schema.STATE_GROUPS, schema.UNFINISHED]


@pytest.mark.parametrize("variant", ["gpushare20", "cpu050", "gpuspec10"])
def test_alibaba_variant_files_ingest(tmp_path, data_root, variant):
    ds = ingest(VARIANTS / f"openb_pod_list_{variant}.csv", "alibaba-openb", variant)
    source = pl.read_csv(VARIANTS / f"openb_pod_list_{variant}.csv")
    assert ds.jobs().collect().height == source.height
    assert ds.meta["capabilities"]["features"]["final_states"] is None


def test_alibaba_variant_folder_takes_its_only_pod_list(tmp_path, data_root):
    folder = tmp_path / "trace"
    folder.mkdir()
    for name in ("openb_pod_list_gpushare20.csv", "openb_node_list_gpu_node.csv"):
        shutil.copy(VARIANTS / name, folder / name)
    assert ingest(folder, "alibaba-openb", "share").jobs().collect().height == 12


def test_alibaba_folder_with_several_variants_names_them(data_root):
    with pytest.raises(IngestError, match=r"4 pod lists \(openb_pod_list_cpu050.csv.*ingest one by its file path"):
        ingest(VARIANTS, "alibaba-openb", "many")


def test_alibaba_variant_without_times_says_which_columns(data_root):
    with pytest.raises(IngestError) as err:
        ingest(VARIANTS / "openb_pod_list_multigpu50.csv", "alibaba-openb", "nope")
    message = str(err.value)
    assert "no creation_time, scheduled_time, deletion_time column(s)" in message
    assert "openb_pod_list_default.csv" in message and "\n" not in message


def test_alibaba_zip_of_the_trace_folder_ingests(tmp_path, data_root):
    archive = tmp_path / "openb.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted((PUBLIC_DIR / "alibaba_openb").iterdir()):
            zf.write(path, f"alibaba_openb/{path.name}")
    ds = ingest(archive, "alibaba-openb", "zipped")
    assert ds.jobs().collect().height == 8152 and ds.meta["total_gpus"] == 6212


def test_alibaba_pod_list_alone_has_no_capacity_and_says_so(tmp_path, data_root):
    shutil.copy(VARIANTS / "openb_pod_list_cpu050.csv", tmp_path / "openb_pod_list_cpu050.csv")
    ds = ingest(tmp_path / "openb_pod_list_cpu050.csv", "alibaba-openb", "alone")
    assert ds.vc_gpus().height == 0
    features = ds.meta["capabilities"]["features"]
    assert "no GPU capacity table" in features["utilisation"] and "no GPU capacity table" in features["whatif"]
    assert features["durations"] is None
