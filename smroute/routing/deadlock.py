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
from smroute.routing.acyclic import cyclic_core, find_cycle
from smroute.routing.vlassign import VirtualLanes, distinct
from smroute.tables.lft import NO_ROUTE, ForwardingTables

__all__ = ["DENSE_PAIRS", "VLS", "Channel", "ChannelLinks", "CreditLoopCheck", "Dependencies",
           "channel_links", "check_credit_loops", "dependencies", "loop_check", "merged"]

_PAIRS = 1 << 18  # (source, destination) pairs walked at once
#: the most (link, port) pairs :func:`dependencies` marks in a table (bytes)
DENSE_PAIRS = 1 << 25

#: channels per link: one per VL an InfiniBand port can have (channel ``link * VLS + vl``)
VLS = 16


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


@dataclass(frozen=True, eq=False)
class ChannelLinks:
    """A fabric's switch ports as :func:`dependencies` follows them
    (:func:`channel_links`): per switch (the fabric's switches in node
    order) and port, the switch behind it ``nxt`` (-1: none, or a CA), the
    port there ``peer``, the link id ``link`` (-1: none); ``first_ep`` ``(S,)``
    the first port of each switch linked to an end-port (-1: none)."""

    nxt: np.ndarray
    peer: np.ndarray
    link: np.ndarray
    first_ep: np.ndarray

    @property
    def n_links(self) -> int:
        return int(self.link.max(initial=-1)) + 1


def channel_links(fabric: Fabric) -> ChannelLinks:
    """The :class:`ChannelLinks` of ``fabric`` (reused by the
    :func:`dependencies` of many table sets on one fabric)."""
    sw = fabric.switches
    n_sw = len(sw)
    sw_id = np.full(fabric.n_nodes, -1, dtype=np.int64)
    sw_id[sw] = np.arange(n_sw)
    n_p = int(fabric.num_ports[sw].max(initial=0)) + 1
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
    ep_rows = rows[~to_sw]  # switch ports linked to an end-port
    ep_sw = sw_id[fabric.port_node[ep_rows]]
    first_ep = np.full(n_sw, -1, dtype=np.int64)
    first_ep[ep_sw[::-1]] = fabric.port_num[ep_rows[::-1]]
    return ChannelLinks(nxt, peer, link, first_ep)


