"""The switch graph of a fabric, as routing sees it: ranks, port groups, end-ports.

Everything here is derived from a :class:`~smroute.fabric.model.Fabric` and its
:class:`~smroute.fabric.roles.FabricRoles` in a few vectorized passes.
Switches get compact ids ``0 .. S-1`` in ascending node index order.

Two orientations of the switch links exist, both acyclic, so up*/down* routes
over either are free of credit loops:

* :func:`switch_graph` (Dmodc's): ranks from the roles (leaves 0, every other
  switch its hop distance from the leaves); a link goes *up* from rank ``r``
  to ``r + 1``.  Links between switches of equal rank and self-looped cables
  are left out of the port groups: never used.  Switches that cannot reach a
  leaf get rank ``-1`` and are not routed.
* :func:`rooted_graph` (the general up*/down*): every switch link is kept
  (self loops excepted) and points *up* towards one root switch: to the end
  nearer the root, or of equal distance to the lower GUID.  ``rank`` is then
  the longest chain of up links below a switch, so every up link goes to a
  higher rank (possibly skipping some).

Port groups: the ports of a switch linked to one remote switch form a group.
Groups of a switch are ordered by the remote switch's GUID (Dmodc's UUID
order); ports inside a group by port number.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from smroute.fabric.graph import bfs_distance, components
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import EndportRole, FabricRoles, fabric_roles

__all__ = ["SwitchGraph", "ranked_like", "switch_graph", "rooted_graph"]


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
        LID, 0 if unknown), ep_lmc (int64), ep_agg (bool: an aggregation
        node, which sends no application traffic).
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
    ep_agg: np.ndarray
    is_leaf: np.ndarray
    component: np.ndarray
    mode: str = "tree"

    @property
    def n_switches(self) -> int:
        return int(self.sw_node.shape[0])

    @property
    def leaves(self) -> np.ndarray:
        """Switch ids of the leaves, ascending. Shape ``(L,)`` int64."""
        return np.flatnonzero(self.is_leaf)

    @property
    def max_rank(self) -> int:
        return int(self.rank.max()) if self.n_switches else -1

    def cables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per cable of ``grp_ports`` (the port groups expanded), shape
        ``(P,)`` int64 each: its switch, the switch behind it, its port."""
        return (np.repeat(self.grp_switch, self.grp_port_count),
                np.repeat(self.grp_remote, self.grp_port_count), self.grp_ports)

    def behind(self) -> np.ndarray:
        """``(S, 256)`` int32: the switch behind each switch port, -1 if none."""
        out = np.full((self.n_switches, 256), -1, dtype=np.int32)
        sw, remote, port = self.cables()
        out[sw, port] = remote
        return out

    def groups_of(self, s: int, *, up: bool) -> np.ndarray:
        """Switch ``s``'s up (``up``) or down port groups, ``(K,)`` int64
        group ids in group order."""
        ks = np.arange(self.grp_first[s], self.grp_first[s] + self.grp_count[s])
        far = self.rank[self.grp_remote[ks]]
        return ks[far > self.rank[s]] if up else ks[far < self.rank[s]]

    def up_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct (lower, upper) switch pairs of all up links, shape ``(K,)`` each."""
        up = self.rank[self.grp_remote] > self.rank[self.grp_switch]
        up &= self.rank[self.grp_switch] >= 0
        return self.grp_switch[up], self.grp_remote[up]


def switch_graph(fabric: Fabric, roles: FabricRoles | None = None) -> SwitchGraph:
    """Dmodc's :class:`SwitchGraph` of ``fabric``: ranks from ``roles``
    (computed if not given); equal-rank links and self loops unused."""
    roles = roles if roles is not None else fabric_roles(fabric)
    sw_node = fabric.switches
    rank = roles.rank[sw_node].astype(np.int64)
    return _graph(fabric, roles, rank, rank == 0, lambda src, dst: rank[src] != rank[dst], "tree")


def rooted_graph(fabric: Fabric, roles: FabricRoles, roots: np.ndarray,
                 like: SwitchGraph | None = None) -> SwitchGraph:
    """The general up*/down* :class:`SwitchGraph` of ``fabric`` towards the
    switch nodes ``roots`` ``(K,)`` (one per physical component; see the
    module doc).  Leaves (for Dmodc's NIDs) are the roles' leaves; switches not
    connected to a root get rank -1.  ``like``: a graph of the same fabric
    (e.g. :func:`switch_graph`'s); when it uses every switch link, its port
    groups are reused (only the ranks differ)."""
    sw_node = fabric.switches
    n_sw = len(sw_node)
    sw_id = np.full(fabric.n_nodes, -1, dtype=np.int64)
    sw_id[sw_node] = np.arange(n_sw)
    e_src, e_dst, _ = _switch_edges(fabric, sw_id)
    dist = bfs_distance(n_sw, e_src, e_dst, sw_id[np.asarray(roots, dtype=np.int64)])
    guid = fabric.node_guid[sw_node]
    # height order: farther from the root is lower; on a tie the higher GUID is lower
    reach = dist >= 0
    order = np.lexsort((guid, -np.where(reach, dist, n_sw)))
    height = np.empty(n_sw, dtype=np.int64)
    height[order] = np.arange(n_sw)
    ok = reach[e_src] & reach[e_dst]
    lo_e = ok & (height[e_dst] > height[e_src])
    lo, hi = e_src[lo_e], e_dst[lo_e]
    rank = np.where(reach, 0, -1).astype(np.int64)
    while len(lo):  # longest chain of up links below each switch
        new = rank.copy()
        np.maximum.at(new, hi, rank[lo] + 1)
        if np.array_equal(new, rank):
            break
        rank = new
    is_leaf = roles.rank[sw_node] == 0
    if like is not None and len(like.grp_ports) == len(e_src) and bool(reach.all()):
        up = rank[like.grp_remote] > rank[like.grp_switch]
        return dataclasses.replace(
            like, rank=rank, n_up=np.bincount(like.grp_switch[up], minlength=n_sw).astype(
                np.int64), is_leaf=is_leaf, mode="updown")
    return _graph(fabric, roles, rank, is_leaf & reach,
                  lambda src, dst: (rank[src] >= 0) & (rank[dst] >= 0), "updown")


def ranked_like(graph: SwitchGraph, like: SwitchGraph) -> SwitchGraph:
    """``graph``'s cables with ``like``'s ranks, up groups, leaves and mode
    (the same switches): the graph routes over both are walked on, e.g. the
    turn root's cables with the tree's ranks."""
    return dataclasses.replace(graph, rank=like.rank, n_up=like.n_up, is_leaf=like.is_leaf,
                               mode=like.mode)


def _switch_edges(fabric: Fabric, sw_id: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Directed switch-to-switch port edges (both directions of every link,
    self-looped cables left out): source id, remote id, port, ``(K,)`` int64."""
    is_sw = fabric.node_type == NodeType.SWITCH
    a = np.concatenate([fabric.link_a, fabric.link_b])
    b = np.concatenate([fabric.link_b, fabric.link_a])
    na, nb = fabric.port_node[a], fabric.port_node[b]
    ss = is_sw[na] & is_sw[nb] & (na != nb)
    return sw_id[na[ss]], sw_id[nb[ss]], fabric.port_num[a[ss]].astype(np.int64)


def _graph(
    fabric: Fabric, roles: FabricRoles, rank: np.ndarray, is_leaf: np.ndarray,
    keep: Callable[[np.ndarray, np.ndarray], np.ndarray], mode: str,
) -> SwitchGraph:
    """Build a :class:`SwitchGraph` with ``rank`` ``(S,)``, using the switch
    edges for which ``keep(src, dst)`` holds."""
    sw_node = fabric.switches
    n_sw = len(sw_node)
    sw_id = np.full(fabric.n_nodes, -1, dtype=np.int64)
    sw_id[sw_node] = np.arange(n_sw)
    is_sw = fabric.node_type == NodeType.SWITCH

    e_src, e_dst, e_port = _switch_edges(fabric, sw_id)
    component = components(n_sw, e_src, e_dst)
    k = keep(e_src, e_dst)
    e_src, e_dst, e_port = e_src[k], e_dst[k], e_port[k]

    # End-ports: non-switch ports linked to a switch.
    a = np.concatenate([fabric.link_a, fabric.link_b])
    b = np.concatenate([fabric.link_b, fabric.link_a])
    na, nb = fabric.port_node[a], fabric.port_node[b]
    ep_mask = ~is_sw[na] & is_sw[nb]
    ep_row = a[ep_mask]
    ep_sw = sw_id[nb[ep_mask]]
    ep_swp = fabric.port_num[b[ep_mask]].astype(np.int64)
    o = np.lexsort((ep_swp, ep_sw))
    ep_row, ep_sw, ep_swp = ep_row[o], ep_sw[o], ep_swp[o]

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
    up = (rank[grp_remote] > rank[grp_switch]) & (rank[grp_switch] >= 0)
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
        ep_agg=roles.endport_role[fabric.port_node[ep_row]] == EndportRole.AGGREGATION,
        is_leaf=np.asarray(is_leaf, dtype=bool),
        component=component.astype(np.int64),
        mode=mode,
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
