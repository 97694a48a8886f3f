"""Dmodc (Gliksberg et al., HOTI 2019): costs, dividers, topological NIDs and
destinations; the closed-form routes of eq. (1)-(4) are in
:mod:`smroute.routing.kernel`.

All functions are pure: they take a :class:`~smroute.routing.topology.SwitchGraph`
(or arrays derived from it) and return arrays.

Notation (paper, Table 1): ``c[s, x]`` is the up*/down* hop count from switch
``s`` to switch ``x`` (the paper needs it for leaf switches ``x``; we compute it
for every switch so that switch LIDs are routed by the same rule); ``Pi[s]`` is
the divider of ``s``; ``t[n]`` the topological NID of end-port ``n``.

Costs are stored encoded (:func:`costs_and_dividers`): the hop count of a
down-only path where one exists, else :data:`UP_PHASE` plus the hop count of an
up*/down* path.  A switch whose target lies below it only goes down (to a
neighbour with a shorter down-only path); any other switch only goes up (to a
neighbour one hop nearer).  So a route that went down never turns up again,
also on irregular trees and with the rank-skipping links of the general
up*/down* orientation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smroute.errors import LmcMismatchError, RoutingError
from smroute.routing.topology import SwitchGraph

__all__ = [
    "INF",
    "UP_PHASE",
    "choose",
    "settle",
    "hop_counts",
    "NO_ROUTE",
    "MAX_UNICAST_LID",
    "Destinations",
    "costs_and_dividers",
    "costs_after_link",
    "dividers",
    "topological_nids",
    "destinations",
    "seen_cost",
]

#: Cost of an unreachable switch (uint8).
INF = 255
#: Added to the hop count of a cost whose path must first go up (uint8).
UP_PHASE = 128
#: LFT entry meaning "no route" (OpenSM's OSM_NO_PATH).
NO_ROUTE = 255
#: Highest unicast LID (0x0001-0xBFFF are unicast).
MAX_UNICAST_LID = 0xBFFF



def relax(c: np.ndarray, src: np.ndarray, dst: np.ndarray, ext: np.ndarray | None = None) -> None:
    """``c[dst] = min(c[dst], c[src] + 1)`` for every pair, saturating at INF.

    ``c``: ``(S, X)`` uint8, modified in place; ``ext``: ``(S + 1, X)``, ``c``
    and an all-INF row, if ``c`` is its view (else made here, a copy).  Pairs are grouped by ``dst``
    into a padded ``(targets, max degree)`` matrix of source rows (padding
    points at an all-INF row); per chunk of targets (256 KiB of rows, so the
    running minimum stays in the cache) the minimum is taken one source
    column at a time: 3-4x faster than gathering every source row at once
    and reducing (0.45 to 0.13 s on the 40,960-host tree).
    """
    if len(src) == 0:
        return
    order = np.argsort(dst, kind="stable")
    src, dst = src[order], dst[order]
    udst, first, deg = np.unique(dst, return_index=True, return_counts=True)
    width = int(deg.max())
    mat = np.full((len(udst), width), c.shape[0], dtype=np.int64)  # pad -> INF row
    col = np.arange(len(dst)) - np.repeat(first, deg)
    mat[np.repeat(np.arange(len(udst)), deg), col] = src
    if ext is None:
        ext = np.vstack([c, np.full((1, c.shape[1]), INF, dtype=c.dtype)])
    step = max(1, (256 << 10) // max(1, c.shape[1]))
    for i in range(0, len(udst), step):
        m = mat[i : i + step]
        cand = ext[m[:, 0]]
        for j in range(1, width):
            np.minimum(cand, ext[m[:, j]], out=cand)
        np.add(cand, 1, out=cand, where=cand < INF)
        d = udst[i : i + step]
        c[d] = np.minimum(c[d], cand)


def settle(c: np.ndarray, src: np.ndarray, dst: np.ndarray, *, free: np.ndarray | None = None,
           shortest: np.ndarray | None = None) -> np.ndarray:
    """:func:`relax` over the pairs ``src -> dst`` until nothing changes (a
    new array): only the entries ``free`` (bool, like ``c``) take new values
    where given; with ``shortest`` (hop counts, like ``c``), a value other
    than the entry's there is :data:`INF` after each pass."""
    while True:
        new = c.copy()
        relax(new, src, dst)
        if free is not None:
            new = np.where(free, new, c)
        if shortest is not None:
            new[new != shortest] = INF
        if np.array_equal(new, c):
            return c
        c = new


