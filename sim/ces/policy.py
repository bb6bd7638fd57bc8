"""The artifact's node power policy: wake nodes when demand exceeds them, power off on a falling trend."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from sim.ces.series import WEEK_STEPS

MAX_NODES = 1_000_000  # the largest node count or demand threshold a CES parameter may name


def knob(default: float, text: str, maximum: float):
    """A dataclass field with a default, the help text its CLI option shows and the largest value a run accepts."""
    return field(default=default, metadata={"help": text, "max": maximum})


@dataclass(frozen=True)
class PolicyParams:
    """Parameters of the power rule (steps are 10-minute bins; thresholds in nodes)."""

    history: int = knob(2, "steps of past demand whose mean must exceed the current demand", WEEK_STEPS)
    future: int = knob(30, "steps of forecast whose mean must not exceed the current demand", WEEK_STEPS)
    his_threshold: float = knob(0.1, "minimum fall of demand versus the recent past", MAX_NODES)
    fut_threshold: float = knob(0.0, "minimum fall of the forecast versus current demand", MAX_NODES)
    de_threshold: int = knob(1, "minimum number of nodes worth powering off at once", MAX_NODES)
    buffer: int = knob(20, "idle nodes kept powered above current demand", MAX_NODES)
    keep: int = knob(10, "steps without power-off after a wake-up", WEEK_STEPS)
    stable: int = knob(0, "initial no-power-off horizon (the artifact's stable_pred)", WEEK_STEPS)
    warmup: int = knob(6, "first steps powered at demand + buffer without decisions", WEEK_STEPS)


PRESETS: dict[str, PolicyParams] = {
    "philly": PolicyParams(2, 30, 0.1, 0, 1, 20, 10, 0),
    "venus": PolicyParams(3, 18, 0.5, 1, 2, 5, 12, 0),
    "earth": PolicyParams(6, 18, 1, 1, 5, 5, 12, 1),
    "saturn": PolicyParams(6, 18, 1, 1, 1, 5, 12, 0),
    "uranus": PolicyParams(3, 18, 1, 1, 1, 7, 12, 1),
}


POLICY_PARAMS: tuple[str, ...] = tuple(f.name for f in fields(PolicyParams))  # the adjustable knobs, in order


@dataclass(frozen=True)
class PolicyTrace:
    """Step-by-step outcome: powered nodes, their recorded changes and the demand they failed to cover."""

    active: np.ndarray
    change: np.ndarray
    lack: np.ndarray


def window_means(prediction: np.ndarray, length: int) -> np.ndarray:
    """mean(prediction[i:i+length]) for every i, the slice truncating at the end as the artifact's does."""
    csum = np.concatenate([[0.0], np.cumsum(prediction, dtype=np.float64)])
    idx = np.arange(len(prediction))
    hi = np.minimum(idx + length, len(prediction))
    return (csum[hi] - csum[idx]) / (hi - idx)


def run_policy(
    total: np.ndarray, running: np.ndarray, fut_mean: np.ndarray, fut2_mean: np.ndarray, params: PolicyParams
) -> PolicyTrace:
    """Run the rule over integer total and running nodes, given forecast means over F and 2F steps."""
    n = len(running)
    tot = total.astype(np.int64).tolist()
    run = running.astype(np.int64).tolist()
    act = [0] * n
    change = [0] * n
    lack = [0] * n
    stable = params.stable
    for i in range(n):
        if i < params.warmup:
            act[i] = min(run[i] + params.buffer, tot[i])
            continue
        act[i] = act[i - 1]
        if act[i] < run[i]:
            lack[i] = run[i] - act[i]
            act[i] = run[i] + params.buffer
            change[i] = act[i] - act[i - 1]
            stable = i + params.keep
        act[i] = min(act[i], tot[i])
        past = run[max(i - params.history, 0) : i]
        history_trend = sum(past) / len(past) - run[i]
        if history_trend < params.his_threshold or run[i] - fut_mean[i] < params.fut_threshold:
            continue
        if i < stable:
            continue
        stable = i
        if fut_mean[i] < fut2_mean[i]:
            continue
        new = min(act[i], run[i] + params.buffer)
        if act[i] - new >= params.de_threshold:
            act[i] = new
            change[i] = act[i] - act[i - 1]
    return PolicyTrace(np.asarray(act), np.asarray(change), np.asarray(lack))
