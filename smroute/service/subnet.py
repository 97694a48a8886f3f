"""The subnet manager's view of the fabric (``RouteSubnet``, the OpenSM plugin).

A subnet manager that routes through the daemon (``opensm-plugin/``) sends,
on every routing pass, the nodes, end-port LIDs and cables it discovered.
This module turns that view into a :class:`~smroute.fabric.model.Fabric`
(:func:`fabric_from_subnet`, with a clear error naming the offending item),
compares it with the daemon's base fabric (:func:`compare`) and says how
the daemon comes to it (:func:`plan`; the core's
:meth:`~smroute.service.core.RoutingCore.route_subnet` does it through its
transaction, on the sequencer thread):

* the subnet is the base fabric minus the items down in the serving epoch:
  that epoch is the answer, nothing is committed;
* it is the base fabric minus other links, switches or CAs: those are the
  down items now (derived fault events, as the OpenSM bridge derives them from
  a re-discovery), rerouted incrementally where the reroute allows it;
* anything else (new nodes or cables, moved LIDs, another LMC, no base yet):
  the subnet becomes the base fabric and is routed in full.

Either way the epoch's cause is ``"sm"``.  :func:`switch_hops` gives the
least switch-to-switch hop counts OpenSM keeps as its min-hop table (the
plugin fills it so OpenSM skips its own computation).  Validation before the
answer: :mod:`smroute.service.subnet_check`.  No gRPC or protobuf here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smroute.discovery.changes import down_set, fault_events, unexpected
from smroute.errors import InputError
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.model.builder import FabricBuilder
from smroute.service.sequencer import DownSet, FaultEvent

__all__ = ["MAX_DESC_BYTES", "SubnetArrays", "SubnetError", "compare", "fabric_from_subnet",
           "plan", "switch_hops"]

#: An IB NodeDescription is 64 bytes.
MAX_DESC_BYTES = 64
#: The highest unicast LID.
MAX_UCAST_LID = 0xBFFF
#: Hop count meaning "unreachable" (OpenSM's OSM_NO_PATH).
NO_PATH = 255


class SubnetError(InputError):
    """A subnet view that cannot be a fabric (the message names the item)."""


@dataclass(frozen=True)
class SubnetArrays:
    """A subnet manager's view as arrays (built from the request at the edge).

    Nodes ``(N,)``: guid uint64, type int64 (:class:`NodeType` values),
    num_ports int64, sysimg uint64; desc: N strings.  Ports ``(P,)``: node
    (index into the nodes), num, guid uint64, lid, lmc (int64).  Links
    ``(L,)``: guid_a, guid_b uint64; port_a, port_b int64.  lmc: the SM's LMC;
    source: who sent it (for logs and errors).
    """

    guid: np.ndarray
    type: np.ndarray
    num_ports: np.ndarray
    sysimg: np.ndarray
    desc: Sequence[str]
    port_node: np.ndarray
    port_num: np.ndarray
    port_guid: np.ndarray
    port_lid: np.ndarray
    port_lmc: np.ndarray
    guid_a: np.ndarray
    port_a: np.ndarray
    guid_b: np.ndarray
    port_b: np.ndarray
    lmc: int
    source: str = "sm"


def _first(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])


def fabric_from_subnet(s: SubnetArrays) -> Fabric:
    """The fabric of a subnet view; :class:`SubnetError` (INVALID_ARGUMENT)
    naming the first bad node, port or link and what was expected."""
    n = len(s.guid)
    src = s.source
    if not 0 <= s.lmc <= 7:
        raise SubnetError(f"{src}: lmc {s.lmc}: expected 0..7")
    if n == 0:
        raise SubnetError(f"{src}: no nodes; expected the nodes the subnet manager discovered")
    bad = ~np.isin(s.type, (NodeType.CA, NodeType.SWITCH, NodeType.ROUTER))
    if bad.any():
        i = _first(bad)
        raise SubnetError(f"{src}: nodes[{i}] ({int(s.guid[i]):#018x}): type {int(s.type[i])}; "
                          "expected 1 (CA), 2 (switch) or 3 (router)")
    bad = (s.num_ports < 1) | (s.num_ports > 255)
    if bad.any():
        i = _first(bad)
        raise SubnetError(f"{src}: nodes[{i}] ({int(s.guid[i]):#018x}): num_ports "
                          f"{int(s.num_ports[i])}; expected 1..255")
    for i, d in enumerate(s.desc):
        if len(d.encode("utf-8")) > MAX_DESC_BYTES:
            raise SubnetError(f"{src}: nodes[{i}] ({int(s.guid[i]):#018x}): description is "
                              f"{len(d.encode('utf-8'))} bytes; expected at most "
                              f"{MAX_DESC_BYTES}")
    pn = s.port_node
    bad = (s.port_num < 0) | (s.port_num > s.num_ports[pn])
    bad |= (s.port_lmc < 0) | (s.port_lmc > 7)
    top = s.port_lid + np.left_shift(1, np.clip(s.port_lmc, 0, 7)) - 1
    bad |= (s.port_lid < 0) | ((s.port_lid > 0) & (top > MAX_UCAST_LID))
    if bad.any():
        j = _first(bad)
        raise SubnetError(
            f"{src}: port {int(s.port_num[j])} of node {int(s.guid[pn[j]]):#018x}: lid "
            f"{int(s.port_lid[j])} lmc {int(s.port_lmc[j])} on a node with "
            f"{int(s.num_ports[pn[j]])} ports; expected a port 0..num_ports, lmc 0..7 and "
            f"LIDs up to {MAX_UCAST_LID:#x}")
    _check_lids(s)
    b = FabricBuilder()
    for kind in (NodeType.SWITCH, NodeType.CA, NodeType.ROUTER):
        sel = np.flatnonzero(s.type == kind)
        if len(sel):
            b.add_nodes(kind, s.guid[sel], s.num_ports[sel], [s.desc[i] for i in sel.tolist()],
                        sysimg_guids=s.sysimg[sel])
    order = np.concatenate([np.flatnonzero(s.type == k)
                            for k in (NodeType.SWITCH, NodeType.CA, NodeType.ROUTER)])
    new_index = np.empty(n, dtype=np.int64)
    new_index[order] = np.arange(n)
    if len(pn):
        b.set_ports(new_index[pn], s.port_num, guid=s.port_guid, lid=s.port_lid, lmc=s.port_lmc)
    keys = np.sort(s.guid)
    if len(keys) != len(np.unique(keys)):
        vals, counts = np.unique(s.guid, return_counts=True)
        raise SubnetError(f"{src}: node GUID {int(vals[counts > 1][0]):#018x} appears twice")
    ends = []
    for name, g in (("guid_a", s.guid_a), ("guid_b", s.guid_b)):
        at = np.searchsorted(keys, g)
        found = (at < n) & (keys[np.minimum(at, n - 1)] == g)
        if not found.all():
            i = _first(~found)
            raise SubnetError(f"{src}: links[{i}].{name} {int(g[i]):#018x} is not one of "
                              "the nodes")
        ends.append(new_index[np.argsort(s.guid, kind="stable")[at]])
    b.add_links_rows(ends[0], s.port_a, ends[1], s.port_b)
    try:
        return b.build()
    except InputError as err:
        raise SubnetError(f"{src}: {err}") from None


def _check_lids(s: SubnetArrays) -> None:
    """No LID of a port's range used twice (the ranges must be disjoint)."""
    has = np.flatnonzero(s.port_lid > 0)
    if not len(has):
        return
    count = np.left_shift(1, s.port_lmc[has])
    lids = np.repeat(s.port_lid[has], count) + (
        np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count))
    owner = np.repeat(has, count)
    order = np.argsort(lids, kind="stable")
    dup = np.flatnonzero(lids[order][1:] == lids[order][:-1])
    if len(dup):
        a, b = owner[order[dup[0]]], owner[order[dup[0] + 1]]
        raise SubnetError(
            f"{s.source}: LID {int(lids[order[dup[0]]])} is used by port {int(s.port_num[a])} "
            f"of {int(s.guid[s.port_node[a]]):#018x} and port {int(s.port_num[b])} of "
            f"{int(s.guid[s.port_node[b]]):#018x}; expected every LID once")


