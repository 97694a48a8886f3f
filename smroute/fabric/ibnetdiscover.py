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
* CRLF line ends, leading/trailing white space and tabs-vs-spaces are accepted.
* Not supported: ``--diff`` output (lines prefixed ``<``/``>``), ``-l`` node
  lists, ``-p`` (see :func:`parse_ports_report`).

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
if given, checked against the remote's record); an input without any node.

Ports report (``ibnetdiscover -p``)
-----------------------------------
See :func:`parse_ports_report`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NoReturn

import numpy as np

from smroute.errors import InputError
from smroute.fabric.model import SPEEDS, Fabric, FabricBuilder, FabricError, NodeType
from smroute.fileio import read_lines

__all__ = [
    "TopologyError",
    "parse_ports_report",
    "parse_topology",
    "read_ports_report",
    "read_topology",
]


class TopologyError(InputError):
    """ibnetdiscover text that cannot be parsed or is inconsistent.

    ``line`` is the 1-based line number (``None`` when the problem is not tied
    to one line, e.g. an empty input), ``expected`` says what the parser wanted
    there (also part of the message), ``source`` names the input.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        expected: str | None = None,
    ) -> None:
        self.expected = expected
        if expected:
            message = f"{message}; expected {expected}"
        super().__init__(message, source=source, line=line)

    def with_source(self, source: str) -> TopologyError:
        """The same error, naming ``source``."""
        err = super().with_source(source)
        assert isinstance(err, TopologyError)
        err.expected = self.expected
        return err


# ----------------------------------------------------------------- grammar
_HEX = r"([0-9a-fA-F]{1,16}+)"
_NUM = r"([0-9]{1,6}+)"
_EXT = r"(?:\[ext\s*+[0-9]{1,6}+\])?"
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
    rf'\[{_NUM}\]{_EXT}\s*+"([A-Za-z?])-{_HEX}"\[{_NUM}\]{_EXT}\s*+(?:\(\s*+{_HEX}\s*+\))?'
    rf'\s*+(?:#\s*+"(.*)"\s++lid\s++{_NUM}\s++{_WIDTH_SPEED}{_FULL_INFO}{_XSIGO})?\s*+$',
    re.ASCII,
)
_CA_PORT = re.compile(
    rf"\[{_NUM}\]{_EXT}\s*+(?:\(\s*+{_HEX}\s*+\))?"
    rf'\s*+"([A-Za-z?])-{_HEX}"\[{_NUM}\]{_EXT}\s*+(?:\(\s*+{_HEX}\s*+\))?'
    rf'\s*+(?:#\s*+lid\s++{_NUM}\s++lmc\s++{_NUM}\s++"(.*)"\s++lid\s++{_NUM}\s++'
    rf"{_WIDTH_SPEED}{_FULL_INFO})?\s*+$",
    re.ASCII,
)
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

_WIDTHS = {"1x": 1, "2x": 2, "4x": 4, "8x": 8, "12x": 12, "??": 0}
_SPEED_CODE = {name: i for i, name in enumerate(SPEEDS)}
_PREFIX = {NodeType.SWITCH: "S", NodeType.CA: "H", NodeType.ROUTER: "R"}
_KIND_NAME = {NodeType.SWITCH: "switch", NodeType.CA: "CA", NodeType.ROUTER: "router"}

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


def _excerpt(text: str, limit: int = 60) -> str:
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return repr(text)


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


def _lines(lines: Iterable[str] | str) -> Iterator[tuple[int, str]]:
    """Numbered, stripped lines; accepts a whole text, ``str`` or ``bytes`` items."""
    items: Iterable[object] = lines
    if isinstance(lines, str | bytes):
        items = lines.splitlines()
    for no, raw in enumerate(items, 1):
        yield no, (raw if type(raw) is str else _as_text(raw)).strip()


def _check_range(
    value: int, lo: int, hi: int, what: str, no: int, source: str
) -> int:
    if not lo <= value <= hi:
        raise TopologyError(
            f"{what} {value} out of range", source=source, line=no, expected=f"{lo}..{hi}"
        )
    return value


def parse_topology(lines: Iterable[str] | str, source: str = "<input>") -> Fabric:
    """Parse ``ibnetdiscover`` topology text into a :class:`Fabric`.

    ``lines`` are the lines of the text (with or without line ends; a single
    ``str`` is split into lines).  ``source`` names the input in errors.  Nodes
    are numbered in record order.  Raises :class:`TopologyError` (and nothing
    else) for any malformed or inconsistent input; see the module docstring
    for the grammar and the checks.
    """
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

    def err(msg: str, no: int | None, expected: str | None = None) -> TopologyError:
        return TopologyError(msg, source=source, line=no, expected=expected)

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
    for no, raw in enumerate(items, 1):
        line = (raw if type(raw) is str else _as_text(raw)).strip()
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
                raise err(
                    f"port line outside a node record: {_excerpt(line)}", no,
                    _EXP_HEAD + " before the port lines of a record",
                )
            if cur_is_switch:
                m = sw_port_match(line)
                if m is None:
                    raise err(f"malformed switch port line {_excerpt(line)}", no, _EXP_SWITCH_PORT)
                pnum, rk, rg, rp, rpg, _d, _rl, w, s = m.groups()
                own_guid = lid = lmc = 0
            else:
                m = ca_port_match(line)
                if m is None:
                    raise err(f"malformed CA/router port line {_excerpt(line)}", no, _EXP_CA_PORT)
                pnum, og, rk, rg, rp, rpg, lid_s, lmc_s, _d, _rl, w, s = m.groups()
                own_guid = int(og, 16) if og else 0
                lid = int(lid_s) if lid_s else 0
                lmc = int(lmc_s) if lmc_s else 0
                if lid > 0xFFFF:
                    raise err(f"LID {lid} out of range", no, "a LID in 0..65535")
                if lmc > 7:
                    raise err(f"LMC {lmc} out of range", no, "an LMC in 0..7")
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
                raise err(f"malformed switch head line {_excerpt(line)}", no, _EXP_SWITCH_HEAD)
            np_s, letter, g_s, desc, lid_s, lmc_s = m.groups()
            kind = NodeType.SWITCH
        elif c in "CHR" and line.startswith(("Ca", "Hca", "Rt")):
            m = _CA_HEAD.match(line)
            if m is None:
                raise err(f"malformed CA/router head line {_excerpt(line)}", no, _EXP_CA_HEAD)
            word, np_s, letter, g_s, desc = m.groups()
            lid_s = lmc_s = None
            kind = NodeType.ROUTER if word == "Rt" else NodeType.CA
        else:
            m = id_match(line)
            if m is not None:
                # ---- an id line: key=0x<hex>[(<hex>)][ # comment]
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
                if pend_bits:
                    raise err("id lines not followed by a record head", no, _EXP_HEAD)
                cur = -1
                continue
            if _ID_LINE.match(line):
                key_s = line.split("=", 1)[0].strip()
                raise err(f"malformed {key_s} line {_excerpt(line)}", no, _ID_FORMS[key_s])
            raise err(f"unrecognised line {_excerpt(line)}", no, _EXP_ANY)

        # ---- a record head
        want = _PREFIX[kind]
        if letter != want:
            raise err(
                f'{_KIND_NAME[kind]} record with node id "{letter}-..."', no,
                f'"{want}-<guid>" for a {_KIND_NAME[kind]}',
            )
        nports = _check_range(int(np_s), 1, 255, "port count", no, source)
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
            lid = _check_range(int(lid_s), 0, 0xFFFF, "LID", no, source) if lid_s else 0
            lmc = _check_range(int(lmc_s), 0, 7, "LMC", no, source) if lmc_s else 0
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
    if not nodes.kind:
        raise err("no node records found", None, "at least one Switch/Ca/Rt record")
    return _build_topology(nodes, ports, by_guid, where, source)


def _as_text(raw: object) -> str:
    """A line given as ``bytes`` (decoded as UTF-8) or another object (``str()``)."""
    if isinstance(raw, bytes | bytearray):
        return raw.decode("utf-8", "replace")
    return str(raw)


def _describe(nodes: _Nodes, n: int) -> str:
    return f'{_PREFIX[nodes.kind[n]]}-{nodes.guid[n]:016x} ("{nodes.desc[n]}")'


def _build_topology(
    nodes: _Nodes, ports: _Ports, by_guid: dict[int, int], where: dict[int, int], source: str
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


def read_topology(path: str | os.PathLike[str]) -> Fabric:
    """Read and parse an ``ibnetdiscover`` topology file.

    Errors name ``path``; a missing or unreadable file is an :class:`InputError`.
    """
    lines = _read(path)
    return parse_topology(lines, os.fspath(path))


def _read(path: str | os.PathLike[str]) -> list[str]:
    try:
        return read_lines(path)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=os.fspath(path)) from exc


# ------------------------------------------------------------ ports report
_REPORT_LINE = re.compile(
    rf"(SW|CA|RT|\?\?)\s++{_NUM}\s++{_NUM}\s++0x{_HEX}\s++(1x|2x|4x|8x|12x|\?\?)\s++"
    r"(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR|\?\?\?)"
    rf"(?:\s++-\s++(SW|CA|RT|\?\?)\s++{_NUM}\s++{_NUM}\s++0x{_HEX}\s++\(\s*+'(.*)'\s++-\s++'(.*)'\s*+\)"
    r"|\s++'(.*)')\s*+$",
    re.ASCII,
)
_EXP_REPORT = (
    "a ports report line: <SW|CA|RT> <lid> <port> 0x<port guid> <width> <speed> "
    "[- <SW|CA|RT> <lid> <port> 0x<guid> ( '<desc>' - '<remote desc>' ) | '<desc>']"
)
_REPORT_KIND = {"SW": NodeType.SWITCH, "CA": NodeType.CA, "RT": NodeType.ROUTER}


def parse_ports_report(lines: Iterable[str] | str, source: str = "<input>") -> Fabric:
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
    :func:`parse_topology`); any problem raises :class:`TopologyError`.
    """

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
    for no, line in _lines(lines):
        if not line or line[0] == "#":
            continue
        m = _REPORT_LINE.match(line)
        if m is None:
            raise err(f"malformed ports report line {_excerpt(line)}", no, _EXP_REPORT)
        (t, lid_s, p_s, g_s, w, s, rt, rlid_s, rp_s, rg_s, own_d, _rem_d, lone_d) = m.groups()
        if t not in _REPORT_KIND:
            raise err(f"node type {t!r}", no, "SW, CA or RT")
        kind = _REPORT_KIND[t]
        lid = _check_range(int(lid_s), 0, 0xFFFF, "LID", no, source)
        p = _check_range(int(p_s), 1, 255, "port number", no, source)
        g = int(g_s, 16)
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
            _check_range(int(rlid_s), 0, 0xFFFF, "remote LID", no, source)
            rp = _check_range(int(rp_s), 1, 255, "remote port number", no, source)
            e_remote.append((_REPORT_KIND[rt], int(rg_s, 16), rp))
            e_width.append(_WIDTHS[w])
            e_speed.append(_SPEED_CODE[s])
        else:
            e_remote.append(None)
            e_width.append(0)
            e_speed.append(0)

    if not n_kind:
        raise err("no ports found", None, "at least one ports report line")

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
                f"cannot infer a unique node GUID for the {_KIND_NAME[kind]} listed first "
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
            ep = np.array(e_port, dtype=np.int64)
            builder.add_links_rows(en[f], ep[f], en[s], ep[s])
        return builder.build()
    except FabricError as exc:
        raise TopologyError(exc.message, source=source) from exc


def read_ports_report(path: str | os.PathLike[str]) -> Fabric:
    """Read and parse an ``ibnetdiscover -p`` ports report file."""
    return parse_ports_report(_read(path), os.fspath(path))
