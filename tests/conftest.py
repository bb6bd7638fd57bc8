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


# --- Three workers (`make test` runs pytest-xdist with `-n 3 --dist loadfile`) ----------------------------------
# Each test file runs whole on one worker, so module and session fixtures keep their meaning. One worker (the first to
# be ready; another if it dies) is the waiting lane: it takes WAITING_FILES first, the real-Slurm files, which spend
# most of their ~200 s waiting for Slurm (daemons starting, jobs running out their time); the others take one only
# when no other file is left, so that two workers keep both cores busy meanwhile. The files of LONGEST_FILES_FIRST are
# handed out before the rest, longest first, so that no long file is left to run alone at the end. Files not listed
# follow in xdist's own order (most tests first). Run with fewer than three workers, every worker is a waiting lane.
WAITING_FILES: tuple[str, ...] = (
    "tests/slurm/test_real_slurm.py",
    "tests/slurm/test_contention.py",
    "tests/slurm/test_drain.py",
)
LONGEST_FILES_FIRST: tuple[str, ...] = (
    *WAITING_FILES,
    "tests/components/test_whatif_browser.py",
    "tests/components/test_views_browser.py",
    "tests/components/test_components_browser.py",
    "tests/components/test_run_polling_browser.py",
    "tests/components/test_navigation_browser.py",
    "tests/components/test_data_scheduler.py",
    "tests/components/test_hostile_urls.py",
    "tests/components/test_whatif_callbacks.py",
    "tests/analytics/test_synth_queue.py",
    "tests/components/test_make_run_browser.py",
    "tests/components/test_run_limits.py",
    "tests/sim/test_ces_honest.py",
    "tests/analytics/test_synth_generate.py",
    "tests/components/test_slurm_dataset.py",
    "tests/analytics/test_fidelity_demo.py",
    "tests/components/test_hosting_celery.py",
)


def _next_file(files: list[str], waiting_lane: bool) -> str:
    """The file a worker takes next from files (in their order, not empty): a waiting lane's first waiting file, any
    other worker's first other file, else the first."""
    preferred = (f for f in files if (f in WAITING_FILES) == waiting_lane)
    return next(preferred, files[0])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With `--dist loadfile`, xdist's file scheduler handing out LONGEST_FILES_FIRST before the other files, and
    WAITING_FILES to the waiting lane."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Lanes(LoadFileScheduling):
        """xdist's file scheduler, each worker given the file _next_file picks for it."""

        def _assign_work_unit(self, node):
            if not getattr(self, "_reordered", False):
                rank = {path: i for i, path in enumerate(LONGEST_FILES_FIRST)}
                units = sorted(self.workqueue.items(), key=lambda unit: rank.get(unit[0], len(rank)))
                self.workqueue.clear()
                self.workqueue.update(units)
                self._reordered = True
            waiting_lane = self.numnodes < 3 or node is self.nodes[0]
            self.workqueue.move_to_end(_next_file(list(self.workqueue), waiting_lane), last=False)
            super()._assign_work_unit(node)

    return Lanes(config, log)
