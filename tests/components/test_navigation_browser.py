"""Browser tests of finding things (issue #18): the running-during time filter and relative ranges, the job page and
its links, the note naming ignored URL values, and HTTP 404 for unknown pages and jobs; real headless Chromium against
the app served by gunicorn."""

from __future__ import annotations

import os
import re
import urllib.request
from datetime import datetime
from urllib.error import HTTPError

import polars as pl
import pytest

from analytics import store
from analytics.filters import parse_query, resolve_range, to_filter
from analytics.ingest.bundled import build
from tests.analytics import polars_ref
from tests.components.conftest import make_jobs, make_vc_gpus
from tests.waiting import new_context, open_settled, settle

pytestmark = pytest.mark.browser


@pytest.fixture(scope="session")
def nav_server(tmp_path_factory, chromium_path, write_small, gunicorn_app):
    """The app over a small Helios-like dataset, one whose job ids repeat per cluster, and the Philly job list."""
    root = tmp_path_factory.mktemp("nav")
    data = root / "data"
    write_small("helios-synth", data)
    per_cluster = make_jobs(600).with_columns(pl.int_range(1, pl.len() + 1).over("cluster").alias("job_id"))
    store.write_dataset("dup-ids", per_cluster, make_vc_gpus(), {"format": "synthetic"}, root=data)
    build("philly", data)
    env = {**os.environ, "HELIOS_DATA_DIR": str(data), "HELIOS_CACHE_DIR": str(root / "cache")}
    env["HELIOS_ANONYMOUS_ROLE"] = "viewer"
    with gunicorn_app(root / "server.log", env) as url:
        yield url, data


def _explorer_count(tab) -> int:
    shown = tab.wait_for_function(
        "(() => { const t = document.querySelector('#jobs-status')?.innerText || '';"
        " return /^[0-9,]+ jobs$/.test(t) && t; })()"
    )
    return int(shown.json_value().split()[0].replace(",", ""))


def _oracle_count(data, search: str) -> int:
    """How many jobs the independent Polars reference selects for a URL's filters."""
    state, problems = parse_query(search)
    assert problems == []
    ds = store.open_dataset(state["dataset"], data)
    resolve_range(state, ds.jobs().select(pl.col("submit_time").max()).collect().item(), datetime.now())
    return polars_ref.ref_jobs(ds, to_filter(state)).height


@pytest.mark.draw_all
def test_running_during_a_relative_range_stays_in_the_link_and_counts_like_the_reference(page, nav_server):
    url, data = nav_server
    search = "?ds=helios-synth&cluster=Earth&range=7d"
    open_settled(page, f"{url}/jobs{search}")
    note = page.locator("#window-note").inner_text()
    assert re.match(r"Last 7 days of the trace: 2020-04-1\d \d\d:\d\d – 2020-04-2\d \d\d:\d\d", note), note
    assert "not from today" in note
    submitted = _explorer_count(page)
    assert submitted == _oracle_count(data, search)
    page.get_by_text("running in it").click()
    page.wait_for_url(re.compile(r"time=running"))
    assert "range=7d" in page.url and "start=" not in page.url  # the range stays relative in the link
    page.wait_for_function(f"document.querySelector('#jobs-status')?.innerText !== '{submitted:,} jobs'")
    running = _explorer_count(page)
    assert running == _oracle_count(data, search + "&time=running") and running > submitted
    page.reload()
    settle(page)
    assert _explorer_count(page) == running and page.locator("#window-note").count() == 1
    assert page.errors == []


@pytest.mark.draw_all
def test_running_during_on_a_trace_without_start_times_says_it_cannot_apply(page, nav_server):
    url, _ = nav_server
    open_settled(page, f"{url}/jobs?ds=philly&range=30d&time=running")
    alert = page.locator(".url-problem").inner_text()
    assert "time=running cannot be applied on dataset 'philly'" in alert and "no start times" in alert
    assert "Last 30 days of the trace" in page.locator("#window-note").inner_text()
    running = page.locator("#f-time input[value='running']")
    assert running.is_disabled() and page.locator("#f-time input[value='submitted']").is_checked()
    assert "no start times" in page.locator("#f-time").inner_text()
    assert _explorer_count(page) > 0  # the jobs submitted in the window, not an empty page


def _a_waiting_job(data) -> dict:
    """A GPU job of the small dataset that waited over ten minutes while other GPU jobs of its VC ran."""
    jobs = store.open_dataset("helios-synth", data).jobs().collect()
    for job in jobs.filter((pl.col("queue") > 600) & (pl.col("gpu_num") > 0)).iter_rows(named=True):
        if polars_ref.ref_wait_holders(store.open_dataset("helios-synth", data), job).height >= 2:
            return job
    raise AssertionError("the small dataset has no job that waited behind others")


