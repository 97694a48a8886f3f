"""One path through a set of forwarding tables, hop by hop (what ``ibtracert``
does on a live fabric, from files).

:func:`find_endpoint` names a port of the fabric by host name (node
description, or its first word), node or port GUID, or LID;
:func:`trace_route` follows the tables from the source port to the
destination LID: at every switch the output port its table gives, then the
cable on that port.  A walk ends delivered, or at the first thing that stops
a packet: no table for a switch, no route (255), port 0 of a switch the LID
is not on, a port that does not exist or has no cable, a cable to another
end node, or a switch met twice (a loop: a deterministic table walk that
revisits a switch for the same LID never ends).  Given the lanes file of a
routing with detours, each hop carries its VL (the SL of the path through
that switch's SL-to-VL table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from smroute.errors import InputError
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing.lanesfile import LanesFile
from smroute.tables.lft import NO_ROUTE, ForwardingTables

__all__ = ["DELIVERED", "Endpoint", "Hop", "HopTrace", "find_endpoint", "trace_route"]

DELIVERED = "delivered"
_NUMBER = re.compile(r"(?:0x)?[0-9a-f]+", re.IGNORECASE)
#: The largest unicast LID.
_MAX_UCAST_LID = 0xBFFF


@dataclass(frozen=True)
class Endpoint:
    """A port of the fabric (``row``) and the LID it was named by (``None``:
    named by name or GUID, its base LID is meant)."""

    row: int
    lid: int | None = None


@dataclass(frozen=True)
class Hop:
    """A switch crossed: node index, input port (0: the packet starts there),
    output port, and the VL it leaves on (``None`` without lanes)."""

    node: int
    in_port: int
    out_port: int
    vl: int | None = None


@dataclass
class HopTrace:
    """The walk from ``src`` to ``dst`` (port rows) for ``dlid``: ``status``
    :data:`DELIVERED`, ``"no table"``, ``"no route"``, ``"dead end"`` or
    ``"loop"``; ``reason`` says where and why when not delivered."""

    src: int
    dst: int
    dlid: int
    sl: int | None
    hops: list[Hop] = field(default_factory=list)
    status: str = DELIVERED
    reason: str = ""

    @property
    def delivered(self) -> bool:
        return self.status == DELIVERED


def _node_port(f: Fabric, node: int) -> int:
    """The port a node is traced from or to: a switch's port 0, else its first
    linked port with a LID (else its first linked port, else its first port)."""
    start, n = int(f.port_start[node]), int(f.num_ports[node])
    if f.node_type[node] == NodeType.SWITCH:
        return start
    rows = range(start, start + n + 1)
    linked = [r for r in rows if f.port_exists[r] and f.port_peer[r] >= 0]
    with_lid = [r for r in linked if f.port_lid[r]]
    return (with_lid or linked or [start + 1 if n else start])[0]


def _by_number(f: Fabric, text: str) -> Endpoint | None:
    s = text.lower()
    kind = "lid" if s.startswith("lid:") else "guid" if s.startswith("guid:") else ""
    s = s.split(":", 1)[1] if kind else s
    if not _NUMBER.fullmatch(s):
        return None
    hexed = s.startswith("0x")
    if not kind:
        digits = s[2:] if hexed else s
        kind = ("lid" if (hexed and len(digits) <= 4) or (not hexed and s.isdigit()
                                                            and int(s) <= _MAX_UCAST_LID)
                else "guid")
    if kind == "lid":
        lid = int(s, 16) if hexed else int(s, 10)
        try:
            return Endpoint(f.port_by_lid(lid), lid)
        except KeyError:
            raise InputError(f"endpoint {text!r}: no port has LID {lid}") from None
    guid = int(s, 16)
    try:
        return Endpoint(_node_port(f, f.node_by_guid(guid)))
    except KeyError:
        pass
    try:
        row = f.port_by_guid(guid)
    except KeyError:
        raise InputError(f"endpoint {text!r}: no node or port has GUID {guid:#018x}") from None
    node = int(f.port_node[row])
    return Endpoint(_node_port(f, node) if f.node_type[node] == NodeType.SWITCH else row)


def find_endpoint(f: Fabric, text: str) -> Endpoint:
    """The port ``text`` names: ``lid:N`` / ``guid:X``, a LID (decimal up to
    49151, or ``0x`` and at most 4 hex digits), a node or port GUID (hex), a
    node description, or the first word of node descriptions (a host name).
    :class:`InputError` when nothing or more than one node matches."""
    text = text.strip()
    if not text:
        raise InputError("endpoint: empty; expected a host name, GUID or LID")
    ep = _by_number(f, text)
    if ep is not None:
        return ep
    nodes = [i for i, d in enumerate(f.node_desc) if d == text]
    if not nodes:
        nodes = [i for i, d in enumerate(f.node_desc) if d.split(" ", 1)[0] == text]
    if not nodes:
        raise InputError(f"endpoint {text!r}: no node description or host name matches, and it "
                         "is not a GUID or LID")
    if len(nodes) > 1:
        names = ", ".join(f.describe_node(n) for n in nodes[:4])
        raise InputError(f"endpoint {text!r}: {len(nodes)} nodes match ({names}"
                         f"{', ...' if len(nodes) > 4 else ''}); name one by GUID or LID")
    return Endpoint(_node_port(f, nodes[0]))


def trace_route(f: Fabric, tables: ForwardingTables, src: Endpoint, dst: Endpoint, *,
                lanes: LanesFile | None = None) -> HopTrace:
    """Walk from ``src`` to ``dst`` (module doc).  The DLID is the LID ``dst``
    was named by, else its port's base LID (:class:`InputError` if it has none)."""
    dlid = dst.lid if dst.lid is not None else int(f.port_lid[dst.row])
    if not dlid:
        raise InputError(f"endpoint {f.describe_port(dst.row)} has no LID to route to")
    out = HopTrace(src.row, dst.row, dlid, None)
    node = int(f.port_node[src.row])
    if f.node_type[node] == NodeType.SWITCH:
        cur, in_port = node, 0
    else:
        peer = int(f.port_peer[src.row])
        if peer < 0:
            return _stop(out, "dead end", f"the source port {f.describe_port(src.row)} has "
                         "no cable")
        if peer == dst.row:
            return out
        cur, in_port = int(f.port_node[peer]), int(f.port_num[peer])
        if f.node_type[cur] != NodeType.SWITCH:
            return _stop(out, "dead end", f"the source's cable leads to "
                         f"{f.describe_port(peer)}, not to a switch")
    if lanes is not None:
        out.sl = lanes.sl_of(int(f.node_guid[cur]), dlid)
    seen: set[int] = set()
    width = tables.ports.shape[1]
    while True:
        guid = int(f.node_guid[cur])
        name = f.describe_node(cur)
        if cur in seen:
            return _stop(out, "loop", f"{name} is met a second time: the tables loop for "
                         f"LID {dlid}")
        seen.add(cur)
        if int(f.port_start[cur]) == dst.row:
            out.hops.append(Hop(cur, in_port, 0, None))
            return out
        try:
            row = tables.row_of(guid)
        except KeyError:
            return _stop(out, "no table", f"no forwarding table for switch {name}")
        port = int(tables.ports[row, dlid]) if dlid < width else NO_ROUTE
        if port == NO_ROUTE:
            return _stop(out, "no route", f"switch {name} has no route to LID {dlid}")
        vl = lanes.vl_of(guid, in_port, port, out.sl or 0) if lanes is not None else None
        if port == 0:
            return _stop(out, "dead end", f"switch {name} sends LID {dlid} to its port 0, but "
                         "the LID is not its own")
        if port > int(f.num_ports[cur]):
            return _stop(out, "dead end", f"switch {name} sends LID {dlid} to port {port}, "
                         f"which it does not have ({int(f.num_ports[cur])} ports)")
        out.hops.append(Hop(cur, in_port, port, vl))
        peer = int(f.port_peer[f.port_row(cur, port)])
        if peer < 0:
            return _stop(out, "dead end", f"switch {name} sends LID {dlid} to port {port}, "
                         "which has no cable")
        if peer == dst.row:
            return out
        nxt = int(f.port_node[peer])
        if f.node_type[nxt] != NodeType.SWITCH:
            return _stop(out, "dead end", f"switch {name} sends LID {dlid} to port {port}, "
                         f"whose cable leads to {f.describe_port(peer)}, not the destination")
        cur, in_port = nxt, int(f.port_num[peer])


def _stop(t: HopTrace, status: str, reason: str) -> HopTrace:
    t.status, t.reason = status, reason
    return t
