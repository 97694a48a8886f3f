"""Routes that cross once between two switches of one rank (mode ``tree+cross``).

A tree whose top is several trees joined by cables between their upper
switches (Dragonfly+: groups of leaves and spines, every spine cabled to
spines of other groups; two fat trees joined at their cores) has no
up*/down* path in its ranks between the trees: the tree's graph leaves
the cables within a rank out.  Where the tree has no path from a switch to
a target, its entry goes *up\\*, across one cable within a rank, then
down\\**, a shortest such route: up to a switch with a cable to a switch
above the target (one that reaches it going down only), across it, down.

**Free of credit loops on one VL, with the tree's routes.**  Order the
channels: the up cables by the rank they leave (ascending), then the
cables within a rank, then the down cables by the rank they leave
(descending).  Every up*/down* route of the tree and every crossing route
takes its channels in that order (a route that crossed goes down only:
the switch it reaches is above the target; a switch that has no path goes
up only to switches that have none either, since one with a path would
give it one), so each channel dependency goes forward: the dependency
graph is acyclic.  The mode chain checks it again on the tables
(:func:`~smroute.routing.orient.accept`).

**Balance.**  A switch's candidates towards a target are its up groups
to switches one hop nearer and its groups across to switches above the
target at the right distance, in its group order; a destination takes
candidate ``(nid // Pi[s]) mod n`` and, within the group, port ``(nid //
(Pi[s] n)) mod count``: Dmodc's rule over the crossing routes' closer
groups (``Pi`` the engine's dividers).

**What they leave.**  An end-port on an upper switch without a cable to
the target's group (an aggregation node or a UFM host on a spine of a
canonical Dragonfly+, whose spines each reach only some groups) has no
such route.  :func:`fill_ordered` gives the switches without one routes
up*/down* in :func:`cross_order`, an order of the switches every route
above is up*/down* in already: every route, old and new, is then
up*/down* in one order, free of credit loops on one VL.  They may cross
several cables within a rank, so they can be long.

The mode chain's steps (:mod:`smroute.routing.modes`): :func:`crossing`
(the crossing routes, and the destinations they leave), then
:func:`with_detours` (VLs) or :func:`filled` (one VL) for those.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smroute.fabric.graph import bfs_distance, components, first_per_group
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import NeededPairs
from smroute.routing import orient
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.detour import route_detours
from smroute.routing.dmodc import INF, UP_PHASE, Destinations, choose, relax, settle
from smroute.routing.topology import SwitchGraph, next_switch
from smroute.routing.vlassign import VirtualLanes

__all__ = ["Crossing", "cross_costs", "cross_order", "crossing", "fill_ordered", "filled",
           "route_across", "with_detours"]

#: (candidate group, target) pairs :func:`route_across` holds at once (bounds its memory)
CHUNK = 1 << 21


def _cross_groups(g: SwitchGraph, every: SwitchGraph) -> np.ndarray:
    """``(X,)`` int64: the groups of ``every`` (a graph of every cable of
    ``g``'s fabric) that join two routed switches of one rank of ``g``."""
    sw, rem = every.grp_switch, every.grp_remote
    return np.flatnonzero((g.rank[sw] == g.rank[rem]) & (g.rank[sw] >= 0) & (sw != rem))


def cross_costs(g: SwitchGraph, every: SwitchGraph, c: np.ndarray,
                targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(down, across)``, ``(S, T)`` uint8 each towards the switches
    ``targets`` ``(T,)``: the hop count of a down-only path (:data:`INF`
    if none), and of a shortest route up*, across one cable of ``every``
    between two switches of one rank of ``g``, down* (:data:`INF` if none);
    ``c``: the tree's encoded costs."""
    n = g.n_switches
    cols = np.take(c, targets, axis=1)
    down_ext = np.full((n + 1, len(targets)), INF, dtype=np.uint8)
    down = down_ext[:n]
    np.copyto(down, cols, where=cols < UP_PHASE)
    across_ext = np.full_like(down_ext, INF)
    across = across_ext[:n]
    x = _cross_groups(g, every)
    # one hop across to a switch above the target, then down
    relax(across, every.grp_remote[x], every.grp_switch[x], down_ext)
    lo, hi = g.up_pairs()
    hi_rank = g.rank[hi]
    for r in range(g.max_rank, 0, -1):  # then up to such a switch: from the top down
        sel = hi_rank == r
        relax(across, hi[sel], lo[sel], across_ext)
    return down, across


def route_across(g: SwitchGraph, every: SwitchGraph, c: np.ndarray, pi: np.ndarray,
                 dest: Destinations, ports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Give every routed switch without a path in the tree (costs ``c``
    :data:`INF`) to a destination of ``dest`` its crossing route's entry
    where it has one (module doc), in place in ``ports``; ``every``: a
    graph with every cable (:func:`~smroute.routing.topology.rooted_graph`).
    Returns ``(crossed, costs)``: ``(D,)`` bool, the destinations some entry
    was given, and ``c`` with those entries' hop counts where it had none
    (as up*/down* costs, :data:`UP_PHASE` plus the hops: what the detours
    keep as a path, :mod:`~smroute.routing.detour`)."""
    n = g.n_switches
    got = np.zeros(len(dest.lid), dtype=bool)
    routed = g.rank >= 0
    x = _cross_groups(g, every)
    if not len(x) or not len(dest.lid):
        return got, c
    same = g.component[:, None] == g.component[None, :]
    lacking = ((c == INF) & same & routed[:, None]).any(axis=0)
    targets = np.flatnonzero(lacking)
    if not len(targets):
        return got, c
    down, across = cross_costs(g, every, c, targets)
    fill = (np.take(c, targets, axis=1) == INF) & (across < INF) & routed[:, None]
    if not fill.any():
        return got, c
    costs = c.copy()
    costs[:, targets] = np.where(fill, across + np.uint8(UP_PHASE), costs[:, targets])
    # the candidate groups, by switch: its up groups (g's order), then those across
    up = np.flatnonzero((g.rank[g.grp_remote] > g.rank[g.grp_switch]) & routed[g.grp_switch])
    k_sw = np.concatenate([g.grp_switch[up], every.grp_switch[x]])
    k_rem = np.concatenate([g.grp_remote[up], every.grp_remote[x]])
    k_first = np.concatenate([g.grp_port_first[up], len(g.grp_ports) + every.grp_port_first[x]])
    k_count = np.concatenate([g.grp_port_count[up], every.grp_port_count[x]])
    k_ports = np.concatenate([g.grp_ports, every.grp_ports])
    o = np.argsort(k_sw, kind="stable")
    k_sw, k_rem, k_first, k_count = k_sw[o], k_rem[o], k_first[o], k_count[o]
    is_up = np.concatenate([np.ones(len(up), bool), np.zeros(len(x), bool)])[o]
    first_k = np.searchsorted(k_sw, np.arange(n))
    last_k = np.searchsorted(k_sw, np.arange(n), side="right")
    col = np.full(n, -1, dtype=np.int64)
    col[targets] = np.arange(len(targets))
    tcol = col[dest.target]
    dests = np.flatnonzero(tcol >= 0)
    dests = dests[np.argsort(tcol[dests], kind="stable")]
    width = max(1, CHUNK // max(len(k_sw), 1))  # targets a block: (K, width) arrays
    starts = np.arange(0, len(targets), width)
    cuts = np.searchsorted(tcol[dests], np.append(starts, len(targets)))
    for b, lo, hi in zip(starts.tolist(), cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        d = dests[lo:hi]
        cols = slice(b, b + width)
        f, acr = fill[:, cols], across[:, cols]
        # (K, width): the group leads one hop nearer on a crossing route
        nearer = np.where(is_up[:, None], acr[k_rem], down[k_rem, cols]).astype(np.int16) + 1
        cand = f[k_sw] & (nearer == acr[k_sw])
        ti = tcol[d] - b
        s_i, d_i = np.nonzero(f[:, ti])
        if not len(s_i):
            continue
        k, r = choose(cand, first_k, last_k, s_i, ti[d_i], dest.nid[d[d_i]], pi)
        ports[s_i, dest.lid[d[d_i]]] = k_ports[k_first[k] + r % k_count[k]]
        got[d[np.unique(d_i)]] = True
    return got, costs


def cross_order(g: SwitchGraph, every: SwitchGraph) -> np.ndarray:
    """``(S,)`` int64: each switch's place in a total order of the switches:
    by ``g``'s rank from the top down, then by its hops from the root of its part of the graph
    of cables of ``every`` within that rank (the switch with the most such
    cables, the lowest GUID on a tie), then by GUID.  Every route of the
    tree and every crossing route is up*/down* in it (up: towards a lower
    place): a crossing route's cable across goes up or down in it, and the
    route goes up only before it, down only after."""
    n = g.n_switches
    x = _cross_groups(g, every)
    a, b = every.grp_switch[x], every.grp_remote[x]
    part = components(n, a, b)
    deg = np.bincount(a, weights=every.grp_port_count[x], minlength=n)
    o = np.lexsort((g.sw_guid, -deg, part))
    level = bfs_distance(n, a, b, first_per_group(o, part[o]))
    pos = np.empty(n, dtype=np.int64)
    pos[np.lexsort((g.sw_guid, level, -g.rank))] = np.arange(n)
    return pos


def fill_ordered(g: SwitchGraph, every: SwitchGraph, costs: np.ndarray, pi: np.ndarray,
                 dest: Destinations, ports: np.ndarray,
                 cols: np.ndarray) -> int:
    """Give every routed switch without a path to a destination of ``cols``
    ``(D,)`` bool (``costs`` :data:`INF`: the tree's costs with the crossing
    routes', :func:`route_across`) an entry up*/down* in
    :func:`cross_order`'s order, over every cable of ``every``, joining the
    routes of ``ports`` where they are up*/down* from there on, in place.

    The switches whose entry goes down in the order keep their route: a new
    route may enter them by any cable; those whose entry goes up, only by a
    cable up.  A switch without a path goes down where it can (to a switch
    whose route goes down from there on, or to one without a path that goes
    down), else up, over the cables one hop nearer, Dmodc's rule among them
    (:func:`~smroute.routing.dmodc.choose`).  Every route, the kept ones and the new, is then
    up*/down* in one order of the switches: their channel dependencies are
    acyclic.  Returns the most switch hops of a new route.
    """
    n = g.n_switches
    longest = 0
    idx = np.flatnonzero(cols)
    routed = g.rank >= 0
    e = np.flatnonzero(routed[every.grp_switch] & routed[every.grp_remote]
                       & (every.grp_switch != every.grp_remote))
    if not len(idx) or not len(e):
        return longest
    e = e[np.argsort(every.grp_switch[e], kind="stable")]
    s_e, r_e = every.grp_switch[e], every.grp_remote[e]
    pos = cross_order(g, every)
    down_e = pos[r_e] > pos[s_e]
    first_k = np.searchsorted(s_e, np.arange(n))
    last_k = np.searchsorted(s_e, np.arange(n), side="right")
    nxt_of = next_switch(every)
    width = max(1, CHUNK // len(e))
    for b in range(0, len(idx), width):
        d = idx[b:b + width]
        lids, tgt = dest.lid[d], dest.target[d]
        cst = np.take(costs, tgt, axis=1)
        has = (cst < INF) & routed[:, None]
        free = ~has & routed[:, None] & (g.component[:, None] == g.component[tgt][None, :])
        if not free.any():
            continue
        hops = cst & np.uint8(UP_PHASE - 1)
        nxt = nxt_of[np.arange(n)[:, None], ports[:, lids]]
        ready = has & np.where(nxt >= 0, pos[np.maximum(nxt, 0)] > pos[:, None], True)
        dn = settle(np.where(ready, hops, INF).astype(np.uint8), r_e[down_e], s_e[down_e],
                    free=free)
        anyc = settle(np.where(has, hops, dn).astype(np.uint8), r_e[~down_e], s_e[~down_e],
                      free=free & (dn == INF))
        fill = free & (anyc < INF)
        if not fill.any():
            continue
        dn16, any16 = dn.astype(np.int16), anyc.astype(np.int16)
        via_down = (dn16[s_e] < INF) & down_e[:, None] & (dn16[r_e] + 1 == dn16[s_e])
        via_up = (dn16[s_e] == INF) & ~down_e[:, None] & (any16[r_e] + 1 == any16[s_e])
        cand = fill[s_e] & (via_down | via_up)
        s_i, t_i = np.nonzero(fill)
        k, r = choose(cand, first_k, last_k, s_i, t_i, dest.nid[d[t_i]], pi)
        ports[s_i, lids[t_i]] = every.grp_ports[every.grp_port_first[e[k]]
                                                + r % every.grp_port_count[e[k]]]
        longest = max(longest, int(anyc[fill].max()))
    return longest


@dataclass(frozen=True, eq=False)
class Crossing:
    """Tables with the routes up*, across one cable within a rank, down*
    (:func:`route_across`) where the tree has none: ``ports``, the
    destinations given some (``crossed``), those of the needed ones with
    needed pairs they leave undelivered (``left``), ``(D,)`` bool each, and
    the tree's costs with theirs (``costs``)."""

    ports: np.ndarray
    crossed: np.ndarray
    left: np.ndarray
    costs: np.ndarray


def crossing(fabric: Fabric, g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
             need: np.ndarray, needed: NeededPairs, ports: np.ndarray,
             on: SwitchGraph) -> Crossing | None:
    """The tables ``ports`` with the routes up*, across one cable within a
    rank, down* where the tree has none (walked on ``on``,
    :func:`~smroute.routing.orient.walk_graph`), for the destinations
    ``need``; ``None`` where there are none, or they serve nothing, or serve
    every needed pair with a credit loop (which the proof rules out)."""
    if on is g:  # no cable within a rank
        return None
    trial = ports.copy()
    crossed, costs = route_across(g, on, c, pi, dest, trial)
    if not crossed.any():
        return None
    left = need & (orient.undelivered(g, dest, trial, need, needed, c, on) > 0)
    if not left.any():
        walked = need | (crossed & ~dest.is_switch)
        if orient.accept(fabric, g, dest, trial, walked, needed, c,
                         orient.fixed_routes(fabric, g, trial, dest.lid[walked]), on):
            return None
    return Crossing(trial, crossed, left, costs)


def filled(fabric: Fabric, g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
           x: Crossing, need: np.ndarray, needed: NeededPairs,
           on: SwitchGraph) -> tuple[np.ndarray, int] | None:
    """The tables ``x.ports`` where the switches the crossing routes leave
    without a route to the destinations ``x.left`` take routes up*/down* in
    :func:`cross_order` (:func:`fill_ordered`), and the most switch hops of
    a route (at least :func:`~smroute.routing.orient.turn_hops`), if every
    needed pair of the destinations ``need`` is then delivered free of
    credit loops; else ``None``."""
    trial = x.ports.copy()
    longest = fill_ordered(g, on, x.costs, pi, dest, trial, x.left)
    walked = need | (x.crossed & ~dest.is_switch)
    fixed = orient.fixed_routes(fabric, g, trial, dest.lid[walked], longest)
    if orient.accept(fabric, g, dest, trial, walked, needed, c, fixed, on):
        return None
    return trial, fixed.hops


def with_detours(fabric: Fabric, g: SwitchGraph, pi: np.ndarray, dest: Destinations,
                 x: Crossing, max_vls: int, g2: SwitchGraph, on: SwitchGraph,
                 by_load: bool) -> tuple[VirtualLanes, np.ndarray] | None:
    """With VLs (``max_vls`` >= 2): the tables ``x.ports`` where the switches
    the crossing routes leave without a route to the destinations ``x.left``
    take detours (:mod:`smroute.routing.detour`, the crossing routes kept as
    paths), and their lanes, if every pair is then routed and the channel
    dependencies over the lanes are acyclic; else ``None``."""
    if max_vls < 2:
        return None
    trial = x.ports.copy()
    lanes, short = route_detours(fabric, g, x.costs, pi, dest, x.left, trial, max_vls=max_vls,
                                 escape=g2, by_load=by_load, walk=on)
    if len(short) or not check_credit_loops(fabric, orient.as_tables(fabric, g, trial),
                                            lanes).ok:
        return None
    return lanes, trial
