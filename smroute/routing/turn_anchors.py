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
cables per anchored switch carry no transit. The mode chain
(:func:`smroute.routing.modes.chain`) uses it only where ``tree+orient``
leaves needed pairs, and keeps it only where every needed pair is then
delivered and the channel-dependency check finds no cycle
(``research/notes/one-vl-turn-cables.md``).

Pure: arrays in, arrays out.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import INF, UP_PHASE, Destinations, seen_cost
from smroute.routing.topology import SwitchGraph

__all__ = ["anchor_turns", "anchors", "service_switches"]


def service_switches(g: SwitchGraph, dest: Destinations, turns: np.ndarray) -> np.ndarray:
    """``(X,)`` int64: the upper switches (rank above 0) that carry an
    end-port of ``turns`` ``(D,)`` bool other than an aggregation node."""
    ca = turns & ~dest.is_switch
    owner = dest.owner[ca]
    agg = g.ep_agg[owner] if len(g.ep_agg) else np.zeros(len(owner), dtype=bool)
    x = np.unique(dest.target[ca][~agg])
    return x[g.rank[x] > 0]


def _cables(g: SwitchGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per cable of ``grp_ports``: its switch, the switch behind it, its port."""
    return (np.repeat(g.grp_switch, g.grp_port_count),
            np.repeat(g.grp_remote, g.grp_port_count), g.grp_ports)


def anchors(g: SwitchGraph, xs: np.ndarray) -> np.ndarray:
    """``(X,)`` int64: per switch of ``xs``, its *anchor*: the lower
    neighbour whose hosts keep the most up capacity each once its cables
    to the switch carry no transit (its compute hosts over its up cables
    left, anchors taken before counted), then the lowest GUID; -1: none."""
    sw, to, _ = _cables(g)
    up_left = np.bincount(sw[g.rank[to] > g.rank[sw]], minlength=g.n_switches).astype(float)
    hosts = np.bincount(g.ep_switch[~g.ep_agg] if len(g.ep_agg) else g.ep_switch,
                        minlength=g.n_switches)
    out = np.full(len(xs), -1, dtype=np.int64)
    for k, x in enumerate(xs.tolist()):
        low = np.unique(to[(sw == x) & (g.rank[to] < g.rank[x]) & (g.rank[to] >= 0)])
        if not len(low):
            continue
        left = up_left[low] - np.bincount(sw[to == x], minlength=g.n_switches)[low]
        load = np.where(left > 0, hosts[low] / np.maximum(left, 1), np.inf)
        taken = np.isin(low, out[:k])
        a = int(low[np.lexsort((g.sw_guid[low], load, taken))[0]])
        up_left[a] -= np.count_nonzero((sw == a) & (to == x))
        out[k] = a
    return out


def _move(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray, s: int,
          cols: np.ndarray, banned: np.ndarray) -> None:
    """Move switch ``s``'s entries for the destinations ``cols`` ``(M,)``
    to cables not ``banned`` ``(cables of s, M)``: to those that lead closer
    (eq. 1), else to those of the lowest cost that keep the route
    up*/down* (down only where ``s`` has a down-only path); spread by NID.
    An entry with no such cable stays."""
    sw, to, port = _cables(g)
    mine = np.flatnonzero(sw == s)
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
                 turns: np.ndarray) -> int:
    """Route the destinations ``turns`` ``(D,)`` bool (those some needed
    pair reaches without an up*/down* path) through the anchors of their
    :func:`service_switches`, in place in ``ports`` ``(S, LIDs)``, the
    tree's tables (module doc); the number of switches anchored (0: none,
    ``ports`` untouched).  A switch without an up*/down* path to such a
    destination takes its route towards the destination's anchor (towards
    one of its end-ports, by NID), else, if anchored itself, its cable down
    to its own anchor; the others keep the tree's entries."""
    xs = service_switches(g, dest, turns)
    anchor = anchors(g, xs)
    xs, anchor = xs[anchor >= 0], anchor[anchor >= 0]
    if not len(xs):
        return 0
    sw, to, port = _cables(g)
    n = g.n_switches
    anchor_of = np.full(n, -1, dtype=np.int64)
    anchor_of[xs] = anchor

    def out_cable(s: int) -> np.ndarray:  # the ports of s towards its anchor
        return port[(sw == s) & (to == anchor_of[s])]

    def banned(s: int, cols: np.ndarray) -> np.ndarray:
        """(cables of s, M): cables into an anchored switch that carry
        only its own traffic (from its anchor) or whose entry leaves it
        towards its anchor (transit through it)."""
        mine = np.flatnonzero(sw == s)
        out = np.zeros((len(mine), len(cols)), dtype=bool)
        for k, i in enumerate(mine.tolist()):
            x = int(to[i])
            if anchor_of[x] < 0:
                continue
            out[k] = np.isin(ports[x, dest.lid[cols]], out_cable(x))
            if anchor_of[x] == s:
                out[k] |= dest.target[cols] != x
        return out

    for _ in range(4):  # until no entry moves (a move may open another transit)
        moved = 0
        for x, a in zip(xs.tolist(), anchor.tolist(), strict=True):
            into = port[(sw == a) & (to == x)]
            cols = np.flatnonzero(np.isin(ports[a, dest.lid], into) & (dest.target != x))
            if len(cols):
                _move(g, c, dest, ports, a, cols, banned(a, cols))
                moved += len(cols)
            leave = np.isin(ports[x, dest.lid], out_cable(x))
            for w in np.unique(to[sw == x]).tolist():
                cols = np.flatnonzero(leave & np.isin(ports[w, dest.lid],
                                                      port[(sw == w) & (to == x)]))
                if len(cols):
                    _move(g, c, dest, ports, w, cols, banned(w, cols))
                    moved += len(cols)
        if not moved:
            break
    # the turns: out of a service switch through its anchor, into one from its anchor
    for j in np.flatnonzero(turns).tolist():
        t = int(dest.target[j])
        lack = np.flatnonzero((c[:, t] == INF) & (g.rank >= 0) & (g.component == g.component[t]))
        lid = int(dest.lid[j])
        a = int(anchor_of[t])
        on_a = dest.lid[dest.target == a] if a >= 0 else dest.lid[:0]
        if len(on_a):  # towards the destination's anchor, then up to it
            reach = c[lack, a] < INF
            ports[lack[reach], lid] = ports[lack[reach], int(on_a[dest.nid[j] % len(on_a)])]
            lack = lack[~reach]
        for u in lack[anchor_of[lack] >= 0].tolist():  # down to its own anchor first
            if c[anchor_of[u], t] < INF:
                out = out_cable(u)
                ports[u, lid] = out[dest.nid[j] % len(out)]
    return len(xs)
