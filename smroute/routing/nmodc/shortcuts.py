"""Nmodc's spread of leaves with shortcuts (beyond the paper): a leaf whose
up cables a shortcut loads unevenly moves the destinations beyond each up
cable's fair share to the cables below it.

Sites built of directors whose line switches the leaves reach in uneven
bundles (a leaf cabled to several line switches of several directors, one
to six cables to each) give two leaves that share a line switch a two-hop
route through it, and every other pair a route over the directors' spines.
Routing through closer groups only, a leaf sends every destination of the
leaves one line switch reaches directly up that line switch's cables,
whatever their count: a single cable carries several times the leaf's fair
share of destinations (so do OpenSM's engines that route over shortest
paths).  On CU Boulder's public capture of Janus (three directors, 79
leaves in bundles of 1 to 6 cables) that costs A2A and the shifts' HSD
against OpenSM's dnup.

A leaf has a **shortcut** (:func:`shortcut_leaves`) where one of its
up-neighbours is cabled to some other leaf while another of its
up-neighbours is not but still has an up*/down* path to it.  Such a leaf
(:func:`spread_up_cables`) counts the end-port destinations it sends up,
and each up cable's fair share: their number over its up cables, rounded
up.  On a cable that carries more than :data:`TRIGGER` times its share, the
destinations beyond the share, highest NID first, move to
the least-loaded up cables below the share whose switch has an up*/down*
path to them (those reaching the fewest such cables first), one free slot
at a time in the order (load, cable): the water-filling of the greedy that
moves one destination at a time.

A moved route climbs one rank more and then follows that switch's entries,
which are up*/down*: it stays up*/down* in the tree's ranks (free of credit
loops on one VL together with every other route), is delivered, and is at
most two hops longer.  Switch LIDs keep their cables (no data traffic).  A
fat-tree has no shortcut, damaged or not: an upper switch that lost its
cable to a leaf has no other way down to it, so no PGFT's table changes.
It runs on the leaves whose up cables are not bundles (one cable to each
up-neighbour); the others take the weighted way up of
:mod:`smroute.routing.nmodc.bundles`.
Pure functions on arrays; a loop per leaf and per set of reachable cables,
none per destination.
"""

from __future__ import annotations

import numpy as np

from smroute.fabric.graph import components
from smroute.routing.dmodc import INF, Destinations
from smroute.routing.runs import place_in_runs, runs
from smroute.routing.topology import SwitchGraph

__all__ = ["TRIGGER", "shortcut_leaves", "spread_up_cables"]

#: A leaf's up cable gives up its destinations beyond the fair share where
#: it carries more than this many times the share (below, the minimal
#: routes' lighter load on the links above wins in all-to-all traffic:
#: ``research/leaf_shortcuts.py``).  At 2 shares, leaves cabled once to
#: each of 10 line ASICs of one director and 5 of a smaller one (CS8500 and
#: CS7510, CS7500 and CS7520) sent 33-68 destinations up each cable into
#: the smaller one against 21-27 into the other (a shared line ASIC is
#: the two-hop route to most leaves); at 1.5 their random permutations'
#: mean largest load goes from 6.41 to 5.82 and the shifts' HSD in GUID
#: order from 6.35 to 5.83, and no table of the sweep, the catalogue, the
#: captures, Janus, Ranger or the bundles sites changes
#: (``research/mixed-sites.md``).
TRIGGER = 1.5


