"""Topology text in the form ``ibnetdiscover`` prints it, read with numpy at once.

:func:`bulk_records` collects the same records as the line loop
(:func:`~smroute.fabric.ibnetdiscover.records.parse_records`) from text whose
every line is in the form ``ibnetdiscover`` and smroute's generators print:
blank lines, comments, id lines without comments, record heads with their
comment tail and port lines with theirs, separators being any run of blanks
and tabs.  It works on the whole text as one byte array: the line ends, then
per line form the fields one step at a time for every line of that form
(a literal, a run of blanks, a decimal or hex number, the description up to
the line's last quote), then the checks of the line loop as array
comparisons.  Anything else -- another line form (ibdiagnet's labels,
``[ext N]``, ``-g`` grouping, ``-f`` full info), noise, CR line ends, a check
that fails -- returns ``None``: the line loop then reads the text and
explains it, so errors and warnings are those of the line loop.
"""

from __future__ import annotations

import numpy as np

from smroute.fabric.ibnetdiscover.links import Columns
from smroute.fabric.ibnetdiscover.records import NodeRecords, PortLines
from smroute.fabric.ibnetdiscover.text import MAX_UNICAST_LID, SPEED_CODE, WIDTHS, Skipper
from smroute.fabric.model.base import NodeType

__all__ = ["bulk_records", "records_of"]

_WS = np.zeros(256, dtype=np.int64)
_WS[[9, 32]] = 1
#: a remote node's kind letter: ``[A-Za-z?]``
_LETTER = np.zeros(256, dtype=bool)
_LETTER[65:91] = _LETTER[97:123] = _LETTER[63] = True
_LONGEST_RUN = 64  # blanks in a row read here
_PAD = b"\0" * 96  # past the text's end: windows of numbers never leave the array
_Q, _LB, _PAREN, _HASH = ord('"'), ord("["), ord("("), ord("#")
# line forms
_BLANK, _COMMENT, _ID, _HEAD, _PORT = 0, 1, 2, 3, 4
_ID_KEYS = (b"vendid", b"devid", b"sysimgguid", b"switchguid", b"caguid", b"rtguid")
# the longer first, as the grammar's alternatives ("12x" before "1x", "FDR10" before "FDR")
_WIDTH_TOKENS = tuple((w.encode(), v) for w, v in sorted(WIDTHS.items(), key=lambda x: -len(x[0])))
_SPEED_TOKENS = tuple((s.encode(), v) for s, v in sorted(SPEED_CODE.items(),
                                                         key=lambda x: -len(x[0])))


class _Other(Exception):
    """The text is not in the form read here (or a check fails)."""


def _need(ok: np.ndarray | bool) -> None:
    if not np.all(ok):
        raise _Other


