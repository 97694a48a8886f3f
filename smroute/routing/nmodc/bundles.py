"""Nmodc on leaves cabled in uneven bundles (beyond the paper): a leaf
shares its traffic to another leaf over the directors by both leaves'
cables into each, and every route to a destination enters its leaf over
one cable per director.

Where leaves reach the line switches of several directors in uneven
bundles (:mod:`smroute.routing.nmodc.shortcuts`), Dmodc's digits no longer
fit the wiring.  These ways apply to the leaves with a shortcut whose up
cables are bundles (more cables than up-neighbours) and to their
up-neighbours; a leaf with one cable to each up-neighbour, as in a fat-tree
that lost a few cables, keeps the spread alone (Mellanox's Selene storage
capture, 31 leaves with a shortcut: the ways below cost it A2A 24 to 64).

* **The way up from the leaves.** A leaf takes each up-neighbour for a
  destination in proportion to its own cables, whatever the target leaf's
  cables into that up-neighbour's director: a target leaf with one cable
  into a director then receives a third of its traffic over that one cable
  (the hottest link of a random permutation).  Such a leaf now deals every
  other leaf's end-port destinations, in NID order from a place that moves
  with both leaves, over its up cables (those of one block together), each
  weighted by the cables the target has into the cable's *block*, the
  switches below that cable's switch's up-neighbours (:func:`weighted_up`):
  a director gets a share in proportion to the product of the two leaves'
  cables into it.  (A destination no block reaches, a host on a line
  switch, keeps Dmodc's entry.)  A moved route climbs one rank more (a
  shortcut not taken): it stays up*/down* and is delivered.
* **The way up from the line switches.** A line switch takes spine
  ``floor(x / Pi) mod m``; its divider ``Pi`` is the leaves' count of
  up-neighbours (6-9 there), so a leaf's destinations, consecutive NIDs,
  reach only two of a director's 18 spines.  It takes group
  ``(x + floor(x / m)) mod m`` of its ``m`` up groups instead
  (:func:`skewed_up`), the cable in the group ``floor(x / m) mod`` its
  cables.
* **The way down.** A spine reaches a leaf through the line switches the
  leaf is cabled to, and ``C[t mod #C]`` gives each the same share whatever
  its cables to the leaf, and Dmodc's digit the cables of one bundle
  unequal shares.  Where one of those line switches has a bundle to the
  leaf or their counts differ, the leaf's end-port destinations, in NID
  order from a place that moves with the leaf, are dealt over all those
  cables, each cable's line switch taking them (:func:`weighted_down`): the
  spine's entry takes that line switch (its cables in turn), and the line
  switch's entry that cable.  Every spine of a director has the same line
  switches towards the leaf, so all of them send a destination the same
  way: one cable into the leaf per director and destination.
* **Shortcuts through the deal.** A line switch cabled to a leaf sends a
  destination of that leaf straight down, though the spines above it
  deliver it through another line switch: that cable then carries the
  shortcut traffic of every leaf below the line switch on top of its dealt
  destinations.  Where every switch above it sends the destination down to
  another switch cabled to the leaf, the line switch sends it up instead,
  by the skewed digit (:func:`through_the_deal`): down, up, down again
  never happens, so the route stays up*/down*.

Every route stays up*/down* in the tree's ranks, so the tables stay free of
credit loops on one VL as before.  The pass is optional (it only evens
loads): where the mode chain then leaves destinations that no orientation
serves on one VL (a damaged site with service hosts on line ASICs, where
the orientation searches other tables), the route goes without it
(:func:`smroute.routing.engine.route`).  They run where some leaf has a
shortcut (a fat-tree has none, so no PGFT's table changes).  On the
catalogue's uneven-bundles shape, with VLs against dfsssp: SP 8 / RP 5 /
shift HSD 5.48 against 8 / 5 / 5.53, host-name HSD 4.55 against 14.0
(``research/site-catalogue-large.md``).  Over that shape, Janus and 24
generated sites of that kind, one VL, against no pass
(``research/leaf_shortcuts.py``): SP, shift HSD and both host-name metrics
lower on all 26, RP lower on 25, A2A higher on 18 and lower on 2 (a leaf's
traffic climbs to every spine its targets' cables need).  Pure functions
on arrays; a loop per switch.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import INF, UP_PHASE, Destinations
from smroute.routing.nmodc import shortcuts
from smroute.routing.runs import place_in_runs, runs
from smroute.routing.topology import SwitchGraph

__all__ = ["balance_bundles", "skewed_up", "through_the_deal", "weighted_down", "weighted_up"]


def balance_bundles(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
                    leaves: np.ndarray) -> None:
    """With ``leaves`` ``(L,)`` int64 the leaves with a shortcut
    (:func:`~smroute.routing.nmodc.shortcuts.shortcut_leaves`; none: nothing
    changes): the weighted way up of those whose up cables are bundles, the
    skewed way up of their up-neighbours and the weighted way down (module
    doc); the spread of the others
    (:func:`~smroute.routing.nmodc.shortcuts.spread_up_cables`).  In place
    in ``ports`` ``(S, W)`` uint8."""
    if not len(leaves):
        return
    bundled, lines = _bundled(g, leaves)
    shortcuts.spread_up_cables(g, c, dest, ports, np.setdiff1d(leaves, bundled))
    skewed_up(g, c, dest, ports, lines)
    weighted_down(g, c, dest, ports)
    weighted_up(g, c, dest, ports, bundled)


def _bundled(g: SwitchGraph, leaves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Those of ``leaves`` whose up cables are bundles (more cables than
    up-neighbours), and their up-neighbours, ascending."""
    up = (g.rank[g.grp_remote] > g.rank[g.grp_switch]) & np.isin(g.grp_switch, leaves)
    n_groups = np.bincount(g.grp_switch[up], minlength=g.n_switches)
    n_cables = np.bincount(g.grp_switch[up], weights=g.grp_port_count[up],
                           minlength=g.n_switches)
    bundled = np.flatnonzero(n_cables > n_groups)
    return bundled, np.unique(g.grp_remote[up & np.isin(g.grp_switch, bundled)])


