"""Issue #18 in Chromium: tables sorted, filtered and exported on exact values shown in human units, human axes,
the Compare page's clusters and colours, the What-if page's own dataset and shareable sweep, the Data page in words."""

from __future__ import annotations

import csv
import io
import os

import polars as pl
import pytest

from analytics import store
from components.charts import figures, units
from tests.components.conftest import CLUSTERS, make_jobs, make_vc_gpus
from tests.waiting import DEADLINE_S, http_status, open_settled, settle

pytestmark = pytest.mark.browser

HOSTILE_USERS = {"u001": '=HYPERLINK("http://x","y")', "u002": "+1+1", "u003": "@SUM(1)"}


def write_hostile(name: str, root) -> None:
    """A small dataset whose users include names a spreadsheet would run as formulas."""
    jobs = make_jobs(2000, seed=11).with_columns(pl.col("user").replace(HOSTILE_USERS))
    meta = {
        "source": "test fixture",
        "format": "synthetic",
        "clusters": list(CLUSTERS),
        "period": {"start": "2020-04-01", "end": "2020-04-22"},
        "row_counts": {"jobs": jobs.height},
    }
    store.write_dataset(name, jobs, make_vc_gpus(), meta, root=root)


@pytest.fixture(scope="module")
def server_url(tmp_path_factory, chromium_path, write_small, gunicorn_app) -> str:
    """Gunicorn serving two small datasets and a hostile one; yields its base URL."""
    root = tmp_path_factory.mktemp("views-browser")
    data = root / "data"
    write_small("helios-synth", data)
    write_small("philly-mini", data, n_jobs=800, clusters=("Philly",))
    write_hostile("hostile", data)
    env = {**os.environ, "HELIOS_DATA_DIR": str(data), "HELIOS_CACHE_DIR": str(root / "cache")}
    env["HELIOS_ANONYMOUS_ROLE"] = "admin"
    env["HELIOS_BG_INTERVAL_MS"] = "250"
    env["HELIOS_MAX_RUNS_PER_USER"] = "4"  # one address drives every test: a run left behind must not block the next
    env.pop("HELIOS_REDIS_URL", None)
    with gunicorn_app(root / "server.log", env, timeout_s=120) as url:
        assert http_status(url + "/", timeout_s=DEADLINE_S) == 200  # the first page view sets up the pages router
        yield url


def grid_values(tab, grid_id: str, field: str) -> list:
    """A column's exact values in the grid's displayed order (after its sort and filter)."""
    return tab.evaluate(
        """([id, field]) => { const out = [];
        dash_ag_grid.getApi(id).forEachNodeAfterFilterAndSort(n => out.push(n.data[field])); return out; }""",
        [grid_id, field],
    )


def figure_lines(tab, title: str) -> dict[str, dict]:
    """{trace name: its line} of the figure titled title."""
    plot = tab.locator(".js-plotly-plot", has=tab.locator(f"text.gtitle:text-is('{title}')"))
    plot.wait_for()
    return plot.evaluate("el => Object.fromEntries(el.data.map(t => [t.name, t.line || {}]))")


