"""The switches' leaves, ranks and tree shape for
:func:`~smroute.fabric.roles.fabric_roles` (its module doc says the rules):
which host-carrying switches are upper ones, every switch's rank, and
whether Dmodc can treat the fabric as a tree."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from smroute.fabric.graph import bfs_distance, shared_neighbours

__all__ = ["switch_ranks", "tree_check", "upper_leaves"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def switch_ranks(n: int, src: IntArray, dst: IntArray, leaf: BoolArray) -> IntArray:
    """``(N,)`` int64: every switch's BFS distance from the ``leaf`` switches
    (-1: none reached), but for a leaf hanging off upper switches alone
    (:mod:`smroute.fabric.roles`): its switches are ranked from the other
    leaves, where that puts none of them above the top, and it keeps rank 0
    (its cables skip ranks)."""
    rank = bfs_distance(n, src, dst, leaf)
    # per switch, its distinct leaf neighbours; a leaf whose every switch
    # neighbour has it as its only leaf neighbour hangs off upper switches
    pairs = np.unique(np.stack([src, dst], axis=1)[leaf[src] & ~leaf[dst]], axis=0)
    if not len(pairs):
        return rank
    n_leaves = np.bincount(pairs[:, 1], minlength=n)
    hanging = np.zeros(n, dtype=bool)
    hanging[pairs[:, 0]] = True
    np.logical_and.at(hanging, pairs[:, 0], n_leaves[pairs[:, 1]] == 1)
    if not hanging.any() or not (leaf & ~hanging).any():
        return rank
    other = bfs_distance(n, src, dst, leaf & ~hanging)
    lifted = np.zeros(n, dtype=bool)
    lifted[pairs[:, 1][hanging[pairs[:, 0]]]] = True
    top = int(rank.max())
    if (other[lifted] < 2).any() or (other[lifted] > top).any():
        return rank  # (a leaf of its own pod, or one its switches would put above the top)
    other[hanging] = 0
    return other


def upper_leaves(n: int, la: IntArray, lb: IntArray, leaf: BoolArray,
                 hosts: IntArray) -> BoolArray:
    """``(N,)`` bool: the ``leaf`` switches that are upper ones (:mod:`smroute.fabric.roles`)."""
    lv = np.flatnonzero(leaf)
    out = np.zeros(n, dtype=bool)
    weak = lv[2 * hosts[lv] < np.median(hosts[lv])] if len(lv) >= 3 else lv[:0]
    if len(weak):
        most, deg = shared_neighbours(n, la, lb, weak, np.setdiff1d(lv, weak))
        out[weak[(deg > 0) & (2 * most <= deg)]] = True
    return out


def tree_check(
    rank: IntArray, leaf: BoolArray, hosts: IntArray, is_sw: BoolArray,
    la: IntArray, lb: IntArray,
) -> tuple[bool, str]:
    """Whether Dmodc can treat the fabric as a tree, and why not."""
    n_leaves = int(leaf.sum())
    if n_leaves == 0:
        return False, "no switch carries an end-port"
    max_rank = int(rank.max())
    if max_rank == 0:
        if n_leaves > 1 and bool((leaf[la] & leaf[lb]).any()):
            return False, (f"no switch above the {n_leaves} leaf switches, which are linked to "
                           "each other (hosts on every switch)")
        return True, ""
    top = is_sw & (rank == max_rank)
    if bool((hosts[top] > 0).all()):
        return False, f"hosts on every level (every switch of the top rank {max_rank} has hosts)"
    return True, ""