def test_the_job_page_shows_the_record_timeline_and_who_held_the_gpus(page, nav_server):
    url, data = nav_server
    job = _a_waiting_job(data)
    holders = polars_ref.ref_wait_holders(store.open_dataset("helios-synth", data), job)
    response = open_settled(page, f"{url}/jobs/{job['job_id']}?ds=helios-synth&cluster={job['cluster']}")
    assert response.status == 200
    record = page.locator("#job-record").inner_text()
    assert f"job id\t{job['job_id']}" in record and f"{job['queue']:,} s)" in record
    assert f"submitted\t{job['submit_time']:%Y-%m-%d %H:%M:%S}" in record
    page.wait_for_selector("#job-timeline .main-svg")
    names = page.locator("#job-timeline .js-plotly-plot").evaluate("el => el.data.map(t => t.name)")
    assert names == ["running GPUs", "VC capacity", "queued jobs"]
    assert f"Meanwhile {holders.height:,} GPU jobs of VC {job['vc']}" in page.locator("#job-wait-summary").inner_text()
    assert page.locator("#f-dataset").inner_text().strip() == "helios-synth"
    top = holders.sort(["gpu_num", "held_s"], descending=True)["job_id"][0]
    first = page.locator("#job-wait-table a.job-link").first
    assert first.inner_text() == str(top)
    first.click()
    page.wait_for_url(re.compile(rf"/jobs/{top}\?"))
    page.wait_for_function(f"document.querySelector('#job-page h4')?.innerText === 'Job {top}'")
    assert page.locator("#job-user-table a.job-link").count() > 0
    assert page.errors == []


@pytest.mark.draw_all
def test_job_ids_in_the_explorer_link_to_their_page(page, nav_server):
    url, _ = nav_server
    open_settled(page, f"{url}/jobs?ds=helios-synth&cluster=Venus")
    link = page.locator("#jobs-grid a.job-link").first
    link.wait_for()
    job_id = link.inner_text()
    assert link.get_attribute("href") == f"/jobs/{job_id}?ds=helios-synth&cluster=Venus"
    link.click()
    page.wait_for_selector("#job-record")
    assert "cluster\tVenus" in page.locator("#job-record").inner_text()


def test_a_job_id_of_several_clusters_lists_them_and_a_missing_one_is_a_404(page, nav_server):
    url, _ = nav_server
    open_settled(page, f"{url}/jobs/3?dataset=dup-ids")  # dataset= is read as ds=
    links = page.locator("#job-candidates a")
    assert sorted(links.all_inner_texts()) == ["Earth · job 3", "Venus · job 3"]
    links.first.click()
    page.wait_for_selector("#job-record")
    response = open_settled(page, f"{url}/jobs/987654?ds=helios-synth")
    assert response.status == 404
    assert page.locator("#job-missing").inner_text() == "No job 987654 in dataset helios-synth."
    assert open_settled(page, f"{url}/jobs/1?ds=helios-synth&cluster=Mars").status == 404


def test_every_ignored_url_value_is_named_with_its_reason(page, nav_server):
    url, _ = nav_server
    open_settled(page, f"{url}/cluster?ds=nope&cluster=Venus,Mars&vc=vcZ&start=2020-02-30&gmin=9&gmax=2&time=later")
    page.wait_for_selector(".url-problem")
    notes = page.locator(".url-problem").all_inner_texts()
    expected = (
        "ds='nope': no dataset of that name",
        "no cluster Mars in dataset 'helios-synth'",
        "no VC vcZ in cluster(s) Venus",
        "start='2020-02-30' is not a date",
        "gmin=9 > gmax=2",
        "time='later' must be one of submitted, running",
    )
    for text in expected:
        assert any(text in n for n in notes), (text, notes)
    assert page.locator("#f-clusters").inner_text().strip().startswith("Venus")
    open_settled(page, f"{url}/cluster?ds=helios-synth&start=2031-01-01")
    assert "start=2031-01-01 is after the trace's last day" in page.locator(".url-problem").inner_text()


@pytest.mark.parametrize("width", [1280, 390])
def test_an_unknown_page_is_a_404_that_links_home(browser, nav_server, width):
    url, _ = nav_server
    context = new_context(browser, width)
    tab = context.new_page()
    response = open_settled(tab, f"{url}/no-such-page?ds=helios-synth")
    assert response.status == 404
    assert tab.locator("#not-found h4").inner_text() == "Page not found"
    tab.locator("#not-found-home").click()
    tab.wait_for_selector(".cluster-card")
    assert tab.url.rstrip("/") == url
    context.close()


@pytest.mark.parametrize(
    ("path", "status"),
    [("/", 200), ("/jobs", 200), ("/healthz", 200), ("/_dash-layout", 200), ("/assets/style.css", 200), ("/x/y", 404)],
)
def test_only_unknown_page_addresses_are_404(nav_server, path, status):
    url, _ = nav_server
    try:
        with urllib.request.urlopen(url + path) as resp:
            got = resp.status
    except HTTPError as exc:
        got = exc.code
    assert got == status


def test_a_user_is_found_by_typing_in_the_user_drop_down_and_picked_into_the_link(page, nav_server):
    """The user drop-down is sent only the chosen users (a dataset's users can be thousands); what is typed asks the
    server for the first matches."""
    url, _ = nav_server
    open_settled(page, url + "/jobs?ds=helios-synth")
    assert page.locator("#f-users").inner_text().strip().startswith("all users")
    page.locator("#f-users").click()
    # The search box filled at once: typed at machine speed, Dash's Dropdown can lose a letter (a key pressed on its
    # button before the box takes the focus, or typed into the box before the last letter's answer has re-drawn it).
    page.locator(".dash-dropdown-search:visible").fill("U01")
    listbox = page.get_by_role("listbox")
    listbox.get_by_role("option", name="u011", exact=True).wait_for()
    assert {"u010", "u011"} <= set(listbox.get_by_role("option").all_inner_texts())
    listbox.get_by_role("option", name="u011", exact=True).click()
    page.wait_for_url(re.compile(r"[?&]user=u011\b"))
    settle(page)
    assert "u011" in page.locator("#f-users").inner_text()
    assert page.errors == []
