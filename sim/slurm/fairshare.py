"""Fair-share as priority/multifactor computes it: the association tree, decayed usage, Fair Tree's ranks and the
classic 2^(-usage/shares) factor.

Usage is accrued per user association and counted in every account above it (an account's usage is the sum of
its users', since decay multiplies all alike). Fair Tree (fair_tree.c) ranks the users by a depth-first walk of
the tree, siblings sorted by level fair-share S/U (S: shares over the siblings' shares, U: usage over the
parent's usage), users before accounts on ties; a user's factor is its rank over the number of user associations.
Sibling accounts tied on S/U are not merged: Slurm's `_count_tied_accounts` stops at the first account it meets,
so a tied account starts its own walk tied with the previous sibling (as Slurm does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analytics.slurm_config import ROOT, AssocSpec
from sim.slurm.jit import compiled


@dataclass(frozen=True)
class AssocTree:
    """The association tree: node 0 is root; accounts and user associations with their raw shares."""

    names: tuple[str, ...]  # "root", "<account>", "<account>/<user>"
    parent: tuple[int, ...]  # -1 for root
    is_user: tuple[bool, ...]
    shares: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]
    users: tuple[int, ...]  # node index of each user association, in the order of user_key
    user_key: tuple[tuple[str, str], ...]  # (account, user) of each user association
    chains: tuple[tuple[int, ...], ...]  # each user association and every account above it, up to root
    sibling_shares: tuple[int, ...]  # the raw shares of each node and its siblings together

    def user_index(self, account: str, user: str) -> int:
        """The index (into users) of the association of user in account."""
        return self.user_key.index((account, user))

    def level_shares(self, node: int) -> int:
        """The raw shares of node and its siblings together."""
        return self.sibling_shares[node]


def build_tree(assocs: tuple[AssocSpec, ...], job_pairs: list[tuple[str, str]]) -> tuple[AssocTree, list[str]]:
    """The tree of the configured associations plus, for each (account, user) of a job that has none, a user
    association of 1 share (under a new account of 1 share below root when the account is not configured too);
    returns it and a note per association added."""
    accounts: dict[str, tuple[str, int]] = {ROOT: ("", 1)}
    users: dict[tuple[str, str], int] = {}
    for a in assocs:
        if a.user:
            users[(a.account, a.user)] = a.shares
        elif a.account != ROOT:
            accounts[a.account] = (a.parent or ROOT, a.shares)
    notes = []
    for account, user in dict.fromkeys(job_pairs):
        if account not in accounts:
            accounts[account] = (ROOT, 1)
            notes.append(f"account {account!r} is not in the configuration: added below root with 1 share")
        if (account, user) not in users:
            users[(account, user)] = 1
            notes.append(f"user {user!r} has no association in account {account!r}: added with 1 share")
    return _tree(accounts, users), notes


def _tree(accounts: dict[str, tuple[str, int]], users: dict[tuple[str, str], int]) -> AssocTree:
    names, parent, is_user, shares = [ROOT], [-1], [False], [1]
    index = {ROOT: 0}
    for account in _top_down(accounts):
        index[account] = len(names)
        names.append(account)
        parent.append(index[accounts[account][0]])
        is_user.append(False)
        shares.append(accounts[account][1])
    user_nodes = []
    for account, user in users:
        user_nodes.append(len(names))
        names.append(f"{account}/{user}")
        parent.append(index[account])
        is_user.append(True)
        shares.append(users[(account, user)])
    children: list[list[int]] = [[] for _ in names]
    for node, p in enumerate(parent):
        if p >= 0:
            children[p].append(node)
    chains = []
    for node in user_nodes:
        chain = []
        while node >= 0:
            chain.append(node)
            node = parent[node]
        chains.append(tuple(chain))
    return AssocTree(
        tuple(names),
        tuple(parent),
        tuple(is_user),
        tuple(shares),
        tuple(tuple(c) for c in children),
        tuple(user_nodes),
        tuple(users),
        tuple(chains),
        tuple(shares[n] if p < 0 else sum(shares[c] for c in children[p]) for n, p in enumerate(parent)),
    )


def _top_down(accounts: dict[str, tuple[str, int]]) -> list[str]:
    """The accounts below root, each after its parent (ValueError on a cycle or an unknown parent)."""
    order: list[str] = []
    placed = {ROOT}
    pending = [a for a in accounts if a != ROOT]
    while pending:
        ready = [a for a in pending if accounts[a][0] in placed]
        if not ready:
            raise ValueError(f"accounts {', '.join(sorted(pending))} have no path to root")
        order += ready
        placed.update(ready)
        pending = [a for a in pending if a not in placed]
    return order


def decay_per_s(half_life_s: int) -> float:
    """Slurm's per-second decay factor 1 - 0.693 / half-life (1: no decay)."""
    return 1.0 - 0.693 / half_life_s if half_life_s > 0 else 1.0


