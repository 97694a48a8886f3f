"""The cables Nmodc's shares by capacity count
(:func:`~smroute.routing.nmodc.slot_tables.capacity_tables`): per port group,
its cables up to the usual count between its two ranks, and the switches
whose groups count unequal cables (a parallel cable lost).  Pure functions
on arrays."""

from __future__ import annotations

from weakref import WeakKeyDictionary

import numpy as np

from smroute.routing.topology import SwitchGraph

__all__ = ["counted_cables", "most_common", "structural_shares", "unequal_cables",
           "usual_cables"]


#: :func:`usual_cables` per graph (a frozen graph's: the kernel's blocks
#: read it once per worker)
_USUAL: WeakKeyDictionary[SwitchGraph, np.ndarray] = WeakKeyDictionary()


def usual_cables(g: SwitchGraph) -> np.ndarray:
    """``(G,)`` int64: the usual cable count of each port group, the most
    common count (ties: the larger) of the groups between the ranks of its
    two switches, or the count of every group between its upper switch and
    the switches of its lower switch's rank: a spine cabled twice to every
    leaf beside spines cabled once counts two, and they one.  The latter
    only where every upper switch is cabled alike to each switch of that
    lower rank: a cable lost or added anywhere there counts every group of
    the rank as the ranks usually do (the shares of every leaf then stay as
    they were, no leaf sending a destination more than its leaf's cables
    down from a spine can take).  A group between two switches of one rank
    takes its own switch as the upper one."""
    if g in _USUAL:
        return _USUAL[g]
    cnt = g.grp_port_count.astype(np.int64)
    if cnt.max(initial=0) <= 1:  # no parallel cables: one each
        return cnt
    top = int(g.rank.max(initial=-1)) + 2
    rs, rr = g.rank[g.grp_switch] + 1, g.rank[g.grp_remote] + 1
    ranks = most_common(rs * top + rr, cnt, top * top)[rs * top + rr]
    up = rr > rs
    upper = np.where(up, g.grp_remote, g.grp_switch).astype(np.int64)
    key = upper * top + np.where(up, rs, rr)
    n_keys = len(g.rank) * top  # (a kernel's graph has no switch nodes)
    at_upper = most_common(key, cnt, n_keys)[key]
    # the upper switches' counts only where each is cabled alike to every
    # switch of the lower rank
    lower = np.where(up, rs, rr)
    odd = np.bincount(lower, weights=cnt != at_upper, minlength=top) > 0
    usual = np.where(odd[lower], ranks, at_upper)
    usual.flags.writeable = False
    _USUAL[g] = usual
    return usual


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
    return np.minimum(cnt, usual_cables(g))


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


def structural_shares(g: SwitchGraph) -> np.ndarray:
    """``(S,)`` bool: the switches whose up groups (every group not going
    down) keep their usual cable counts (:func:`usual_cables`) and count
    unequal cables: a leaf cabled twice to some spines and once to others.
    Their shares by capacity give each cable its own table entries
    (:func:`~smroute.routing.nmodc.slot_tables.capacity_tables`), which
    the even up cables keep."""
    if g.grp_port_count.max(initial=0) <= 1:  # (no parallel cables: none)
        return np.zeros(len(g.rank), dtype=bool)
    not_down = g.rank[g.grp_remote] >= g.rank[g.grp_switch]
    short = not_down & (g.grp_port_count < usual_cables(g))
    lost = np.bincount(g.grp_switch[short], minlength=len(g.rank)) > 0
    return unequal_cables(g, not_down) & ~lost
