"""Leaves cabled once to some spines and twice to others (a leaf/spine
grown with bigger spines): the usual cable counts per upper switch
(smroute/routing/nmodc/cables.py), the shares by capacity with one table
entry per cable (slot_tables.capacity_tables) kept by the even up cables
(even_cables.deal_up_cables), every up cable of a leaf loaded alike, the
topological shifts exact, damage still counted as lost cables, and an
incremental reroute equal to a full route."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from routed import reroutes_equal_full_routes

from smroute.analysis import patterns as P
from smroute.analysis.congestion import evaluate
from smroute.analysis.paths import pair_paths, routing_view
from smroute.fabric.generate.sitegen import CONNECTX6, QUANTUM, Site
from smroute.fabric.generate.trees import degrade
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing.engine import RoutingResult, route, validate_result
from smroute.routing.nmodc import cables, even_cables, turns
from smroute.routing.reroute import reroute
from smroute.routing.topology import switch_graph

LEAVES, HOSTS, OLD, NEW = 12, 16, 4, 2


@functools.cache
def site(leaves: int = LEAVES, hosts: int = HOSTS, old_spines: int = OLD) -> Fabric:
    """``leaves`` leaves of ``hosts`` hosts, one cable to each of
    ``old_spines`` spines and two to each of 2 bigger ones: 8 up cables a
    leaf (by default)."""
    s = Site(speed="HDR", host_device=CONNECTX6)
    lv = s.switches([f"MF0;leaf{i + 1:02d}:MQM/U1" for i in range(leaves)], 40, QUANTUM)
    for i, leaf in enumerate(lv):
        for k in range(hosts):
            s.host(leaf, f"cn-{i + 1:02d}-{k + 1:02d} mlx5_0")
    old = s.switches([f"MF0;spine{j + 1}:MQM/U1" for j in range(old_spines)], 40, QUANTUM)
    new = s.switches([f"MF0;nspine{j + 1}:MQM9700/U1" for j in range(NEW)], 64, QUANTUM)
    for leaf in lv:
        for sp in old:
            s.cable(leaf, sp)
        for sp in new:
            s.cable(leaf, sp, 2)
    return s.build(np.random.default_rng(3))


def routed(structural: bool = True, f: Fabric | None = None) -> RoutingResult:
    """``f`` (default the site) routed; ``structural`` False: with the usual
    counts of the ranks alone (the twice-cabled spines counted once)."""
    f = site() if f is None else f
    if structural:
        return route(f, workers=1)
    mp = pytest.MonkeyPatch()

    def by_ranks(g):  # type: ignore[no-untyped-def]
        top = int(g.rank.max(initial=-1)) + 2
        rs, rr = g.rank[g.grp_switch] + 1, g.rank[g.grp_remote] + 1
        cnt = g.grp_port_count.astype(np.int64)
        return cables.most_common(rs * top + rr, cnt, top * top)[rs * top + rr]

    for mod in ("smroute.routing.nmodc.cables", "smroute.routing.nmodc.incremental"):
        mp.setattr(f"{mod}.usual_cables", by_ranks)
    try:
        return route(f, workers=1)
    finally:
        mp.undo()


def cables_to(f: Fabric, spine: str) -> list[int]:
    """The cables (link ids) between a leaf and ``spine``, by leaf."""
    a, b = f.port_node[f.link_a], f.port_node[f.link_b]
    return [k for k in range(len(a)) if spine in (f.node_desc[int(a[k])], f.node_desc[int(b[k])])]


def destinations_per_up_cable(r: RoutingResult) -> list[list[int]]:
    """Per leaf, how many host destinations on other leaves each of its up
    cables carries."""
    f, t = site(), r.tables
    hosts = np.flatnonzero(f.node_type == NodeType.CA)
    lids = f.port_lid[f.port_start[hosts] + 1].astype(np.int64)
    out = []
    for i, desc in enumerate(t.switch_desc):
        if "leaf" not in desc:
            continue
        ports = t.ports[i, lids].astype(np.int64)
        up = ports > HOSTS
        out.append(np.bincount(ports[up], minlength=HOSTS + 9)[HOSTS + 1:HOSTS + 9].tolist())
    return out


def test_a_spine_cabled_twice_to_every_leaf_counts_two() -> None:
    g = switch_graph(site())
    usual = cables.usual_cables(g)
    up = g.rank[g.grp_remote] > g.rank[g.grp_switch]
    assert sorted(set(zip(g.grp_port_count[up].tolist(), usual[up].tolist(),
                          strict=True))) == [(1, 1), (2, 2)]
    assert cables.structural_shares(g)[g.leaves].all()


def cut_leaf(leaves: int = LEAVES, hosts: int = HOSTS) -> tuple[Fabric, str]:
    """The site with one cable cut between the first leaf and a
    twice-cabled spine, and that leaf."""
    f = site(leaves, hosts)
    return (f.with_removed(links=np.array(cables_to(f, "MF0;nspine1:MQM9700/U1")[:1])),
            "MF0;leaf01:MQM/U1")


def test_a_cable_lost_keeps_the_spines_own_counts() -> None:
    """The spine cabled twice still counts two (11 of its 12 groups have
    two); the leaf that lost the cable counts it lost, and every leaf
    shares structurally, that one too."""
    cut, leaf = cut_leaf()
    g = switch_graph(cut)
    up = g.rank[g.grp_remote] > g.rank[g.grp_switch]
    assert sorted(set(zip(g.grp_port_count[up].tolist(), cables.usual_cables(g)[up].tolist(),
                          strict=True))) == [(1, 1), (1, 2), (2, 2)]
    names = [cut.node_desc[int(n)] for n in g.sw_node]
    lost = cables.lost_up(g)
    assert [names[i] for i in np.flatnonzero(lost)] == [leaf]
    assert cables.structural_shares(g)[g.leaves].all()


@functools.cache
def grown_cores(pods: int = 2, leaves: int = 4, hosts: int = 8, spines: int = 2, old: int = 2,
                new: int = 1) -> Fabric:
    """``pods`` pods of ``leaves`` leaves of ``hosts`` hosts, each leaf
    cabled twice to each of its pod's ``spines`` spines, each spine once
    to each of ``old`` cores and twice to each of ``new`` bigger ones."""
    s = Site(speed="HDR", host_device=CONNECTX6)
    cores = s.switches([f"MF0;core{j}:MQM/U1" for j in range(old)], 40, QUANTUM)
    bigger = s.switches([f"MF0;ncore{j}:MQM9700/U1" for j in range(new)], 64, QUANTUM)
    for p in range(pods):
        lv = s.switches([f"MF0;p{p}-leaf{i}:MQM/U1" for i in range(leaves)], 40, QUANTUM)
        for i, leaf in enumerate(lv):
            for k in range(hosts):
                s.host(leaf, f"cn-{p}{i}-{k:02d} mlx5_0")
        sp = s.switches([f"MF0;p{p}-spine{j}:MQM/U1" for j in range(spines)], 40, QUANTUM)
        for leaf in lv:
            for x in sp:
                s.cable(leaf, x, 2)
        for x in sp:
            for c in cores:
                s.cable(x, c)
            for c in bigger:
                s.cable(x, c, 2)
    return s.build(np.random.default_rng(3))


def test_a_leaf_under_grown_cores_that_lost_a_cable_shares_by_capacity() -> None:
    """Spines cabled once to old cores and twice to a new one share one
    entry per cable; a leaf cabled twice to each spine that lost one of
    them does not (its rank has no such switch): with one entry per cable
    there, the leaves' all-to-all risk went from 14 to 18 on grown-core
    sites (`research/mixed-sites.md`)."""
    f = grown_cores()
    f = f.with_removed(links=np.array(cables_to(f, "MF0;p0-spine0:MQM/U1")[:1]))
    g = switch_graph(f)
    names = np.array([f.node_desc[int(n)] for n in g.sw_node])
    struct = cables.structural_shares(g)
    assert struct[np.char.find(names, "spine") >= 0].all()
    assert cables.lost_up(g)[names == "MF0;p0-leaf0:MQM/U1"].all()
    assert not struct[np.char.find(names, "leaf") >= 0].any()
    assert validate_result(route(f, workers=1)).ok


def test_the_cables_down_into_a_spine_take_the_turn_of_the_spines_tables(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Spines cabled once to 4 old cores and twice to 2 bigger ones: the
    cores' cables down into a spine take the turn of the spines' tables,
    and every shift in topological order loads a cable twice at most; with
    the turns into leaves alone, 4.  A cut cable ends the turns, and the
    incremental reroutes equal full routes."""
    f = grown_cores(2, 4, 8, 2, 4, 2)
    whole = route(f, workers=1)
    assert shift_risk(f, whole) == 2
    assert reroutes_equal_full_routes(whole, f, 7) >= 1  # (the turns go and come back)
    monkeypatch.setattr(turns, "structural_shares", lambda g: cables.structural_shares(g)
                        & (g.rank == 0))
    assert shift_risk(f, route(f, workers=1)) == 4


