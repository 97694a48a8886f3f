"""Nmodc's detours by load (beyond the paper): detour entries rechosen by
the destinations already on the links.

The closed form of :func:`~smroute.routing.detour.detour_routes` sends a
detour destination from a switch of layer ``k`` through group
``floor(t / Pi) mod n`` of the groups leading closer to the smaller layers.
On an upper switch ``Pi`` spans a leaf's end-ports, so every LID of a
target leaf leaves it through the same group, and the detours of many
source leaves meet on the one intermediate switch that group reaches (the
648-host study tree with 401 links removed: the detours of 8 source leaves
on one leaf's up-link, A2A 162 against dfsssp's 101).  The escape's routes
(up*/down* towards one root, for the targets no lane is left for) crowd
the same way near the root.

This pass keeps the layers and picks among the same closer ports, so the
lanes and their proof stay as they are; OpenSM's (df)sssp weighs its paths
alike:

* a link's load is the number of distinct destination LIDs crossing it from
  the switches carrying end-ports (the side of its congestion risk,
  ``min(sources, destinations)``, that detours add to);
* a path's cost is the sum of its links' loads; the entries of layer 0 are
  fixed, so their path costs are known first, then layer by layer the
  switches in increasing encoded cost (their next hops are decided before
  them) take the closer port of least cost;
* a port costs ``SPREAD`` more per LID of the same target the switch
  already sends through it (the closed form spreads a target's LIDs, which
  a shift permutation's neighbours are, over the groups);
* ties keep the closed form's port;
* destinations are placed in ``BLOCKS`` blocks dealt round-robin in NID
  order (the LIDs of one target in different blocks), each block's load
  added before the next is placed.

Measured with ``scripts/study_nmodc_dev.py`` on the study's detour throws:
distinct destinations beat flow counts (one per source end-port and
destination) as the load (1,728-host tree, link throw 17: A2A 144 -> 102,
SP 47 -> 36), and path sums beat the path's largest load (648-host tree,
16 throws: 7 against 3 worse than dfsssp in A2A).

Pure functions on arrays, vectorized over switches, ports and a block's
destinations; the loops run per block, layer, cost level and hop.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import Destinations, seen_cost
from smroute.routing.topology import SwitchGraph, next_switch

__all__ = ["BLOCKS", "link_destinations", "detours_by_load"]

#: Blocks of detour destinations placed at once.
BLOCKS = 16
#: Added to a port's cost per LID of the same target the switch already
#: sends through it (a shift permutation's neighbours; 1,728-host tree, 9
#: switch throws: SP 29 and 31 against 34 and 35 on two, A2A alike; 3 and
#: more raise A2A).
SPREAD = 1
_CHUNK_ELEMS = 1 << 22  # (source, destination) walks per chunk


def link_destinations(nxt: np.ndarray, ports: np.ndarray, lids: np.ndarray,
                      sources: np.ndarray, max_hops: int) -> np.ndarray:
    """Destinations per egress switch port ``(S, P)`` int64: how many of the
    LIDs ``lids`` ``(K,)`` cross each switch-to-switch link on their way from
    some switch of ``sources`` ``(R,)`` int64, along the tables ``ports``
    ``(S, W)`` uint8 and the switch links ``nxt`` ``(S, P)`` int32
    (:func:`~smroute.routing.topology.next_switch`), at most ``max_hops``
    links per walk."""
    n_s, n_p = nxt.shape
    count = np.zeros(n_s * n_p, dtype=np.int64)
    if not len(sources) or not len(lids):
        return count.reshape(n_s, n_p)
    step = max(1, _CHUNK_ELEMS // len(sources))
    for lo in range(0, len(lids), step):
        at = np.repeat(sources[:, None], len(lids[lo:lo + step]), axis=1).ravel()
        col = np.broadcast_to(lids[None, lo:lo + step], (len(sources), len(at) // len(sources))
                              ).ravel()
        keys: list[np.ndarray] = []
        for _ in range(max_hops):
            p = ports[at, col].astype(np.int64)
            y = np.where(p < n_p, nxt[at, np.minimum(p, n_p - 1)], -1)
            live = y >= 0
            if not live.any():
                break
            keys.append((at[live] * n_p + p[live]) << 16 | col[live])  # LIDs < 2**16
            at, col = y[live].astype(np.int64), col[live]
        if keys:
            count += np.bincount(np.unique(np.concatenate(keys)) >> 16, minlength=n_s * n_p)
    return count.reshape(n_s, n_p)


def detours_by_load(
    g: SwitchGraph, ports: np.ndarray, dest: Destinations, cols: np.ndarray,
    layer: np.ndarray, enc: tuple[np.ndarray, ...], top: np.ndarray, max_hops: int,
    blocks: int = BLOCKS,
) -> None:
    """Rechoose, in place in ``ports`` ``(S, W)``, the detour entries of the
    destinations ``cols`` ``(K,)`` (indices into ``dest``) as the module
    says.  ``layer`` ``(S, K)`` int8 and ``enc`` (per layer ``k >= 1`` the
    ``(S, K)`` uint8 encoded costs towards the smaller layers) are the
    :class:`~smroute.routing.detour.Layers` columns of each destination's
    target, ``top`` ``(K,)`` the largest layer routed per destination;
    ``max_hops`` bounds a detour's switch-to-switch hops."""
    nxt = next_switch(g)
    n_p = int(np.flatnonzero((nxt != -1).any(axis=0)).max(initial=0)) + 1
    nxt = np.ascontiguousarray(nxt[:, :n_p])
    sources = np.unique(g.ep_switch)
    lids = dest.lid[cols]
    load = link_destinations(nxt, ports, np.setdiff1d(dest.lid[~dest.is_switch], lids),
                             sources, max_hops)
    is_down = (nxt >= 0) & (g.rank[np.maximum(nxt, 0)] < g.rank[:, None])  # (S, P)
    tgt = np.unique(dest.target[cols], return_inverse=True)[1].astype(np.int64)
    order = np.argsort(dest.nid[cols], kind="stable")
    n_b = min(blocks, len(cols))
    blk = np.empty(len(cols), dtype=np.int64)
    blk[order] = np.arange(len(cols)) % max(n_b, 1)
    # each target's LIDs by block: those of earlier blocks are placed
    by_t = np.lexsort((blk, tgt))
    t_key = tgt[by_t] * n_b + blk[by_t]
    first = np.searchsorted(tgt[by_t], np.arange(int(tgt.max(initial=0)) + 1))
    for b in range(n_b):
        j = order[b::blocks]
        start = first[tgt[j]]
        n_prev = np.searchsorted(t_key, tgt[j] * n_b + b) - start
        r = np.arange(int(n_prev.max(initial=0)))[None, :]
        prev = np.where(r < n_prev[:, None],
                        lids[by_t[np.minimum(start[:, None] + r, len(cols) - 1)]], -1)
        _place(nxt, is_down, load, ports, lids[j], prev, layer[:, j],
               tuple(e[:, j] for e in enc), top[j], max_hops)
        load += link_destinations(nxt, ports, lids[j], sources, max_hops)


