"""Credit loops: the channel dependency graph of forwarding tables, per VL.

A *channel* is a directed switch-to-switch link on one virtual lane (VL).  A
route that leaves switch ``x`` by channel ``a`` after entering it by channel
``b`` makes ``a`` wait for ``b``'s buffers: a dependency ``b -> a``.  The
tables are free of credit loops (deadlock-free under credit-based flow
control) iff the dependencies of every route together form no cycle (Dally
and Seitz).  The VL of a hop comes from the route's service level (SL) and
the switch's SL-to-VL table for (input port, output port)
(:class:`~smroute.routing.vlassign.VirtualLanes`); without one, every hop is
on VL 0 (what ``ibdmchk`` checks).

Routes followed: from every switch carrying end-ports (the first hop of a
CA's traffic; links to and from end-ports start or end every dependency
chain, so they are never on a cycle) and, with ``switch_sources``, from
every switch (its own port 0), to every LID of the tables that a port of
the fabric owns.  Vectorized over all (source, destination) pairs, in chunks
of destinations.  Cycles are found by peeling the channels without
predecessors or without successors (a topological sort in numpy); what is
left lies on or between cycles, and one cycle is read off it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing.vlassign import VirtualLanes, distinct
from smroute.tables.lft import NO_ROUTE, ForwardingTables

__all__ = ["AcyclicGrowth", "Channel", "CreditLoopCheck", "Dependencies", "check_credit_loops",
           "cyclic_core", "dependencies", "find_cycle", "topological_order"]

_PAIRS = 1 << 18  # (source, destination) pairs walked at once


@dataclass(frozen=True)
class Channel:
    """One channel by name: the switch, its output port, the VL."""

    switch_guid: int
    switch_desc: str
    port: int
    vl: int

    def __str__(self) -> str:
        return f'{self.switch_guid:#018x} "{self.switch_desc}"[{self.port}] VL {self.vl}'


@dataclass(frozen=True, eq=False)
class CreditLoopCheck:
    """Result of :func:`check_credit_loops`.

    pairs: (source switch, LID) routes followed; channels: distinct (link,
    VL) channels they use between switches; dependencies: distinct channel
    dependencies; vls: VLs used; per_vl: channels per VL ``(vls,)``;
    cyclic: channels on or between cycles (0: free of credit loops);
    cycle: one cycle, in dependency order (empty if none); unfinished:
    routes still going after ``max_hops`` (forwarding loops).
    """

    pairs: int
    channels: int
    dependencies: int
    vls: int
    per_vl: tuple[int, ...]
    cyclic: int
    cycle: tuple[Channel, ...] = field(default_factory=tuple)
    unfinished: int = 0

    @property
    def ok(self) -> bool:
        return self.cyclic == 0

    def summary(self) -> str:
        head = (f"{self.pairs} routes, {self.channels} channels on {self.vls} VLs, "
                f"{self.dependencies} dependencies")
        if self.ok:
            return f"no credit loop: {head}"
        ring = " -> ".join(str(c) for c in self.cycle)
        return (f"CREDIT LOOP: {self.cyclic} channels on or between cycles ({head}); "
                f"one cycle: {ring}")


def cyclic_core(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``(n,)`` bool: the nodes of the directed graph ``src -> dst`` (``(E,)``
    node ids) left after repeatedly removing every node without an incoming
    or without an outgoing edge -- empty iff the graph is acyclic."""
    alive = np.ones(n, dtype=bool)
    s, d = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    while True:
        indeg = np.bincount(d, minlength=n)
        outdeg = np.bincount(s, minlength=n)
        dead = alive & ((indeg == 0) | (outdeg == 0))
        if not dead.any():
            return alive
        alive &= ~dead
        keep = alive[s] & alive[d]
        s, d = s[keep], d[keep]


