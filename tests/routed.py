"""A routing that the tests' fabrics must pass: valid, free of credit loops."""

from __future__ import annotations

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.engine import RoutingResult, route, validate_result
from smroute.routing.reroute import reroute


def routed_ok(f: Fabric, **kw: object) -> RoutingResult:
    """``route(f, workers=1, **kw)``, asserted valid (the validation walk)
    and free of credit loops over its lanes."""
    r = route(f, workers=1, **kw)  # type: ignore[arg-type]
    v = validate_result(r)
    assert v.ok, v.summary()
    assert check_credit_loops(f, r.tables, r.lanes).ok
    return r


def reroutes_equal_full_routes(prev: RoutingResult, f: Fabric, step: int) -> int:
    """Every ``step``-th cable between two switches of ``f`` cut alone: the
    full route of the fabric without it is valid, and where the reroute of
    ``prev`` is incremental its tables equal that route's; returns how many
    were incremental."""
    sw = f.node_type == NodeType.SWITCH
    inter = np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])
    incremental = 0
    for k in range(0, len(inter), step):
        f2 = f.with_removed(links=inter[k:k + 1])
        got = reroute(prev, f2, lmc=None)
        full = route(f2, workers=1)
        assert validate_result(full).ok, k
        if got.incremental:
            incremental += 1
            assert np.array_equal(got.result.tables.ports, full.tables.ports), k
    return incremental
