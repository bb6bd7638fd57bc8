"""Fair-share usage as priority/multifactor's decay thread keeps it: every PriorityCalcPeriod all usage decays by
decay^Δt and each running job adds run_delta × decay^run_delta × billing × its QOS UsageFactor for the seconds it
ran since the last pass. A job that ends adds its seconds since the last pass at once only where limits are
enforced (AccountingStorageEnforce with limits, safe or all): Slurm 22.05 calls priority_g_job_end from
acct_policy's limit bookkeeping only, and the decay thread skips finished jobs, so without enforced limits those
seconds (all of a job shorter than the period between two passes) are never charged. The fair-share factors
(Fair Tree or classic) are those of the usage at the last pass.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sim.slurm.fairshare import classic_factors, fair_tree_factors
from sim.slurm.jit import NONE, compiled


class Ledger(NamedTuple):
    """Each user association's usage, the usage at the last pass, its factors and the last pass's second."""

    usage: np.ndarray
    passed: np.ndarray
    factors: np.ndarray
    clock: np.ndarray  # [last pass second (NONE before the first), factors up to date (0/1)]


def new_ledger(n_users: int, last_pass_s: int | None) -> Ledger:
    """No usage yet; last_pass_s None: the first pass only starts the clock (no saved state)."""
    clock = np.array([NONE if last_pass_s is None else last_pass_s, 0], dtype=np.int64)
    return Ledger(np.zeros(n_users), np.zeros(n_users), np.zeros(n_users), clock)


@compiled
def _accrue(lg, st, jt, job, start_s, from_s, to_s):
    run_delta = to_s - max(start_s, from_s)
    if run_delta > 0:
        lg.usage[jt.user_assoc[job]] += run_delta * st.decay ** float(run_delta) * jt.rate[job]


@compiled
def job_end(lg, st, jt, job, start_s, end_s):
    """Add an ending job's usage since the last pass (where limits are enforced)."""
    if st.charge_at_end and lg.clock[0] != NONE:
        _accrue(lg, st, jt, job, start_s, lg.clock[0], end_s)


@compiled
def calc_pass(lg, st, jt, now_s, running, n_running, start_s):
    """The decay thread's pass at now_s over the running jobs (running[:n_running], in start order; -1 where one
    has ended): decay, accrue, and the factors due again."""
    last = lg.clock[0]
    if last != NONE and now_s > last:
        lg.usage[:] = lg.usage * st.decay ** float(now_s - last)
        for k in range(n_running):
            job = running[k]
            if job >= 0:
                _accrue(lg, st, jt, job, start_s[job], last, now_s)
    lg.clock[0] = now_s
    lg.passed[:] = lg.usage
    lg.clock[1] = 0


@compiled
def factors(lg, st, tt):
    """Every user association's fair-share factor as of the last pass (worked out once per pass)."""
    if lg.clock[1] == 0:
        if not st.multifactor or st.weight_fairshare == 0:
            lg.factors[:] = 0.0
        elif st.fair_tree:
            lg.factors[:] = fair_tree_factors(tt, lg.passed)
        else:
            lg.factors[:] = classic_factors(tt, lg.passed, st.dampening)
        lg.clock[1] = 1
    return lg.factors


@compiled
def factor_of(lg, st, tt, user_assoc):
    """The fair-share factor of a user association as of the last pass."""
    return factors(lg, st, tt)[user_assoc]
