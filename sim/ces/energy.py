"""Energy, cost and carbon accounting of a power policy against an always-on baseline."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from sim.ces.policy import knob
from sim.ces.series import STEP_HOURS, STEPS_PER_DAY


@dataclass(frozen=True)
class EnergyParams:
    """Per-node power, wake-up cost, electricity price and carbon intensity (defaults: 8-GPU server)."""

    busy_kw: float = knob(3.0, "kW drawn by a node running jobs (8 GPUs under load plus host)", 100.0)
    idle_kw: float = knob(0.8, "kW drawn by a powered idle node (8 idle GPUs at ~50 W plus host)", 100.0)
    off_kw: float = knob(0.01, "kW drawn by a powered-off node (BMC, standby)", 100.0)
    wakeup_s: float = knob(300.0, "seconds from power-on until a node takes jobs", 86_400.0)
    wakeup_kwh: float = knob(0.0667, "kWh of one boot (idle power over the boot time)", 100.0)
    price_per_kwh: float = knob(0.10, "electricity price per kWh (currency units)", 1_000.0)
    co2_kg_per_kwh: float = knob(0.4, "kg of CO2 per kWh of grid electricity", 10.0)


ENERGY_PARAMS: tuple[str, ...] = tuple(f.name for f in fields(EnergyParams))  # the adjustable knobs, in order


def account(total: np.ndarray, running: np.ndarray, active: np.ndarray, params: EnergyParams) -> dict:
    """Energy of always-on versus the policy's powered nodes, with savings, node-hours off and boot counts."""
    busy = np.minimum(running, total)
    baseline_kwh = float(np.sum(busy * params.busy_kw + (total - busy) * params.idle_kw) * STEP_HOURS)
    off = total - active
    boots = float(np.sum(np.maximum(np.diff(active), 0)))
    shutdowns = float(np.sum(np.maximum(-np.diff(active), 0)))
    idle = np.maximum(active - busy, 0)
    powered_kwh = np.sum(busy * params.busy_kw + idle * params.idle_kw + off * params.off_kw)
    policy_kwh = float(powered_kwh * STEP_HOURS + boots * params.wakeup_kwh)
    saved_kwh = baseline_kwh - policy_kwh
    days = len(total) / STEPS_PER_DAY
    return {
        "node_hours_off": float(np.sum(off) * STEP_HOURS),
        "baseline_kwh": baseline_kwh,
        "policy_kwh": policy_kwh,
        "energy_saved_kwh": saved_kwh,
        "energy_saved_pct": 100.0 * saved_kwh / baseline_kwh if baseline_kwh else 0.0,
        "cost_saved": saved_kwh * params.price_per_kwh,
        "co2_saved_kg": saved_kwh * params.co2_kg_per_kwh,
        "node_boots_per_day": boots / days,
        "node_shutdowns_per_day": shutdowns / days,
    }
