"""Fault events and the set of down items of a fabric (pure; one of each, used
by the daemon and the OpenSM bridge's change detection alike).

A fault event names a link (node GUID + port, either end), a switch or a CA
going down or coming back up.  :func:`apply_events` folds events into a
:class:`DownSet` (frozensets of canonical items: a link by its first end, see
:func:`link_key`) after checking them against the base fabric;
:func:`degraded_fabric` is the base fabric minus the down items
(:meth:`Fabric.with_removed`).  An "up" event for an item that is not down is
a no-op; bringing a switch up restores its links except those that are
themselves down.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from smroute.errors import InputError
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType

__all__ = [
    "EVENT_KINDS",
    "DownSet",
    "FaultEvent",
    "FaultEventError",
    "FaultKind",
    "apply_events",
    "degraded_fabric",
    "link_key",
    "port_links",
]

class FaultKind(StrEnum):
    """What a fault event says: a link, a switch or a CA going down or coming
    back up.  A ``str`` (``"link_down"``, ...); the gRPC API's enum has the
    upper-case :attr:`name` (mapped at the edge)."""

    LINK_DOWN = "link_down"
    LINK_UP = "link_up"
    SWITCH_DOWN = "switch_down"
    SWITCH_UP = "switch_up"
    CA_DOWN = "ca_down"
    CA_UP = "ca_up"


#: Every fault kind's name, as requests and metrics spell it.
EVENT_KINDS: tuple[str, ...] = tuple(k.value for k in FaultKind)


class FaultEventError(InputError):
    """A fault event does not match the loaded fabric."""


@dataclass(frozen=True)
class FaultEvent:
    """kind: a :class:`FaultKind` (or its name, one of :data:`EVENT_KINDS`);
    guid: node GUID; port: port number on that node (links only, else 0)."""

    kind: str
    guid: int
    port: int = 0

    def describe(self) -> str:
        """``LINK_DOWN 0x... port 3`` / ``SWITCH_UP 0x...`` (the API's names)."""
        where = f"{self.guid:#018x}" + (f" port {self.port}" if self.port else "")
        return f"{FaultKind(self.kind).name} {where}"


@dataclass(frozen=True)
class DownSet:
    """Items currently down.  links: canonical ``(guid, port)`` of the link's
    first end (``link_a``) in the base fabric; switches / cas: node GUIDs."""

    links: frozenset[tuple[int, int]] = frozenset()
    switches: frozenset[int] = frozenset()
    cas: frozenset[int] = frozenset()

    @property
    def counts(self) -> tuple[int, int, int]:
        return len(self.links), len(self.switches), len(self.cas)

    def items(self) -> frozenset[tuple[str, int, int]]:
        return frozenset(
            [("link", g, p) for g, p in self.links]
            + [("switch", g, 0) for g in self.switches]
            + [("ca", g, 0) for g in self.cas]
        )

    @property
    def empty(self) -> bool:
        return not (self.links or self.switches or self.cas)

    def summary(self) -> dict[str, int]:
        """How many items of each kind are down."""
        return {"switches": len(self.switches), "cas": len(self.cas), "links": len(self.links)}


def link_key(fabric: Fabric, link: int) -> tuple[int, int]:
    """The canonical key of link ``link`` of ``fabric`` in a :class:`DownSet`:
    node GUID and port of its first end (``link_a``)."""
    a = int(fabric.link_a[link])
    return int(fabric.node_guid[fabric.port_node[a]]), int(fabric.port_num[a])


def port_links(fabric: Fabric) -> np.ndarray:
    """Link index of every port row, ``(P,)`` int64, -1 for unlinked ports."""
    out = fabric._cache.get("port_links")
    if isinstance(out, np.ndarray):
        return out
    arr = np.full(fabric.n_ports, -1, dtype=np.int64)
    idx = np.arange(fabric.n_links, dtype=np.int64)
    arr[fabric.link_a] = idx
    arr[fabric.link_b] = idx
    arr.setflags(write=False)
    fabric._cache["port_links"] = arr
    return arr


def _node(base: Fabric, ev: FaultEvent, where: str) -> int:
    try:
        return base.node_by_guid(ev.guid)
    except KeyError:
        raise FaultEventError(f"{where}: no node with GUID {ev.guid:#018x} in the loaded "
                              "fabric") from None


def apply_events(base: Fabric, down: DownSet, events: Sequence[FaultEvent],
                 source: str = "events") -> DownSet:
    """Fold ``events`` (in order) into ``down``; raises :class:`FaultEventError`
    naming the event (``source[i]``) if one does not match ``base``."""
    links = set(down.links)
    switches = set(down.switches)
    cas = set(down.cas)
    pl = port_links(base)
    for i, ev in enumerate(events):
        where = f"{source}[{i}] ({ev.kind} {ev.guid:#018x}" + (
            f" port {ev.port})" if ev.kind.startswith("link") else ")")
        if ev.kind not in EVENT_KINDS:
            raise FaultEventError(f"{where}: unknown kind; expected one of {EVENT_KINDS}")
        n = _node(base, ev, where)
        kind = NodeType(int(base.node_type[n]))
        if ev.kind.startswith("link"):
            if not 1 <= ev.port <= int(base.num_ports[n]):
                raise FaultEventError(f"{where}: port must be 1..{int(base.num_ports[n])}")
            li = int(pl[base.port_row(n, ev.port)])
            if li < 0:
                raise FaultEventError(f"{where}: that port has no link in the loaded fabric")
            key = link_key(base, li)
            (links.add if ev.kind == "link_down" else links.discard)(key)
        elif ev.kind.startswith("switch"):
            if kind != NodeType.SWITCH:
                raise FaultEventError(f"{where}: node is a {kind.name}, not a switch")
            (switches.add if ev.kind == "switch_down" else switches.discard)(ev.guid)
        else:
            if kind != NodeType.CA:
                raise FaultEventError(f"{where}: node is a {kind.name}, not a CA")
            (cas.add if ev.kind == "ca_down" else cas.discard)(ev.guid)
    return DownSet(frozenset(links), frozenset(switches), frozenset(cas))


def degraded_fabric(base: Fabric, down: DownSet) -> Fabric:
    """``base`` without the down items (``base`` itself if nothing is down)."""
    if down.empty:
        return base
    nodes = base.nodes_by_guid(np.array(sorted(down.switches | down.cas), dtype=np.uint64))
    links: list[int] = []
    if down.links:
        pl = port_links(base)
        keys = sorted(down.links)
        rows = base.port_rows(base.nodes_by_guid(np.array([k[0] for k in keys], np.uint64)),
                              np.array([k[1] for k in keys], dtype=np.int64))
        links = pl[rows].tolist()
    return base.with_removed(nodes=nodes[nodes >= 0], links=np.asarray(links, dtype=np.int64))
