"""Nmodc's even cables (smroute/routing/nmodc/even_cables.py): a leaf whose up
cables are shared by capacity deals each up group's destinations over the
group's cables in NID order."""

from __future__ import annotations

import numpy as np
import pytest
from test_nominal_routing import _inter_links, leaf_spine_tree

from smroute.fabric.model.arrays import Fabric
from smroute.routing.engine import RoutingResult, route, validate_result
from smroute.routing.nmodc import even_cables, slot_tables
from smroute.routing.reroute import reroute


def _x5_shaped() -> Fabric:
    """X5's shape (tests/test_nominal_routing.py): 4 spines, 3 cables from
    most leaves to each, a 21-host leaf on spines 0 and 1 only."""
    return leaf_spine_tree([24, 9, 6, 21, 5, 24], [[3, 3, 3, 3], [3, 3, 3, 3], [1, 1, 1, 1],
                                                   [6, 6, 0, 0], [3, 3, 3, 3], [3, 3, 3, 3]])


def _cable_counts(r: RoutingResult, leaf: int) -> list[list[int]]:
    """Per up group of ``leaf``, the end-port destinations on each cable."""
    g, ports = r.graph, r.tables.ports
    lids = r.dest.lid[~r.dest.is_switch]
    out = []
    for gid in np.flatnonzero(g.grp_switch == leaf):
        cab = g.grp_ports[g.grp_port_first[gid]:g.grp_port_first[gid] + g.grp_port_count[gid]]
        out.append([int((ports[leaf, lids] == c).sum()) for c in cab])
    return out


def test_dealing_evens_the_cables_and_keeps_the_groups(
        monkeypatch: pytest.MonkeyPatch) -> None:
    f = _x5_shaped()
    dealt = route(f, algorithm="nmodc", workers=1, labels=False)
    assert validate_result(dealt).ok
    monkeypatch.setattr(even_cables, "deal_up_cables", lambda g, dest, ports, share: ports)
    kernel = route(f, algorithm="nmodc", workers=1, labels=False)
    g = dealt.graph
    # the 9-host leaf: by the digit alone a cable took 8 destinations, dealt 7 at most
    nine = int(np.flatnonzero(np.bincount(g.ep_switch) == 9)[0])
    assert max(map(max, _cable_counts(kernel, nine))) == 8
    counts = _cable_counts(dealt, nine)
    assert max(map(max, counts)) == 7 and all(max(c) - min(c) <= 1 for c in counts)
    # only leaves' up entries moved, each to a cable of the same group
    port_to_remote = np.full((g.n_switches, 256), -1)
    for gid in range(len(g.grp_switch)):
        at = g.grp_ports[g.grp_port_first[gid]:g.grp_port_first[gid] + g.grp_port_count[gid]]
        port_to_remote[g.grp_switch[gid], at] = g.grp_remote[gid]
    a, b = kernel.tables.ports, dealt.tables.ports
    sw, lid = np.nonzero(a != b)
    assert len(sw) and set(g.rank[sw].tolist()) == {0}
    assert np.array_equal(port_to_remote[sw, a[sw, lid]], port_to_remote[sw, b[sw, lid]])
    # dealing its own output again changes nothing
    share = slot_tables.may_share(g, dealt.costs, dealt.dest)
    again = even_cables.deal_up_cables(g, dealt.dest, b.copy(), share)
    assert np.array_equal(again, b)


def test_chained_reroutes_deal_as_a_route_from_scratch() -> None:
    """Links lost one after another on the X5-shaped tree, each rerouted
    from the previous state: equal to a from-scratch route."""
    f = _x5_shaped()
    prev = route(f, algorithm="nmodc", workers=1, lmc=0)
    rng = np.random.default_rng(5)
    for k in range(5):
        f = f.with_removed(links=rng.choice(_inter_links(f), size=1, replace=False))
        r = reroute(prev, f, lmc=0)
        full = route(f, algorithm="nmodc", workers=1, lmc=0)
        assert r.incremental, r.reason
        assert np.array_equal(r.result.tables.ports, full.tables.ports), k
        prev = r.result
