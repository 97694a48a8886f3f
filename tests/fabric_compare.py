"""Compare two fabrics as ibnetdiscover text carries them (helper module for
tests, not a test): nodes with all attributes, links, and the attributes of
linked ports and switch ports 0."""

from __future__ import annotations

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType


def node_key(f: Fabric) -> list[tuple[object, ...]]:
    order = np.argsort(f.node_guid, kind="stable").tolist()
    return [
        (int(f.node_guid[i]), int(f.node_type[i]), int(f.sysimg_guid[i]), int(f.vendor_id[i]),
         int(f.device_id[i]), int(f.num_ports[i]), f.node_desc[i])
        for i in order
    ]


def port_attrs(f: Fabric) -> dict[tuple[int, int], tuple[int, ...]]:
    """(node GUID, port) -> (port GUID, LID, LMC, width, speed) of every linked
    port and every switch port 0: what ibnetdiscover text carries."""
    rows = np.flatnonzero(
        (f.port_peer >= 0) | ((f.port_num == 0) & (f.node_type[f.port_node] == NodeType.SWITCH))
    )
    return {
        (int(f.node_guid[f.port_node[r]]), int(f.port_num[r])): (
            int(f.port_guid[r]), int(f.port_lid[r]), int(f.port_lmc[r]),
            int(f.port_width[r]), int(f.port_speed[r]),
        )
        for r in rows.tolist()
    }


def assert_same_fabric(got: Fabric, want: Fabric) -> None:
    """Same nodes (all attributes), links, and attributes of linked ports."""
    assert node_key(got) == node_key(want)
    assert got.link_set() == want.link_set()
    assert port_attrs(got) == port_attrs(want)