@pytest.mark.draw_all
def test_the_leaderboard_sorts_and_filters_on_exact_values_shown_in_human_units(page, server_url):
    open_settled(page, server_url + "/users")
    page.wait_for_selector("#users-board .ag-row")
    first = page.locator("#users-board .ag-row[row-index='0'] [col-id='gpu_time_s']")
    assert first.inner_text().endswith("GPU-h")  # human units on screen
    page.locator("#users-board .ag-header-cell[col-id='mean_gpu_queue_s'] .ag-header-cell-label").click()
    page.wait_for_function(
        "() => { const v = []; dash_ag_grid.getApi('users-board').forEachNodeAfterFilterAndSort("
        "n => v.push(n.data.mean_gpu_queue_s)); return v.length > 1 && v.every((x, i) => i === 0 || v[i - 1] <= x); }"
    )
    queues = grid_values(page, "users-board", "mean_gpu_queue_s")
    assert queues == sorted(queues) and queues[0] < queues[-1]  # sorted by the number, not by "12 min" text
    cell = page.locator("#users-board .ag-row[row-index='0'] [col-id='mean_gpu_queue_s']")
    assert cell.inner_text() == units.duration(queues[0])
    cell.hover()
    page.wait_for_selector(".ag-tooltip")
    assert page.locator(".ag-tooltip").inner_text() == units.duration_exact(queues[0])  # the exact value on hover
    page.evaluate(
        """async () => { const api = dash_ag_grid.getApi('users-board');
        await api.setColumnFilterModel('cluster', {filterType: 'text', type: 'equals', filter: 'Venus'});
        api.onFilterChanged(); }"""
    )
    page.wait_for_function(
        "() => { const rows = []; dash_ag_grid.getApi('users-board').forEachNodeAfterFilterAndSort(n => rows.push(n));"
        " return rows.length > 0 && rows.every(n => n.data.cluster === 'Venus'); }"
    )
    assert set(grid_values(page, "users-board", "cluster")) == {"Venus"}
    assert page.locator("#users-board .ag-paging-panel").is_visible()  # paginated
    # a click on a user's name filters the dashboard to that user
    name = page.evaluate("dash_ag_grid.getApi('users-board').getDisplayedRowAtIndex(0).data.user")
    page.locator("#users-board").get_by_role("gridcell", name=name, exact=True).first.click()
    page.wait_for_url("**user=**")
    assert f"user={name}" in page.url and page.url.count("user=") == 1
    assert page.errors == []


@pytest.mark.draw_all
def test_the_grid_export_writes_exact_values_and_quotes_formulas(page, server_url):
    open_settled(page, server_url + "/users?ds=hostile")
    page.wait_for_selector("#users-board .ag-row")
    with page.expect_download() as got:
        page.locator("#users-board-csv").click()
    with open(got.value.path(), encoding="utf-8-sig") as exported:
        text = exported.read()
    rows = list(csv.DictReader(io.StringIO(text)))
    users = {r["user"] for r in rows}
    assert {"'" + name for name in HOSTILE_USERS.values()} <= users  # quoted as analytics.csv_safety does
    assert not any(u[:1] in "=+-@" for u in users)
    assert all("GPU-h" not in r["GPU time"] for r in rows)  # exact GPU-seconds, not the text on screen
    float(rows[0]["GPU time"])
    assert page.errors == []


def test_a_revisited_overview_is_laid_out_with_its_cards_and_asks_for_none(page, server_url):
    url = server_url + "/?cluster=Venus"
    asked = []
    page.on("request", lambda r: asked.append(r.post_data or "") if "_dash-update-component" in r.url else None)
    open_settled(page, url)
    page.wait_for_function("!document.querySelector('#overview-cards').innerText.includes('…')")
    first = page.locator("#overview-cards").inner_text()
    assert [a for a in asked if "overview-want" in a]  # a first visit asks for the cards
    asked.clear()
    open_settled(page, url)
    assert page.locator("#overview-cards").inner_text() == first  # the same cards, utilisation filled in
    assert not [a for a in asked if "overview-want" in a or "overview-util" in a]
    assert page.errors == []


@pytest.mark.draw_all
def test_numbers_read_in_human_units_with_the_exact_value_on_hover(page, server_url):
    open_settled(page, server_url + "/")
    page.wait_for_selector("#overview-table .ag-row")
    run = page.locator("#overview-table .ag-row[row-index='0'] [col-id='avg_run_time_gpu']")
    assert run.inner_text().split()[-1] in ("s", "min", "h", "d")  # "3 h 35 min", never raw seconds
    card = page.locator(".cluster-card").first
    gpu_time = card.locator("dd").last.locator("span")
    assert gpu_time.inner_text().endswith("GPU-h") and gpu_time.get_attribute("title").endswith("GPU-s")
    open_settled(page, server_url + "/jobs")
    plot = page.locator(".js-plotly-plot", has=page.locator("text.gtitle:text-is('GPU job duration CDF')"))
    plot.wait_for()
    ticks = plot.locator(".xtick text").all_text_contents()
    assert "1 min" in ticks and "1 h" in ticks and not any(t.strip().isdigit() for t in ticks)
    assert plot.evaluate("el => el.layout.xaxis.title.text") == "duration (log scale)"
    page.wait_for_selector("#jobs-grid .ag-row")
    link = page.locator("#jobs-grid .ag-row[row-index='0'] [col-id='job_id'] a")
    cluster = page.locator("#jobs-grid .ag-row[row-index='0'] [col-id='cluster']").inner_text()
    assert link.get_attribute("href") == f"/jobs/{link.inner_text()}?ds=helios-synth&cluster={cluster}"
    page.locator("#jobs-grid .ag-body-horizontal-scroll-viewport").evaluate("el => { el.scrollLeft = 10000; }")
    duration = page.locator("#jobs-grid .ag-row[row-index='0'] [col-id='duration']")
    duration.wait_for()
    assert duration.inner_text().split()[-1] in ("s", "min", "h", "d")  # not raw seconds
    assert page.errors == []


