"""Association and QOS limits on running jobs, as Slurm's accounting policy checks them before a start: GrpTRES
(GPUs at once) and GrpJobs of an account and every account above it, MaxJobs of a user association, and a QOS's
GrpTRES, GrpJobs, MaxTRESPerUser and MaxJobsPerUser. A job over a limit waits (with the reason Slurm gives) and
does not block the jobs behind it.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from analytics.slurm_config import SlurmConfig
from sim.slurm.jobs import NO_QOS, SlurmJobs


class Limits:
    """Running GPUs and jobs per association node and QOS (and QOS user), against their caps."""

    def __init__(self, config: SlurmConfig, jobs: SlurmJobs):
        tree = jobs.tree
        self.jobs = jobs
        self.qos = config.qos
        caps = {(a.account if not a.user else f"{a.account}/{a.user}"): a for a in config.assocs}
        self.node_gpu_cap = [_cap(caps.get(name), "grp_gpus") for name in tree.names]
        self.node_job_cap = [_cap(caps.get(name), "grp_jobs") for name in tree.names]
        self.user_max_jobs = [_max_jobs(caps, name, tree.is_user[i]) for i, name in enumerate(tree.names)]
        self.chain = [_chain(tree.parent, node) for node in tree.users]  # user association and its ancestors
        self.node_gpus = np.zeros(len(tree.names), dtype=np.int64)
        self.node_jobs = np.zeros(len(tree.names), dtype=np.int64)
        self.qos_gpus = defaultdict(int)
        self.qos_jobs = defaultdict(int)
        self.active = any(c is not None for c in self.node_gpu_cap + self.node_job_cap + self.user_max_jobs)
        self.active = config.limits_enforced and (self.active or any(_qos_limited(q) for q in config.qos))

    def can_ever_start(self, job: int) -> bool:
        """Whether job fits its caps with nothing else running (a GrpTRES below its GPUs never lets it start)."""
        if not self.active:
            return True
        g = int(self.jobs.gpus[job])
        chain = self.chain[self.jobs.user_assoc[job]]
        caps = [(self.node_gpu_cap[n], g) for n in chain] + [(self.node_job_cap[n], 1) for n in chain]
        caps.append((self.user_max_jobs[chain[0]], 1))
        q = int(self.jobs.qos[job])
        if q != NO_QOS:
            spec = self.qos[q]
            caps += [(spec.grp_gpus, g), (spec.grp_jobs, 1), (spec.max_gpus_per_user, g), (spec.max_jobs_per_user, 1)]
        return all(cap is None or need <= cap for cap, need in caps)

    def blocked(self, job: int) -> str | None:
        """Slurm's wait reason when starting job now would pass a limit, else None."""
        if not self.active:
            return None
        g = int(self.jobs.gpus[job])
        chain = self.chain[self.jobs.user_assoc[job]]
        for node in chain:
            cap = self.node_gpu_cap[node]
            if cap is not None and self.node_gpus[node] + g > cap:
                return "AssocGrpGRES"
            cap = self.node_job_cap[node]
            if cap is not None and self.node_jobs[node] + 1 > cap:
                return "AssocGrpJobsLimit"
        cap = self.user_max_jobs[chain[0]]
        if cap is not None and self.node_jobs[chain[0]] + 1 > cap:
            return "AssocMaxJobsLimit"
        return self._qos_blocked(job, g)

    def _qos_blocked(self, job: int, g: int) -> str | None:
        q = int(self.jobs.qos[job])
        if q == NO_QOS:
            return None
        spec, u = self.qos[q], int(self.jobs.user[job])
        if spec.grp_gpus is not None and self.qos_gpus[q] + g > spec.grp_gpus:
            return "QOSGrpGRES"
        if spec.grp_jobs is not None and self.qos_jobs[q] + 1 > spec.grp_jobs:
            return "QOSGrpJobsLimit"
        if spec.max_gpus_per_user is not None and self.qos_gpus[(q, u)] + g > spec.max_gpus_per_user:
            return "QOSMaxGRESPerUser"
        if spec.max_jobs_per_user is not None and self.qos_jobs[(q, u)] + 1 > spec.max_jobs_per_user:
            return "QOSMaxJobsPerUserLimit"
        return None

    def start(self, job: int) -> None:
        """Count a started job against its limits."""
        self._add(job, 1)

    def end(self, job: int) -> None:
        """Release an ended job from its limits."""
        self._add(job, -1)

    def _add(self, job: int, sign: int) -> None:
        g = int(self.jobs.gpus[job]) * sign
        for node in self.chain[self.jobs.user_assoc[job]]:
            self.node_gpus[node] += g
            self.node_jobs[node] += sign
        q = int(self.jobs.qos[job])
        if q != NO_QOS:
            u = int(self.jobs.user[job])
            for key in (q, (q, u)):
                self.qos_gpus[key] += g
                self.qos_jobs[key] += sign


def _cap(assoc, name: str) -> int | None:
    return None if assoc is None else getattr(assoc, name)


def _max_jobs(caps: dict, name: str, is_user: bool) -> int | None:
    """A user association's MaxJobs, inherited from its account when it sets none."""
    if not is_user:
        return None
    own = _cap(caps.get(name), "max_jobs")
    return own if own is not None else _cap(caps.get(name.split("/", 1)[0]), "max_jobs")


def _chain(parent: tuple[int, ...], node: int) -> list[int]:
    chain = []
    while node >= 0:
        chain.append(node)
        node = parent[node]
    return chain


def _qos_limited(q) -> bool:
    return any(v is not None for v in (q.grp_gpus, q.grp_jobs, q.max_gpus_per_user, q.max_jobs_per_user))