def choose(cand: np.ndarray, first_k: np.ndarray, last_k: np.ndarray, s_i: np.ndarray,
           t_i: np.ndarray, nid: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dmodc's rule over candidate groups: ``cand`` ``(K, W)`` bool, group
    ``k`` (sorted by switch; a switch's groups ``first_k[s]:last_k[s]``) a
    candidate in column ``w``; per entry (switch ``s_i``, column ``t_i``,
    NID ``nid``, ``(E,)`` each) with at least one candidate: the group,
    candidate ``(nid // pi[s]) mod n`` of its ``n``, and what picks the port
    within it (``mod`` its port count): ``nid // (pi[s] n)``."""
    n_k = cand.shape[0]
    cum = np.vstack([np.zeros((1, cand.shape[1]), np.int64),
                     np.cumsum(cand, axis=0, dtype=np.int64)])
    base = cum[first_k]  # (S, W): candidates before the switch's first group
    count = cum[last_k] - base
    # per column, the running counts as one ascending sequence
    flat = (cum[1:].T + (np.arange(cand.shape[1]) * (n_k + 1))[:, None]).ravel()
    n_c = count[s_i, t_i]
    q = nid // pi[s_i]
    j = q % n_c
    k = np.searchsorted(flat, t_i * (n_k + 1) + base[s_i, t_i] + j + 1) - t_i * n_k
    return k, q // n_c


def costs_and_dividers(g: SwitchGraph) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1: up*/down* costs and dividers (max reduction).

    Returns ``(c, Pi)``: ``c`` shape ``(S, S)`` uint8 encoded costs from every
    switch to every switch (module doc; :func:`hop_counts` decodes them;
    :data:`INF` if no up*/down* path); ``Pi`` shape ``(S,)`` int64.  Leaves
    have ``Pi = 1``; going up, ``Pi[s'] = max over children s of Pi[s] * n_up[s]``.
    Up links are relaxed by the rank of their lower end (ascending), then by
    the rank of their upper end (descending), so links that skip ranks work too.
    """
    return _column_costs(g, np.arange(g.n_switches)), dividers(g)


def dividers(g: SwitchGraph, arity: np.ndarray | None = None) -> np.ndarray:
    """Algorithm 1's dividers ``(S,)`` int64 (:func:`costs_and_dividers`):
    1 at the leaves, going up ``Pi[s'] = max over children s of Pi[s] *
    arity[s]``, with ``arity`` ``(S,)`` the up-counts ``g.n_up`` (Dmodc) or
    the nominal arities (Nmodc, :mod:`smroute.routing.nmodc.nominal`)."""
    arity = g.n_up if arity is None else arity
    pi = np.ones(g.n_switches, dtype=np.int64)
    lo, hi = g.up_pairs()
    lo_rank = g.rank[lo]
    for r in range(g.max_rank):
        sel = lo_rank == r
        np.maximum.at(pi, hi[sel], pi[lo[sel]] * arity[lo[sel]])
    return pi


def _column_costs(g: SwitchGraph, cols: np.ndarray) -> np.ndarray:
    """The encoded costs ``(S, len(cols))`` uint8 from every switch to the
    switches ``cols`` ``(X,)`` int64 (:func:`costs_and_dividers`'s columns:
    each column is relaxed on its own)."""
    n = g.n_switches
    c_ext = np.full((n + 1, len(cols)), INF, dtype=np.uint8)  # and an all-INF row (relax)
    c = c_ext[:n]
    ok = np.flatnonzero(g.rank[cols] >= 0)
    c[cols[ok], ok] = 0
    lo, hi = g.up_pairs()
    lo_rank, hi_rank = g.rank[lo], g.rank[hi]
    for r in range(g.max_rank):
        sel = lo_rank == r
        relax(c, lo[sel], hi[sel], c_ext)
    up_ext = c_ext.copy()
    up = up_ext[:n]
    for r in range(g.max_rank, 0, -1):
        sel = hi_rank == r
        relax(up, hi[sel], lo[sel], up_ext)
        if g.mode != "tree":
            # a switch with a path down takes it (module doc): its cost is that
            # path's, also where a path up, then down is shorter (only in a
            # graph that is no tree), so the switches below count with its route
            rows = np.unique(lo[sel])
            cr = c[rows]
            up[rows] = np.where(cr < INF, cr, up[rows])
    if n and int(np.where(up < INF, up, 0).max(initial=0)) >= UP_PHASE - 1:
        raise RoutingError(f"up*/down* paths of {UP_PHASE - 1} hops or more: not a fabric "
                           "smroute can route")
    np.add(up, UP_PHASE, out=up, where=(c == INF) & (up < INF))
    np.copyto(up, c, where=c < INF)
    return up


def costs_after_link(g: SwitchGraph, c_old: np.ndarray, lower: int, upper: int) -> np.ndarray:
    """:func:`costs_and_dividers`' costs of ``g``, knowing ``c_old``, the
    costs of the same graph but for the link between switches ``lower`` and
    ``upper`` (ranked above it), which one of them has and the other has
    not (its last cable added or removed; same switches and ranks).

    Only the columns that can change are relaxed again: the targets below
    ``lower`` (``upper`` gained or lost down paths to them through it), and
    the others where ``lower``'s own cost changes.  A path from any switch to
    a target not below ``lower`` crosses the link only going up from
    ``lower`` (a switch that goes down never turns up), so where ``lower``'s
    cost stays, so does every other switch's.  ``lower``'s new cost there is
    one hop above its cheapest up-neighbour's in ``g``, whose costs to such
    targets do not cross the link.  Same result as a full computation
    (tested)."""
    lo, hi = g.up_pairs()
    best = hop_counts(c_old[hi[lo == lower]]).min(axis=0, initial=INF)
    mine = np.where(best < INF, (best + np.uint8(1)) | np.uint8(UP_PHASE), np.uint8(INF))
    below = c_old[lower] < UP_PHASE
    cols = np.flatnonzero(below | (mine != c_old[lower]))
    c = c_old.copy()
    if len(cols):
        c[:, cols] = _column_costs(g, cols)
    return c


def hop_counts(c: np.ndarray) -> np.ndarray:
    """Hop counts of encoded costs ``c`` (any shape, uint8): INF stays INF."""
    return np.where(c < INF, c & (UP_PHASE - 1), INF).astype(np.uint8)


def topological_nids(g: SwitchGraph, c: np.ndarray) -> np.ndarray:
    """Algorithm 2: topological NIDs of the end-ports.

    Leaves are taken in GUID order; each step takes the first remaining leaf
    ``l`` and every remaining leaf at cost ``<= mu`` from it (``mu`` = the
    smallest cost from ``l`` to another remaining leaf), and numbers their
    end-ports in port order; end-ports on non-leaf switches follow, and
    aggregation nodes come last (in the same switch order): they send no
    application traffic, and a slot of the leaves' modulus taken by one
    would leave an up-cable without any (a leaf of 17 hosts and its
    aggregation node over 18 up-cables).
    Returns ``t`` shape ``(E,)`` int64, a permutation
    of ``0 .. E-1`` aligned with ``g.ep_row``.
    """
    leaves = g.leaves
    x = leaves[np.argsort(g.sw_guid[leaves], kind="stable")]
    ordered: list[np.ndarray] = []
    while len(x):
        l0 = x[0]
        cl = c[l0, x].astype(np.int64)
        mu = cl[1:].min() if len(x) > 1 else INF
        take = cl <= mu
        take[0] = True
        ordered.append(x[take])
        x = x[~take]
    leaf_order = np.concatenate(ordered) if ordered else np.zeros(0, dtype=np.int64)
    # end-ports on other switches (aggregation nodes, hosts on spines) come
    # after every leaf's, by the rank and GUID of their switch
    others = np.setdiff1d(np.unique(g.ep_switch), leaf_order)
    others = others[np.lexsort((g.sw_guid[others], g.rank[others]))]
    pos = np.full(g.n_switches, -1, dtype=np.int64)
    pos[np.concatenate([leaf_order, others])] = np.arange(len(leaf_order) + len(others))
    # End-ports are sorted by (switch, switch port); re-sort by leaf
    # position, aggregation nodes after every other end-port
    o = np.lexsort((g.ep_switch_port, pos[g.ep_switch], g.ep_agg))
    t = np.empty(len(o), dtype=np.int64)
    t[o] = np.arange(len(o))
    return t


@dataclass(frozen=True, eq=False)
class Destinations:
    """Every destination LID to route, shape ``(D,)`` each.

    lid (int64), nid (int64, the NID used in the modulo: the end-port's
    topological NID plus the LMC offset, or one past the largest end-port
    NID (``E`` for topological NIDs) plus the switch order for switch
    LIDs), target (int64, switch id the destination hangs off or is),
    local_port (int64, port of ``target`` that delivers: the port linked to the
    end-port, or 0 for the switch itself), is_switch (bool), owner (int64:
    end-port index into the SwitchGraph's ``ep_*`` arrays, or switch id).
    """

    lid: np.ndarray
    nid: np.ndarray
    target: np.ndarray
    local_port: np.ndarray
    is_switch: np.ndarray
    owner: np.ndarray

    @property
    def max_lid(self) -> int:
        return int(self.lid.max()) if len(self.lid) else 0


def _expand_lmc(base: np.ndarray, lmc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per owner, its LIDs ``base .. base + 2**lmc - 1``: returns (owner index, offset)."""
    count = np.left_shift(1, lmc)
    owner = np.repeat(np.arange(len(base)), count)
    offset = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    return owner, offset


def destinations(
    g: SwitchGraph, t: np.ndarray, *, lmc: int | None = None, nid_stride: int = 1
) -> Destinations:
    """All destination LIDs of the fabric with the NIDs Dmodc uses.

    ``lmc``: if given, overrides every end-port's LMC (LIDs are then
    ``base .. base + 2**lmc - 1``); otherwise the fabric's own LMC is used.
    LID offset ``i`` of an end-port routes with NID ``t + i * nid_stride``, so
    the base LID keeps Dmodc's tables exactly.  Raises :class:`RoutingError`
    if an end-port has no LID or LIDs exceed the unicast range.
    """
    e = len(g.ep_row)
    missing = np.flatnonzero(g.ep_lid == 0)
    if len(missing):
        raise RoutingError(
            f"{len(missing)} end-ports have no LID (lid 0); run a subnet manager first"
        )
    ep_lmc = g.ep_lmc if lmc is None else np.full(e, lmc, dtype=np.int64)
    eo, eoff = _expand_lmc(g.ep_lid, ep_lmc)
    routed = np.flatnonzero((g.rank >= 0) & (g.sw_lid > 0))
    sw_order = routed[np.lexsort((g.sw_guid[routed], g.rank[routed]))]
    sw_nid = np.zeros(g.n_switches, dtype=np.int64)
    sw_nid[sw_order] = (int(t.max()) + 1 if len(t) else 0) + np.arange(len(sw_order))
    lid = np.concatenate([g.ep_lid[eo] + eoff, g.sw_lid[sw_order]])
    if len(lid) and int(lid.max()) > MAX_UNICAST_LID:
        raise RoutingError(
            f"LIDs up to {int(lid.max()):#06x} do not fit the unicast range 0x0001-0xBFFF"
            f" ({len(lid)} LIDs with LMC {lmc if lmc is not None else 'as discovered'})"
        )
    twice = np.flatnonzero(np.bincount(lid) > 1) if len(lid) else lid  # LIDs < 0xC000
    if len(twice):
        raise LmcMismatchError(
            f"LID {int(twice[0]):#06x} belongs to two ports: with LMC "
            f"{lmc if lmc is not None else 'as discovered'} each port needs "
            "2**LMC LIDs from an aligned base LID; reassign LIDs (run the SM with this LMC)"
        )
    n_sw = len(sw_order)
    return Destinations(
        lid=lid,
        nid=np.concatenate([t[eo] + eoff * nid_stride, sw_nid[sw_order]]),
        target=np.concatenate([g.ep_switch[eo], sw_order]),
        local_port=np.concatenate([g.ep_switch_port[eo], np.zeros(n_sw, dtype=np.int64)]),
        is_switch=np.concatenate([np.zeros(len(eo), bool), np.ones(n_sw, bool)]),
        owner=np.concatenate([eo, sw_order]),
    )


def seen_cost(c: np.ndarray, down: np.ndarray | bool) -> np.ndarray:
    """A neighbour's encoded cost ``c`` (uint8) as a switch compares it with
    its own (eq. 1): read as its down-only cost (INF without one) where the
    link goes ``down`` to it, else as ``UP_PHASE`` plus its hop count; the
    neighbour leads closer where the result is below the switch's cost."""
    # (INF has every low bit set: read as up, it stays INF)
    as_up = (np.asarray(c, dtype=np.uint8) & np.uint8(UP_PHASE - 1)) | np.uint8(UP_PHASE)
    if down is False:
        return as_up
    return np.where(down, np.where(c < UP_PHASE, c, np.uint8(INF)), as_up).astype(np.uint8)
