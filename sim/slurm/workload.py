"""The `slurm` policy on a what-if's workload: the jobs resolved against the captured configuration, replayed on
the whole cluster at once, and the outcome split back into one result per VC as the other policies give it.

Where the trace lacks a column (`account`, `partition`, `qos`, `timelimit_s`) the replay falls back: partition = VC,
account = VC, no time limit (the partition's DefaultTime or MaxTime), no QOS, one CPU per GPU; a recorded TIMEOUT job
with a recorded limit runs until the limit stops it (without one, for its recorded length).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime

import numpy as np

from analytics.slurm_config import SlurmConfig
from sim.model import SimConfig, SimResult, VCResult, Workload
from sim.policies import NO_PRIORITY
from sim.slurm.jobs import NEVER_S, SlurmJobs, build_jobs
from sim.slurm.run import NodeChange, SlurmOutcome, replay

_US_PER_S = 1_000_000


def boot_offset_s(config: SlurmConfig, t0_us: int) -> int:
    """slurmctld's start in seconds since the workload's t0 (0 when the capture does not say)."""
    if not config.boot_time:
        return 0
    boot = datetime.fromisoformat(config.boot_time)
    epoch = datetime(1970, 1, 1)
    return int(((boot - epoch).total_seconds() * _US_PER_S - t0_us) // _US_PER_S)


def slurm_jobs(config: SlurmConfig, w: Workload) -> tuple[SlurmJobs, list[str]]:
    """The workload's jobs as a Slurm replay runs them, and the notes on what was assumed."""
    cols = w.scheduler
    vc = np.array(w.vc_names, dtype=object)[w.vc_index]
    partition = cols.partition if cols is not None and cols.partition is not None else vc
    account = cols.account if cols is not None and cols.account is not None else vc
    user = cols.user if cols is not None else np.full(len(w), "", dtype=object)
    limit = cols.timelimit_s if cols is not None and cols.timelimit_s is not None else np.full(len(w), -1)
    duration = w.duration_s.copy()
    if cols is not None and cols.timed_out is not None:
        duration[cols.timed_out & (limit > 0)] = NEVER_S  # without a recorded limit, the recorded end stands
    cpus = cols.cpus if cols is not None and cols.cpus is not None else np.maximum(w.gpu_num, 1)
    return build_jobs(
        config,
        submit_s=w.submit_s,
        duration_s=duration,
        gpus=w.gpu_num,
        cpus=np.asarray(cpus, dtype=np.int64),
        partition=[str(p) or str(v) for p, v in zip(partition, vc, strict=True)],
        account=[str(a) or str(v) for a, v in zip(account, vc, strict=True)],
        user=[str(u) for u in user],
        timelimit_s=[int(t) if t > 0 else None for t in limit],
        qos=None if cols is None or cols.qos is None else [str(q) for q in cols.qos],
        nodes=None if cols is None or cols.nodes is None else cols.nodes,
    )


def simulate_slurm(
    config: SlurmConfig, sim: SimConfig, w: Workload, changes: Sequence[NodeChange] = (), carried: int = 0
) -> SimResult:
    """Replay w with the cluster's scheduler (changes: its nodes leaving and joining) and return one VCResult per VC
    (timelines per VC's partition); w's first `carried` jobs, those running or waiting when the window opened, are
    replayed but neither reported nor counted in the timelines."""
    t = time.perf_counter()
    jobs, _ = slurm_jobs(config, w)
    group = w.vc_index.astype(np.int64)
    group[:carried] = len(w.vc_names)  # their own timeline group, left out
    groups = (group, len(w.vc_names) + (carried > 0))
    out = replay(config, jobs, boot_offset_s(config, w.t0_us), groups, w.t0_us // _US_PER_S, changes)
    kept = w.after(carried) if carried else w
    vcs = {name: _vc_result(kept, v, out, carried) for v, name in enumerate(w.vc_names)}
    return SimResult(kept, sim, vcs, int((~out.runnable[carried:]).sum()), time.perf_counter() - t)


def _vc_result(w: Workload, v: int, out: SlurmOutcome, offset: int) -> VCResult:
    rows = w.vc_rows(v)
    at = rows + offset
    started = out.start_s[at] >= 0
    return VCResult(
        rows=rows,
        start_s=out.start_s[at],
        end_s=out.end_s[at],
        queue_s=np.where(started, out.start_s[at] - w.submit_s[rows], -1),
        preemptions=np.zeros(rows.shape[0], dtype=np.int64),
        priority=np.where(started, out.priority[at], NO_PRIORITY),
        nodes=[tuple(n for n, _, _ in out.placement[r]) for r in at],
        timeline_t_s=out.timeline_t_s,
        timeline_used_gpus=out.timeline_used_gpus[:, v],
        timeline_queued_jobs=out.timeline_queued_jobs[:, v],
    )