def flows_down(r: RoutingResult, leaf: str) -> list[int]:
    """Per cable down into ``leaf`` (of the site with :func:`cut_leaf`),
    the flows from every host of the other leaves to every host on it
    that take that cable."""
    view = routing_view(cut_leaf()[0], r.tables)
    names = [view.fabric.node_desc[int(n)] for n in view.sw_node]
    eps = np.flatnonzero(view.ep_leaf == names.index(leaf))
    src = np.flatnonzero(view.ep_leaf != view.ep_leaf[eps[0]])
    paths = pair_paths(view)
    links = paths.gather((view.ep_leaf_row[src][:, None] * paths.n_endports
                          + eps[None, :]).ravel())
    last = links[np.arange(len(links)), (links >= 0).sum(axis=1) - 1]
    return np.unique(last, return_counts=True)[1].tolist()


def test_a_leaf_that_lost_a_cable_receives_alike_on_every_cable_left() -> None:
    """The other leaves send the 16 hosts of a leaf that lost one of its
    two cables to a spine by one table entry per cable it has left (7):
    each of its cables down carries 2 or 3 of each other host's 16
    flows to it, where the structural table of 8 entries sent two eighths,
    4, down the one cable left."""
    cut, leaf = cut_leaf()
    per_cable = flows_down(route(cut, workers=1), leaf)
    sources = (LEAVES - 1) * HOSTS
    assert len(per_cable) == 7 and sum(per_cable) == sources * HOSTS
    assert set(per_cable) <= {2 * sources, 3 * sources}, per_cable


