"""The switches' leaves, ranks and tree shape for
:func:`~smroute.fabric.roles.fabric_roles` (its module doc says the rules):
which host-carrying switches are upper ones, every switch's rank, and
whether Dmodc can treat the fabric as a tree."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from smroute.fabric.graph import bfs_distance, components, shared_neighbours

__all__ = ["switch_ranks", "tree_check", "upper_leaves"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def switch_ranks(n: int, src: IntArray, dst: IntArray, leaf: BoolArray,
                 hosts: IntArray) -> tuple[IntArray, BoolArray]:
    """``(rank, apart)``: ``(N,)`` int64, every switch's BFS distance from the
    ``leaf`` switches (-1: none reached), but for a leaf hanging off upper
    switches alone (:mod:`smroute.fabric.roles`): its switches are ranked
    from the other leaves, where that puts none of them above the top, and
    it keeps rank 0 (its cables skip ranks); not where such leaves carry
    as many hosts as the others (a director whose line ASICs have one leaf
    each).  Where that puts cables within
    a rank, the ranks from the leaves of one side (:func:`_sides`), the
    others at 0, are taken instead if they put none: of the two sides, the
    one whose top switches reach the larger share of the hosts down
    (:func:`_below_tops`), then the one with more hosts.  ``apart`` ``(N,)``
    bool: the leaves kept at 0 that the others are not ranked from."""
    rank, seeds = _hanging(n, src, dst, leaf, hosts)
    if not _within(rank, src, dst):
        return rank, leaf & ~seeds
    best: tuple[tuple[float, int], IntArray, BoolArray] | None = None
    for side in _sides(n, src, dst, leaf):
        other = bfs_distance(n, src, dst, side)
        other[leaf] = 0
        if _within(other, src, dst) or ((other >= 0) != (rank >= 0)).any():
            continue
        score = (_below_tops(src, dst, other, leaf, hosts), int(hosts[side].sum()))
        if best is None or score > best[0]:
            best = (score, other, side)
    if best is not None:
        rank, seeds = best[1], best[2]
    return rank, leaf & ~seeds


def _within(rank: IntArray, src: IntArray, dst: IntArray) -> bool:
    """Whether a cable joins two switches of one rank."""
    return bool(((rank[src] == rank[dst]) & (rank[src] >= 0)).any())


def _hanging(n: int, src: IntArray, dst: IntArray, leaf: BoolArray,
             hosts: IntArray) -> tuple[IntArray, BoolArray]:
    """:func:`switch_ranks` with the leaves hanging off upper switches alone,
    and the leaves it ranks from."""
    rank = bfs_distance(n, src, dst, leaf)
    # per switch, its distinct leaf neighbours; a leaf whose every switch
    # neighbour has it as its only leaf neighbour hangs off upper switches
    pairs = np.unique(np.stack([src, dst], axis=1)[leaf[src] & ~leaf[dst]], axis=0)
    if not len(pairs):
        return rank, leaf
    n_leaves = np.bincount(pairs[:, 1], minlength=n)
    hanging = np.zeros(n, dtype=bool)
    hanging[pairs[:, 0]] = True
    np.logical_and.at(hanging, pairs[:, 0], n_leaves[pairs[:, 1]] == 1)
    if not hanging.any() or not (leaf & ~hanging).any():
        return rank, leaf
    if hosts[leaf & hanging].sum() >= hosts[leaf & ~hanging].sum():
        return rank, leaf  # (most hosts hang so: a director's line ASICs with one leaf each)
    other = bfs_distance(n, src, dst, leaf & ~hanging)
    lifted = np.zeros(n, dtype=bool)
    lifted[pairs[:, 1][hanging[pairs[:, 0]]]] = True
    top = int(rank.max())
    if (other[lifted] < 2).any() or (other[lifted] > top).any():
        return rank, leaf  # (a leaf of its own pod, or one its switches would put above the top)
    other[hanging] = 0
    return other, leaf & ~hanging


def _sides(n: int, src: IntArray, dst: IntArray, leaf: BoolArray) -> list[BoolArray]:
    """Where the switch graph has two sides (every cable joins them: no odd
    cycle) and the leaves sit on both, the leaves of each side; else none.
    BFS ranks from leaves of both sides must put cables within a rank
    (their distances differ in parity), from one side's never: a chassis of
    three stages whose leaves sit at different depths, storage leaves or a
    site's first leaves cabled to the directors above a three-level tree."""
    label = components(n, src, dst)
    side = bfs_distance(n, src, dst, np.flatnonzero(label == np.arange(n))) % 2
    if (side[src] == side[dst]).any():
        return []  # an odd cycle: no two sides
    sides = [leaf & (side == k) for k in (0, 1)]
    return sides if all(s.any() for s in sides) else []


def _below_tops(src: IntArray, dst: IntArray, rank: IntArray, leaf: BoolArray,
                hosts: IntArray) -> float:
    """The share of the hosts below (a path down from) each switch of the
    top rank of ``rank``, averaged over those switches: 1 where every top
    switch reaches every leaf down."""
    ranked = np.flatnonzero(rank >= 0)
    at = np.full(len(rank), -1, dtype=np.int64)
    at[ranked] = np.arange(len(ranked))
    lv = np.flatnonzero(leaf)
    below = np.zeros((len(ranked), len(lv)), dtype=bool)  # (ranked switches, leaves)
    below[at[lv], np.arange(len(lv))] = True
    for r in range(1, int(rank.max()) + 1):
        sel = (rank[dst] == r) & (rank[src] >= 0) & (rank[src] < r)
        np.logical_or.at(below, at[dst[sel]], below[at[src[sel]]])
    w = hosts[lv].astype(np.float64)
    return float((below[at[rank == rank.max()]] @ w).mean() / max(w.sum(), 1.0))


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
