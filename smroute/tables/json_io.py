"""Forwarding tables as JSON (``smroute-lft/1``), written and read with numpy.

The document is what ``json.dumps`` (default separators) makes of::

    {"format": "smroute-lft/1", "max_lid": W - 1,
     "switches": [{"guid": "0x..", "lid": N, "desc": "..", "routes": [[lid, port], ...]}],
     "end": {"switches": S, "entries": E}}

with ``routes`` the LIDs a switch routes (port != 255), ascending, and ``end``
the trailer: how many switches and route entries the document holds (a
reader checks it when present; a document cut anywhere is invalid JSON).

:func:`iter_json` writes it in chunks of switch rows: each route entry is a
fixed 14-byte slot (``[`` LID digits ``, `` port digits ``], ``, unused digit
places zero bytes) gathered from two small per-value tables, and the zero
bytes are squeezed out; no Python loop runs per entry.  The output is byte for
byte ``json.dumps`` of the document, streamed (a chunk at a time, a few MB).

:func:`parse_json` reads a document in exactly that layout with numpy (the
digits of each switch's routes parsed at once, then the switch re-rendered and
compared, so the fast path accepts nothing ``json.loads`` would read
differently); any other valid document (other whitespace, key order, ...)
goes through ``json.loads``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import numpy as np

from smroute.errors import InputError
from smroute.tables.lft import NO_ROUTE, ForwardingTables

__all__ = ["FORMAT", "format_json", "iter_json", "parse_json"]

#: The ``format`` field of the document.
FORMAT = "smroute-lft/1"
#: Route entries formatted per chunk: the writer's scratch memory is about 60
#: bytes per entry (4 MB), small enough to stay in the CPU caches.
_CHUNK_ENTRIES = 1 << 16
_PORT_DIGITS = 3
_LID_DIGITS = 5  # LIDs are 16-bit
_MAX_LID = 0xFFFF
_OPEN, _COMMA, _SPACE, _CLOSE = 0x5B, 0x2C, 0x20, 0x5D


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """Right-aligned ASCII decimal digits of ``values`` (K,) non-negative ints,
    shape ``(K, width)`` uint8, zero bytes before the first digit (``0`` is one
    digit)."""
    v = np.asarray(values, dtype=np.int64)
    out = np.zeros((len(v), width), dtype=np.uint8)
    for k in range(width):  # k-th digit from the right
        digit = (v // 10**k) % 10
        present = (v >= 10**k) | (k == 0)
        out[:, width - 1 - k] = np.where(present, 48 + digit, 0)
    return out


def _slot_tables(width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per LID ``0..width-1`` the bytes ``[<lid>, `` and per port ``0..255`` the
    bytes ``<port>], ``, each zero-padded to 8 bytes and viewed as one uint64
    (``(width,)`` and ``(256,)``), and their lengths without the padding."""
    if width > 10**_LID_DIGITS:
        raise ValueError(f"tables {width} LIDs wide do not fit the JSON writer")
    lid = np.zeros((width, 8), dtype=np.uint8)
    lid[:, 0] = _OPEN
    lid[:, 1:1 + _LID_DIGITS] = _digits(np.arange(width), _LID_DIGITS)
    lid[:, 1 + _LID_DIGITS:] = (_COMMA, _SPACE)
    port = np.zeros((256, 8), dtype=np.uint8)
    port[:, :_PORT_DIGITS] = _digits(np.arange(256), _PORT_DIGITS)
    port[:, _PORT_DIGITS:_PORT_DIGITS + 3] = (_CLOSE, _COMMA, _SPACE)
    return (lid.view(np.uint64).ravel(), port.view(np.uint64).ravel(),
            (lid != 0).sum(axis=1), (port != 0).sum(axis=1))


def _route_bytes(ports: np.ndarray, tables: tuple[np.ndarray, ...]) -> tuple[bytes, np.ndarray]:
    """The routes of the rows of ``ports`` ((R, W) uint8): the bytes
    ``[l, p], [l, p], `` (every entry followed by ``, ``) of all rows, and the
    end offset of each row's bytes in them, shape ``(R,)`` int64."""
    lid_slot, port_slot, lid_len, port_len = tables
    routed = ports != NO_ROUTE
    lids = np.nonzero(routed)[1]
    port = ports[routed]
    slots = np.empty((len(lids), 2), dtype=np.uint64)
    slots[:, 0] = lid_slot[lids]
    slots[:, 1] = port_slot[port]
    size = np.zeros(len(lids) + 1, dtype=np.int64)
    np.cumsum(lid_len[lids] + port_len[port], out=size[1:])
    ends = size[np.cumsum(routed.sum(axis=1))]
    return slots.tobytes().translate(None, b"\0"), ends


