"""Reduced slots of Nmodc's redirects by load
(:mod:`smroute.routing.nmodc.balance`).

A leaf's nominal slot can lead closer through too few cables: its upper switch
lost up cables, or the up neighbour it would take towards a target lost
its down cable there, and it keeps at most :data:`REDUCED_SHARE` of the up
cables the leaf's best closer slot has towards that target (a DGX unit's
rail spine that lost one of its two core cables; it still leads closer to
every other rail, and every leaf below it went on sending it a quarter of
their other rails' destinations over the one cable left).  Where every
nominal slot of a leaf leads closer, such a *reduced* slot gives up the
share of its destinations it lacks the cables for: those whose redirect
digit ``r`` is below ``(1 - kept) (m - 1)``, the same destinations at
every leaf, placed as the redirected entries are.  A slot that keeps more
than that share keeps its destinations: moving a quarter of a slot's
destinations off costs the shifts more than the lighter cable gains (the
sweep of unseen fabrics, ``research/unseen-sweep.md``).

Pure functions on arrays.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import UP_PHASE, seen_cost
from smroute.routing.nmodc.cables import most_common
from smroute.routing.nmodc.keys import pair_keys
from smroute.routing.runs import runs
from smroute.routing.topology import SwitchGraph

__all__ = ["REDUCED_SHARE", "up_capacity", "kept_share", "reduced_pairs", "with_reduced",
           "switch_cables", "fewer_cables"]

#: A closer slot whose upper switch goes on up towards a target through at
#: most this share of the cables of the leaf's best closer slot, for cables
#: lost, gives up the destinations it lacks the cables for (module doc; the
#: unseen sweep's 297 variants: 48 cells better and 8 worse by the sign
#: test at a half, 49 and 13 at two thirds, 79 and 43 at any share).
REDUCED_SHARE = 0.5


def kept_share(closer: np.ndarray, cap: np.ndarray, low: np.ndarray,
               slot: np.ndarray) -> np.ndarray:
    """Per slot (axis 1 of ``closer``, ``cap``, ``low``, ``slot``) of a leaf
    whose every nominal slot (``slot``: it has it) leads closer, the share
    of the best closer slot's up cables (``cap``) its upper switch keeps,
    where that is at most :data:`REDUCED_SHARE` and the switch may have
    lost capacity (``low``, :func:`up_capacity`), else 1; float32."""
    on = closer & (cap > 0) & (closer == slot).all(axis=1, keepdims=True)
    hi = np.where(on, cap, 0).max(axis=1, keepdims=True)
    red = on & low & (cap <= REDUCED_SHARE * hi)
    out = np.ones(cap.shape, dtype=np.float32)
    out[red] = (cap / np.maximum(hi, 1))[red] if red.any() else 0
    return out


def up_capacity(g: SwitchGraph, c: np.ndarray, ups: np.ndarray,
                targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(cap, low)`` ``(U, T)``, or both ``(0, 0)`` where no upper switch
    may make a reduced slot: per upper switch ``ups`` and target, its up
    cables (0 where it goes down to it) without those to up neighbours
    that lost down cables and do not lead closer to the target (int32);
    and where these may make a reduced slot (bool): the switch has fewer
    up cables than most switches of its rank, or an up neighbour with
    fewer down cables than most of its rank, and keeps at most
    :data:`REDUCED_SHARE` of the most up cables of any of ``ups``."""
    up_g = g.rank[g.grp_remote] > g.rank[g.grp_switch]
    cab = g.grp_port_count.astype(np.int64)
    total = switch_cables(g, up=True)
    risky = up_g & fewer_cables(g, switch_cables(g, up=False))[g.grp_remote]
    at_risk = np.bincount(g.grp_switch[risky], weights=cab[risky],
                          minlength=len(g.rank)).astype(np.int64)
    most = REDUCED_SHARE * total[ups].max(initial=0)
    lost = np.flatnonzero((fewer_cables(g, total) | (at_risk > 0))[ups]
                           & ((total - at_risk)[ups] <= most))
    if not len(lost):
        return np.zeros((0, 0), np.int32), np.zeros((0, 0), bool)
    cap = np.where(c[np.ix_(ups, targets)] >= UP_PHASE, total[ups][:, None], 0).astype(np.int32)
    which, gid = runs(g.grp_first[ups[lost]], g.grp_count[ups[lost]])
    keep = risky[gid]
    which, gid = which[keep], gid[keep]
    away = (seen_cost(np.take(np.take(c, g.grp_remote[gid], axis=0), targets, axis=1), False)
            >= np.take(np.take(c, ups[lost[which]], axis=0), targets, axis=1))
    np.subtract.at(cap, lost[which], (away * cab[gid][:, None]).astype(np.int32))
    low = np.zeros(cap.shape, dtype=bool)
    low[lost] = (cap[lost] > 0) & (cap[lost] <= most)
    if not low.any():
        return np.zeros((0, 0), np.int32), np.zeros((0, 0), bool)
    return cap, low


