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
* Noise in captures as operators keep them (:mod:`smroute.fabric.ibnetdiscover.text`):
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
  GUID equal to its node GUID, which is accepted as is.  The ASICs of a
  director chassis (CS7500, CS8500, QM9790 class) read
  ``switchguid=0x<system image guid>(<node guid>)``, the record head naming
  the ASIC by the GUID in parentheses: where the head's GUID is the one in
  parentheses and the first is the record's system image GUID, that is the
  form read (port 0 GUID = node GUID); otherwise the first GUID must be the
  head's.
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

The record grammar and its line loop are :mod:`smroute.fabric.ibnetdiscover.records`;
text in the form ``ibnetdiscover`` prints it is read at once with numpy
(:mod:`smroute.fabric.ibnetdiscover.bulk`) into the same records, the line loop
reading whatever that does not take; resolving the links and building the
fabric is :mod:`smroute.fabric.ibnetdiscover.links`.

Ports report (``ibnetdiscover -p``)
-----------------------------------
See :func:`parse_ports_report`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Literal

from smroute.fabric.ibnetdiscover.bulk import bulk_records, records_of
from smroute.fabric.ibnetdiscover.links import build_columns, build_topology
from smroute.fabric.ibnetdiscover.ports import (
    parse_ports_report,
    read_ports_report,
    report_line_match,
)
from smroute.fabric.ibnetdiscover.records import EXPECTED_ANY, parse_records
from smroute.fabric.ibnetdiscover.text import (
    ParseWarning,
    Skipper,
    TopologyError,
    as_text,
    read_text,
    with_bom_stripped,
)
from smroute.fabric.model.arrays import Fabric

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
    skip = Skipper(source, strict, warnings, EXPECTED_ANY)
    try:
        cols = bulk_records(lines, skip) if isinstance(lines, str) else None
        if cols is not None:
            skip.finish()
            fabric = build_columns(cols, source, skip)
            if fabric is not None:
                return fabric
            nodes, ports, by_guid, where = records_of(cols)
        else:
            nodes, ports, by_guid, where = parse_records(lines, source, skip)
        skip.finish()
        if not nodes.kind:
            raise skip.no_records("node records", "at least one Switch/Ca/Rt record")
        return build_topology(nodes, ports, by_guid, where, source, skip)
    finally:
        skip.flush()


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
    return parse_topology(read_text(path), os.fspath(path), strict=strict, warnings=warnings)


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
    return _decide(lines) or "topology"


def _decide(lines: Iterable[str]) -> Literal["topology", "ports"] | None:
    """:func:`detect_format`, ``None`` when no line decides."""
    for raw in with_bom_stripped(lines):
        line = (raw if type(raw) is str else as_text(raw)).strip()
        if not line or line[0] == "#":
            continue
        if report_line_match(line):
            return "ports"
        if _FORMAT_HINT(line):
            return "topology"
    return None


def _text_format(text: str) -> Literal["topology", "ports"]:
    """:func:`detect_format` of a whole text, from its first lines where they decide."""
    head = text[:65536]
    if len(head) < len(text):
        got = _decide(head.splitlines()[:-1])  # the last line may go on
        if got is not None:
            return got
    return detect_format(text.splitlines())


def looks_like_ibnetdiscover(lines: Iterable[str]) -> bool:
    """True when a line of ``lines`` is unmistakably ibnetdiscover output (an
    id line, a record head, a port line, a ports-report line): how a server
    tells a malformed topology file, whose errors may quote it, from another
    file whose text must not be echoed."""
    for raw in with_bom_stripped(lines):
        line = (raw if type(raw) is str else as_text(raw)).strip()
        if line and line[0] != "#" and (report_line_match(line) or _FORMAT_HINT(line)):
            return True
    return False


def read_fabric(
    path: str | os.PathLike[str],
    *,
    strict: bool = False,
    warnings: list[ParseWarning] | None = None,
) -> Fabric:
    """Read an ``ibnetdiscover`` file in either format (:func:`detect_format`):
    topology text (also ibdiagnet's dialect) or the ``-p`` ports report."""
    text = read_text(path)
    parse = parse_ports_report if _text_format(text) == "ports" else parse_topology
    return parse(text, os.fspath(path), strict=strict, warnings=warnings)


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
