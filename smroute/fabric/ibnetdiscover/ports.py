"""Parse the ports report of ``ibnetdiscover -p`` into a :class:`Fabric`.

See :func:`parse_ports_report`; :func:`smroute.fabric.ibnetdiscover.parse.read_fabric`
tells it apart from topology text.  Shared pieces (errors, warnings, noise
lines, LID checks) are in :mod:`smroute.fabric.ibnetdiscover.text`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

import numpy as np

from smroute.fabric.ibnetdiscover.text import (
    HEX,
    KIND_NAME,
    NUM,
    SPEED_CODE,
    WIDTHS,
    ParseWarning,
    Skipper,
    TopologyError,
    as_text,
    check_lids,
    check_peer,
    check_range,
    excerpt,
    is_diagnostic,
    read_text_lines,
    with_bom_stripped,
)
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError, NodeType
from smroute.fabric.model.builder import FabricBuilder

__all__ = ["parse_ports_report", "read_ports_report", "report_line_match"]

_REPORT_LINE = re.compile(
    rf"(SW|CA|RT|\?\?)\s++{NUM}\s++{NUM}\s++0x{HEX}\s++(1x|2x|4x|8x|12x|\?\?)\s++"
    r"(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR|\?\?\?)"
    rf"(?:\s++-\s++(SW|CA|RT|\?\?)\s++{NUM}\s++{NUM}\s++0x{HEX}\s++\(\s*+'(.*)'\s++-\s++'(.*)'\s*+\)"
    r"|\s++'(.*)')\s*+$",
    re.ASCII,
)
_EXP_REPORT = (
    "a ports report line: <SW|CA|RT> <lid> <port> 0x<port guid> <width> <speed> "
    "[- <SW|CA|RT> <lid> <port> 0x<guid> ( '<desc>' - '<remote desc>' ) | '<desc>']"
)
_REPORT_KIND = {"SW": NodeType.SWITCH, "CA": NodeType.CA, "RT": NodeType.ROUTER}
_REPORT_LIKE = re.compile(r"(?:SW|CA|RT|\?\?)\s++[0-9]", re.ASCII).match
_REPORT_START = re.compile(rf"(SW|CA|RT|\?\?)\s++{NUM}\s++{NUM}\s++0x[0-9a-fA-F]", re.ASCII).match


def report_line_match(line: str) -> bool:
    """True when a (stripped) line starts like a ports report line
    (``SW     3  1 0x...``): how :func:`~smroute.fabric.ibnetdiscover.parse.detect_format`
    recognises the report."""
    return _REPORT_START(line) is not None


def parse_ports_report(
    lines: Iterable[str] | str,
    source: str = "<input>",
    *,
    strict: bool = False,
    warnings: list[ParseWarning] | None = None,
) -> Fabric:
    """Parse the ports report of ``ibnetdiscover -p`` into a :class:`Fabric`.

    Each line is one port (``dump_ports_report``; a node's ports are printed
    together, highest port first)::

        SW     3  1 0x0000000000200001 4x SDR - CA     5  1 0x0000000000100004 ( 'sw' - 'hca' )
        SW     3  9 0x0000000000200001 4x SDR                                    'sw'

    i.e. node type, LID (a switch's port-0 LID; a CA port's base LID), port
    number, *port* GUID, width, speed, then the remote port in the same form
    and both descriptions, or only the own description for an unconnected port.

    The report lacks what the topology text has, so the fabric is built as far
    as it allows:

    * **Node GUIDs are not printed.**  A switch's node GUID is taken to be its
      port GUID (also stored as its port-0 GUID; usually equal).  A CA/router's
      node GUID is inferred as ``port GUID - port number`` of its highest listed
      port (the usual vendor and ibsim convention), or, if that collides with
      another node, that port's GUID itself.
    * **Node boundaries**: consecutive switch lines with the same port GUID are
      one switch.  Consecutive CA/router lines are one node when they have the
      same type and description, strictly decreasing port numbers and port
      GUIDs that differ by the port numbers' difference; otherwise a new node
      starts.  A switch seen again later is a duplicate.
    * **Port counts are not printed**: a node's port count is the highest port
      number listed for it.  Switches list every port, so theirs are exact; a
      CA lists only ports that were reached, so a 2-port HCA with port 2 down
      comes out with 1 port.
    * LMCs are not printed (stored as 0).  Width and speed are stored for
      linked ports only (an unconnected port's active width is meaningless).
    * Descriptions are split at the last ``' - '`` inside ``( ... )``, so an own
      description containing ``' - '`` is read wrongly (only in this report).

    Every link must be listed from both ends and agree (like
    :func:`~smroute.fabric.ibnetdiscover.parse.parse_topology`); any problem raises
    :class:`TopologyError`.  A report may be a fragment (``grep``-ed out of a
    larger one): a link to a port of a node that the report does not list at
    all is dropped with a warning (an error with ``strict``); a link to a
    listed node whose port line is missing or disagrees stays an error.

    Noise (diagnostics, text before the first and after the last report line),
    a BOM, ``warnings`` and ``strict`` are handled like
    :func:`~smroute.fabric.ibnetdiscover.parse.parse_topology`, and so are LIDs:
    every switch and CA/router port needs a unicast LID, unique, unless no port
    has one.
    """
    skip = Skipper(source, strict, warnings, _EXP_REPORT)
    try:
        return _parse_report(lines, source, skip)
    finally:
        skip.flush()


def _parse_report(lines: Iterable[str] | str, source: str, skip: Skipper) -> Fabric:

    def err(msg: str, no: int | None, expected: str | None = None) -> TopologyError:
        return TopologyError(msg, source=source, line=no, expected=expected)

    # per node
    n_kind: list[NodeType] = []
    n_desc: list[str] = []
    n_maxport: list[int] = []
    n_line: list[int] = []
    n_pguid: list[int] = []  # switch: port GUID; CA: GUID of first (highest) listed port
    n_lid: list[int] = []  # switch port-0 LID
    sw_by_guid: dict[int, int] = {}
    ca_port_by_guid: dict[int, tuple[int, int]] = {}  # port guid -> (node, port)
    # per port line
    e_node: list[int] = []
    e_port: list[int] = []
    e_pguid: list[int] = []  # the line's port GUID
    e_lid: list[int] = []
    e_width: list[int] = []
    e_speed: list[int] = []
    e_line: list[int] = []
    e_remote: list[tuple[NodeType, int, int] | None] = []
    where: dict[int, int] = {}

    cur = -1
    last_port = 0
    last_guid = 0
    no = 0
    items: Iterable[object] = lines.splitlines() if isinstance(lines, str | bytes) else lines
    for no, raw in enumerate(with_bom_stripped(items), 1):
        line = (raw if type(raw) is str else as_text(raw)).strip()
        if not line or line[0] == "#":
            continue
        m = _REPORT_LINE.match(line)
        if m is None:
            if not _REPORT_LIKE(line):
                if is_diagnostic(line):
                    skip.diagnostic(no, line)
                else:
                    skip.unknown(no, line)
                continue
            skip.content()
            raise err(f"malformed ports report line {excerpt(line)}", no, _EXP_REPORT)
        skip.content()
        (t, lid_s, p_s, g_s, w, s, rt, rlid_s, rp_s, rg_s, own_d, _rem_d, lone_d) = m.groups()
        if t not in _REPORT_KIND:
            raise err(f"node type {t!r}", no, "SW, CA or RT")
        kind = _REPORT_KIND[t]
        lid = check_range(int(lid_s), 0, 0xFFFF, "LID", no, source)
        p = check_range(int(p_s), 1, 255, "port number", no, source)
        g = int(g_s, 16)
        if g == 0:
            raise err("port GUID 0", no, "a non-zero port GUID (0 is never assigned)")
        desc = own_d if own_d is not None else lone_d
        assert desc is not None
        if kind == NodeType.SWITCH:
            same = cur >= 0 and n_kind[cur] == kind and last_guid == g
            if same and lid != n_lid[cur]:
                raise err(f"switch LID {lid} differs from {n_lid[cur]}", no, "one LID per switch")
        else:
            same = (
                cur >= 0 and n_kind[cur] == kind and n_desc[cur] == desc and p < last_port
                and last_guid - g == last_port - p
            )
        if not same:
            if kind == NodeType.SWITCH:
                if g in sw_by_guid:
                    raise err(
                        f"switch with port GUID {g:#x} listed again (first on line "
                        f"{n_line[sw_by_guid[g]]})", no, "each node's ports listed together",
                    )
                sw_by_guid[g] = len(n_kind)
            cur = len(n_kind)
            n_kind.append(kind)
            n_desc.append(desc)
            n_maxport.append(p)
            n_line.append(no)
            n_pguid.append(g)
            n_lid.append(lid if kind == NodeType.SWITCH else 0)
        else:
            n_maxport[cur] = max(n_maxport[cur], p)
        key = cur * 256 + p
        if key in where:
            raise err(
                f"port {p} listed twice (first on line {e_line[where[key]]})", no,
                "each port once",
            )
        if kind != NodeType.SWITCH:
            if g in ca_port_by_guid:
                raise err(f"duplicate port GUID {g:#x}", no, "port GUIDs unique")
            ca_port_by_guid[g] = (cur, p)
        last_port, last_guid = p, g
        where[key] = len(e_node)
        e_node.append(cur)
        e_port.append(p)
        e_pguid.append(g)
        e_lid.append(lid if kind != NodeType.SWITCH else 0)
        e_line.append(no)
        if rt is not None:
            if rt not in _REPORT_KIND:
                raise err(f"remote node type {rt!r}", no, "SW, CA or RT")
            rp = check_range(int(rp_s), 1, 255, "remote port number", no, source)
            check_peer(int(rg_s, 16), int(rlid_s), no, source)
            e_remote.append((_REPORT_KIND[rt], int(rg_s, 16), rp))
            e_width.append(WIDTHS[w])
            e_speed.append(SPEED_CODE[s])
        else:
            e_remote.append(None)
            e_width.append(0)
            e_speed.append(0)

    skip.total = no
    skip.finish()
    if not n_kind:
        raise skip.no_records("ports", "at least one ports report line")

    # node GUIDs
    n_guid: list[int] = []
    taken = set(sw_by_guid)
    for n, kind in enumerate(n_kind):
        if kind == NodeType.SWITCH:
            n_guid.append(n_pguid[n])
            continue
        g = n_pguid[n] - n_maxport[n]
        if g < 0 or g in taken:
            g = n_pguid[n]
        if g in taken:
            raise err(
                f"cannot infer a unique node GUID for the {KIND_NAME[kind]} listed first "
                f"here (port GUID {n_pguid[n]:#x})", n_line[n], "unique GUIDs",
            )
        taken.add(g)
        n_guid.append(g)

    # resolve links
    n_entries = len(e_node)
    peer = [-1] * n_entries
    firsts: list[int] = []
    for i in range(n_entries):
        r = e_remote[i]
        if r is None:
            continue
        rkind, rg, rp = r
        no = e_line[i]
        if rkind == NodeType.SWITCH:
            b = sw_by_guid.get(rg, -1)
            rport = rp
        else:
            b, rport = ca_port_by_guid.get(rg, (-1, 0))
            if b >= 0 and rport != rp:
                raise err(
                    f"remote port GUID {rg:#x} is port {rport} of its node, not port {rp}", no,
                    "the remote port number of that GUID",
                )
        if b < 0 or n_kind[b] != rkind:
            if b < 0 and not skip.strict:
                # a fragment of a report: the whole remote node is missing
                e_remote[i] = None
                e_width[i] = e_speed[i] = 0
                skip.note(
                    no, "",
                    f"the link of port {e_port[i]} to {rg:#x}[{rp}], a port the report does not "
                    "list (a fragment of a report?)",
                )
                continue
            raise err(
                f"remote port {rg:#x}[{rp}] is not listed in the report (truncated input?)", no,
                "every linked port listed",
            )
        j = where.get(b * 256 + rport)
        a, p = e_node[i], e_port[i]
        back = e_remote[j] if j is not None else None
        ok = False
        if j is not None and back is not None and j != i:
            bk, bg, bp = back
            ok = bk == n_kind[a] and bg == e_pguid[i] and bp == p
        if not ok:
            where_b = f" (line {e_line[j]})" if j is not None else ""
            raise err(
                f"one-sided link: port {p} links to {rg:#x}[{rp}], whose line{where_b} does not "
                "link back", no, "both ends of every link to list each other",
            )
        assert j is not None
        peer[i] = j
        if i < j:
            firsts.append(i)

    sw = [n for n, kind in enumerate(n_kind) if kind == NodeType.SWITCH]
    ep = [i for i in range(n_entries) if n_kind[e_node[i]] != NodeType.SWITCH]

    def name(k: int) -> str:
        if k < len(sw):
            n = sw[k]
            return f'port 0 of switch {n_guid[n]:#018x} ("{n_desc[n]}")'
        i = ep[k - len(sw)]
        n = e_node[i]
        return (
            f"port {e_port[i]} (port GUID {e_pguid[i]:#018x}) of {KIND_NAME[n_kind[n]]} "
            f'{n_guid[n]:#018x} ("{n_desc[n]}")'
        )

    check_lids(
        [n_lid[n] for n in sw] + [e_lid[i] for i in ep], [0] * (len(sw) + len(ep)),
        [n_line[n] for n in sw] + [e_line[i] for i in ep], name, skip, n_switches=len(sw),
    )

    builder = FabricBuilder()
    try:
        for n, kind in enumerate(n_kind):
            builder.add_node(kind, n_guid[n], n_maxport[n], n_desc[n])
            if kind == NodeType.SWITCH:
                builder.set_port(n, 0, guid=n_pguid[n], lid=n_lid[n])
        for i in range(n_entries):
            a = e_node[i]
            guid = 0 if n_kind[a] == NodeType.SWITCH else e_pguid[i]
            j = peer[i]
            builder.set_port(
                a, e_port[i], guid=guid, lid=e_lid[i],
                width=e_width[i] or (e_width[j] if j >= 0 else 0),
                speed=e_speed[i] or (e_speed[j] if j >= 0 else 0),
            )
        if firsts:
            f = np.array(firsts, dtype=np.int64)
            s = np.array(peer, dtype=np.int64)[f]
            en = np.array(e_node, dtype=np.int64)
            eport = np.array(e_port, dtype=np.int64)
            builder.add_links_rows(en[f], eport[f], en[s], eport[s])
        return builder.build()
    except FabricError as exc:
        raise TopologyError(exc.message, source=source) from exc


def read_ports_report(
    path: str | os.PathLike[str],
    *,
    strict: bool = False,
    warnings: list[ParseWarning] | None = None,
) -> Fabric:
    """Read and parse an ``ibnetdiscover -p`` ports report file."""
    return parse_ports_report(
        read_text_lines(path), os.fspath(path), strict=strict, warnings=warnings
    )
