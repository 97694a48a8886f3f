"""Anchors for the turns of service hosts' switches, on one VL.

UFM or storage hosts on a director's line ASICs (or on any upper switch, a
management switch hanging above a leaf too) have traffic with another
director's switches that no up*/down* path carries: it goes down to a lower
switch and up again (a *turn*). On one VL, turns in both directions close
cycles of channel dependencies with the tree's routes: a turn ``B line ->
leaf -> A line`` feeds the cable ``leaf -> A line``, and the tree's traffic
going up from that leaf continues from it to A's spines, from which the
tree's routes come down to another leaf that turns back to B.

:func:`anchor_turns` gives each such switch ``x`` an *anchor*
(:func:`anchors`): one lower neighbour ``a``. The cables ``a -> x`` carry
only the traffic that ends at ``x``'s end-ports, and the cables ``x -> a``
only the traffic of ``x``'s own end-ports: every other entry that would
pass there moves to another cable (one that leads closer where there is
one). Every turn then passes an anchor's cables:

* traffic from ``x`` that needs a turn leaves by ``x -> a``, which no other
  traffic enters: its chain of dependencies starts there;
* traffic to ``x`` from a switch without an up*/down* path to it follows
  the routes towards ``a``, then ``a -> x``, which leads only to ``x``'s
  end-ports: its chain ends there.

The tree's routes stay up*/down* (acyclic), so no cycle passes through a
turn: the union is free of credit loops on one VL. The cost is local: two
cables per anchored switch carry no transit. A switch with no lower
neighbour (a storage switch above one spine ranks as a leaf: it carries hosts) turns
through an upper neighbour ``v``: the anchor is a lower neighbour of ``v``,
and the cables ``a -> v`` and ``v -> a`` are kept so. Where the
orientation of :mod:`smroute.routing.orient` serves most destinations,
the ones it leaves are anchored on top of its tables, with every switch
that lacks a path to them (leaves and aggregation nodes' switches too).
The mode chain (:func:`smroute.routing.modes.chain`) uses it only where
``tree+orient`` leaves needed pairs, and keeps it only where every needed
pair is then delivered and the channel-dependency check finds no cycle
(``research/notes/one-vl-turn-cables.md``).

Pure: arrays in, arrays out.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import INF, UP_PHASE, Destinations, seen_cost
from smroute.routing.topology import SwitchGraph

__all__ = ["anchor_turns", "anchors", "service_switches"]


def service_switches(g: SwitchGraph, dest: Destinations, turns: np.ndarray,
                     c: np.ndarray | None = None) -> np.ndarray:
    """``(X,)`` int64: the upper switches (rank above 0) that carry an
    end-port of ``turns`` ``(D,)`` bool other than an aggregation node.
    With the costs ``c``: every switch (leaves too) that carries an
    end-port of ``turns`` or an end-port without an up*/down* path to one."""
    ca = turns & ~dest.is_switch
    owner = dest.owner[ca]
    agg = g.ep_agg[owner] if len(g.ep_agg) else np.zeros(len(owner), dtype=bool)
    x = np.unique(dest.target[ca][~agg])
    if c is None:
        return x[g.rank[x] > 0]
    x = np.unique(dest.target[ca])
    on = np.unique(g.ep_switch)
    x = np.union1d(x, on[(c[np.ix_(on, x)] == INF).any(axis=1)])
    return x[g.rank[x] >= 0]


def anchors(g: SwitchGraph, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(via, anchor)``, ``(X,)`` int64 each: per switch ``x`` of ``xs``,
    the switch ``via`` its turns pass (``x`` itself, or for a switch with no
    lower neighbour one of its upper neighbours) and its *anchor*, a lower
    neighbour of ``via`` (not ``x``): the one whose hosts keep the most up
    capacity each once its cables to ``via`` carry no transit (its compute
    hosts over its up cables left, anchors taken before counted), one no
    other switch took first, then the lowest GUIDs; -1: none.  The switches
    with the fewest lower neighbours choose first, then by GUID."""
    sw, to, _ = g.cables()
    up_left = np.bincount(sw[g.rank[to] > g.rank[sw]], minlength=g.n_switches).astype(float)
    hosts = np.bincount(g.ep_switch[~g.ep_agg] if len(g.ep_agg) else g.ep_switch,
                        minlength=g.n_switches)
    via = np.full(len(xs), -1, dtype=np.int64)
    out = np.full(len(xs), -1, dtype=np.int64)
    lows = [np.unique(to[(sw == x) & (g.rank[to] < g.rank[x]) & (g.rank[to] >= 0)])
            for x in xs.tolist()]
    # the switches with the fewest lower neighbours choose first (a
    # management switch above one leaf has no choice), then by GUID: the
    # same anchors whatever the order of the fabric's nodes
    n_low = np.array([len(low) or g.n_switches for low in lows], dtype=np.int64)
    for k in np.lexsort((g.sw_guid[xs], n_low)).tolist():
        x, low = int(xs[k]), lows[k]
        if len(low):  # another anchored switch only where no other is below
            low = low[~np.isin(low, xs)] if (~np.isin(low, xs)).any() else low
            pair_v, pair_a = np.full(len(low), x), low
        else:  # through an upper neighbour, down to another of its lower ones
            up = to[(sw == x) & (g.rank[to] > g.rank[x])]
            ok = np.isin(sw, up) & (g.rank[to] < g.rank[sw]) & (g.rank[to] >= 0)
            ok &= ~np.isin(to, xs)
            pair_v, pair_a = sw[ok], to[ok]
            if not len(pair_v):
                continue
        key = pair_v * g.n_switches + pair_a
        _, first = np.unique(key, return_index=True)
        pair_v, pair_a = pair_v[first], pair_a[first]
        n_cab = np.array([np.count_nonzero((sw == a) & (to == v))
                          for v, a in zip(pair_v.tolist(), pair_a.tolist(), strict=True)])
        left = up_left[pair_a] - n_cab
        load = np.where(left > 0, hosts[pair_a] / np.maximum(left, 1), np.inf)
        taken = np.isin(pair_a, out)
        i = int(np.lexsort((g.sw_guid[pair_v], g.sw_guid[pair_a], load, taken))[0])
        via[k], out[k] = int(pair_v[i]), int(pair_a[i])
        up_left[out[k]] -= n_cab[i]
    return via, out