def topological_order(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``(n,)`` int64 position of each node of the acyclic graph ``src ->
    dst`` in a topological order (a permutation of ``0 .. n-1``; every edge
    goes to a higher position): nodes by their longest path from a node
    without incoming edges, then by id."""
    level = np.zeros(n, dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    s, d = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    k = 0
    while len(s):
        indeg = np.bincount(d, minlength=n)
        free = alive & (indeg == 0)
        if not free.any():
            raise ValueError("the graph has a cycle")
        level[free] = k
        alive &= ~free
        keep = alive[s]
        s, d = s[keep], d[keep]
        k += 1
    level[alive] = k
    pos = np.empty(n, dtype=np.int64)
    pos[np.lexsort((np.arange(n), level))] = np.arange(n)
    return pos


class AcyclicGrowth:
    """An acyclic dependency graph that grows by sets of edges, each kept
    only if the graph stays acyclic (:meth:`add`).  A topological order of
    its nodes is kept: a cycle through new edges lies between the lowest
    head and the highest tail of the new edges that go against the order,
    so only the edges there are checked (:func:`cyclic_core`) and only those
    nodes reordered."""

    def __init__(self, n: int, codes: np.ndarray) -> None:
        """``codes``: edges as ``before * n + after`` (the graph must be acyclic)."""
        self.n = n
        c = np.unique(np.asarray(codes, np.int64))
        self.src, self.dst = c // n, c % n
        self.pos = topological_order(n, self.src, self.dst)

    def add(self, codes: np.ndarray) -> bool:
        """Add the edges ``codes`` if the graph stays acyclic; whether it did."""
        n, pos = self.n, self.pos
        c = np.unique(np.asarray(codes, np.int64))
        s, d = c // n, c % n
        back = pos[s] >= pos[d]
        if back.any():
            lo, hi = int(pos[d[back]].min()), int(pos[s[back]].max())
            src, dst = np.concatenate([self.src, s]), np.concatenate([self.dst, d])
            ps, pd = pos[src], pos[dst]
            inside = (ps >= lo) & (ps <= hi) & (pd >= lo) & (pd <= hi)
            ws, wd = src[inside], dst[inside]
            if cyclic_core(n, ws, wd).any():
                return False
            nodes = np.flatnonzero((pos >= lo) & (pos <= hi))
            order = topological_order(n, ws, wd)[nodes]
            pos[nodes[np.argsort(order, kind="stable")]] = np.sort(pos[nodes])
        self.src, self.dst = np.concatenate([self.src, s]), np.concatenate([self.dst, d])
        return True


def find_cycle(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """One cycle of the directed graph ``src -> dst`` as node ids in edge
    order (``(k,)`` int64, the first node not repeated), empty if acyclic."""
    alive = cyclic_core(n, src, dst)
    if not alive.any():
        return np.zeros(0, dtype=np.int64)
    s, d = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    keep = alive[s] & alive[d]
    s, d = s[keep], d[keep]
    o = np.argsort(s, kind="stable")
    s, d = s[o], d[o]
    first = np.searchsorted(s, np.arange(n))
    nxt = d[np.minimum(first, len(d) - 1)]  # every live node has a live successor
    seen: dict[int, int] = {}
    path: list[int] = []
    x = int(np.flatnonzero(alive)[0])
    while x not in seen:
        seen[x] = len(path)
        path.append(x)
        x = int(nxt[x])
    return np.asarray(path[seen[x]:], dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Dependencies:
    """The channel dependencies of some routes (:func:`dependencies`):
    ``edges`` distinct ``(K,)`` int64 codes ``before * n_channels + after``,
    ``used`` the distinct channels ``(U,)``, ``n_channels`` (links x 16 VLs),
    ``pairs`` routes followed, ``unfinished`` routes still going after the
    hop limit; ``link`` ``(S, P)`` the link id of each switch port (-1: none)."""

    edges: np.ndarray
    used: np.ndarray
    n_channels: int
    pairs: int
    unfinished: int
    link: np.ndarray


def dependencies(
    fabric: Fabric, tables: ForwardingTables, lanes: VirtualLanes | None = None, *,
    switch_sources: bool = True, max_hops: int | None = None, lids: np.ndarray | None = None,
) -> Dependencies:
    """The channel dependencies of ``tables`` over ``fabric`` (module doc),
    for the destination ``lids`` only if given (else every LID a port owns)."""
    sw = fabric.switches
    n_sw = len(sw)
    sw_id = np.full(fabric.n_nodes, -1, dtype=np.int64)
    sw_id[sw] = np.arange(n_sw)
    n_p = int(fabric.num_ports[sw].max(initial=0)) + 1
    # per switch port: the switch behind it, the port there, its link id
    nxt = np.full((n_sw, n_p), -1, dtype=np.int64)
    peer = np.zeros((n_sw, n_p), dtype=np.int64)
    rows = np.flatnonzero(fabric.port_peer >= 0)
    node = fabric.port_node[rows]
    rows = rows[fabric.node_type[node] == NodeType.SWITCH]
    far = fabric.port_peer[rows]
    far_sw = sw_id[fabric.port_node[far]]
    s_of, p_of = sw_id[fabric.port_node[rows]], fabric.port_num[rows].astype(np.int64)
    nxt[s_of, p_of] = far_sw  # -1 behind a CA or router
    peer[s_of, p_of] = fabric.port_num[far]
    link = np.full((n_sw, n_p), -1, dtype=np.int64)
    to_sw = far_sw >= 0
    link[s_of[to_sw], p_of[to_sw]] = np.arange(int(to_sw.sum()))
    n_link = int(to_sw.sum())
    width = tables.ports.shape[1]
    # destinations: LIDs a port owns; sources: switches (with the port a route enters by)
    l2p = fabric.lid_to_port[:width]
    dlids = np.flatnonzero(l2p >= 0)
    dlids = dlids[dlids > 0]
    if lids is not None:
        dlids = dlids[np.isin(dlids, lids)]
    lft = _aligned(tables, fabric.node_guid[sw], dlids)  # columns: dlids' positions
    ep_rows = rows[~to_sw]  # switch ports linked to an end-port
    ep_sw = sw_id[fabric.port_node[ep_rows]]
    first_ep = np.full(n_sw, -1, dtype=np.int64)
    first_ep[ep_sw[::-1]] = fabric.port_num[ep_rows[::-1]]
    src = np.flatnonzero(first_ep >= 0) if not switch_sources else np.arange(n_sw)
    src_in = np.where(first_ep[src] >= 0, first_ep[src], 0)
    limit = max_hops if max_hops is not None else n_sw + 1
    n_vl = 16
    edges: list[np.ndarray] = []
    used: list[np.ndarray] = []
    unfinished = 0
    step = max(1, _PAIRS // max(len(src), 1))
    for c0 in range(0, len(dlids), step):
        d = np.repeat(np.arange(c0, c0 + len(dlids[c0:c0 + step]))[None, :], len(src),
                      axis=0).ravel()  # column positions; dlids[d] the LIDs
        x = np.repeat(src, len(dlids[c0:c0 + step]))
        q = np.repeat(src_in, len(dlids[c0:c0 + step]))
        sl = lanes.sl_of(x, dlids[d]) if lanes is not None else np.zeros(len(d), np.uint8)
        prev = np.full(len(d), -1, dtype=np.int64)
        for _ in range(limit):
            p = lft[x, d].astype(np.int64)
            ok = (p != NO_ROUTE) & (p < n_p)
            ps = np.where(ok, p, 0)
            y = np.where(ok, nxt[x, ps], -1)
            go = y >= 0
            vl = (lanes.vl_of(x[go], q[go], ps[go], sl[go]).astype(np.int64)
                  if lanes is not None else np.zeros(int(go.sum()), np.int64))
            ch = link[x[go], ps[go]] * n_vl + vl
            dep = prev[go] >= 0
            edges.append(distinct(prev[go][dep] * (n_link * n_vl) + ch[dep]))
            used.append(distinct(ch))
            x, q, d, sl = y[go], peer[x[go], ps[go]], d[go], sl[go]
            prev = ch
            if not len(x):
                break
        unfinished += len(x)
    e = distinct(np.concatenate(edges)) if edges else np.zeros(0, np.int64)
    u = distinct(np.concatenate(used)) if used else np.zeros(0, np.int64)
    return Dependencies(e, u, n_link * n_vl, len(src) * len(dlids), unfinished, link)


def check_credit_loops(
    fabric: Fabric, tables: ForwardingTables, lanes: VirtualLanes | None = None, *,
    switch_sources: bool = True, max_hops: int | None = None,
) -> CreditLoopCheck:
    """Build the channel dependency graph of ``tables`` over ``fabric`` (with
    the SLs and SL-to-VL tables of ``lanes``, else VL 0 everywhere) and look
    for cycles (module doc).  ``lanes``' switch ids are the fabric's switches
    in node order (the routing's); table rows are matched by GUID.
    ``max_hops``: stop a route after that many switch hops (default: the
    switch count + 1)."""
    dep = dependencies(fabric, tables, lanes, switch_sources=switch_sources, max_hops=max_hops)
    e, u, n_ch, link = dep.edges, dep.used, dep.n_channels, dep.link
    n_vl = 16
    sw = fabric.switches
    core = cyclic_core(n_ch, e // n_ch, e % n_ch)
    cyc = find_cycle(n_ch, e // n_ch, e % n_ch) if core.any() else np.zeros(0, np.int64)
    ls, lp = np.nonzero(link >= 0)
    by_link = np.argsort(link[ls, lp])
    ls, lp = ls[by_link], lp[by_link]
    names = tuple(Channel(int(fabric.node_guid[sw[ls[c // n_vl]]]),
                          fabric.node_desc[int(sw[ls[c // n_vl]])], int(lp[c // n_vl]),
                          int(c % n_vl)) for c in cyc.tolist())
    per_vl = np.bincount(u % n_vl, minlength=1)
    return CreditLoopCheck(
        pairs=dep.pairs, channels=len(u), dependencies=len(e),
        vls=int(np.flatnonzero(per_vl)[-1]) + 1 if len(u) else 0,
        per_vl=tuple(int(v) for v in per_vl[:int(np.flatnonzero(per_vl)[-1]) + 1])
        if len(u) else (), cyclic=int(core.sum()), cycle=names, unfinished=dep.unfinished)


def _aligned(tables: ForwardingTables, guids: np.ndarray, lids: np.ndarray) -> np.ndarray:
    """``tables.ports`` rows in the order of the switch ``guids`` ``(S,)``
    (all NO_ROUTE for a switch the tables lack), columns ``lids`` ``(D,)``."""
    out = np.full((len(guids), len(lids)), NO_ROUTE, dtype=np.uint8)
    tg = np.asarray(tables.switch_guid, dtype=np.uint64)
    if not len(tg):
        return out
    o = np.argsort(tg, kind="stable")
    i = np.minimum(np.searchsorted(tg[o], guids), len(tg) - 1)
    have = tg[o][i] == guids
    out[have] = np.asarray(tables.ports)[np.ix_(o[i[have]], lids)]
    return out