def _path_cost(nxt: np.ndarray, load: np.ndarray, ports: np.ndarray, lids: np.ndarray,
               rows: np.ndarray, max_hops: int) -> np.ndarray:
    """``(len(rows), K)`` int64: the loads summed along the routes from
    switches ``rows`` to ``lids`` ``(K,)`` (switch links only)."""
    n_p = nxt.shape[1]
    at = np.repeat(rows[:, None], len(lids), axis=1)
    col = np.broadcast_to(lids[None, :], at.shape)
    cost = np.zeros(at.shape, dtype=np.int64)
    live = np.ones(at.shape, dtype=bool)
    for _ in range(max_hops):
        p = ports[at, col].astype(np.int64)
        y = np.where(live & (p < n_p), nxt[at, np.minimum(p, n_p - 1)], -1)
        live = y >= 0
        if not live.any():
            break
        cost += np.where(live, load[at, np.minimum(p, n_p - 1)], 0)
        at = np.where(live, y, 0)
    return cost


def _place(nxt: np.ndarray, is_down: np.ndarray, load: np.ndarray, ports: np.ndarray,
           lids: np.ndarray, prev: np.ndarray, layer: np.ndarray, enc: tuple[np.ndarray, ...],
           top: np.ndarray, max_hops: int) -> None:
    """Place one block: destinations ``lids`` ``(K,)``, the LIDs of the same
    targets placed before ``prev`` ``(K, R)`` (-1 padding), their ``layer``
    ``(S, K)``, ``enc`` and ``top`` ``(K,)``."""
    n_s, n_p = nxt.shape
    cost = np.full((n_s, len(lids)), np.iinfo(np.int64).max // 4, dtype=np.int64)
    zero = layer == 0
    r0 = np.flatnonzero(zero.any(axis=1))
    if len(r0):
        cost[r0] = np.where(zero[r0], _path_cost(nxt, load, ports, lids, r0, max_hops), cost[r0])
    sw_nxt = np.maximum(nxt, 0)
    every = np.arange(n_p)[None, :]
    for lay_k, e in enumerate(enc, start=1):
        mine = (layer == lay_k) & (lay_k <= top)[None, :]
        for v in np.unique(e[mine]):
            xs, js = np.nonzero(mine & (e == v))
            seen = seen_cost(e[sw_nxt[xs], js[:, None]], is_down[xs])  # (E, P)
            closer = (nxt[xs] >= 0) & (seen < v)
            cand = load[xs] + cost[sw_nxt[xs], js[:, None]]
            row = np.arange(len(xs))
            spread = np.zeros(cand.shape, dtype=np.int64)
            for q in prev[js].T:  # one earlier LID of the target per row
                p = ports[xs, q].astype(np.int64)
                on = (q >= 0) & (p < n_p)
                spread[row[on], p[on]] += SPREAD
            # ties keep the closed form's port: cost * 2 + (not it)
            cur = ports[xs, lids[js]].astype(np.int64)
            key = np.where(closer, (cand + spread) * 2 + (every != cur[:, None]),
                           np.iinfo(np.int64).max)
            best = np.argmin(key, axis=1)
            has = closer[row, best]
            xs, js, best = xs[has], js[has], best[has]
            ports[xs, lids[js]] = best.astype(ports.dtype)
            cost[xs, js] = cand[row[has], best]
