"""The Data page says each dataset's scheduler configuration in one line: the captured one (with what the model
leaves out), why a capture failed (by file, line and key, without the server's folders), "no scheduler
configuration captured" for a Slurm dataset without one, and "not in this trace" for the other formats; the same
in Chromium (gated by REQUIRE_BROWSER like the other browser tests)."""

from __future__ import annotations

import os
import shutil
import urllib.request
from datetime import date
from urllib.parse import parse_qs, urlsplit

import pytest

from analytics.ingest import IngestOptions, ingest
from analytics.ingest.slurm_conf import read_slurm_config
from analytics.scheduler import config_summary
from components.server.settings import Settings
from sim.slurm.calibrate import RULES
from sim.slurm.knobs import knob_values
from tests.analytics.test_ingest_slurm import BATCH1, FIXTURES
from tests.analytics.test_slurm_conf import MULTIFACTOR
from tests.components.conftest import DashClient, write_small

SUMMARY = config_summary(read_slurm_config(MULTIFACTOR))


def write_datasets(root, tmp) -> None:
    """slurm-conf (the multifactor capture), slurm-bad (a weight that is not a number), slurm-none, helios-synth."""
    options = IngestOptions(cluster="heliostest", capacity=FIXTURES / "scontrol_nodes.txt")
    ingest(BATCH1, "slurm", "slurm-conf", IngestOptions(**{**options.__dict__, "slurm_config": MULTIFACTOR}), root=root)
    bad = tmp / "bad-conf"
    shutil.copytree(MULTIFACTOR, bad)
    text = (bad / "config.txt").read_text().replace("PriorityWeightQOS       = 2000", "PriorityWeightQOS       = x")
    (bad / "config.txt").write_text(text)
    ingest(BATCH1, "slurm", "slurm-bad", IngestOptions(**{**options.__dict__, "slurm_config": bad}), root=root)
    ingest(BATCH1, "slurm", "slurm-none", options, root=root)
    write_small("helios-synth", root, n_jobs=500)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The data folder of the four datasets."""
    folder = tmp_path_factory.mktemp("data-scheduler")
    write_datasets(folder / "data", folder)
    return folder


@pytest.fixture(scope="module")
def ui(data):
    """A client of the dashboard over the four datasets."""
    from app import create_app

    app = create_app(Settings(data_dir=data / "data", cache_dir=data / "cache"))
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    return DashClient(client)


def _section(ui: DashClient, dataset: str) -> list[str]:
    """The texts of the Scheduler section of a dataset's card, one per paragraph or list item."""
    card = next(n for n in ui.walk(ui.page("/data")) if n["props"].get("id") == f"dataset-{dataset}")
    section = next(n for n in ui.walk(card) if n["props"].get("className") == "scheduler-config")
    return [n["props"]["children"] for n in ui.walk(section) if n["type"] in ("P", "Li", "Div") and n is not section]


def test_the_data_page_says_the_captured_configuration(ui):
    summary, title, *notes = _section(ui, "slurm-conf")
    assert summary.startswith(SUMMARY + " (Slurm 22.05.8, as of 2026-12-04 ") and summary.endswith(").")
    assert title == "Not modelled by the what-if's slurm policy:"
    assert notes == list(read_slurm_config(MULTIFACTOR).not_modelled)


def test_the_data_page_says_why_there_is_none(ui):
    [bad] = _section(ui, "slurm-bad")
    assert bad.startswith("No scheduler configuration captured: config.txt line ")
    assert bad.endswith(", PriorityWeightQOS: 'x' is not a whole number.") and "/tmp" not in bad
    assert _section(ui, "slurm-none")[0].startswith("No scheduler configuration captured (helios ingest --slurm")
    assert _section(ui, "helios-synth") == ["Not in this trace."]


def test_without_a_configuration_the_data_page_says_how_the_twin_is_calibrated_and_links_its_fit(ui):
    from components.pages.data import FIT_DAYS  # a page module: imported once the app exists

    def calibration(dataset: str) -> list[dict]:
        card = next(n for n in ui.walk(ui.page("/data")) if n["props"].get("id") == f"dataset-{dataset}")
        return [n for n in ui.walk(card) if n["props"].get("className") == "twin-calibration"]

    [section] = calibration("helios-synth")
    rules = [n["props"]["children"] for n in ui.walk(section) if n["type"] == "Li"]
    assert rules == list(RULES)
    links = [n["props"] for n in ui.walk(section) if n["props"].get("className") == "twin-fit-link"]
    assert [link["children"] for link in links] == ["Venus", "Earth"]  # the clusters of write_small
    query = parse_qs(urlsplit(links[0]["href"]).query, keep_blank_values=True)
    assert query["ds"] == ["helios-synth"] and query["pol"] == [""] and query["run"] == ["1"]
    days = date.fromisoformat(query["end"][0]) - date.fromisoformat(query["start"][0])
    assert days.days == FIT_DAYS - 1
    assert calibration("slurm-conf") == []  # its own configuration is replayed


