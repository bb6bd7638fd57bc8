"""Hostile what-if form values (as a tampered client could post them): a one-line error, never a crash."""

from __future__ import annotations

from contextvars import copy_context

import dash_bootstrap_components as dbc
import pytest
from dash._callback_context import context_value
from dash._utils import AttributeDict

from components.server.settings import Settings
from components.whatif import callbacks as cb
from components.whatif import form as ids
from components.whatif.state import default_form
from sim.ces.energy import ENERGY_PARAMS
from sim.ces.policy import POLICY_PARAMS
from sim.slurm.knobs import KNOBS

HOSTILE = {
    "inject": "x' OR '1'='1'; DROP TABLE jobs; --",
    "nul": "ab\x00cd",
    "unicode": "漢字 🚀 \u202e",
    "megabyte": "Z" * 1_000_000,
    "list10k": [f"c{i}" for i in range(10_000)],
    "object": {"$where": "1"},
    "huge-number": 1e308,
    "negative": -(10**18),
}
FIELDS = (
    "dataset",
    "cluster",
    "vcs",
    "start",
    "end",
    "policies",
    "placer",
    "estimator",
    "noise_level",
    "load_factor",
    "capacity_scale",
    "ces_preset",
    "ces_mode",
    "ces_schedule",
)
# A printable cluster name is only known to be wrong once the run loads the dataset: the background job says so.
CHECKED_IN_BACKGROUND = {("cluster", "inject")}


@pytest.fixture
def settings(tmp_path, write_small):
    """Settings over a data folder holding the small two-cluster dataset, with fresh caches."""
    data = tmp_path / "data"
    write_small("helios-synth", data)
    return Settings(data_dir=data, cache_dir=tmp_path / "cache")


def _click(form: dict, settings: Settings, policy_values=None, energy_values=None, twin_values=None):
    policy_values = policy_values or [None] * len(POLICY_PARAMS)
    energy_values = energy_values or [None] * len(ENERGY_PARAMS)
    twin_values = twin_values or [None] * len(KNOBS)

    def call():
        context_value.set(AttributeDict(triggered_inputs=[{"prop_id": "whatif-run.n_clicks", "value": 1}]))
        values = [form[k] for k in ids.FORM_FIELDS]
        return cb.start_run(1, policy_values, energy_values, twin_values, *values, settings=settings)

    return copy_context().run(call)


def _assert_refused(out) -> None:
    error = out[1]
    assert isinstance(error, dbc.Alert), out
    assert len(str(error.children)) < 400 and "\n" not in str(error.children)
    assert out[2] is cb.no_update


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_form_field_is_refused_with_one_line(settings, field, kind):
    form = default_form("helios-synth", "Earth", "2020-04-15", "2020-04-20")
    form.update({"policies": ["fifo"], "ces_enabled": True, field: HOSTILE[kind]})
    out = _click(form, settings)
    if (field, kind) not in CHECKED_IN_BACKGROUND:
        _assert_refused(out)
        return
    assert out[1] is None and out[5] == "running…"
    *_, error = cb.run_job(lambda p: None, out[2], settings)
    assert f"cluster {HOSTILE[kind]!r} has no GPU jobs" in error.children


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_ces_parameters_are_refused_with_one_line(settings, kind):
    form = default_form("helios-synth", "Earth", "2020-04-15", "2020-04-20")
    form.update({"policies": ["fifo"], "ces_enabled": True})
    bad = [HOSTILE[kind]] * len(POLICY_PARAMS)
    _assert_refused(_click(form, settings, policy_values=bad))
    _assert_refused(_click(form, settings, energy_values=[HOSTILE[kind]] * len(ENERGY_PARAMS)))
