"""The cluster's nodes as one pool with free GPUs and CPUs per node; partitions are views over it (a node may be in
several), and a job is placed on whole-job shares of nodes in service (tables.Membership) with enough free GPUs
and CPUs (cons_tres-like).

A job of n nodes takes gpus/n GPUs and cpus/n CPUs of each (rounded up for the first nodes when they do not
divide), on the lowest-numbered nodes of its partition that hold that share, among those the caller allows. When
the shares differ, as many nodes as the job's must hold the larger share (as the model has always asked).
"""

from __future__ import annotations

import numpy as np

from sim.slurm.jit import compiled
from sim.slurm.tables import Cluster


def shares(total: int, parts: int) -> list[int]:
    """total split over parts as evenly as whole numbers allow, the larger shares first."""
    base, extra = divmod(total, parts)
    return [base + 1] * extra + [base] * (parts - extra)


@compiled
def place(cl, free_g, free_c, part, gpus, cpus, n_nodes, allowed, out_node, out_g, out_c):
    """Whether the job (partition, gpus, cpus, n_nodes) fits the allowed nodes given their free GPUs and CPUs; its
    first-fit placement is written to out_node/out_g/out_c[:n_nodes]."""
    base_g, extra_g = divmod(gpus, n_nodes)
    base_c, extra_c = divmod(cpus, n_nodes)
    if extra_g == 0 and extra_c == 0:
        part_nodes, node_on = cl.part_nodes, cl.node_on  # NOTE: taken out of their tuple once, not at every use
        k = 0
        for i in range(cl.part_ptr[part], cl.part_ptr[part + 1]):
            node = part_nodes[i]
            if node_on[node] and allowed[node] and free_g[node] >= base_g and free_c[node] >= base_c:
                out_node[k], out_g[k], out_c[k] = node, base_g, base_c
                k += 1
                if k == n_nodes:
                    return True
        return False
    return _uneven(cl, free_g, free_c, part, base_g, extra_g, base_c, extra_c, n_nodes, allowed, out_node, out_g, out_c)


@compiled
def _uneven(cl, free_g, free_c, part, base_g, extra_g, base_c, extra_c, n_nodes, allowed, out_node, out_g, out_c):
    """Larger shares on the lowest-numbered nodes that hold them, the rest on the next ones that hold theirs."""
    g0, c0 = base_g + (extra_g > 0), base_c + (extra_c > 0)
    part_nodes, node_on, lo, hi = cl.part_nodes, cl.node_on, cl.part_ptr[part], cl.part_ptr[part + 1]
    n_big = 0
    for k in range(n_nodes):
        if base_g + (k < extra_g) == g0 and base_c + (k < extra_c) == c0:
            n_big += 1
    big = 0
    for i in range(lo, hi):
        node = part_nodes[i]
        if node_on[node] and allowed[node] and free_g[node] >= g0 and free_c[node] >= c0:
            if big < n_big:
                out_node[big] = node
            big += 1
    if big < n_nodes:
        return False
    k = n_big
    for i in range(lo, hi):
        node = part_nodes[i]
        if k == n_nodes:
            break
        ok = node_on[node] and allowed[node] and free_g[node] >= base_g and free_c[node] >= base_c
        if ok and not _among(out_node, n_big, node):
            out_node[k] = node
            k += 1
    for k in range(n_nodes):
        out_g[k], out_c[k] = base_g + (k < extra_g), base_c + (k < extra_c)
    return True


@compiled
def _among(nodes, n, node):
    for k in range(n):  # noqa: SIM110 - numba compiles no generator expression
        if nodes[k] == node:
            return True
    return False


def nodes_needed(cl: Cluster, partition: int, gpus: int, cpus: int, nodes: int) -> int:
    """The job's node count: as asked, else the fewest of the partition's largest nodes that hold its GPUs."""
    if nodes > 0:
        return nodes
    part = cl.part_nodes[cl.part_ptr[partition] : cl.part_ptr[partition + 1]]
    sizes = cl.node_gpus[part] if gpus > 0 else cl.node_cpus[part]
    most = int(sizes.max()) if len(sizes) else 0
    need = gpus if gpus > 0 else cpus
    return max(1, -(-need // max(most, 1)))


def fits_empty(cl: Cluster, partition: int, gpus: int, cpus: int, nodes: int) -> bool:
    """Whether the job could run on its partition when every node is free."""
    out = np.zeros(nodes, dtype=np.int64)
    every = np.ones(len(cl.node_gpus), dtype=np.bool_)
    return bool(place(cl, cl.node_gpus, cl.node_cpus, partition, gpus, cpus, nodes, every, out, out.copy(), out.copy()))
