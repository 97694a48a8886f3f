"""The OpenSM file-engine writer (numpy-built blocks) against a plain
line-by-line formatting of the same tables: byte for byte, with and without
the per-LID comments, with unrouted LIDs in some rows and several blocks."""

from __future__ import annotations

import numpy as np
import pytest

from smroute.tables import formats
from smroute.tables.formats import TABLES_HEADER, format_opensm, iter_opensm, tables_trailer
from smroute.tables.lft import NO_ROUTE, ForwardingTables

_KIND = {1: "Channel Adapter", 2: "Switch", 3: "Router"}


def line_by_line(t: ForwardingTables) -> str:
    """One line at a time, as the format is specified (module doc of formats)."""
    routed = [lid for lid in range(1, t.max_lid + 1) if (t.ports[:, lid] != NO_ROUTE).any()]
    out = [TABLES_HEADER + "\n"]
    entries = 0
    for i in range(t.n_switches):
        out.append(f"Unicast lids [0-{t.max_lid}] of switch Lid {int(t.switch_lid[i])} guid "
                   f"{int(t.switch_guid[i]):#018x} ('{t.switch_desc[i]}'):\n")
        n = 0
        for lid in routed:
            p = int(t.ports[i, lid])
            if p == NO_ROUTE:
                continue
            line = f"0x{lid:04x} {p:03d}"
            if t.lid_kind is not None and t.lid_guid is not None and t.lid_desc is not None:
                kind = _KIND.get(int(t.lid_kind[lid]))
                if kind:
                    line += (f" # {kind} portguid {int(t.lid_guid[lid]):#018x}: "
                             f"'{t.lid_desc[lid]}'")
            out.append(line + "\n")
            n += 1
        out.append(f"{n} lids dumped\n")
        entries += n
    out.append(tables_trailer(t.n_switches, entries))
    return "".join(out)


def _tables(n_sw: int, width: int, labels: bool, seed: int) -> ForwardingTables:
    rng = np.random.default_rng(seed)
    ports = rng.integers(0, 255, size=(n_sw, width), dtype=np.uint8)
    holes = rng.random((n_sw, width)) < 0.05
    holes[: n_sw // 3] = False  # some rows complete, some with unrouted LIDs
    ports[holes] = NO_ROUTE
    ports[:, 0] = NO_ROUTE
    ports[:, width - 3] = NO_ROUTE  # a LID nobody routes
    ports[0, 5] = 0  # port 0: the switch's own LID
    ports[n_sw - 1, 6] = 254
    lab: dict = {}
    if labels:
        kind = rng.integers(0, 4, size=width).astype(np.int8)  # 0: no comment on that line
        lab = {"lid_guid": rng.integers(0, 2**63, size=width, dtype=np.uint64),
               "lid_kind": kind,
               "lid_desc": tuple(f"node {i} 'q' #x" for i in range(width))}
    return ForwardingTables(
        switch_guid=np.arange(n_sw, dtype=np.uint64) + 0x2C90000000000,
        switch_lid=np.arange(n_sw, dtype=np.int64) + width,
        switch_desc=tuple(f"sw {i}" for i in range(n_sw)), ports=ports, **lab)


@pytest.mark.parametrize("labels", [False, True])
@pytest.mark.parametrize("n_sw", [1, 7, 150])
def test_numpy_writer_matches_plain_formatting(labels: bool, n_sw: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formats, "_BLOCK", 16)  # several blocks, a partial last one
    t = _tables(n_sw, 300, labels, seed=n_sw)
    assert format_opensm(t) == line_by_line(t)


def test_numpy_writer_chunks_stay_valid_when_all_are_kept() -> None:
    """The chunks are independent bytes: collecting them all (as ``b"".join``
    of the iterator does) gives the same text as writing one at a time."""
    t = _tables(200, 500, False, seed=3)
    chunks = list(iter_opensm(t))
    assert b"".join(chunks).decode() == line_by_line(t)


def test_numpy_writer_no_routes_at_all() -> None:
    t = ForwardingTables(np.array([1], dtype=np.uint64), np.array([1]), ("s",),
                         np.full((1, 4), NO_ROUTE, dtype=np.uint8))
    assert format_opensm(t) == line_by_line(t)
