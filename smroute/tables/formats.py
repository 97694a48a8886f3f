"""Readers and writers of forwarding tables in the formats of the real tools.

* OpenSM ``file`` engine input == ``opensm-lfts.dump`` (``format_opensm`` /
  ``parse_lft_dump``)::

    Unicast lids [0-6] of switch Lid 1 guid 0x0000000000200000 ('Switch1'):
    0x0001 000 # Switch portguid 0x0000000000200000: 'Switch1'
    6 lids dumped

* ``ibroute`` / ``dump_fts`` output (``parse_lft_dump`` reads it too)::

    Unicast lids [0x0-0x6] of switch Lid 1 guid 0x0000000000200000 (Switch1):
    0x0001 000 : (Switch portguid 0x0000000000200000: 'Switch1')

* ``opensm.fdbs`` and ``opensm-subnet.lst``, read by ``ibdmchk -s -f``
  (``format_fdbs``, ``parse_fdbs``, ``format_subnet_lst``).
* JSON (``format_json`` / ``iter_json`` / ``parse_json``, in
  :mod:`smroute.tables.json_io`): ``{"format": "smroute-lft/1", "max_lid": N,
  "switches": [{"guid": "0x..", "lid": N, "desc": "..", "routes": [[lid, port], ...]}]}``.

Writers return text (``str``) or, for the large OpenSM and JSON formats, an
iterator of ``bytes`` chunks built with numpy (no Python loop per entry).
Parsers take lines and raise :class:`~smroute.errors.InputError` naming the
line.  ``read_tables(path)`` detects the format.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from smroute.errors import InputError
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import SPEED_GBPS, NodeType
from smroute.fileio import atomic_writer
from smroute.tables.json_io import format_json, iter_json, parse_json
from smroute.tables.lft import NO_ROUTE, ForwardingTables
from smroute.text import excerpt

__all__ = [
    "FORMATS",
    "TABLES_HEADER",
    "format_opensm",
    "format_fdbs",
    "format_subnet_lst",
    "format_json",
    "iter_json",
    "iter_opensm",
    "stream_opensm",
    "parse_lft_dump",
    "parse_fdbs",
    "parse_json",
    "parse_tables",
    "read_tables",
    "table_files",
    "tables_trailer",
    "write_tables",
]

FORMATS = ("opensm", "fdbs", "json")
_KIND = {int(NodeType.CA): "Channel Adapter", int(NodeType.SWITCH): "Switch",
         int(NodeType.ROUTER): "Router"}


# ----------------------------------------------------------------- header, trailer
#: First line of every table file smroute writes in OpenSM's and ibdmchk's
#: formats: a comment both tools skip.  A file that starts with it must end
#: with :func:`tables_trailer`, so a file cut anywhere -- at a switch
#: boundary too -- is an error, never a smaller set of tables.
TABLES_HEADER = "# smroute forwarding tables"
_SMR_TRAILER = re.compile(r"^# smroute: end of tables: (\d+) switches, (\d+) entries$")


def tables_trailer(switches: int, entries: int) -> str:
    """The last line of a table file: how many switch blocks and route entries it holds."""
    return f"# smroute: end of tables: {switches} switches, {entries} entries\n"


class _Ends:
    """The header / trailer check of one file being read."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.ours = False  # the file starts with TABLES_HEADER
        self.trailer: tuple[int, int, int] | None = None  # (line, switches, entries)

    def comment(self, s: str, no: int, seen_content: bool) -> None:
        if s == TABLES_HEADER and not seen_content and not self.ours:
            self.ours = True
            return
        m = _SMR_TRAILER.match(s)
        if m:
            self.trailer = (no, int(m.group(1)), int(m.group(2)))

    def content(self, no: int) -> None:
        if self.trailer is not None:
            raise InputError(f"table text after the trailer (line {self.trailer[0]}); "
                             "expected the trailer to be the last line (files spliced?)",
                             source=self.source, line=no)

    def check(self, switches: int, entries: int, no: int) -> None:
        if self.trailer is None:
            if self.ours:
                raise InputError(
                    f"the file ends after {switches} switches without its trailer "
                    "('# smroute: end of tables: N switches, M entries'); the file is cut "
                    "short?", source=self.source, line=no)
            return
        line, n_sw, n_e = self.trailer
        if (n_sw, n_e) != (switches, entries):
            raise InputError(
                f"the trailer counts {n_sw} switches and {n_e} entries, the file holds "
                f"{switches} and {entries}: lines lost or added?", source=self.source,
                line=line)