@compiled
def node_usage(tt, user_usage):
    """Every node's usage: its users' usage added in user order (so every implementation rounds alike)."""
    out = np.zeros(len(tt.parent))
    for u in range(len(tt.users)):
        for i in range(tt.chain_ptr[u], tt.chain_ptr[u + 1]):
            out[tt.chains[i]] += user_usage[u]
    return out


@compiled
def level_fairshare(tt, usage):
    """Every node's level fair-share S/U (S: its shares over its siblings', U: its usage over its parent's; 0 without
    shares, infinite without usage)."""
    out = np.zeros(len(tt.parent))
    for node in range(1, len(tt.parent)):
        parent_usage = usage[tt.parent[node]]
        u = usage[node] / parent_usage if parent_usage > 0 else 0.0
        level = tt.sibling_shares[node]
        s = tt.shares[node] / level if level > 0 else 0.0
        out[node] = 0.0 if s == 0 else (s / u if u > 0 else np.inf)
    return out


@compiled
def fair_tree_factors(tt, user_usage):
    """Each user association's Fair Tree factor (rank / user associations) for the users' usage: a depth-first walk
    of the tree, siblings by level fair-share (users before accounts on ties, then in tree order)."""
    lf = level_fairshare(tt, node_usage(tt, user_usage))
    order = _siblings_in_order(tt, lf)
    n_users = len(tt.users)
    factor = np.zeros(len(tt.parent))
    rank = rnt = n_users
    # the walk's frames: the account being walked, the next of its children, its first child's tie, the last lf
    account = np.zeros(len(tt.parent), dtype=np.int64)
    pos = np.zeros(len(tt.parent), dtype=np.int64)
    tied_in = np.zeros(len(tt.parent), dtype=np.bool_)
    prev = np.zeros(len(tt.parent))
    depth = 1
    while depth > 0:
        top = depth - 1
        a, i = account[top], pos[top]
        if i == tt.child_ptr[a + 1] - tt.child_ptr[a]:
            depth -= 1
            continue
        node = order[tt.child_ptr[a] + i]
        pos[top] += 1
        tied = tied_in[top] if i == 0 else prev[top] == lf[node]
        prev[top] = lf[node]
        if tt.is_user[node]:
            if not tied:
                rank = rnt
            factor[node] = rank / n_users
            rnt -= 1
        else:
            account[depth], pos[depth], tied_in[depth] = node, 0, tied
            depth += 1
    return factor[tt.users]


@compiled
def _siblings_in_order(tt, lf):
    """The children of every node (CSR as tt's) sorted by level fair-share (highest first), users first on ties,
    then by node."""
    order = tt.children.copy()
    for a in range(len(tt.parent)):
        lo, hi = tt.child_ptr[a], tt.child_ptr[a + 1]
        if hi - lo > 1:
            kids = tt.children[lo:hi]
            by_kind = kids[np.argsort((~tt.is_user[kids]).astype(np.int64), kind="mergesort")]
            order[lo:hi] = by_kind[np.argsort(-lf[by_kind], kind="mergesort")]
    return order


@compiled
def classic_factors(tt, user_usage, dampening):
    """Each user association's classic factor 2^(-(effective usage / normalised shares) / dampening)."""
    usage = node_usage(tt, user_usage)
    total = usage[0]
    n = len(tt.parent)
    norm = np.zeros(n)
    if total > 0:
        norm = np.minimum(usage / total, 1.0)
    shares_norm = np.ones(n)
    efctv = np.zeros(n)
    efctv[0] = 1.0
    for node in range(1, n):  # nodes are numbered parents first
        p = tt.parent[node]
        level = tt.sibling_shares[node]
        share = tt.shares[node] / level if level else 0.0
        shares_norm[node] = shares_norm[p] * share
        if p == 0:
            efctv[node] = norm[node]
        elif level:
            efctv[node] = norm[node] + (efctv[p] - norm[node]) * share
        else:
            efctv[node] = efctv[p]
    out = np.zeros(len(tt.users))
    for k in range(len(tt.users)):
        u = tt.users[k]
        if shares_norm[u] > 0:
            out[k] = 2.0 ** (-(efctv[u] / shares_norm[u]) / dampening)
    return out
