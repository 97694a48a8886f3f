"""The picture of a fabric as data (what :mod:`smroute.fabric.export.draw` computes
and the CLI renders): lines of text, boxes, edges, the drawing; and the pure
helpers of the grouping (switch partitions by neighbour signatures) and of
the labels."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from smroute.fabric.model.arrays import Fabric

__all__ = [
    "Box",
    "Drawing",
    "Edge",
    "Line",
    "level_name",
    "GROUPING_TEXT",
    "count_rows",
    "dense",
    "link_keys",
    "partitions",
    "plural",
    "short",
    "span",
    "widest_row",
]

IntArray = npt.NDArray[np.int64]

@dataclass(frozen=True)
class Line:
    """One line of a box's text; ``style`` is ``title``, ``text``, ``note``,
    ``anomaly`` (drawn in red) or ``removed``."""

    text: str
    style: str = "text"


@dataclass(frozen=True, eq=False)
class Box:
    """A node of the picture.

    kind: ``switches`` (a group of switches of the fabric), ``removed``
    (switches of the original that are gone), ``hosts`` (the compute hosts of
    a box's switches) or ``service`` (other end-ports of a box's switches).
    rank: the row (switch rank; -1 unranked); count: switches or end-ports it
    stands for; members: ``(count,)`` int64 node indices (of the original
    fabric for ``removed``); anomalies: anomaly kinds (keys of
    :data:`ANOMALY_NAMES`) it shows; attached_to: the switch box a hosts or
    service box hangs off.
    """

    id: str
    kind: str
    rank: int
    count: int
    lines: tuple[Line, ...]
    members: IntArray = field(repr=False)
    anomalies: tuple[str, ...] = ()
    attached_to: str = ""

    @property
    def text(self) -> str:
        return "\n".join(ln.text for ln in self.lines)


@dataclass(frozen=True)
class Edge:
    """Cables between two boxes (``tail`` the lower rank).  kind: ``link``
    (up/down), ``same_rank``, ``self_loop``, ``other`` (unranked ends),
    ``removed`` (cables gone since the original), ``hosts`` (a hosts box to
    its switches)."""

    tail: str
    head: str
    kind: str
    cables: int
    label: str
    anomaly: str = ""


@dataclass(frozen=True, eq=False)
class Drawing:
    """A fabric as a picture describes it (see the module doc).

    rows: ``(rank, box ids)`` from the top rank down (unranked last; removed
    boxes in their former rank's row); legend: lines for the picture's
    caption (counts, grouping, each anomaly named with its total);
    anomalies: total per anomaly kind (only those present).
    """

    title: str
    legend: tuple[Line, ...]
    boxes: tuple[Box, ...]
    edges: tuple[Edge, ...]
    rows: tuple[tuple[int, tuple[str, ...]], ...]
    grouping: str
    n_switches: int
    anomalies: dict[str, int]

    @property
    def switch_boxes(self) -> tuple[Box, ...]:
        return tuple(b for b in self.boxes if b.kind == "switches")

    @property
    def n_nodes(self) -> int:
        """Nodes drawn (every box, hosts boxes included)."""
        return len(self.boxes)

    def box(self, box_id: str) -> Box:
        for b in self.boxes:
            if b.id == box_id:
                return b
        raise KeyError(box_id)

    @property
    def text(self) -> str:
        """Every text of the picture (title, legend, boxes, edge labels)."""
        parts = [self.title, *(ln.text for ln in self.legend)]
        parts += [b.text for b in self.boxes] + [e.label for e in self.edges if e.label]
        return "\n".join(parts)


def level_name(rank: int, max_rank: int) -> str:
    """``leaf`` for rank 0, ``spine`` for rank 1 of a 2-level fabric, else
    ``rank <r>`` (``top rank <r>`` for the top rank)."""
    if rank < 0:
        return "unranked"
    if rank == 0:
        return "leaf"
    if max_rank == 1:
        return "spine"
    return f"top rank {rank}" if rank == max_rank else f"rank {rank}"


# --------------------------------------------------------------------------- partitions
def dense(keys: Sequence[Hashable]) -> IntArray:
    """Dense ids of ``keys`` in order of first appearance."""
    ids: dict[Hashable, int] = {}
    return np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int64)


def count_rows(key: IntArray, arr: np.ndarray) -> IntArray:
    return dense([(int(k), *r) for k, r in zip(key.tolist(), arr.tolist(), strict=True)])


def _neighbour_sig(src: IntArray, val: IntArray, s: int) -> list[tuple[tuple[int, int], ...]]:
    """Per switch ``0..s-1``: sorted ``(value, multiplicity)`` over its
    directed links ``src -> value``."""
    if not len(src):
        return [()] * s
    base = int(val.max()) + 1
    u, c = np.unique(src * base + val, return_counts=True)
    who, v = u // base, u % base
    bounds = np.searchsorted(who, np.arange(s + 1))
    vl, cl = v.tolist(), c.tolist()
    return [tuple(zip(vl[a:b], cl[a:b], strict=True))
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)]


def partitions(a_key: IntArray, b_key: IntArray, src: IntArray, dst: IntArray,
                ) -> list[tuple[str, IntArray]]:
    """Candidate partitions, coarsest first (module doc)."""
    s = len(a_key)
    out = [("level", a_key), ("counts", b_key)]
    colour = b_key
    for rnd in range(1, s + 1):
        sig = _neighbour_sig(src, colour[dst], s)
        new = dense([(int(c), g) for c, g in zip(colour.tolist(), sig, strict=True)])
        if new.max(initial=-1) == colour.max(initial=-1):
            break
        colour = new
        out.append((f"refined {rnd}", colour))
    sig = _neighbour_sig(src, dst, s)
    twins = dense([(int(c), g) for c, g in zip(colour.tolist(), sig, strict=True)])
    out.append(("identical", twins))
    return out


GROUPING_TEXT = {
    "level": "switches of one level and role collapsed (same anomalies and kinds of end-ports)",
    "counts": "switches with the same host and link counts collapsed",
    "refined": "switches with the same counts and the same number of links to each box "
               "collapsed",
    "identical": "identical switches collapsed (same neighbour switches and host count)",
}


def widest_row(part: IntArray, rank: IntArray) -> int:
    """The most boxes of ``part`` in one rank."""
    if not len(part):
        return 0
    boxes = np.unique(np.stack([rank, part], axis=1), axis=0)
    return int(np.unique(boxes[:, 0], return_counts=True)[1].max())


# --------------------------------------------------------------------------- text helpers
def span(v: IntArray) -> str:
    lo, hi = int(v.min()), int(v.max())
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


def short(text: str, width: int = 30) -> str:
    t = " ".join(text.split())
    return t if len(t) <= width else t[:width - 1] + "…"


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else ("es" if word.endswith(("ch", "sh", "x")) else "s"))


def _link_key(g1: int, p1: int, g2: int, p2: int) -> tuple[int, int, int, int]:
    return (g1, p1, g2, p2) if (g1, p1) <= (g2, p2) else (g2, p2, g1, p1)


def link_keys(f: Fabric, links: IntArray) -> list[tuple[int, int, int, int]]:
    ra, rb = f.link_a[links], f.link_b[links]
    ga = f.node_guid[f.port_node[ra]].tolist()
    gb = f.node_guid[f.port_node[rb]].tolist()
    pa, pb = f.port_num[ra].tolist(), f.port_num[rb].tolist()
    return [_link_key(*t) for t in zip(ga, pa, gb, pb, strict=True)]
