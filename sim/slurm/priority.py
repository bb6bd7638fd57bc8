"""priority/multifactor's sum and priority/basic's submission order, as Slurm computes them.

Multifactor: priority = Σ weight × factor, truncated to a whole number, at least 1; age = min(waited / MaxAge, 1)
from the job's eligible time, fair-share from the job's user association, job size = (nodes / cluster nodes +
CPUs / cluster CPUs) / 2 (PriorityFavorSmall: one minus each), partition = PriorityJobFactor / the largest one,
QOS = its priority / the largest one. Basic: each job a step below the one submitted before it (FIFO).
"""

from __future__ import annotations

import numpy as np

from analytics.slurm_config import SlurmConfig
from sim.slurm.jobs import NO_QOS, SlurmJobs

BASIC_TOP = 4_294_901_760  # priority/basic's first job (Slurm counts down from here)


class PriorityModel:
    """Every job's static factors and its priority at a given second for the given fair-share factors."""

    def __init__(self, config: SlurmConfig, jobs: SlurmJobs, job_nodes: np.ndarray):
        self.spec = config.priority
        parts = config.partitions
        self.tier = np.array([parts[p].priority_tier for p in jobs.partition], dtype=np.int64)
        self.static = self._static(config, jobs, job_nodes) if self.spec.multifactor else None

    def _static(self, config: SlurmConfig, jobs: SlurmJobs, job_nodes: np.ndarray) -> np.ndarray:
        """The weighted job-size, partition and QOS factors of every job."""
        s = self.spec
        n_nodes = len(config.nodes)
        n_cpus = sum(n.cpus for n in config.nodes)
        nodes_f, cpus_f = job_nodes / n_nodes, jobs.cpus / n_cpus
        if s.favor_small:
            nodes_f, cpus_f = 1.0 - nodes_f, 1.0 - cpus_f
        size = np.clip((nodes_f + cpus_f) / 2.0, 0.0, 1.0)
        top_part = max(p.priority_job_factor for p in config.partitions) or 1
        part = np.array([config.partitions[p].priority_job_factor for p in jobs.partition]) / top_part
        top_qos = max((q.priority for q in config.qos), default=0)
        qos_prio = np.array([config.qos[q].priority if q != NO_QOS else 0 for q in jobs.qos], dtype=np.float64)
        qos = qos_prio / top_qos if top_qos > 0 else np.zeros(len(jobs))
        return s.weight_job_size * size + s.weight_partition * part + s.weight_qos * qos

    def at(self, now_s: int, rows: np.ndarray, submit_s: np.ndarray, fs_factor: np.ndarray) -> np.ndarray:
        """The priorities of jobs rows at now_s (multifactor), or their submission-order priorities (basic)."""
        if self.static is None:
            return (BASIC_TOP - rows).astype(np.float64)
        s = self.spec
        age = np.minimum((now_s - submit_s[rows]) / s.max_age_s, 1.0)
        total = s.weight_age * np.maximum(age, 0.0) + s.weight_fairshare * fs_factor + self.static[rows]
        return np.maximum(np.floor(total), 1.0)
