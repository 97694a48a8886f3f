"""A routing that the tests' fabrics must pass: valid, free of credit loops."""

from __future__ import annotations

from smroute.fabric.model.arrays import Fabric
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.engine import RoutingResult, route, validate_result


def routed_ok(f: Fabric, **kw: object) -> RoutingResult:
    """``route(f, workers=1, **kw)``, asserted valid (the validation walk)
    and free of credit loops over its lanes."""
    r = route(f, workers=1, **kw)  # type: ignore[arg-type]
    v = validate_result(r)
    assert v.ok, v.summary()
    assert check_credit_loops(f, r.tables, r.lanes).ok
    return r