def _move(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray, s: int,
          cols: np.ndarray, banned: np.ndarray,
          cables: tuple[np.ndarray, np.ndarray, np.ndarray], start: np.ndarray) -> None:
    """Move switch ``s``'s entries for the destinations ``cols`` ``(M,)``
    to cables not ``banned`` ``(cables of s, M)``: to those that lead closer
    (eq. 1), else to those of the lowest cost that keep the route
    up*/down* (down only where ``s`` has a down-only path); spread by NID.
    An entry with no such cable stays.  ``cables``: ``g.cables()``, those of
    switch ``s`` from ``start[s]`` to ``start[s + 1]``."""
    _, to, port = cables
    mine = np.arange(start[s], start[s + 1])
    t = dest.target[cols]
    down = (g.rank[to[mine]] < g.rank[s])[:, None]
    seen = seen_cost(c[np.ix_(to[mine], t)], down).astype(np.int64)
    seen[banned] = INF
    own = c[s, t].astype(np.int64)
    seen[:, own < UP_PHASE] = np.where(down, seen[:, own < UP_PHASE], INF)
    best = np.where((seen < own[None, :]).any(axis=0), own - 1, seen.min(axis=0))
    ok_c = (seen <= best[None, :]) & (seen < INF)
    count = ok_c.sum(axis=0)
    ok = count > 0
    pick = np.where(ok, dest.nid[cols] % np.maximum(count, 1), 0)
    first = np.argmax(np.cumsum(ok_c, axis=0) > pick[None, :], axis=0)
    ports[s, dest.lid[cols[ok]]] = port[mine][first[ok]]