def skewed_up(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
              switches: np.ndarray, targets: np.ndarray | None = None) -> None:
    """The end-port destinations each of ``switches`` sends up take group
    ``(x + floor(x / m)) mod m`` of its ``m`` up groups where it leads
    closer (module doc), in place in ``ports`` ``(S, W)`` uint8; with
    ``targets`` ``(S,)`` bool, only those on these switches."""
    ca = np.flatnonzero(~dest.is_switch)
    if targets is not None:
        ca = ca[targets[dest.target[ca]]]
    for s in switches.tolist():
        ks = g.groups_of(s, up=True)
        if len(ks) < 2:
            continue
        cost = c[s, dest.target[ca]]
        d = ca[(cost >= UP_PHASE) & (cost < INF)]
        j, cable = _skewed(g, ks, dest.nid[d].astype(np.int64))
        ok = c[g.grp_remote[ks[j]], dest.target[d]] < c[s, dest.target[d]]
        ports[s, dest.lid[d[ok]]] = cable[ok]


def weighted_down(g: SwitchGraph, c: np.ndarray, dest: Destinations,
                  ports: np.ndarray) -> None:
    """Each switch reaching a leaf through two or more closer down groups
    whose switches are cabled to the leaf in unequal numbers deals the
    leaf's end-port destinations over those cables (module doc), in place
    in ``ports`` ``(S, W)`` uint8."""
    ca, tg, place = _places(dest)
    if not len(ca):
        return
    targets = np.unique(tg)
    at = np.full(g.n_switches, -1, dtype=np.int64)
    at[targets] = np.arange(len(targets))
    for s in np.flatnonzero(g.rank >= 2).tolist():
        ks = g.groups_of(s, up=False)
        if len(ks) < 2:
            continue
        below = g.grp_remote[ks]
        # the cables and the group from each switch below down to each target
        which, k2 = runs(g.grp_first[below], g.grp_count[below])
        keep = (at[g.grp_remote[k2]] >= 0) & (g.rank[g.grp_remote[k2]] < g.rank[below[which]])
        which, k2 = which[keep], k2[keep]
        cables = np.zeros((len(below), len(targets)), dtype=np.int64)
        cables[which, at[g.grp_remote[k2]]] = g.grp_port_count[k2]
        group = np.full((len(below), len(targets)), -1, dtype=np.int64)
        group[which, at[g.grp_remote[k2]]] = k2
        reach = c[s, targets]
        closer = (c[np.ix_(below, targets)] < reach[None, :]) & (reach < UP_PHASE)[None, :]
        w = np.where(closer, cables, 0)  # (groups, targets)
        n_closer = closer.sum(axis=0)
        top = np.where(closer, w, 0).max(axis=0)
        low = np.where(closer, w, top.max(initial=0) + 1).min(axis=0)
        # every closer group cabled to the leaf; unequal counts, or one bundle
        dealt = (n_closer >= 1) & (low >= 1) & ((low < top) | (top > 1))
        if not dealt.any():
            continue
        col = np.full(g.n_switches, -1, dtype=np.int64)
        col[targets[dealt]] = np.arange(int(dealt.sum()))
        sel = np.flatnonzero(col[tg] >= 0)
        t = col[tg[sel]]
        wd = w[:, dealt]
        cum = np.cumsum(wd, axis=0)  # (groups, dealt targets)
        p = (place[sel] + targets[dealt][t]) % cum[-1][t]
        j = (cum[:, t] <= p[None, :]).sum(axis=0)  # the group of each destination
        d = ca[sel]
        k = ks[j]
        # the spine: that group's cables in turn; the switch below: the cable of the deal
        o = np.lexsort((dest.nid[d], k))
        turn = np.empty(len(d), dtype=np.int64)
        turn[o] = place_in_runs(k[o])
        ports[s, dest.lid[d]] = g.grp_ports[g.grp_port_first[k] + turn % g.grp_port_count[k]]
        start = cum[j, t] - wd[j, t]
        to_leaf = group[j, at[tg[sel]]]
        ports[below[j], dest.lid[d]] = g.grp_ports[g.grp_port_first[to_leaf] + (p - start)]


