"""The record grammar of ``ibnetdiscover`` topology text and its line loop.

The line patterns (record heads, port lines, id lines, ``-g`` grouping lines),
the records they collect (:class:`NodeRecords`, :class:`PortLines`: plain lists,
one entry per node record / per port line, in input order) and
:func:`parse_records`, which reads the lines, checks each on its own (ranges,
duplicates, id lines against their head) and passes noise to the
:class:`~smroute.fabric.ibnetdiscover.text.Skipper`.  The grammar is described in
:mod:`smroute.fabric.ibnetdiscover.parse`; resolving the links and building the
fabric is :mod:`smroute.fabric.ibnetdiscover.links`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from smroute.fabric.ibnetdiscover.text import (
    HEX,
    KIND_NAME,
    NUM,
    SPEED_CODE,
    WIDTHS,
    Skipper,
    TopologyError,
    as_text,
    check_peer,
    check_range,
    is_diagnostic,
    with_bom_stripped,
)
from smroute.fabric.ibnetdiscover.text import excerpt as _excerpt
from smroute.fabric.model.base import NodeType

__all__ = ["EXPECTED_ANY", "PREFIX", "NodeRecords", "PortLines", "parse_records"]


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
_NOT_PORT_0 = re.compile(r"#.*\b(?:enhanced|base)\s++port\s++(?!0\b)[0-9]", re.ASCII).search
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
PREFIX = {NodeType.SWITCH: "S", NodeType.CA: "H", NodeType.ROUTER: "R"}
_KIND_NAME = KIND_NAME

_EXP_HEAD = 'a record head (Switch N "S-<guid>" # "<desc>" ... / Ca N "H-<guid>" ... / Rt ...)'
EXPECTED_ANY = (
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
    """The message for a malformed line; says so when its LID value is
    blank, or a switch head names a port other than 0."""
    hint = (": its LID is blank" if _BLANK_LID(line) else
            ": it names another port than 0 (a switch's LID is its management port 0's; "
            "ibnetdiscover prints 'port 0' there: an edited file?)"
            if what == "switch head" and _NOT_PORT_0(line) else "")
    return f"malformed {what} line {_excerpt(line)}{hint}"


@dataclass
class NodeRecords:
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
class PortLines:
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



def _chassis_form(
    guid: int, first: int, second: int, sysimg: int, bits: int, at: int, no: int,
    err: Callable[[str, int | None, str | None], TopologyError],
) -> tuple[int, int]:
    """Read ``switchguid=0xFIRST(SECOND)`` of a record whose head names node
    GUID ``guid`` (``!= FIRST``): ``(system image GUID, port-0 GUID)``.

    ibnetdiscover prints ``switchguid=0x<node guid>(<port guid>)``; ibdiagnet
    prints the ASICs of a director chassis ``switchguid=0x<system image
    guid>(<node guid>)`` (port 0 of a switch ASIC has the node GUID), so a
    head naming the GUID in parentheses is that form when the first GUID is
    the record's system image GUID (its ``sysimgguid=`` line, or the first
    GUID itself without one).
    """
    if second == guid and bits & 8 and (not bits & 4 or sysimg == first):
        return first, guid
    if second == guid and bits & 8:
        raise err(
            f"node GUID {guid:#018x} is in parentheses on the GUID line (line {at}) "
            f"but its first GUID {first:#018x} is not the sysimgguid {sysimg:#018x}",
            no, "switchguid=0x<node guid>(<port guid>) or "
            "switchguid=0x<sysimgguid>(<node guid>)",
        )
    raise err(
        f"node GUID {guid:#018x} differs from the GUID line's "
        f"{first:#018x} (line {at})", no, "the same GUID",
    )


def parse_records(
    lines: Iterable[str] | str, source: str, skip: Skipper
) -> tuple[NodeRecords, PortLines, dict[int, int], dict[int, int]]:
    """The line loop of :func:`~smroute.fabric.ibnetdiscover.parse.parse_topology`:
    records, their port lines and the lookups ``by_guid`` (node GUID -> node)
    and ``where`` (node * 256 + port -> port line entry)."""
    nodes = NodeRecords()
    ports = PortLines()
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
                pnum, rk, rg, rp, rpg, _d, rl, w, s = m.groups()
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
                pnum, og1, og, rk, rg, rp, rpg, lid_s, lmc_s, _d, rl, w, s = m.groups()
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
            check_peer(int(rg, 16), int(rl) if rl else 0, no, source)
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
        want = PREFIX[kind]
        if letter != want:
            raise err(
                f'{_KIND_NAME[kind]} record with node id "{letter}-..."', no,
                f'"{want}-<guid>" for a {_KIND_NAME[kind]}',
            )
        nports = check_range(int(np_s), 1, 255, "port count", no, source)
        guid = int(g_s, 16)
        if guid == 0:
            raise err("node GUID 0", no, "a non-zero node GUID (0 is never assigned)")
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
                pend_sysimg, pend_pguid = _chassis_form(
                    guid, pend_guid, pend_pguid, pend_sysimg, pend_bits, pend_line, no, err
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

    skip.total = no
    if pend_bits:
        raise err("id lines at the end of the input without a record head", pend_line, _EXP_HEAD)
    return nodes, ports, by_guid, where

