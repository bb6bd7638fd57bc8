"""The whole dashboard on ingested Slurm datasets: every page and figure, the overview, filters, compare, the job
explorer and figure downloads, "data as of", and the what-if panel (FIFO, SJF, QSSF trained on the cluster's own
history) with its downloads. Two datasets: ten synthetic days of a 4-partition cluster with a capacity file
(`slurm-synth`), and the real export of the test cluster refreshed once (`slurm-real`, two minutes of jobs); the
views that need GPU capacity say so on a dataset ingested without it (`slurm-nocap`); CES runs on 75 days
(`slurm-long`: it needs a training and a validation month)."""

from __future__ import annotations

import csv
import io
from contextvars import copy_context
from datetime import datetime

import polars as pl
import pytest
from dash import no_update
from dash._callback_context import context_value
from dash._utils import AttributeDict

from analytics.ingest import IngestOptions, append, ingest
from components.explorer import grid as explorer_grid
from components.server.settings import Settings
from components.shell import callbacks, controls
from components.whatif import callbacks as whatif
from components.whatif import form as ids
from components.whatif.run import results_cache
from components.whatif.state import default_form
from sim.scenario import RECORDED, TWIN
from sim.slurm.knobs import KNOBS
from tests.analytics.test_ingest_slurm import BATCH1, FIXTURES, SYNC
from tests.components.conftest import DashClient, find, write_small
from tests.components.test_components_callbacks import as_json
from tests.slurm.synthetic import exports, write_capacity

PAGES = ("/", "/cluster", "/jobs", "/users", "/compare", "/data")
SLURM = ("slurm-synth", "slurm-real")


@pytest.fixture(scope="module")
def slurm_root(tmp_path_factory):
    """A data folder with the two Slurm datasets and the small Helios-like `helios-synth`."""
    folder = tmp_path_factory.mktemp("slurm-ui")
    root = folder / "data"
    (folder / "long").mkdir()
    first, later = exports(folder, datetime(2025, 3, 1), days=10, jobs_per_day=150)
    capacity = write_capacity(folder / "caps.csv")
    ingest(first, "slurm", "slurm-synth", IngestOptions(capacity=capacity), root=root)
    append(later, "slurm", "slurm-synth", root=root)
    real = IngestOptions(cluster="heliostest", capacity=FIXTURES / "scontrol_nodes.txt")
    ingest(BATCH1, "slurm", "slurm-real", real, root=root)
    append(SYNC, "slurm", "slurm-real", root=root)
    ingest(SYNC, "slurm", "slurm-nocap", root=root)
    long_first, _ = exports(folder / "long", datetime(2025, 3, 1), days=75, jobs_per_day=60)
    ingest(long_first, "slurm", "slurm-long", IngestOptions(capacity=capacity), root=root)
    nodes = folder / "nodes.txt"  # 4-GPU nodes: p0 has 4 of them, the others 2
    partitions = ["p0"] * 4 + ["p1", "p1", "p2", "p2", "p3", "p3"]
    nodes.write_text("".join(f"NodeName=n{i} Gres=gpu:4 Partitions={p}\n" for i, p in enumerate(partitions)))
    ingest(first, "slurm", "slurm-4gpu", IngestOptions(capacity=nodes), root=root)
    write_small("helios-synth", root)
    return root


