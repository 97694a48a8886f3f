"""Editing a fabric for the transforms of :mod:`smroute.fabric.generate.shapes`: a
builder holding a copy with renumbered ports (:func:`rebuild`), LIDs, link
width/speed and GUID checks for new nodes, switch arguments, and finding the
SHARP aggregation nodes (:func:`aggregation_nodes`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from smroute.fabric.generate.assemble import MAX_UNICAST_LID
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError, NodeType, speed_code
from smroute.fabric.model.builder import FabricBuilder

__all__ = [
    "AGGREGATION_NODE_DESC",
    "aggregation_nodes",
    "agg_on_top",
    "check_new_guids",
    "is_aggregation",
    "link_attrs",
    "new_lids",
    "rebuild",
    "switch_arg",
]

IntArray = npt.NDArray[np.int64]

#: Node description of a SHARP aggregation node, exactly as real switches report it.
AGGREGATION_NODE_DESC = "Mellanox Technologies Aggregation Node"


def switch_arg(fabric: Fabric, switches: npt.ArrayLike | None, *, unique: bool) -> IntArray:
    """Validated switch node indices, shape ``(K,)`` int64 (sorted and unique
    if ``unique``; all switches if ``switches`` is None)."""
    if switches is None:
        return fabric.switches.astype(np.int64)
    sw = np.atleast_1d(np.asarray(switches, dtype=np.int64))
    if sw.ndim != 1:
        raise FabricError("switches must be a 1-d array of node indices")
    if len(sw) and (sw.min() < 0 or sw.max() >= fabric.n_nodes):
        raise FabricError(f"switch index out of range 0..{fabric.n_nodes - 1}")
    bad = fabric.node_type[sw] != NodeType.SWITCH
    if bad.any():
        raise FabricError(f"{fabric.describe_node(int(sw[bad][0]))} is not a switch")
    return np.unique(sw) if unique else sw


def is_aggregation(fabric: Fabric) -> npt.NDArray[np.bool_]:
    """Per node, shape ``(N,)`` bool: a CA described as an aggregation node."""
    desc = np.asarray(fabric.node_desc, dtype=object)
    return (fabric.node_type == NodeType.CA) & (desc == AGGREGATION_NODE_DESC)


def aggregation_nodes(fabric: Fabric) -> IntArray:
    """Node indices of the SHARP aggregation nodes (CAs described
    :data:`AGGREGATION_NODE_DESC`), ascending, shape ``(K,)`` int64."""
    return np.flatnonzero(is_aggregation(fabric))


def agg_on_top(fabric: Fabric) -> npt.NDArray[np.bool_]:
    """Per node, shape ``(N,)`` bool: a switch whose highest port links to an
    aggregation node (the extra port of a Quantum switch)."""
    top = fabric.port_start + fabric.num_ports.astype(np.int64)
    peer = fabric.port_peer[top]
    is_agg = is_aggregation(fabric)
    ok = peer >= 0
    out = np.zeros(fabric.n_nodes, dtype=bool)
    out[ok] = is_agg[fabric.port_node[peer[ok]]]
    return out & (fabric.node_type == NodeType.SWITCH)


def rebuild(fabric: Fabric, num_ports: IntArray, port_num: IntArray) -> FabricBuilder:
    """A builder holding a copy of ``fabric``: the same nodes at the same
    indices with port counts ``num_ports`` (N,) int64, port row ``r`` renamed
    to port number ``port_num[r]`` ((P,) int64), every existing port's
    attributes and every link."""
    if (num_ports > 255).any():
        i = int(np.flatnonzero(num_ports > 255)[0])
        raise FabricError(f"{fabric.describe_node(i)} would have {int(num_ports[i])} ports (> 255)")
    b = FabricBuilder()
    view = dataclasses.replace(fabric, num_ports=num_ports.astype(np.int16), _cache={})
    b.add_node_arrays(view, np.arange(fabric.n_nodes, dtype=np.int64))
    rows = np.flatnonzero(fabric.port_exists)
    b.set_ports(
        fabric.port_node[rows], port_num[rows], guid=fabric.port_guid[rows],
        lid=fabric.port_lid[rows], lmc=fabric.port_lmc[rows],
        width=fabric.port_width[rows], speed=fabric.port_speed[rows],
    )
    la, lb = fabric.link_a, fabric.link_b
    b.add_links_rows(fabric.port_node[la], port_num[la], fabric.port_node[lb], port_num[lb])
    return b


def new_lids(fabric: Fabric, count: int, lmc: int) -> IntArray:
    """Base LIDs for ``count`` new CA ports with LMC ``lmc``, shape ``(count,)``
    int64: above the fabric's highest LID, aligned; zeros if it has no LIDs."""
    if not 0 <= lmc <= 7:
        raise FabricError(f"LMC {lmc} not in 0..7")
    if not (fabric.port_lid != 0).any():
        return np.zeros(count, dtype=np.int64)
    step = 1 << lmc
    first = -(-len(fabric.lid_to_port) // step) * step
    lids = first + step * np.arange(count, dtype=np.int64)
    if count and int(lids[-1]) + step - 1 > MAX_UNICAST_LID:
        raise FabricError(f"{count} more CA ports with LMC {lmc} exceed LID 0xBFFF")
    return lids


def link_attrs(
    fabric: Fabric, nodes: IntArray, speed: str | None, width: int | None
) -> tuple[IntArray, IntArray]:
    """Width (lanes) and speed code for new links on ``nodes`` (K,): the given
    ones, or the widest / fastest linked port of each node (4x / 0 if none)."""
    if width is not None and width not in (1, 2, 4, 8, 12):
        raise FabricError(f"link width {width}x is not an IB width")
    linked = np.flatnonzero(fabric.port_peer >= 0)
    if width is None:
        wmax = np.zeros(fabric.n_nodes, dtype=np.int64)
        np.maximum.at(wmax, fabric.port_node[linked], fabric.port_width[linked].astype(np.int64))
        w = np.where(wmax[nodes] > 0, wmax[nodes], 4)
    else:
        w = np.full(len(nodes), width, dtype=np.int64)
    if speed is None:
        smax = np.zeros(fabric.n_nodes, dtype=np.int64)
        np.maximum.at(smax, fabric.port_node[linked], fabric.port_speed[linked].astype(np.int64))
        s = smax[nodes]
    else:
        try:
            s = np.full(len(nodes), speed_code(speed), dtype=np.int64)
        except KeyError:
            raise FabricError(f"unknown link speed {speed!r}") from None
    return w, s


def check_new_guids(
    fabric: Fabric, node_guids: npt.NDArray[np.uint64], port_guids: npt.NDArray[np.uint64]
) -> None:
    """New node GUIDs (K,) and their port GUIDs (K,) must be non-zero, unique,
    and differ from every node and port GUID of ``fabric`` (a port GUID may
    equal its own node's GUID)."""
    used = np.union1d(fabric.node_guid, fabric.port_guid[fabric.port_guid != 0])
    own = port_guids == node_guids
    new = np.concatenate([node_guids, port_guids[~own]])
    if (new == 0).any():
        raise FabricError("a new GUID would be 0")
    vals, counts = np.unique(new, return_counts=True)
    clash = np.concatenate([vals[counts > 1], new[np.isin(new, used)]])
    if len(clash):
        raise FabricError(f"new GUID {int(clash[0]):#018x} is already used in the fabric")