def dependencies(
    fabric: Fabric, tables: ForwardingTables, lanes: VirtualLanes | None = None, *,
    switch_sources: bool = True, max_hops: int | None = None, lids: np.ndarray | None = None,
    skip: np.ndarray | None = None, links: ChannelLinks | None = None,
) -> Dependencies:
    """The channel dependencies of ``tables`` over ``fabric`` (module doc),
    towards the destination ``lids`` only if given (else every LID a port
    owns), but ``skip``; ``links``: the fabric's :func:`channel_links` if
    already known."""
    cl = links or channel_links(fabric)
    nxt, peer, link = cl.nxt, cl.peer, cl.link
    n_sw, n_p = nxt.shape
    n_link = cl.n_links
    width = tables.ports.shape[1]
    # destinations: LIDs a port owns; sources: switches (with the port a route enters by)
    l2p = fabric.lid_to_port[:width]
    if lids is not None:
        dlids = np.unique(np.asarray(lids, dtype=np.int64))
        dlids = dlids[(dlids > 0) & (dlids < len(l2p))]
        dlids = dlids[l2p[dlids] >= 0]
    else:
        dlids = np.flatnonzero(l2p >= 0)
        dlids = dlids[dlids > 0]
    if skip is not None:
        dlids = dlids[~np.isin(dlids, skip)]
    lft = _aligned(tables, fabric.node_guid[fabric.switches], dlids)  # columns: dlids'
    first_ep = cl.first_ep
    src = np.flatnonzero(first_ep >= 0) if not switch_sources else np.arange(n_sw)
    src_in = np.where(first_ep[src] >= 0, first_ep[src], 0)
    limit = max_hops if max_hops is not None else n_sw + 1
    n_vl = VLS
    edges: list[np.ndarray] = []
    used: list[np.ndarray] = []
    unfinished = 0
    # on VL 0 alone, a dependency is its first channel's link and the port
    # it leaves by: marked in a table of them where the walk is large
    # against it (no sort of every hop's millions of codes)
    dense = (lanes is None and n_link * n_p <= DENSE_PAIRS
             and len(src) * len(dlids) * 4 >= n_link * n_p)
    seen_e = np.zeros(n_link * n_p if dense else 0, dtype=bool)
    seen_u = np.zeros(n_link if dense else 0, dtype=bool)
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
            if dense:
                seen_e[prev[go][dep] // n_vl * n_p + ps[go][dep]] = True
                seen_u[ch // n_vl] = True
            else:
                edges.append(distinct(prev[go][dep] * (n_link * n_vl) + ch[dep]))
                used.append(distinct(ch))
            x, q, d, sl = y[go], peer[x[go], ps[go]], d[go], sl[go]
            prev = ch
            if not len(x):
                break
        unfinished += len(x)
    if dense:
        ls, lp = _link_ends(link)
        to = nxt[ls, lp]  # the switch each link leads to
        k = np.flatnonzero(seen_e)
        first, port = k // n_p, k % n_p
        edges.append(first * n_vl * (n_link * n_vl) + link[to[first], port] * n_vl)
        used.append(np.flatnonzero(seen_u) * n_vl)
    e = distinct(np.concatenate(edges)) if edges else np.zeros(0, np.int64)
    u = distinct(np.concatenate(used)) if used else np.zeros(0, np.int64)
    return Dependencies(e, u, n_link * n_vl, len(src) * len(dlids), unfinished, link)


def merged(*deps: Dependencies) -> Dependencies:
    """The dependencies of the routes of all ``deps`` (of one fabric) together."""
    return Dependencies(distinct(np.concatenate([d.edges for d in deps])),
                        distinct(np.concatenate([d.used for d in deps])), deps[0].n_channels,
                        sum(d.pairs for d in deps), sum(d.unfinished for d in deps),
                        deps[0].link)


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
    return loop_check(fabric, dependencies(fabric, tables, lanes, switch_sources=switch_sources,
                                           max_hops=max_hops))


def loop_check(fabric: Fabric, dep: Dependencies) -> CreditLoopCheck:
    """The :class:`CreditLoopCheck` of the dependencies ``dep`` of routes over ``fabric``."""
    e, u, n_ch, link = dep.edges, dep.used, dep.n_channels, dep.link
    n_vl = VLS
    sw = fabric.switches
    core = cyclic_core(n_ch, e // n_ch, e % n_ch)
    cyc = find_cycle(n_ch, e // n_ch, e % n_ch) if core.any() else np.zeros(0, np.int64)
    ls, lp = _link_ends(link)
    names = tuple(Channel(int(fabric.node_guid[sw[ls[c // n_vl]]]),
                          fabric.node_desc[int(sw[ls[c // n_vl]])], int(lp[c // n_vl]),
                          int(c % n_vl)) for c in cyc.tolist())
    per_vl = np.bincount(u % n_vl, minlength=1)
    return CreditLoopCheck(
        pairs=dep.pairs, channels=len(u), dependencies=len(e),
        vls=int(np.flatnonzero(per_vl)[-1]) + 1 if len(u) else 0,
        per_vl=tuple(int(v) for v in per_vl[:int(np.flatnonzero(per_vl)[-1]) + 1])
        if len(u) else (), cyclic=int(core.sum()), cycle=names, unfinished=dep.unfinished)


def _link_ends(link: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(switch, port)``, ``(L,)`` int64 each: where each link id of ``link``
    ``(S, P)`` leaves, in link id order."""
    ls, lp = np.nonzero(link >= 0)
    by_link = np.argsort(link[ls, lp])
    return ls[by_link], lp[by_link]


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