# ----------------------------------------------------------------- writers
def _lid_template(t: ForwardingTables, lids: np.ndarray, style: str) -> tuple[
    np.ndarray, np.ndarray, np.ndarray
]:
    """Byte template of one line per LID with the port digits at known offsets.

    Returns (template uint8, digit offsets ``(len(lids),)``, line lengths).
    """
    parts: list[bytes] = []
    for lid in lids.tolist():
        comment = b""
        if t.lid_kind is not None and t.lid_guid is not None and t.lid_desc is not None:
            kind = _KIND.get(int(t.lid_kind[lid]))
            if kind:
                text = f"{kind} portguid {int(t.lid_guid[lid]):#018x}: '{t.lid_desc[lid]}'"
                comment = (f" # {text}" if style == "opensm" else f" : ({text})").encode()
        parts.append(b"0x%04x 000%s\n" % (lid, comment))
    lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    starts = np.cumsum(lengths) - lengths
    template = np.frombuffer(b"".join(parts), dtype=np.uint8)
    return template, starts + 7, lengths


#: ASCII of the three decimal digits of every port number 0..255.
_PORT_DIGITS = np.array([list(b"%03d" % p) for p in range(256)], dtype=np.uint8)
#: The same digits and a line end, as one little-endian 32-bit word per port.
_PORT_LINE_END = np.array([int.from_bytes(b"%03d\n" % p, "little") for p in range(256)],
                          dtype="<u4")
#: Switch rows formatted at once (bounds the buffer at ~``_BLOCK`` x a table row).
_BLOCK = 64


def _word_at(offset: int, width: int) -> np.dtype:
    """A record of ``width`` bytes with a little-endian uint32 ``w`` at ``offset``."""
    return np.dtype({"names": ["w"], "formats": ["<u4"], "offsets": [offset],
                     "itemsize": width})


def iter_opensm(t: ForwardingTables) -> Iterator[bytes]:
    """The OpenSM ``file``-engine / ``opensm-lfts.dump`` text, in chunks of
    :data:`_BLOCK` switches (:func:`stream_opensm` without its copies)."""
    for pieces in _opensm_blocks(t):
        yield b"".join(pieces)


def stream_opensm(t: ForwardingTables) -> Iterator[bytes | memoryview]:
    """The text of :func:`iter_opensm` in pieces that are views of a buffer the
    next block of switches reuses: each piece is valid until the next one is
    asked for, to be written at once and not kept (no copy of the text is made;
    a view kept is released, so using it later raises instead of reading
    another block's lines)."""
    for pieces in _opensm_blocks(t):
        for piece in pieces:
            yield piece
            if isinstance(piece, memoryview):
                piece.release()


