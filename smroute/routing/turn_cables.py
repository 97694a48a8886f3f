"""Cables kept for the turns into a service host's switch, on one VL.

UFM or storage hosts on a director's line ASICs (or any upper switch) have
traffic with another director's switches that no up*/down* path carries:
it goes down to a leaf and up again (a *turn*). On one VL, turns in both
directions close cycles of channel dependencies with the tree's routes: a
turn ``B line -> leaf -> A line`` feeds the cable ``leaf -> A line``, and
the tree's traffic going up from that leaf continues from it to A's spines,
from which the tree's routes come down to another leaf that turns back to B.

:func:`keep_turn_cables` breaks every such cycle at the service host's
switch ``x``. Every cable from a lower switch up to ``x`` carries only the
traffic that ends at ``x``'s end-ports: the lower switch's other entries
on it move to its other cables that lead closer (spread by NID). A turn
into ``x`` then ends its chain of dependencies at an end-port, so no cycle
passes through it, and the tree's routes stay up*/down*. It costs the
compute hosts a little (one cable of each leaf under ``x`` serves ``x``
alone), so the mode chain (:func:`smroute.routing.modes.chain`) uses it only
where ``tree+orient`` leaves needed pairs, and keeps it only where it then
serves every one (the channel-dependency check judges it as any
orientation; ``research/notes/one-vl-turn-cables.md``).

Pure: arrays in, arrays out.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import Destinations, seen_cost
from smroute.routing.topology import SwitchGraph

__all__ = ["keep_turn_cables", "service_switches"]


def service_switches(g: SwitchGraph, dest: Destinations, turns: np.ndarray) -> np.ndarray:
    """``(X,)`` int64: the upper switches (rank above 0) that carry an
    end-port of ``turns`` ``(D,)`` bool other than an aggregation node."""
    ca = turns & ~dest.is_switch
    owner = dest.owner[ca]
    agg = g.ep_agg[owner] if len(g.ep_agg) else np.zeros(len(owner), dtype=bool)
    x = np.unique(dest.target[ca][~agg])
    return x[g.rank[x] > 0]


def keep_turn_cables(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
                     turns: np.ndarray) -> int:
    """Keep every cable up to a :func:`service_switches` switch of ``turns``
    for the traffic that ends at that switch's end-ports, in place in
    ``ports`` ``(S, LIDs)`` (module doc); the number of cables kept.  An
    entry moves to a cable that leads closer (eq. 1 on the costs ``c``), so
    the routes stay minimal and up*/down*."""
    xs = service_switches(g, dest, turns)
    port_sw = np.repeat(g.grp_switch, g.grp_port_count)  # per cable of grp_ports
    port_to = np.repeat(g.grp_remote, g.grp_port_count)
    kept = np.isin(port_to, xs) & (g.rank[port_sw] < g.rank[port_to])
    for s in np.unique(port_sw[kept]).tolist():
        mine = port_sw == s
        to = np.full(256, -1, dtype=np.int64)  # the switch behind each port of s
        to[g.grp_ports[mine]] = port_to[mine]
        free = mine & ~kept
        free_port, free_to = g.grp_ports[free], port_to[free]
        entry = ports[s, dest.lid].astype(np.int64)
        on_kept = np.isin(entry, g.grp_ports[mine & kept])
        moved = np.flatnonzero(on_kept & (dest.target != to[entry]))
        if not len(moved) or not len(free_port):
            continue
        t = dest.target[moved]
        down = (g.rank[free_to] < g.rank[s])[:, None]
        closer = seen_cost(c[np.ix_(free_to, t)], down) < c[s, t][None, :]
        count = closer.sum(axis=0)
        ok = count > 0
        pick = np.where(ok, dest.nid[moved] % np.maximum(count, 1), 0)
        first = np.argmax(np.cumsum(closer, axis=0) > pick[None, :], axis=0)
        ports[s, dest.lid[moved[ok]]] = free_port[first[ok]]
    return int(kept.sum())
