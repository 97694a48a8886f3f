"""OpenSM's file-engine text (``smroute.tables.formats``): the numpy writer
against the format written one line at a time, over several blocks of
switches, with unrouted entries, a gap in the routed LIDs and per-LID labels;
the streamed pieces and the written file against the joined text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_opensm_writer import line_by_line

from smroute.fabric.model.base import NodeType
from smroute.tables.formats import (
    format_opensm,
    iter_opensm,
    stream_opensm,
    write_tables,
)
from smroute.tables.lft import NO_ROUTE, ForwardingTables


def tables(n_sw: int, width: int, *, seed: int, holes: float = 0.0, gap: bool = False,
           labels: bool = False) -> ForwardingTables:
    rng = np.random.default_rng(seed)
    ports = rng.integers(1, 255, size=(n_sw, width), dtype=np.uint8)
    ports[:, 0] = NO_ROUTE
    ports[rng.random((n_sw, width)) < holes] = NO_ROUTE
    if gap:
        ports[:, width // 3: width // 2] = NO_ROUTE
    kinds = guids = descs = None
    if labels:
        kinds = rng.choice([int(NodeType.CA), int(NodeType.SWITCH)], size=width).astype(np.int8)
        guids = rng.integers(1, 2**62, size=width, dtype=np.uint64)
        descs = tuple(f"node {i} 'x'" for i in range(width))
    return ForwardingTables(
        switch_guid=np.arange(1, n_sw + 1, dtype=np.uint64) << np.uint64(20),
        switch_lid=np.arange(width, width + n_sw, dtype=np.int64),
        switch_desc=tuple(f"sw {i}" for i in range(n_sw)), ports=ports,
        lid_guid=guids, lid_kind=kinds, lid_desc=descs)


CASES = {
    "full": dict(n_sw=150, width=300, seed=1),
    "holes": dict(n_sw=130, width=257, seed=2, holes=0.1),
    "gap": dict(n_sw=70, width=200, seed=3, gap=True),
    "gap-holes": dict(n_sw=65, width=90, seed=4, gap=True, holes=0.3),
    "labels": dict(n_sw=66, width=40, seed=5, labels=True, holes=0.2),
    "one-switch": dict(n_sw=1, width=5, seed=6),
    "nothing-routed": dict(n_sw=3, width=4, seed=7, holes=1.0),
    "no-switch": dict(n_sw=0, width=4, seed=8),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_opensm_text_as_written_one_line_at_a_time(name: str, tmp_path: Path) -> None:
    t = tables(**CASES[name])  # type: ignore[arg-type]
    want = line_by_line(t)
    assert format_opensm(t) == want
    assert b"".join(bytes(p) for p in stream_opensm(t)) == want.encode()
    assert b"".join(iter_opensm(t)) == want.encode()
    write_tables(t, tmp_path / "lfts")
    assert (tmp_path / "lfts").read_text() == want


def test_streamed_pieces_kept_raise_instead_of_reading_another_block() -> None:
    """A piece is a view of a buffer the next block reuses: kept, it is released."""
    t = tables(n_sw=150, width=300, seed=1)
    kept = list(stream_opensm(t))
    views = [p for p in kept if isinstance(p, memoryview)]
    assert len(views) == 150
    with pytest.raises(ValueError, match="released"):
        bytes(views[0])
    with pytest.raises(TypeError):
        b"".join(kept)
