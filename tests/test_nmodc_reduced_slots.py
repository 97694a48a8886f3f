"""Nmodc's reduced slots (smroute/routing/nmodc/capacity.py): an upper switch
that lost half its up cables keeps every leaf's nominal slot, but the leaves
below it give up the share of their destinations through it that it lacks
the cables for, and the redirects by load place them."""

from __future__ import annotations

import numpy as np
import pytest

from smroute.analysis import patterns
from smroute.analysis.congestion import a2a_risk, evaluate
from smroute.analysis.paths import pair_paths, routing_view
from smroute.fabric.generate.trees import pgft
from smroute.fabric.model.arrays import Fabric
from smroute.routing.engine import RoutingResult, route, validate_result
from smroute.routing.nmodc import capacity
from smroute.routing.reroute import reroute


def _tapered(share: float, monkeypatch: pytest.MonkeyPatch) -> tuple[RoutingResult, Fabric, int]:
    """PGFT(3;16,4,4;1,4,2;1,2,1) (leaves of 16 hosts, 2 cables to each of
    4 spines, a spine's 8 down cables over 2 up cables) without one
    spine-to-core link, routed by Nmodc with ``REDUCED_SHARE`` ``share``;
    the routing, the fabric and the spine (switch index) that lost it."""
    f = pgft(3, [16, 4, 4], [1, 4, 2], [1, 2, 1])
    g = route(f, algorithm="nmodc", workers=1, labels=False).graph
    rank = np.full(f.n_nodes, -1)
    rank[f.switches] = g.rank
    a, b = f.port_node[f.link_a], f.port_node[f.link_b]
    cut = int(np.flatnonzero(np.minimum(rank[a], rank[b]) == 1)[0])
    spine = int(np.searchsorted(f.switches, a[cut] if rank[a[cut]] == 1 else b[cut]))
    monkeypatch.setattr(capacity, "REDUCED_SHARE", share)
    d = f.with_removed(links=[cut])
    return route(d, algorithm="nmodc", workers=1, labels=False), d, spine


def _through(r: RoutingResult, leaf: int, spine: int) -> int:
    """Destinations of other pods (a cost of 3 hops or more) ``leaf`` sends
    up its cables to ``spine``."""
    g = r.graph
    gid = [x for x in range(g.grp_first[leaf], g.grp_first[leaf] + g.grp_count[leaf])
           if g.grp_remote[x] == spine][0]
    ports = g.grp_ports[g.grp_port_first[gid]:g.grp_port_first[gid] + g.grp_port_count[gid]]
    far = g.ep_lid[(r.costs[leaf, g.ep_switch] & 0x7F) >= 3]
    return int(np.isin(r.tables.ports[leaf, far], ports).sum())


def test_a_spine_that_lost_half_its_up_cables_carries_half_the_destinations(
        monkeypatch: pytest.MonkeyPatch) -> None:
    r, d, spine = _tapered(0.5, monkeypatch)
    assert validate_result(r).ok
    g = r.graph
    up = g.rank[g.grp_remote] > g.rank[g.grp_switch]
    leaf = int(g.grp_remote[(g.grp_switch == spine) & ~up][0])  # a leaf below it
    others = [int(s) for s in g.grp_remote[(g.grp_switch == leaf) & up] if s != spine]
    intact = [_through(r, leaf, s) for s in others]
    # 192 destinations in the other pods: 48 a spine, the damaged one half
    assert min(intact) >= 48 and _through(r, leaf, spine) <= 30, (
        _through(r, leaf, spine), intact)


def test_reduced_slots_lower_the_risks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same tree with the rule off (``REDUCED_SHARE`` 0: no slot is
    reduced): every leaf below the spine sends it a quarter of the other
    pods' destinations, which share its one core cable."""
    def figures(share: float) -> tuple[int, float, int]:
        r, d, _ = _tapered(share, monkeypatch)
        view = routing_view(d, r.tables)
        paths = pair_paths(view)
        n = view.n_endports
        rp = evaluate(view, paths, patterns.random_permutations(n, np.random.default_rng(1), 200),
                      np.arange(n))
        shift = evaluate(view, paths, patterns.cps("shift", n), np.arange(n))
        return a2a_risk(view, paths).value, rp.risk_median, shift.risk_max

    on, off = figures(0.5), figures(0.0)
    assert on[0] < off[0] and on[1] < off[1] and on[2] < off[2], (on, off)


def test_an_incremental_reroute_gives_the_full_route_s_reduced_slots(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The core cable lost, then repaired: the incremental reroute of the
    nominal leaves' pairs (:func:`smroute.routing.nmodc.balance.partial_pairs`,
    reduced ones included) gives a full route's tables, which the reduced
    slot changes."""
    _, d, _ = _tapered(0.5, monkeypatch)
    f = pgft(3, [16, 4, 4], [1, 4, 2], [1, 2, 1])
    prev = route(f, algorithm="nmodc", workers=1, lmc=0)
    fulls = []
    for fab in (d, f):
        step = reroute(prev, fab, lmc=0)
        fulls.append(route(fab, algorithm="nmodc", workers=1, lmc=0))
        assert step.incremental
        assert np.array_equal(step.result.tables.ports, fulls[-1].tables.ports)
        prev = step.result
    monkeypatch.setattr(capacity, "REDUCED_SHARE", 0.0)
    off = route(d, algorithm="nmodc", workers=1, lmc=0)
    assert not np.array_equal(off.tables.ports, fulls[0].tables.ports)
