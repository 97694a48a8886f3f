"""Aggregation nodes take the last topological NIDs: they send no
application traffic, so a slot of the leaves' modulus given to one would
leave an up-cable without any host's traffic.  Nmodc's wrap gaps count the
leaves' up-cables (groups times their parallel cables) and the hosts only."""

from __future__ import annotations

import numpy as np
import pytest

from smroute.analysis import patterns as P
from smroute.analysis.congestion import evaluate
from smroute.analysis.jobs import topological_order
from smroute.analysis.paths import pair_paths, routing_view
from smroute.fabric.generate.shapes import with_aggregation_nodes
from smroute.fabric.generate.trees import pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import EndportRole, fabric_roles
from smroute.routing.engine import route, validate_result


def _tree(leaves: int, hosts: int, spines: int, cables: int) -> Fabric:
    """A 2-level tree of ``leaves`` leaves with ``hosts`` hosts and
    ``spines`` spines, ``cables`` cables per leaf-spine pair, an aggregation
    node on every switch."""
    return with_aggregation_nodes(pgft(2, (hosts, leaves), (1, spines), (1, cables)))


@pytest.mark.parametrize(("leaves", "hosts", "spines", "cables"),
                         [(8, 17, 9, 2), (11, 11, 4, 3), (7, 15, 16, 1)])
def test_every_up_cable_carries_hosts_traffic(leaves: int, hosts: int, spines: int,
                                              cables: int) -> None:
    """Dmodc: every leaf spreads the hosts of the other leaves over all its
    up cables, within one of even; the aggregation nodes' NIDs follow every
    host's.  (Nmodc's wrap gaps may leave a cable fewer hosts for a clean
    topological shift: the next test.)"""
    f = _tree(leaves, hosts, spines, cables)
    r = route(f, algorithm="dmodc", workers=1, labels=False)
    assert validate_result(r).ok
    agg = fabric_roles(f).endport_role[f.port_node[r.graph.ep_row]] == EndportRole.AGGREGATION
    assert agg.sum() == leaves + spines
    assert r.nids[agg].min() > r.nids[~agg].max()
    g, v = r.graph, routing_view(f, r.tables)
    host_lids = g.ep_lid[~agg]
    for leaf in g.leaves:
        far = g.ep_switch[~agg] != leaf
        ports = r.tables.ports[leaf, host_lids[far]]
        _, count = np.unique(ports, return_counts=True)
        assert len(count) == spines * cables, (leaf, count)
        assert count.max() - count.min() <= 1
    assert v.n_endports == leaves * hosts + leaves + spines


@pytest.mark.parametrize(("leaves", "hosts", "spines", "cables"),
                         [(8, 17, 9, 2), (31, 17, 9, 2), (10, 7, 4, 2), (7, 15, 16, 1)])
def test_a_topological_shift_over_the_hosts_is_contention_free(
        leaves: int, hosts: int, spines: int, cables: int) -> None:
    """Hosts in NID order (a scheduler's topology-aware order): every shift
    meets one flow per link, also across the wrap from the last host to the
    first, where the gaps count the up cables, not the groups."""
    f = _tree(leaves, hosts, spines, cables)
    r = route(f, algorithm="nmodc", workers=1, labels=False)
    v = routing_view(f, r.tables)
    order = topological_order(v, r)
    host = fabric_roles(f).endport_role[v.ep_node[order]] != EndportRole.AGGREGATION
    order = order[host]
    assert len(order) == leaves * hosts
    m = evaluate(v, pair_paths(v), P.cps("shift", len(order)), order)
    assert m.risk_max == 1
