"""The lanes file: SLs and SL-to-VL tables of a routing with detours, as text.

``smroute route --vls N --lanes-out FILE`` writes it beside the forwarding
tables.  Neither OpenSM's ``file`` routing engine nor its ``sa_db`` / QoS
policy files can load per-path SLs or per-port SL-to-VL tables: a subnet
manager that programs them is needed (smroute's OpenSM plugin gets them over
gRPC, ``RouteSubnetResponse.lanes``).  The file is for that, for audits and
for other subnet managers.  Format (``#`` starts a comment; GUIDs in hex)::

    smroute-lanes 1
    vls 3                # data VLs used (VL 0 .. 2)
    sls 4                # SLs used (SL 0 .. 3)
    escape_sl 0          # the escape SL (0: none)
    sl 2 0x0002c90310000010 0x0013-0x0024,0x0040 from 0x0002c90310000000,0x0002c90310000020
    sl 3 0x0002c90310000030 0x0050-0x0061 from *
    vl 0x0002c90320000000 7 0110000000000000
    vl 0x0002c90320000000 7/3 0210000000000000
    end 2 2              # the trailer: how many sl and vl records precede it

``sl SL TARGET LIDS from SWITCHES``: the paths to the destination LIDs (ranges,
hex) of the target switch from the CAs on the listed switches and from those
switches themselves (``*``: every switch) use that SL; every other path SL 0.
``vl SWITCH OUT[/IN] VLS``: 16 hex digits, the VL of SL 0 .. 15 leaving the
switch by port OUT (from any input port, or from IN only: an exception);
every (switch, port) not listed maps every SL to VL 0, and so do end-ports.
``end SLS VLS``: the last record, counting the ``sl`` and ``vl`` records, so
a file cut anywhere is an error, never fewer lanes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from smroute.errors import InputError
from smroute.routing.vlassign import N_SLS, VirtualLanes

__all__ = ["LanesFile", "format_lanes", "parse_lanes", "lid_ranges"]

MAGIC = "smroute-lanes 1"


@dataclass
class LanesFile:
    """A parsed lanes file.

    paths: ``(sl, target GUID, LIDs (K,) int64, source switch GUIDs or None
    for every switch)``; tables: ``(switch GUID, out port, in port or None,
    VLs (16,) uint8)``.
    """

    vls: int = 1
    sls: int = 1
    escape_sl: int = 0
    paths: list[tuple[int, int, np.ndarray, np.ndarray | None]] = field(default_factory=list)
    tables: list[tuple[int, int, int | None, np.ndarray]] = field(default_factory=list)

    def sl_of(self, src_guid: int, dlid: int) -> int:
        """SL of the path from switch ``src_guid`` (or a CA on it) to ``dlid``."""
        for sl, _, lids, src in self.paths:
            if dlid in set(lids.tolist()) and (src is None or src_guid in set(src.tolist())):
                return sl
        return 0

    def vl_of(self, guid: int, in_port: int, out_port: int, sl: int) -> int:
        """VL of SL ``sl`` at (switch, input port, output port)."""
        hit = 0
        for g, out, inp, v in self.tables:
            if g == guid and out == out_port:
                if inp == in_port:
                    return int(v[sl])
                if inp is None:
                    hit = int(v[sl])
        return hit


def lid_ranges(lids: np.ndarray) -> str:
    """``0x0013-0x0024,0x0040``: ascending distinct LIDs as hex ranges."""
    v = np.unique(np.asarray(lids, dtype=np.int64))
    if not len(v):
        return "-"
    brk = np.flatnonzero(np.diff(v) != 1) + 1
    starts, ends = v[np.r_[0, brk]], v[np.r_[brk - 1, len(v) - 1]]
    return ",".join(f"{a:#06x}" if a == b else f"{a:#06x}-{b:#06x}"
                    for a, b in zip(starts.tolist(), ends.tolist(), strict=True))


def format_lanes(lanes: VirtualLanes, sw_guid: np.ndarray, component: np.ndarray
                 ) -> Iterator[str]:
    """Lines of the lanes file of ``lanes`` (switch ids: the rows of
    ``sw_guid`` ``(S,)``; ``component`` ``(S,)``: physical component per
    switch, so a target's SL from every switch of its component is ``*``)."""
    yield MAGIC + "\n"
    yield (f"# SLs and SL-to-VL tables of a routing with detours; load them with a subnet "
           f"manager that programs SLs and VLs (smroute's OpenSM plugin), not OpenSM's file "
           f"engine\nvls {lanes.n_vls}\nsls {lanes.n_sls}\nescape_sl {lanes.escape_sl}\n")
    lt = lanes.lid_target
    n_sl = n_vl = 0
    for j in np.flatnonzero(lanes.target_sl).tolist():
        lids = np.flatnonzero(lt == j)
        src = np.flatnonzero(lanes.from_switch[:, j])
        comp = np.flatnonzero(component == component[lanes.targets[j]])
        who = "*" if np.array_equal(src, comp) else ",".join(
            f"{int(x):#018x}" for x in sw_guid[src].tolist()) or "-"
        n_sl += 1
        yield (f"sl {int(lanes.target_sl[j])} {int(sw_guid[lanes.targets[j]]):#018x} "
               f"{lid_ranges(lids)} from {who}\n")
    n_p = lanes.n_ports
    sw, out = np.nonzero(lanes.port_vl.any(axis=2))
    for s, o in zip(sw.tolist(), out.tolist(), strict=True):
        n_vl += 1
        yield f"vl {int(sw_guid[s]):#018x} {o} {_hex(lanes.port_vl[s, o])}\n"
    for k, v in zip(lanes.exc_key.tolist(), lanes.exc_vl, strict=True):
        s, rest = divmod(k, n_p * n_p)
        inp, o = divmod(rest, n_p)
        n_vl += 1
        yield f"vl {int(sw_guid[s]):#018x} {o}/{inp} {_hex(v)}\n"
    yield f"end {n_sl} {n_vl}\n"


def _hex(v: np.ndarray) -> str:
    return "".join(f"{int(x):x}" for x in v.tolist())


def parse_lanes(lines: Iterable[str], source: str = "lanes file") -> LanesFile:
    """Parse a lanes file (module doc); :class:`InputError` naming the line
    and what was expected otherwise."""
    out = LanesFile()
    seen_magic = False
    end: int | None = None
    no = 0
    for no, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{no}"
        if end is not None:
            raise InputError(f"{where}: a record after the trailer (line {end}); expected "
                             "'end SLS VLS' last (files spliced?)")
        if not seen_magic:
            if line != MAGIC:
                raise InputError(f"{where}: expected {MAGIC!r} first, got {line[:40]!r}")
            seen_magic = True
            continue
        f = line.split()
        if f[0] == "end" and len(f) == 3 and f[1].isdigit() and f[2].isdigit():
            if (int(f[1]), int(f[2])) != (len(out.paths), len(out.tables)):
                raise InputError(
                    f"{where}: the trailer counts {f[1]} sl and {f[2]} vl records, the "
                    f"file holds {len(out.paths)} and {len(out.tables)}: lines lost?")
            end = no
            continue
        try:
            if f[0] in ("vls", "sls", "escape_sl") and len(f) == 2:
                setattr(out, f[0], int(f[1]))
            elif f[0] == "sl" and len(f) == 6 and f[4] == "from":
                lids = _parse_ranges(f[3])
                src = None if f[5] == "*" else np.asarray(
                    [int(x, 16) for x in f[5].split(",") if x != "-"], dtype=np.uint64)
                out.paths.append((_sl(f[1]), int(f[2], 16), lids, src))
            elif f[0] == "vl" and len(f) == 4 and len(f[3]) == N_SLS:
                o, _, i = f[2].partition("/")
                out.tables.append((int(f[1], 16), int(o), int(i) if i else None,
                                   np.asarray([int(c, 16) for c in f[3]], dtype=np.uint8)))
            else:
                raise ValueError("unknown record")
        except ValueError as err:
            raise InputError(
                f"{where}: expected 'vls N', 'sls N', 'escape_sl N', 'sl SL TARGET LIDS from "
                f"SWITCHES', 'vl SWITCH OUT[/IN] 16-HEX-DIGITS' or 'end SLS VLS', "
                f"got {line[:60]!r} ({err})"
            ) from None
    if not seen_magic:
        raise InputError(f"{source}: empty; expected {MAGIC!r} first")
    if end is None:
        raise InputError(f"{source}:{no}: the file ends without its trailer ('end SLS VLS'); "
                         "the file is cut short?")
    return out


def _sl(text: str) -> int:
    v = int(text)
    if not 0 <= v < N_SLS:
        raise ValueError(f"SL {v} is not 0..15")
    return v


def _parse_ranges(text: str) -> np.ndarray:
    if text == "-":
        return np.zeros(0, dtype=np.int64)
    parts: list[np.ndarray] = []
    for r in text.split(","):
        a, _, b = r.partition("-")
        lo, hi = int(a, 16), int(b or a, 16)
        if hi < lo:
            raise ValueError(f"range {r} runs backwards")
        parts.append(np.arange(lo, hi + 1, dtype=np.int64))
    return np.concatenate(parts)