@pytest.fixture(scope="module")
def settings(slurm_root, tmp_path_factory) -> Settings:
    """App settings over the Slurm data folder with a fresh cache."""
    return Settings(data_dir=slurm_root, cache_dir=tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def app(settings):
    """The dashboard over the Slurm data folder."""
    from app import create_app

    return create_app(settings)


@pytest.fixture
def ui(app) -> DashClient:
    """A client of the app, after the first request set up the pages router."""
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    return DashClient(client)


@pytest.mark.parametrize("dataset", SLURM)
@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_and_every_figure_draws(ui, path, dataset):
    layout = ui.page(path, f"?ds={dataset}")
    alerts = [n["props"].get("children") for n in ui.walk(layout) if n["type"] == "Alert"]
    assert alerts == [], alerts
    for spec in ui.specs(layout):
        fig = ui.figure(spec)
        assert fig["data"], f"{path} {spec['name']} drew no trace"
        assert not fig["layout"].get("annotations"), (path, spec["name"], fig["layout"].get("annotations"))


def test_every_page_says_how_fresh_the_data_is(ui):
    for path in PAGES[:-1]:
        line = ui.find(ui.page(path, "?ds=slurm-real"), "data-as-of")
        assert line["children"] == "slurm-real: data as of 2026-12-02 03:52 (its newest submit, start or end)", path
    for path in ("/data", "/whatif"):
        assert "2026-12-02 03:52" in str(ui.page(path, "?ds=slurm-real")), path


def test_filters_reach_the_figures_of_a_slurm_dataset(ui):
    layout = ui.page("/jobs", "?ds=slurm-synth&vc=p1&kind=gpu&state=FAILED&user=u001,u002,u003")
    specs = ui.specs(layout)
    assert specs and specs[0]["state"]["vcs"] == ["p1"] and specs[0]["state"]["states"] == ["FAILED"]
    for spec in specs:
        assert "figure" not in ui.figure(spec).get("error", {})
    options = callbacks.filter_options  # the filter bar's choices come from the dataset
    with ui.client.application.test_request_context():
        clusters, vcs, users, first, last, _ = options("slurm-synth", None, ["u002", "u001"])
    assert clusters == ["synth"] and vcs == ["p0", "p1", "p2", "p3"] and users == ["u002", "u001"]
    assert (first, last) == ("2025-03-01", "2025-03-11")


def test_the_overview_cards_and_summary_of_a_slurm_dataset(ui):
    from tests.components.test_components_smoke import overview

    got = overview(ui, "?ds=slurm-real")
    assert [r["id"] for r in got["table"]["rowData"]] == ["heliostest", "total"]
    total = got["table"]["rowData"][-1]
    assert total["job_num"] == 37 and total["gpu_num"] == 8
    assert all(v["children"].endswith(" %") for v in got["util"].values())


def test_compare_puts_slurm_datasets_side_by_side(ui):
    specs = ui.specs(ui.page("/compare", "?ds=slurm-synth&cmp=slurm-synth,slurm-real,helios-synth"))
    names = [t["name"] for t in ui.figure(specs[0])["data"]]
    assert names[:2] == ["slurm-synth synth", "slurm-real heliostest"]


def test_downloads_of_figures_and_the_job_explorer(ui):
    spec = {"name": "duration_gpu", "state": {**callbacks.empty_state("slurm-synth"), "vcs": ["p2"]}}
    with ui.client.application.test_request_context():
        sent = callbacks.download_csv(1, spec)
    assert sent["filename"] == "helios-duration_gpu.csv" and len(sent["content"].splitlines()) > 2
    resp = ui.client.get("/download/jobs.csv", query_string={"ds": "slurm-real", "state": "CANCELLED"})
    rows = list(csv.DictReader(io.StringIO(resp.get_data(as_text=True))))
    assert resp.status_code == 200 and len(rows) == 3
    assert sorted(r["job_name"] for r in rows) == ["cancel-begin", "cancel-pending", "cancel-running"]


def _start(settings: Settings, form: dict) -> tuple:
    """Click Run with form's values: the start callback's outputs."""
    values = [form[k] for k in ids.FORM_FIELDS]
    context_value.set(AttributeDict(triggered_inputs=[{"prop_id": "whatif-run.n_clicks", "value": 1}]))
    return whatif.start_run(1, [None] * 9, [None] * 7, [None] * len(KNOBS), *values, settings=settings)


def _run(settings: Settings, form: dict) -> tuple[list, dict, str | None]:
    _, error, request, *_ = copy_context().run(lambda: _start(settings, form))
    assert error is None, error
    children, meta, _, error = whatif.run_job(lambda p: None, request, settings)
    return children, meta, error


def test_the_what_if_panel_runs_fifo_sjf_and_qssf_trained_on_the_clusters_history(settings):
    form = default_form("slurm-synth", "synth", "2025-03-08", "2025-03-11")
    form["policies"] = ["fifo", "sjf", "qssf"]
    children, meta, error = _run(settings, form)
    assert error is None
    result = results_cache(settings).get(meta["key"])
    assert result.summary["scheme"].to_list() == [RECORDED, TWIN, "fifo", "sjf", "qssf"]
    records = result.records.filter(pl.col("scheme") == "qssf")
    assert records.height > 300 and records["placed"].all()
    assert result.predictor["name"] == "history" and result.predictor["spearman"] > 0.1  # learnt from Mar 1-7
    assert result.window == ("2025-03-08 00:00:00", "2025-03-11 23:59:59")

    def download(button: str, *clicks):
        context_value.set(AttributeDict(triggered_inputs=[{"prop_id": f"whatif-dl-{button}.n_clicks", "value": 1}]))
        return whatif.download(*clicks, meta, settings)

    sent = copy_context().run(download, "records", None, 1, None, None)
    assert pl.read_csv(io.StringIO(sent["content"])).height == result.records.height


def test_the_what_if_panel_on_the_real_cluster_export(settings):
    form = default_form("slurm-real", "heliostest", "2026-12-02", "2026-12-02")
    form["policies"] = ["fifo", "sjf"]
    _, meta, error = _run(settings, form)
    assert error is None
    result = results_cache(settings).get(meta["key"])
    assert result.summary["scheme"].to_list() == [RECORDED, TWIN, "fifo", "sjf"]
    assert result.baseline == TWIN and result.twin["source"] == "calibrated"  # the export came without a slurm.conf


def test_without_capacity_the_views_that_need_it_say_so(ui, settings):
    layout = ui.page("/cluster", "?ds=slurm-nocap")
    vc_util = next(s for s in ui.specs(layout) if s["name"] == "vc_util")
    text = ui.figure(vc_util)["layout"]["annotations"][0]["text"]
    assert "Not in this trace: it has no GPU capacity table (ingest with --capacity: scontrol" in text
    assert "none given, so these views are disabled: GPU utilisation" in str(ui.page("/data"))
    form = {**default_form("slurm-nocap", "heliostest", "2026-12-02", "2026-12-02"), "policies": ["fifo"]}
    _, error, request, *_ = copy_context().run(lambda: _start(settings, form))
    assert not isinstance(request, dict)  # refused before anything runs: no run request
    assert "what-if replay does not apply to dataset slurm-nocap: it has no GPU capacity table" in str(error)


def test_a_figure_the_dataset_cannot_draw_offers_no_csv_and_says_why(ui):
    layout = ui.page("/cluster", "?ds=slurm-nocap")
    button = find(layout, {"type": controls.CSV_BUTTON, "name": "vc_util"})
    assert button["disabled"] is True and button["title"].startswith("Not in this trace: it has no GPU capacity")
    spec = next(s for s in ui.specs(layout) if s["name"] == "vc_util")
    with ui.client.application.test_request_context():
        assert callbacks.download_csv(1, spec) is no_update  # no file of zeros
    drawn = find(ui.page("/cluster", "?ds=slurm-real"), {"type": controls.CSV_BUTTON, "name": "vc_util"})
    assert drawn["disabled"] is False and drawn["title"] == "Download this figure's data as CSV"


def test_the_job_explorer_shows_only_the_columns_a_trace_has(ui, slurm_root):
    with ui.client.application.test_request_context():
        real = as_json(explorer_grid.body(callbacks.empty_state("slurm-real")))
        helios = as_json(explorer_grid.body(callbacks.empty_state("helios-synth")))
    real_cols = [c["field"] for c in find(real, explorer_grid.GRID)["columnDefs"]]
    assert "job_name" in real_cols and "gpu_type" not in real_cols  # the test cluster's GPUs have no type
    assert "GPU types" in find(real, explorer_grid.ABSENT)["children"]
    helios_cols = [c["field"] for c in find(helios, explorer_grid.GRID)["columnDefs"]]
    assert "job_name" not in helios_cols and "gpu_type" not in helios_cols
    scheduler = "accounts, partitions, QOS, time limits, recorded priorities"
    assert find(helios, explorer_grid.ABSENT)["children"] == f"not in this trace: job names, GPU types, {scheduler}"
    assert {"account", "partition", "qos", "timelimit_s"} <= set(real_cols)  # the real export's scheduler columns
    resp = ui.client.get("/download/jobs.csv", query_string={"ds": "helios-synth"})
    assert resp.get_data(as_text=True).splitlines()[0] == ",".join(c for c in helios_cols)


def test_ces_runs_on_a_slurm_dataset_with_two_months_of_history(settings):
    form = {**default_form("slurm-long", "synth", "2025-05-10", "2025-05-14"), "policies": ["fifo"]}
    form["ces_enabled"] = True
    _, meta, error = _run(settings, form)
    assert error is None
    metrics = results_cache(settings).get(meta["key"]).ces["metrics"]
    assert metrics["total_nodes_mean"] == 64 and metrics["energy_saved_kwh"] > 0 and metrics["unplaced_jobs"] == 0


def test_the_simulator_uses_the_clusters_own_gpus_per_node(settings):
    form = {**default_form("slurm-4gpu", "synth", "2025-03-08", "2025-03-10"), "policies": ["fifo"]}
    _, meta, error = _run(settings, form)
    assert error is None
    result = results_cache(settings).get(meta["key"])
    assert result.config["gpus_per_node"] == 4 and result.vc_nodes == {"p0": 4, "p1": 2, "p2": 2, "p3": 2}
    eight = result.records.filter((pl.col("scheme") == "fifo") & (pl.col("gpu_num") == 8))
    assert eight.height > 0 and eight["placed"].all()  # over two 4-GPU nodes