def switch_cables(g: SwitchGraph, up: bool) -> np.ndarray:
    """``(S,)`` int64: each switch's up (``up``) or down cables."""
    sel = ((g.rank[g.grp_remote] > g.rank[g.grp_switch]) if up
           else (g.rank[g.grp_remote] < g.rank[g.grp_switch]))
    return np.bincount(g.grp_switch[sel], weights=g.grp_port_count[sel],
                       minlength=len(g.rank)).astype(np.int64)


def fewer_cables(g: SwitchGraph, total: np.ndarray) -> np.ndarray:
    """``(S,)`` bool: the switches whose ``total`` (:func:`switch_cables`)
    is below the most common of their rank's (ties: the larger count)."""
    rank = g.rank.astype(np.int64)
    return total < most_common(rank, total, int(rank.max(initial=0)) + 1)[rank]


def reduced_pairs(slot_ui: np.ndarray, whole: np.ndarray, reach: np.ndarray, up_cost: np.ndarray,
                  leaf_cost: np.ndarray, cap: np.ndarray, low: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(b, t)`` int64: the (leaf, target) pairs, indices into the leaves
    of ``slot_ui`` ``(B, M)`` (each slot's upper switch, -1 none) and into
    the targets, of whole leaves (``whole`` ``(B,)``) among the pairs
    ``reach`` ``(B, T)`` bool, with a reduced slot (:func:`kept_share`; ``up_cost``
    ``(U, T)`` / ``leaf_cost`` ``(B, T)`` the encoded costs, ``cap`` / ``low``
    ``(U, T)`` from :func:`up_capacity`)."""
    at = np.maximum(slot_ui, 0)
    some = np.asarray(low.any(axis=1))
    lv = np.flatnonzero(whole & (some[at] & (slot_ui >= 0)).any(axis=1))
    b2, t2 = np.nonzero((low[at[lv]] & (slot_ui[lv] >= 0)[:, :, None]).any(axis=1) & reach[lv])
    # one pair of each key (the same slots, target and cost: the same answer)
    first, of = pair_keys(slot_ui[lv], np.zeros(len(lv), dtype=np.int64), leaf_cost[lv], b2, t2)
    fb, ft = lv[b2[first]], t2[first]
    ui = slot_ui[fb]
    a2 = np.maximum(ui, 0)
    closer = (ui >= 0) & (up_cost[a2, ft[:, None]] < leaf_cost[fb, ft][:, None])
    red = np.asarray((kept_share(closer, cap[a2, ft[:, None]], low[a2, ft[:, None]], ui >= 0)
                      < 1).any(axis=1))[of]
    return lv[b2[red]], t2[red]


def with_reduced(g: SwitchGraph, c: np.ndarray, ups: np.ndarray, targets: np.ndarray,
                 slot_ui: np.ndarray, whole: np.ndarray, reach: np.ndarray, partial: np.ndarray,
                 up_cost: np.ndarray, leaf_cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs with a reduced slot (:func:`reduced_pairs`) set in
    ``partial`` ``(B, T)`` bool (in place; a pair already there has a slot
    that does not lead closer, so none reduced); returns :func:`up_capacity`'s
    ``(cap, low)``, both ``(0, 0)`` where no slot is reduced (the pass then
    reads no capacity)."""
    cap, low = up_capacity(g, c, ups, targets)
    if low.size:
        rb, rt = reduced_pairs(slot_ui, whole, reach & ~partial, up_cost, leaf_cost, cap, low)
        partial[rb, rt] = True
        if not len(rb):
            cap, low = cap[:0, :0], low[:0, :0]
    return cap, low