# ---------------------------------------------------------------- compare
def _port_facts(f: Fabric, nodes: np.ndarray) -> np.ndarray:
    """Rows ``(guid, port, lid, lmc, port guid)`` of the addressed ports
    (a LID or a port GUID) of ``nodes``, sorted, ``(K, 5)`` uint64."""
    keep = np.isin(f.port_node, nodes) & f.port_exists & (
        (f.port_lid > 0) | (f.port_guid > 0))
    rows = np.flatnonzero(keep)
    out = np.stack([f.node_guid[f.port_node[rows]], f.port_num[rows].astype(np.uint64),
                    f.port_lid[rows].astype(np.uint64), f.port_lmc[rows].astype(np.uint64),
                    f.port_guid[rows]], axis=1).astype(np.uint64)
    return out[np.lexsort(out.T[::-1])] if len(out) else out


def compare(base: Fabric, sm: Fabric) -> tuple[DownSet | None, str]:
    """``sm`` as down items of ``base``: ``(down set, "")``, or ``(None, why)``
    when ``sm`` is not ``base`` minus some links, switches and CAs (a new node
    or cable, a router gone, a node with other ports, a moved LID or LMC)."""
    odd = unexpected(base, sm, max_items=1)
    if odd:
        return None, odd[0]
    bi = base.nodes_by_guid(sm.node_guid)  # all found: no new node
    differ = (base.node_type[bi] != sm.node_type) | (base.num_ports[bi] != sm.num_ports)
    if differ.any():
        return None, f"node {sm.describe_node(_first(differ))} changed its type or port count"
    gone = ~np.isin(base.node_guid, sm.node_guid) & (base.node_type == NodeType.ROUTER)
    if gone.any():
        return None, f"router {base.describe_node(_first(gone))} is gone"
    mine = _port_facts(base, bi)
    theirs = _port_facts(sm, np.arange(sm.n_nodes))
    if mine.shape != theirs.shape or not np.array_equal(mine, theirs):
        return None, "end-port GUIDs, LIDs or LMCs differ"
    return down_set(base, sm), ""