def anchor_turns(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
                 turns: np.ndarray, wide: bool = False) -> int:
    """Route the destinations ``turns`` ``(D,)`` bool (those some needed
    pair reaches without an up*/down* path) through the anchors of their
    :func:`service_switches` (``wide``: with the costs), in place in
    ``ports`` ``(S, LIDs)`` (module doc); the number of switches anchored
    (0: none, ``ports`` untouched).  A switch without an up*/down* path to
    such a destination takes its route towards the destination's anchor
    (towards one of its end-ports, by NID), else, if anchored itself, its
    cable to its own anchor (through its ``via``); the others keep their
    entries."""
    xs = service_switches(g, dest, turns, c if wide else None)
    via, anchor = anchors(g, xs)
    have = anchor >= 0
    xs, via, anchor = xs[have], via[have], anchor[have]
    if not len(xs):
        return 0
    cables = g.cables()
    sw, to, port = cables
    start = np.searchsorted(sw, np.arange(g.n_switches + 1))  # (cables by switch)
    k_of = np.full(g.n_switches, -1, dtype=np.int64)  # the anchored switches' index
    k_of[xs] = np.arange(len(xs))
    # the cables by (switch, remote), in cable order within each pair
    pair = sw * g.n_switches + to
    by_pair = np.argsort(pair, kind="stable")
    pair_sorted = pair[by_pair]

    def cab(u: int, v: int) -> np.ndarray:  # the ports of u's cables to v
        key = u * g.n_switches + v
        lo, hi = np.searchsorted(pair_sorted, [key, key + 1])
        return port[by_pair[lo:hi]]

    # per anchored switch, the ports of its via's cables to its anchor
    to_anchor = np.zeros((len(xs), 256), dtype=bool)
    for k in range(len(xs)):
        to_anchor[k, cab(int(via[k]), int(anchor[k]))] = True
    is_via = np.zeros(g.n_switches, dtype=bool)
    is_via[via] = True

    def banned(s: int, cols: np.ndarray) -> np.ndarray:
        """(cables of s, M): cables up from an anchor that carry only the
        traffic to its switch, and cables into a ``via`` whose entry leaves
        it towards its anchor (transit onto it)."""
        mine = np.arange(start[s], start[s + 1])
        out = np.zeros((len(mine), len(cols)), dtype=bool)
        # the anchored switches whose via is a neighbour of s
        near = np.flatnonzero(np.isin(via, to[mine][is_via[to[mine]]]))
        if not len(near):
            return out
        lids = dest.lid[cols]
        b = to_anchor[near[:, None], ports[via[near]][:, lids]]  # (K, M): leaves to its anchor
        b[xs[near] == s] = False
        b |= (anchor[near] == s)[:, None] & (dest.target[cols][None, :] != xs[near][:, None])
        on = to[mine][:, None] == via[near][None, :]  # (cables of s, K)
        return (on.astype(np.int32) @ b.astype(np.int32)) > 0

    for _ in range(4):  # until no entry moves (a move may open another transit)
        moved = 0
        for x, v, a in zip(xs.tolist(), via.tolist(), anchor.tolist(), strict=True):
            cols = np.flatnonzero(np.isin(ports[a, dest.lid], cab(a, v)) & (dest.target != x))
            if len(cols):
                _move(g, c, dest, ports, a, cols, banned(a, cols), cables, start)
                moved += len(cols)
            leave = np.isin(ports[v, dest.lid], cab(v, a))
            # v's neighbours' entries into v that leave it towards its anchor (a
            # move writes its own switch's row only: all found first)
            ws = np.unique(to[start[v]:start[v + 1]])
            into = np.flatnonzero((to == v) & np.isin(sw, ws))
            to_v = np.zeros((len(ws), 256), dtype=bool)
            to_v[np.searchsorted(ws, sw[into]), port[into]] = True
            enter = to_v[np.arange(len(ws))[:, None], ports[ws][:, dest.lid]] & leave[None, :]
            for i in np.flatnonzero(enter.any(axis=1) & (ws != x)).tolist():
                cols = np.flatnonzero(enter[i])
                _move(g, c, dest, ports, int(ws[i]), cols, banned(int(ws[i]), cols), cables,
                      start)
                moved += len(cols)
        if not moved:
            break
    # the turns: out of a service switch through its anchor, into one from its anchor
    for j in np.flatnonzero(turns).tolist():
        t = int(dest.target[j])
        lack = np.flatnonzero((c[:, t] == INF) & (g.rank >= 0) & (g.component == g.component[t]))
        lid, nid = int(dest.lid[j]), int(dest.nid[j])
        k = int(k_of[t])
        on_a = dest.lid[dest.target == anchor[k]] if k >= 0 else dest.lid[:0]
        if len(on_a):  # towards the destination's anchor, then up to it
            a, v = int(anchor[k]), int(via[k])
            reach = c[lack, a] < INF
            ports[lack[reach], lid] = ports[lack[reach], int(on_a[nid % len(on_a)])]
            up = cab(a, v)
            ports[a, lid] = up[nid % len(up)]
            if v != t:  # through the upper neighbour, down to the destination's switch
                down = cab(v, t)
                ports[v, lid] = down[nid % len(down)]
            lack = lack[~reach]
        for u in lack[k_of[lack] >= 0].tolist():  # to its own anchor first
            v, a = int(via[k_of[u]]), int(anchor[k_of[u]])
            if c[a, t] == INF:
                continue
            first = cab(u, a if v == u else v)
            ports[u, lid] = first[nid % len(first)]
            if v != u and c[v, t] == INF:
                down = cab(v, a)
                ports[v, lid] = down[nid % len(down)]
    return len(xs)
