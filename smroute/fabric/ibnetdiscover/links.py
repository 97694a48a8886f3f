"""Resolve the links of parsed ``ibnetdiscover`` topology records and build the fabric.

:func:`build_topology` takes what :func:`smroute.fabric.ibnetdiscover.records.parse_records`
collected, checks it as a whole (unique port GUIDs, both ends of every link
listing each other, LIDs) and builds the :class:`~smroute.fabric.model.Fabric`;
:func:`_link_error` explains a link whose other end does not match.
"""

from __future__ import annotations

from typing import NoReturn

import numpy as np

from smroute.fabric.ibnetdiscover.records import PREFIX, NodeRecords, PortLines
from smroute.fabric.ibnetdiscover.text import KIND_NAME, Skipper, TopologyError, check_lids
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError, NodeType
from smroute.fabric.model.builder import FabricBuilder

__all__ = ["build_topology"]

_KIND_NAME = KIND_NAME


def _describe(nodes: NodeRecords, n: int) -> str:
    return f'{PREFIX[nodes.kind[n]]}-{nodes.guid[n]:016x} ("{nodes.desc[n]}")'


def build_topology(
    nodes: NodeRecords, ports: PortLines, by_guid: dict[int, int], where: dict[int, int],
    source: str, skip: Skipper,
) -> Fabric:
    """Resolve and check the links of parsed records and build the fabric."""
    kinds, nports = nodes.kind, nodes.nports
    e_node, e_port = ports.node, ports.port
    n_entries = len(e_node)
    resolved = _resolve_links(nodes, ports)
    peer, link_first = resolved if resolved is not None else _resolve_links_in_order(
        nodes, ports, by_guid, where, source)

    _check_topology_lids(nodes, ports, skip)

    b_ = FabricBuilder()
    try:
        for n in range(len(kinds)):
            b_.add_node(
                kinds[n], nodes.guid[n], nports[n], nodes.desc[n],
                sysimg_guid=nodes.sysimg[n], vendor_id=nodes.vendor[n],
                device_id=nodes.device[n],
            )
            if kinds[n] == NodeType.SWITCH:
                g, lid, lmc = nodes.p0[n]
                b_.set_port(n, 0, guid=g, lid=lid, lmc=lmc)
        width = np.array(ports.width, dtype=np.int64)
        speed = np.array(ports.speed, dtype=np.int64)
        width = np.where(width > 0, width, width[peer]) if n_entries else width
        speed = np.where(speed > 0, speed, speed[peer]) if n_entries else speed
        b_.set_ports(e_node, e_port, guid=np.array(ports.guid, dtype=np.uint64),
                     lid=ports.lid, lmc=ports.lmc, width=width, speed=speed)
        first = link_first
        second = peer[first] if n_entries else first
        en = np.array(e_node, dtype=np.int64)
        ep = np.array(e_port, dtype=np.int64)
        if len(first):
            b_.add_links_rows(en[first], ep[first], en[second], ep[second])
        return b_.build()
    except FabricError as exc:  # pre-checked above; kept as a safety net
        raise TopologyError(exc.message, source=source) from exc


def _resolve_links(nodes: NodeRecords, ports: PortLines) -> tuple[np.ndarray, np.ndarray] | None:
    """``(peer, first)``: each port line's other end (its entry) and the
    entries that come first in their link, found with numpy; ``None`` if a
    check fails (a port GUID twice, a link its other end does not list back,
    a wrong remote port GUID): :func:`_resolve_links_in_order` then finds and
    names the first defect, in input order."""
    n_e = len(ports.node)
    guid = np.array(nodes.guid, dtype=np.uint64)
    p0 = np.array([g for g, _lid, _lmc in nodes.p0 if g], dtype=np.uint64)
    own = np.array(ports.guid, dtype=np.uint64)
    pg = np.concatenate([p0, own[own != 0]])
    if len(np.unique(pg)) != len(pg):
        return None
    if not n_e:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    node = np.array(ports.node, dtype=np.int64)
    port = np.array(ports.port, dtype=np.int64)
    rguid = np.array(ports.rguid, dtype=np.uint64)
    rport = np.array(ports.rport, dtype=np.int64)
    order = np.argsort(guid, kind="stable")
    at = np.minimum(np.searchsorted(guid, rguid, sorter=order), len(guid) - 1)
    b = order[at]
    if (guid[b] != rguid).any():
        return None
    prefix = np.array([PREFIX[k] for k in nodes.kind])
    if (prefix[b] != np.array(ports.rkind)).any():
        return None
    key = node * 256 + port
    k_order = np.argsort(key, kind="stable")
    want = b * 256 + rport
    at = np.minimum(np.searchsorted(key, want, sorter=k_order), n_e - 1)
    j = k_order[at]
    idx = np.arange(n_e)
    if ((key[j] != want) | (rguid[j] != guid[node]) | (rport[j] != port) | (j == idx)).any():
        return None
    rpg = np.array(ports.rpguid, dtype=object)
    given = np.flatnonzero(rpg != -1)
    if len(given):
        other = own[j[given]]
        claimed = np.array(rpg[given].tolist(), dtype=np.uint64) if all(
            0 <= x < 2**64 for x in rpg[given].tolist()) else None
        if claimed is None or ((other != 0) & (other != claimed)).any():
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