def _digit_values(x: np.ndarray, hexa: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(is a digit, its value)`` of ASCII bytes ``x`` (``hexa``: hex digits, either case)."""
    d = x - np.uint8(48)
    dec = d < 10
    if not hexa:
        return dec, d
    letter = (x | np.uint8(32)) - np.uint8(97)
    return dec | (letter < 6), np.where(dec, d, letter + np.uint8(10))


class _Scan:
    """Steps over one field at a time of many lines: ``p`` holds each line's position."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        self._windows: dict[int, np.ndarray] = {}

    def window(self, width: int) -> np.ndarray:
        """Row ``i``: the ``width`` bytes from ``i`` (a view, no copy)."""
        w = self._windows.get(width)
        if w is None:
            w = self._windows[width] = np.lib.stride_tricks.sliding_window_view(self.a, width)
        return w

    def has(self, p: np.ndarray, s: bytes) -> np.ndarray:
        ok = self.a[p] == s[0]
        for k in range(1, len(s)):
            ok &= self.a[p + k] == s[k]
        return ok

    def lit(self, p: np.ndarray, s: bytes) -> np.ndarray:
        _need(self.has(p, s))
        return p + len(s)

    def ws(self, p: np.ndarray, least: int = 0) -> np.ndarray:
        """Past a run of blanks and tabs (``least``: at least one); runs longer
        than :data:`_LONGEST_RUN` are left to the line loop (one step per blank)."""
        q = p.copy()
        for _ in range(_LONGEST_RUN + 1):
            step = _WS[self.a[q]]
            if not step.any():
                break
            q = q + step
        else:
            raise _Other
        if least:
            _need(q > p)
        return q

    def number(self, p: np.ndarray, digits: int, hexa: bool = False) -> tuple[np.ndarray,
                                                                              np.ndarray]:
        """``(values, end)`` of 1..``digits`` decimal (``hexa``: hex) digits at ``p``,
        the next character not a digit (a possessive ``[0-9]{1,digits}+``)."""
        if not len(p):
            return np.zeros(0, dtype=np.uint64 if hexa else np.int64), p
        isd, dv = _digit_values(self.window(digits + 1)[p], hexa)
        n = np.argmin(isd, axis=1)  # the first non-digit
        _need((n > 0) & ~isd[np.arange(len(p)), n])
        # the digits left-aligned in ``digits`` columns, zeros after them
        dv = np.where(np.arange(digits + 1) < n[:, None], dv, 0).astype(np.uint8)[:, :digits]
        if hexa:  # 16 nibbles -> 8 big-endian bytes -> uint64, shifted right
            packed = (dv[:, 0::2] << 4) | dv[:, 1::2]
            word = packed.view(">u8")[:, 0].astype(np.uint64)
            return word >> (4 * (digits - n)).astype(np.uint64), p + n
        left = dv.astype(np.int64) @ (10 ** np.arange(digits - 1, -1, -1))
        return left // 10 ** (digits - n), p + n

    def hexa(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.number(p, 16, hexa=True)

    def alternatives(self, p: np.ndarray, tokens: tuple[tuple[bytes, int], ...]) -> tuple[
            np.ndarray, np.ndarray]:
        """The first of ``tokens`` at each position: ``(its value, the end)``."""
        val = np.zeros(len(p), dtype=np.int64)
        end = np.full(len(p), -1, dtype=np.int64)
        for tok, v in tokens:
            hit = (end < 0) & self.has(p, tok)
            val[hit] = v
            end[hit] = p[hit] + len(tok)
        _need(end >= 0)
        return val, end


class _Lines:
    """The text as bytes, its lines and the position of each line's last quote."""

    def __init__(self, data: bytes, ascii_text: str | None = None) -> None:
        body = data if data.endswith(b"\n") else data + b"\n"
        self.data = body
        self.ascii = ascii_text  # the text itself when it is ASCII
        self.a = np.frombuffer(body + _PAD, dtype=np.uint8)
        text = self.a[:len(body)]
        self.end = np.flatnonzero(text == 10)
        # no CR, form feed or other control character: each would end or strip a line
        _need(np.count_nonzero(text < 32) == len(self.end) + body.count(b"\t"))
        start = np.empty(len(self.end), dtype=np.int64)
        start[:1] = 0
        start[1:] = self.end[:-1] + 1
        self.quotes = np.flatnonzero(text == _Q)
        self.scan = _Scan(self.a)
        self.start = self.scan.ws(start)  # lines are read stripped

    def last_quote(self, rows: np.ndarray, after: np.ndarray) -> np.ndarray:
        """The last ``"`` of lines ``rows``, which must be at or after ``after``."""
        k = np.searchsorted(self.quotes, self.end[rows]) - 1
        _need(k >= 0)
        q = self.quotes[np.maximum(k, 0)]
        _need(q >= after)
        return q

    def text(self, lo: np.ndarray, hi: np.ndarray) -> list[str]:
        if self.ascii is not None:  # byte offsets are character offsets
            s = self.ascii
            return [s[i:j] for i, j in zip(lo.tolist(), hi.tolist(), strict=True)]
        d = self.data
        return [d[i:j].decode() for i, j in zip(lo.tolist(), hi.tolist(), strict=True)]

    def at_end(self, rows: np.ndarray, p: np.ndarray) -> None:
        _need(self.scan.ws(p) == self.end[rows])


def _link_tail(t: _Lines, rows: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
    """``"<desc>" lid L <width><speed>`` to the line end, ``p`` at the desc's
    opening quote's end: ``(remote LID, width, speed)``."""
    s = t.scan
    q = t.last_quote(rows, p)
    p = s.ws(q + 1, 1)
    p = s.ws(s.lit(p, b"lid"), 1)
    rlid, p = s.number(p, 6)
    width, p = s.alternatives(s.ws(p, 1), _WIDTH_TOKENS)
    speed, p = s.alternatives(s.ws(p), _SPEED_TOKENS)
    t.at_end(rows, p)
    return rlid, width, speed


def _remote(t: _Lines, p: np.ndarray) -> tuple[np.ndarray, ...]:
    """``"X-<guid>"[rp]`` and an optional ``(<remote port guid>)`` then the
    ``#``: ``(kind letter, guid, port, port guid or -1 as None, has it, position)``."""
    s, a = t.scan, t.a
    p = s.lit(p, b'"')
    rk = a[p]
    _need(_LETTER[rk])
    rg, p = s.hexa(s.lit(p + 1, b"-"))
    rp, p = s.number(s.lit(p, b'"['), 6)
    p = s.lit(p, b"]")
    _need(a[p] != _LB)  # [ext N]
    p = s.ws(p)
    given = a[p] == _PAREN
    rpg = np.zeros(len(p), dtype=np.uint64)
    g = np.flatnonzero(given)
    if len(g):
        v, e = s.hexa(s.ws(p[g] + 1))
        rpg[g] = v
        p[g] = s.lit(s.ws(e), b")")
    p = s.ws(s.lit(s.ws(p), b"#"))
    return rk, rg, rp, rpg, given, p


def _port_lines(t: _Lines, rows: np.ndarray, switch: bool) -> dict[str, np.ndarray]:
    """The fields of port lines ``rows``, all of a switch's records or all of a CA's."""
    s, a = t.scan, t.a
    pnum, p = s.number(t.start[rows] + 1, 6)
    p = s.lit(p, b"]")
    _need(a[p] != _LB)  # [ext N]
    p = s.ws(p)
    n = len(rows)
    own = np.zeros(n, dtype=np.uint64)
    lid = np.zeros(n, dtype=np.int64)
    lmc = np.zeros(n, dtype=np.int64)
    if switch:
        _need(a[p] != _PAREN)  # ibdiagnet's port label
    else:
        own, p = s.hexa(s.ws(s.lit(p, b"(")))
        p = s.ws(s.lit(s.ws(p), b")"))
        _need(a[p] != _PAREN)  # a label, then the port GUID
    rk, rg, rp, rpg, given, p = _remote(t, p)
    if switch:
        p = s.lit(p, b'"')
    else:
        p = s.ws(s.lit(p, b"lid"), 1)
        lid, p = s.number(p, 6)
        p = s.ws(s.lit(s.ws(p, 1), b"lmc"), 1)
        lmc, p = s.number(p, 6)
        p = s.lit(s.ws(p, 1), b'"')
    rlid, width, speed = _link_tail(t, rows, p)
    _need((lid <= 0xFFFF) & (lmc <= 7) & (rp >= 1) & (rp <= 255) & (rg != 0)
          & (rlid <= MAX_UNICAST_LID))
    return {"port": pnum, "own": own, "lid": lid, "lmc": lmc, "rk": rk, "rg": rg, "rp": rp,
            "rpg": rpg, "given": given, "width": width, "speed": speed}


_Heads = tuple[np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray, np.ndarray]


def _heads(t: _Lines, rows: np.ndarray) -> _Heads:
    """The record heads ``rows``: kind, port count, GUID, description, port 0 LID and LMC."""
    s, a = t.scan, t.a
    st = t.start[rows]
    n = len(rows)
    kind = np.zeros(n, dtype=np.int64)
    word = np.zeros(n, dtype=np.int64)
    letter = np.zeros(n, dtype=np.int64)
    for w, k, ch in ((b"Switch", NodeType.SWITCH, "S"), (b"Hca", NodeType.CA, "H"),
                     (b"Ca", NodeType.CA, "H"), (b"Rt", NodeType.ROUTER, "R")):
        hit = (word == 0) & s.has(st, w)
        kind[hit], word[hit], letter[hit] = int(k), len(w), ord(ch)
    _need(word > 0)
    nports, p = s.number(s.ws(st + word), 6)
    p = s.lit(s.ws(p), b'"')
    _need(a[p] == letter)  # S- for a switch, H- for a CA, R- for a router
    guid, p = s.hexa(s.lit(p + 1, b"-"))
    p = s.lit(s.ws(s.lit(s.ws(s.lit(p, b'"')), b"#")), b'"')
    q = t.last_quote(rows, p)
    desc = t.text(p, q)
    lid = np.zeros(n, dtype=np.int64)
    lmc = np.zeros(n, dtype=np.int64)
    sw = np.flatnonzero(kind == int(NodeType.SWITCH))
    other = np.flatnonzero(kind != int(NodeType.SWITCH))
    t.at_end(rows[other], q[other] + 1)
    if len(sw):
        r = s.ws(q[sw] + 1, 1)
        enhanced = s.has(r, b"enhanced")
        _need(enhanced | s.has(r, b"base"))
        r = s.ws(s.lit(s.ws(r + np.where(enhanced, 8, 4), 1), b"port"), 1)
        r = s.ws(s.lit(s.ws(s.lit(r, b"0"), 1), b"lid"), 1)
        lid[sw], r = s.number(r, 6)
        lmc[sw], r = s.number(s.ws(s.lit(s.ws(r, 1), b"lmc"), 1), 6)
        t.at_end(rows[sw], r)
    _need((nports >= 1) & (nports <= 255) & (guid != 0) & (lid <= 0xFFFF) & (lmc <= 7))
    return kind, nports, guid, desc, lid, lmc


def _id_lines(t: _Lines, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(key index into _ID_KEYS, value, port GUID of switchguid= or 0)``."""
    s, a = t.scan, t.a
    st = t.start[rows]
    key = np.full(len(rows), -1, dtype=np.int64)
    for k, w in enumerate(_ID_KEYS):
        key[(key < 0) & s.has(st, w)] = k
    _need(key >= 0)
    klen = np.array([len(w) for w in _ID_KEYS])[key]
    p = s.lit(s.ws(s.lit(s.ws(st + klen), b"=")), b"0x")
    val, p = s.hexa(p)
    p = s.ws(p)
    extra = np.zeros(len(rows), dtype=np.uint64)
    paren = np.flatnonzero((a[p] == _PAREN) & (key == 3))
    if len(paren):
        v, e = s.hexa(s.ws(p[paren] + 1))
        extra[paren] = v
        p[paren] = s.lit(s.ws(e), b")")
    t.at_end(rows, p)
    _need((key >= 2) | (val <= 0xFFFFFFFF))
    return key, val, extra


def _classify(t: _Lines) -> np.ndarray:
    """Each line's form, by its first characters."""
    s, a = t.scan, t.a
    st = t.start
    first = a[st]
    form = np.full(len(st), -1, dtype=np.int64)
    form[t.end == st] = _BLANK
    form[first == _HASH] = _COMMENT
    form[first == _LB] = _PORT
    for words, what in (((b"Switch", b"Ca", b"Hca", b"Rt"), _HEAD), (_ID_KEYS, _ID)):
        initial = np.zeros(256, dtype=bool)
        initial[[w[0] for w in words]] = True
        c = np.flatnonzero(initial[first] & (form < 0))
        hit = np.zeros(len(c), dtype=bool)
        for w in words:
            hit |= s.has(st[c], w)
        form[c[hit]] = what
    _need(form >= 0)
    return form


def bulk_records(text: str, skip: Skipper) -> Columns | None:
    """The records of ``text`` as :func:`~smroute.fabric.ibnetdiscover.records.parse_records`
    collects them, as arrays (:func:`records_of` makes its lists of them), or
    ``None`` when a line is in another form or fails a check."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text:
        return None
    if not text.isascii():
        try:
            data = text.encode()
        except UnicodeEncodeError:
            return None
        if b"\xc2\x85" in data or b"\xe2\x80\xa8" in data or b"\xe2\x80\xa9" in data:
            return None  # line separators of str.splitlines
    else:
        data = text.encode("ascii")
    try:
        return _records(_Lines(data, text if text.isascii() else None), skip)
    except _Other:
        return None


def _records(t: _Lines, skip: Skipper) -> Columns:
    form = _classify(t)
    sig = np.flatnonzero(form != _COMMENT)  # comments change nothing
    f = form[sig]
    pos = np.arange(len(f))
    head_at = np.flatnonzero(f == _HEAD)
    _need(len(head_at) > 0)
    head_no = np.cumsum(f == _HEAD) - 1
    # id lines: each run of them right before a record head
    big = len(f)
    nxt = np.minimum.accumulate(np.where(f != _ID, pos, big)[::-1])[::-1]
    id_at = np.flatnonzero(f == _ID)
    _need(nxt[id_at] < big)
    _need(f[np.minimum(nxt[id_at], big - 1)] == _HEAD)
    id_head = head_no[nxt[id_at]] if len(id_at) else np.zeros(0, dtype=np.int64)
    # port lines: after a record head, no blank line since
    last_head = np.maximum.accumulate(np.where(f == _HEAD, pos, -1))
    last_blank = np.maximum.accumulate(np.where(f == _BLANK, pos, -1))
    port_at = np.flatnonzero(f == _PORT)
    _need((last_head[port_at] >= 0) & (last_head[port_at] > last_blank[port_at]))
    port_rec = head_no[last_head[port_at]]

    h = _heads(t, sig[head_at])
    kind, nports, guid = h[0], h[1], h[2]
    n_nodes = len(kind)
    sg = np.sort(guid)
    _need(sg[1:] != sg[:-1])

    # id lines
    vendor = np.zeros(n_nodes, dtype=np.uint64)
    device = np.zeros(n_nodes, dtype=np.uint64)
    sysimg = np.zeros(n_nodes, dtype=np.uint64)
    pguid = np.zeros(n_nodes, dtype=np.uint64)
    if len(id_at):
        key, val, extra = _id_lines(t, sig[id_at])
        slot = id_head * 4 + np.minimum(key, 3)  # one of each, one GUID line
        ss = np.sort(slot)
        _need(ss[1:] != ss[:-1])
        _need((key == 3) | (extra == 0))
        for k, dst in ((0, vendor), (1, device), (2, sysimg)):
            m = key == k
            dst[id_head[m]] = val[m]
        g = key >= 3
        gh = id_head[g]
        want = np.array([0, 0, 0, int(NodeType.SWITCH), int(NodeType.CA),
                         int(NodeType.ROUTER)])[key[g]]
        _need((kind[gh] == want) & (guid[gh] == val[g]))
        pguid[gh] = extra[g]

    # port lines of switches and of CAs/routers
    rec_switch = kind[port_rec] == int(NodeType.SWITCH)
    n_ports = len(port_at)
    cols: dict[str, np.ndarray] = {}
    for switch in (True, False):
        sel = np.flatnonzero(rec_switch == switch)
        if not len(sel):
            continue
        got = _port_lines(t, sig[port_at[sel]], switch)
        for name, v in got.items():
            if name not in cols:
                cols[name] = np.zeros(n_ports, dtype=v.dtype)
            cols[name][sel] = v
    if n_ports:
        pn = cols["port"]
        _need((pn >= 1) & (pn <= nports[port_rec]))
        sk = np.sort(port_rec * 256 + pn)
        _need(sk[1:] != sk[:-1])

    skip.started = True
    skip.total = len(form)
    kind, nports, guid, desc, lid, lmc = h
    sw = kind == int(NodeType.SWITCH)
    zero = np.zeros(0, dtype=np.int64)
    u0 = np.zeros(0, dtype=np.uint64)
    return Columns(
        kind=kind, guid=guid, nports=nports, desc=desc, sysimg=sysimg, vendor=vendor,
        device=device, p0_guid=np.where(sw, pguid, 0).astype(np.uint64),
        p0_lid=np.where(sw, lid, 0), p0_lmc=np.where(sw, lmc, 0), node_line=sig[head_at] + 1,
        node=port_rec, port=cols.get("port", zero), own=cols.get("own", u0),
        lid=cols.get("lid", zero), lmc=cols.get("lmc", zero), width=cols.get("width", zero),
        speed=cols.get("speed", zero), rkind=cols.get("rk", np.zeros(0, dtype=np.uint8)),
        rguid=cols.get("rg", u0), rport=cols.get("rp", zero), rpguid=cols.get("rpg", u0),
        given=cols.get("given", np.zeros(0, dtype=bool)), line=sig[port_at] + 1)


def records_of(c: Columns) -> tuple[NodeRecords, PortLines, dict[int, int], dict[int, int]]:
    """The records as the line loop's lists and lookups (node GUID -> node,
    node * 256 + port -> port line)."""
    kinds = {int(k): k for k in NodeType}
    guids = c.guid.tolist()
    nodes = NodeRecords(
        kind=[kinds[k] for k in c.kind.tolist()], guid=guids, nports=c.nports.tolist(),
        desc=list(c.desc), sysimg=c.sysimg.tolist(), vendor=c.vendor.tolist(),
        device=c.device.tolist(), line=c.node_line.tolist(),
        p0=list(zip(c.p0_guid.tolist(), c.p0_lid.tolist(), c.p0_lmc.tolist(), strict=True)))
    rpg = [v if g else -1 for v, g in zip(c.rpguid.tolist(), c.given.tolist(), strict=True)]
    ports = PortLines(
        node=c.node.tolist(), port=c.port.tolist(), guid=c.own.tolist(), lid=c.lid.tolist(),
        lmc=c.lmc.tolist(), width=c.width.tolist(), speed=c.speed.tolist(),
        rkind=list(c.rkind.tobytes().decode()), rguid=c.rguid.tolist(),
        rport=c.rport.tolist(), rpguid=rpg, line=c.line.tolist())
    by_guid = dict(zip(guids, range(len(guids)), strict=True))
    where = dict(zip((c.node * 256 + c.port).tolist(), range(len(c.node)), strict=True))
    return nodes, ports, by_guid, where
