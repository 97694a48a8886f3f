"""Shortest paths for a fabric that is no tree (mode ``shortest``): tori,
hypercubes, rings of switches carrying hosts.

On one VL every target whose shortest routes can avoid turning up after
coming down (in the up*/down* orientation of the routing's graph) takes
them; with VLs every route is shortest and moves to a higher VL at each such
turn, free of credit loops.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from routed import routed_ok

from smroute.analysis.congestion import a2a_risk
from smroute.analysis.paths import pair_paths
from smroute.analysis.view import routing_view
from smroute.fabric.generate.shapegen import ring, torus
from smroute.fabric.generate.sitegen import QUANTUM, Site
from smroute.fabric.graph import bfs_distance
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import fabric_roles
from smroute.routing import modes, shortest
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.detour import peer_ports
from smroute.routing.dmodc import INF, UP_PHASE, costs_and_dividers, hop_counts
from smroute.routing.engine import RoutingResult, route, validate_result
from smroute.routing.topology import NO_LINK, TO_END_PORT, next_switch
from smroute.routing.vlassign import INJECT


def _paths(r: RoutingResult) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """(switch, destination) -> the route's hops (switch, output port), from
    every switch to every CA destination."""
    g = r.graph
    nxt = next_switch(g)
    out = {}
    for j in np.flatnonzero(~r.dest.is_switch).tolist():
        lid, t = int(r.dest.lid[j]), int(r.dest.target[j])
        for s in range(g.n_switches):
            at, hops = s, []
            while at != t:
                p = int(r.tables.ports[at, lid])
                hops.append((at, p))
                at = int(nxt[at, p])
                assert at not in (NO_LINK, TO_END_PORT) and len(hops) <= g.n_switches
            out[s, j] = hops
    return out


def _shortest(r: RoutingResult) -> float:
    """The share of switch-to-CA routes that are shortest in the cable graph."""
    g = r.graph
    src, dst = g.cables()[:2]
    dist = {t: bfs_distance(g.n_switches, src, dst, np.array([t]))
            for t in np.unique(r.dest.target).tolist()}
    paths = _paths(r)
    return float(np.mean([len(h) == dist[int(r.dest.target[j])][s]
                          for (s, j), h in paths.items()]))


def test_a_torus_routes_over_shortest_paths_on_one_vl(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 4 x 4 torus: every target has shortest routes that never turn up
    after coming down, so every route is shortest, on one VL, free of
    credit loops; chosen over every closer group (Dmodc's up*/down* rule:
    a switch with a path down takes it), the all-to-all risk falls."""
    f = torus((4, 4), 4, parallel=2)
    r = routed_ok(f)
    assert r.mode == "shortest" and r.lanes is None, r.mode_reason
    assert _shortest(r) == 1.0
    monkeypatch.setattr(shortest, "route_over_vls",
                        lambda *a, **k: (None, np.zeros(len(r.dest.lid), dtype=bool)))
    before = routed_ok(f)
    assert before.mode == "updown"

    def risk(x: RoutingResult) -> int:
        v = routing_view(f, x.tables)
        return int(a2a_risk(v, pair_paths(v)).value)

    assert risk(r) < risk(before)


def test_a_ring_takes_vls_where_shortest_routes_turn() -> None:
    """A ring of six switches: the shortest route to the far side turns up
    after coming down somewhere.  On one VL those targets keep up*/down*
    routes; with VLs every route is shortest, its VL never decreases and
    rises at each turn, and without the lanes the same tables have a credit
    loop."""
    f = ring(6, 2)
    one = routed_ok(f)
    assert one.mode == "shortest" and one.lanes is None
    assert _shortest(one) < 1.0
    r = routed_ok(f, max_vls=4)
    assert r.mode == "shortest" and r.lanes is not None and r.lanes.n_vls >= 2, r.mode_reason
    assert "whose routes may turn up after coming down on purpose" in validate_result(
        r).summary()
    assert "up*/down* only" in validate_result(one).summary()
    assert _shortest(r) == 1.0
    assert not check_credit_loops(f, r.tables).ok
    lanes, g = r.lanes, r.graph
    nxt, peer = next_switch(g), peer_ports(f, g)
    for (s, j), hops in _paths(r).items():
        sl = int(lanes.sl_of(np.array([s]), np.array([r.dest.lid[j]]))[0])
        vl, was_down, inp = -1, False, INJECT
        for at, p in hops:
            v = int(lanes.vl_of(at, inp, p, sl))
            up = bool(g.rank[nxt[at, p]] > g.rank[at])
            assert v >= vl and (v > vl or not (up and was_down)), (s, j, hops)
            vl, was_down, inp = v, not up, int(peer[at, p])


