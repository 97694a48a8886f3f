"""What the daemon's metrics count: a dry run is no fault event, and a
Route request that cannot be routed as asked is a rejected request (its own
counter), not a reroute failure (the "tables are stale" alert); a real
reroute failure still is one.  On a real RoutingCore."""

from __future__ import annotations

import numpy as np
import pytest

from smroute.errors import SmrouteError
from smroute.fabric.faults import FaultEvent
from smroute.fabric.generate.trees import degrade, pgft
from smroute.service.core import RoutingCore
from smroute.service.errors import ServiceError
from smroute.service.metrics import ServiceMetrics


def _count(m: ServiceMetrics, name: str, **labels: str) -> float:
    return m.value(name, **labels) or 0.0


@pytest.mark.usefixtures("offer_dmodk")
def test_dry_runs_and_bad_routes_are_not_faults_nor_reroute_failures() -> None:
    f, _ = degrade(pgft(3, [2, 2, 2], [1, 2, 2], [1, 1, 1]), np.random.default_rng(0), links=6)
    m = ServiceMetrics()
    core = RoutingCore(workers=1, coalesce_s=0.0, metrics=m, validate_epochs=False)
    try:
        core.load_fabric(f, "degraded")
        good = core.route("dmodc")
        sw = int(f.node_guid[f.switches[0]])
        out = core.apply_faults([FaultEvent("switch_down", sw)], dry_run=True)
        assert out.diff is not None and core.store.current is not None
        assert core.store.current.id == good.id
        assert _count(m, "smroute_fault_events_total", kind="switch_down") == 0
        # D-mod-K leaves pairs of this degraded tree unrouted: the request is refused
        with pytest.raises(ServiceError, match="refused to commit"):
            core.route("dmodk")
        # LMC 7 does not fit the LIDs the fabric's ports have: bad input
        with pytest.raises(SmrouteError):
            core.route("dmodc", lmc=7)
        assert _count(m, "smroute_reroute_failures_total", reason="unrouted_pairs") == 0
        assert _count(m, "smroute_reroute_failures_total", reason="routing_error") == 0
        assert _count(m, "smroute_reroute_failures_total", reason="route") == 0
        assert _count(m, "smroute_route_rejections_total") == 1
        # a real fault is counted
        core.apply_faults([FaultEvent("switch_down", sw)])
        assert _count(m, "smroute_fault_events_total", kind="switch_down") == 1
    finally:
        core.close()
