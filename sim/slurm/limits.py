"""Association and QOS limits on running jobs, as Slurm's accounting policy checks them before a start: GrpTRES
(GPUs at once) and GrpJobs of an account and every account above it, MaxJobs of a user association, and a QOS's
GrpTRES, GrpJobs, MaxTRESPerUser and MaxJobsPerUser. A job over a limit waits (with the reason Slurm gives) and
does not block the jobs behind it; a job larger than one of its caps would wait for ever and is never queued.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sim.slurm.jit import compiled
from sim.slurm.jobs import NO_QOS
from sim.slurm.tables import NO_CAP, Caps

# Slurm's wait reasons, by the code blocked() returns
REASONS = (
    "",
    "AssocGrpGRES",
    "AssocGrpJobsLimit",
    "AssocMaxJobsLimit",
    "QOSGrpGRES",
    "QOSGrpJobsLimit",
    "QOSMaxGRESPerUser",
    "QOSMaxJobsPerUserLimit",
)


class Held(NamedTuple):
    """GPUs and jobs running per tree node, per QOS and per QOS and user."""

    node_gpus: np.ndarray
    node_jobs: np.ndarray
    qos_gpus: np.ndarray
    qos_jobs: np.ndarray
    qos_user_gpus: np.ndarray  # (QOS x users)
    qos_user_jobs: np.ndarray


def new_held(n_tree_nodes: int, n_qos: int, n_users: int) -> Held:
    """Nothing running."""
    return Held(
        np.zeros(n_tree_nodes, dtype=np.int64),
        np.zeros(n_tree_nodes, dtype=np.int64),
        np.zeros(n_qos, dtype=np.int64),
        np.zeros(n_qos, dtype=np.int64),
        np.zeros((n_qos, n_users), dtype=np.int64),
        np.zeros((n_qos, n_users), dtype=np.int64),
    )


@compiled
def _over(cap, held, need):
    return cap != NO_CAP and held + need > cap


@compiled
def blocked(caps, held, tt, user_assoc, user, qos, gpus):
    """The code of Slurm's wait reason (REASONS) when starting a job of gpus GPUs now would pass a limit, else 0."""
    one = np.int64(1)  # a typed value: a literal 1 would compile _over a second time
    lo, hi = tt.chain_ptr[user_assoc], tt.chain_ptr[user_assoc + 1]
    for i in range(lo, hi):
        node = tt.chains[i]
        if _over(caps.node_gpus[node], held.node_gpus[node], gpus):
            return 1
        if _over(caps.node_jobs[node], held.node_jobs[node], one):
            return 2
    own = tt.chains[lo]
    if _over(caps.user_jobs[own], held.node_jobs[own], one):
        return 3
    if qos == NO_QOS:
        return 0
    if _over(caps.qos_gpus[qos], held.qos_gpus[qos], gpus):
        return 4
    if _over(caps.qos_jobs[qos], held.qos_jobs[qos], one):
        return 5
    if _over(caps.qos_user_gpus[qos], held.qos_user_gpus[qos, user], gpus):
        return 6
    if _over(caps.qos_user_jobs[qos], held.qos_user_jobs[qos, user], one):
        return 7
    return 0


@compiled
def count(held, tt, user_assoc, user, qos, gpus, sign):
    """Count a started job (sign 1) or release an ended one (sign -1)."""
    for i in range(tt.chain_ptr[user_assoc], tt.chain_ptr[user_assoc + 1]):
        held.node_gpus[tt.chains[i]] += gpus * sign
        held.node_jobs[tt.chains[i]] += sign
    if qos != NO_QOS:
        held.qos_gpus[qos] += gpus * sign
        held.qos_jobs[qos] += sign
        held.qos_user_gpus[qos, user] += gpus * sign
        held.qos_user_jobs[qos, user] += sign


def can_ever_start(caps: Caps, tt, user_assoc: int, qos: int, gpus: int) -> bool:
    """Whether a job fits its caps with nothing else running (a GrpTRES below its GPUs never lets it start)."""
    n_qos = len(caps.qos_gpus)
    empty = new_held(len(tt.parent), n_qos, 1)
    return blocked(caps, empty, tt, user_assoc, 0, qos, gpus) == 0
