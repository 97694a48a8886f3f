"""Pieces shared by the ``ibnetdiscover`` text parsers (topology text, ports report).

* :class:`TopologyError` (the one error they raise) and :class:`ParseWarning`
  (a line they skipped);
* reading a capture as operators keep it: UTF-8 (a BOM is dropped) or UTF-16
  with a BOM (what a Windows shell's ``>`` writes), ``\\r\\n`` line ends;
* **noise** in a capture: diagnostics that libibmad / infiniband-diags print on
  stderr and that end up in the file (``src/query_smp.c:195; umad (...) bad
  status 110; Connection timed out``, ``ibwarn: [1234] ...``, ``ibnetdiscover:
  iberror: ...``) are skipped anywhere; other text (terminal prompts, ``script``
  headers) is skipped only before the first record and after the last one
  (:class:`Skipper`); ``strict`` makes every skipped line an error;
* the LID check of both parsers (:func:`check_lids`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from smroute.errors import InputError
from smroute.fabric.model.base import SPEEDS, NodeType
from smroute.fileio import read_bytes
from smroute.text import excerpt  # re-exported: the one quoting of input text

__all__ = [
    "HEX",
    "KIND_NAME",
    "NUM",
    "SPEED_CODE",
    "WIDTHS",
    "ParseWarning",
    "Skipper",
    "TopologyError",
    "NOISE_MAX_LINES",
    "check_lids",
    "check_peer",
    "as_text",
    "check_range",
    "excerpt",
    "is_diagnostic",
    "read_text",
    "read_text_lines",
    "strip_bom",
    "with_bom_stripped",
]

# Grammar pieces of both formats (possessive: no backtracking).
HEX = r"([0-9a-fA-F]{1,16}+)"
NUM = r"([0-9]{1,6}+)"
WIDTHS = {"1x": 1, "2x": 2, "4x": 4, "8x": 8, "12x": 12, "??": 0}
SPEED_CODE = {name: i for i, name in enumerate(SPEEDS)}
KIND_NAME = {NodeType.SWITCH: "switch", NodeType.CA: "CA", NodeType.ROUTER: "router"}


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


def check_range(value: int, lo: int, hi: int, what: str, no: int, source: str) -> int:
    """``value`` if in ``lo..hi``, else a :class:`TopologyError` at line ``no``."""
    if not lo <= value <= hi:
        raise TopologyError(
            f"{what} {value} out of range", source=source, line=no, expected=f"{lo}..{hi}"
        )
    return value


def as_text(raw: object) -> str:
    """A line given as ``bytes`` (decoded as UTF-8) or another object (``str()``)."""
    if isinstance(raw, bytes | bytearray):
        return raw.decode("utf-8", "replace")
    return str(raw)


@dataclass(frozen=True)
class ParseWarning:
    """A line a parser skipped (or, in the ports report, a link it dropped).

    ``str()`` reads ``SOURCE:LINE: warning: skipped REASON: 'TEXT'`` with the
    text cut and escaped like error messages.  ``lines``: the lines it stands
    for (the last warning of a long run counts the ones not shown).
    """

    source: str
    line: int | None
    text: str
    reason: str
    lines: int = 1

    def __str__(self) -> str:
        where = self.source + (f":{self.line}" if self.line is not None else "")
        tail = f": {excerpt(self.text, 80)}" if self.text else ""
        return f"{where}: warning: skipped {self.reason}{tail}"


# --------------------------------------------------------------- reading
_BOM = "\ufeff"


def strip_bom(first: object) -> object:
    """A first line without its UTF-8 byte order mark (``str`` or ``bytes``)."""
    if isinstance(first, str):
        return first[1:] if first.startswith(_BOM) else first
    if isinstance(first, bytes | bytearray) and first.startswith(b"\xef\xbb\xbf"):
        return first[3:]
    return first


def with_bom_stripped(items: Iterable[object]) -> Iterator[object]:
    """``items`` with a BOM dropped from the first one."""
    it = iter(items)
    for first in it:
        yield strip_bom(first)
        break
    yield from it


def read_text_lines(path: str | os.PathLike[str]) -> list[str]:
    """Lines of a capture (:func:`read_text`); any line end."""
    return read_text(path).splitlines()


def read_text(path: str | os.PathLike[str]) -> str:
    """The text of a capture (gzip or xz compressed too: :func:`smroute.fileio.read_bytes`):
    UTF-16 when it starts with a UTF-16 BOM, else UTF-8
    (a UTF-8 BOM dropped); undecodable bytes become U+FFFD.

    A missing or unreadable file is an :class:`InputError` naming it.
    """
    try:
        data = read_bytes(path)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=os.fspath(path)) from exc
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16", "replace")
    else:
        if b"\x00" in data[:65536]:
            what = "gzip-compressed" if data.startswith(b"\x1f\x8b") else "binary"
            raise InputError(f"not a text file ({what} data)", source=os.fspath(path))
        text = data.decode("utf-8", "replace")
    if text.startswith(_BOM):
        text = text[1:]
    return text


# ----------------------------------------------------------------- noise
#: What libibmad / libibumad / infiniband-diags print on stderr: ``file.c:NNN;``
#: (libibmad's IBWARN with source position), ``ibwarn: [pid] fn: ...`` and
#: ``ibpanic:``/``iberror:``/``ibdebug:``/``ibinfo:``, optionally after the
#: program's name (``ibnetdiscover: iberror: failed: ...``).
_DIAGNOSTIC = re.compile(
    r"(?:[\w.+-]{1,64}+:\s?)?(?:ib(?:warn|error|panic|debug|info)|libibumad|libibmad)\b"
    r"|[\w./+-]{0,200}\.[ch]:[0-9]{1,7}+[;:]",
    re.ASCII,
)


def is_diagnostic(line: str) -> bool:
    """True for a libibmad/infiniband-diags diagnostic line (stripped)."""
    return _DIAGNOSTIC.match(line) is not None


#: Skipped lines shown one by one; the rest are counted in one warning.
NOISE_SHOWN = 10
#: More skipped lines than this is an error, whatever the input's size.
NOISE_MAX_LINES = 10_000
#: More skipped lines than this fraction of the input (and than
#: NOISE_MIN_LINES) is an error.
NOISE_MAX_FRACTION = 0.10
NOISE_MIN_LINES = 100


class Skipper:
    """Decides about lines that are not part of the format.

    * :meth:`diagnostic`: a diagnostic line, skipped anywhere (a warning);
    * :meth:`unknown`: other text.  Before the first record it is skipped (a
      warning).  After a record it is held back: if more record content follows
      (:meth:`content` is called), the first such line is an error (text
      *between* records); at the end (:meth:`finish`) it was text after the last
      record and is skipped (a warning).

    With ``strict`` every line that would be skipped is a :class:`TopologyError`
    instead.  Warnings are kept in line order and handed to ``out`` by
    :meth:`flush` (also when parsing fails): the first :data:`NOISE_SHOWN`
    each, then one warning counting the rest.  Noise has a budget: more than
    :data:`NOISE_MAX_LINES` skipped lines, or (at :meth:`finish`, once the
    parser set :attr:`total` lines) more than :data:`NOISE_MIN_LINES` that are
    over :data:`NOISE_MAX_FRACTION` of the input, is a :class:`TopologyError`.
    """

    def __init__(
        self, source: str, strict: bool, out: list[ParseWarning] | None, expected: str
    ) -> None:
        self.source = source
        self.strict = strict
        self.out = out
        self.expected = expected
        self.started = False
        self.held: list[tuple[int, str]] = []
        self.warnings: list[ParseWarning] = []
        self.first_skipped: tuple[int, str] | None = None
        self.count = 0  # lines skipped so far
        self.total = 0  # lines in the input (set by the parser at its end)

    def error(self, msg: str, no: int | None, expected: str | None = None) -> TopologyError:
        return TopologyError(msg, source=self.source, line=no, expected=expected)

    def note(self, no: int, line: str, reason: str) -> None:
        """A warning about line ``no`` (``reason`` completes "skipped ...")."""
        self._skip(no, line, reason)

    def _skip(self, no: int, line: str, reason: str) -> None:
        if self.first_skipped is None:
            self.first_skipped = (no, line)
        self.count += 1
        if len(self.warnings) < NOISE_SHOWN:
            self.warnings.append(ParseWarning(self.source, no, line, reason))
        self._budget(no)

    def _budget(self, no: int | None) -> None:
        n = self.count + len(self.held)
        if n > NOISE_MAX_LINES:
            raise self._too_noisy(n, no, f"at most {NOISE_MAX_LINES} skipped lines")

    def _too_noisy(self, n: int, no: int | None, bound: str) -> TopologyError:
        first = self.first_skipped or (self.held[0] if self.held else None)
        where = f" (the first on line {first[0]})" if first else ""
        self.warnings = []
        if first and _SUBNET_LST(first[1]):
            return self._subnet_lst(n, where, no)
        return self.error(f"{n} lines are not ibnetdiscover output{where}: too much "
                          "other text to trust the rest", no,
                          f"{bound}; remove the other text")

    def _subnet_lst(self, n: int, where: str, no: int | None) -> TopologyError:
        """The error for a subnet .lst file given as a topology."""
        return self.error(
            f"{n} lines are not ibnetdiscover output{where}: this is a subnet .lst file "
            "(a line per link, as ibdiagnet 1.x and OpenSM's opensm-subnet.lst write them), "
            "which smroute does not read", no,
            "ibnetdiscover output: run ibnetdiscover > FILE, or take ibdiagnet2's "
            "ibdiagnet2.ibnetdiscover")

    def diagnostic(self, no: int, line: str) -> None:
        if self.strict:
            raise self.error(
                f"diagnostic line {excerpt(line)} (skipped unless strict)", no, self.expected
            )
        self._skip(no, line, "a diagnostic line")

    def unknown(self, no: int, line: str) -> None:
        if self.strict:
            raise self.error(f"unrecognised line {excerpt(line)}", no, self.expected)
        if not self.started:
            self._skip(no, line, "text before the first record")
        else:
            self.held.append((no, line))
            self._budget(no)

    def content(self) -> None:
        """Record content follows: held-back text was between records."""
        self.started = True
        if self.held:
            no, line = self.held[0]
            raise self.error(
                f"unrecognised line {excerpt(line)} between records", no, self.expected
            )

    def finish(self) -> None:
        """The end of the input: held-back text was after the last record."""
        for no, line in self.held:
            self._skip(no, line, "text after the last record")
        self.held = []
        if self.count > max(NOISE_MIN_LINES, self.total * NOISE_MAX_FRACTION):
            raise self._too_noisy(self.count, None,
                                  f"at most {NOISE_MAX_FRACTION:.0%} of {self.total} lines")

    def no_records(self, what: str, expected: str) -> TopologyError:
        """The error for an input without any record (after :meth:`finish`):
        names the first skipped line, if any (probably not this format at all),
        and drops the warnings (the error sums them up)."""
        if self.first_skipped is None:
            return self.error(f"no {what} found", None, expected)
        no, line = self.first_skipped
        n = self.count
        self.warnings = []
        if _SUBNET_LST(line):
            return self._subnet_lst(n, f" (the first on line {no})", no)
        return self.error(
            f"no {what} found; unrecognised line {excerpt(line)}"
            + (f" (and {n - 1} more skipped lines)" if n > 1 else ""),
            no, expected,
        )

    def flush(self) -> None:
        if self.out is not None:
            self.warnings.sort(key=lambda w: w.line or 0)
            self.out.extend(self.warnings)
            rest = self.count - len(self.warnings)
            if self.warnings and rest > 0:
                self.out.append(ParseWarning(self.source, None, "",
                                             f"{rest} more lines (not shown; "
                                             f"{self.count} in all)", rest))
        self.warnings = []


#: a line of a subnet .lst file: ``{ SW Ports:08 SystemGUID:... } { CA Ports:... } PHY=... LOG=...``
_SUBNET_LST = re.compile(r"\s*\{\s*(?:SW|CA|RT)\s+Ports:[0-9A-Fa-f]+\s+SystemGUID:",
                         re.ASCII).match


# ------------------------------------------------------------------ LIDs
MAX_UNICAST_LID = 0xBFFF
PERMISSIVE_LID = 0xFFFF


def check_peer(guid: int, lid: int, no: int, source: str) -> None:
    """A port line's peer: its node GUID must not be 0 and the LID its comment
    gives must be a unicast LID, 0 or the permissive LID (absent or not
    assigned: the peer's own record says so where its LID is needed)."""
    if guid == 0:
        raise TopologyError("peer node GUID 0", source=source, line=no,
                            expected="a non-zero node GUID (0 is never assigned)")
    if lid > MAX_UNICAST_LID and lid != PERMISSIVE_LID:
        raise TopologyError(f"peer LID {lid} out of range", source=source, line=no,
                            expected=f"a unicast LID 0..{MAX_UNICAST_LID} "
                                     f"({MAX_UNICAST_LID:#x}), or {PERMISSIVE_LID} (not assigned)")


def _lid_problem(lid: int) -> str:
    if lid == 0:
        return "has no LID (lid 0)"
    if lid == PERMISSIVE_LID:
        return "has LID 65535 (0xffff, the permissive LID: not assigned)"
    return f"has LID {lid} ({lid:#06x}), which is not a unicast LID"


def check_lids(
    lid: Sequence[int] | np.ndarray, lmc: Sequence[int] | np.ndarray,
    line: Sequence[int] | np.ndarray, name: Callable[[int], str],
    skip: Skipper, *, n_switches: int = 0,
) -> None:
    """Check the LIDs of every end-port and switch port 0 of a parsed fabric.

    Entry ``i`` is one port: its base LID, LMC, the line that gives them and
    ``name(i)`` naming it in messages; the first ``n_switches`` entries are
    switch ports 0.  A fabric where *no* port has a LID is accepted (captured
    before a subnet manager assigned LIDs; routing says so).  Otherwise:

    * an end-port without a unicast LID (0, 0xffff, or one in the multicast
      range), or a switch port 0 with LID 0xffff or a multicast LID, is a
      :class:`TopologyError` naming the port and its line;
    * a switch whose port 0 has LID 0 is a warning (real captures have them:
      the switch still forwards, no route can reach it), an error if strict;
    * two ports whose LID ranges (``base .. base + 2**lmc - 1``) overlap are a
      :class:`TopologyError` naming both ports and lines.
    """
    if not len(lid):
        return
    lids = np.asarray(lid, dtype=np.int64)
    if not lids.any():
        return
    source = skip.source
    lines = np.asarray(line, dtype=np.int64)
    expected = (
        "a unicast LID (1..0xbfff) on every end-port and switch port 0, as a subnet "
        "manager assigns them"
    )
    bad_mask = (lids == 0) | (lids > MAX_UNICAST_LID)
    lenient = np.zeros(len(lids), dtype=bool)
    if not skip.strict:
        lenient[:n_switches] = lids[:n_switches] == 0
    bad = np.flatnonzero(bad_mask & ~lenient)
    if len(bad):
        bad = bad[np.argsort(lines[bad], kind="stable")]
        i = int(bad[0])
        more = ""
        if len(bad) > 1:
            shown = ", ".join(str(int(lines[k])) for k in bad[1:6])
            more = f" (and {len(bad) - 1} more such ports, on lines {shown}"
            more += ", ...)" if len(bad) > 6 else ")"
        raise TopologyError(
            f"{name(i)} {_lid_problem(int(lids[i]))}{more}", source=source,
            line=int(lines[i]), expected=expected,
        )
    for k in np.flatnonzero(lenient):
        skip.note(
            int(lines[k]), "",
            f"{name(int(k))} as a route destination: it has no LID (lid 0), so it forwards "
            "traffic but no route can reach it",
        )
    keep = np.flatnonzero(lids != 0)
    lids, lines = lids[keep], lines[keep]
    top = lids + np.left_shift(1, np.asarray(lmc, dtype=np.int64)[keep]) - 1
    order = np.lexsort((lines, lids))
    s_lid, s_top = lids[order], top[order]
    reach = np.maximum.accumulate(s_top)
    clash = np.flatnonzero(s_lid[1:] <= reach[:-1])
    if not len(clash):
        return
    j = int(clash[0]) + 1
    i = int(np.argmax(s_top[:j]))
    a, b = int(order[i]), int(order[j])
    if lines[a] > lines[b]:
        a, b = b, a
    la, lb = int(lids[a]), int(lids[b])
    ra = f"LIDs {la}..{int(top[a])}" if top[a] > la else f"LID {la}"
    rb = f"LIDs {lb}..{int(top[b])}" if top[b] > lb else f"LID {lb}"
    shared = max(la, lb)
    raise TopologyError(
        f"LID {shared} is used by two ports: {name(int(keep[a]))} ({ra}, line "
        f"{int(lines[a])}) and {name(int(keep[b]))} ({rb})", source=source, line=int(lines[b]),
        expected="each LID on one port only (a port with LMC M owns LIDs base..base+2^M-1)",
    )
