"""Shortest paths for a direct network (mode ``shortest``).

A torus, a hypercube, a ring: every switch carries hosts, so the fabric is
no tree and no switch is above the others.  Up*/down* routes
(mode ``updown``) are free of credit loops on one VL, but a switch that has
a path down takes it, so they spread over few cables, and they may be
longer than the cable graph's shortest paths.  Every destination is routed
over shortest paths where that stays free of credit loops, in the
up*/down* orientation of the routing's graph (every cable up or down,
:func:`~smroute.routing.topology.rooted_graph`):

* **On one VL**, a target takes shortest routes where each of them is
  up*/down* in that orientation: per target, ``down[s]`` is the hops of a
  shortest path from ``s`` that goes down only (:data:`INF` where none is
  shortest), ``legal[s]`` of one that goes up*, then down* (idem).  Where
  ``legal`` is the shortest-path hop count from every switch, a switch
  with a shortest path down takes one of its groups down one hop nearer,
  any other one of its groups up to a switch with a legal shortest path
  one hop nearer: every route then goes up*, then down*, and is shortest.
* **With VLs**, every destination takes shortest routes (its candidates:
  every group one hop nearer), and a route that turns up after coming down
  moves to a higher VL: per target switch ``t``, ``layer[s, t]`` is the
  most turns a route of one of its LIDs takes after leaving ``s`` (the
  largest over its LIDs, so that ``layer[s] >= layer[n] + turn`` along
  each of them), and the hop out of ``s`` wants VL ``K_t - layer[s, t]``
  (``K_t`` the largest layer of a switch): nondecreasing along every route
  and one higher at each turn.  So every VL carries up*/down* segments of
  one orientation only (acyclic) and no packet goes back to a lower VL.
  The SLs and SL-to-VL tables are the detours' (:mod:`smroute.routing.vlassign`:
  targets that agree share an SL; a switch with no turn ahead uses SL 0).
  A target whose turns need more VLs than allowed, or that finds no SL,
  takes the one-VL rule where it applies.

A switch chooses among its candidates as Dmodc does
(:func:`~smroute.routing.dmodc.choose`, every divider 1: the switches of a
direct network are no levels of a tree): candidate ``nid mod n``, port
``(nid // n) mod count`` within it.  The other targets keep
their up*/down* routes, on SL 0: VL 0 carries up*/down* segments of the one
orientation only.
"""

from __future__ import annotations

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.routing.detour import peer_ports
from smroute.routing.dmodc import INF, NO_ROUTE, Destinations, choose, settle
from smroute.routing.topology import SwitchGraph, next_switch
from smroute.routing.vlassign import N_SLS, VirtualLanes, colour, lanes, target_profiles

__all__ = ["hop_costs", "legal_costs", "route_over_vls", "route_shortest", "turn_layers"]

#: (port group, target) pairs, or (switch, LID) pairs, a block holds at once
CHUNK = 1 << 22


def hop_costs(g: SwitchGraph, targets: np.ndarray) -> np.ndarray:
    """``(S, T)`` uint8: the hops of a shortest path over every cable of
    ``g`` from each switch to the switches ``targets`` ``(T,)`` (:data:`INF`
    where none, or 255 hops or more)."""
    c = np.full((g.n_switches, len(targets)), INF, dtype=np.uint8)
    c[targets, np.arange(len(targets))] = 0
    return settle(c, g.grp_remote, g.grp_switch)


