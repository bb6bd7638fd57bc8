"""Human names, units and one-line explanations of the what-if metrics and sweep parameters (for tables, figures,
drop-downs and download headers), in one place."""

from __future__ import annotations

from typing import NamedTuple

from sim.slurm.knobs import KNOBS


class Metric(NamedTuple):
    """A metric's name on screen, its units kind (components.charts.units) or "" for a plain number, and what it
    means (shown on hover)."""

    label: str
    kind: str
    help: str


_JCT = "job completion time: from submit to end, over the jobs that ended in the window"
_QUEUE = "queueing delay: from submit to start, over the jobs that started in the window"
_BAND = "the change against the baseline widened by the baseline's own error against the record"
METRICS: dict[str, Metric] = {
    "jobs": Metric("jobs", "count", "GPU jobs submitted in the window"),
    "avg_jct_s": Metric("mean JCT", "duration", "mean " + _JCT),
    "median_jct_s": Metric("median JCT", "duration", "median " + _JCT),
    "p95_jct_s": Metric("p95 JCT", "duration", "95th percentile of the " + _JCT),
    "p99_jct_s": Metric("p99 JCT", "duration", "99th percentile of the " + _JCT),
    "avg_queue_s": Metric("mean queue", "duration", "mean " + _QUEUE),
    "median_queue_s": Metric("median queue", "duration", "median " + _QUEUE),
    "p95_queue_s": Metric("p95 queue", "duration", "95th percentile of the " + _QUEUE),
    "p99_queue_s": Metric("p99 queue", "duration", "99th percentile of the " + _QUEUE),
    "avg_bounded_slowdown": Metric(
        "bounded slowdown", "", "mean of max(1, JCT ÷ max(run time, 10 s)): 1 = no job waited; higher = longer waits"
    ),
    "gpu_util_pct": Metric("GPU utilisation (%)", "percent", "busy GPU time ÷ GPU time available in the window"),
    "unplaceable": Metric("unplaceable jobs", "count", "jobs asking for more GPUs than their VC has: never run"),
    "waiting_at_end": Metric(
        "still waiting at the end", "count", "jobs not started when the window ends (left out of queue and JCT)"
    ),
    "avg_jct_x_vs_recorded": Metric("mean JCT ÷ recorded", "", "below 1: jobs finish sooner than they really did"),
    "avg_jct_x_vs_baseline": Metric("mean JCT ÷ baseline", "", "below 1: jobs finish sooner than under the baseline"),
    "avg_queue_x_vs_recorded": Metric("mean queue ÷ recorded", "", "below 1: jobs wait less than they really did"),
    "avg_queue_x_vs_baseline": Metric("mean queue ÷ baseline", "", "below 1: jobs wait less than under the baseline"),
    "gpu_util_pp_vs_baseline": Metric(
        "utilisation − baseline (points)", "", "GPU utilisation minus the baseline's, in percentage points"
    ),
    "avg_queue_x_vs_baseline_lo": Metric("mean queue ÷ baseline, low end", "", _BAND),
    "avg_queue_x_vs_baseline_hi": Metric("mean queue ÷ baseline, high end", "", _BAND),
    "avg_jct_x_vs_baseline_lo": Metric("mean JCT ÷ baseline, low end", "", _BAND),
    "avg_jct_x_vs_baseline_hi": Metric("mean JCT ÷ baseline, high end", "", _BAND),
    "gpu_util_pp_vs_baseline_lo": Metric("utilisation − baseline, low end", "", _BAND),
    "gpu_util_pp_vs_baseline_hi": Metric("utilisation − baseline, high end", "", _BAND),
    "original_used_pct": Metric("used nodes, always on (%)", "percent", "nodes busy ÷ nodes on, with every node on"),
    "optimized_used_pct": Metric("used nodes with CES (%)", "percent", "nodes busy ÷ nodes on, with CES powering off"),
    "poweroff_mean_nodes": Metric("nodes off (mean)", "", "nodes CES keeps powered off, on average"),
    "energy_saved_kwh": Metric("energy saved (kWh)", "energy", "energy CES saves over the window"),
    "energy_saved_pct": Metric("energy saved (%)", "percent", "energy CES saves ÷ energy with every node on"),
    "cost_saved": Metric("cost saved", "", "energy saved × the price per kWh"),
    "co2_saved_kg": Metric("CO₂ saved (kg)", "", "energy saved × the CO₂ per kWh"),
    "lack_node_steps": Metric("shortfall (node-steps)", "count", "time steps × nodes jobs needed while they were off"),
    "lack_max_nodes": Metric("worst shortfall (nodes)", "count", "the most nodes missing at one time step"),
    "daily_change_times": Metric("power changes per day", "", "how often CES switches nodes on or off, per day"),
}
PARAMETERS: dict[str, tuple[str, str]] = {
    "load_factor": ("load factor", "jobs' arrival rate × this (1.2 = 20 % more load); 0.1 to 10"),
    "capacity_scale": ("capacity scale", "each VC's nodes × this; 0.1 to 10"),
    "noise_level": ("predictor noise", "noisy oracle only: 0 = exact durations, 1 = the artifact's errors"),
    "policy": ("scheduling policy", "the order jobs start in: fifo, sjf, srtf, qssf, las"),
    "placer": ("node placement", "how a job's GPUs are put on nodes"),
    "estimator": ("duration predictor", "how QSSF and SJF guess each job's run time"),
    "backfill": ("EASY backfill", "let small jobs start ahead when they delay no reserved job (0 or 1)"),
}


def metric_label(name: str) -> str:
    """The human name of a metric (its own name when unknown)."""
    return METRICS[name].label if name in METRICS else name.replace("_", " ")


def metric_help(name: str) -> str:
    """What a metric means, for a hover title ('' when unknown)."""
    return METRICS[name].help if name in METRICS else ""


def download_header(name: str) -> str:
    """A metric's column name in a CSV download: its human name with the unit of the exact value it holds."""
    if name not in METRICS:
        return name
    metric = METRICS[name]
    return f"{metric.label} (s)" if metric.kind == "duration" else metric.label


def parameter_label(name: str) -> str:
    """The human name of a sweep parameter (CES parameters as 'CES <name>', the twin's as 'Slurm twin: <its
    slurm.conf name>')."""
    if name in PARAMETERS:
        return PARAMETERS[name][0]
    if name.removeprefix("twin.") in KNOBS:
        return "Slurm twin: " + KNOBS[name.removeprefix("twin.")].slurm
    return "CES " + name.removeprefix("ces.").replace("_", " ")


def parameter_help(name: str) -> str:
    """What a sweep parameter changes, for a hover title."""
    if name in PARAMETERS:
        return PARAMETERS[name][1]
    knob = KNOBS.get(name.removeprefix("twin."))
    if knob is not None:
        return f"the slurm policy's {knob.slurm}, set on the twin's configuration ({knob.low:,} to {knob.high:,})"
    return "a parameter of cluster energy saving (see the CES form)"
