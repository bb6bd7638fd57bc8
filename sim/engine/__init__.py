"""Event-driven scheduling core: one independent run per VC, with integer-second semantics identical to the Helios
artifact's 1-second ticks (spec §4.1.5): the full per-tick procedure (release, arrivals, order, allocate or preempt)
runs only at ticks with an arrival or an event of the VC's own.

Modules: `loop` (the event loop driver), `backfill` (EASY backfilling), `ordered` (non-preemptive runs: FIFO, SJF,
QSSF), `preemptive` (SRTF, LAS), `outcome` (per-job results).
"""

from __future__ import annotations

import gc
import time

import numpy as np

from sim import placers as placer_registry
from sim import policies as policy_registry
from sim.cluster import VCNodes
from sim.engine.loop import NEVER
from sim.engine.ordered import run_ordered
from sim.engine.preemptive import run_preemptive
from sim.model import SimConfig, SimResult, VCResult, Workload
from sim.policies import VCJobs


def placeable_mask(gpu_num: np.ndarray, n_nodes: int, gpus_per_node: int, placer: str) -> np.ndarray:
    """Which GPU counts can be placed at all on an empty VC of n_nodes nodes with this placer."""
    empty = VCNodes(n_nodes, gpus_per_node)
    check = placer_registry.consolidate if placer == "consolidate" else placer_registry.first_fit
    ok = {int(g): check(empty, int(g)) is not None for g in np.unique(gpu_num)}
    return np.array([ok[int(g)] for g in gpu_num], dtype=bool)


def run(config: SimConfig, workload: Workload) -> SimResult:
    """Simulate every VC of workload under config and return the per-job outcomes."""
    gc_was_enabled = gc.isenabled()
    gc.disable()  # NOTE: the run allocates millions of acyclic tuples; cyclic GC passes only cost time
    try:
        return _run(config, workload)
    finally:
        if gc_was_enabled:
            gc.enable()


def _run(config: SimConfig, workload: Workload) -> SimResult:
    t0 = time.perf_counter()
    policy = policy_registry.get(config.policy, config.las_threshold_gpu_s)
    if getattr(policy, "cluster_wide", False):
        raise ValueError(f"policy {config.policy!r} runs on the whole cluster (sim.slurm), not VC by VC")
    vcs: dict[str, VCResult] = {}
    unplaceable = 0
    for v, name in enumerate(workload.vc_names):
        placer = placer_registry.get(config.placer, config.seed + v)
        rows = workload.vc_rows(v)
        nodes = VCNodes(workload.vc_nodes[v], config.gpus_per_node)
        ok = placeable_mask(workload.gpu_num[rows], nodes.n_nodes, nodes.gpus_per_node, config.placer)
        unplaceable += int((~ok).sum())
        jobs = VCJobs(
            duration_s=workload.duration_s[rows],
            gpu_num=workload.gpu_num[rows],
            predicted_s=workload.predicted_s[rows],
        )
        submit = np.where(ok, workload.submit_s[rows], NEVER)
        if policy.preemptive:
            out = run_preemptive(jobs, submit, policy, placer, nodes)
        else:
            out = run_ordered(jobs, submit, policy, placer, nodes, config)
        vcs[name] = out.to_result(rows, ok)
    return SimResult(workload, config, vcs, unplaceable, time.perf_counter() - t0)
