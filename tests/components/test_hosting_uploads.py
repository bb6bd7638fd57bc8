"""Uploads and deletion on the Data page: admins only, size limit, safe names, background ingest, nothing partial."""

from __future__ import annotations

import base64
import io
import json
import os
import zipfile

import pytest

from analytics import store
from components.datasets import admin as data_admin
from components.datasets import uploads
from components.server.settings import Settings
from components.server.users import UserRecord, hash_password, save_users

HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"
ROWS = [
    f"{i},u{i % 3},vcA,{1 + i % 2},4,1,COMPLETED,"
    f"2020-04-01 00:0{i}:00,2020-04-01 00:0{i}:10,2020-04-01 01:0{i}:10,3600,10"
    for i in range(1, 8)
]
CAPACITY = "date,vcA,total\n2020-04-01,8,8\n"


def helios_zip(rows: list[str] = ROWS) -> bytes:
    """A small Helios data.zip with one cluster."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("Venus/cluster_log.csv", "\n".join([HEADER, *rows]) + "\n")
        zf.writestr("Venus/cluster_gpu_number.csv", CAPACITY)
    return buf.getvalue()


def data_url(raw: bytes) -> str:
    """The data URL dcc.Upload sends for a file."""
    return "data:application/zip;base64," + base64.b64encode(raw).decode()


@pytest.fixture
def settings(small_data, tmp_path) -> Settings:
    """Settings over the small datasets with a fresh cache folder."""
    return Settings(data_dir=small_data, cache_dir=tmp_path / "cache")


def test_uploads_over_the_limit_are_refused_before_decoding():
    with pytest.raises(uploads.UploadError, match="larger than the 1 MiB upload limit"):
        uploads.decode_upload(data_url(b"x" * (2 * 2**20)), "big.zip", 2**20)
    with pytest.raises(uploads.UploadError, match="not valid base64"):
        uploads.decode_upload("data:application/zip;base64,@@@@", "bad.zip", 2**20)
    with pytest.raises(uploads.UploadError, match="not a base64 data URL"):
        uploads.decode_upload("hello", "x.zip", 2**20)
    assert uploads.decode_upload(data_url(b"abc"), "ok.zip", 2**20) == b"abc"


def test_the_upload_limit_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(uploads.MAX_MB_ENV, raising=False)
    assert uploads.max_upload_bytes() == 512 * 2**20
    monkeypatch.setenv(uploads.MAX_MB_ENV, "3")
    assert uploads.max_upload_bytes() == 3 * 2**20
    monkeypatch.setenv(uploads.MAX_MB_ENV, "lots")
    with pytest.raises(uploads.UploadError, match="HELIOS_UPLOAD_MAX_MB='lots'"):
        uploads.max_upload_bytes()


@pytest.mark.parametrize("name", ["../evil", "a/b", "..", ".hidden", "", "x" * 65, "nul\x00name"])
def test_dataset_names_with_path_tricks_are_refused(tmp_path, name):
    with pytest.raises(uploads.UploadError, match="invalid dataset name"):
        uploads.stage_upload(b"x", "t.zip", "helios", name, tmp_path)
    assert not list(uploads.uploads_dir(tmp_path).iterdir())


def test_unknown_formats_suffixes_and_tokens_are_refused(tmp_path):
    with pytest.raises(uploads.UploadError, match="unknown format"):
        uploads.stage_upload(b"x", "t.zip", "parquet", "ok", tmp_path)
    with pytest.raises(uploads.UploadError, match="upload a .zip or .csv or .txt file"):
        uploads.stage_upload(b"x", "t.exe", "helios", "ok", tmp_path)
    forged = {"token": "../../etc/passwd", "suffix": ".zip", "format": "helios", "name": "ok"}
    with pytest.raises(uploads.UploadError, match="unknown or expired upload"):
        uploads.staged_path(forged, tmp_path)


def test_a_slurm_export_uploads_but_a_csv_needing_a_mapping_is_not_offered(settings):
    from tests.analytics.test_ingest_slurm import SYNC

    request = uploads.stage_upload(SYNC.read_bytes(), "sacct.txt", "slurm", "ours", settings.cache_dir)
    ds = uploads.ingest_staged(request, settings.cache_dir, settings.data_dir, lambda f, m: None)
    assert ds.jobs().collect().height == 37 and ds.jobs_path.is_dir()
    assert "csv" not in uploads.UPLOAD_FORMATS and "slurm" in uploads.UPLOAD_FORMATS
    with pytest.raises(uploads.UploadError, match="unknown format 'csv'"):
        uploads.stage_upload(b"x", "jobs.csv", "csv", "ok", settings.cache_dir)


def test_a_good_upload_is_ingested_with_progress_and_a_quality_report(settings):
    request = uploads.stage_upload(helios_zip(), "data.zip", "helios", "uploaded", settings.cache_dir)
    seen: list[tuple[float, str]] = []
    ds = uploads.ingest_staged(request, settings.cache_dir, settings.data_dir, lambda f, m: seen.append((f, m)))
    assert ds.name == "uploaded" and ds.jobs().collect().height == len(ROWS)
    assert ds.meta["quality"]["rows_out"] == len(ROWS) and ds.meta["source"] == "upload data.zip"
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and len(seen) >= 3
    assert not list(uploads.uploads_dir(settings.cache_dir).iterdir())  # the staged file is gone


@pytest.mark.parametrize(
    "raw",
    [b"not a zip at all", helios_zip(["1,u1,vcA,x,y,z,BAD,never,never,never,-1,?"]), helios_zip([])],
    ids=["garbage", "no-valid-row", "empty-log"],
)
def test_a_failed_upload_leaves_every_dataset_untouched(settings, raw):
    before = {d.name: d.version for d in store.list_datasets(settings.data_dir)}
    entries = sorted(p.name for p in settings.data_dir.iterdir())
    request = uploads.stage_upload(raw, "data.zip", "helios", "helios-synth", settings.cache_dir)
    with pytest.raises(uploads.UploadError) as err:
        uploads.ingest_staged(request, settings.cache_dir, settings.data_dir, lambda f, m: None)
    assert "\n" not in str(err.value) and str(settings.cache_dir) not in str(err.value)
    assert {d.name: d.version for d in store.list_datasets(settings.data_dir)} == before
    assert sorted(p.name for p in settings.data_dir.iterdir()) == entries


def test_the_background_job_reports_success_or_a_clear_error(settings):
    good = uploads.stage_upload(helios_zip(), "data.zip", "helios", "fresh", settings.cache_dir)
    progress: list = []
    ok = data_admin.ingest_job(progress.append, good, settings)
    assert "dataset fresh is ready" in json.dumps(ok.to_plotly_json(), default=str) and progress
    bad = uploads.stage_upload(b"garbage", "data.zip", "helios", "fresh", settings.cache_dir)
    failed = data_admin.ingest_job(progress.append, bad, settings)
    assert failed.children.startswith("upload failed, nothing was changed:")


def test_delete_removes_a_dataset_in_one_step(settings):
    uploads.delete_dataset("philly-mini", settings.data_dir)
    assert [d.name for d in store.list_datasets(settings.data_dir)] == ["helios-synth"]
    assert not [p for p in settings.data_dir.iterdir() if "philly-mini" in p.name]
    with pytest.raises(uploads.UploadError, match="not found"):
        uploads.delete_dataset("philly-mini", settings.data_dir)
    with pytest.raises(uploads.UploadError, match="invalid dataset name"):
        uploads.delete_dataset("../helios-synth", settings.data_dir)


def test_deleting_asks_for_confirmation_first():
    assert data_admin.ask_delete(1, "helios-synth") == (
        True,
        "Delete dataset helios-synth? Its files are removed for everyone.",
    )
    assert data_admin.ask_delete(None, "helios-synth")[0] is data_admin.no_update


# --- Through the real app with HTTP Basic users of both roles -------------------------------------------------


def _basic(user: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{user}-password".encode()).decode()}


@pytest.fixture
def team_client(settings, tmp_path, monkeypatch):
    """A test client of the real app with an admin (ada) and a viewer (vic)."""
    users = tmp_path / "users.json"
    save_users(
        users,
        {
            "ada": UserRecord("ada", "admin", hash_password("ada-password")),
            "vic": UserRecord("vic", "viewer", hash_password("vic-password")),
        },
    )
    monkeypatch.setenv("HELIOS_AUTH_FILE", str(users))
    monkeypatch.setenv("HELIOS_SECRET_KEY", "test-secret")
    from app import create_app

    return create_app(settings).server.test_client()


def _post(client, user: str, payload: dict) -> dict:
    resp = client.post("/_dash-update-component", json=payload, headers=_basic(user))
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
    return resp.get_json()["response"]


def _stage_payload(contents: str, name: str) -> dict:
    return {
        "output": f"..{data_admin.REQUEST}.data...{data_admin.STATUS}.children..",
        "outputs": [
            {"id": data_admin.REQUEST, "property": "data"},
            {"id": data_admin.STATUS, "property": "children"},
        ],
        "inputs": [{"id": data_admin.UPLOAD, "property": "contents", "value": contents}],
        "state": [
            {"id": data_admin.UPLOAD, "property": "filename", "value": "data.zip"},
            {"id": data_admin.FORMAT, "property": "value", "value": "helios"},
            {"id": data_admin.NAME, "property": "value", "value": name},
        ],
        "changedPropIds": [f"{data_admin.UPLOAD}.contents"],
    }


def _delete_payload(name: str) -> dict:
    return {
        "output": f"{data_admin.DELETE_STATUS}.children",
        "outputs": {"id": data_admin.DELETE_STATUS, "property": "children"},
        "inputs": [{"id": data_admin.CONFIRM, "property": "submit_n_clicks", "value": 1}],
        "state": [{"id": data_admin.DELETE_NAME, "property": "value", "value": name}],
        "changedPropIds": [f"{data_admin.CONFIRM}.submit_n_clicks"],
    }


def test_only_admins_may_upload(team_client, settings):
    viewer = _post(team_client, "vic", _stage_payload(data_url(helios_zip()), "by-viewer"))
    assert viewer[data_admin.REQUEST]["data"] is None
    assert data_admin.NOT_ALLOWED in json.dumps(viewer[data_admin.STATUS])
    assert not list(uploads.uploads_dir(settings.cache_dir).iterdir())
    admin = _post(team_client, "ada", _stage_payload(data_url(helios_zip()), "by-admin"))
    assert admin[data_admin.REQUEST]["data"]["name"] == "by-admin"
    assert len(list(uploads.uploads_dir(settings.cache_dir).iterdir())) == 1


def test_only_admins_may_delete(team_client, settings):
    viewer = _post(team_client, "vic", _delete_payload("philly-mini"))
    assert data_admin.NOT_ALLOWED in json.dumps(viewer)
    assert "philly-mini" in [d.name for d in store.list_datasets(settings.data_dir)]
    admin = _post(team_client, "ada", _delete_payload("philly-mini"))
    assert "dataset philly-mini deleted" in json.dumps(admin)
    assert "philly-mini" not in [d.name for d in store.list_datasets(settings.data_dir)]


def test_anonymous_callers_get_401(team_client):
    resp = team_client.post("/_dash-update-component", json=_delete_payload("philly-mini"))
    assert resp.status_code == 401


def test_the_upload_tools_are_shown_to_admins_only(team_client):
    def data_page(user: str) -> str:
        payload = {
            "output": ".._pages_content.children..._pages_store.data..",
            "outputs": [{"id": "_pages_content", "property": "children"}, {"id": "_pages_store", "property": "data"}],
            "inputs": [
                {"id": "_pages_location", "property": "pathname", "value": "/data"},
                {"id": "_pages_location", "property": "search", "value": ""},
            ],
            "state": [],
            "changedPropIds": ["_pages_location.pathname"],
        }
        return json.dumps(_post(team_client, user, payload))

    assert "Drop a trace here" in data_page("ada") and data_admin.CONFIRM in data_page("ada")
    viewer = data_page("vic")
    assert "Drop a trace here" not in viewer and "Delete dataset" not in viewer  # only inert, hidden ids


def test_stale_staged_uploads_are_swept(tmp_path):
    folder = uploads.uploads_dir(tmp_path)
    old, new = folder / ("a" * 32 + ".csv"), folder / ("b" * 32 + ".csv")
    old.write_text("x")
    new.write_text("y")
    os.utime(old, (1, 1))
    assert uploads.sweep_stale(tmp_path) == 1
    assert not old.exists() and new.exists()


def test_an_uploads_quality_report_never_shows_the_staging_path(settings):
    rows = "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-03 10:00:00,60,1,60,vc1\n,,,,\n"
    request = uploads.stage_upload(rows.encode(), "mine.csv", "philly", "named", settings.cache_dir)
    staged = uploads.staged_path(request, settings.cache_dir)
    dataset = uploads.ingest_staged(request, settings.cache_dir, settings.data_dir, lambda *_: None)
    text = json.dumps(dataset.meta)
    assert str(staged) not in text and str(settings.cache_dir) not in text
    assert dataset.meta["quality"]["issues"]["blank_row"]["examples"][0]["file"] == "upload mine.csv"
