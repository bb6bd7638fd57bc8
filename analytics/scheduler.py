"""The scheduler configuration a dataset keeps (captured from Slurm by analytics.ingest.slurm_conf, stored in its
meta.json): reading it back, and saying it in one line.

meta.json keeps the SlurmConfig under CONFIG_KEY (config_to_dict; null when the last capture failed) and what the
capture was under CAPTURE_KEY: its source, the time `scontrol show config` gave, the cluster, the Slurm version, and
the error that left the dataset without a configuration.
"""

from __future__ import annotations

from typing import Any, Protocol

from analytics.slurm_config import DAY_S, SlurmConfig, config_from_dict

CONFIG_KEY = "slurm_config"
CAPTURE_KEY = "slurm_config_capture"


class HasMeta(Protocol):
    """Anything with a meta.json dict (a store.Dataset)."""

    meta: dict[str, Any]


def scheduler_config(dataset: HasMeta) -> SlurmConfig | None:
    """The dataset's captured scheduler configuration, or None (SlurmConfigError when the stored one is broken)."""
    return stored_config(dataset.meta)


def stored_config(meta: dict[str, Any]) -> SlurmConfig | None:
    """The scheduler configuration a meta.json keeps, or None (SlurmConfigError when it is broken)."""
    data = meta.get(CONFIG_KEY)
    return config_from_dict(data) if data else None


def capture_info(meta: dict[str, Any]) -> dict[str, Any]:
    """What the last capture of the scheduler configuration was ({} when there was none)."""
    info = meta.get(CAPTURE_KEY)
    return info if isinstance(info, dict) else {}


def span_text(seconds: int | None) -> str:
    """A configured period in its largest exact unit ("30 min", "1 day", "90 s"); "unlimited" for None."""
    if seconds is None:
        return "unlimited"
    for unit_s, unit in ((DAY_S, "day"), (3600, "h"), (60, "min")):
        if seconds and seconds % unit_s == 0:
            n = seconds // unit_s
            return f"{n} {unit}{'s' if unit == 'day' and n != 1 else ''}"
    return f"{seconds} s"


def _priority_text(config: SlurmConfig) -> str:
    p = config.priority
    if not p.multifactor:
        return "basic priority (first submitted, first considered)"
    weights = [
        ("fair-share", p.weight_fairshare, ""),
        ("age", p.weight_age, f" (full at {span_text(p.max_age_s)})"),
        ("job size", p.weight_job_size, " (small first)" if p.favor_small else ""),
        ("partition", p.weight_partition, ""),
        ("QOS", p.weight_qos, ""),
    ]
    shown = [f"{name} {w}{extra}" for name, w, extra in weights if w]
    text = "multifactor; weights " + (", ".join(shown) if shown else "all 0")
    if p.weight_fairshare:
        kind = "Fair Tree" if p.fair_tree else f"classic fair-share (dampening {p.dampening})"
        decay = f"usage half-life {span_text(p.decay_half_life_s)}" if p.decay_half_life_s else "no usage decay"
        text += f"; {kind}, {decay}"
    return text


def _sched_text(config: SlurmConfig) -> str:
    s = config.sched
    main = f"sched_interval {s.sched_interval_s} s"
    if not s.backfill:
        return f"builtin (strict priority order, no backfill), {main}"
    settings = [
        f"bf_interval {s.bf_interval_s} s",
        f"bf_window {s.bf_window_s // 60} min",
        f"bf_resolution {s.bf_resolution_s} s",
        f"bf_max_job_test {s.bf_max_job_test}",
    ]
    return f"backfill ({', '.join(settings)}{', bf_continue' if s.bf_continue else ''}), {main}"


def _pool_text(config: SlurmConfig) -> str:
    n_part, n_nodes = len(config.partitions), len(config.nodes)
    gpus = sum(n.gpus for n in config.nodes)
    return f"{n_part} partition{'s' * (n_part != 1)} on {n_nodes} node{'s' * (n_nodes != 1)}, {gpus:,} GPUs"


def _limits_text(config: SlurmConfig) -> str:
    accounts = sum(1 for a in config.assocs if not a.user)
    users = len({a.user for a in config.assocs if a.user})
    text = f"{accounts} account{'s' * (accounts != 1)}, {users} user{'s' * (users != 1)}, {len(config.qos)} QOS"
    limited = any(a.grp_gpus is not None or a.grp_jobs is not None or a.max_jobs is not None for a in config.assocs)
    limited |= any(
        q.grp_gpus is not None
        or q.grp_jobs is not None
        or q.max_gpus_per_user is not None
        or q.max_jobs_per_user is not None
        for q in config.qos
    )
    if limited:
        text += "; limits enforced" if config.limits_enforced else "; limits set but not enforced"
    return text


def config_summary(config: SlurmConfig) -> str:
    """The configuration in one line: priority and fair-share, scheduling and backfill, nodes and GPUs, limits."""
    return "; ".join((_priority_text(config), _sched_text(config), _pool_text(config), _limits_text(config)))
