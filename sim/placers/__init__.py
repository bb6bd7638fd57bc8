"""Placers: given a VC's nodes and a GPU count, choose nodes or return None; registered by name.

`consolidate` and `first-fit` are the artifact's `consolidate` and (misnamed) `random` placers, with its exact tie
rules (spec §4, §4.1.2); `random` is a truly random, seeded placer. A placer never changes the nodes: the caller
allocates the returned allocation. Each refuses a job needing more GPUs than are free before anything else (the
engine's backfilling relies on it: such a job is not offered, and a random placer must not draw for it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim.cluster import Allocation, VCNodes

Placer = Callable[[VCNodes, int], Allocation | None]


def consolidate(vc: VCNodes, gpu_num: int) -> Allocation | None:
    """Best fit on one node for small jobs, else whole free nodes plus one node for the remainder (artifact rules)."""
    if gpu_num > vc.free_gpus:
        return None
    per_node = vc.gpus_per_node
    if gpu_num <= per_node:
        for free in range(gpu_num, per_node + 1):  # tightest fit first, lowest node index among equals
            if vc.by_free[free]:
                return ((vc.by_free[free][0], gpu_num),)
        return None
    return _whole_nodes(vc, gpu_num)


def _whole_nodes(vc: VCNodes, gpu_num: int) -> Allocation | None:
    """Whole free nodes in index order, then the remainder on the next node of the artifact's descending walk."""
    per_node = vc.gpus_per_node
    full, rem = divmod(gpu_num, per_node)
    full_nodes = vc.by_free[per_node]
    if len(full_nodes) < full:
        return None
    alloc = [(n, per_node) for n in full_nodes[:full]]
    if rem == 0:
        return tuple(alloc)
    if len(full_nodes) > full:
        return (*alloc, (full_nodes[full], rem))
    for free in range(per_node - 1, 0, -1):  # the most free partial node, lowest index among equals
        if vc.by_free[free]:
            return (*alloc, (vc.by_free[free][0], rem)) if free >= rem else None
    return None


def first_fit(vc: VCNodes, gpu_num: int) -> Allocation | None:
    """Fill nodes in index order, min(free, still needed) each; a job may span any number of nodes."""
    if gpu_num > vc.free_gpus:
        return None
    return _fill(vc.free, np.arange(vc.n_nodes), gpu_num)


def _fill(free: np.ndarray, order: np.ndarray, gpu_num: int) -> Allocation:
    taken = free[order]
    cum = np.cumsum(taken)
    last = int(np.searchsorted(cum, gpu_num))
    alloc = []
    need = gpu_num
    for k in range(last + 1):
        gpus = int(min(taken[k], need))
        if gpus > 0:
            alloc.append((int(order[k]), gpus))
            need -= gpus
    return tuple(alloc)


class RandomPlacer:
    """A truly random placer: visits the nodes in a fresh seeded random order and fills them."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def __call__(self, vc: VCNodes, gpu_num: int) -> Allocation | None:
        if gpu_num > vc.free_gpus:
            return None
        return _fill(vc.free, self.rng.permutation(vc.n_nodes), gpu_num)


PLACERS: dict[str, Callable[[int], Placer]] = {
    "consolidate": lambda seed: consolidate,
    "first-fit": lambda seed: first_fit,
    "random": lambda seed: RandomPlacer(seed),
}


def get(name: str, seed: int = 0) -> Placer:
    """The placer registered as name (seeded when it is random), or ValueError naming the choices."""
    if name not in PLACERS:
        raise ValueError(f"unknown placer {name!r}; expected one of {', '.join(PLACERS)}")
    return PLACERS[name](seed)