def legal_costs(g: SwitchGraph, targets: np.ndarray,
                hops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(down, legal)``, ``(S, T)`` uint8 each: the hops of a shortest path
    (``hops``, :func:`hop_costs`) from each switch to each target that goes
    down only in ``g``'s orientation through switches that have one, and of
    one that goes up*, then down* so; :data:`INF` where there is none."""
    up = g.rank[g.grp_remote] > g.rank[g.grp_switch]
    down = np.full(hops.shape, INF, dtype=np.uint8)
    down[targets, np.arange(len(targets))] = 0
    down = settle(down, g.grp_remote[~up], g.grp_switch[~up], shortest=hops)
    return down, settle(down, g.grp_remote[up], g.grp_switch[up], shortest=hops)


def route_shortest(g: SwitchGraph, dest: Destinations, ports: np.ndarray, hops: np.ndarray,
                   tgt_of: np.ndarray, cols: np.ndarray,
                   legal: tuple[np.ndarray, np.ndarray] | None = None) -> None:
    """Route the destinations ``cols`` ``(D,)`` int64 (of target column
    ``tgt_of[cols]``) over shortest paths, in place in ``ports`` (the
    target switches' own entries stay): a switch's candidates are its
    groups one hop nearer (``hops`` ``(S, T)``), or with ``legal`` (the
    ``(down, legal)`` of :func:`legal_costs`) those that keep the route
    up*/down* (module doc); Dmodc's rule among them, every divider 1."""
    n = g.n_switches
    pi = np.ones(n, dtype=np.int64)
    o = np.argsort(g.grp_switch, kind="stable")
    sw, rem = g.grp_switch[o], g.grp_remote[o]
    up = (g.rank[rem] > g.rank[sw])[:, None]
    first_k = np.searchsorted(sw, np.arange(n))
    last_k = np.searchsorted(sw, np.arange(n), side="right")
    cols = cols[np.argsort(tgt_of[cols], kind="stable")]
    targets = np.unique(tgt_of[cols])
    width = max(1, CHUNK // max(len(sw), n))
    for b in range(0, len(targets), width):
        tb = targets[b:b + width]
        d = cols[np.isin(tgt_of[cols], tb)]
        h = hops[:, tb].astype(np.int16)
        cand = h[rem] + 1 == h[sw]
        if legal is not None:
            dn, lg = (x[:, tb].astype(np.int16) for x in legal)
            via_down = dn[sw] < INF
            cand &= np.where(via_down, ~up & (dn[rem] + 1 == dn[sw]),
                             up & (lg[rem] + 1 == lg[sw]) & (lg[sw] < INF))
        cum = np.vstack([np.zeros((1, len(tb)), np.int64), np.cumsum(cand, axis=0)])
        count = cum[last_k] - cum[first_k]  # (S, W): candidates of each switch
        at = np.searchsorted(tb, tgt_of[d])
        live = (h > 0) & (h < INF) & (count > 0)
        s_i, k_i = np.nonzero(live[:, at])
        if not len(s_i):
            continue
        k, r = choose(cand, first_k, last_k, s_i, at[k_i], dest.nid[d[k_i]], pi)
        ports[s_i, dest.lid[d[k_i]]] = g.grp_ports[g.grp_port_first[o[k]]
                                                   + r % g.grp_port_count[o[k]]]


def turn_layers(g: SwitchGraph, ports: np.ndarray, lids: np.ndarray, hops: np.ndarray,
                tgt_of: np.ndarray, n_t: int) -> np.ndarray:
    """``(S, T)`` int16: per target switch (``tgt_of`` ``(D,)``: the column
    of each destination LID of ``lids``), the largest ``layer`` with
    ``layer[s] >= layer[n] + turn`` along every route towards one of its
    LIDs, ``n`` the next switch and ``turn`` whether the route turns up
    there after coming down in ``g``'s orientation (module doc); ``hops``
    ``(S, T)``: :func:`hop_costs` (the routes are shortest).  Columns in
    blocks of whole targets (a target's layer takes all its LIDs' routes)."""
    n = g.n_switches
    nxt = next_switch(g)
    layer = np.zeros((n, n_t), dtype=np.int16)
    o = np.argsort(tgt_of, kind="stable")
    bounds = np.flatnonzero(np.r_[True, np.diff(tgt_of[o]) != 0, True])
    rows = np.arange(n)[:, None]
    per = max(1, CHUNK // max(n, 1))
    lo = 0
    while lo < len(o):
        hi = int(bounds[np.searchsorted(bounds, lo + per, side="right") - 1])
        hi = hi if hi > lo else int(bounds[np.searchsorted(bounds, lo, side="right")])
        k = o[lo:hi]
        blk = ports[:, lids[k]].astype(np.int64)
        nx = np.where(blk == NO_ROUTE, -1, nxt[rows, np.minimum(blk, nxt.shape[1] - 1)])
        hop = np.where(nx >= 0, nx, rows)  # where each entry leads
        up = g.rank[hop] > g.rank[:, None]  # the hop out of the switch goes up
        down = g.rank[hop] < g.rank[:, None]
        tj = tgt_of[k]
        cc = hops[:, tj]
        on = (cc > 0) & (cc < INF) & (nx >= 0)
        for h in range(1, int(np.where(on, cc, 0).max(initial=0)) + 1):
            s_i, k_i = np.nonzero(on & (cc == h))
            m = hop[s_i, k_i]
            turn = down[s_i, k_i] & up[m, k_i]
            np.maximum.at(layer, (s_i, tj[k_i]), layer[m, tj[k_i]] + turn.astype(np.int16))
        lo = hi
    return layer


def route_over_vls(fabric: Fabric, g: SwitchGraph, dest: Destinations, ports: np.ndarray,
                   *, max_vls: int, max_sls: int = N_SLS
                   ) -> tuple[VirtualLanes | None, np.ndarray]:
    """Route the destinations over shortest paths in ``g``'s cables (module
    doc), in place in ``ports`` (the routing's up*/down* tables in ``g``'s
    orientation), with SLs and SL-to-VL tables within ``max_vls`` data VLs
    and ``max_sls`` SLs for the routes that turn.  Returns the lanes
    (``None``: no route turns) and ``(D,)`` bool, the destinations routed
    over shortest paths (the others keep their routes)."""
    targets, tgt_of = np.unique(dest.target, return_inverse=True)
    tgt_of = tgt_of.astype(np.int64)
    lids, n_t = dest.lid, len(targets)
    updown = ports[:, lids].copy()
    hops = hop_costs(g, targets)
    short = np.zeros(n_t, dtype=bool)
    lanes_of = None
    routed = g.rank >= 0
    if max_vls >= 2:  # every closer group a candidate; the turns over VLs
        route_shortest(g, dest, ports, hops, tgt_of, np.arange(len(lids)))
        layer = turn_layers(g, ports, lids, hops, tgt_of, n_t)
        top = layer.max(axis=0, initial=0).astype(np.int64)  # (any switch may send)
        from_sw = (layer >= 1) & (top < max_vls)[None, :]
        turning = from_sw.any(axis=0)
        if turning.any():
            n_p = int(fabric.num_ports[g.sw_node].max(initial=0)) + 1
            order = np.lexsort((g.sw_guid[targets], -from_sw.sum(axis=0), -top))
            t_sl, keys, vl = colour(target_profiles(g, ports, peer_ports(fabric, g), lids,
                                                    tgt_of, layer, top, from_sw, n_p, order),
                                    n_t, max_vls=max_vls, sls=max_sls - 1)
            turning &= t_sl > 0
            from_sw[:, ~turning] = False
            if turning.any():
                lid_target = np.full(ports.shape[1], -1, dtype=np.int32)
                lid_target[lids] = tgt_of
                lanes_of = lanes(g, ports.shape[1], targets, t_sl, lid_target, from_sw, keys,
                                 vl, n_p, detour_lids=lids[turning[tgt_of]],
                                 escape_lids=np.zeros(0, np.int64),
                                 max_hops=max(int(np.where(hops < INF, hops, 0).max(initial=0)),
                                              2 * g.max_rank + 2))  # (up*/down* kept)
        short = (top == 0) | turning
    # the others: shortest routes up*/down* in g's orientation, where every switch has one
    down, legal = legal_costs(g, targets, hops)
    whole = ~((legal == INF) & (hops < INF) & routed[:, None]).any(axis=0) & ~short
    left = np.flatnonzero(whole[tgt_of])
    route_shortest(g, dest, ports, hops, tgt_of, left, (down, legal))
    short |= whole
    back = ~short[tgt_of]
    ports[:, lids[back]] = updown[:, back]
    return lanes_of, short[tgt_of]