def test_compare_draws_only_the_chosen_clusters_each_in_its_own_colour(page, server_url):
    open_settled(page, server_url + "/compare?cmp=helios-synth,philly-mini&ref=1")
    title = "GPU job duration CDF"
    lines = figure_lines(page, title)
    assert {"helios-synth Earth", "helios-synth Venus", "philly-mini Philly"} <= set(lines)
    page.locator("#compare-clusters label:has-text('helios-synth Earth')").click()
    page.wait_for_url("**cmpc=**")
    settle(page)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot')].some(p => p.data && p.data.length "
        "&& !p.data.some(t => t.name === 'helios-synth Earth') && p.data.some(t => t.name === 'helios-synth Venus'))"
    )
    lines = figure_lines(page, title)
    assert "helios-synth Earth" not in lines and "Helios Earth (published)" not in lines
    venus, published = lines["helios-synth Venus"], lines["Helios Venus (published)"]
    assert venus["color"] == published["color"] == figures.cluster_color("Venus")  # not Earth's
    assert published["dash"] == "dash" and lines["philly-mini Philly"]["dash"] == "dot"
    page.reload()
    settle(page)
    assert "helios-synth Earth" not in figure_lines(page, title)  # the choice lives in the URL
    open_settled(page, server_url + "/jobs?ds=helios-synth")
    assert figure_lines(page, title)["Venus"]["color"] == venus["color"]  # the same colour on another page
    assert page.errors == []


# Each figure drawn on the page: its laid-out bottom margin, the one plotly drew it at, and the one plotly gives a copy
# of it laid out a legend row (21 px) lower, in a scratch element of the same size.
MARGINS_JS = """async () => { const out = [];
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const laid = (gd.layout.margin || {}).b, scratch = document.createElement('div');
    scratch.style.width = gd.offsetWidth + 'px'; scratch.style.height = gd.offsetHeight + 'px';
    document.body.appendChild(scratch);
    const layout = Object.assign({}, gd.layout, {margin: Object.assign({}, gd.layout.margin, {b: laid - 21})});
    await Plotly.newPlot(scratch, structuredClone(gd.data), layout, {responsive: false});
    const drawn = gd._fullLayout._size.b, needed = scratch._fullLayout._size.b;
    out.push({title: gd._fullLayout.title.text, laid, drawn, needed});
    Plotly.purge(scratch); scratch.remove(); }
  return out; }"""


@pytest.mark.draw_all
def test_a_legend_that_wraps_is_given_its_rows_at_once_and_no_more(page, server_url):
    page.set_viewport_size({"width": 1280, "height": 2400})  # half-width cards whose legends wrap, flat tick labels
    open_settled(page, server_url + "/compare?cmp=helios-synth,philly-mini&ref=1")
    page.wait_for_function("document.querySelectorAll('.figure-slot .main-svg').length >= 8")
    drawn = page.evaluate(MARGINS_JS)
    assert len(drawn) >= 8 and any(d["laid"] >= 96 for d in drawn)  # legends of several rows
    for d in drawn:
        assert d["drawn"] == d["laid"], d  # plotly did not grow the margin: it drew the figure once
        assert d["needed"] >= d["laid"] - 2, d  # and needs the room given (the figure looks as before)
    assert page.errors == []