def test_daemon_routes_a_ring_over_vls_and_reroutes_a_cable() -> None:
    """The daemon's core commits the shortest routes and their lanes; a
    cable that goes down gives the tables of a route from scratch without
    it (a mode other than ``tree`` is rerouted in full), still valid."""
    from smroute.fabric.faults import FaultEvent
    from smroute.service.core import RoutingCore

    f = ring(6, 2)
    node = int(f.switches[0])
    port = next(p for p in range(1, int(f.num_ports[node]) + 1)
                if f.port_peer[f.port_start[node] + p] >= 0
                and int(f.port_node[f.port_peer[f.port_start[node] + p]]) in f.switches)
    a = f.port_start[node] + port
    link = int(np.flatnonzero((f.link_a == a) | (f.link_b == a))[0])
    core = RoutingCore(workers=1, coalesce_s=0.0, max_vls=4)
    try:
        core.load_fabric(f, "ring")
        e1 = core.route()
        assert e1.result.mode == "shortest" and e1.result.lanes is not None
        out = core.apply_faults([FaultEvent("link_down", int(f.node_guid[node]), port)])
        assert out.committed
        full = routed_ok(f.with_removed(links=[link]), max_vls=4)
        assert out.epoch.result.mode == full.mode
        assert np.array_equal(out.epoch.result.tables.ports, full.tables.ports)
    finally:
        core.close()


@pytest.mark.parametrize("vls", [1, 4])
def test_a_stored_epoch_resumes(vls: int) -> None:
    """Resume routes ``shortest`` again (its lanes are not stored) and gets
    the stored tables: the result validates, with the same lanes."""
    from smroute.fabric.roles import fabric_roles
    from smroute.routing import modes
    from smroute.service.epochs import own_tables
    from smroute.service.state.resume import rebuild_result

    f = ring(6, 2)
    r = own_tables(route(f, workers=1, max_vls=vls))
    assert r.mode == "shortest" and modes.routed_again(r.mode, r.mode_reason)
    meta = {"algorithm": r.algorithm, "lmc_setting": "fabric", "mode": r.mode,
            "mode_reason": r.mode_reason, "turn_lids": r.turn_lids, "timings": {"x": 1.0}}
    b = rebuild_result(f, r.tables, meta, fabric_roles(f), None, vls)
    assert b.mode == "shortest" and (b.lanes is None) == (vls == 1)
    if b.lanes is not None and r.lanes is not None:
        assert np.array_equal(b.lanes.lids, r.lanes.lids)
    assert validate_result(b).ok


def test_cli_generates_a_torus_and_a_hypercube(tmp_path: Path) -> None:
    """``smroute fabric generate torus``: the switches and cables of a 4 x 3
    torus and of a 3-D hypercube (every axis 2: one bundle between two
    neighbours); bad axes and too few ports exit 2 with the reason."""
    from smroute.fabric.ibnetdiscover.parse import read_fabric

    exe = [sys.executable, "-m", "smroute", "fabric", "generate", "torus"]
    out = tmp_path / "t.topo"
    for dims, n_sw, links in (("4x3", 12, 24), ("2x2x2", 8, 12)):
        p = subprocess.run([*exe, dims, "--hosts", "2", "--out", str(out)],
                           capture_output=True, text=True, check=False)
        assert p.returncode == 0, p.stderr
        f = read_fabric(out)
        sw = set(f.switches.tolist())
        between = sum(int(a) in sw and int(b) in sw for a, b in zip(
            f.port_node[f.link_a], f.port_node[f.link_b], strict=True))
        assert (len(f.switches), len(f.cas), between) == (n_sw, 2 * n_sw, links)
    for args, says in ((["4xq"], "4x4x4"), (["9x9x9", "--hosts", "36"], "ports a switch")):
        p = subprocess.run([*exe, *args, "--out", str(out)], capture_output=True, text=True,
                           check=False)
        assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr


def _dragonfly(groups: int, routers: int, hosts: int) -> Fabric:
    """A Dragonfly (Kim et al.): groups of routers cabled all to all, hosts
    on every router, one global cable between every two groups, spread over
    the routers."""
    site = Site(speed="HDR")
    r = [[site.switch(f"MF0;df-g{x}-r{y}:MQM8790/U1", 40, QUANTUM) for y in range(routers)]
         for x in range(groups)]
    for x, y in itertools.product(range(groups), range(routers)):
        for k in range(hosts):
            site.host(r[x][y], f"node{(x * routers + y) * hosts + k:04d} HCA-1")
    for x in range(groups):
        for y1, y2 in itertools.combinations(range(routers), 2):
            site.cable(r[x][y1], r[x][y2])
    used = np.zeros((groups, routers), dtype=np.int64)
    for x1, x2 in itertools.combinations(range(groups), 2):
        y1, y2 = int(np.argmin(used[x1])), int(np.argmin(used[x2]))
        used[x1, y1] += 1
        used[x2, y2] += 1
        site.cable(r[x1][y1], r[x2][y2])
    return site.build(np.random.default_rng(1))


def test_updown_costs_follow_the_routes_a_dragonfly_takes() -> None:
    """In the up*/down* orientation of a Dragonfly (no tree, every switch a
    leaf), a switch with a path down takes it even where a path up, then
    down is shorter; the costs of the switches below count with that route,
    so every switch with a cost has a neighbour one hop nearer in its phase
    (up-phase switches used to count with the shorter path and found no
    candidate: dead ends), and the default routes every pair on one VL."""
    f = _dragonfly(9, 4, 4)
    g, mode, _ = modes.start(f, fabric_roles(f))
    assert mode == "updown"
    c, _ = costs_and_dividers(g)
    lo, hi = g.up_pairs()
    hops = hop_counts(c)
    for s in range(g.n_switches):
        up_phase = (c[s] >= UP_PHASE) & (c[s] < INF)
        best = hops[hi[lo == s]].min(axis=0, initial=INF)
        assert (best[up_phase] + 1 == hops[s, up_phase]).all(), s
    routed_ok(f)


def _jellyfish(rng: np.random.Generator, n: int, extra: int, hosts: int) -> Fabric:
    """A random graph of ``n`` switches (a random spanning tree, then
    ``extra`` random bundles of one or two cables), 1 to ``hosts`` hosts on
    every switch."""
    site = Site(speed="HDR")
    sw = [site.switch(f"MF0;j{i:03d}:MQM8790/U1", 40, QUANTUM) for i in range(n)]
    k = 0
    for i in range(n):
        for _ in range(int(rng.integers(1, hosts + 1))):
            site.host(sw[i], f"node{k:04d} HCA-1")
            k += 1
    order = rng.permutation(n)
    pairs = {tuple(sorted((int(order[a]), int(order[rng.integers(0, a)])))) for a in range(1, n)}
    pairs |= {tuple(sorted(map(int, rng.choice(n, 2, replace=False)))) for _ in range(extra)}
    for a, b in sorted(pairs):
        site.cable(sw[a], sw[b], int(rng.integers(1, 3)))
    return site.build(rng)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_graphs_with_hosts_on_every_switch_route_on_one_vl(seed: int) -> None:
    """A random graph with hosts on every switch ranks some switches above
    others ("hosts on every level"), but it is a direct network: rooted at
    its centre, not at its top switches (which left pairs no up*/down* path
    joins), it routes every pair on one VL and with VLs."""
    rng = np.random.default_rng(seed)
    f = _jellyfish(rng, int(rng.integers(12, 40)), int(rng.integers(10, 60)), 4)
    roles = fabric_roles(f)
    assert roles.direct and len(roles.roots) == 1
    assert routed_ok(f).mode == "shortest"
    assert routed_ok(f, max_vls=4).mode == "shortest"
