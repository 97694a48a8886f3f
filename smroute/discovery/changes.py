"""Fabric changes as fault events (pure).

The OpenSM bridge re-discovers the fabric and compares it with the *base*
fabric the daemon loaded.  :func:`down_set` says what of the base is missing
now: switches and CAs (by node GUID) and links whose two end nodes are still
present (a link of a missing node is implied by the node being down).
:func:`fault_events` turns the step from the down set in force to the new one
into events for the daemon's ``ApplyFaults``: ``*_DOWN`` for newly missing
items, ``*_UP`` for items that came back.  :func:`unexpected` lists what the
new view has that the base has not (new nodes or links, moved LIDs): such a
change cannot be expressed as a fault and needs a reload of the fabric.

Links are compared by both ends, ``(guid_a, port_a, guid_b, port_b)`` with
``(guid_a, port_a) < (guid_b, port_b)`` (:func:`link_keys`); in the
:class:`~smroute.fabric.faults.DownSet` (the daemon's own) a missing link is
keyed by the base fabric's first end (:func:`~smroute.fabric.faults.link_key`)
and its event names that end.
"""

from __future__ import annotations

import numpy as np

from smroute.fabric.faults import DownSet, FaultEvent, FaultKind
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType

__all__ = ["down_set", "fault_events", "link_keys", "unexpected"]

def link_keys(f: Fabric) -> np.ndarray:
    """``(L, 4)`` uint64 rows ``(guid_a, port_a, guid_b, port_b)``, ends ordered."""
    ga = f.node_guid[f.port_node[f.link_a]].astype(np.uint64)
    gb = f.node_guid[f.port_node[f.link_b]].astype(np.uint64)
    pa = f.port_num[f.link_a].astype(np.uint64)
    pb = f.port_num[f.link_b].astype(np.uint64)
    swap = (ga > gb) | ((ga == gb) & (pa > pb))
    a = np.stack([np.where(swap, gb, ga), np.where(swap, pb, pa),
                  np.where(swap, ga, gb), np.where(swap, pa, pb)], axis=1)
    return a


def _rows_in(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Boolean ``(len(a),)``: row i of ``a`` occurs in ``b`` (both ``(n, 4)`` uint64)."""
    if len(a) == 0:
        return np.zeros(0, dtype=bool)
    if len(b) == 0:
        return np.zeros(len(a), dtype=bool)
    va = np.ascontiguousarray(a).view(np.dtype((np.void, a.dtype.itemsize * 4))).ravel()
    vb = np.ascontiguousarray(b).view(np.dtype((np.void, b.dtype.itemsize * 4))).ravel()
    return np.isin(va, vb)


def down_set(base: Fabric, seen: Fabric) -> DownSet:
    """What of ``base`` is missing in ``seen`` (nodes by GUID, links by both ends).

    Routers are ignored (the routing does not use them).
    """
    seen_guids = seen.node_guid
    present = np.isin(base.node_guid, seen_guids)
    sw = base.node_type == NodeType.SWITCH
    ca = base.node_type == NodeType.CA
    keys = link_keys(base)
    ends_present = present[base.port_node[base.link_a]] & present[base.port_node[base.link_b]]
    missing = ~_rows_in(keys, link_keys(seen)) & ends_present
    first = base.link_a[missing]
    return DownSet(
        switches=frozenset(int(g) for g in base.node_guid[sw & ~present].tolist()),
        cas=frozenset(int(g) for g in base.node_guid[ca & ~present].tolist()),
        links=frozenset(zip(base.node_guid[base.port_node[first]].tolist(),
                            base.port_num[first].tolist(), strict=True)),
    )


def fault_events(current: DownSet, desired: DownSet) -> list[FaultEvent]:
    """Events taking the daemon from ``current`` down items to ``desired``.

    Order: items coming back (``*_UP``) first, then new failures, each sorted
    by GUID and port, so a batch is deterministic.
    """
    k = FaultKind
    ev: list[FaultEvent] = []
    ev += [FaultEvent(k.SWITCH_UP, g) for g in sorted(current.switches - desired.switches)]
    ev += [FaultEvent(k.CA_UP, g) for g in sorted(current.cas - desired.cas)]
    ev += [FaultEvent(k.LINK_UP, g, p) for g, p in sorted(current.links - desired.links)]
    ev += [FaultEvent(k.SWITCH_DOWN, g) for g in sorted(desired.switches - current.switches)]
    ev += [FaultEvent(k.CA_DOWN, g) for g in sorted(desired.cas - current.cas)]
    ev += [FaultEvent(k.LINK_DOWN, g, p) for g, p in sorted(desired.links - current.links)]
    return ev


def unexpected(base: Fabric, seen: Fabric, max_items: int = 20) -> list[str]:
    """Differences that are not faults of ``base``: nodes or links ``seen`` has
    and ``base`` has not, and nodes whose LID changed (at most ``max_items``)."""
    out: list[str] = []
    new_nodes = ~np.isin(seen.node_guid, base.node_guid)
    for i in np.flatnonzero(new_nodes)[:max_items].tolist():
        out.append(f"new node {seen.describe_node(i)}")
    base_present = np.isin(seen.node_guid, base.node_guid)
    sk = link_keys(seen)
    ends_known = (base_present[seen.port_node[seen.link_a]]
                  & base_present[seen.port_node[seen.link_b]])
    for r in sk[~_rows_in(sk, link_keys(base)) & ends_known][:max_items].tolist():
        out.append(f"new link {int(r[0]):#018x}[{int(r[1])}] - {int(r[2]):#018x}[{int(r[3])}]")
    # LIDs of nodes in both: compare node LIDs (switch port 0 / CA port 1 base LIDs)
    common = np.flatnonzero(base_present)
    if len(common):
        bidx = base.nodes_by_guid(seen.node_guid[common])
        moved = np.flatnonzero((seen.node_lid[common] != base.node_lid[bidx])
                               & (seen.node_lid[common] != 0))
        for j in moved[:max_items].tolist():
            i = int(common[j])
            out.append(f"LID of {seen.describe_node(i)} changed "
                       f"{int(base.node_lid[bidx[j]])} -> {int(seen.node_lid[i])}")
    return out[:max_items]
