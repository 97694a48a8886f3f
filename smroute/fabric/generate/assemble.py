"""Assemble a generated fabric from its levels and link rows (:func:`assemble`),
with the GUID, LID, vendor and device conventions of :mod:`smroute.fabric.generate.trees`
(used by its generators and by those of :mod:`smroute.fabric.generate.shapes`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError, NodeType, speed_code
from smroute.fabric.model.builder import FabricBuilder

__all__ = ["DEFAULT_GUID_BASE", "MAX_UNICAST_LID", "Level", "assemble"]

IntArray = npt.NDArray[np.int64]

#: Default GUID prefix (Mellanox-style OUI 00:02:c9, then 0x03): levels and
#: indices fill the low 32 bits.
DEFAULT_GUID_BASE = 0x0002_C903_0000_0000
#: Highest unicast LID.
MAX_UNICAST_LID = 0xBFFF
_VENDOR_ID = 0x2C9
_SWITCH_DEVICE_ID = 0xCB20
_CA_DEVICE_ID = 0x1017
_MAX_INDEX = 1 << 24  # nodes per level representable in the GUID layout
_MAX_LEVEL = 15


@dataclass
class Level:
    """One level of a generated tree: ``count`` nodes (full index space),
    ``present`` (count,) bool, ``num_ports`` (count,) int64, ``descs``;
    ``sysimg`` the system image GUID of every node of the level (default: each
    node's own GUID) and ``device_id`` (default: the generator's)."""

    level: int
    count: int
    num_ports: IntArray
    descs: list[str]
    present: npt.NDArray[np.bool_] | None = None
    sysimg: int | None = None
    device_id: int | None = None


def assemble(
    levels: list[Level],
    links: list[tuple[int, IntArray, IntArray, int, IntArray, IntArray]],
    *,
    lmc: int,
    speed: str,
    width: int,
    guid_base: int,
) -> Fabric:
    """Build the fabric (conventions: :mod:`smroute.fabric.generate.trees`).
    ``levels[0]`` are hosts (CAs), the rest switches.  ``links`` rows:
    ``(level_a, index_a (L,), ib_port_a (L,), level_b, index_b, ib_port_b)``
    with indices in each level's full index space."""
    if not 0 <= lmc <= 7:
        raise FabricError(f"LMC {lmc} not in 0..7")
    if width not in (1, 2, 4, 8, 12):
        raise FabricError(f"link width {width}x is not an IB width")
    try:
        spd = speed_code(speed)
    except KeyError:
        raise FabricError(f"unknown link speed {speed!r}") from None
    if len(levels) - 1 > _MAX_LEVEL:
        raise FabricError(f"at most {_MAX_LEVEL} switch levels are supported")

    b = FabricBuilder()
    node_of: list[IntArray] = []  # per level: full index -> node index (-1 absent)
    next_switch_lid = 0
    for lv in levels:
        if lv.count > _MAX_INDEX:
            raise FabricError(f"level {lv.level} has {lv.count} nodes, at most {_MAX_INDEX}")
        idx = np.arange(lv.count, dtype=np.int64)
        if lv.present is not None:
            idx = idx[lv.present]
        guids = np.uint64(guid_base) + (
            (np.uint64(lv.level) << np.uint64(28)) + (idx.astype(np.uint64) << np.uint64(4))
        )
        kind = NodeType.CA if lv.level == 0 else NodeType.SWITCH
        nports = lv.num_ports[idx]
        device = _CA_DEVICE_ID if kind == NodeType.CA else _SWITCH_DEVICE_ID
        nodes = b.add_nodes(
            kind, guids, nports, [lv.descs[i] for i in idx.tolist()],
            sysimg_guids=guids if lv.sysimg is None else np.uint64(lv.sysimg),
            vendor_id=_VENDOR_ID, device_id=device if lv.device_id is None else lv.device_id,
        )
        full = np.full(lv.count, -1, dtype=np.int64)
        full[idx] = nodes
        node_of.append(full)
        if kind == NodeType.CA:
            if (nports > 15).any():
                raise FabricError("hosts with more than 15 ports do not fit the GUID layout")
            # CA ports: GUID node+port, LIDs (k+1) << lmc in node/port order
            n_ca_ports = int(nports.sum())
            pn = np.repeat(nodes, nports)
            first = np.repeat(np.cumsum(nports) - nports, nports)
            pp = np.arange(n_ca_ports, dtype=np.int64) - first + 1
            pg = np.repeat(guids, nports) + pp.astype(np.uint64)
            lids = (np.arange(n_ca_ports, dtype=np.int64) + 1) << lmc
            if n_ca_ports and int(lids[-1]) + (1 << lmc) - 1 > MAX_UNICAST_LID:
                raise FabricError(f"{n_ca_ports} CA ports with LMC {lmc} exceed LID 0xBFFF")
            b.set_ports(pn, pp, guid=pg, lid=lids, lmc=lmc)
            next_switch_lid = (n_ca_ports + 1) << lmc
        else:
            lids = next_switch_lid + np.arange(len(nodes), dtype=np.int64)
            next_switch_lid += len(nodes)
            if len(lids) and int(lids[-1]) > MAX_UNICAST_LID:
                raise FabricError("too many LIDs: switches exceed LID 0xBFFF")
            b.set_ports(nodes, 0, guid=guids, lid=lids)

    lvl_pos = {lv.level: i for i, lv in enumerate(levels)}
    for la, ia, pa, lb, ib, pb in links:
        na = node_of[lvl_pos[la]][ia]
        nb = node_of[lvl_pos[lb]][ib]
        keep = (na >= 0) & (nb >= 0)
        na, nb, pa_k, pb_k = na[keep], nb[keep], pa[keep], pb[keep]
        b.add_links_rows(na, pa_k, nb, pb_k)
        b.set_ports(
            np.concatenate([na, nb]), np.concatenate([pa_k, pb_k]), width=width, speed=spd,
        )
    return b.build()
