"""The routing view of a fabric under a set of forwarding tables
(:class:`RoutingView`, :func:`routing_view`): switches matched by GUID,
end-ports, directed link ids and the lookups that path tracing
(:mod:`smroute.analysis.paths`, where the vocabulary is described) walks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import fabric_roles
from smroute.tables.lft import ForwardingTables

__all__ = [
    "DEAD_END",
    "LOOP",
    "NO_LINK",
    "NO_ROUTE",
    "OK",
    "PORTS",
    "STATUS_NAMES",
    "TO_EP",
    "RoutingView",
    "routing_view",
]

#: Flow status codes (int8).
OK, DEAD_END, LOOP = 0, 1, 2
STATUS_NAMES = {OK: "delivered", DEAD_END: "dead end", LOOP: "loop"}
#: LFT value meaning "no route".
NO_ROUTE = 255
#: Width of the per-switch port lookups (port numbers 0..255).
PORTS = 256
#: ``next_sw`` values: the port leads to an end-port / to no switch.
TO_EP = -2
NO_LINK = -1


@dataclass(frozen=True, eq=False)
class RoutingView:
    """A fabric with forwarding tables, as path tracing sees it.

    Switch arrays ``(S,)``, S = every switch of the fabric in node order:
        sw_node (int64 node index), sw_guid (uint64), sw_level (int64 rank
        of the fabric's roles: hops from the leaves, -1 if none), table_row (int64 row of the
        switch in the tables, -1 if the tables do not have it).
    End-port arrays ``(E,)``:
        ep_row (int64 fabric port row), ep_node (int64 CA node index),
        ep_guid (uint64 port GUID), ep_lid (int64 base LID, 0 if none),
        ep_leaf (int64 switch id), ep_leaf_port (int64 port on the leaf),
        ep_leaf_row (int64 index into ``leaves``), inj_link (int32 link id of
        the end-port's injection link), deliver_link (int32 link id of the
        leaf egress to the end-port).
    leaves: ``(Lv,)`` int64 switch ids with end-ports, ascending.
    Link arrays ``(n_links,)``: link_switch (int32 egress switch id, -1 for
        injection links), link_port (int16 egress port, CA port for injection
        links), link_ep (int32 end-port of an injection or delivery link,
        else -1).  n_core: switch -> switch links; n_switch_links: all switch
        egress links.
    Lookups ``(S, 256)`` int32, flattened to ``(S * 256,)`` by switch then
        port: link_of (link id of switch egress (s, p), -1 if unlinked),
        next_sw (switch id behind (s, p); -2 = an end-port; -1 = nothing
        routable), ep_at (end-port index behind (s, p), else -1).
    lft: ``(S, W)`` uint8 tables aligned with the switch ids (rows of
        switches missing from the tables are all :data:`NO_ROUTE`).
    max_hops: switch-to-switch hops after which a walk counts as a loop.
    """

    fabric: Fabric
    sw_node: np.ndarray
    sw_guid: np.ndarray
    sw_level: np.ndarray
    table_row: np.ndarray
    ep_row: np.ndarray
    ep_node: np.ndarray
    ep_guid: np.ndarray
    ep_lid: np.ndarray
    ep_leaf: np.ndarray
    ep_leaf_port: np.ndarray
    ep_leaf_row: np.ndarray
    inj_link: np.ndarray
    deliver_link: np.ndarray
    leaves: np.ndarray
    link_switch: np.ndarray
    link_port: np.ndarray
    link_ep: np.ndarray
    n_core: int
    n_switch_links: int
    link_of: np.ndarray
    next_sw: np.ndarray
    ep_at: np.ndarray
    lft: np.ndarray
    max_hops: int

    @property
    def n_switches(self) -> int:
        return int(self.sw_node.shape[0])

    @property
    def n_endports(self) -> int:
        return int(self.ep_row.shape[0])

    @property
    def n_leaves(self) -> int:
        return int(self.leaves.shape[0])

    @property
    def n_links(self) -> int:
        return int(self.link_switch.shape[0])

    @property
    def missing_switches(self) -> np.ndarray:
        """Switch ids of the fabric without a row in the tables, ``(K,)`` int64."""
        return np.flatnonzero(self.table_row < 0)

    def endports_of_rows(self, rows: npt.ArrayLike) -> np.ndarray:
        """End-port index of each fabric port row (``(K,)`` int64, -1 if the
        row is not an end-port)."""
        r = np.asarray(rows, dtype=np.int64)
        o = np.argsort(self.ep_row, kind="stable")
        keys = self.ep_row[o]
        i = np.minimum(np.searchsorted(keys, r), max(len(keys) - 1, 0))
        if not len(keys):
            return np.full(r.shape, -1, dtype=np.int64)
        return np.where(keys[i] == r, o[i], -1).astype(np.int64)

    def link_guid_port(self, links: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Egress end of link ids ``(K,)``: node GUID ``(K,)`` uint64 (the
        switch, or the CA of an injection link) and port number ``(K,)`` int64."""
        k = np.asarray(links, dtype=np.int64)
        sw = self.link_switch[k]
        ca_node = self.ep_node[np.maximum(self.link_ep[k], 0)]
        guid = np.where(sw >= 0, self.sw_guid[np.maximum(sw, 0)],
                        self.fabric.node_guid[ca_node]).astype(np.uint64)
        return guid, self.link_port[k].astype(np.int64)

    def describe_link(self, link: int) -> str:
        """Human name of a link id: ``"desc" (guid)[port] -> "desc" (guid)[port]``."""
        f = self.fabric
        if self.link_switch[link] >= 0:
            row = int(f.port_start[self.sw_node[self.link_switch[link]]]) + int(
                self.link_port[link])
        else:
            row = int(self.ep_row[self.link_ep[link]])
        return f"{f.describe_port(row)} -> {f.describe_port(int(f.port_peer[row]))}"

    def describe_endport(self, ep: int) -> str:
        lid = int(self.ep_lid[ep])
        return f"{self.fabric.describe_port(int(self.ep_row[ep]))} LID {lid}"


