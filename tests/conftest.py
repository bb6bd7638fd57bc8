"""Shared test set-up: every test run gets its own data and cache folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.ingest.bundled import PUBLIC_DIR

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """A fresh, empty HELIOS_DATA_DIR for one test."""
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("HELIOS_DATA_DIR", str(root))
    return root


@pytest.fixture(scope="session")
def public_data_dir():
    """The real public files bundled in the repository (`data/public`, sources in `data/SOURCES.md`)."""
    return PUBLIC_DIR


# --- Two workers (`make test` runs pytest-xdist with `-n 2 --dist loadfile`) ------------------------------------
# Each test file runs whole on one worker, so module and session fixtures keep their meaning. The files below are
# handed out first, longest first, so that no long file is left to run alone at the end: the real-Slurm scenario
# (~100 s, mostly sleeping until Slurm times a job out) leads, the short contention run (~60 s, its own cluster beside
# the scenario's) follows; the rest are the browser and server files. Files not listed follow in xdist's own order
# (most tests first).
LONGEST_FILES_FIRST: tuple[str, ...] = (
    "tests/slurm/test_real_slurm.py",
    "tests/slurm/test_contention.py",
    "tests/components/test_components_browser.py",
    "tests/components/test_run_polling_browser.py",
    "tests/components/test_whatif_browser.py",
    "tests/components/test_views_browser.py",
    "tests/components/test_navigation_browser.py",
    "tests/components/test_make_run_browser.py",
    "tests/components/test_hostile_urls.py",
    "tests/components/test_whatif_callbacks.py",
    "tests/components/test_run_limits.py",
    "tests/analytics/test_fidelity_demo.py",
    "tests/components/test_hosting_celery.py",
    "tests/sim/test_ces_honest.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With `--dist loadfile`, xdist's file scheduler handing out LONGEST_FILES_FIRST before the other files."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongestFilesFirst(LoadFileScheduling):
        def _assign_work_unit(self, node):
            if not getattr(self, "_reordered", False):
                rank = {path: i for i, path in enumerate(LONGEST_FILES_FIRST)}
                units = sorted(self.workqueue.items(), key=lambda unit: rank.get(unit[0], len(rank)))
                self.workqueue.clear()
                self.workqueue.update(units)
                self._reordered = True
            super()._assign_work_unit(node)

    return LongestFilesFirst(config, log)
