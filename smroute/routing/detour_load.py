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
* a port costs ``DETOUR_SPREAD`` more per LID of the same target the switch
  already sends through it (the closed form spreads a target's LIDs, which
  a shift permutation's neighbours are, over the groups);
* ties keep the closed form's port;
* destinations are placed in ``DETOUR_BLOCKS`` blocks dealt round-robin in NID
  order (the LIDs of one target in different blocks), each block's load
  added before the next is placed.

Measured with ``research/study_nmodc_dev.py`` on the study's detour throws:
distinct destinations beat flow counts (one per source end-port and
destination) as the load (1,728-host tree, link throw 17: A2A 144 -> 102,
SP 47 -> 36), and path sums beat the path's largest load (648-host tree,
16 throws: 7 against 3 worse than dfsssp in A2A).

Also tried: a link's load as the distinct sources' end-ports, summed with
or the least of the destinations (its congestion risk): A2A worse on both
trees (648-host tree, 16 detoured throws: 5 and 7 against 1 worse than
dfsssp).

Pure functions on arrays, vectorized over switches, ports and a block's
destinations; the loops run per block, layer, cost level, cache-sized
chunk of entries and hop.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from smroute.routing.dmodc import Destinations, seen_cost
from smroute.routing.topology import SwitchGraph, next_switch
from smroute.routing.vlassign import distinct

__all__ = ["DETOUR_BLOCKS", "link_destinations", "detours_by_load"]

#: Blocks of detour destinations placed at once: the link load a placement
#: sees is updated between blocks (more blocks: better informed choices, at
#: a walk of the placed routes per block).
DETOUR_BLOCKS = 16
#: Added to a port's cost per LID of the same target the switch already
#: sends through it (a shift permutation's neighbours; 1,728-host tree, 9
#: switch throws: SP 29 and 31 against 34 and 35 on two, A2A alike; 3 and
#: more raise A2A).
DETOUR_SPREAD = 1
_CHUNK_ELEMS = 1 << 22  # (source, destination) walks per chunk
_ENTRIES = 1 << 14  # entries chosen at once