def shortcut_leaves(g: SwitchGraph, c: np.ndarray) -> np.ndarray:
    """``(L,)`` int64, ascending: the leaves with a shortcut (module doc),
    ``c`` ``(S, S)`` the encoded costs."""
    lo, hi = g.up_pairs()
    keep = g.is_leaf[lo]
    lo, hi = lo[keep], hi[keep]
    # (upper, leaf): every cable group from a switch above the leaves down to one
    k = np.flatnonzero(g.is_leaf[g.grp_remote] & (g.rank[g.grp_switch] > 0))
    up, leaf = g.grp_switch[k], g.grp_remote[k]
    none = np.zeros(0, dtype=np.int64)
    if not len(lo) or not len(up):
        return none
    # a leaf whose up-neighbours all reach the same leaves below has none: a
    # random 64-bit sum per set of leaves tells the sets apart (a fixed seed)
    weight = np.random.default_rng(0).integers(1, 1 << 62, g.n_switches, dtype=np.int64)
    below = np.zeros(g.n_switches, dtype=np.int64)
    np.add.at(below, up, weight[leaf])
    h = below[hi]
    first = np.full(g.n_switches, -1, dtype=np.int64)
    first[lo[::-1]] = h[::-1]
    mixed = np.zeros(g.n_switches, dtype=bool)
    mixed[lo[h != first[lo]]] = True
    # nor where no up-neighbour reaches a leaf it is not cabled to among
    # those its cables to leaves join it to (every damaged fat-tree: an
    # upper switch has no other way down to a leaf of its pod it lost)
    n = g.n_switches
    cand = np.unique(hi[mixed[lo]])
    leaves = np.flatnonzero(g.is_leaf)
    pod = components(n, up, leaf)
    n_cabled = np.bincount(up, minlength=n)  # (leaves each upper switch is cabled to)
    beyond = np.zeros(n, dtype=bool)
    beyond[cand] = (((c[np.ix_(cand, leaves)] < INF) & (pod[cand][:, None] == pod[leaves]))
                    .sum(axis=1) > n_cabled[cand])
    has = np.zeros(n, dtype=bool)
    has[lo[beyond[hi]]] = True
    sel = mixed[lo] & has[lo]
    lo, hi = lo[sel], hi[sel]
    if not len(lo):
        return none
    # (leaf, target): every other leaf one of its up-neighbours is cabled to
    o = np.argsort(up, kind="stable")
    up, leaf = up[o], leaf[o]
    start = np.searchsorted(up, hi)
    which, at = runs(start, np.searchsorted(up, hi, side="right") - start)
    key = np.unique(lo[which] * n + leaf[at])
    s, t = key // n, key % n
    s, t = s[s != t], t[s != t]
    # an up-neighbour with a path to more of those than it is cabled to
    # (every leaf it is cabled to is one of them, reached)
    o = np.argsort(lo, kind="stable")
    lo, hi = lo[o], hi[o]
    start = np.searchsorted(lo, s)
    which, at = runs(start, np.searchsorted(lo, s, side="right") - start)
    reached = np.bincount(at, weights=c[hi[at], t[which]] < INF, minlength=len(lo))
    cabled = n_cabled[hi] - 1  # (its own leaf aside)
    return np.unique(lo[reached > cabled])


def _free_slots(load: np.ndarray, share: int, cables: np.ndarray) -> np.ndarray:
    """The cables of ``cables`` below ``share``, once per slot free on each,
    in the order (load at the slot, cable)."""
    free = cables[load[cables] < share]
    which, level = runs(load[free], share - load[free])
    return free[which][np.lexsort((free[which], level))]


def spread_up_cables(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
                     leaves: np.ndarray) -> int:
    """Move the entries of ``leaves`` (:func:`shortcut_leaves`) beyond their
    up cables' fair share, in place in ``ports`` ``(S, W)`` uint8 (module
    doc); returns how many moved."""
    ca = np.flatnonzero(~dest.is_switch)
    moved = 0
    for s in leaves.tolist():
        ks = g.groups_of(s, up=True)
        which, at = runs(g.grp_port_first[ks], g.grp_port_count[ks])
        cable, upper = g.grp_ports[at], g.grp_remote[ks][which]
        n = len(cable)
        if n < 2:
            continue
        place = np.full(256, -1, dtype=np.int64)
        place[cable] = np.arange(n)
        on = place[ports[s, dest.lid[ca]]]
        sent = np.flatnonzero(on >= 0)
        load = np.bincount(on[sent], minlength=n)
        share = -(-len(sent) // n)
        hot = load > TRIGGER * share
        if not hot.any():
            continue
        d, on = ca[sent], on[sent]
        # which cables' switches reach each destination (by target): the
        # distinct sets, ordered as binary numbers with cable i worth 2**i
        targets, of = np.unique(dest.target[d], return_inverse=True)
        sets, set_of = np.unique((c[upper][::-1, targets] < INF).T, axis=0,
                                 return_inverse=True)
        reach = sets[:, ::-1]  # (sets, cables)
        set_of = set_of.ravel()
        for r in np.argsort(reach.sum(axis=1), kind="stable").tolist():
            slots = _free_slots(load, share, np.flatnonzero(reach[r]))
            over = np.flatnonzero((set_of[of] == r) & hot[on] & (load[on] > share))
            if not len(slots) or not len(over):
                continue
            # each cable's destinations beyond its share, highest NID first
            over = over[np.lexsort((-dest.nid[d[over]], on[over]))]
            over = over[place_in_runs(on[over]) < load[on[over]] - share]
            over = over[np.argsort(-dest.nid[d[over]], kind="stable")][:len(slots)]
            to = slots[:len(over)]
            np.subtract.at(load, on[over], 1)
            np.add.at(load, to, 1)
            on[over] = to
            ports[s, dest.lid[d[over]]] = cable[to]
            moved += len(over)
    return moved
