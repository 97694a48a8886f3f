"""Linear forwarding tables: a switch x LID array of output ports."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType

__all__ = ["NO_ROUTE", "BLOCK", "ForwardingTables", "lid_labels"]

#: LFT entry meaning "no route" (OpenSM's OSM_NO_PATH).
NO_ROUTE = 255
#: LIDs per LFT block, the unit a subnet manager writes (SubnLinearForwardingTable).
BLOCK = 64


@dataclass(frozen=True, eq=False)
class ForwardingTables:
    """Forwarding tables of a set of switches.

    switch_guid: ``(S,)`` uint64 node GUIDs.
    switch_lid: ``(S,)`` int64 switch LIDs (0 if unknown).
    switch_desc: S node descriptions.
    ports: ``(S, W)`` uint8, ``ports[i, lid]`` = output port of switch ``i`` for
        ``lid`` (:data:`NO_ROUTE` if none); ``W = max LID + 1``.
    lid_guid / lid_kind / lid_desc: optional per-LID ``(W,)`` port GUID (uint64,
        0 unknown), node type (int8, 0 unknown) and descriptions, written as
        comments by the OpenSM-format writer.
    """

    switch_guid: np.ndarray
    switch_lid: np.ndarray
    switch_desc: tuple[str, ...]
    ports: np.ndarray
    lid_guid: np.ndarray | None = None
    lid_kind: np.ndarray | None = None
    lid_desc: tuple[str, ...] | None = None
    _index: dict[int, int] = field(default_factory=dict, repr=False)

    @property
    def n_switches(self) -> int:
        return int(self.switch_guid.shape[0])

    @property
    def max_lid(self) -> int:
        return int(self.ports.shape[1]) - 1

    def row_of(self, guid: int) -> int:
        """Row of a switch GUID; ``KeyError`` if absent."""
        if not self._index:
            self._index.update({int(g): i for i, g in enumerate(self.switch_guid.tolist())})
        return self._index[int(guid)]

    def widened(self, width: int) -> np.ndarray:
        """``ports`` padded with :data:`NO_ROUTE` to ``width`` columns."""
        if width <= self.ports.shape[1]:
            return self.ports[:, :width]
        out = np.full((self.n_switches, width), NO_ROUTE, dtype=np.uint8)
        out[:, : self.ports.shape[1]] = self.ports
        return out

    def nbytes(self) -> int:
        return int(self.ports.nbytes)


def lid_labels(fabric: Fabric, width: int) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Per-LID port GUID, node type and description of ``fabric``.

    Returns arrays of shape ``(width,)``: uint64 GUIDs, int8 node types (0 where
    no port owns the LID) and a tuple of descriptions.
    """
    guid = np.zeros(width, dtype=np.uint64)
    kind = np.zeros(width, dtype=np.int8)
    l2p = fabric.lid_to_port[:width]
    lids = np.flatnonzero(l2p >= 0)
    rows = l2p[lids]
    nodes = fabric.port_node[rows]
    pg = fabric.port_guid[rows].copy()
    sw = fabric.node_type[nodes] == NodeType.SWITCH
    pg[sw & (pg == 0)] = fabric.node_guid[nodes[sw & (pg == 0)]]
    guid[lids] = pg
    kind[lids] = fabric.node_type[nodes]
    desc = [""] * width
    for lid, n in zip(lids.tolist(), nodes.tolist(), strict=True):
        desc[lid] = fabric.node_desc[n]
    return guid, kind, tuple(desc)