def _hops(nxt: np.ndarray, ports: np.ndarray, at: np.ndarray, lid: np.ndarray,
          max_hops: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Follow the tables ``ports`` ``(S, W)`` from switches ``at`` to LIDs
    ``lid`` (``(N,)`` each, int64) over the switch links ``nxt`` ``(S, P)``:
    per hop, ``(walk, switch, port)`` int64 of the walks leaving a switch by
    a switch link (a walk ends at a delivery, a dead end or ``max_hops``)."""
    n_p = nxt.shape[1]
    walk = np.arange(len(at))
    for _ in range(max_hops):
        p = ports[at, lid].astype(np.int64)
        y = np.where(p < n_p, nxt[at, np.minimum(p, n_p - 1)], -1)
        live = y >= 0
        if not live.any():
            return
        walk, at, p, lid, y = walk[live], at[live], p[live], lid[live], y[live]
        yield walk, at, p
        at = y.astype(np.int64)


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
    sources = np.unique(sources)
    step = max(1, _CHUNK_ELEMS // len(sources))
    for lo in range(0, len(lids), step):
        cl = lids[lo:lo + step]
        k = len(cl)
        # the walks from every source, each (switch, LID) followed once: in
        # rounds from the switches reached first (a switch's own walk crosses
        # every link the walks through it cross, within the hop bound), so
        # each crossing counts one distinct LID on its link
        seen = np.zeros((n_s, k), dtype=bool)
        at, ci = np.repeat(sources, k), np.tile(np.arange(k), len(sources))
        seen[at, ci] = True
        for _ in range(max_hops):
            p = ports[at, cl[ci]].astype(np.int64)
            y = np.where(p < n_p, nxt[at, np.minimum(p, n_p - 1)], -1)
            live = y >= 0
            at, p, ci, y = at[live], p[live], ci[live], y[live].astype(np.int64)
            count += np.bincount(at * n_p + p, minlength=n_s * n_p)
            new = ~seen[y, ci]
            reached = distinct(y[new] * k + ci[new])  # (two may reach one switch at once)
            at, ci = reached // k, reached % k
            seen[at, ci] = True
            if not len(at):
                break
    return count.reshape(n_s, n_p)


def detours_by_load(
    g: SwitchGraph, ports: np.ndarray, dest: Destinations, cols: np.ndarray,
    layer: np.ndarray, enc: tuple[np.ndarray, ...], top: np.ndarray, max_hops: int,
    blocks: int = DETOUR_BLOCKS,
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
        j = order[b::n_b]  # the LIDs with blk == b
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
    cost = np.zeros(len(rows) * len(lids), dtype=np.int64)
    for walk, x, p in _hops(nxt, ports, np.repeat(rows, len(lids)),
                            np.tile(lids, len(rows)), max_hops):
        cost[walk] += load[x, p]  # one hop per walk at a time
    return cost.reshape(len(rows), len(lids))


def _place(nxt: np.ndarray, is_down: np.ndarray, load: np.ndarray, ports: np.ndarray,
           lids: np.ndarray, prev: np.ndarray, layer: np.ndarray, enc: tuple[np.ndarray, ...],
           top: np.ndarray, max_hops: int) -> None:
    """Place one block: destinations ``lids`` ``(K,)``, the LIDs of the same
    targets placed before ``prev`` ``(K, R)`` (-1 padding), their ``layer``
    ``(S, K)``, ``enc`` and ``top`` ``(K,)``."""
    cost = np.zeros((nxt.shape[0], len(lids)), dtype=np.int64)
    zero = layer == 0
    r0 = np.flatnonzero(zero.any(axis=1))
    if len(r0):
        cost[r0] = np.where(zero[r0], _path_cost(nxt, load, ports, lids, r0, max_hops), 0)
    sw_nxt = np.maximum(nxt, 0)
    for lay_k, e in enumerate(enc, start=1):
        mine = (layer == lay_k) & (lay_k <= top)[None, :]
        for v in np.unique(e[mine]):
            xv, jv = np.nonzero(mine & (e == v))
            for lo in range(0, len(xv), _ENTRIES):  # cache-sized (entries, ports) blocks
                _choose(nxt, sw_nxt, is_down, load, cost, ports, lids, prev, e, int(v),
                        xv[lo:lo + _ENTRIES], jv[lo:lo + _ENTRIES])


def _choose(nxt: np.ndarray, sw_nxt: np.ndarray, is_down: np.ndarray, load: np.ndarray,
            cost: np.ndarray, ports: np.ndarray, lids: np.ndarray, prev: np.ndarray,
            e: np.ndarray, v: int, xs: np.ndarray, js: np.ndarray) -> None:
    """Choose the ports of the entries ``(xs, js)`` ``(E,)`` (switch, block
    column) of encoded cost ``v`` in ``e`` ``(S, K)`` among their closer
    ports (:func:`~smroute.routing.dmodc.seen_cost`); their path costs go to
    ``cost`` ``(S, K)``."""
    n_p = nxt.shape[1]
    seen = seen_cost(e[sw_nxt[xs], js[:, None]], is_down[xs])  # (E, P)
    # the (entry, closer port) pairs, entry after entry
    i, p = np.nonzero((nxt[xs] >= 0) & (seen < v))
    if not len(i):
        return
    # earlier LIDs of the target through each port, per entry
    taken = np.zeros((len(xs), n_p), dtype=np.int64)
    row = np.arange(len(xs))
    for q in prev[js].T:
        tp = ports[xs, np.maximum(q, 0)]
        on = (q >= 0) & (tp < n_p)
        taken[row[on], tp[on]] += DETOUR_SPREAD
    x, j = xs[i], js[i]
    cand = load[x, p] + cost[nxt[x, p], j]
    # least cost first, ties to the closed form's port
    key = (cand + taken[i, p]) * 2 + (p != ports[x, lids[j]])
    first = np.flatnonzero(np.r_[True, i[1:] != i[:-1]])
    low = np.repeat(np.minimum.reduceat(key, first), np.diff(np.r_[first, len(i)]))
    at = np.flatnonzero(key == low)
    at = at[np.r_[True, i[at][1:] != i[at][:-1]]]  # the first least pair per entry
    x, j, p = x[at], j[at], p[at]
    ports[x, lids[j]] = p.astype(ports.dtype)
    cost[x, j] = cand[at]