def test_the_groups_above_their_share_give_in_turns() -> None:
    """14 leaves of 20 hosts under 8 single and 2 double spines, 12
    cables cut (8 seeds): a leaf whose shares do not round to its cables
    takes Dmodc's table ten times over with the fewest entries moved off
    the groups above their share; those give them in turns, and the
    shifts in topological order average a shift HSD below 5 (4.77); given
    all in one round, consecutive NIDs took one group (5.18)."""
    f0, hsd = site(14, 20, 8), []
    for seed in range(8):
        f, _ = degrade(f0, np.random.default_rng(seed), links=12)
        view = routing_view(f, route(f, workers=1).tables)
        hosts = np.argsort(view.ep_node)
        hsd.append(float(np.mean(evaluate(view, pair_paths(view), P.cps("shift", len(hosts)),
                                          hosts).max_flows)))
    assert np.mean(hsd) < 5.0, hsd


def test_every_up_cable_of_a_leaf_carries_the_same_destinations() -> None:
    """176 destinations over 8 cables: 22 each; counted by the ranks'
    usual count (every spine one share), the single cables carry 29-30
    and the double ones 14-15."""
    for leaf in destinations_per_up_cable(routed(True)):
        assert set(leaf) == {22}, leaf
    before = destinations_per_up_cable(routed(False))
    assert max(max(x) for x in before) >= 29


@pytest.mark.parametrize("structural", [True, False])
def test_routes_are_valid(structural: bool) -> None:
    assert validate_result(routed(structural)).ok


def shift_risk(f: Fabric, r: RoutingResult) -> int:
    """The shift permutations' largest link load, hosts in cabling order
    (the topological order)."""
    view = routing_view(f, r.tables)
    hosts = np.argsort(view.ep_node)
    return int(evaluate(view, pair_paths(view), P.cps("shift", len(hosts)), hosts).risk_max)


def test_the_topological_shifts_load_a_cable_twice_at_most() -> None:
    """16 hosts over 8 up cables: every shift in topological order loads a
    cable twice at most."""
    assert shift_risk(site(), routed(True)) == 2


def test_the_cables_down_into_a_leaf_take_the_turn_of_the_leaves_tables(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """14 leaves of 20 hosts under 8 single and 2 double spines (12 cables
    a leaf): every shift in topological order loads a cable twice at most
    (20 over 12). With the spines' cables down by ``floor(t / Pi)``, the
    destinations that arrived over a double spine's two cables could
    leave over one: 3; with the wrap gaps of the groups alone, 3."""
    f = site(14, 20, 8)
    assert shift_risk(f, route(f, workers=1)) == 2
    monkeypatch.setattr("smroute.routing.nmodc.engine.turn_tables", lambda g, s: None)
    assert shift_risk(f, route(f, workers=1)) == 3
    monkeypatch.undo()
    monkeypatch.setattr("smroute.routing.nmodc.wrap.structural_shares",
                        lambda g: np.zeros(len(g.rank), dtype=bool))
    assert shift_risk(f, route(f, workers=1)) == 3


def test_the_deal_keeps_the_cables_of_the_tables_own_entries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The even up cables pass over the leaves of structural shares: their
    tables are the kernel's, which give each cable its own table entries.
    With 20 hosts a leaf, dealt again in NID order (skipping the leaf's
    own NIDs) some shift loads a cable 4 times, where 3 is the least
    (20 over 8)."""
    r = routed(True)
    share = np.ones(r.graph.n_switches, dtype=bool)
    again = even_cables.deal_up_cables(r.graph, r.dest, r.tables.ports.copy(), share)
    assert np.array_equal(again, r.tables.ports)
    f = site(16, 20)
    assert shift_risk(f, route(f, workers=1)) == 3
    monkeypatch.setattr(even_cables, "structural_shares",
                        lambda g: np.zeros(len(g.rank), dtype=bool))
    assert shift_risk(f, route(f, workers=1)) == 4


def test_an_incremental_reroute_equals_a_full_route() -> None:
    """Cables cut (the usual counts go back to the ranks') and repaired
    (back to the spines' own): incremental, and the full route's tables."""
    f = site()
    whole = route(f, workers=1)
    assert reroutes_equal_full_routes(whole, f, 5) >= 1
    sw = f.node_type == NodeType.SWITCH
    inter = np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])
    for k in range(0, len(inter), 8):
        got = reroute(route(f.with_removed(links=inter[k:k + 1]), workers=1), f, lmc=None)
        assert got.incremental and np.array_equal(got.result.tables.ports,
                                                  whole.tables.ports), k


def test_a_damaged_site_routes_valid() -> None:
    f, _ = degrade(site(), np.random.default_rng(5), links=6)
    assert validate_result(route(f, workers=1)).ok
