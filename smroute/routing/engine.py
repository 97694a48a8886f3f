"""Route a fabric: preprocessing, the worker pool, and the resulting tables.

:func:`route` is the one entry point: it takes a fabric and returns a
:class:`RoutingResult` with the forwarding tables, the NIDs and the time of
each phase.  Time is measured with a clock passed in (``time.perf_counter``
by default) so callers and tests control it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from smroute.errors import RoutingError
from smroute.fabric.model import Fabric
from smroute.routing import dmodc, dmodk
from smroute.routing.dmodc import Destinations
from smroute.routing.pool import RoutePool
from smroute.routing.topology import SwitchGraph, switch_graph
from smroute.tables.lft import ForwardingTables, lid_labels

__all__ = ["ALGORITHMS", "RoutingResult", "route"]

ALGORITHMS = ("dmodc", "dmodk")


@dataclass(frozen=True, eq=False)
class RoutingResult:
    """Tables and by-products of one routing run.

    graph: the switch graph routed; costs ``(S, S)`` uint8; dividers ``(S,)``;
    nids ``(E,)`` topological NIDs of the end-ports (aligned with
    ``graph.ep_row``); dest: the routed LIDs; timings: seconds per phase.
    """

    algorithm: str
    tables: ForwardingTables
    graph: SwitchGraph
    costs: np.ndarray
    dividers: np.ndarray
    nids: np.ndarray
    dest: Destinations
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def total_seconds(self) -> float:
        return float(sum(self.timings.values()))


def route(
    fabric: Fabric,
    *,
    algorithm: str = "dmodc",
    lmc: int | None = None,
    pool: RoutePool | None = None,
    workers: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
    labels: bool = True,
) -> RoutingResult:
    """Compute forwarding tables for every switch and every destination LID.

    ``lmc``: route ``2**lmc`` LIDs per end-port (``None``: the LMC each port
    has in the fabric).  ``pool``: a live :class:`RoutePool` (else one with
    ``workers`` processes is made for this call).  ``labels``: attach per-LID
    GUIDs/descriptions for the OpenSM-format writer.
    Raises :class:`~smroute.errors.RoutingError` if the fabric cannot be routed.
    """
    if algorithm not in ALGORITHMS:
        raise RoutingError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    if lmc is not None and not 0 <= lmc <= 7:
        raise RoutingError(f"LMC must be 0..7, got {lmc}")
    timings: dict[str, float] = {}
    t0 = clock()
    g = switch_graph(fabric)
    if g.n_switches == 0:
        raise RoutingError("the fabric has no switch to route")
    if len(g.leaves) == 0:
        raise RoutingError("no switch has an end-port attached: nothing to route")
    t1 = clock()
    timings["rank"] = t1 - t0
    c, pi = dmodc.costs_and_dividers(g)
    t2 = clock()
    timings["costs"] = t2 - t1
    nids = dmodc.topological_nids(g, c)
    dest = dmodc.destinations(g, nids, lmc=lmc)
    t3 = clock()
    timings["nids"] = t3 - t2

    if algorithm == "dmodk":
        ports = dmodk.route_tables(fabric, g, c, pi, dest)
    else:
        own = pool is None
        p = pool if pool is not None else RoutePool(workers)
        try:
            ports = p.route(g, c, pi, dest)
        finally:
            if own:
                p.close()
    t4 = clock()
    timings["routes"] = t4 - t3

    width = ports.shape[1]
    lg, lk, ld = lid_labels(fabric, width) if labels else (None, None, None)
    tables = ForwardingTables(
        switch_guid=g.sw_guid,
        switch_lid=g.sw_lid,
        switch_desc=tuple(fabric.node_desc[n] for n in g.sw_node.tolist()),
        ports=ports,
        lid_guid=lg,
        lid_kind=lk,
        lid_desc=ld,
    )
    return RoutingResult(algorithm, tables, g, c, pi, nids, dest, timings)
