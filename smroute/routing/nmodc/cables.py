"""The cables Nmodc's shares by capacity count
(:func:`~smroute.routing.nmodc.slot_tables.capacity_tables`): per port group,
its cables up to the usual count between its two ranks, and the switches
whose groups count unequal cables (a parallel cable lost).  Pure functions
on arrays."""

from __future__ import annotations

import numpy as np

from smroute.routing.topology import SwitchGraph

__all__ = ["counted_cables", "most_common", "unequal_cables", "usual_cables"]


def usual_cables(g: SwitchGraph) -> np.ndarray:
    """``(R + 1, R + 1)`` int64, ``R`` the highest rank: ``[a + 1, b + 1]``
    is the most common cable count of the port groups from a switch of rank
    ``a`` to one of rank ``b`` (ties: the larger; 0: no such group)."""
    top = int(g.rank.max(initial=-1)) + 2
    pair = (g.rank[g.grp_switch] + 1) * top + g.rank[g.grp_remote] + 1
    return most_common(pair, g.grp_port_count.astype(np.int64), top * top).reshape(top, top)


def most_common(key: np.ndarray, value: np.ndarray, n_keys: int) -> np.ndarray:
    """``(n_keys,)`` int64: per key (``key`` ``(N,)`` int64 in ``0 ..
    n_keys - 1``) the most common of its ``value`` ``(N,)`` int64 ``>= 0``
    (ties: the larger; 0 for a key without values)."""
    out = np.zeros(n_keys, dtype=np.int64)
    if not len(value):
        return out
    hi = int(value.max()) + 1
    keys, n = np.unique(key * hi + value, return_counts=True)
    kk, kv = keys // hi, keys % hi
    o = np.lexsort((kv, n, kk))  # per key: the most common value last
    last = np.r_[kk[o][1:] != kk[o][:-1], True]
    out[kk[o][last]] = kv[o][last]
    return out


def counted_cables(g: SwitchGraph) -> np.ndarray:
    """``(G,)`` int64: the cables of each port group that the shares by
    capacity count: all of them, up to the usual count of its ranks
    (:func:`usual_cables`).  Cables added to some pairs leave every group
    its usual count, and Dmodc's table already spreads a switch's
    destinations evenly over the usual cables: sharing by capacity there
    would move destinations off their nominal group for no lower load than
    a complete tree's, and cost the shifts in topological order their
    exactness (leaf/spine, 2 cables per pair and 7 pairs with 3: shift HSD
    in host-name order 2.76 as Dmodc, 5.44 shared).  A group below its
    usual count lost a cable."""
    cnt = g.grp_port_count.astype(np.int64)
    if cnt.max(initial=0) <= 1:  # no parallel cables
        return cnt
    usual = usual_cables(g)
    return np.minimum(cnt, usual[g.rank[g.grp_switch] + 1, g.rank[g.grp_remote] + 1])


def unequal_cables(g: SwitchGraph, groups: np.ndarray,
                   counted: np.ndarray | None = None) -> np.ndarray:
    """``(S,)`` bool: the switches whose ``groups`` (a ``(G,)`` bool mask or
    group ids; e.g. their up groups) have unequal cable counts as the
    shares count them (``counted``, default :func:`counted_cables`): a
    parallel cable lost."""
    n = len(g.rank)  # (a kernel's graph has no switch nodes)
    cab = counted_cables(g) if counted is None else counted
    sw, cnt = g.grp_switch[groups], cab[groups]
    if not len(cnt) or cnt.min() == cnt.max():  # (every group alike: none unequal)
        return np.zeros(n, dtype=bool)
    hi = np.zeros(n, dtype=np.int64)
    lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.maximum.at(hi, sw, cnt)
    np.minimum.at(lo, sw, cnt)
    return lo < hi
