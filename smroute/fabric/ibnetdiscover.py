"""Parse the text that infiniband-diags' ``ibnetdiscover`` prints into a :class:`Fabric`.

Topology text (``ibnetdiscover`` without ``-p``/``-l``)
-------------------------------------------------------
What rdma-core's ``dump_topology`` prints (also with ``-g`` grouping and ``-f``
full info), one record per node, records separated by blank lines::

    #                                               header comments
    # Topology file: generated on ...
    vendid=0x2c9                                    id lines (all optional)
    devid=0xd2f2
    sysimgguid=0x2c5eab0300b87b40                   [\\t\\t# Chassis ...]   (-g)
    switchguid=0x2c5eab0300b87b40(2c5eab0300b87b40)  node GUID(port GUID) [\\t# ...]
    Switch\\t65 "S-2c5eab0300b87b40"\\t\\t# "desc" enhanced port 0 lid 73 lmc 0
    [1]\\t"H-e09d7303007a4bd8"[1](e09d7303007a4bd8) \\t\\t# "remote desc" lid 647 4xNDR
    [35][ext 7]\\t"S-2c5eab0300c26280"[32][ext 3]\\t\\t# "remote desc" lid 236 4xNDR

    caguid=0x100003                                 (rtguid= for routers)
    Ca\\t2 "H-0000000000100003"\\t\\t# "Hca2"          (Rt ... "R-..." for routers)
    [1](100004) \\t"S-0000000000200001"[1]\\t\\t# lid 2 lmc 0 "Switch2" lid 3 4xSDR

* The head line gives the node type, its number of ports (1..255), its node GUID
  (``"S-"``/``"H-"``/``"R-"`` + hex) and description; a switch head also gives the
  LID and LMC of port 0.  ``Hca`` is accepted as an alias of ``Ca``.
* Port lines list the *connected* ports only: ``[port]``, optional ``[ext N]``
  (ignored), for CA/router ports the port GUID ``(hex)``, the remote node
  ``"X-guid"[rport]`` (optional ``[ext N]``, and the remote port GUID ``(hex)``
  when the remote is not a switch), then the comment: on a CA/router line the
  port's own ``lid L lmc M``, then the remote description, the remote LID and the
  link ``<width><speed>`` (``4xSDR``; widths 1x 2x 4x 8x 12x or ``??``, speeds
  :data:`~smroute.fabric.model.SPEEDS` incl. ``???``).  ``-f`` adds
  ``s=.. w=.. v=..``; Xsigo nodes add `` slot N`` / `` (scp)``; all are accepted.
* Descriptions may contain any character including quotes and ``#``: a
  description is taken greedily up to the *last* quote that is followed by the
  fixed tail of the line.
* ``-g`` grouping lines (``Chassis N ...``, ``Non-Chassis Nodes``, ``Hostname:``)
  end the current record and are otherwise ignored.
* CRLF line ends, leading/trailing white space and tabs-vs-spaces are accepted,
  and so are separators stripped altogether (``Switch41 "S-..."``, ``Ca2"H-..."``,
  ``[1]"S-..."[2]#"desc" lid 3 4xEDR``), as copies of captures often have them.
* A UTF-8 byte order mark is dropped (:func:`read_topology` also reads UTF-16
  with a BOM, what a Windows shell's ``>`` writes).
* Noise in captures as operators keep them (:mod:`smroute.fabric.ibtext`):
  libibmad/infiniband-diags diagnostics (``src/query_smp.c:195; umad (...) bad
  status 110; ...``, ``ibwarn: [1234] ...``, ``ibnetdiscover: iberror: ...``)
  are skipped anywhere; other text (terminal prompts, ``Script started on ...``)
  is skipped before the first record and after the last one.  Each skipped line
  is a :class:`ParseWarning`; with ``strict=True`` it is an error.  Unknown text
  *between* records stays an error.
* ibdiagnet's ``ibdiagnet2.ibnetdiscover`` dialect: header comments, a port
  label after the port number (``[1](1/1/1)``: ASIC/cage/port[/split] on
  Quantum-2, ``(port/split)`` or ``(port)`` on Quantum; on CA lines a label
  such as ``(1)`` or ``(B9D0F0/0/0/1)`` before the port GUID:
  ``[1](1)(b0cf0e0300e5b948)``), which is ignored; ibdiagnet prints a CA's port
  GUID equal to its node GUID, which is accepted as is.
* Not supported: ``--diff`` output (lines prefixed ``<``/``>``), ``-l`` node
  lists, ``-p`` (see :func:`parse_ports_report`; :func:`read_fabric` and
  :func:`detect_format` tell the two apart).

What is stored: node type/GUID/port count/description, vendor/device id and
system image GUID; switch port 0 GUID (from ``switchguid=..(portguid)``), LID and
LMC; CA/router port GUIDs, LIDs and LMCs; per linked port the width (lanes) and
speed code of its own line (when a line says ``??``/``???``, the other end's
value is used).  Remote LIDs and descriptions on port lines are not used (the
remote's own record is authoritative).

Validation (each a :class:`TopologyError` naming the line and what was expected):
malformed lines; duplicate node GUIDs and port GUIDs; port numbers out of range
of the node's port count; a port listed twice; an id line that does not match
the head that follows; a reference to a node without a record (``ibnetdiscover``
prints every node it reached, so this means truncated input); a link that its
other end does not list back, or lists differently (with the remote port GUID,
if given, checked against the remote's record); an input without any node;
an end-port or switch port 0 without a unicast LID (0, 0xffff or multicast),
unless no port has a LID at all (captured before a subnet manager ran); two
ports whose LID ranges (``base .. base + 2**lmc - 1``) overlap.

Ports report (``ibnetdiscover -p``)
-----------------------------------
See :func:`parse_ports_report`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, NoReturn

import numpy as np

from smroute.fabric.ibports import parse_ports_report, read_ports_report, report_line_match
from smroute.fabric.ibtext import (
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
    check_range,
    is_diagnostic,
    read_text_lines,
    with_bom_stripped,
)
from smroute.fabric.ibtext import excerpt as _excerpt
from smroute.fabric.model import Fabric, FabricBuilder, FabricError, NodeType

__all__ = [
    "ParseWarning",
    "TopologyError",
    "detect_format",
    "parse_ports_report",
    "parse_topology",
    "read_fabric",
    "read_ports_report",
    "read_topology",
    "require_switches",
]


# ----------------------------------------------------------------- grammar
_HEX = HEX
_NUM = NUM
_EXT = r"(?:\[ext\s*+[0-9]{1,6}+\])?"
# ibdiagnet's port label after the port number: (1/1/1), (1/1/1/2), (65), (B9D0F0/0/0/1)
_LABEL = r"(?:\(\s*+[0-9A-Za-z/]{1,64}+\s*+\))?"
_WIDTH_SPEED = (
    r"(1x|2x|4x|8x|12x|\?\?)\s*+(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR|\?\?\?)"
)
_FULL_INFO = r"(?:\s++s=[0-9]++\s++w=[0-9]++\s++v=[0-9]++)?"
_XSIGO = r"(?:\s++slot\s++[0-9]++|\s++\(scp\))?"

_SWITCH_HEAD = re.compile(
    rf'Switch\s*+{_NUM}\s*+"([A-Za-z?])-{_HEX}"'
    rf'(?:\s*+#\s*+"(.*)"(?:\s++(?:enhanced|base)\s++port\s++0\s++lid\s++{_NUM}'
    rf"\s++lmc\s++{_NUM})?)?\s*+$",
    re.ASCII,
)
_CA_HEAD = re.compile(
    rf'(Ca|Hca|Rt)\s*+{_NUM}\s*+"([A-Za-z?])-{_HEX}"'
    r'(?:\s*+#\s*+"(.*)"(?:\s++\(scp\))?)?\s*+$',
    re.ASCII,
)
_SWITCH_PORT = re.compile(
    rf'\[{_NUM}\]{_EXT}\s*+{_LABEL}\s*+"([A-Za-z?])-{_HEX}"\[{_NUM}\]{_EXT}\s*+'
    rf"(?:\(\s*+{_HEX}\s*+\))?"
    rf'\s*+(?:#\s*+"(.*)"\s++lid\s++{_NUM}\s++{_WIDTH_SPEED}{_FULL_INFO}{_XSIGO})?\s*+$',
    re.ASCII,
)
# [p] then (port guid), or ibdiagnet's (label)(port guid); one group alone is
# the port GUID when it is hex, else a label.
_CA_PORT = re.compile(
    rf"\[{_NUM}\]{_EXT}\s*+(?:\(\s*+([0-9A-Za-z/]{{1,64}}+)\s*+\))?\s*+(?:\(\s*+{_HEX}\s*+\))?"
    rf'\s*+"([A-Za-z?])-{_HEX}"\[{_NUM}\]{_EXT}\s*+(?:\(\s*+{_HEX}\s*+\))?'
    rf'\s*+(?:#\s*+lid\s++{_NUM}\s++lmc\s++{_NUM}\s++"(.*)"\s++lid\s++{_NUM}\s++'
    rf"{_WIDTH_SPEED}{_FULL_INFO})?\s*+$",
    re.ASCII,
)
_IS_HEX_GUID = re.compile(r"[0-9a-fA-F]{1,16}+", re.ASCII).fullmatch
# what a port line or record head starts with, to tell a malformed one from other text
# ("[x]\tjunk" is a malformed port line; "[root@host ~]# exit", "[1]+  Done ..." are not)
_PORT_LIKE = re.compile(r"\[[^\]\s]{1,20}+\](?:[\s\[(\"]|$)", re.ASCII).match
_HEAD_LIKE = re.compile(r"(?:Switch|Hca|Ca|Rt)\s*+[0-9\"]", re.ASCII).match
_BLANK_LID = re.compile(r"#.*\blid\s++(?:lmc\b|$)", re.ASCII).search
_ID_LINE = re.compile(r"(vendid|devid|sysimgguid|switchguid|caguid|rtguid)\s*+=", re.ASCII)
_ID_ANY = re.compile(
    rf"(vendid|devid|sysimgguid|switchguid|caguid|rtguid)\s*+=\s*+0x{_HEX}"
    rf"(?:\s*+\(\s*+{_HEX}\s*+\))?(\s*+#.*)?$",
    re.ASCII,
)
_ID_BIT = {"vendid": 1, "devid": 2, "sysimgguid": 4, "switchguid": 8, "caguid": 16, "rtguid": 32}
_GUID_BITS = 8 | 16 | 32
_ID_KIND = {"switchguid": NodeType.SWITCH, "caguid": NodeType.CA, "rtguid": NodeType.ROUTER}
_ID_FORMS = {
    "vendid": "vendid=0x<hex, up to 8 digits>",
    "devid": "devid=0x<hex, up to 8 digits>",
    "sysimgguid": "sysimgguid=0x<guid>",
    "switchguid": "switchguid=0x<node guid>(<port guid>)",
    "caguid": "caguid=0x<guid>",
    "rtguid": "rtguid=0x<guid>",
}
_GROUP_LINE = re.compile(r"(?:Chassis\s|Non-Chassis Nodes|Hostname:)", re.ASCII)

_WIDTHS = WIDTHS
_SPEED_CODE = SPEED_CODE
_PREFIX = {NodeType.SWITCH: "S", NodeType.CA: "H", NodeType.ROUTER: "R"}
_KIND_NAME = KIND_NAME

_EXP_HEAD = 'a record head (Switch N "S-<guid>" # "<desc>" ... / Ca N "H-<guid>" ... / Rt ...)'
_EXP_ANY = (
    "a comment, a blank line, an id line (vendid=, devid=, sysimgguid=, switchguid=, "
    "caguid=, rtguid=), a record head (Switch/Ca/Rt) or a port line ([p] ...)"
)
_EXP_SWITCH_PORT = (
    'a switch port line: [p]<tab>"S-|H-|R-<guid>"[rp](<rport guid>)<tab># "<remote desc>" '
    "lid <L> <width><speed>"
)
_EXP_CA_PORT = (
    'a CA/router port line: [p](<port guid>)<tab>"S-|H-|R-<guid>"[rp]<tab># lid <L> lmc <M> '
    '"<remote desc>" lid <L> <width><speed>'
)
_EXP_SWITCH_HEAD = 'Switch <nports> "S-<guid>"  # "<desc>" enhanced|base port 0 lid <L> lmc <M>'
_EXP_CA_HEAD = 'Ca <nports> "H-<guid>"  # "<desc>" (or Rt <nports> "R-<guid>" ...)'


def _malformed(what: str, line: str) -> str:
    """The message for a malformed line; says so when its LID value is blank."""
    hint = ": its LID is blank" if _BLANK_LID(line) else ""
    return f"malformed {what} line {_excerpt(line)}{hint}"


@dataclass
class _Nodes:
    """Node records collected by the parsers."""

    kind: list[NodeType] = field(default_factory=list)
    guid: list[int] = field(default_factory=list)
    nports: list[int] = field(default_factory=list)
    desc: list[str] = field(default_factory=list)
    sysimg: list[int] = field(default_factory=list)
    vendor: list[int] = field(default_factory=list)
    device: list[int] = field(default_factory=list)
    line: list[int] = field(default_factory=list)
    # switch port 0: guid, lid, lmc
    p0: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass
class _Ports:
    """One entry per port line (a linked port), in input order."""

    node: list[int] = field(default_factory=list)
    port: list[int] = field(default_factory=list)
    guid: list[int] = field(default_factory=list)  # own port GUID, 0 unknown
    lid: list[int] = field(default_factory=list)
    lmc: list[int] = field(default_factory=list)
    width: list[int] = field(default_factory=list)
    speed: list[int] = field(default_factory=list)
    rkind: list[str] = field(default_factory=list)  # "S", "H", "R" or other
    rguid: list[int] = field(default_factory=list)
    rport: list[int] = field(default_factory=list)
    rpguid: list[int] = field(default_factory=list)  # remote port GUID, -1 not given
    line: list[int] = field(default_factory=list)


def parse_topology(
    lines: Iterable[str] | str,
    source: str = "<input>",
    *,
    strict: bool = False,
    warnings: list[ParseWarning] | None = None,
) -> Fabric:
    """Parse ``ibnetdiscover`` topology text into a :class:`Fabric`.

    ``lines`` are the lines of the text (with or without line ends; a single
    ``str`` is split into lines).  ``source`` names the input in errors.  Nodes
    are numbered in record order.  Raises :class:`TopologyError` (and nothing
    else) for any malformed or inconsistent input; see the module docstring
    for the grammar and the checks.

    Lines skipped as noise (diagnostics anywhere, other text before the first
    or after the last record) are appended to ``warnings`` as
    :class:`ParseWarning` in line order, also when parsing fails; with
    ``strict`` each is a :class:`TopologyError` instead.
    """
    skip = Skipper(source, strict, warnings, _EXP_ANY)
    try:
        nodes, ports, by_guid, where = _parse_records(lines, source, skip)
        skip.finish()
        if not nodes.kind:
            raise skip.no_records("node records", "at least one Switch/Ca/Rt record")
        return _build_topology(nodes, ports, by_guid, where, source, skip)
    finally:
        skip.flush()


def _parse_records(
    lines: Iterable[str] | str, source: str, skip: Skipper
) -> tuple[_Nodes, _Ports, dict[int, int], dict[int, int]]:
    """The line loop of :func:`parse_topology`: records, their port lines and
    the lookups ``by_guid`` (node GUID -> node) and ``where`` (node * 256 +
    port -> port line entry)."""
    nodes = _Nodes()
    ports = _Ports()
    by_guid: dict[int, int] = {}
    where: dict[int, int] = {}  # node * 256 + port -> index into ports
    # id lines seen since the last record head ("pending"), as a bit set
    pend_bits = 0
    pend_line = pend_vendor = pend_device = pend_sysimg = pend_pguid = 0
    pend_kind: NodeType | None = None
    pend_guid = -1
    cur = -1  # current node, -1 outside a record
    cur_is_switch = False
    cur_nports = 0
    held = skip.held  # text after a record, an error if more records follow

    def err(msg: str, no: int | None, expected: str | None = None) -> TopologyError:
        return TopologyError(msg, source=source, line=no, expected=expected)

    def other(no: int, line: str) -> None:
        if is_diagnostic(line):
            skip.diagnostic(no, line)
        else:
            skip.unknown(no, line)

    sw_port_match = _SWITCH_PORT.match
    ca_port_match = _CA_PORT.match
    id_match = _ID_ANY.match
    widths = _WIDTHS
    speeds = _SPEED_CODE
    id_bits = _ID_BIT
    p_node, p_port, p_guid = ports.node.append, ports.port.append, ports.guid.append
    p_lid, p_lmc = ports.lid.append, ports.lmc.append
    p_width, p_speed = ports.width.append, ports.speed.append
    p_rkind, p_rguid, p_rport = ports.rkind.append, ports.rguid.append, ports.rport.append
    p_rpguid, p_line = ports.rpguid.append, ports.line.append

    items: Iterable[object] = lines.splitlines() if isinstance(lines, str | bytes) else lines
    no = 0
    for no, raw in enumerate(with_bom_stripped(items), 1):
        line = (raw if type(raw) is str else as_text(raw)).strip()
        if not line:
            if pend_bits:
                raise err(
                    "id lines not followed by a record head", no, _EXP_HEAD + " right after them"
                )
            cur = -1
            continue
        c = line[0]
        if c == "[":
            if cur < 0:
                if _PORT_LIKE(line):
                    raise err(
                        f"port line outside a node record: {_excerpt(line)}", no,
                        _EXP_HEAD + " before the port lines of a record",
                    )
                other(no, line)
                continue
            if cur_is_switch:
                m = sw_port_match(line)
                if m is None:
                    if not _PORT_LIKE(line):
                        other(no, line)
                        continue
                    if held:
                        skip.content()
                    raise err(_malformed("switch port", line), no, _EXP_SWITCH_PORT)
                pnum, rk, rg, rp, rpg, _d, _rl, w, s = m.groups()
                own_guid = lid = lmc = 0
            else:
                m = ca_port_match(line)
                if m is None:
                    if not _PORT_LIKE(line):
                        other(no, line)
                        continue
                    if held:
                        skip.content()
                    raise err(_malformed("CA/router port", line), no, _EXP_CA_PORT)
                pnum, og1, og, rk, rg, rp, rpg, lid_s, lmc_s, _d, _rl, w, s = m.groups()
                if og is None and og1 is not None and _IS_HEX_GUID(og1):
                    og = og1  # [p](guid); otherwise og1 is an ibdiagnet label
                own_guid = int(og, 16) if og else 0
                lid = int(lid_s) if lid_s else 0
                lmc = int(lmc_s) if lmc_s else 0
                if lid > 0xFFFF:
                    raise err(f"LID {lid} out of range", no, "a LID in 0..65535")
                if lmc > 7:
                    raise err(f"LMC {lmc} out of range", no, "an LMC in 0..7")
            if held:
                skip.content()
            p = int(pnum)
            if not 1 <= p <= cur_nports:
                raise err(
                    f"port {p} out of range: the node's head line says it has {cur_nports} ports",
                    no, f"a port number in 1..{cur_nports}",
                )
            key = cur * 256 + p
            if key in where:
                raise err(
                    f"port {p} listed twice (first on line {ports.line[where[key]]})", no,
                    "each port at most once per record",
                )
            rport = int(rp)
            if not 1 <= rport <= 255:
                raise err(f"remote port {rport} out of range", no, "a remote port in 1..255")
            where[key] = len(ports.node)
            p_node(cur)
            p_port(p)
            p_guid(own_guid)
            p_lid(lid)
            p_lmc(lmc)
            p_width(widths[w] if w else 0)
            p_speed(speeds[s] if s else 0)
            p_rkind(rk)
            p_rguid(int(rg, 16))
            p_rport(rport)
            p_rpguid(int(rpg, 16) if rpg else -1)
            p_line(no)
            continue
        if c == "#":
            continue
        if c == "S" and line.startswith("Switch"):
            m = _SWITCH_HEAD.match(line)
            if m is None:
                if not _HEAD_LIKE(line):
                    other(no, line)
                    continue
                skip.content()
                raise err(_malformed("switch head", line), no, _EXP_SWITCH_HEAD)
            np_s, letter, g_s, desc, lid_s, lmc_s = m.groups()
            kind = NodeType.SWITCH
        elif c in "CHR" and line.startswith(("Ca", "Hca", "Rt")):
            m = _CA_HEAD.match(line)
            if m is None:
                if not _HEAD_LIKE(line):
                    other(no, line)
                    continue
                skip.content()
                raise err(_malformed("CA/router head", line), no, _EXP_CA_HEAD)
            word, np_s, letter, g_s, desc = m.groups()
            lid_s = lmc_s = None
            kind = NodeType.ROUTER if word == "Rt" else NodeType.CA
        else:
            m = id_match(line)
            if m is not None:
                # ---- an id line: key=0x<hex>[(<hex>)][ # comment]
                if held or not skip.started:
                    skip.content()
                key_s, val_s, extra_s, comment = m.groups()
                bit = id_bits[key_s]
                if pend_bits & bit or (bit & _GUID_BITS and pend_bits & _GUID_BITS):
                    raise err(f"second {key_s}= line before a record head", no, _EXP_HEAD)
                if (extra_s is not None and key_s != "switchguid") or (
                    comment is not None and key_s not in ("sysimgguid", "switchguid")
                ):
                    raise err(f"malformed {key_s} line {_excerpt(line)}", no, _ID_FORMS[key_s])
                val = int(val_s, 16)
                if not pend_bits:
                    pend_line = no
                pend_bits |= bit
                if key_s == "vendid" or key_s == "devid":
                    if val > 0xFFFFFFFF:
                        raise err(f"{key_s} {val:#x} out of range", no, _ID_FORMS[key_s])
                    if key_s == "vendid":
                        pend_vendor = val
                    else:
                        pend_device = val
                elif key_s == "sysimgguid":
                    pend_sysimg = val
                else:
                    pend_guid = val
                    pend_kind = _ID_KIND[key_s]
                    pend_pguid = int(extra_s, 16) if extra_s else 0
                continue
            if _GROUP_LINE.match(line):
                skip.content()
                if pend_bits:
                    raise err("id lines not followed by a record head", no, _EXP_HEAD)
                cur = -1
                continue
            if _ID_LINE.match(line):
                skip.content()
                key_s = line.split("=", 1)[0].strip()
                raise err(f"malformed {key_s} line {_excerpt(line)}", no, _ID_FORMS[key_s])
            if is_diagnostic(line):
                skip.diagnostic(no, line)
            elif pend_bits:
                raise err(f"unrecognised line {_excerpt(line)} after id lines", no, _EXP_HEAD)
            else:
                skip.unknown(no, line)
            continue

        # ---- a record head
        if held or not skip.started:
            skip.content()
        want = _PREFIX[kind]
        if letter != want:
            raise err(
                f'{_KIND_NAME[kind]} record with node id "{letter}-..."', no,
                f'"{want}-<guid>" for a {_KIND_NAME[kind]}',
            )
        nports = check_range(int(np_s), 1, 255, "port count", no, source)
        guid = int(g_s, 16)
        if guid in by_guid:
            first = nodes.line[by_guid[guid]]
            raise err(
                f"duplicate node GUID {guid:#018x} (first record on line {first})", no,
                "node GUIDs unique",
            )
        if pend_kind is not None:
            if pend_kind != kind:
                raise err(
                    f"{_KIND_NAME[kind]} record after a {_KIND_NAME[pend_kind]} GUID line "
                    f"(line {pend_line})", no, f"a {_KIND_NAME[pend_kind]} record head",
                )
            if pend_guid != guid:
                raise err(
                    f"node GUID {guid:#018x} differs from the GUID line's "
                    f"{pend_guid:#018x} (line {pend_line})", no, "the same GUID",
                )
        if kind == NodeType.SWITCH:
            lid = check_range(int(lid_s), 0, 0xFFFF, "LID", no, source) if lid_s else 0
            lmc = check_range(int(lmc_s), 0, 7, "LMC", no, source) if lmc_s else 0
            nodes.p0.append((pend_pguid, lid, lmc))
        else:
            nodes.p0.append((0, 0, 0))
        cur = len(nodes.kind)
        by_guid[guid] = cur
        nodes.kind.append(kind)
        nodes.guid.append(guid)
        nodes.nports.append(nports)
        nodes.desc.append(desc if desc is not None else "")
        nodes.sysimg.append(pend_sysimg)
        nodes.vendor.append(pend_vendor)
        nodes.device.append(pend_device)
        nodes.line.append(no)
        pend_bits = pend_vendor = pend_device = pend_sysimg = pend_pguid = 0
        pend_kind = None
        pend_guid = -1
        cur_is_switch = kind == NodeType.SWITCH
        cur_nports = nports

    if pend_bits:
        raise err("id lines at the end of the input without a record head", pend_line, _EXP_HEAD)
    return nodes, ports, by_guid, where


def _describe(nodes: _Nodes, n: int) -> str:
    return f'{_PREFIX[nodes.kind[n]]}-{nodes.guid[n]:016x} ("{nodes.desc[n]}")'


def _build_topology(
    nodes: _Nodes, ports: _Ports, by_guid: dict[int, int], where: dict[int, int], source: str,
    skip: Skipper,
) -> Fabric:
    """Resolve and check the links of parsed records and build the fabric."""

    def err(msg: str, no: int | None, expected: str | None = None) -> TopologyError:
        return TopologyError(msg, source=source, line=no, expected=expected)

    kinds, nports, nlines, n_guid = nodes.kind, nodes.nports, nodes.line, nodes.guid
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
    kind_prefix = [_PREFIX[k] for k in kinds]
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
        e_width, e_speed, e_lid, e_lmc = ports.width, ports.speed, ports.lid, ports.lmc
        for i in range(n_entries):
            j = peer[i]
            b_.set_port(
                e_node[i], e_port[i], guid=e_guid[i], lid=e_lid[i], lmc=e_lmc[i],
                width=e_width[i] or e_width[j], speed=e_speed[i] or e_speed[j],
            )
        first = np.array(link_first, dtype=np.int64)
        second = np.array(peer, dtype=np.int64)[first] if n_entries else first
        en = np.array(e_node, dtype=np.int64)
        ep = np.array(e_port, dtype=np.int64)
        if len(first):
            b_.add_links_rows(en[first], ep[first], en[second], ep[second])
        return b_.build()
    except FabricError as exc:  # pre-checked above; kept as a safety net
        raise TopologyError(exc.message, source=source) from exc


def _check_topology_lids(nodes: _Nodes, ports: _Ports, skip: Skipper) -> None:
    """:func:`~smroute.fabric.ibtext.check_lids` on every switch port 0 (its
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
    nodes: _Nodes, ports: _Ports, by_guid: dict[int, int], where: dict[int, int], i: int,
    source: str,
) -> NoReturn:
    """Raise the :class:`TopologyError` explaining why port line ``i`` has no
    matching other end (the fast path in :func:`_build_topology` only detects it)."""
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
    if _PREFIX[kinds[b]] != rk:
        raise err(
            f'{ref} names a {_KIND_NAME[kinds[b]]} (record on line {nlines[b]}) with "{rk}-"',
            f'"{_PREFIX[kinds[b]]}-{rg:016x}"',
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


def read_topology(
    path: str | os.PathLike[str],
    *,
    strict: bool = False,
    warnings: list[ParseWarning] | None = None,
) -> Fabric:
    """Read and parse an ``ibnetdiscover`` topology file (see
    :func:`parse_topology` for ``strict`` and ``warnings``).

    Errors name ``path``; a missing or unreadable file is an :class:`InputError`.
    """
    lines = read_text_lines(path)
    return parse_topology(lines, os.fspath(path), strict=strict, warnings=warnings)


_FORMAT_HINT = re.compile(
    r"(?:vendid|devid|sysimgguid|switchguid|caguid|rtguid)\s*+="
    r"|(?:Switch|Hca|Ca|Rt)\s*+[0-9]|\[\s*+[0-9]|Chassis\s|Non-Chassis Nodes",
    re.ASCII,
).match


def detect_format(lines: Iterable[str]) -> Literal["topology", "ports"]:
    """Which ``ibnetdiscover`` output ``lines`` are: ``"ports"`` for the ports
    report of ``ibnetdiscover -p``, else ``"topology"``.

    Decided by the first meaningful line: blank lines, comments, diagnostics
    and other text (a terminal prompt) are passed over until a line looks like
    topology text (an id line, a record head, a port line) or like a ports
    report line.  Undecided input is ``"topology"`` (its parser explains).
    """
    for raw in with_bom_stripped(lines):
        line = (raw if type(raw) is str else as_text(raw)).strip()
        if not line or line[0] == "#":
            continue
        if report_line_match(line):
            return "ports"
        if _FORMAT_HINT(line):
            return "topology"
    return "topology"


def read_fabric(
    path: str | os.PathLike[str],
    *,
    strict: bool = False,
    warnings: list[ParseWarning] | None = None,
) -> Fabric:
    """Read an ``ibnetdiscover`` file in either format (:func:`detect_format`):
    topology text (also ibdiagnet's dialect) or the ``-p`` ports report."""
    lines = read_text_lines(path)
    parse = parse_ports_report if detect_format(lines) == "ports" else parse_topology
    return parse(lines, os.fspath(path), strict=strict, warnings=warnings)


def require_switches(fabric: Fabric, source: str | None = None) -> None:
    """Raise a :class:`TopologyError` explaining a fabric without any switch.

    ``ibnetdiscover`` run from a host whose port is down, or before a subnet
    manager brought the port up, sees only its own CA: a partial discovery
    with nothing to route (and nothing a fabric summary can rank).
    """
    if len(fabric.switches):
        return
    n_ca = len(fabric.cas) + len(fabric.routers)
    cas = f"{n_ca} CA{'s' if n_ca != 1 else ''}"
    if fabric.n_links == 0:
        msg = (
            f"a partial discovery: it saw {cas} and no switch (the port ibnetdiscover "
            "ran from is not up, or no subnet manager is running); rerun ibnetdiscover "
            "from a host whose port is up (Active), with a subnet manager running"
        )
    else:
        msg = (
            f"no switch: {cas} linked back to back, {fabric.n_links} "
            f"link{'s' if fabric.n_links != 1 else ''}; nothing to route"
        )
    raise TopologyError(msg, source=source, expected="a fabric with at least one switch")