def _switch_head(t: ForwardingTables, i: int) -> bytes:
    return (
        f'{{"guid": "{int(t.switch_guid[i]):#018x}", "lid": {int(t.switch_lid[i])}, '
        f'"desc": {json.dumps(t.switch_desc[i])}, "routes": ['
    ).encode()


def iter_json(t: ForwardingTables, *, chunk_entries: int = _CHUNK_ENTRIES) -> Iterator[bytes]:
    """The JSON document of ``t`` in ``bytes`` chunks (a few switches each)."""
    yield f'{{"format": "{FORMAT}", "max_lid": {t.max_lid}, "switches": ['.encode()
    tables = _slot_tables(t.ports.shape[1])
    step = max(1, chunk_entries // max(1, t.ports.shape[1]))
    for r0 in range(0, t.n_switches, step):
        r1 = min(t.n_switches, r0 + step)
        flat, ends = _route_bytes(t.ports[r0:r1], tables)
        parts: list[bytes] = []
        start = 0
        for i in range(r0, r1):
            end = int(ends[i - r0])
            body = flat[start:max(start, end - 2)]  # no ", " after the last
            parts.append((b", " if i else b"") + _switch_head(t, i) + body + b"]}")
            start = end
        yield b"".join(parts)
    entries = int(np.count_nonzero(t.ports != NO_ROUTE))
    yield f'], "end": {{"switches": {t.n_switches}, "entries": {entries}}}}}'.encode()


def format_json(t: ForwardingTables) -> str:
    """The whole document as one string (small tables; :func:`iter_json` streams)."""
    return b"".join(iter_json(t)).decode()


# ----------------------------------------------------------------- reader
_DOC_HEAD = re.compile(rb'\{"format": "smroute-lft/1", "max_lid": (\d+), "switches": \[')
_SW_HEAD = re.compile(
    rb'\{"guid": "(0x[0-9a-fA-F]{1,16})", "lid": (\d+), "desc": ("(?:[^"\\]|\\.)*"), "routes": \['
)


_DOC_END = re.compile(rb'\], "end": \{"switches": (\d+), "entries": (\d+)\}\}')


def _check_end(end: object, switches: int, entries: int) -> None:
    """The trailer ``end`` (``None``: absent, as in documents written before
    it existed) against what the document holds."""
    if end is None:
        return
    if not isinstance(end, dict) or (end.get("switches"), end.get("entries")) != (
            switches, entries):
        raise ValueError(f"the trailer {end!r} does not count the {switches} switches and "
                         f"{entries} entries the document holds (lines lost or spliced?)")


class _NotFast(Exception):
    """The document is not in the writer's exact layout."""


def _parse_numbers(text: bytes) -> np.ndarray:
    """All decimal numbers in ``text`` (digits, brackets, commas, spaces only),
    in order, shape ``(K,)`` int64."""
    b = np.frombuffer(text, dtype=np.uint8)
    isd = np.zeros(len(b) + 2, dtype=np.int8)
    isd[1:-1] = (b >= 48) & (b <= 57)
    edge = np.diff(isd)
    starts, ends = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)
    longest = int((ends - starts).max()) if len(starts) else 0
    if longest > 9:
        raise _NotFast
    vals = np.zeros(len(starts), dtype=np.int64)
    for k in range(longest):  # k-th digit from the right
        pos = ends - 1 - k
        has = pos >= starts
        vals += np.where(has, b[np.maximum(pos, 0)].astype(np.int64) - 48, 0) * 10**k
    return vals


