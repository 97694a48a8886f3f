"""Nmodc on leaves cabled in uneven bundles (beyond the paper): the switches
above leaves with a shortcut choose their way up by a skewed digit, and a
switch that reaches a leaf through several switches with unequal cables to
it deals the leaf's destinations over those cables.

Where leaves reach the line switches of several directors in uneven
bundles (:mod:`smroute.routing.nmodc.shortcuts`), Dmodc's digits no longer
fit the wiring:

* **The way up.** A line switch takes spine ``floor(x / Pi) mod m``; its
  divider ``Pi`` is the leaves' count of up-neighbours (6-9 there), so a
  leaf's destinations, consecutive NIDs, reach only two of a director's 18
  spines, and the few cables from those spines down to the leaf's line
  switches carry them all; and the NIDs one cable of a bundle brings
  (the leaf's digit inside the group) reach a fraction of the spines.  An
  up-neighbour of a leaf with a shortcut whose up cables are bundles (more
  cables than up-neighbours) takes, for the destinations it sends up,
  group ``(x + floor(x / m)) mod m`` of its ``m`` up groups instead
  (:func:`skewed_up`): consecutive NIDs reach consecutive spines, and so
  do the NIDs one cable brings.  The cable in the group: ``floor(x / m)
  mod`` its cables.  (A leaf with one cable to each up-neighbour, as in a
  fat-tree that lost a few cables, keeps Dmodc's digit: Mellanox's Selene
  storage capture, 31 leaves with a shortcut, host-name HSD 4.20 with it,
  4.78 skewed.)
* **The way down.** A spine reaches a leaf through the line switches the
  leaf is cabled to, and ``C[t mod #C]`` gives each the same share whatever
  its cables to the leaf: one cable carries as many of the leaf's
  destinations as a bundle of six.  Where those line switches' cables to
  the leaf differ in number, the leaf's end-port destinations, in NID order
  from a place that moves with the leaf, are dealt over all those cables,
  each cable's line switch taking them (:func:`weighted_down`): the spine's
  entry takes that line switch (its cables in turn), and the line switch's
  entry that cable.  Every spine of a director has the same line switches
  towards the leaf, so all of them send a destination the same way.

Both keep every route minimal and up*/down* (a group that leads closer,
the same switches), so the tables stay free of credit loops on one VL as
before.  The pass is optional (it only evens loads): where the mode chain
then leaves destinations that no orientation serves on one VL (a damaged
site with service hosts on line ASICs, where the orientation searches
other tables), the route goes without it
(:func:`smroute.routing.engine.route`).  They run where some leaf has a
shortcut (a fat-tree has none, so no PGFT's table changes).  On the
catalogue's uneven-bundles shape, Janus and 24 generated sites of that
kind (``research/leaf_shortcuts.py``), with the spread: shift HSD lower on
all 26, SP and RP lower on 13 and higher on none, A2A lower on 18 and
higher on 1.  Pure functions on arrays; a loop per switch.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import INF, UP_PHASE, Destinations
from smroute.routing.nmodc import shortcuts
from smroute.routing.runs import place_in_runs, runs
from smroute.routing.topology import SwitchGraph

__all__ = ["balance_bundles", "skewed_up", "weighted_down"]


def balance_bundles(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
                    leaves: np.ndarray) -> None:
    """With ``leaves`` ``(L,)`` int64 the leaves with a shortcut
    (:func:`~smroute.routing.nmodc.shortcuts.shortcut_leaves`; none: nothing
    changes), the spread of those leaves
    (:func:`~smroute.routing.nmodc.shortcuts.spread_up_cables`), then the
    skewed way up of their up-neighbours and the weighted way down
    (module doc), in place in ``ports`` ``(S, W)`` uint8."""
    if not len(leaves):
        return
    shortcuts.spread_up_cables(g, c, dest, ports, leaves)
    # the up-neighbours of those leaves whose up cables are bundles
    up = (g.rank[g.grp_remote] > g.rank[g.grp_switch]) & np.isin(g.grp_switch, leaves)
    n_groups = np.bincount(g.grp_switch[up], minlength=g.n_switches)
    n_cables = np.bincount(g.grp_switch[up], weights=g.grp_port_count[up],
                           minlength=g.n_switches)
    bundled = n_cables > n_groups
    skewed_up(g, c, dest, ports, np.unique(g.grp_remote[up & bundled[g.grp_switch]]))
    weighted_down(g, c, dest, ports)


def skewed_up(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
              switches: np.ndarray) -> None:
    """The end-port destinations each of ``switches`` sends up take group
    ``(x + floor(x / m)) mod m`` of its ``m`` up groups where it leads
    closer (module doc), in place in ``ports`` ``(S, W)`` uint8."""
    ca = np.flatnonzero(~dest.is_switch)
    for s in switches.tolist():
        ks = g.groups_of(s, up=True)
        m = len(ks)
        if m < 2:
            continue
        cost = c[s, dest.target[ca]]
        d = ca[(cost >= UP_PHASE) & (cost < INF)]
        x = dest.nid[d].astype(np.int64)
        k = ks[(x + x // m) % m]
        ok = c[g.grp_remote[k], dest.target[d]] < c[s, dest.target[d]]
        k, x, d = k[ok], x[ok], d[ok]
        ports[s, dest.lid[d]] = g.grp_ports[g.grp_port_first[k] + (x // m) % g.grp_port_count[k]]


def weighted_down(g: SwitchGraph, c: np.ndarray, dest: Destinations,
                  ports: np.ndarray) -> None:
    """Each switch reaching a leaf through two or more closer down groups
    whose switches are cabled to the leaf in unequal numbers deals the
    leaf's end-port destinations over those cables (module doc), in place
    in ``ports`` ``(S, W)`` uint8."""
    ca = np.flatnonzero(~dest.is_switch)
    if not len(ca):
        return
    tg = dest.target[ca]
    # each destination's place among its target's, by NID
    o = np.lexsort((dest.nid[ca], tg))
    place = np.empty(len(ca), dtype=np.int64)
    place[o] = place_in_runs(tg[o])
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
        # two or more closer groups, every one cabled to the leaf, unequal counts
        dealt = (n_closer >= 2) & (low >= 1) & (low < top)
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
