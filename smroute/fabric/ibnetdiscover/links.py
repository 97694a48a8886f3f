"""Resolve the links of parsed ``ibnetdiscover`` topology records and build the fabric.

:func:`build_topology` takes what :func:`smroute.fabric.ibnetdiscover.records.parse_records`
collected, checks it as a whole (unique port GUIDs, both ends of every link
listing each other, LIDs) and builds the :class:`~smroute.fabric.model.Fabric`;
:func:`_link_error` explains a link whose other end does not match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from smroute.fabric.ibnetdiscover.records import PREFIX, NodeRecords, PortLines
from smroute.fabric.ibnetdiscover.text import KIND_NAME, Skipper, TopologyError, check_lids
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError, NodeType
from smroute.fabric.model.builder import FabricBuilder

__all__ = ["Columns", "build_columns", "build_topology", "columns_of"]

_KIND_NAME = KIND_NAME


def _describe(nodes: NodeRecords, n: int) -> str:
    return f'{PREFIX[nodes.kind[n]]}-{nodes.guid[n]:016x} ("{nodes.desc[n]}")'


@dataclass
class Columns:
    """Records as arrays: per node (record order) and per port line (input order),
    the fields of :class:`NodeRecords` and :class:`PortLines`."""

    kind: np.ndarray  # int64 NodeType values
    guid: np.ndarray  # uint64
    nports: np.ndarray  # int64
    desc: list[str]
    sysimg: np.ndarray  # uint64
    vendor: np.ndarray  # uint64
    device: np.ndarray  # uint64
    p0_guid: np.ndarray  # uint64, switch port 0 (0 otherwise)
    p0_lid: np.ndarray  # int64
    p0_lmc: np.ndarray  # int64
    node_line: np.ndarray  # int64
    # port lines
    node: np.ndarray  # int64
    port: np.ndarray  # int64
    own: np.ndarray  # uint64 own port GUID, 0 unknown
    lid: np.ndarray  # int64
    lmc: np.ndarray  # int64
    width: np.ndarray  # int64
    speed: np.ndarray  # int64
    rkind: np.ndarray  # uint8, the remote's kind letter
    rguid: np.ndarray  # uint64
    rport: np.ndarray  # int64
    rpguid: np.ndarray  # uint64 remote port GUID where given
    given: np.ndarray  # bool
    line: np.ndarray  # int64


def columns_of(nodes: NodeRecords, ports: PortLines) -> Columns:
    """The records the line loop collected, as arrays."""
    i64, u64 = np.int64, np.uint64
    p0 = nodes.p0
    rpg = ports.rpguid
    return Columns(
        kind=np.array([int(k) for k in nodes.kind], dtype=i64),
        guid=np.array(nodes.guid, dtype=u64), nports=np.array(nodes.nports, dtype=i64),
        desc=nodes.desc, sysimg=np.array(nodes.sysimg, dtype=u64),
        vendor=np.array(nodes.vendor, dtype=u64), device=np.array(nodes.device, dtype=u64),
        p0_guid=np.array([g for g, _l, _m in p0], dtype=u64),
        p0_lid=np.array([lid for _g, lid, _m in p0], dtype=i64),
        p0_lmc=np.array([m for _g, _l, m in p0], dtype=i64),
        node_line=np.array(nodes.line, dtype=i64),
        node=np.array(ports.node, dtype=i64), port=np.array(ports.port, dtype=i64),
        own=np.array(ports.guid, dtype=u64), lid=np.array(ports.lid, dtype=i64),
        lmc=np.array(ports.lmc, dtype=i64), width=np.array(ports.width, dtype=i64),
        speed=np.array(ports.speed, dtype=i64),
        rkind=np.array([ord(k) for k in ports.rkind], dtype=np.uint8),
        rguid=np.array(ports.rguid, dtype=u64), rport=np.array(ports.rport, dtype=i64),
        rpguid=np.array([g if g >= 0 else 0 for g in rpg], dtype=u64),
        given=np.array([g >= 0 for g in rpg], dtype=bool),
        line=np.array(ports.line, dtype=i64),
    )


def build_topology(
    nodes: NodeRecords, ports: PortLines, by_guid: dict[int, int], where: dict[int, int],
    source: str, skip: Skipper,
) -> Fabric:
    """Resolve and check the links of parsed records and build the fabric."""
    c = columns_of(nodes, ports)
    resolved = _resolve_links(c)
    peer, link_first = resolved if resolved is not None else _resolve_links_in_order(
        nodes, ports, by_guid, where, source)
    _check_topology_lids(nodes, ports, skip)
    return _fabric(c, peer, link_first, source)


class _Defect(Exception):
    """A check of :func:`build_columns` has something to say."""


def _defect(_k: int) -> str:
    raise _Defect


def build_columns(c: Columns, source: str, skip: Skipper) -> Fabric | None:
    """:func:`build_topology` of records given as arrays, or ``None`` when a
    check has an error or a warning to give (the caller then builds them
    from the line loop's lists, which names the lines)."""
    resolved = _resolve_links(c)
    if resolved is None:
        return None
    sw = np.flatnonzero(c.kind == int(NodeType.SWITCH))
    ep = np.flatnonzero(c.kind[c.node] != int(NodeType.SWITCH))
    try:
        check_lids(np.concatenate([c.p0_lid[sw], c.lid[ep]]),
                   np.concatenate([c.p0_lmc[sw], c.lmc[ep]]),
                   np.concatenate([c.node_line[sw], c.line[ep]]), _defect, skip,
                   n_switches=len(sw))
    except _Defect:
        return None
    return _fabric(c, *resolved, source)


def _fabric(c: Columns, peer: np.ndarray, first: np.ndarray, source: str) -> Fabric:
    b_ = FabricBuilder()
    try:
        b_.add_node_rows(c.kind, c.guid, c.nports, c.desc, sysimg_guids=c.sysimg,
                         vendor_ids=c.vendor, device_ids=c.device)
        sw = np.flatnonzero(c.kind == int(NodeType.SWITCH))
        b_.set_ports(sw, np.zeros(len(sw), dtype=np.int64), guid=c.p0_guid[sw],
                     lid=c.p0_lid[sw], lmc=c.p0_lmc[sw])
        n_entries = len(c.node)
        width = np.where(c.width > 0, c.width, c.width[peer]) if n_entries else c.width
        speed = np.where(c.speed > 0, c.speed, c.speed[peer]) if n_entries else c.speed
        b_.set_ports(c.node, c.port, guid=c.own, lid=c.lid, lmc=c.lmc, width=width,
                     speed=speed)
        second = peer[first] if n_entries else first
        if len(first):
            b_.add_links_rows(c.node[first], c.port[first], c.node[second], c.port[second])
        return b_.build()
    except FabricError as exc:  # pre-checked above; kept as a safety net
        raise TopologyError(exc.message, source=source) from exc


#: the kind letter of a node id ("S-...") by NodeType value
_LETTER = np.zeros(4, dtype=np.uint8)
for _k, _p in PREFIX.items():
    _LETTER[int(_k)] = ord(_p)


def _resolve_links(c: Columns) -> tuple[np.ndarray, np.ndarray] | None:
    """``(peer, first)``: each port line's other end (its entry) and the
    entries that come first in their link, found with numpy; ``None`` if a
    check fails (a port GUID twice, a link its other end does not list back,
    a wrong remote port GUID): :func:`_resolve_links_in_order` then finds and
    names the first defect, in input order."""
    n_e = len(c.node)
    guid = c.guid
    pg = np.sort(np.concatenate([c.p0_guid[c.p0_guid != 0], c.own[c.own != 0]]))
    if (pg[1:] == pg[:-1]).any():
        return None
    if not n_e:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    node, port, rguid, rport = c.node, c.port, c.rguid, c.rport
    order = np.argsort(guid, kind="stable")
    at = np.minimum(np.searchsorted(guid, rguid, sorter=order), len(guid) - 1)
    b = order[at]
    if (guid[b] != rguid).any():
        return None
    if (_LETTER[c.kind[b]] != c.rkind).any():
        return None
    key = node * 256 + port
    k_order = np.argsort(key, kind="stable")
    want = b * 256 + rport
    at = np.minimum(np.searchsorted(key, want, sorter=k_order), n_e - 1)
    j = k_order[at]
    idx = np.arange(n_e)
    if ((key[j] != want) | (rguid[j] != guid[node]) | (rport[j] != port) | (j == idx)).any():
        return None
    given = np.flatnonzero(c.given)
    if len(given):
        other = c.own[j[given]]
        if ((other != 0) & (other != c.rpguid[given])).any():
            return None
    return j, np.flatnonzero(idx < j)


def _resolve_links_in_order(
    nodes: NodeRecords, ports: PortLines, by_guid: dict[int, int], where: dict[int, int],
    source: str,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_resolve_links` one port line at a time, raising the
    :class:`TopologyError` of the first defect in input order."""

    def err(msg: str, no: int | None, expected: str | None = None) -> TopologyError:
        return TopologyError(msg, source=source, line=no, expected=expected)

    kinds, nlines, n_guid = nodes.kind, nodes.line, nodes.guid
    e_node, e_port, e_line = ports.node, ports.port, ports.line
    e_rkind, e_rguid, e_rport, e_rpguid = ports.rkind, ports.rguid, ports.rport, ports.rpguid
    e_guid = ports.guid
    n_entries = len(e_node)
    peer = [0] * n_entries

    # Port GUIDs must be unique (switch port 0 GUIDs and CA/router port GUIDs).
    seen_pguid: dict[int, int] = {}
    for n, (g, _lid, _lmc) in enumerate(nodes.p0):
        if g:
            if g in seen_pguid:
                raise err(f"duplicate port GUID {g:#x}", nlines[n], "port GUIDs unique")
            seen_pguid[g] = nlines[n]
    for i in range(n_entries):
        g = e_guid[i]
        if g:
            if g in seen_pguid:
                raise err(
                    f"duplicate port GUID {g:#x} (also on line {seen_pguid[g]})", e_line[i],
                    "port GUIDs unique",
                )
            seen_pguid[g] = e_line[i]

    link_first: list[int] = []
    kind_prefix = [PREFIX[k] for k in kinds]
    for i in range(n_entries):
        rk = e_rkind[i]
        rp = e_rport[i]
        b = by_guid.get(e_rguid[i], -1)
        j = where.get(b * 256 + rp, -1) if b >= 0 else -1
        if (
            j < 0 or kind_prefix[b] != rk or e_rguid[j] != n_guid[e_node[i]]
            or e_rport[j] != e_port[i] or j == i
        ):
            _link_error(nodes, ports, by_guid, where, i, source)
        rpg = e_rpguid[i]
        if rpg >= 0 and e_guid[j] and e_guid[j] != rpg:
            raise err(
                f'"{rk}-{e_rguid[i]:016x}"[{rp}] has port GUID {e_guid[j]:#x} '
                f"(line {e_line[j]}), not {rpg:#x}", e_line[i],
                "the remote port GUID of its record",
            )
        peer[i] = j
        if i < j:
            link_first.append(i)
    return np.array(peer, dtype=np.int64), np.array(link_first, dtype=np.int64)


def _check_topology_lids(nodes: NodeRecords, ports: PortLines, skip: Skipper) -> None:
    """:func:`~smroute.fabric.ibnetdiscover.text.check_lids` on every switch port 0 (its
    record head) and every listed CA/router port (its port line)."""
    switch = NodeType.SWITCH
    sw = [n for n, k in enumerate(nodes.kind) if k == switch]
    kinds, e_node = nodes.kind, ports.node
    ep = [i for i in range(len(e_node)) if kinds[e_node[i]] != switch]
    p0 = nodes.p0
    lid = [p0[n][1] for n in sw] + [ports.lid[i] for i in ep]
    lmc = [p0[n][2] for n in sw] + [ports.lmc[i] for i in ep]
    line = [nodes.line[n] for n in sw] + [ports.line[i] for i in ep]

    def name(k: int) -> str:
        if k < len(sw):
            return f"port 0 of switch {_describe(nodes, sw[k])}"
        i = ep[k - len(sw)]
        g = ports.guid[i]
        guid = f" (port GUID {g:#018x})" if g else ""
        return f"port {ports.port[i]}{guid} of {_describe(nodes, e_node[i])}"

    check_lids(lid, lmc, line, name, skip, n_switches=len(sw))


def _link_error(
    nodes: NodeRecords, ports: PortLines, by_guid: dict[int, int], where: dict[int, int], i: int,
    source: str,
) -> NoReturn:
    """Raise the :class:`TopologyError` explaining why port line ``i`` has no
    matching other end (the fast path in :func:`build_topology` only detects it)."""
    kinds, nports, nlines = nodes.kind, nodes.nports, nodes.line
    a, p, no = ports.node[i], ports.port[i], ports.line[i]
    rk, rg, rp = ports.rkind[i], ports.rguid[i], ports.rport[i]
    ref = f'"{rk}-{rg:016x}"[{rp}]'
    both = "both ends of every link to list each other"

    def err(msg: str, expected: str) -> TopologyError:
        return TopologyError(msg, source=source, line=no, expected=expected)

    b = by_guid.get(rg)
    if b is None:
        raise err(
            f"port {p} of {_describe(nodes, a)} links to {ref}, which has no record "
            "(truncated input?)", "a record for every node referenced",
        )
    if PREFIX[kinds[b]] != rk:
        raise err(
            f'{ref} names a {_KIND_NAME[kinds[b]]} (record on line {nlines[b]}) with "{rk}-"',
            f'"{PREFIX[kinds[b]]}-{rg:016x}"',
        )
    if rp > nports[b]:
        raise err(
            f"{ref}: port {rp} out of range, its record (line {nlines[b]}) says "
            f"{nports[b]} ports", f"a remote port in 1..{nports[b]}",
        )
    j = where.get(b * 256 + rp)
    if j is None:
        raise err(
            f"one-sided link: port {p} of {_describe(nodes, a)} links to {ref}, but the "
            f"record of {_describe(nodes, b)} (line {nlines[b]}) does not list port {rp}", both,
        )
    if j == i:
        raise err(f"port {p} linked to itself", "a link between two different ports")
    other = f'"{ports.rkind[j]}-{ports.rguid[j]:016x}"[{ports.rport[j]}]'
    raise err(
        f"one-sided link: port {p} of {_describe(nodes, a)} links to {ref}, but that "
        f"port links to {other} (line {ports.line[j]})", both,
    )

