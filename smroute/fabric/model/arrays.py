"""The immutable :class:`Fabric`: node, port and link arrays (layout in
:mod:`smroute.fabric.model`) and the lookups on them.  Built by
:class:`~smroute.fabric.model.builder.FabricBuilder`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from smroute.fabric.model.base import NodeType

__all__ = ["Fabric"]

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Fabric:
    """An immutable fabric.

    Node arrays, shape ``(N,)``:
        node_type (int8, :class:`NodeType`), node_guid (uint64),
        sysimg_guid (uint64), vendor_id (uint32), device_id (uint32),
        num_ports (int16, number of external ports), port_start (int64, row of
        port 0 in the port arrays); node_desc: tuple of N str.
    Port arrays, shape ``(P,)`` with ``P = sum(num_ports + 1)``:
        port_node (int32, owning node), port_num (int16), port_exists (bool),
        port_guid (uint64, 0 if unknown), port_lid (uint16, 0 if unknown),
        port_lmc (uint8), port_width (uint8, lanes, 0 unknown),
        port_speed (uint8, index into :data:`SPEEDS`), port_peer (int64, row of
        the linked port or -1).
    Link arrays, shape ``(L,)``: link_a, link_b (int64 port rows, ``link_a``
        is the end listed first).
    """

    node_type: np.ndarray
    node_guid: np.ndarray
    sysimg_guid: np.ndarray
    vendor_id: np.ndarray
    device_id: np.ndarray
    num_ports: np.ndarray
    port_start: np.ndarray
    node_desc: tuple[str, ...]
    port_node: np.ndarray
    port_num: np.ndarray
    port_exists: np.ndarray
    port_guid: np.ndarray
    port_lid: np.ndarray
    port_lmc: np.ndarray
    port_width: np.ndarray
    port_speed: np.ndarray
    port_peer: np.ndarray
    link_a: np.ndarray
    link_b: np.ndarray
    _cache: dict[str, object] = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------ sizes
    @property
    def n_nodes(self) -> int:
        return int(self.node_type.shape[0])

    @property
    def n_ports(self) -> int:
        return int(self.port_node.shape[0])

    @property
    def n_links(self) -> int:
        return int(self.link_a.shape[0])

    @cached_property
    def switches(self) -> IntArray:
        """Node indices of switches, ascending, shape ``(S,)`` int64."""
        return np.flatnonzero(self.node_type == NodeType.SWITCH)

    @cached_property
    def cas(self) -> IntArray:
        """Node indices of channel adapters, ascending, shape ``(C,)`` int64."""
        return np.flatnonzero(self.node_type == NodeType.CA)

    @cached_property
    def routers(self) -> IntArray:
        return np.flatnonzero(self.node_type == NodeType.ROUTER)

    # --------------------------------------------------------------- lookups
    def port_row(self, node: int, port: int) -> int:
        """Port row of ``port`` on ``node``; ``IndexError`` if out of range."""
        if not 0 <= port <= int(self.num_ports[node]):
            raise IndexError(f"node {node} has no port {port}")
        return int(self.port_start[node]) + port

    def port_rows(self, nodes: npt.ArrayLike, ports: npt.ArrayLike) -> IntArray:
        """Vectorized :meth:`port_row` (no range check)."""
        return self.port_start[np.asarray(nodes)] + np.asarray(ports, dtype=np.int64)

    @cached_property
    def _guid_index(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.node_guid, kind="stable")
        return self.node_guid[order], order

    def node_by_guid(self, guid: int) -> int:
        """Node index of a node GUID; ``KeyError`` if absent."""
        keys, order = self._guid_index
        i = int(np.searchsorted(keys, np.uint64(guid)))
        if i < len(keys) and int(keys[i]) == guid:
            return int(order[i])
        raise KeyError(f"no node with GUID {guid:#018x}")

    def nodes_by_guid(self, guids: npt.ArrayLike) -> IntArray:
        """Vectorized :meth:`node_by_guid`: -1 where absent."""
        keys, order = self._guid_index
        g = np.asarray(guids, dtype=np.uint64)
        i = np.searchsorted(keys, g)
        i_c = np.minimum(i, max(len(keys) - 1, 0))
        ok = (i < len(keys)) & (keys[i_c] == g) if len(keys) else np.zeros(g.shape, bool)
        return np.where(ok, order[i_c] if len(keys) else -1, -1).astype(np.int64)

    @cached_property
    def _port_guid_index(self) -> tuple[np.ndarray, np.ndarray]:
        rows = np.flatnonzero(self.port_exists & (self.port_guid != 0))
        order = rows[np.argsort(self.port_guid[rows], kind="stable")]
        return self.port_guid[order], order

    def port_by_guid(self, guid: int) -> int:
        """Port row of a port GUID; ``KeyError`` if absent."""
        keys, order = self._port_guid_index
        i = int(np.searchsorted(keys, np.uint64(guid)))
        if i < len(keys) and int(keys[i]) == guid:
            return int(order[i])
        raise KeyError(f"no port with GUID {guid:#018x}")

    @cached_property
    def lid_to_port(self) -> IntArray:
        """Port row owning each LID, shape ``(max_lid + 1,)`` int64, -1 if none.

        Every LID of a port's LMC range ``base .. base + 2**lmc - 1`` maps to it.
        """
        rows = np.flatnonzero(self.port_exists & (self.port_lid != 0))
        base = self.port_lid[rows].astype(np.int64)
        count = np.left_shift(1, self.port_lmc[rows].astype(np.int64))
        top = int((base + count).max()) if len(rows) else 1
        table = np.full(top, -1, dtype=np.int64)
        offs = np.repeat(base, count) + (
            np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        )
        table[offs] = np.repeat(rows, count)
        table.setflags(write=False)
        return table

    def port_by_lid(self, lid: int) -> int:
        """Port row owning ``lid``; ``KeyError`` if none."""
        t = self.lid_to_port
        if 0 < lid < len(t) and t[lid] >= 0:
            return int(t[lid])
        raise KeyError(f"no port with LID {lid}")

    @cached_property
    def node_lid(self) -> np.ndarray:
        """Base LID per node, shape ``(N,)`` uint16: port 0 for switches, first port
        with a LID for CAs/routers; 0 if none."""
        out = np.zeros(self.n_nodes, dtype=np.uint16)
        rows = np.flatnonzero(self.port_exists & (self.port_lid != 0))[::-1]
        out[self.port_node[rows]] = self.port_lid[rows]
        out.setflags(write=False)
        return out

    def peer(self, row: int) -> int:
        """Port row linked to ``row`` (-1 if unconnected)."""
        return int(self.port_peer[row])

    def describe_port(self, row: int) -> str:
        """Human name of a port row: ``"desc" (guid)[port]``."""
        n = int(self.port_node[row])
        return f'"{self.node_desc[n]}" ({int(self.node_guid[n]):#018x})[{int(self.port_num[row])}]'

    def describe_node(self, node: int) -> str:
        return f'"{self.node_desc[node]}" ({int(self.node_guid[node]):#018x})'

    # ------------------------------------------------------------- identity
    @cached_property
    def content_hash(self) -> str:
        """SHA-256 over the graph: nodes, ports and links (not descriptions)."""
        h = hashlib.sha256()
        for arr in (
            self.node_type, self.node_guid, self.num_ports, self.port_guid,
            self.port_lid, self.port_lmc, self.port_exists, self.port_peer,
        ):
            h.update(np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()

    def link_set(self) -> set[tuple[tuple[int, int], tuple[int, int]]]:
        """Links as a set of unordered ``((guid, port), (guid, port))`` pairs, for
        comparing two fabrics independently of node order."""
        ga = self.node_guid[self.port_node[self.link_a]].tolist()
        pa = self.port_num[self.link_a].tolist()
        gb = self.node_guid[self.port_node[self.link_b]].tolist()
        pb = self.port_num[self.link_b].tolist()
        out = set()
        for x in zip(zip(ga, pa, strict=True), zip(gb, pb, strict=True), strict=True):
            out.add((min(x), max(x)))
        return out

    def with_removed(self, nodes: npt.ArrayLike = (), links: npt.ArrayLike = ()) -> Fabric:
        """A new fabric without the given node indices and link indices.

        Removing a node removes its links too.  Node and port numbering of the
        remaining nodes is compacted; GUIDs, LIDs and descriptions are kept.
        """
        from smroute.fabric.model.builder import FabricBuilder

        drop_nodes = np.zeros(self.n_nodes, dtype=bool)
        drop_nodes[np.asarray(nodes, dtype=np.int64)] = True
        keep_link = np.ones(self.n_links, dtype=bool)
        keep_link[np.asarray(links, dtype=np.int64)] = False
        keep_link &= ~drop_nodes[self.port_node[self.link_a]]
        keep_link &= ~drop_nodes[self.port_node[self.link_b]]
        b = FabricBuilder()
        keep = np.flatnonzero(~drop_nodes)
        new_index = np.full(self.n_nodes, -1, dtype=np.int64)
        new_index[keep] = np.arange(len(keep))
        b.add_node_arrays(self, keep)
        b.set_port_arrays(self, keep)
        la, lb = self.link_a[keep_link], self.link_b[keep_link]
        b.add_links_rows(
            new_index[self.port_node[la]], self.port_num[la],
            new_index[self.port_node[lb]], self.port_num[lb],
        )
        out = b.build()
        # per-node facts that depend on the nodes alone (key "node:..."; a
        # dict of (N,) arrays) stay true for the nodes kept
        for key, val in self._cache.items():
            if key.startswith("node:") and isinstance(val, dict):
                out._cache[key] = {k: v[keep] for k, v in val.items()}
        return out