@pytest.mark.browser
def test_the_data_page_in_chromium(data, page, gunicorn_app, chromium_path):
    env = {**os.environ, "HELIOS_DATA_DIR": str(data / "data"), "HELIOS_CACHE_DIR": str(data / "browser-cache")}
    env.pop("HELIOS_REDIS_URL", None)
    with gunicorn_app(data / "server.log", env, timeout_s=120) as url:
        urllib.request.urlopen(url + "/", timeout=60).read()
        page.goto(url + "/data")
        page.wait_for_load_state("networkidle")
        card = page.locator('[id="dataset-slurm-conf"]')
        shown = card.locator(".scheduler-config")
        shown.wait_for()
        assert shown.locator(".scheduler-summary").inner_text().startswith(SUMMARY)
        assert (
            shown.locator(".scheduler-not-modelled li").first.inner_text()
            == "GPU types, which jobs may ask for: gpu:a100:4"
        )
        other = page.locator('[id="dataset-helios-synth"] .scheduler-config')
        assert other.inner_text() == "Not in this trace."
        card.scroll_into_view_if_needed()
        card.screenshot(path=str(data / "data-page-scheduler.png"))
        assert page.errors == []


@pytest.mark.browser
def test_the_whatif_page_sets_the_twins_knobs_from_the_form_and_the_link(data, page, gunicorn_app, chromium_path):
    env = {**os.environ, "HELIOS_DATA_DIR": str(data / "data"), "HELIOS_CACHE_DIR": str(data / "twin-cache")}
    env.pop("HELIOS_REDIS_URL", None)
    with gunicorn_app(data / "twin-server.log", env, timeout_s=120) as url:
        page.set_viewport_size({"width": 1280, "height": 1400})
        page.goto(url + "/whatif?ds=slurm-conf&cluster=heliostest&pol=fifo,slurm&t_backfill=0&run=1")
        knobs = page.locator('[id="whatif-twin-body"]')
        knobs.wait_for()
        assert knobs.get_attribute("open") is not None  # a knob in the link: the section is unfolded
        backfill = page.locator('input[id*=\'"name":"backfill"\']')
        assert backfill.input_value() == "0"
        captured = knob_values(read_slurm_config(MULTIFACTOR))
        age = page.locator('input[id*=\'"name":"weight_age"\']')
        assert age.input_value() == "" and age.get_attribute("placeholder") == str(captured["weight_age"])
        page.wait_for_function("document.getElementById('whatif-row-slurm') !== null")
        assert page.locator("#whatif-error").inner_text() == ""
        fairshare = page.locator('input[id*=\'"name":"weight_fairshare"\']')
        fairshare.fill("0")
        page.locator('input[id*=\'"name":"account_gpus"\']').fill("physics=2")
        page.locator("#whatif-run").click()
        page.wait_for_function("window.location.search.includes('t_weight_fairshare=0')")
        assert "t_account_gpus.physics=2" in page.evaluate("window.location.search")
        assert "t_backfill=0" in page.evaluate("window.location.search")
        page.wait_for_function("document.getElementById('whatif-status').innerText.includes('ran in')")
        assert page.locator("#whatif-row-slurm").count() == 1
        knobs.screenshot(path=str(data / "whatif-twin-knobs.png"))
        page.screenshot(path=str(data / "whatif-twin-page.png"), full_page=True)
        assert page.errors == []


@pytest.mark.browser
def test_the_data_pages_fit_link_replays_the_twin_and_a_policy_is_measured_against_it(data, page, gunicorn_app):
    env = {**os.environ, "HELIOS_DATA_DIR": str(data / "data"), "HELIOS_CACHE_DIR": str(data / "fit-cache")}
    env.pop("HELIOS_REDIS_URL", None)
    with gunicorn_app(data / "fit-server.log", env, timeout_s=120) as url:
        page.set_viewport_size({"width": 1280, "height": 1400})
        page.goto(url + "/data")
        page.locator('[id="dataset-helios-synth"] .twin-fit-link', has_text="Earth").click()
        page.wait_for_function("document.getElementById('whatif-replay') !== null", timeout=120_000)
        assert page.locator("#whatif-row-twin").count() == 1 and page.locator("#whatif-row-fifo").count() == 0
        assert page.locator("#whatif-twin-rules li").all_inner_texts()[1].startswith(RULES[1])
        assert "start order (Kendall τ)" in page.locator("#whatif-replay").inner_text()
        page.locator("#whatif-policies").get_by_label("fifo").check()
        page.locator("#whatif-run").click()
        page.wait_for_function("document.getElementById('whatif-row-fifo') !== null", timeout=120_000)
        page.screenshot(path=str(data / "whatif-twin-baseline.png"), full_page=True)
        ratios = page.locator("#whatif-ratios").text_content()
        assert ratios.startswith("FIFO: ") and "within Slurm twin's own error" in ratios
        page.screenshot(path=str(data / "whatif-twin-baseline.png"), full_page=False)
        assert page.errors == []
