"""Immutable, numpy-backed model of an InfiniBand fabric.

Layout
------
* **Nodes** ``(N,)``: one row per switch, channel adapter (CA) or router.
* **Ports** ``(P,)``: dense per node: node ``i`` owns the rows
  ``port_start[i] .. port_start[i] + num_ports[i]`` (inclusive), i.e. port
  numbers ``0 .. num_ports[i]``.  Port 0 is a switch's management port (it
  carries the switch's LID); on CAs and routers port 0 does not exist and its
  row has ``port_exists == False``.  The row of port ``p`` of node ``i`` is
  ``port_start[i] + p``: lookups by ``(node, port)`` are arithmetic.
* **Links** ``(L,)``: ``link_a`` / ``link_b`` are port rows.  Parallel links
  between two nodes are separate links.  ``port_peer`` gives, per port row,
  the row at the other end of its link (``-1`` if none).

A :class:`Fabric` is built in one pass by :class:`FabricBuilder` and is never
mutated afterwards (all arrays are made read-only).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property

import numpy as np
import numpy.typing as npt

from smroute.errors import InputError

__all__ = [
    "NodeType",
    "SPEEDS",
    "WIDTHS",
    "Fabric",
    "FabricBuilder",
    "FabricError",
    "speed_code",
    "speed_name",
]

IntArray = npt.NDArray[np.int64]


class NodeType(IntEnum):
    """IB NodeInfo.NodeType values."""

    CA = 1
    SWITCH = 2
    ROUTER = 3


#: Link speed names, index = speed code stored in ``port_speed`` (0 = unknown, ``???``).
SPEEDS: tuple[str, ...] = ("???", "SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")
#: Per-lane data rate in Gb/s of each speed code (0 = unknown).
SPEED_GBPS: tuple[float, ...] = (
    0.0, 2.5, 5.0, 10.0, 10.0, 14.0625, 25.78125, 53.125, 106.25, 212.5,
)
#: Link widths allowed by the IB spec, in lanes (0 = unknown).
WIDTHS: tuple[int, ...] = (1, 2, 4, 8, 12)


def speed_code(name: str) -> int:
    """Speed code for a name such as ``"EDR"``; raises ``KeyError`` if unknown."""
    if name not in SPEEDS:
        raise KeyError(name)
    return SPEEDS.index(name)


def speed_name(code: int) -> str:
    """Name of a speed code (``"???"`` for 0)."""
    return SPEEDS[int(code)]


class FabricError(InputError):
    """A fabric is inconsistent (duplicate GUID, one-sided link, ...)."""


def _frozen(a: npt.ArrayLike, dtype: npt.DTypeLike) -> np.ndarray:
    arr = np.array(a, dtype=dtype)
    arr.setflags(write=False)
    return arr


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
        return b.build()


class FabricBuilder:
    """Accumulates nodes, ports and links, then builds a :class:`Fabric` in one pass.

    ``add_node`` returns the node index.  Port attributes are set with
    ``set_port``; links with ``add_link`` (by node index and port number).
    Bulk (numpy) variants for generators and copies: ``add_nodes`` (many nodes
    of one type), ``set_ports`` (array attributes), ``add_links_rows``,
    ``add_node_arrays`` + ``set_port_arrays`` (copy nodes of another fabric).
    ``build`` checks consistency: duplicate node GUIDs, ports out of range and
    ports used by two links raise :class:`FabricError`.
    """

    def __init__(self) -> None:
        self._type: list[int] = []
        self._guid: list[int] = []
        self._sysimg: list[int] = []
        self._vendor: list[int] = []
        self._device: list[int] = []
        self._nports: list[int] = []
        self._desc: list[str] = []
        # sparse port attributes: (node, port) -> values
        self._pnode: list[int] = []
        self._pnum: list[int] = []
        self._pguid: list[int] = []
        self._plid: list[int] = []
        self._plmc: list[int] = []
        self._pwidth: list[int] = []
        self._pspeed: list[int] = []
        self._bulk: tuple[Fabric, np.ndarray] | None = None
        self._la_node: list[np.ndarray | list[int]] = []
        self._la_port: list[np.ndarray | list[int]] = []
        self._lb_node: list[np.ndarray | list[int]] = []
        self._lb_port: list[np.ndarray | list[int]] = []

    def add_node(
        self,
        kind: NodeType,
        guid: int,
        num_ports: int,
        desc: str,
        *,
        sysimg_guid: int = 0,
        vendor_id: int = 0,
        device_id: int = 0,
    ) -> int:
        if not 0 < num_ports <= 255:
            raise FabricError(f"node {guid:#018x}: port count {num_ports} not in 1..255")
        self._type.append(int(kind))
        self._guid.append(guid)
        self._sysimg.append(sysimg_guid)
        self._vendor.append(vendor_id)
        self._device.append(device_id)
        self._nports.append(num_ports)
        self._desc.append(desc)
        return len(self._type) - 1

    def add_nodes(
        self,
        kind: NodeType,
        guids: npt.ArrayLike,
        num_ports: npt.ArrayLike,
        descs: list[str] | tuple[str, ...],
        *,
        sysimg_guids: npt.ArrayLike = 0,
        vendor_id: int = 0,
        device_id: int = 0,
    ) -> IntArray:
        """Vectorized :meth:`add_node` for ``K`` nodes of one ``kind``.

        ``guids`` (K,) uint64; ``num_ports`` (K,) or scalar int (1..255);
        ``descs`` K strings; ``sysimg_guids`` (K,) or scalar uint64 (0 = none).
        Returns the new node indices, shape ``(K,)`` int64, consecutive.
        """
        g = np.atleast_1d(np.asarray(guids, dtype=np.uint64))
        k = int(g.shape[0])
        npts = np.broadcast_to(np.asarray(num_ports, dtype=np.int64), (k,))
        sysg = np.broadcast_to(np.asarray(sysimg_guids, dtype=np.uint64), (k,))
        if len(descs) != k:
            raise FabricError(f"add_nodes: {k} GUIDs but {len(descs)} descriptions")
        bad = (npts < 1) | (npts > 255)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise FabricError(f"node {int(g[i]):#018x}: port count {int(npts[i])} not in 1..255")
        first = len(self._type)
        self._type.extend([int(kind)] * k)
        self._guid.extend(g.tolist())
        self._sysimg.extend(sysg.tolist())
        self._vendor.extend([vendor_id] * k)
        self._device.extend([device_id] * k)
        self._nports.extend(npts.tolist())
        self._desc.extend(descs)
        return np.arange(first, first + k, dtype=np.int64)

    def set_ports(
        self,
        nodes: npt.ArrayLike,
        ports: npt.ArrayLike,
        *,
        guid: npt.ArrayLike = 0,
        lid: npt.ArrayLike = 0,
        lmc: npt.ArrayLike = 0,
        width: npt.ArrayLike = 0,
        speed: npt.ArrayLike = 0,
    ) -> None:
        """Vectorized :meth:`set_port`: every argument broadcasts to the shape of
        ``nodes`` (int64 node indices); ``guid`` uint64, ``lid`` uint16, ``lmc``,
        ``width`` and ``speed`` uint8 (0 = leave unset)."""
        n = np.atleast_1d(np.asarray(nodes, dtype=np.int64))
        shape = n.shape
        cols = (
            (self._pnode, n, np.int64), (self._pnum, ports, np.int64),
            (self._pguid, guid, np.uint64), (self._plid, lid, np.int64),
            (self._plmc, lmc, np.int64), (self._pwidth, width, np.int64),
            (self._pspeed, speed, np.int64),
        )
        for dst, vals, dt in cols:
            dst.extend(np.broadcast_to(np.asarray(vals, dtype=dt), shape).ravel().tolist())

    def set_port(
        self,
        node: int,
        port: int,
        *,
        guid: int = 0,
        lid: int = 0,
        lmc: int = 0,
        width: int = 0,
        speed: int = 0,
    ) -> None:
        """Record attributes of a port (marks it as existing).  Later calls for
        the same port override earlier ones field by field where non-zero."""
        self._pnode.append(node)
        self._pnum.append(port)
        self._pguid.append(guid)
        self._plid.append(lid)
        self._plmc.append(lmc)
        self._pwidth.append(width)
        self._pspeed.append(speed)

    def add_node_arrays(self, src: Fabric, keep_nodes: np.ndarray) -> IntArray:
        """Append the nodes ``keep_nodes`` (int64 indices, in order) of ``src``
        with all their node attributes; returns their new indices ``(K,)``."""
        keep = np.asarray(keep_nodes, dtype=np.int64)
        first = len(self._type)
        self._type.extend(src.node_type[keep].tolist())
        self._guid.extend(src.node_guid[keep].tolist())
        self._sysimg.extend(src.sysimg_guid[keep].tolist())
        self._vendor.extend(src.vendor_id[keep].tolist())
        self._device.extend(src.device_id[keep].tolist())
        self._nports.extend(src.num_ports[keep].tolist())
        self._desc.extend(src.node_desc[i] for i in keep.tolist())
        return np.arange(first, first + len(keep), dtype=np.int64)

    def set_port_arrays(self, src: Fabric, keep_nodes: np.ndarray) -> None:
        """Copy port attributes of ``keep_nodes`` (in order) from ``src``."""
        self._bulk = (src, keep_nodes)

    def add_link(self, node_a: int, port_a: int, node_b: int, port_b: int) -> None:
        self._la_node.append([node_a])
        self._la_port.append([port_a])
        self._lb_node.append([node_b])
        self._lb_port.append([port_b])

    def add_links_rows(
        self, node_a: npt.ArrayLike, port_a: npt.ArrayLike,
        node_b: npt.ArrayLike, port_b: npt.ArrayLike,
    ) -> None:
        """Vectorized :meth:`add_link`."""
        self._la_node.append(np.asarray(node_a))
        self._la_port.append(np.asarray(port_a))
        self._lb_node.append(np.asarray(node_b))
        self._lb_port.append(np.asarray(port_b))

    @staticmethod
    def _cat(parts: list[np.ndarray | list[int]]) -> np.ndarray:
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])

    def build(self) -> Fabric:
        n = len(self._type)
        node_type = np.array(self._type, dtype=np.int8)
        node_guid = np.array(self._guid, dtype=np.uint64)
        num_ports = np.array(self._nports, dtype=np.int16)
        if len(np.unique(node_guid)) != n:
            vals, counts = np.unique(node_guid, return_counts=True)
            dup = int(vals[counts > 1][0])
            raise FabricError(f"duplicate node GUID {dup:#018x}")
        port_start = np.zeros(n, dtype=np.int64)
        if n:
            port_start[1:] = np.cumsum(num_ports.astype(np.int64) + 1)[:-1]
        p_total = int((num_ports.astype(np.int64) + 1).sum())
        port_node = np.repeat(np.arange(n, dtype=np.int32), num_ports.astype(np.int64) + 1)
        port_num = (np.arange(p_total, dtype=np.int64) - port_start[port_node]).astype(np.int16)
        port_exists = (port_num > 0) | (node_type[port_node] == NodeType.SWITCH)
        port_guid = np.zeros(p_total, dtype=np.uint64)
        port_lid = np.zeros(p_total, dtype=np.uint16)
        port_lmc = np.zeros(p_total, dtype=np.uint8)
        port_width = np.zeros(p_total, dtype=np.uint8)
        port_speed = np.zeros(p_total, dtype=np.uint8)

        if self._bulk is not None:
            src, keep = self._bulk
            kept = np.zeros(src.n_nodes, dtype=bool)
            kept[keep] = True
            src_rows = np.flatnonzero(kept[src.port_node])
            port_guid[:] = src.port_guid[src_rows]
            port_lid[:] = src.port_lid[src_rows]
            port_lmc[:] = src.port_lmc[src_rows]
            port_width[:] = src.port_width[src_rows]
            port_speed[:] = src.port_speed[src_rows]

        if self._pnode:
            pn = np.array(self._pnode, dtype=np.int64)
            pp = np.array(self._pnum, dtype=np.int64)
            bad = (pp < 0) | (pp > num_ports[pn])
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise FabricError(
                    f"node {int(node_guid[pn[i]]):#018x} has {int(num_ports[pn[i]])} ports, "
                    f"port {int(pp[i])} is out of range"
                )
            rows = port_start[pn] + pp
            attrs: list[tuple[np.ndarray, list[int]]] = [
                (port_guid, self._pguid), (port_lid, self._plid), (port_lmc, self._plmc),
                (port_width, self._pwidth), (port_speed, self._pspeed),
            ]
            for arr, column in attrs:
                v = np.array(column, dtype=arr.dtype)
                nz = v != 0
                arr[rows[nz]] = v[nz]

        la_node, la_port = self._cat(self._la_node), self._cat(self._la_port)
        lb_node, lb_port = self._cat(self._lb_node), self._cat(self._lb_port)
        for nn, pp in ((la_node, la_port), (lb_node, lb_port)):
            bad = (pp < 1) | (pp > num_ports[nn]) if len(nn) else np.zeros(0, bool)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise FabricError(
                    f"link uses port {int(pp[i])} of node {int(node_guid[nn[i]]):#018x}, "
                    f"which has {int(num_ports[nn[i]])} ports"
                )
        link_a = port_start[la_node] + la_port
        link_b = port_start[lb_node] + lb_port
        port_peer = np.full(p_total, -1, dtype=np.int64)
        ends = np.concatenate([link_a, link_b])
        if len(ends) != len(np.unique(ends)):
            vals, counts = np.unique(ends, return_counts=True)
            r = int(vals[counts > 1][0])
            raise FabricError(
                f"port {int(port_num[r])} of node {int(node_guid[port_node[r]]):#018x} "
                "is used by more than one link"
            )
        port_peer[link_a] = link_b
        port_peer[link_b] = link_a
        port_exists |= port_peer >= 0
        if self._bulk is not None:
            src, keep = self._bulk
            kept = np.zeros(src.n_nodes, dtype=bool)
            kept[keep] = True
            port_exists |= src.port_exists[np.flatnonzero(kept[src.port_node])]
        if self._pnode:
            port_exists[port_start[np.array(self._pnode)] + np.array(self._pnum)] = True

        return Fabric(
            node_type=_frozen(node_type, np.int8),
            node_guid=_frozen(node_guid, np.uint64),
            sysimg_guid=_frozen(self._sysimg, np.uint64),
            vendor_id=_frozen(self._vendor, np.uint32),
            device_id=_frozen(self._device, np.uint32),
            num_ports=_frozen(num_ports, np.int16),
            port_start=_frozen(port_start, np.int64),
            node_desc=tuple(self._desc),
            port_node=_frozen(port_node, np.int32),
            port_num=_frozen(port_num, np.int16),
            port_exists=_frozen(port_exists, bool),
            port_guid=_frozen(port_guid, np.uint64),
            port_lid=_frozen(port_lid, np.uint16),
            port_lmc=_frozen(port_lmc, np.uint8),
            port_width=_frozen(port_width, np.uint8),
            port_speed=_frozen(port_speed, np.uint8),
            port_peer=_frozen(port_peer, np.int64),
            link_a=_frozen(link_a, np.int64),
            link_b=_frozen(link_b, np.int64),
        )
