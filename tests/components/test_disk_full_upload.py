"""A disk that fills up during an upload's ingest (a real one: a small tmpfs holding the data folder), through the
Data page in Chromium: the admin reads that the disk is full, every dataset stays as it was, nothing half-written or
staged stays behind; with room again the same upload goes through."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.waiting import open_settled

pytestmark = pytest.mark.browser

DISK_MB = 16
ROOM_LEFT_BYTES = 256 * 1024  # what the ballast leaves: less than the upload's jobs table needs
UPLOAD_JOBS = 60_000
HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory):
    """A DISK_MB tmpfs mounted for this module (mounting needs root: skipped without it)."""
    mount = tmp_path_factory.mktemp("small-disk")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        reason = f"cannot mount a tmpfs (needs root): {done.stderr.decode().strip()}"
        if os.environ.get("REQUIRE_BROWSER") == "1":  # CI runs as root: this browser test must run there
            pytest.fail(f"{reason}, but REQUIRE_BROWSER=1")
        pytest.skip(reason)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture(scope="module")
def server(small_disk, tmp_path_factory, chromium_path, write_small, gunicorn_app):
    """Gunicorn over a data folder on the small disk holding one derived dataset (the cache folder elsewhere)."""
    from analytics import queries

    data, root = small_disk / "data", tmp_path_factory.mktemp("disk-full")
    queries.derive(write_small("keep", data, n_jobs=800))
    env = {**os.environ, "HELIOS_DATA_DIR": str(data), "HELIOS_CACHE_DIR": str(root / "cache")}
    env.update(HELIOS_ANONYMOUS_ROLE="admin", HELIOS_DEFAULT_DATASET="keep")
    with gunicorn_app(root / "server.log", env) as url:
        yield url, data, root / "cache"


def _upload_zip(path: Path) -> Path:
    """A Helios data.zip of one cluster with UPLOAD_JOBS jobs of varied users, sizes and times."""
    rng = np.random.default_rng(3)
    minutes = np.sort(rng.integers(0, 20 * 1440, UPLOAD_JOBS))
    rows = []
    for i, minute in enumerate(minutes):
        day, hour, mins = 1 + minute // 1440, (minute // 60) % 24, minute % 60
        duration = int(rng.integers(10, 50_000))
        stamp = f"2020-04-{day:02d} {hour:02d}:{mins:02d}:{int(rng.integers(0, 60)):02d}"
        rows.append(
            f"{i},u{rng.integers(0, 5000)},vc{rng.integers(0, 9)},{2 ** rng.integers(0, 4)},4,1,COMPLETED,"
            f"{stamp},{stamp},{stamp},{duration},{int(rng.integers(0, 900))}"
        )
    capacity = "date," + ",".join(f"vc{v}" for v in range(9)) + ",total\n2020-04-01," + "8," * 9 + "72\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("Venus/cluster_log.csv", "\n".join([HEADER, *rows]) + "\n")
        zf.writestr("Venus/cluster_gpu_number.csv", capacity)
    return path


def _state(data: Path) -> dict[str, str]:
    """Every entry of the data folder (links as their targets, files by digest)."""
    out = {}
    for path in sorted(data.rglob("*")):
        key = str(path.relative_to(data))
        if path.is_symlink():
            out[key] = "-> " + os.readlink(path)
        elif path.is_file():
            out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _upload(tab, base: str, trace: Path, name: str) -> None:
    open_settled(tab, base + "/data")
    tab.locator("#data-upload-name input, input#data-upload-name").first.fill(name)
    tab.locator("#data-upload input[type=file]").set_input_files(str(trace))


def test_a_full_disk_during_an_upload_says_so_and_changes_nothing(page, server, small_disk, tmp_path):
    base, data, cache = server
    trace = _upload_zip(tmp_path / "big-trace.zip")
    ballast = small_disk / "ballast"
    free = shutil.disk_usage(small_disk).free
    with ballast.open("wb") as fh:
        fh.write(b"\0" * (free - ROOM_LEFT_BYTES))
    before = _state(data)
    try:
        _upload(page, base, trace, "keep")  # a replacement of the one dataset: it must survive the failure
        page.wait_for_selector("#data-upload-status .alert-danger", timeout=120_000)
        message = page.locator("#data-upload-status").inner_text()
        assert "the disk is full" in message and "nothing was changed" in message, message
        assert str(small_disk) not in message  # no server path
        assert _state(data) == before  # no half-written version, no staging folder, the old one untouched
        assert list((cache / "uploads").iterdir()) == []  # the staged upload is gone too
    finally:
        ballast.unlink()
    _upload(page, base, trace, "keep")  # with room again, the same upload goes through
    page.wait_for_selector("text=dataset keep is ready", timeout=180_000)
    assert page.errors == []
