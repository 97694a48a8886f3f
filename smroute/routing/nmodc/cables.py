"""The cables Nmodc's shares by capacity count
(:func:`~smroute.routing.nmodc.slot_tables.capacity_tables`): per port group,
its cables up to its usual count, the switches whose groups count unequal
cables (a parallel cable lost), those that lost a cable up, and the cables
down to them.  Pure functions on arrays."""

from __future__ import annotations

import functools
from collections.abc import Callable
from weakref import WeakKeyDictionary

import numpy as np

from smroute.routing.topology import SwitchGraph

__all__ = ["BELOW_RANKS_SHARE", "OWN_COUNT_SHARE", "cables_down", "counted_cables", "lost_up",
           "most_common", "structural_shares", "unequal_cables", "usual_cables"]


def _per_graph(f: Callable[[SwitchGraph], np.ndarray]) -> Callable[[SwitchGraph], np.ndarray]:
    """``f`` computed once per graph (a frozen graph's: the kernel's blocks
    read it once per worker), read-only."""
    memo: WeakKeyDictionary[SwitchGraph, np.ndarray] = WeakKeyDictionary()

    @functools.wraps(f)
    def once(g: SwitchGraph) -> np.ndarray:
        if g not in memo:
            out = f(g)
            out.flags.writeable = False
            memo[g] = out
        return memo[g]
    return once


#: An upper switch counts its own cables to a rank below where at least
#: this share of its groups there have its largest count (the others lost
#: cables, or were cabled once later): a spine cabled twice to every leaf,
#: two cut, still counts two; cabled twice to 16 leaves and once to 8
#: added later, two (at three in four, the ranks' one: RP 6 against nue's
#: 5 there, `research/mixed-sites.md`).
OWN_COUNT_SHARE = 0.5

#: A count below the ranks' usual one is an upper switch's own only where
#: at least this share of the rank's upper switches have it too (old
#: spines beside bigger new ones); a lone one lost cables.
BELOW_RANKS_SHARE = 0.25


@_per_graph
def usual_cables(g: SwitchGraph) -> np.ndarray:
    """``(G,)`` int64: the usual cable count of each port group.  Its upper
    switch's own count to the rank of the lower switch, the largest count
    of its groups there, where at least :data:`OWN_COUNT_SHARE` of them
    have it (a spine cabled twice to every leaf beside spines cabled once
    counts two, and they one; a group below it lost cables), and, where
    that is below the ranks' count, at least :data:`BELOW_RANKS_SHARE` of
    the rank's upper switches have it too; else the ranks' count, the most
    common (ties: the larger) of the groups between the ranks of its two
    switches (a spine that lost cables to most leaves: the shares then
    count as the ranks usually do).  A group between two switches of one
    rank takes its own switch as the upper one."""
    cnt = g.grp_port_count.astype(np.int64)
    if cnt.max(initial=0) <= 1:  # no parallel cables: one each
        return cnt
    top = int(g.rank.max(initial=-1)) + 2
    rs, rr = g.rank[g.grp_switch] + 1, g.rank[g.grp_remote] + 1
    ranks = most_common(rs * top + rr, cnt, top * top)[rs * top + rr]
    up = rr > rs
    upper = np.where(up, g.grp_remote, g.grp_switch).astype(np.int64)
    lower = np.where(up, rs, rr)
    key = upper * top + lower
    n_keys = len(g.rank) * top  # (a kernel's graph has no switch nodes)
    hi = np.zeros(n_keys, dtype=np.int64)
    np.maximum.at(hi, key, cnt)
    own = hi[key]
    agree = np.bincount(key, weights=cnt == own, minlength=n_keys)
    ok = agree[key] >= OWN_COUNT_SHARE * np.bincount(key, minlength=n_keys)[key]
    # the upper switches of each lower rank, and of each own count there
    first = np.unique(key, return_index=True)[1]
    n_upper = np.bincount(lower[first], minlength=top)
    width = int(own.max()) + 1
    same = np.bincount(lower[first] * width + own[first], minlength=top * width)
    ok &= (own >= ranks) | (same[lower * width + own] >= BELOW_RANKS_SHARE * n_upper[lower])
    return np.where(ok, own, ranks)


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


@_per_graph
def lost_up(g: SwitchGraph) -> np.ndarray:
    """``(S,)`` bool: the switches with a group up (to a switch of a higher
    rank) below its usual count (:func:`usual_cables`): a parallel cable
    lost."""
    if g.grp_port_count.max(initial=0) <= 1:  # (no parallel cables: none)
        return np.zeros(len(g.rank), dtype=bool)
    up = g.rank[g.grp_remote] > g.rank[g.grp_switch]
    short = up & (g.grp_port_count < usual_cables(g))
    return np.bincount(g.grp_switch[short], minlength=len(g.rank)) > 0


def cables_down(g: SwitchGraph, targets: np.ndarray, groups: np.ndarray,
                counted: np.ndarray) -> np.ndarray:
    """``(len(targets) * B, W)`` int64, target-major: the cables each of
    ``groups`` ``(B, W)`` (group ids) carries on towards each of
    ``targets`` (switch ids): its own as ``counted`` (``(G,)``,
    :func:`counted_cables`), at most those its remote switch has down to
    the target, where it has a group down to it."""
    down = np.zeros((len(targets), len(g.rank)), dtype=np.int64)
    at = np.full(len(g.rank), -1)
    at[targets] = np.arange(len(targets))
    sel = np.flatnonzero((at[g.grp_remote] >= 0)
                         & (g.rank[g.grp_switch] > g.rank[g.grp_remote]))
    down[at[g.grp_remote[sel]], g.grp_switch[sel]] = counted[sel]
    own = counted[groups][None]
    dn = down[:, g.grp_remote[groups]]  # (T, B, W)
    return np.where(dn > 0, np.minimum(own, dn), own).reshape(-1, groups.shape[1])


@_per_graph
def structural_shares(g: SwitchGraph) -> np.ndarray:
    """``(S,)`` bool: the switches whose up groups (every group not going
    down) count unequal cables (:func:`counted_cables`) where some switch
    of their rank keeps its usual counts (:func:`usual_cables`) so: leaves
    cabled twice to some spines and once to others, those that lost a cable
    included.  Their shares by capacity give each cable its own table
    entries (:func:`~smroute.routing.nmodc.slot_tables.capacity_tables`),
    which the even up cables keep.  Where no switch of the rank keeps its
    usual counts so, none (a lost parallel cable alone: shares by capacity,
    Dmodc's table with the fewest entries moved; grown cores above leaves
    cabled twice to each spine: the leaves' all-to-all risk 14 to 18 with
    one entry per cable on a leaf that lost one)."""
    if g.grp_port_count.max(initial=0) <= 1:  # (no parallel cables: none)
        return np.zeros(len(g.rank), dtype=bool)
    not_down = g.rank[g.grp_remote] >= g.rank[g.grp_switch]
    short = not_down & (g.grp_port_count < usual_cables(g))
    lost = np.bincount(g.grp_switch[short], minlength=len(g.rank)) > 0
    unequal = unequal_cables(g, not_down)
    kept = np.bincount(g.rank[unequal & ~lost], minlength=int(g.rank.max(initial=0)) + 1) > 0
    return unequal & kept[g.rank]
