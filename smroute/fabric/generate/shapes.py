"""Real-world fabric shapes: SHARP aggregation nodes, hosts on spines, two-switch
and ring fabrics, director switches, Dragonfly+, split ports.

Transforms take any :class:`~smroute.fabric.model.Fabric` (generated or parsed)
and return a new immutable one; existing nodes keep their indices, GUIDs, LIDs
and descriptions, new nodes are appended after them.  Generators return a
fabric with GUIDs, LIDs, widths and speeds set, like
:mod:`smroute.fabric.generate.trees`.  Everything is vectorized with numpy (no Python
loop per node): :func:`with_aggregation_nodes` on the 11,664-host
PGFT(3;18,18,36;1,18,18;1,1,1) adds its 1,620 aggregation nodes in well under a
second.

What real fabrics look like (captures in ``fabrics/real`` of the shared folder)
------------------------------------------------------------------------------
* **SHARP aggregation nodes.**  Every NVIDIA Quantum (HDR) / Quantum-2 (NDR)
  switch carries a CA, node description exactly
  ``"Mellanox Technologies Aggregation Node"``, vendor 0x2c9, device 0xcf09, one
  port, linked to the switch's extra port (41 on 40-port Quantum, 65 on 64-port
  Quantum-2), with a LID of its own and the switch's link width/speed.  Its
  system image GUID is the switch's, its node GUID the switch's node GUID
  + 0x8 (ufm_sdk's MQM8700, infiniband-exporter's MQM9700) or + 0x10 (the
  topograph NDR site).  Its port GUID equals its node GUID on real hardware;
  ibsim (``sim_net.c``: CA port ``i`` gets node GUID + ``i``) cannot reproduce
  that, so :func:`with_aggregation_nodes` gives the port node GUID + 1 by
  default (``port_guid_offset=0`` for the real convention, which
  :func:`~smroute.fabric.export.writers.format_ibsim_net` then refuses).
* **Hosts on spines.**  UFM / subnet-manager servers and storage gateways sit on
  spine and core switches (:func:`attach_cas`).
* **Directors.**  A chassis of line (leaf) and spine ASICs, all with the
  chassis' system image GUID and descriptions
  ``"MF0;<system>:<model>/L<nn>/U<k>"`` / ``"MF0;<system>:<model>/S<nn>/U<k>"``
  (e.g. ``"MF0;cs7500:CS7500/L17/U2"``).  Line ASIC ports ``1..radix/2`` are
  the chassis' external ports; ``ibnetdiscover -g`` prints them as
  ``[p][ext N]`` (see :func:`~smroute.fabric.export.writers.chassis_ext_ports`).
* **Split ports.**  A split Quantum / Quantum-2 port becomes two 2-lane ports.
  Plain ``ibnetdiscover`` shows no labels, only more port numbers: in
  split-ready mode physical port ``k`` is IB ports ``2k-1`` and ``2k``, so a
  64-port Quantum-2 exposes 128 (its aggregation node moving to 129) and a
  40-port Quantum 80 (81).  ibdiagnet adds labels ``ASIC/cage/port[/split]``
  (Quantum-2) or ``port[/split]`` (Quantum): :func:`port_labels`.

Conventions of the new nodes
----------------------------
* GUIDs are checked against every node and port GUID of the input fabric (a
  collision raises :class:`~smroute.fabric.model.FabricError`).
* LIDs: if the input fabric has LIDs, new CA ports get LIDs above its highest
  (aligned to ``2**lmc``); a fabric without LIDs (e.g. stripped for OpenSM)
  gets none either.
* Width and speed of a new link default to the widest / fastest linked port
  of the switch it attaches to (4x / ``???`` if it has none).

The pieces: the fabric editing helpers are :mod:`smroute.fabric.generate.editing`, the
generators (rings, two switches, directors, Dragonfly+, tori)
:mod:`smroute.fabric.generate.shapegen`; this module has the transforms and re-exports the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from smroute.fabric.generate.editing import (
    AGGREGATION_NODE_DESC,
    agg_on_top,
    aggregation_nodes,
    check_new_guids,
    is_aggregation,
    link_attrs,
    new_lids,
    rebuild,
    switch_arg,
)
from smroute.fabric.generate.shapegen import (
    IS4_DEVICE_ID,
    director,
    dragonfly_plus,
    ring,
    torus,
    two_switch,
)
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError, NodeType

__all__ = [
    "AGGREGATION_NODE_DESC",
    "AGGREGATION_NODE_DEVICE_ID",
    "CONNECTX7_DEVICE_ID",
    "IS4_DEVICE_ID",
    "SERVICE_GUID_BASE",
    "aggregation_nodes",
    "attach_cas",
    "director",
    "dragonfly_plus",
    "port_labels",
    "ring",
    "torus",
    "two_switch",
    "with_aggregation_nodes",
    "with_split_ports",
]

#: Device id of a SHARP aggregation node (every capture in ``fabrics/real``).
AGGREGATION_NODE_DEVICE_ID = 0xCF09
#: ConnectX-7 device id (the HCAs of the NDR capture): default for :func:`attach_cas`.
CONNECTX7_DEVICE_ID = 0x1021
#: Default GUID prefix of CAs added by :func:`attach_cas` (NVIDIA HCA OUI e0:9d:73).
SERVICE_GUID_BASE = 0xE09D_7303_0000_0000
_VENDOR_ID = 0x2C9


# --------------------------------------------------------------------------- aggregation
def with_aggregation_nodes(
    fabric: Fabric,
    switches: npt.ArrayLike | None = None,
    *,
    guid_offset: int = 0x8,
    port_guid_offset: int = 1,
    speed: str | None = None,
    width: int | None = None,
) -> Fabric:
    """``fabric`` with a SHARP aggregation node on every switch (or on
    ``switches``, (K,) node indices).

    Each chosen switch grows by one port, ``num_ports + 1`` (41 on a 40-port
    Quantum, 65 on a 64-port Quantum-2, 37 on a 36-port generated switch),
    linked to port 1 of a new CA: description :data:`AGGREGATION_NODE_DESC`,
    vendor 0x2c9, device :data:`AGGREGATION_NODE_DEVICE_ID`, one port, node
    GUID = switch node GUID + ``guid_offset`` (0x8 or 0x10 on real switches;
    0x8 never collides with the generators' GUIDs), port GUID = node GUID +
    ``port_guid_offset`` (1: ibsim's rule; 0: real hardware), system image
    GUID = the switch's (its node GUID if it has none), LMC 0 and a LID above
    the fabric's LIDs (none if the fabric has none).  The link has ``speed`` /
    ``width`` or the switch's fastest / widest.  By default switches that
    already carry an aggregation node on their top port are skipped.  New
    nodes follow the existing ones in switch order.
    """
    sw = switch_arg(fabric, switches, unique=True)
    if switches is None:
        sw = sw[~agg_on_top(fabric)[sw]]
    if guid_offset < 0 or port_guid_offset < 0:
        raise FabricError("GUID offsets must be >= 0")
    k = len(sw)
    num_ports = fabric.num_ports.astype(np.int64)
    num_ports[sw] += 1
    b = rebuild(fabric, num_ports, fabric.port_num.astype(np.int64))
    guids = fabric.node_guid[sw] + np.uint64(guid_offset)
    pguids = guids + np.uint64(port_guid_offset)
    check_new_guids(fabric, guids, pguids)
    sysimg = np.where(fabric.sysimg_guid[sw] != 0, fabric.sysimg_guid[sw], fabric.node_guid[sw])
    nodes = b.add_nodes(
        NodeType.CA, guids, 1, [AGGREGATION_NODE_DESC] * k, sysimg_guids=sysimg,
        vendor_id=_VENDOR_ID, device_id=AGGREGATION_NODE_DEVICE_ID,
    )
    w, s = link_attrs(fabric, sw, speed, width)
    b.set_ports(nodes, 1, guid=pguids, lid=new_lids(fabric, k, 0), width=w, speed=s)
    b.set_ports(sw, num_ports[sw], width=w, speed=s)
    b.add_links_rows(nodes, np.ones(k, dtype=np.int64), sw, num_ports[sw])
    return b.build()


# --------------------------------------------------------------------------- hosts on switches
def attach_cas(
    fabric: Fabric,
    switches: npt.ArrayLike,
    descs: Sequence[str],
    *,
    ports: npt.ArrayLike | None = None,
    guid_base: int = SERVICE_GUID_BASE,
    lmc: int = 0,
    speed: str | None = None,
    width: int | None = None,
    device_id: int = CONNECTX7_DEVICE_ID,
) -> Fabric:
    """``fabric`` with one single-port CA per entry of ``switches`` ((K,) switch
    node indices, repeats put several CAs on one switch) described ``descs``
    (K strings, e.g. ``"ufm01 HCA-1"``, ``"storage-gw01 HCA-1"``).

    ``ports`` ((K,) int, 0 = choose) names the switch port of each CA (a free
    regular port, e.g. the second half ``2k`` of a split port); otherwise a CA
    takes its switch's lowest free regular port not named in ``ports``, or a
    port added above the switch's regular ports (an aggregation node on the
    switch's top port moves up to stay one above them).  Node GUIDs are
    ``guid_base + (i << 4)``, continuing after the nodes already under that
    base (so repeated calls do not collide); port GUID node GUID + 1; vendor
    0x2c9, ``device_id``; system image GUID = node GUID; LIDs above the
    fabric's (aligned to ``2**lmc``, LMC ``lmc``).  New nodes follow the
    existing ones in the order given.
    """
    req = switch_arg(fabric, switches, unique=False)
    k = len(req)
    if len(descs) != k:
        raise FabricError(f"{k} switches but {len(descs)} descriptions")
    n = fabric.n_nodes
    num_ports = fabric.num_ports.astype(np.int64)
    agg_top = agg_on_top(fabric)
    regular = num_ports - agg_top
    pn = fabric.port_node.astype(np.int64)
    pnum = fabric.port_num.astype(np.int64)
    port = np.zeros(k, dtype=np.int64)
    if ports is not None:
        port = np.broadcast_to(np.asarray(ports, dtype=np.int64), (k,)).copy()
    named = port != 0
    taken = np.zeros(fabric.n_ports, dtype=bool)
    if named.any():
        nn, pp = req[named], port[named]
        bad = (pp < 1) | (pp > regular[nn])
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise FabricError(
                f"{fabric.describe_node(int(nn[i]))} has no regular port {int(pp[i])} "
                f"(1..{int(regular[nn[i]])})"
            )
        rows = fabric.port_start[nn] + pp
        busy = fabric.port_peer[rows] >= 0
        by_row = np.argsort(rows, kind="stable")
        busy[by_row[1:]] |= rows[by_row[1:]] == rows[by_row[:-1]]  # named twice
        if busy.any():
            i = int(np.flatnonzero(busy)[0])
            raise FabricError(f"port {int(pp[i])} of {fabric.describe_node(int(nn[i]))} "
                              "is in use or named twice")
        taken[rows] = True
    # free regular ports of the requested switches, per switch ascending
    target = np.zeros(n, dtype=bool)
    target[req[~named]] = True
    cand = np.flatnonzero(
        target[pn] & (pnum >= 1) & (pnum <= regular[pn]) & (fabric.port_peer < 0) & ~taken
    )  # port rows are ordered by node, then port
    free_count = np.bincount(pn[cand], minlength=n)
    free_start = np.cumsum(free_count) - free_count
    # rank of each unnamed request among those for the same switch
    auto = np.flatnonzero(~named)
    areq = req[auto]
    order = np.argsort(areq, kind="stable")
    sreq = areq[order]
    rank = np.empty(len(auto), dtype=np.int64)
    rank[order] = np.arange(len(auto), dtype=np.int64) - np.searchsorted(sreq, sreq, "left")
    has_free = rank < free_count[areq]
    pick = cand[np.minimum(free_start[areq] + rank, max(len(cand) - 1, 0))] if len(cand) else 0
    port[auto] = np.where(has_free, pnum[pick], regular[areq] + rank - free_count[areq] + 1)
    grow = np.maximum(np.bincount(areq, minlength=n) - free_count, 0)
    new_ports = num_ports + grow
    port_map = pnum.copy()
    moved = np.flatnonzero(agg_top & (grow > 0))
    port_map[fabric.port_start[moved] + num_ports[moved]] = new_ports[moved]
    b = rebuild(fabric, new_ports, port_map)

    base = np.uint64(guid_base)
    span = fabric.node_guid - base  # wraps (huge) below base: filtered out
    mine = span[span < np.uint64(1 << 32)]
    first = int(mine.max() >> np.uint64(4)) + 1 if len(mine) else 0
    guids = base + ((np.arange(k, dtype=np.uint64) + np.uint64(first)) << np.uint64(4))
    pguids = guids + np.uint64(1)
    check_new_guids(fabric, guids, pguids)
    nodes = b.add_nodes(
        NodeType.CA, guids, 1, list(descs), sysimg_guids=guids, vendor_id=_VENDOR_ID,
        device_id=device_id,
    )
    w, s = link_attrs(fabric, req, speed, width)
    b.set_ports(nodes, 1, guid=pguids, lid=new_lids(fabric, k, lmc), lmc=lmc, width=w, speed=s)
    b.set_ports(req, port, width=w, speed=s)
    b.add_links_rows(nodes, np.ones(k, dtype=np.int64), req, port)
    return b.build()


# --------------------------------------------------------------------------- split ports
def with_split_ports(
    fabric: Fabric,
    switches: npt.ArrayLike,
    *,
    split: str | npt.ArrayLike = "cas",
    width: int = 2,
) -> Fabric:
    """``fabric`` with ``switches`` ((K,) node indices) in split-ready mode and
    some of their ports split.

    A switch with ``R`` regular ports (its port count, less an aggregation
    node's top port) gets ``2R`` (+1): physical port ``k`` becomes IB port
    ``2k - 1`` (its link, if any, moves there) and ``2k`` (its second half), and
    an aggregation node moves to ``2R + 1``.  Split ports (``split``: ``"cas"``
    the ports linked to a CA other than an aggregation node, ``"all"`` every
    linked regular port, ``"none"``, or a (P,) bool mask over ``fabric``'s
    port rows) carry ``width`` lanes at both ends; their second half ``2k`` is
    free (give it to :func:`attach_cas` as ``ports=2k``).  The model has no
    notion of a port that is absent: every port ``1..num_ports`` exists, so the
    unused halves of unsplit ports are free port numbers too (as on the real
    switch, where they are down).
    """
    sw = switch_arg(fabric, switches, unique=True)
    if width not in (1, 2, 4, 8, 12):
        raise FabricError(f"link width {width}x is not an IB width")
    n = fabric.n_nodes
    num_ports = fabric.num_ports.astype(np.int64)
    agg_top = agg_on_top(fabric)
    regular = num_ports - agg_top
    target = np.zeros(n, dtype=bool)
    target[sw] = True
    pn = fabric.port_node.astype(np.int64)
    pnum = fabric.port_num.astype(np.int64)
    reg_row = target[pn] & (pnum >= 1) & (pnum <= regular[pn])
    top_row = target[pn] & agg_top[pn] & (pnum == num_ports[pn])
    port_map = pnum.copy()
    port_map[reg_row] = 2 * pnum[reg_row] - 1
    port_map[top_row] = 2 * regular[pn[top_row]] + 1
    new_ports = num_ports.copy()
    new_ports[sw] = 2 * regular[sw] + agg_top[sw]

    peer = fabric.port_peer
    linked = reg_row & (peer >= 0)
    if isinstance(split, str):
        if split == "cas":
            is_agg = is_aggregation(fabric)
            pnode = pn[np.maximum(peer, 0)]
            mask = linked & (fabric.node_type[pnode] == NodeType.CA) & ~is_agg[pnode]
        elif split == "all":
            mask = linked
        elif split == "none":
            mask = np.zeros(fabric.n_ports, dtype=bool)
        else:
            raise FabricError(f"split must be 'cas', 'all', 'none' or a mask, not {split!r}")
    else:
        m = np.asarray(split, dtype=bool)
        if m.shape != (fabric.n_ports,):
            raise FabricError(f"split mask has shape {m.shape}, expected ({fabric.n_ports},)")
        mask = m & reg_row
    rows = np.flatnonzero(mask)
    b = rebuild(fabric, new_ports, port_map)
    ends = np.concatenate([rows, peer[rows][peer[rows] >= 0]])
    b.set_ports(pn[ends], port_map[ends], width=width)
    return b.build()


def port_labels(num_ports: int, *, split_ready: bool = False, style: str = "quantum2") -> list[str]:
    """ibdiagnet's label of each IB port ``1..num_ports`` of a switch, as a list.

    ``style="quantum2"`` (64-port Quantum-2, two ports per OSFP cage):
    ``ASIC/cage/port`` (``1/1/1``, ``1/1/2``, ``1/2/1``, ..) or, split-ready,
    ``ASIC/cage/port/split`` for IB ports ``2k-1``, ``2k`` of physical port
    ``k``; ``style="quantum"`` (40-port Quantum): ``k`` or ``k/split``.
    """
    p = np.arange(1, num_ports + 1, dtype=np.int64)
    phys = (p + 1) // 2 if split_ready else p
    half = (p - 1) % 2 + 1
    if style == "quantum2":
        cage, pic = (phys - 1) // 2 + 1, (phys - 1) % 2 + 1
        if split_ready:
            return [f"1/{c}/{q}/{h}" for c, q, h in zip(cage.tolist(), pic.tolist(),
                                                        half.tolist(), strict=True)]
        return [f"1/{c}/{q}" for c, q in zip(cage.tolist(), pic.tolist(), strict=True)]
    if style == "quantum":
        if split_ready:
            return [f"{k}/{h}" for k, h in zip(phys.tolist(), half.tolist(), strict=True)]
        return [str(k) for k in phys.tolist()]
    raise FabricError(f"unknown port label style {style!r} (quantum2, quantum)")