# ---------------------------------------------------------------- hops
def switch_hops(f: Fabric, guids: np.ndarray) -> np.ndarray:
    """Least switch-to-switch cable hops, ``(S, S)`` uint8: entry ``[i, j]``
    from switch ``guids[i]`` to switch ``guids[j]`` (0 on the diagonal,
    :data:`NO_PATH` if unreachable or 255 hops or more).  Breadth-first from
    every switch at once on bit sets (one ``uint64`` word per 64 switches)."""
    nodes = f.nodes_by_guid(np.asarray(guids, dtype=np.uint64))
    s = len(nodes)
    out = np.full((s, s), NO_PATH, dtype=np.uint8)
    if s == 0:
        return out
    idx = np.full(f.n_nodes, -1, dtype=np.int64)
    idx[nodes[nodes >= 0]] = np.flatnonzero(nodes >= 0)
    a, b = idx[f.port_node[f.link_a]], idx[f.port_node[f.link_b]]
    keep = (a >= 0) & (b >= 0) & (a != b)
    pairs = np.unique(np.concatenate([a[keep] * s + b[keep], b[keep] * s + a[keep]]))
    nbr, dst = pairs // s, pairs % s  # sorted by nbr: regroup by dst
    order = np.argsort(dst, kind="stable")
    nbr, dst = nbr[order], dst[order]
    starts = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]]) if len(dst) else dst
    words = (s + 63) // 64
    reach = np.zeros((s, words), dtype=np.uint64)
    me = np.arange(s)
    reach[me, me // 64] = np.left_shift(np.uint64(1), (me % 64).astype(np.uint64))
    out[me, me] = 0
    for k in range(1, NO_PATH):
        if not len(dst):
            break
        new = reach.copy()
        new[dst[starts]] |= np.bitwise_or.reduceat(reach[nbr], starts, axis=0)
        fresh = new & ~reach
        if not fresh.any():
            break
        bits = np.unpackbits(fresh.view(np.uint8), axis=1, bitorder="little")[:, :s]
        out[bits.astype(bool)] = k
        reach = new
    return out


# ---------------------------------------------------------------- plan
def plan(base: Fabric | None, down: DownSet, lmc_setting: int | None, sm: Fabric, lmc: int
         ) -> tuple[DownSet | None, str, list[FaultEvent]]:
    """How a daemon with the base fabric ``base`` (``down`` down, LMC setting
    ``lmc_setting``) comes to the subnet ``sm`` (LMC ``lmc``; module doc):
    ``(down set, "", the fault events from down to it)`` when ``sm`` is
    ``base`` minus some links, switches and CAs, else ``(None, why, [])``:
    ``sm`` becomes the base fabric."""
    if base is None:
        return None, "no fabric loaded", []
    if lmc_setting is not None and lmc != lmc_setting:
        return None, f"LMC {lmc_setting} -> {lmc}", []
    new, why = compare(base, sm)  # the ports' LMCs are compared too
    return new, why, fault_events(down, new) if new is not None else []