def weighted_up(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
                leaves: np.ndarray) -> None:
    """Each of ``leaves`` deals every other leaf's end-port destinations
    over its up cables, those of one block together, each weighted by the
    cables that leaf has into the block of the cable's switch (module doc),
    in place in ``ports`` ``(S, W)`` uint8."""
    ca, tg, place = _places(dest)
    if not len(ca) or not len(leaves):
        return
    targets, n_of = np.unique(tg, return_counts=True)
    at = np.full(g.n_switches, -1, dtype=np.int64)
    at[targets] = np.arange(len(targets))
    # the cables from each switch down to each target
    k = np.flatnonzero((at[g.grp_remote] >= 0) & (g.rank[g.grp_remote] < g.rank[g.grp_switch]))
    cables = np.zeros((g.n_switches, len(targets)), dtype=np.int64)
    cables[g.grp_switch[k], at[g.grp_remote[k]]] = g.grp_port_count[k]
    blocks: dict[int, tuple[int, np.ndarray]] = {}  # a block's first switch, its cables
    for s in leaves.tolist():
        ks = g.groups_of(s, up=True)
        for u in g.grp_remote[ks].tolist():
            if u not in blocks:  # u and the switches below its up-neighbours
                block = np.unique(np.concatenate(
                    [[u], *(g.grp_remote[g.groups_of(a, up=False)]
                            for a in g.grp_remote[g.groups_of(u, up=True)].tolist())]))
                blocks[u] = int(block[0]), cables[block].sum(axis=0)
        which, pos = runs(g.grp_port_first[ks], g.grp_port_count[ks])
        # the cables of one block together (a place range then stays in one block)
        o = np.argsort([blocks[u][0] for u in g.grp_remote[ks][which].tolist()], kind="stable")
        cable, upper = g.grp_ports[pos][o], g.grp_remote[ks][which][o]
        sel = np.flatnonzero(tg != s)
        t = at[tg[sel]]
        w = np.stack([blocks[u][1][t] for u in upper.tolist()])  # (cables, destinations)
        w *= c[np.ix_(upper, tg[sel])] < INF
        total = w.sum(axis=0)
        # the destination's place, from a place that moves with both leaves, over the weights
        p = (place[sel] + tg[sel] + s) % n_of[t]
        j = (2 * n_of[t] * np.cumsum(w, axis=0) <= (2 * p + 1) * total).sum(axis=0)
        ok = total > 0
        ports[s, dest.lid[ca[sel[ok]]]] = cable[j[ok]]


def through_the_deal(g: SwitchGraph, dest: Destinations, ports: np.ndarray,
                     leaves: np.ndarray) -> None:
    """Each up-neighbour of those of ``leaves`` (the leaves with a shortcut)
    whose up cables are bundles sends up, by the skewed digit, the
    destinations of a leaf it is cabled to that every switch above it
    delivers through another switch cabled to that leaf (module doc), in
    place in ``ports`` ``(S, W)`` uint8."""
    if not len(leaves):
        return
    _, switches = _bundled(g, leaves)
    ca = np.flatnonzero(~dest.is_switch)
    tg = dest.target[ca]
    behind = g.behind()
    for s in switches.tolist():
        ups = g.groups_of(s, up=True)
        if len(ups) < 2:
            continue
        above = g.grp_remote[ups]
        sel = np.flatnonzero(np.isin(tg, g.grp_remote[g.groups_of(s, up=False)]))
        d, t = ca[sel], tg[sel]
        lid = dest.lid[d]
        via = behind[above[:, None], ports[above[:, None], lid[None, :]]]  # (m, destinations)
        v = np.maximum(via, 0)
        fits = (via >= 0) & (via != s) & (g.rank[v] < g.rank[above][:, None])
        fits &= behind[v, ports[v, lid[None, :]]] == t[None, :]
        j, cable = _skewed(g, ups, dest.nid[d].astype(np.int64))
        go = (behind[s, ports[s, lid]] == t) & ~(via == s).any(axis=0)
        go &= fits[j, np.arange(len(d))]
        ports[s, lid[go]] = cable[go]


def _skewed(g: SwitchGraph, ks: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The skewed digit (module doc): for NIDs ``x``, which of ``ks``
    (``(m,)`` a switch's up groups) each takes, and its cable."""
    m = len(ks)
    j = (x + x // m) % m
    return j, g.grp_ports[g.grp_port_first[ks[j]] + (x // m) % g.grp_port_count[ks[j]]]


def _places(dest: Destinations) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The end-port destinations ``(D,)``, their targets, and each one's
    place among its target's by NID."""
    ca = np.flatnonzero(~dest.is_switch)
    tg = dest.target[ca]
    o = np.lexsort((dest.nid[ca], tg))
    place = np.empty(len(ca), dtype=np.int64)
    place[o] = place_in_runs(tg[o])
    return ca, tg, place