def _opensm_blocks(t: ForwardingTables) -> Iterator[list[bytes | memoryview]]:
    """The OpenSM text in pieces, a list per block of :data:`_BLOCK` switches
    (the entry lines views of a buffer reused by the next block).

    LIDs without a route are left out (OpenSM then has no route for them).
    The entry lines are one byte template per LID (shared by all switches),
    copied for a block of switches at once with the port digits put in by
    numpy; only the head and count lines are formatted per switch.
    """
    routed_any = (t.ports != NO_ROUTE).any(axis=0)
    lids = np.flatnonzero(routed_any)
    lids = lids[lids > 0]
    template, digit, lengths = _lid_template(t, lids, "opensm")
    uniform = len(lids) > 0 and bool((lengths == 11).all())
    width = int(lengths[0]) if uniform else 0
    # the routed LIDs one run: a slice of the table, no gather
    cols: slice | np.ndarray = (slice(int(lids[0]), int(lids[-1]) + 1) if len(lids)
                                and int(lids[-1]) - int(lids[0]) + 1 == len(lids) else lids)
    top = t.max_lid
    entries = 0
    yield [(TABLES_HEADER + "\n").encode()]
    # (a writable copy: tile returns an empty template itself, read-only)
    buf = np.tile(template.copy(), (min(_BLOCK, t.n_switches), 1))
    words = buf.view(_word_at(7, width))["w"] if uniform else None
    for b0 in range(0, t.n_switches, _BLOCK):
        b1 = min(b0 + _BLOCK, t.n_switches)
        ports = t.ports[b0:b1, cols]
        if words is not None:  # lines "0xLLLL PPP\n": the port and line end as one word
            np.take(_PORT_LINE_END, ports, out=words[:b1 - b0], mode="clip")
        else:
            for k in range(3):
                buf[:b1 - b0, digit + k] = np.take(_PORT_DIGITS[:, k], ports)
        full = len(lids) == 0 or int(ports.max()) != NO_ROUTE
        keep = None if full else ports != NO_ROUTE
        counts = [len(lids)] * (b1 - b0) if keep is None else np.count_nonzero(
            keep, axis=1).tolist()
        block = buf[:b1 - b0].reshape(-1)
        if uniform and keep is not None:
            # leave the unrouted LIDs' lines out: the kept lines of every row, in order
            block = buf[:b1 - b0].view(f"V{width}")[keep].view(np.uint8)
        starts = [0, *np.cumsum(np.multiply(counts, width)).tolist()] if uniform else []
        out: list[bytes | memoryview] = []
        for r, i in enumerate(range(b0, b1)):
            if uniform:
                row = block[starts[r]:starts[r + 1]]
            else:
                row = buf[r]
                if keep is not None and counts[r] != len(lids):  # unrouted LIDs left out
                    row = row[np.repeat(keep[r], lengths)]
            out.append(
                f"Unicast lids [0-{top}] of switch Lid {int(t.switch_lid[i])} guid "
                f"{int(t.switch_guid[i]):#018x} ('{t.switch_desc[i]}'):\n".encode())
            out.append(row.data)
            out.append(b"%d lids dumped\n" % counts[r])
            entries += counts[r]
        yield out
    yield [tables_trailer(t.n_switches, entries).encode()]


def format_opensm(t: ForwardingTables) -> str:
    return b"".join(iter_opensm(t)).decode()


def format_fdbs(t: ForwardingTables, hops: np.ndarray | None = None) -> str:
    """``opensm.fdbs`` text. ``hops``: optional ``(S, W)`` hop counts (uint8,
    255 unknown); the Optimal column says yes where given."""
    out: list[str] = [TABLES_HEADER]
    entries = 0
    for i in range(t.n_switches):
        out.append(f"dump_ucast_routes: Switch {int(t.switch_guid[i]):#018x}")
        out.append("LID    : Port : Hops : Optimal")
        lids = np.flatnonzero(t.ports[i] != NO_ROUTE)
        lids = lids[lids > 0]
        ports = t.ports[i, lids].tolist()
        h = hops[i, lids].tolist() if hops is not None else [255] * len(lids)
        entries += len(lids)
        out.extend(
            f"0x{lid:04x} : {p:03d}  : {hh if hh != 255 else 0:02d}   : yes"
            for lid, p, hh in zip(lids.tolist(), ports, h, strict=True)
        )
    return "\n".join(out) + "\n" + tables_trailer(t.n_switches, entries)


def _node_label(f: Fabric, row: int) -> str:
    n = int(f.port_node[row])
    kind = int(f.node_type[n])
    tag = {int(NodeType.SWITCH): "SW", int(NodeType.CA): "CA", int(NodeType.ROUTER): "RT"}[kind]
    if kind == NodeType.SWITCH:
        pguid = int(f.port_guid[f.port_start[n]]) or int(f.node_guid[n])
        lid = int(f.port_lid[f.port_start[n]])
    else:
        pguid = int(f.port_guid[row])
        lid = int(f.port_lid[row])
    return (
        f"{tag} Ports:{int(f.num_ports[n]):02X} SystemGUID:{int(f.sysimg_guid[n]):016x} "
        f"NodeGUID:{int(f.node_guid[n]):016x} PortGUID:{pguid:016x} VenID:{{ven}} "
        f"DevID:{int(f.device_id[n]):04X} Rev:000000A1 {{{f.node_desc[n]}}} "
        f"LID:{lid:04X} PN:{int(f.port_num[row]):02X}"
    )


