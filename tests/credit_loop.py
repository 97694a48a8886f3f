"""A hand-made credit loop for the deadlock checks (ours and ibdmchk).

On PGFT(2;2,3;1,2;1,1) (3 leaves, 2 spines, 6 hosts), three destinations are
re-routed over down->up turns whose channel dependencies close the cycle
spine A -> leaf 2 -> spine B -> leaf 1 -> spine A; every path is still
delivered (30 host pairs).
"""

from __future__ import annotations

import numpy as np

from smroute.fabric.generate.trees import pgft
from smroute.fabric.model.arrays import Fabric
from smroute.routing.engine import RoutingResult
from smroute.tables.lft import ForwardingTables

#: The switches on the loop (descriptions).
ON_LOOP = {"pgft L2 0.0", "pgft L2 1.0", "pgft L1 1.0", "pgft L1 2.0"}


def loop_fabric() -> Fabric:
    """The 2-level tree the loop is made on."""
    return pgft(2, [2, 3], [1, 2], [1, 1])


def credit_loop_tables(fabric: Fabric, r: RoutingResult) -> ForwardingTables:
    """``r``'s tables of :func:`loop_fabric` with the three destinations
    re-routed around the loop."""
    t = r.tables
    node = {d: i for i, d in enumerate(fabric.node_desc)}
    leaf = [node[f"pgft L1 {i}.0"] for i in range(3)]
    a, b = node["pgft L2 0.0"], node["pgft L2 1.0"]

    def port_to(x: int, y: int) -> int:
        rows = np.arange(fabric.port_start[x], fabric.port_start[x] + fabric.num_ports[x] + 1)
        hit = rows[(fabric.port_peer[rows] >= 0)
                   & (fabric.port_node[np.maximum(fabric.port_peer[rows], 0)] == y)]
        return int(fabric.port_num[hit[0]])

    def lid(i: int) -> int:
        return int(fabric.port_lid[fabric.port_start[node[f"host {i}.0"]] + 1])

    x, y, z = lid(1), lid(0), lid(2)
    hops = [(leaf[0], x, a), (a, x, leaf[2]), (leaf[2], x, b), (b, x, leaf[1]),
            (leaf[2], y, b), (b, y, leaf[1]), (leaf[1], y, a), (a, y, leaf[0]),
            (leaf[1], z, a), (a, z, leaf[2])]
    ports = t.ports.copy()
    for s, d, to in hops:
        ports[t.row_of(int(fabric.node_guid[s])), d] = port_to(s, to)
    return ForwardingTables(t.switch_guid, t.switch_lid, t.switch_desc, ports)
