"""Fair-share usage as priority/multifactor's decay thread keeps it: every PriorityCalcPeriod all usage decays by
decay^Δt and each running job adds run_delta × decay^run_delta × billing × its QOS UsageFactor for the seconds it
ran since the last pass. A job that ends adds its seconds since the last pass at once only where limits are
enforced (AccountingStorageEnforce with limits, safe or all): Slurm 22.05 calls priority_g_job_end from
acct_policy's limit bookkeeping only, and the decay thread skips finished jobs, so without enforced limits those
seconds (all of a job shorter than the period between two passes) are never charged. The fair-share factors
(Fair Tree or classic) are recomputed at each pass only.
"""

from __future__ import annotations

import numpy as np

from analytics.slurm_config import SlurmConfig
from sim.slurm.fairshare import AssocTree, classic_factors, decay_per_s, fair_tree_factors
from sim.slurm.jobs import NO_QOS, SlurmJobs


class UsageLedger:
    """Each user association's raw usage, the passes' bookkeeping and the current fair-share factors."""

    def __init__(self, config: SlurmConfig, jobs: SlurmJobs, last_pass_s: int | None = None):
        self.tree: AssocTree = jobs.tree
        self.spec = config.priority
        self.decay = decay_per_s(config.priority.decay_half_life_s)
        qos_factor = np.array([q.usage_factor for q in config.qos] + [1.0])
        self.rate = (config.billing_cpu_weight * jobs.cpus + config.billing_gpu_weight * jobs.gpus) * qos_factor[
            np.where(jobs.qos == NO_QOS, len(config.qos), jobs.qos)
        ]
        self.user_assoc = jobs.user_assoc
        self.charge_at_end = config.limits_enforced
        self.usage = np.zeros(len(self.tree.users))
        self.last_pass_s = last_pass_s  # None: the first pass only starts the clock (no saved state)
        self.passed_usage = self.usage.copy()  # the usage of the last pass, which the factors are computed from
        self.factors: np.ndarray | None = None  # computed when first asked for after a pass

    def _accrue(self, job: int, start_s: int, from_s: int, to_s: int) -> None:
        run_delta = to_s - max(start_s, from_s)
        if run_delta > 0:
            self.usage[self.user_assoc[job]] += run_delta * self.decay**run_delta * self.rate[job]

    def job_end(self, job: int, start_s: int, end_s: int) -> None:
        """Add an ending job's usage since the last pass (where limits are enforced)."""
        if self.charge_at_end and self.last_pass_s is not None:
            self._accrue(job, start_s, self.last_pass_s, end_s)

    def calc_pass(self, now_s: int, running: dict[int, int]) -> None:
        """The decay thread's pass at now_s over the running jobs (job -> start second, in start order): decay,
        accrue, and the factors recomputed (when next asked for)."""
        if self.last_pass_s is not None and now_s > self.last_pass_s:
            self.usage *= self.decay ** (now_s - self.last_pass_s)
            if running:
                jobs = np.fromiter(running, dtype=np.int64, count=len(running))
                start_s = np.fromiter(running.values(), dtype=np.int64, count=len(running))
                run_delta = now_s - np.maximum(start_s, self.last_pass_s)
                ran = run_delta > 0
                jobs, run_delta = jobs[ran], run_delta[ran]
                np.add.at(self.usage, self.user_assoc[jobs], run_delta * self.decay**run_delta * self.rate[jobs])
        self.last_pass_s = now_s
        self.passed_usage = self.usage.copy()
        self.factors = None

    def _factors(self) -> np.ndarray:
        if not self.spec.multifactor or self.spec.weight_fairshare == 0:
            return np.zeros(len(self.tree.users))
        if self.spec.fair_tree:
            return fair_tree_factors(self.tree, self.passed_usage)
        return classic_factors(self.tree, self.passed_usage, self.spec.dampening)

    def job_factors(self, rows: np.ndarray) -> np.ndarray:
        """The fair-share factor of jobs rows as of the last pass."""
        if self.factors is None:
            self.factors = self._factors()
        return self.factors[self.user_assoc[rows]]
