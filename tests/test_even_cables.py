"""Nmodc's even cables (smroute/routing/nmodc/even_cables.py): a leaf whose up
cables are shared by capacity deals each up group's destinations over the
group's cables in NID order."""

from __future__ import annotations

import numpy as np
import pytest
from test_nominal_routing import _inter_links, leaf_spine_tree

from smroute.fabric.generate.trees import pgft
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


def _base_columns(r: RoutingResult) -> np.ndarray:
    """Per end-port of ``r.graph`` (in ``ep_*`` order), its base LID."""
    d = r.dest
    ep = ~d.is_switch
    base = np.full(len(r.graph.ep_switch), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(base, d.owner[ep], d.lid[ep])
    return base


@pytest.mark.parametrize("m, w, p", [((18, 10), (1, 6), (1, 2)), ((20, 8), (1, 4), (1, 3))])
def test_base_lids_with_lmc_take_every_cable(m: tuple[int, int], w: tuple[int, int],
                                             p: tuple[int, int]) -> None:
    """Leaves whose up cables are shared by capacity (parallel cables to
    every spine, one of them lost), LMC 1: the base LIDs (what most traffic
    uses) are dealt over every cable of a group as without LMC, not onto one
    cable each (which dealing all LIDs of an end-port together in NID order
    did: base and offset alternate), and the offset LIDs are dealt evenly
    too."""
    def lost_cable(lmc: int) -> Fabric:
        f = pgft(2, m, w, p, lmc=lmc)
        return f.with_removed(links=_inter_links(f)[:1])

    r0 = route(lost_cable(0), algorithm="nmodc", workers=1, labels=False)
    r1 = route(lost_cable(1), algorithm="nmodc", workers=1, labels=False)
    assert validate_result(r1).ok
    g = r1.graph
    share = slot_tables.sharing(g, r1.costs, r1.dest)
    assert share[g.rank == 0].any()
    assert np.array_equal(r0.tables.ports[:, _base_columns(r0)],
                          r1.tables.ports[:, _base_columns(r1)])
    base = _base_columns(r1)
    offset = base + 1
    for leaf in np.flatnonzero(share & (g.rank == 0)).tolist():
        for gid in np.flatnonzero((g.grp_switch == leaf) & (g.grp_port_count >= 2)):
            cab = g.grp_ports[g.grp_port_first[gid]:g.grp_port_first[gid] + g.grp_port_count[gid]]
            for lids in (base, offset):
                per = [int((r1.tables.ports[leaf, lids] == c).sum()) for c in cab]
                assert max(per) - min(per) <= 1, (leaf, per)
    # an incremental reroute deals as a route from scratch
    f = lost_cable(1)
    cut = f.with_removed(links=_inter_links(f)[-1:])
    rr = reroute(r1, cut, lmc=None)
    assert rr.incremental, rr.reason
    assert np.array_equal(rr.result.tables.ports,
                          route(cut, algorithm="nmodc", workers=1, labels=False).tables.ports)
