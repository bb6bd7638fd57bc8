"""priority/multifactor's sum and priority/basic's submission order, as Slurm computes them.

Multifactor: priority = Σ weight × factor, truncated to a whole number, at least 1; age = min(waited / MaxAge, 1)
from the job's eligible time, fair-share from the job's user association, job size = (nodes / cluster nodes +
CPUs / cluster CPUs) / 2 (PriorityFavorSmall: one minus each), partition = PriorityJobFactor / the largest one,
QOS = its priority / the largest one (the last three fixed per job: tables.static_priority). Basic: each job a step
below the one submitted before it (FIFO).
"""

from __future__ import annotations

import numpy as np

from sim.slurm.jit import compiled

BASIC_TOP = 4_294_901_760  # priority/basic's first job (Slurm counts down from here)


@compiled
def _multifactor(weight_age, max_age_s, weight_fairshare, waited_s, fs_factor, static):
    age = min(waited_s / max_age_s, 1.0)
    total = weight_age * max(age, 0.0) + weight_fairshare * fs_factor + static
    return max(np.floor(total), 1.0)


@compiled
def priority_at(st, jt, job, now_s, fs_factor):
    """The priority of job at now_s given its fair-share factor (multifactor), or its submission-order one (basic)."""
    if not st.multifactor:
        return float(BASIC_TOP - job)
    waited_s = now_s - jt.submit_s[job]
    return _multifactor(st.weight_age, st.max_age_s, st.weight_fairshare, waited_s, fs_factor, jt.static[job])


@compiled
def priorities_at(st, jt, jobs, now_s, fs_factors, out):
    """out[job] = priority_at(job) for every job in jobs, each user association's fair-share factor in fs_factors
    (one loop over plain arrays: a call per job that passes the tables costs more than the sum itself)."""
    if not st.multifactor:
        for job in jobs:
            out[job] = float(BASIC_TOP - job)
        return
    submit_s, static, user_assoc = jt.submit_s, jt.static, jt.user_assoc
    w_age, max_age_s, w_fs = st.weight_age, st.max_age_s, st.weight_fairshare
    for job in jobs:
        out[job] = _multifactor(w_age, max_age_s, w_fs, now_s - submit_s[job], fs_factors[user_assoc[job]], static[job])
