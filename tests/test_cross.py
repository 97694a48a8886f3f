"""Routes across one cable within a rank (mode ``tree+cross``): Dragonfly+.

A Dragonfly+ ranks as a tree (leaves, then spines) whose spines are cabled
to spines of other groups: no up*/down* path joins two groups in the
tree's ranks.  The default routes every pair between groups up, across one
spine-to-spine cable and down: shortest in the cable graph, spread over the
spines, free of credit loops on one VL.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from routed import routed_ok

from smroute.fabric.generate.catalogue import build_shape
from smroute.fabric.generate.shapes import attach_cas, dragonfly_plus, with_aggregation_nodes
from smroute.fabric.graph import bfs_distance
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import fabric_roles
from smroute.routing import cross, modes, orient
from smroute.routing.dmodc import INF, costs_and_dividers
from smroute.routing.engine import RoutingResult, route, validate_result
from smroute.routing.topology import NO_LINK, TO_END_PORT, next_switch, rooted_graph


def _hops(r: RoutingResult, every: np.ndarray, src: int, j: int) -> int:
    """Switch-to-switch hops of the route from switch ``src`` to destination ``j``."""
    lid, t = int(r.dest.lid[j]), int(r.dest.target[j])
    at, hops = src, 0
    while at != t:
        nxt = int(every[at, r.tables.ports[at, lid]])
        assert nxt not in (NO_LINK, TO_END_PORT), (src, j)
        at, hops = nxt, hops + 1
        assert hops <= 2 * r.graph.n_switches
    return hops


def test_dragonfly_plus_routes_every_pair_on_a_shortest_path() -> None:
    f = dragonfly_plus(5, 3, 3, 4, seed=1)
    r = routed_ok(f)
    assert r.mode == "tree+cross"
    g = r.graph
    roles = fabric_roles(f)
    every = rooted_graph(f, roles, modes.turn_roots(g), like=g)
    nxt = next_switch(every)
    src, dst = every.cables()[:2]
    ca = np.flatnonzero(~r.dest.is_switch)
    for s in g.leaves.tolist():
        dist = bfs_distance(g.n_switches, src, dst, np.array([s]))
        for j in ca.tolist():
            assert _hops(r, nxt, s, j) == dist[r.dest.target[j]]


def test_crossing_routes_spread_over_the_spines() -> None:
    """From one leaf, the hosts of each other group are spread over the
    spines evenly (they differ by at most one), and so are the parallel
    cables between two spines."""
    f = dragonfly_plus(4, 3, 3, 6, global_cables=2, seed=2)
    r = routed_ok(f)
    g = r.graph
    every = rooted_graph(f, fabric_roles(f), modes.turn_roots(g), like=g)
    nxt = next_switch(every)
    group = np.asarray([int(d.split("-g")[1][:2]) for d in r.tables.switch_desc])
    leaf = int(g.leaves[0])
    ca = np.flatnonzero(~r.dest.is_switch)
    for other in set(group.tolist()) - {int(group[leaf])}:
        js = ca[group[r.dest.target[ca]] == other]
        up = r.tables.ports[leaf, r.dest.lid[js]]
        counts = np.unique(up, return_counts=True)[1]
        assert len(counts) == 3 and counts.max() - counts.min() <= 1
        spine = nxt[leaf, up]
        across = r.tables.ports[spine, r.dest.lid[js]]
        for s in np.unique(spine).tolist():
            used = np.unique(across[spine == s], return_counts=True)[1]
            assert len(used) == 2 and used.max() - used.min() <= 1


def test_cross_costs_are_the_shortest_up_across_down_routes() -> None:
    """Against a search over (switch, phase) states: up*, one cable within a
    rank, down*; on a Dragonfly+ with cables cut."""
    from smroute.fabric.generate.trees import degrade

    f, _ = degrade(dragonfly_plus(4, 3, 3, 2, seed=3), np.random.default_rng(5), links=6)
    g, _, _ = modes.start(f, fabric_roles(f))
    every = rooted_graph(f, fabric_roles(f), modes.turn_roots(g), like=g)
    c, _ = costs_and_dividers(g)
    targets = np.arange(g.n_switches)
    down, across = cross.cross_costs(g, every, c, targets)
    src, dst = every.cables()[:2]
    pairs = set(zip(src.tolist(), dst.tolist(), strict=True))
    rank = g.rank
    for t in targets.tolist():
        # down-only hop counts to t, then one hop across, then ups: from t outwards
        dn = {t: 0}
        for r_ in range(1, g.max_rank + 1):
            for s in np.flatnonzero(rank == r_).tolist():
                below = [dn[b] for a, b in pairs if a == s and rank[b] == r_ - 1 and b in dn]
                if below:
                    dn[s] = 1 + min(below)
        cost = {a: 1 + dn[b] for a, b in pairs if rank[a] == rank[b] >= 0 and b in dn}
        for r_ in range(g.max_rank - 1, -1, -1):
            for s in np.flatnonzero(rank == r_).tolist():
                ups = [cost[b] + 1 for a, b in pairs if a == s and rank[b] == r_ + 1 and b in cost]
                if ups:
                    cost[s] = min(cost.get(s, INF), *ups)
        for s in range(g.n_switches):
            assert down[s, t] == dn.get(s, INF)
            assert across[s, t] == cost.get(s, INF), (s, t)


def _hosts_on_shortest_paths_from_leaves(f: Fabric, r: RoutingResult) -> None:
    """Every leaf's route to every host on a leaf (no aggregation node) is a
    shortest path in the cable graph."""
    g = r.graph
    every = rooted_graph(f, fabric_roles(f), modes.turn_roots(g), like=g)
    nxt = next_switch(every)
    src, dst = every.cables()[:2]
    assert r.needed is not None
    ca = np.flatnonzero(~r.dest.is_switch)
    hosts = ca[~r.needed.agg[r.dest.owner[ca]] & g.is_leaf[r.dest.target[ca]]]
    for s in g.leaves.tolist():
        dist = bfs_distance(g.n_switches, src, dst, np.array([s]))
        for j in hosts.tolist():
            assert _hops(r, nxt, s, j) == dist[r.dest.target[j]]


def test_end_ports_on_spines_without_a_cable_across_take_detours_over_vls() -> None:
    """The canonical Dragonfly+: a spine reaches only some groups across.
    An aggregation node on a spine has no route up*, across, down* to the
    hosts of the others: with VLs only the switches without such a route
    take detours, every leaf keeps its shortest route across."""
    f = with_aggregation_nodes(dragonfly_plus(9, 3, 4, 4, spread=True, seed=4))
    r = routed_ok(f, max_vls=8)
    assert r.mode == "tree+detours" and "take detours" in r.mode_reason
    _hosts_on_shortest_paths_from_leaves(f, r)


def test_end_ports_on_spines_without_a_cable_across_route_on_one_vl() -> None:
    """The same on one VL: the switches the crossing routes leave without a
    route take routes up*/down* in the cross order; every route of every
    destination, the tree's, the crossing ones and those, is up*/down* in
    that order (a route that went down in it never goes up again), and
    every leaf keeps its shortest route across."""
    f = with_aggregation_nodes(dragonfly_plus(9, 3, 4, 4, spread=True, seed=4))
    r = routed_ok(f)
    assert r.mode == "tree+cross" and "up*/down* in an order of the switches" in r.mode_reason
    _hosts_on_shortest_paths_from_leaves(f, r)
    g = r.graph
    every = rooted_graph(f, fabric_roles(f), modes.turn_roots(g), like=g)
    pos = cross.cross_order(g, every)
    assert (pos[g.rank == g.max_rank] < pos[g.rank == 0].min()).all()  # the top first
    nxt = next_switch(every)
    longest = 0
    for j in range(len(r.dest.lid)):
        lid, t = int(r.dest.lid[j]), int(r.dest.target[j])
        for s in range(g.n_switches):
            at, went_down, hops = s, False, 0
            while at != t:
                b = int(nxt[at, r.tables.ports[at, lid]])
                if b < 0:
                    break  # a pair no route needs (aggregation nodes not adjacent)
                down = bool(pos[b] > pos[at])
                assert down or not went_down, (s, j)
                went_down, at, hops = went_down or down, b, hops + 1
            longest = max(longest, hops)
    assert longest > orient.turn_hops(g) or r.max_hops == 0
    assert r.max_hops >= longest


def test_without_end_ports_on_spines_a_sparse_dragonfly_plus_routes_on_one_vl() -> None:
    f = dragonfly_plus(9, 3, 4, 4, spread=True, seed=4)
    r = routed_ok(f)
    assert r.mode == "tree+cross" and r.max_hops == 0
    # a service host on a spine: the switches without a route to it take routes
    # up*/down* in the cross order
    f2 = attach_cas(f, [int(f.switches[-1])], ["ufm-01 HCA-1"])
    r2 = routed_ok(f2)
    assert r2.mode == "tree+cross" and "in an order of the switches" in r2.mode_reason
    _hosts_on_shortest_paths_from_leaves(f2, r2)


@pytest.mark.parametrize("name", ["edr-dragonfly-plus-1580"])
def test_catalogue_dragonfly_plus_routes_on_one_vl(name: str) -> None:
    f = build_shape(name)
    r = routed_ok(f)
    assert r.mode in ("tree+cross", "tree+orient")
    g = r.graph
    c = r.costs
    # every compute leaf reaches every other group's leaves across one cable
    assert (c[np.ix_(g.leaves, g.leaves)] == INF).any()
    assert r.oriented is not None and r.oriented[~r.dest.is_switch].mean() > 0.9
    assert orient.turn_hops(g) >= 4


def test_cli_generates_a_dragonfly_plus(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "dfp.topo"
    exe = [sys.executable, "-m", "smroute", "fabric", "generate"]
    p = subprocess.run([*exe, "dragonfly-plus", "4", "3", "3", "6", "--out", str(out)],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    from smroute.fabric.ibnetdiscover.parse import read_fabric

    f = read_fabric(out)
    assert len(f.switches) == 24 and len(f.cas) == 72
    bad = subprocess.run([*exe, "dragonfly-plus", "40", "3", "3", "6", "--out", str(out)],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "42 a spine" in bad.stderr and "Traceback" not in bad.stderr
    # LMC 2: four LIDs a host, spread over the spines across
    p = subprocess.run([*exe, "dragonfly-plus", "4", "3", "3", "6", "--lmc", "2", "--out",
                        str(out)], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    r = routed_ok(read_fabric(out))
    assert r.mode == "tree+cross"
    j = int(np.flatnonzero(~r.dest.is_switch & (r.dest.target != r.graph.leaves[0]))[0])
    lids = r.dest.lid[(r.dest.owner == r.dest.owner[j]) & ~r.dest.is_switch]
    assert len(lids) == 4
    far = r.dest.target[j]
    leaf = next(s for s in r.graph.leaves.tolist() if r.costs[s, far] == INF)
    assert len(set(r.tables.ports[leaf, lids].tolist())) == 3  # the 3 spines, one LID twice


def test_daemon_routes_a_dragonfly_plus_and_reroutes_a_cable_across() -> None:
    """The daemon's core commits the crossing routes, and a cable across
    that goes down gives the tables of a route from scratch without it,
    still across (a mode other than ``tree`` is rerouted in full)."""
    from smroute.fabric.faults import FaultEvent
    from smroute.service.core import RoutingCore

    f = dragonfly_plus(4, 2, 2, 3, seed=6)
    g, _, _ = modes.start(f, fabric_roles(f))
    every = rooted_graph(f, fabric_roles(f), modes.turn_roots(g), like=g)
    sw, rem, port = every.cables()
    x = int(np.flatnonzero(g.rank[sw] == g.rank[rem])[0])
    node = int(g.sw_node[sw[x]])
    a = f.port_start[node] + int(port[x])
    link = int(np.flatnonzero((f.link_a == a) | (f.link_b == a))[0])
    core = RoutingCore(workers=1, coalesce_s=0.0)
    try:
        core.load_fabric(f, "dragonfly+")
        e1 = core.route()
        assert e1.result.mode == "tree+cross"
        out = core.apply_faults([FaultEvent("link_down", int(f.node_guid[node]), int(port[x]))])
        assert out.committed and out.epoch.result.mode == "tree+cross"
        full = route(f.with_removed(links=[link]), workers=1)
        assert np.array_equal(out.epoch.result.tables.ports, full.tables.ports)
        assert validate_result(full).ok
    finally:
        core.close()


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibdmchk") is None,
                    reason="ibdmchk (Debian package ibutils) is not installed")
def test_ibdmchk_walks_a_service_host_on_a_sparse_spine_on_one_vl(tmp_path: Path) -> None:
    """ibutils' ibdmchk walks every CA pair of the one-VL tables of a
    canonical Dragonfly+ with a UFM host on a spine (the switches without a
    crossing route to it routed in the cross order) and finds no credit
    loop."""
    from smroute.cli.route_cmd import hop_table
    from smroute.lab.ibdmchk import run_ibdmchk
    from smroute.tables.formats import write_tables

    d = dragonfly_plus(9, 3, 4, 4, spread=True, seed=4)
    f = attach_cas(d, [int(d.switches[-1])], ["ufm-01 HCA-1"])
    r = routed_ok(f)
    assert r.mode == "tree+cross" and r.max_hops > orient.turn_hops(r.graph)
    fdbs = tmp_path / "opensm.fdbs"
    write_tables(r.tables, fdbs, "fdbs", fabric=f, hops=hop_table(r))
    rep = run_ibdmchk(fdbs, tmp_path / "opensm-subnet.lst", timeout=600)
    n = len(f.cas)
    assert rep.ca_paths == n * (n - 1) and rep.missing_paths == 0, rep.stdout[-2000:]
    assert rep.credit_loops is False and rep.ok