def test_the_whatif_page_opens_without_a_request_and_a_shared_run_still_starts(page, server_url):
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.post_data or "") if "_dash-update-component" in r.url else None)
    for _ in range(2):  # a first visit, then a revisit
        open_settled(page, server_url + "/whatif?ds=helios-synth&cluster=Venus")
        assert page.locator("#whatif-run").is_enabled() and page.locator("#whatif-vcs").count() == 1
        assert page.locator(".js-plotly-plot").count() == 0  # no chart before a run: plotly.js waits till idle
    assert asked == []  # the form is laid out with its options: its callbacks answer the reader's changes only
    page.locator("#whatif-cluster").click()
    page.locator(".dash-dropdown-option:has-text('Earth')").click()
    settle(page)
    assert any("whatif-vcs.options" in body for body in asked)  # a change still asks
    open_settled(page, server_url + "/whatif?ds=helios-synth&cluster=Venus&start=2020-04-10&end=2020-04-11&run=1")
    page.wait_for_function("() => /ran in|from the cache/.test(document.querySelector('#whatif-status').innerText)")
    assert page.errors == []


def test_whatif_has_one_dataset_picker_and_a_shareable_sweep(page, server_url):
    open_settled(page, server_url + "/jobs")
    assert page.locator("#filter-bar").is_visible()
    sweep = "sx=load_factor&sxv=1,2&sy=policy&syv=fifo,sjf&sm=avg_queue_s&sweep=1"
    shared = f"{server_url}/whatif?ds=helios-synth&cluster=Earth&start=2020-04-10&end=2020-04-12&{sweep}"
    open_settled(page, shared)
    assert not page.locator("#filter-bar").is_visible()  # the What-if form's own dataset only
    assert page.locator("#f-dataset").is_hidden()
    status = "(document.getElementById('whatif-sweep-status')?.innerText || '')"
    page.wait_for_function(f"{status}.endsWith('rows')")  # sweep=1 ran it on load
    graph = page.locator("#whatif-sweep-graph .js-plotly-plot")
    assert graph.evaluate("el => el.layout.yaxis.title.text").startswith("mean queue (")
    assert "avg_queue_s" not in graph.evaluate("el => el.layout.title.text")
    assert page.locator("#whatif-sweep-metric").inner_text().strip() == "mean queue"
    page.reload()
    page.wait_for_function(f"{status}.endsWith('from cache')")  # same result, from the cache
    page.locator("#whatif-sweep-x-values").fill("1,1.5")
    page.locator("#whatif-sweep-run").click()
    page.wait_for_url("**sxv=1,1.5**")
    assert "sweep=1" in page.url and "cluster=Earth" in page.url
    open_settled(page, f"{server_url}/whatif?ds=helios-synth&sm=nope&load=50")
    alerts = page.locator(".alert-warning").all_inner_texts()
    assert any("sm='nope' must be one of" in a for a in alerts)
    assert any("load factor must be between 0.1 and 10, got 50" in a for a in alerts)
    assert page.errors == []


def test_whatif_results_name_metrics_in_words(page, server_url):
    url = f"{server_url}/whatif?ds=helios-synth&cluster=Venus&start=2020-04-10&end=2020-04-12&pol=fifo,sjf&run=1"
    open_settled(page, url)
    page.wait_for_selector("#whatif-row-fifo")
    head = page.locator("th.metric-head", has_text="mean JCT").first
    assert "job completion time" in head.get_attribute("title")
    header_text = " ".join(page.locator("th.metric-head").all_inner_texts())
    assert "_s" not in header_text and "avg" not in header_text
    cell = page.locator("#whatif-row-fifo td").nth(2)
    assert cell.get_attribute("title").endswith(" s") and not cell.inner_text().isdigit()
    ticks = page.locator("#whatif-graph-queue-cdf .xtick text").all_text_contents()
    assert ticks and not any(t.strip().isdigit() for t in ticks)
    with page.expect_download() as got:
        page.locator("text=comparison CSV").click()
    with open(got.value.path(), encoding="utf-8") as exported:
        header = exported.readline()
    assert "mean JCT (s)" in header and "avg_jct_s" not in header
    assert page.errors == []


def test_the_data_page_speaks_plainly_and_keeps_its_admin_actions(page, server_url):
    open_settled(page, server_url + "/data")
    card = page.locator('[id="dataset-helios-synth"]')
    text = card.inner_text()
    assert " jobs on 2 clusters, submitted 01 Apr 2020 → 22 Apr 2020" in text
    assert "on disk" in text and "What the jobs record" in text and "Works with" in text
    for internal in ("row_counts", "{", "meta", "/tmp", "null"):
        assert internal not in text, internal
    assert page.locator("#filter-bar").is_hidden()
    assert page.locator("#data-upload").count() == 1 and page.locator("text=Delete dataset").count() == 1
    assert page.errors == []
