"""The switch graph of a fabric, as routing sees it: ranks, port groups, end-ports.

Everything here is derived from a :class:`~smroute.fabric.model.Fabric` in a
few vectorized passes.  Switches get compact ids ``0 .. S-1`` in ascending node
index order.

Ranks follow Dmodc's preprocessing: leaf switches (switches with at least one
end-port attached) have rank 0; every other switch's rank is its BFS distance
to the nearest leaf.  A link goes *up* from rank ``r`` to rank ``r + 1``; links
between switches of equal rank are neither up nor down and are not used.
Switches that cannot reach a leaf get rank ``-1`` and are not routed.

Port groups: the ports of a switch linked to one remote switch form a group.
Groups of a switch are ordered by the remote switch's GUID (Dmodc's UUID
order); ports inside a group by port number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smroute.fabric.graph import bfs_distance
from smroute.fabric.model import Fabric, NodeType

__all__ = ["SwitchGraph", "switch_graph"]


@dataclass(frozen=True, eq=False)
class SwitchGraph:
    """Routing view of a fabric.

    Switch arrays, shape ``(S,)``:
        sw_node (int64 node index), sw_guid (uint64), sw_lid (int64, 0 if none),
        rank (int64, -1 = unreachable from any leaf), grp_first (int64, first
        group id of the switch), grp_count (int64, number of groups), n_up
        (int64, number of groups leading to a switch of rank + 1).
    Group arrays, shape ``(G,)``, grouped by switch, then remote GUID:
        grp_switch (int64 switch id), grp_remote (int64 remote switch id),
        grp_port_first (int64 index into ``grp_ports``), grp_port_count (int64).
    grp_ports: ``(sum of group sizes,)`` int64 port numbers.
    End-port arrays, shape ``(E,)``, one per end-port (CA or router port)
    linked to a switch:
        ep_row (int64 port row in the fabric), ep_switch (int64 switch id),
        ep_switch_port (int64 port number on that switch), ep_lid (int64 base
        LID, 0 if unknown), ep_lmc (int64).
    """

    sw_node: np.ndarray
    sw_guid: np.ndarray
    sw_lid: np.ndarray
    rank: np.ndarray
    grp_first: np.ndarray
    grp_count: np.ndarray
    n_up: np.ndarray
    grp_switch: np.ndarray
    grp_remote: np.ndarray
    grp_port_first: np.ndarray
    grp_port_count: np.ndarray
    grp_ports: np.ndarray
    ep_row: np.ndarray
    ep_switch: np.ndarray
    ep_switch_port: np.ndarray
    ep_lid: np.ndarray
    ep_lmc: np.ndarray

    @property
    def n_switches(self) -> int:
        return int(self.sw_node.shape[0])

    @property
    def leaves(self) -> np.ndarray:
        """Switch ids of rank 0, ascending. Shape ``(L,)`` int64."""
        return np.flatnonzero(self.rank == 0)

    @property
    def max_rank(self) -> int:
        return int(self.rank.max()) if self.n_switches else -1

    def up_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct (lower, upper) switch pairs of all up links, shape ``(K,)`` each."""
        up = self.rank[self.grp_remote] == self.rank[self.grp_switch] + 1
        up &= self.rank[self.grp_switch] >= 0
        return self.grp_switch[up], self.grp_remote[up]


def switch_graph(fabric: Fabric) -> SwitchGraph:
    """Derive the :class:`SwitchGraph` of ``fabric`` (vectorized, one pass per rank)."""
    sw_node = fabric.switches
    n_sw = len(sw_node)
    sw_id = np.full(fabric.n_nodes, -1, dtype=np.int64)
    sw_id[sw_node] = np.arange(n_sw)
    is_sw = fabric.node_type == NodeType.SWITCH

    # Directed port-level edges, both directions of every link.
    a = np.concatenate([fabric.link_a, fabric.link_b])
    b = np.concatenate([fabric.link_b, fabric.link_a])
    na, nb = fabric.port_node[a], fabric.port_node[b]
    ss = is_sw[na] & is_sw[nb]
    e_src, e_dst = sw_id[na[ss]], sw_id[nb[ss]]
    e_port = fabric.port_num[a[ss]].astype(np.int64)

    # End-ports: non-switch ports linked to a switch.
    ep_mask = ~is_sw[na] & is_sw[nb]
    ep_row = a[ep_mask]
    ep_sw = sw_id[nb[ep_mask]]
    ep_swp = fabric.port_num[b[ep_mask]].astype(np.int64)
    o = np.lexsort((ep_swp, ep_sw))
    ep_row, ep_sw, ep_swp = ep_row[o], ep_sw[o], ep_swp[o]

    leaves = np.unique(ep_sw)
    rank = bfs_distance(n_sw, e_src, e_dst, leaves)

    # Port groups: sort edges by (switch, remote guid, port).
    guid = fabric.node_guid[sw_node]
    o = np.lexsort((e_port, guid[e_dst], e_src))
    e_src, e_dst, e_port = e_src[o], e_dst[o], e_port[o]
    new_grp = np.ones(len(e_src), dtype=bool)
    if len(e_src):
        new_grp[1:] = (e_src[1:] != e_src[:-1]) | (e_dst[1:] != e_dst[:-1])
    g_first = np.flatnonzero(new_grp)
    g_count = np.diff(np.append(g_first, len(e_src)))
    grp_switch, grp_remote = e_src[g_first], e_dst[g_first]
    grp_first = np.searchsorted(grp_switch, np.arange(n_sw))
    grp_count = np.searchsorted(grp_switch, np.arange(n_sw), side="right") - grp_first
    up = (rank[grp_remote] == rank[grp_switch] + 1) & (rank[grp_switch] >= 0)
    n_up = np.bincount(grp_switch[up], minlength=n_sw).astype(np.int64)

    return SwitchGraph(
        sw_node=sw_node,
        sw_guid=guid,
        sw_lid=fabric.port_lid[fabric.port_start[sw_node]].astype(np.int64),
        rank=rank,
        grp_first=grp_first.astype(np.int64),
        grp_count=grp_count.astype(np.int64),
        n_up=n_up,
        grp_switch=grp_switch,
        grp_remote=grp_remote,
        grp_port_first=g_first.astype(np.int64),
        grp_port_count=g_count.astype(np.int64),
        grp_ports=e_port,
        ep_row=ep_row,
        ep_switch=ep_sw,
        ep_switch_port=ep_swp,
        ep_lid=fabric.port_lid[ep_row].astype(np.int64),
        ep_lmc=fabric.port_lmc[ep_row].astype(np.int64),
    )


#: ``next_switch`` value of a port linked to an end-port (CA/router).
TO_END_PORT = -2
#: ``next_switch`` value of a port with no link (or not a port).
NO_LINK = -1


def next_switch(g: SwitchGraph, n_ports: int = 256) -> np.ndarray:
    """Where each (switch, port) leads: shape ``(S, n_ports)`` int32 with the
    remote switch id, :data:`TO_END_PORT` or :data:`NO_LINK`."""
    out = np.full((g.n_switches, n_ports), NO_LINK, dtype=np.int32)
    out[g.ep_switch, g.ep_switch_port] = TO_END_PORT
    # grp_ports lists the ports of group 0, then group 1, ...: repeat group data.
    counts = g.grp_port_count
    out[np.repeat(g.grp_switch, counts), g.grp_ports] = np.repeat(g.grp_remote, counts)
    return out
