"""The built-in routing engines: Nmodc (:mod:`smroute.routing.nmodc`, the
default), Dmodc (the paper) and D-mod-K (lab-only,
:mod:`smroute.routing.dmodk`), registered in :data:`~smroute.routing.api.REGISTRY`
in the order they are offered."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.routing import dmodc, kernel
from smroute.routing.api import (
    Arrays,
    Guarantees,
    Pass,
    Prepared,
    Runner,
    base_arrays,
    dest_from,
    graph_from,
    register,
)
from smroute.routing.dmodk import route_tables as dmodk_tables
from smroute.routing.nmodc.engine import Nmodc
from smroute.routing.reroute import IncrementalHook
from smroute.routing.topology import SwitchGraph

__all__ = ["DMODC", "DMODK", "NMODC", "Dmodc", "Dmodk", "prepare_dmodc"]


def prepare_dmodc(g: SwitchGraph, lmc: int | None, clock: Callable[[], float],
                  timings: dict[str, float], costs: np.ndarray | None = None) -> Prepared:
    """Dmodc's costs (``costs`` if known), dividers (Algorithm 1), NIDs and
    destinations of ``g``."""
    t = clock()
    c, pi = dmodc.costs_and_dividers(g) if costs is None else (costs, dmodc.dividers(g))
    t2 = clock()
    timings["costs"] = t2 - t
    nids = dmodc.topological_nids(g, c)
    dest = dmodc.destinations(g, nids, lmc=lmc)
    timings["nids"] = clock() - t2
    return Prepared(g, c, pi, nids, dest)


class Dmodc:
    """Dmodc (Gliksberg et al.): the closed form of eq. 1-4 over the closer
    port groups of Dmodc's costs; no pass after the kernel."""

    name = "dmodc"
    title = "Dmodc"
    guarantees = Guarantees(closer_groups=True, incremental=True, dmodc_tables=True,
                            stateless=True)
    incremental: IncrementalHook | None = IncrementalHook()
    pooled = True

    def prepare(self, g: SwitchGraph, lmc: int | None, clock: Callable[[], float],
                timings: dict[str, float], costs: np.ndarray | None = None) -> Prepared:
        return prepare_dmodc(g, lmc, clock, timings, costs)

    def tables(self, fabric: Fabric, prep: Prepared, pool: Runner | None) -> np.ndarray:
        assert pool is not None
        return pool.run(self, prep)

    def arrays(self, prep: Prepared) -> Arrays:
        return base_arrays(prep)

    def kernel(self, a: Arrays, switches: np.ndarray, out: np.ndarray,
               cache: dict[str, Any]) -> None:
        if not cache:
            dest = dest_from(a)
            cache.update(g=graph_from(a), dest=dest, ctx=kernel.route_context(a["c"], dest))
        kernel.route_block(cache["g"], a["c"], a["pi"], cache["dest"], switches, out,
                          cache["ctx"])

    def passes(self, prep: Prepared) -> Sequence[Pass]:
        return ()


class Dmodk(Dmodc):
    """D-mod-K (:mod:`smroute.routing.dmodk`): lab-only, complete generated
    PGFTs only, on Dmodc's costs and destinations; whole tables in this
    process (no kernel per block, no incremental reroute)."""

    name = "dmodk"
    title = "D-mod-K"
    guarantees = Guarantees(closer_groups=False, trees_only=True, lab_only=True,
                            stateless=True)
    incremental: IncrementalHook | None = None
    pooled = False

    def tables(self, fabric: Fabric, prep: Prepared, pool: Runner | None) -> np.ndarray:
        return dmodk_tables(fabric, prep.graph, prep.costs, prep.dividers, prep.dest)

    def kernel(self, a: Arrays, switches: np.ndarray, out: np.ndarray,
               cache: dict[str, Any]) -> None:
        raise NotImplementedError("D-mod-K routes whole tables from the fabric's PGFT tuples")


NMODC = register(Nmodc())  # the default (api.DEFAULT): offered first
DMODC = register(Dmodc())
DMODK = register(Dmodk())
