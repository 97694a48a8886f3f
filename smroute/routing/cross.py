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
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import INF, UP_PHASE, Destinations, relax
from smroute.routing.topology import SwitchGraph

__all__ = ["cross_costs", "route_across"]

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
    n_k = len(k_sw)
    first_k = np.searchsorted(k_sw, np.arange(n))
    last_k = np.searchsorted(k_sw, np.arange(n), side="right")
    col = np.full(n, -1, dtype=np.int64)
    col[targets] = np.arange(len(targets))
    tcol = col[dest.target]
    dests = np.flatnonzero(tcol >= 0)
    dests = dests[np.argsort(tcol[dests], kind="stable")]
    width = max(1, CHUNK // max(n_k, 1))  # targets a block: (K, width) arrays
    starts = np.arange(0, len(targets), width)
    cuts = np.searchsorted(tcol[dests], np.append(starts, len(targets)))
    for b, lo, hi in zip(starts.tolist(), cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        d = dests[lo:hi]
        cols = slice(b, b + width)
        f, acr = fill[:, cols], across[:, cols]
        # (K, width): the group leads one hop nearer on a crossing route
        nearer = np.where(is_up[:, None], acr[k_rem], down[k_rem, cols]).astype(np.int16) + 1
        cand = f[k_sw] & (nearer == acr[k_sw])
        cum = np.vstack([np.zeros((1, cand.shape[1]), np.int64),
                         np.cumsum(cand, axis=0, dtype=np.int64)])
        base = cum[first_k]  # (S, width): candidates before the switch's first group
        count = cum[last_k] - base
        # per target, the running counts as one ascending sequence
        flat = (cum[1:].T + (np.arange(cand.shape[1]) * (n_k + 1))[:, None]).ravel()
        ti = tcol[d] - b
        s_i, d_i = np.nonzero(f[:, ti])
        if not len(s_i):
            continue
        t_i = ti[d_i]
        nid = dest.nid[d[d_i]]
        n_c = count[s_i, t_i]
        q = nid // pi[s_i]
        j = q % n_c
        k = np.searchsorted(flat, t_i * (n_k + 1) + base[s_i, t_i] + j + 1) - t_i * n_k
        ports[s_i, dest.lid[d[d_i]]] = k_ports[k_first[k] + (q // n_c) % k_count[k]]
        got[d[np.unique(d_i)]] = True
    return got, costs