def _parse_fast(text: bytes) -> ForwardingTables:
    m = _DOC_HEAD.match(text)
    if not m:
        raise _NotFast
    width = int(m.group(1)) + 1
    if width > _MAX_LID + 1:
        raise _NotFast
    tables = _slot_tables(width)
    guids: list[int] = []
    lids: list[int] = []
    descs: list[str] = []
    ports = np.full((0, width), NO_ROUTE, dtype=np.uint8)
    rows: list[np.ndarray] = []
    top = 0  # highest LID listed in a route
    pos = m.end()
    if text.startswith(b"]}", pos):
        pos += 2
    else:
        while True:
            sw = _SW_HEAD.match(text, pos)
            if not sw:
                raise _NotFast
            guids.append(int(sw.group(1), 16))
            lids.append(int(sw.group(2)))
            if lids[-1] > _MAX_LID:
                raise _NotFast
            descs.append(json.loads(sw.group(3)))
            row = np.full(width, NO_ROUTE, dtype=np.uint8)
            pos = sw.end()
            if text.startswith(b"]}", pos):
                pos += 2
            else:
                end = text.find(b"]]}", pos)
                if end < 0:
                    raise _NotFast
                body = text[pos:end + 1]
                vals = _parse_numbers(body).reshape(-1, 2) if body else None
                if vals is None or len(vals) == 0:
                    raise _NotFast
                lid, port = vals[:, 0], vals[:, 1]
                if int(lid.max()) >= width or int(port.max()) > 255:
                    raise _NotFast
                row[lid] = port
                top = max(top, int(lid.max()))
                # the fast path accepts only what the writer makes of these routes
                flat, _ = _route_bytes(row[None, :], tables)
                if flat[:-2] != body:
                    raise _NotFast
                pos = end + 3
            rows.append(row)
            if text.startswith(b", ", pos):
                pos += 2
                continue
            if text.startswith(b"]}", pos):
                pos += 2
                break
            end_m = _DOC_END.match(text, pos)
            if end_m:
                pos = end_m.end()
                _check_end({"switches": int(end_m.group(1)), "entries": int(end_m.group(2))},
                           len(rows), int(sum(int(np.count_nonzero(r != NO_ROUTE))
                                              for r in rows)))
                break
            raise _NotFast
    if text[pos:].strip():
        raise _NotFast
    if rows:
        ports = np.stack(rows)
    return _tables(guids, lids, descs, ports, top)


def _tables(
    guids: list[int], lids: list[int], descs: list[str], ports: np.ndarray, top: int
) -> ForwardingTables:
    """Tables of width ``max(top, switch LID) + 1`` (``top``: the highest LID
    listed in a route), as the other readers make them."""
    width = max(top, max(lids, default=0)) + 1
    if width > ports.shape[1]:
        wide = np.full((ports.shape[0], width), NO_ROUTE, dtype=np.uint8)
        wide[:, :ports.shape[1]] = ports
        ports = wide
    return ForwardingTables(
        switch_guid=np.array(guids, dtype=np.uint64),
        switch_lid=np.array(lids, dtype=np.int64),
        switch_desc=tuple(descs),
        ports=np.ascontiguousarray(ports[:, :width]),
    )


def _parse_any(text: str | bytes) -> ForwardingTables:
    doc = json.loads(text)
    if doc.get("format") != FORMAT:
        raise ValueError(f"not an {FORMAT} document")
    guids: list[int] = []
    lids: list[int] = []
    descs: list[str] = []
    entries: list[np.ndarray] = []
    for i, sw in enumerate(doc["switches"]):
        guids.append(int(sw["guid"], 16))
        lids.append(int(sw["lid"]))
        descs.append(str(sw.get("desc", "")))
        r = np.array(sw["routes"], dtype=np.int64)
        if r.size == 0:
            r = r.reshape(0, 2)
        if r.ndim != 2 or r.shape[1] != 2:
            raise ValueError(f"switch {i}: routes must be [lid, port] pairs")
        entries.append(np.column_stack([np.full(len(r), i, dtype=np.int64), r]))
    e = np.concatenate(entries) if entries else np.zeros((0, 3), dtype=np.int64)
    if len(e) and (e[:, 1].min() < 0 or e[:, 1].max() > _MAX_LID or e[:, 2].min() < 0
                   or e[:, 2].max() > 255):
        raise ValueError(f"a route has a LID outside 0..{_MAX_LID} or a port outside 0..255")
    if any(not 0 <= lid <= _MAX_LID for lid in lids):
        raise ValueError(f"a switch LID is outside 0..{_MAX_LID}")
    _check_end(doc.get("end"), len(guids), len(e))
    top = int(e[:, 1].max()) if len(e) else 0
    ports = np.full((len(guids), max(top, max(lids, default=0)) + 1), NO_ROUTE, dtype=np.uint8)
    ports[e[:, 0], e[:, 1]] = e[:, 2]
    return _tables(guids, lids, descs, ports, top)


def parse_json(text: str | bytes, source: str = "<input>") -> ForwardingTables:
    """Tables from an ``smroute-lft/1`` document (text, or UTF-8 bytes as read
    from a file); :class:`InputError` naming ``source`` if it is not one."""
    try:
        try:
            return _parse_fast(text if isinstance(text, bytes) else text.encode())
        except (_NotFast, UnicodeError, ValueError):
            return _parse_any(text)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as err:
        raise InputError(f"bad JSON tables: {err}", source=source) from None
