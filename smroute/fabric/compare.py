"""A fabric compared with a reference (what was cabled against what should be).

Cables are matched by their two ends, ``(node GUID, port)`` each, in either
order; node order, LIDs and descriptions do not matter.  The comparison names:

* **missing** cables: in the reference only; **extra** cables: in the
  current fabric only;
* **moved** cables, taken out of those two lists: a missing and an extra
  cable that share one end (the other end was plugged elsewhere), or that
  join the same two nodes on other ports;
* **slower** cables: in both, with a width or a per-lane speed below the
  reference's;
* cables **below the usual** width or speed: the most common width and
  speed of the current fabric's cables of the same class (switch to switch,
  or switch to CA/router); ``known`` when the reference has that cable at
  that same rate (not a change);
* nodes (by GUID) missing or extra.

:attr:`FabricComparison.same` is true when there is nothing but known slow
cables.  Pure: takes two :class:`Fabric`, returns lists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import SPEED_GBPS, SPEEDS, NodeType

__all__ = ["Cable", "End", "FabricComparison", "compare_fabrics", "format_comparison"]

#: A cable by its ends: ``((GUID, port), (GUID, port))``, the lower end first.
Key = tuple[tuple[int, int], tuple[int, int]]


@dataclass(frozen=True, order=True)
class End:
    """One end of a cable: node GUID, port, node description."""

    guid: int
    port: int
    desc: str = field(compare=False)

    def __str__(self) -> str:
        return f'"{self.desc}" ({self.guid:#018x})[{self.port}]'

    def to_dict(self) -> dict[str, Any]:
        return {"desc": self.desc, "guid": f"{self.guid:#018x}", "port": self.port}


@dataclass(frozen=True)
class Cable:
    """A cable: its ends (lower ``(guid, port)`` first), width in lanes and
    speed code (0 unknown), and whether it joins two switches."""

    a: End
    b: End
    width: int
    speed: int
    core: bool

    @property
    def key(self) -> Key:
        return (self.a.guid, self.a.port), (self.b.guid, self.b.port)

    @property
    def rate(self) -> str:
        w = f"{self.width}x" if self.width else "?x"
        return w + (SPEEDS[self.speed] if self.speed else "???")

    def __str__(self) -> str:
        return f"{self.a} -- {self.b} {self.rate}"

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a.to_dict(), "b": self.b.to_dict(), "width": self.width,
                "speed": SPEEDS[self.speed], "class": "switch-switch" if self.core
                else "switch-ca"}


@dataclass
class FabricComparison:
    """The differences of a current fabric from a reference (module doc)."""

    missing: list[Cable] = field(default_factory=list)
    extra: list[Cable] = field(default_factory=list)
    moved: list[tuple[Cable, Cable]] = field(default_factory=list)
    slower: list[tuple[Cable, Cable]] = field(default_factory=list)
    below_usual: list[tuple[Cable, str, bool]] = field(default_factory=list)
    missing_nodes: list[str] = field(default_factory=list)
    extra_nodes: list[str] = field(default_factory=list)
    cables: tuple[int, int] = (0, 0)

    @property
    def same(self) -> bool:
        return not (self.missing or self.extra or self.moved or self.slower
                    or self.missing_nodes or self.extra_nodes
                    or any(not known for _, _, known in self.below_usual))

    def to_dict(self) -> dict[str, Any]:
        return {
            "same": self.same, "cables": {"reference": self.cables[0], "current": self.cables[1]},
            "missing": [c.to_dict() for c in self.missing],
            "extra": [c.to_dict() for c in self.extra],
            "moved": [{"reference": r.to_dict(), "current": c.to_dict()} for r, c in self.moved],
            "slower": [{"reference": r.to_dict(), "current": c.to_dict()}
                       for r, c in self.slower],
            "below_usual": [{"cable": c.to_dict(), "usual": u, "known": k}
                            for c, u, k in self.below_usual],
            "missing_nodes": self.missing_nodes, "extra_nodes": self.extra_nodes,
        }


def _known(*values: int) -> int:
    v = [x for x in values if x]
    return min(v) if v else 0


def _cables(f: Fabric) -> dict[Key, Cable]:
    out = {}
    sw = f.node_type == NodeType.SWITCH
    for ra, rb in zip(f.link_a.tolist(), f.link_b.tolist(), strict=True):
        na, nb = int(f.port_node[ra]), int(f.port_node[rb])
        ea = End(int(f.node_guid[na]), int(f.port_num[ra]), f.node_desc[na])
        eb = End(int(f.node_guid[nb]), int(f.port_num[rb]), f.node_desc[nb])
        ea, eb = sorted((ea, eb))
        speeds = [int(f.port_speed[r]) for r in (ra, rb) if f.port_speed[r]]
        speed = min(speeds, key=lambda s: SPEED_GBPS[s]) if speeds else 0
        c = Cable(ea, eb, _known(int(f.port_width[ra]), int(f.port_width[rb])), speed,
                  bool(sw[na] and sw[nb]))
        out[c.key] = c
    return out


def _slower(ref: Cable, cur: Cable) -> bool:
    return bool((ref.width and cur.width and cur.width < ref.width)
                or (ref.speed and cur.speed and SPEED_GBPS[cur.speed] < SPEED_GBPS[ref.speed]))


def _nodes(k: Key) -> tuple[int, int]:
    a, b = sorted((k[0][0], k[1][0]))
    return a, b


def _pair_moves(missing: dict[Key, Cable], extra: dict[Key, Cable]
                ) -> list[tuple[Cable, Cable]]:
    """Take the moved cables out of ``missing`` and ``extra`` (module doc)."""
    moved = []
    by_end: dict[tuple[int, int], list[Key]] = {}
    for k in sorted(extra):
        for end in k:
            by_end.setdefault(end, []).append(k)
    for k in sorted(missing):
        hit = next((e for end in k for e in by_end.get(end, ()) if e in extra), None)
        if hit is not None:
            moved.append((missing.pop(k), extra.pop(hit)))
    by_nodes: dict[tuple[int, int], list[Key]] = {}
    for k in sorted(extra):
        by_nodes.setdefault(_nodes(k), []).append(k)
    for k in sorted(missing):
        hit = next((e for e in by_nodes.get(_nodes(k), ()) if e in extra), None)
        if hit is not None:
            moved.append((missing.pop(k), extra.pop(hit)))
    return moved


def compare_fabrics(reference: Fabric, current: Fabric) -> FabricComparison:
    """The differences of ``current`` from ``reference`` (module doc)."""
    ref, cur = _cables(reference), _cables(current)
    missing = {k: c for k, c in ref.items() if k not in cur}
    extra = {k: c for k, c in cur.items() if k not in ref}
    out = FabricComparison(cables=(len(ref), len(cur)))
    out.moved = _pair_moves(missing, extra)
    out.missing, out.extra = list(missing.values()), list(extra.values())
    out.slower = [(ref[k], c) for k, c in sorted(cur.items()) if k in ref and _slower(ref[k], c)]
    slower = {c.key for _, c in out.slower}
    usual: dict[bool, tuple[int, int]] = {}
    for core in (True, False):
        ws = Counter(c.width for c in cur.values() if c.core == core and c.width)
        ss = Counter(c.speed for c in cur.values() if c.core == core and c.speed)
        usual[core] = (ws.most_common(1)[0][0] if ws else 0, ss.most_common(1)[0][0] if ss else 0)
    for k, c in sorted(cur.items()):
        w, s = usual[c.core]
        if k in slower or not _slower(Cable(c.a, c.b, w, s, c.core), c):
            continue
        r = ref.get(k)
        known = r is not None and (r.width, r.speed) == (c.width, c.speed)
        out.below_usual.append((c, f"{w}x{SPEEDS[s]}", known))
    rg, cg = set(reference.node_guid.tolist()), set(current.node_guid.tolist())
    out.missing_nodes = [reference.describe_node(i) for i, g in
                         enumerate(reference.node_guid.tolist()) if g not in cg]
    out.extra_nodes = [current.describe_node(i) for i, g in
                       enumerate(current.node_guid.tolist()) if g not in rg]
    return out


def format_comparison(c: FabricComparison, max_items: int | None = None) -> Iterator[str]:
    """Text lines of a comparison, each list cut to ``max_items`` (totals stay)."""
    def cut(items: list[Any]) -> list[Any]:
        return items if max_items is None else items[:max_items]

    def more(items: list[Any]) -> Iterator[str]:
        if max_items is not None and len(items) > max_items:
            yield f"  ... and {len(items) - max_items} more"

    yield (f"{c.cables[0]} cables in the reference, {c.cables[1]} now: "
           f"{'same' if c.same else 'DIFFERENT'}")
    for title, nodes in (("missing nodes", c.missing_nodes), ("extra nodes", c.extra_nodes)):
        if nodes:
            yield f"{title} ({len(nodes)}):"
            yield from (f"  {n}" for n in cut(nodes))
            yield from more(nodes)
    for title, cables in (("missing cables", c.missing), ("extra cables", c.extra)):
        if cables:
            yield f"{title} ({len(cables)}):"
            yield from (f"  {x}" for x in cut(cables))
            yield from more(cables)
    if c.moved:
        yield f"moved cables ({len(c.moved)}):"
        for r, x in cut(c.moved):
            yield f"  {r}\n    now {x}"
        yield from more(c.moved)
    if c.slower:
        yield f"cables below the reference's width or speed ({len(c.slower)}):"
        yield from (f"  {x} (reference {r.rate})" for r, x in cut(c.slower))
        yield from more(c.slower)
    if c.below_usual:
        yield f"cables below the fabric's usual width or speed ({len(c.below_usual)}):"
        yield from (f"  {x} (usual {u}{', as in the reference' if k else ''})"
                    for x, u, k in cut(c.below_usual))
        yield from more(c.below_usual)