def routing_view(
    fabric: Fabric, tables: ForwardingTables, *, max_hops: int | None = None
) -> RoutingView:
    """Build the :class:`RoutingView` of ``fabric`` routed by ``tables``.

    Switches are matched by node GUID (table switches absent from the fabric
    are ignored; fabric switches absent from the tables route nothing).
    ``max_hops`` defaults to the switch count + 1: a walk that long has
    visited some switch twice (a route free of loops may be longer than an
    up*/down* path: one up*/down* in an order of the switches that crosses
    several cables within a rank, :mod:`smroute.routing.cross`).
    """
    f = fabric
    sw_node = f.switches.astype(np.int64)
    n_sw = len(sw_node)
    sw_id = np.full(f.n_nodes, -1, dtype=np.int64)
    sw_id[sw_node] = np.arange(n_sw)
    sw_guid = f.node_guid[sw_node]

    # --- switch ports 1..num_ports and what is behind them
    nports = f.num_ports[sw_node].astype(np.int64)
    s_of = np.repeat(np.arange(n_sw, dtype=np.int64), nports)
    p_of = np.arange(int(nports.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(nports) - nports, nports) + 1
    rows = f.port_start[sw_node][s_of] + p_of
    peer = f.port_peer[rows]
    linked = peer >= 0
    s_of, p_of, rows, peer = s_of[linked], p_of[linked], rows[linked], peer[linked]
    peer_node = f.port_node[peer].astype(np.int64)
    peer_type = f.node_type[peer_node]
    to_sw = peer_type == NodeType.SWITCH
    to_ca = peer_type == NodeType.CA

    # --- end-ports: CA ports linked to a switch, by (leaf, leaf port)
    ep_leaf, ep_leaf_port, ep_row = s_of[to_ca], p_of[to_ca], peer[to_ca]
    o = np.lexsort((ep_leaf_port, ep_leaf))
    ep_leaf, ep_leaf_port, ep_row = ep_leaf[o], ep_leaf_port[o], ep_row[o]
    n_ep = len(ep_row)
    leaves, ep_leaf_row = np.unique(ep_leaf, return_inverse=True)

    # --- link ids: switch -> switch, delivery (end-port order), other, injection
    n_sl = len(s_of)
    n_core = int(to_sw.sum())
    other = np.flatnonzero(~to_sw & ~to_ca)
    lid_of_egress = np.empty(n_sl, dtype=np.int64)
    lid_of_egress[np.flatnonzero(to_sw)] = np.arange(n_core)
    ca_pos = np.flatnonzero(to_ca)[o]  # egress rows in end-port order
    lid_of_egress[ca_pos] = n_core + np.arange(n_ep)
    lid_of_egress[other] = n_core + n_ep + np.arange(len(other))
    by_id = np.empty(n_sl, dtype=np.int64)
    by_id[lid_of_egress] = np.arange(n_sl)

    # --- lookups
    link_of = np.full(n_sw * PORTS, -1, dtype=np.int32)
    link_of[s_of * PORTS + p_of] = lid_of_egress.astype(np.int32)
    next_sw = np.full(n_sw * PORTS, NO_LINK, dtype=np.int32)
    next_sw[(s_of * PORTS + p_of)[to_sw]] = sw_id[peer_node[to_sw]]
    next_sw[ep_leaf * PORTS + ep_leaf_port] = TO_EP
    ep_at = np.full(n_sw * PORTS, -1, dtype=np.int32)
    ep_at[ep_leaf * PORTS + ep_leaf_port] = np.arange(n_ep, dtype=np.int32)
    for arr in (link_of, next_sw, ep_at):
        arr.setflags(write=False)

    link_switch = np.concatenate([s_of[by_id], np.full(n_ep, -1)]).astype(np.int32)
    link_port = np.concatenate([p_of[by_id], f.port_num[ep_row]]).astype(np.int16)
    link_ep = np.full(n_sl + n_ep, -1, dtype=np.int32)
    link_ep[n_core:n_core + n_ep] = np.arange(n_ep)
    link_ep[n_sl:] = np.arange(n_ep)
    inj_link = (n_sl + np.arange(n_ep)).astype(np.int32)
    deliver_link = (n_core + np.arange(n_ep)).astype(np.int32)

    # --- levels: the one ranking of the fabric's roles
    lvl = fabric_roles(f).rank[sw_node].astype(np.int64)
    if max_hops is None:
        max_hops = n_sw + 1

    # --- tables aligned with switch ids, by GUID
    tg = np.asarray(tables.switch_guid, dtype=np.uint64)
    to = np.argsort(tg, kind="stable")
    if len(tg):
        i = np.minimum(np.searchsorted(tg[to], sw_guid), len(tg) - 1)
        table_row = np.where(tg[to][i] == sw_guid, to[i], -1).astype(np.int64)
    else:
        table_row = np.full(n_sw, -1, dtype=np.int64)
    ep_lid = f.port_lid[ep_row].astype(np.int64)
    width = max(int(tables.ports.shape[1]), int(ep_lid.max()) + 1 if n_ep else 1)
    lft = np.full((n_sw, width), NO_ROUTE, dtype=np.uint8)
    have = table_row >= 0
    lft[have, : tables.ports.shape[1]] = np.asarray(tables.ports)[table_row[have]]
    lft[:, 0] = NO_ROUTE  # LID 0 is never a destination
    lft.setflags(write=False)

    return RoutingView(
        fabric=f,
        sw_node=sw_node,
        sw_guid=sw_guid,
        sw_level=lvl,
        table_row=table_row,
        ep_row=ep_row,
        ep_node=f.port_node[ep_row].astype(np.int64),
        ep_guid=f.port_guid[ep_row],
        ep_lid=ep_lid,
        ep_leaf=ep_leaf,
        ep_leaf_port=ep_leaf_port,
        ep_leaf_row=ep_leaf_row.astype(np.int64),
        inj_link=inj_link,
        deliver_link=deliver_link,
        leaves=leaves,
        link_switch=link_switch,
        link_port=link_port,
        link_ep=link_ep,
        n_core=n_core,
        n_switch_links=n_sl,
        link_of=link_of,
        next_sw=next_sw,
        ep_at=ep_at,
        lft=lft,
        max_hops=int(max_hops),
    )