def format_subnet_lst(f: Fabric) -> str:
    """``opensm-subnet.lst``: every link, once from each end."""
    lines = []
    a = np.concatenate([f.link_a, f.link_b]).tolist()
    b = np.concatenate([f.link_b, f.link_a]).tolist()
    for ra, rb in sorted(zip(a, b, strict=True)):
        la = _node_label(f, ra).replace("{ven}", f"{int(f.vendor_id[f.port_node[ra]]):06X}")
        lb = _node_label(f, rb).replace("{ven}", f"{int(f.vendor_id[f.port_node[rb]]):08X}")
        width = int(f.port_width[ra]) or 4
        spd = SPEED_GBPS[int(f.port_speed[ra])] or 2.5
        lines.append(f"{{ {la} }} {{ {lb} }} PHY={width}x LOG=ACT SPD={spd:g}")
    return "\n".join(lines) + "\n"


def table_files(
    t: ForwardingTables, path: str | Path, fmt: str = "opensm", *,
    fabric: Fabric | None = None, hops: np.ndarray | None = None,
) -> list[tuple[Path, Iterable[bytes | memoryview]]]:
    """The files a table set in format ``fmt`` is written as, each with its
    content as byte chunks (the large formats built lazily; the OpenSM text's
    valid until the next is asked for: :func:`stream_opensm`): ``PATH`` alone, or for
    ``fdbs`` ``PATH`` (opensm.fdbs) and, given ``fabric``, ``opensm-subnet.lst`` beside it."""
    path = Path(path)
    if fmt == "opensm":
        return [(path, stream_opensm(t))]
    if fmt == "json":
        return [(path, iter_json(t))]
    if fmt == "fdbs":
        out: list[tuple[Path, Iterable[bytes | memoryview]]] = [
            (path, [format_fdbs(t, hops).encode()])]
        if fabric is not None:
            out.append((path.with_name("opensm-subnet.lst"),
                        [format_subnet_lst(fabric).encode()]))
        return out
    raise InputError(f"unknown table format {fmt!r}; expected one of {', '.join(FORMATS)}")


