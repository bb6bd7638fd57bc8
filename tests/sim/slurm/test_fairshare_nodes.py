"""Fair-share factors and the node pool of the Slurm model, against hand-worked cases."""

import numpy as np
import pytest

from analytics.slurm_config import AssocSpec, NodeSpec, PartitionSpec, SlurmConfig
from sim.slurm.fairshare import build_tree, classic_factors, decay_per_s, fair_tree_factors
from sim.slurm.nodes import nodes_needed, place, shares
from sim.slurm.tables import cluster_table, tree_table

ASSOCS = (
    AssocSpec("a", shares=3),
    AssocSpec("b", shares=1),
    AssocSpec("a", "u1"),
    AssocSpec("a", "u2"),
    AssocSpec("b", "u3"),
)


def test_tree_adds_missing_associations_with_notes():
    tree, notes = build_tree(ASSOCS, [("a", "u1"), ("c", "u9")])
    assert ("c", "u9") in tree.user_key
    assert len(notes) == 2 and "'c'" in notes[0]


def test_fair_tree_ranks_users_by_level_fairshare():
    tree, _ = build_tree(ASSOCS, [])
    usage = np.zeros(len(tree.users))
    usage[tree.user_index("a", "u1")] = 100.0  # a: S=0.75, U=1 -> 0.75; b: S=0.25, U=0 -> inf
    factors = fair_tree_factors(tree_table(tree), usage)
    i1, i2, u3 = tree.user_index("a", "u1"), tree.user_index("a", "u2"), tree.user_index("b", "u3")
    assert factors[u3] == pytest.approx(1.0)  # b's only user ranks first
    assert factors[i2] == pytest.approx(2 / 3)  # a's unused user next
    assert factors[i1] == pytest.approx(1 / 3)  # the heavy user last


def test_fair_tree_ties_share_a_rank():
    tree, _ = build_tree(ASSOCS, [])
    factors = fair_tree_factors(tree_table(tree), np.zeros(len(tree.users)))
    i1, i2 = tree.user_index("a", "u1"), tree.user_index("a", "u2")
    assert factors[i1] == factors[i2]


def test_classic_factor_halves_at_fair_usage():
    tree, _ = build_tree((AssocSpec("a"), AssocSpec("b"), AssocSpec("a", "u1"), AssocSpec("b", "u2")), [])
    usage = np.array([1.0, 1.0])  # each account used its half
    factors = classic_factors(tree_table(tree), usage, 1)
    assert factors == pytest.approx([0.5 ** (0.5 / 0.5), 0.5 ** (0.5 / 0.5)])


def test_decay_per_second():
    assert decay_per_s(0) == 1.0
    assert decay_per_s(693) == pytest.approx(0.999)


class _Pool:
    """Three nodes (8, 8 and 4 GPUs) in partitions p0 (nodes 0, 1) and p1 (1, 2), their free GPUs and CPUs."""

    def __init__(self):
        nodes = (NodeSpec("n0", 8, 8), NodeSpec("n1", 8, 8), NodeSpec("n2", 4, 4))
        parts = (PartitionSpec("p0", (0, 1)), PartitionSpec("p1", (1, 2)))
        self.cl = cluster_table(SlurmConfig(nodes=nodes, partitions=parts))
        self.free_g, self.free_c = self.cl.node_gpus.copy(), self.cl.node_cpus.copy()

    def place(self, part: int, gpus: int, cpus: int, n_nodes: int):
        out = [np.zeros(n_nodes, dtype=np.int64) for _ in range(3)]
        every = np.ones(3, dtype=np.bool_)
        if not place(self.cl, self.free_g, self.free_c, part, gpus, cpus, n_nodes, every, *out):
            return None
        return tuple(zip(*(o.tolist() for o in out), strict=True))

    def allocate(self, placement, sign: int = 1) -> None:
        for node, g, c in placement:
            self.free_g[node] -= sign * g
            self.free_c[node] -= sign * c


def test_shares_split_evenly_larger_first():
    assert shares(10, 3) == [4, 3, 3]


def test_partitions_share_nodes_and_placement_is_first_fit():
    pool = _Pool()
    first = pool.place(1, 6, 1, 1)
    assert first == ((1, 6, 1),)
    pool.allocate(first)
    assert pool.place(0, 4, 1, 1) == ((0, 4, 1),)  # node 1 is now short for p0
    assert pool.place(1, 4, 1, 1) == ((2, 4, 1),)
    assert pool.place(1, 6, 1, 1) is None
    pool.allocate(first, -1)
    assert (pool.free_g == pool.cl.node_gpus).all()


def test_multi_node_job_needs_shares_on_each_node():
    pool = _Pool()
    assert nodes_needed(pool.cl, 0, 16, 2, 0) == 2
    assert pool.place(0, 16, 2, 2) == ((0, 8, 1), (1, 8, 1))
    assert pool.place(1, 16, 2, 2) is None  # node 2 has 4 GPUs


def test_uneven_shares_go_larger_first_on_the_lowest_nodes():
    pool = _Pool()
    assert pool.place(0, 9, 3, 2) == ((0, 5, 2), (1, 4, 1))
