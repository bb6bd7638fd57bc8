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
def priority_at(st, jt, job, now_s, fs_factor):
    """The priority of job at now_s given its fair-share factor (multifactor), or its submission-order one (basic)."""
    if not st.multifactor:
        return float(BASIC_TOP - job)
    age = min((now_s - jt.submit_s[job]) / st.max_age_s, 1.0)
    total = st.weight_age * max(age, 0.0) + st.weight_fairshare * fs_factor + jt.static[job]
    return max(np.floor(total), 1.0)