def write_tables(
    t: ForwardingTables, path: str | Path, fmt: str = "opensm", *,
    fabric: Fabric | None = None, hops: np.ndarray | None = None,
) -> list[Path]:
    """Write tables atomically (:func:`table_files`); returns the files written."""
    written = []
    for target, chunks in table_files(t, path, fmt, fabric=fabric, hops=hops):
        with atomic_writer(target, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
        written.append(target)
    return written


# ----------------------------------------------------------------- readers
_HEAD = re.compile(
    r"^Unicast lids \[(0x[0-9a-fA-F]+|\d+)-(0x[0-9a-fA-F]+|\d+)\] of switch (.*?)"
    r"\s*guid (0x[0-9a-fA-F]+)\s*(?:\((.*)\))?:\s*$"
)
_LID_OF = re.compile(r"Lid (\d+)")
_ENTRY = re.compile(r"^0x([0-9a-fA-F]+)\s+(\d+)\b")
_TRAILER = re.compile(r"^(\d+)\s+(?:valid\s+)?lids dumped$")
#: The comment of an entry naming its destination: OpenSM ``# Switch portguid 0x..: 'desc'``,
#: ibroute/dump_fts ``: (Channel Adapter portguid 0x..: 'desc')``.
_LABEL = re.compile(r"(?:#|:\s*\()\s*(Channel Adapter|Switch|Router) portguid "
                    r"(0x[0-9a-fA-F]+): '(.*)'\)?\s*$")
_KIND_OF = {v: k for k, v in _KIND.items()}
_FDB_HEAD = re.compile(r"^dump_ucast_routes: Switch (0x[0-9a-fA-F]+)\s*$")
# OpenSM's dump_ucast_routes lines: "0x0001 : 001  : 01   : yes", "... : No 2 hop path
# possible via port 3!", "0x0002 : 004  : HOPS UNKNOWN", "0x0003 : UNREACHABLE" (no route)
_FDB_ENTRY = re.compile(
    r"^0x([0-9a-fA-F]+)\s*:\s*(?:UNREACHABLE|(\d+)\s*:\s*(?:HOPS UNKNOWN|\d+\s*:\s*"
    r"(?:yes|no\b.*)))$", re.IGNORECASE)
_TRAILER_FORM = "'N lids dumped' (OpenSM) or 'N valid lids dumped' (ibroute, dump_fts)"


def _assemble(
    guids: list[int], lids: list[int], descs: list[str], entries: list[tuple[int, int, int]],
    labels: dict[int, tuple[int, int, str]] | None = None,
) -> ForwardingTables:
    """The tables; ``labels``: ``{lid: (kind, port GUID, description)}`` of the
    destinations the entries' comments name (the per-LID labels)."""
    width = max([e[1] for e in entries] + [max(lids, default=0)] + [0]) + 1
    ports = np.full((len(guids), width), NO_ROUTE, dtype=np.uint8)
    if entries:
        e = np.array(entries, dtype=np.int64)
        ports[e[:, 0], e[:, 1]] = e[:, 2]
    lid_guid = lid_kind = lid_desc = None
    if labels:
        lid_kind = np.zeros(width, dtype=np.int8)
        lid_guid = np.zeros(width, dtype=np.uint64)
        desc = [""] * width
        for lid, (kind, guid, text) in labels.items():
            lid_kind[lid], lid_guid[lid], desc[lid] = kind, guid, text
        lid_desc = tuple(desc)
    return ForwardingTables(
        switch_guid=np.array(guids, dtype=np.uint64),
        switch_lid=np.array(lids, dtype=np.int64),
        switch_desc=tuple(descs),
        ports=ports,
        lid_guid=lid_guid,
        lid_kind=lid_kind,
        lid_desc=lid_desc,
    )


def _lid_number(text: str) -> int:
    return int(text, 16) if text[:2].lower() == "0x" else int(text)


def parse_lft_dump(lines: Iterable[str], source: str = "<input>") -> ForwardingTables:
    """Parse ``opensm-lfts.dump`` / file-engine input, or ``ibroute``/``dump_fts`` output.

    Each switch block is checked whole, so a file cut short or spliced is an
    error naming the line, never tables with routes silently missing: every
    block ends with its ``N lids dumped`` line (``N valid lids dumped`` from
    ibroute/dump_fts) whose count is the entries listed (ibroute, dump_fts,
    smroute) or the top of the block's range (OpenSM); every entry lies in the
    block's ``[low-high]`` LID range; the last line is a complete trailer.

    A switch's LID is its header's ``Lid N``, else (``dump_fts`` names switches
    by their directed-route path) the LID its own entry (port 0) routes.  The
    destinations the entries' comments name become the per-LID labels
    (``lid_guid``, ``lid_kind``, ``lid_desc``).
    """
    labels: dict[int, tuple[int, int, str]] = {}
    guids: list[int] = []
    lids: list[int] = []
    descs: list[str] = []
    entries: list[tuple[int, int, int]] = []
    seen: set[int] = set()
    block: tuple[int, int, int] | None = None  # (head line, low LID, high LID) of the open block
    n_block = 0  # entries of the open block
    ends = _Ends(source)
    no = 0
    for no, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s or (block is not None and s.startswith(("Lid", "Port"))):
            continue  # blank, or ibroute's column headers
        if s[0] == "#":
            ends.comment(s, no, bool(guids))
            continue
        ends.content(no)
        m = _HEAD.match(s)
        if m:
            if block is not None:
                raise InputError(
                    f"the block of switch {guids[-1]:#018x} (line {block[0]}) ends without its "
                    f"trailer; expected {_TRAILER_FORM} before the next switch (a file cut or "
                    "spliced?)", source=source, line=no)
            guid = int(m.group(4), 16)
            if guid in seen:
                raise InputError(f"switch {guid:#018x} listed twice", source=source, line=no)
            seen.add(guid)
            lo, hi = _lid_number(m.group(1)), _lid_number(m.group(2))
            if not 0 <= lo <= hi <= 0xBFFF:
                raise InputError(f"LID range [{m.group(1)}-{m.group(2)}] is not within "
                                 "0..0xbfff", source=source, line=no)
            lm = _LID_OF.search(m.group(3))
            desc = (m.group(5) or "").strip()
            if len(desc) >= 2 and desc[0] == desc[-1] == "'":
                desc = desc[1:-1]
            guids.append(guid)
            lids.append(int(lm.group(1)) if lm else 0)
            descs.append(desc)
            block, n_block = (no, lo, hi), 0
            continue
        m = _TRAILER.match(s)
        if m and block is not None:
            count = int(m.group(1))
            if count not in (n_block, block[2]):
                raise InputError(
                    f"the trailer counts {count} LIDs but the block of switch {guids[-1]:#018x} "
                    f"(line {block[0]}) lists {n_block} (range top {block[2]}): lines lost?",
                    source=source, line=no)
            block = None
            continue
        m = _ENTRY.match(s)
        if m and block is not None:
            lid, port = int(m.group(1), 16), int(m.group(2))
            if not block[1] <= lid <= block[2] or not 0 < lid <= 0xBFFF or port > 255:
                raise InputError(
                    f"LID {lid:#x} or port {port} out of range (the block's LIDs are "
                    f"{max(block[1], 1)}..{block[2]}, ports 0..255)", source=source, line=no)
            entries.append((len(guids) - 1, lid, port))
            n_block += 1
            if port == 0 and lids[-1] == 0:  # the switch's own LID
                lids[-1] = lid
            if lid not in labels and (lm := _LABEL.search(s)) is not None:
                labels[lid] = (_KIND_OF[lm.group(1)], int(lm.group(2), 16), lm.group(3))
            continue
        if block is not None:
            expected = f"'0xLID PORT ...' or {_TRAILER_FORM}"
        else:
            expected = "'Unicast lids [...] of switch ... guid 0x...'"
        raise InputError(f"expected {expected}, got {excerpt(s)}", source=source, line=no)
    if block is not None:
        raise InputError(
            f"the file ends inside the block of switch {guids[-1]:#018x} (line {block[0]}): "
            f"no trailer ({_TRAILER_FORM}); the file is cut short?", source=source, line=no)
    ends.check(len(guids), len(entries), no)
    return _assemble(guids, lids, descs, entries, labels)


def parse_fdbs(lines: Iterable[str], source: str = "<input>") -> ForwardingTables:
    """Parse ``opensm.fdbs`` (``dump_ucast_routes`` blocks).  Every entry line
    must be whole (``0xLID : PORT : HOPS : yes``, ``... : No N hop path ...``,
    ``0xLID : PORT : HOPS UNKNOWN``, or ``0xLID : UNREACHABLE`` for a LID
    without a route), so a file cut inside its last line is an error."""
    guids: list[int] = []
    entries: list[tuple[int, int, int]] = []
    ends = _Ends(source)
    no = n_entries = 0
    for no, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s or s.startswith("LID"):
            continue
        if s[0] == "#":
            ends.comment(s, no, bool(guids))
            continue
        ends.content(no)
        m = _FDB_HEAD.match(s)
        if m:
            guids.append(int(m.group(1), 16))
            continue
        m = _FDB_ENTRY.match(s)
        if m and guids:
            lid = int(m.group(1), 16)
            if not 0 < lid <= 0xBFFF:
                raise InputError(f"LID {lid:#x} out of range 1..0xbfff", source=source, line=no)
            n_entries += 1
            if m.group(2) is not None:
                port = int(m.group(2))
                if port > 255:
                    raise InputError(f"port {port} out of range 0..255", source=source, line=no)
                entries.append((len(guids) - 1, lid, port))
            continue
        raise InputError("expected a dump_ucast_routes entry ('0xLID : PORT : HOPS : yes' or "
                         f"'0xLID : UNREACHABLE'), got {excerpt(s)}", source=source, line=no)
    ends.check(len(guids), n_entries, no)
    lids = [0] * len(guids)
    for sw, lid, port in entries:
        if port == 0:
            lids[sw] = lid
    return _assemble(guids, lids, [""] * len(guids), entries)


def parse_tables(lines: list[str], source: str = "<input>") -> ForwardingTables:
    """Detect the format from the first meaningful line and parse."""
    first = next((s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#")),
                 "")
    if first.startswith("{"):
        return parse_json("\n".join(lines), source)
    if first.startswith("dump_ucast_routes"):
        return parse_fdbs(lines, source)
    return parse_lft_dump(lines, source)


def read_tables(path: str | Path) -> ForwardingTables:
    """Read tables in any supported format from a file (gzip or xz compressed too)."""
    from smroute.fileio import read_bytes

    try:
        data = read_bytes(path)
    except OSError as err:
        raise InputError(f"cannot read tables: {err.strerror}", source=str(path)) from None
    if data.lstrip()[:1] == b"{":  # JSON: parsed from the bytes, not split into lines
        return parse_json(data, str(path))
    return parse_tables(data.decode("utf-8", errors="replace").splitlines(), str(path))
