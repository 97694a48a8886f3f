"""Nmodc on leaves in uneven bundles (smroute/routing/nmodc/shortcuts.py,
bundles.py): which leaves have a shortcut, the spread's water-filling
against a one-at-a-time greedy, the routes it leaves (delivered, up*/down*,
free of credit loops), a spine's deal over unequal bundles, line switches'
skewed way up, a leaf's share of a target per director, one cable into a
leaf per director and destination, fat-trees untouched, an incremental
reroute equal to a full route, and the optional passes dropped last first
where they cost delivery on one VL."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from smroute.fabric.generate.catalogue import Shape, build, build_shape, bundles_to_directors
from smroute.fabric.generate.sitegen import CONNECTX5, SWITCHIB
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.model.builder import FabricBuilder
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.dmodc import INF, UP_PHASE, Destinations
from smroute.routing.engine import RoutingResult, route, validate_result
from smroute.routing.nmodc import bundles, shortcuts
from smroute.routing.reroute import reroute
from smroute.routing.topology import SwitchGraph


def uneven_directors() -> Fabric:
    """Two directors (3 line switches, 2 spines each), 4 leaves of 4 hosts
    (leaf 1: 12) cabled to the line switches in uneven bundles: leaves 0
    and 1 share line switch 0 by one cable each (leaf 0's carries leaf 1's
    12 hosts, three times its share), leaves 2 and 3 line switch 5 by two."""
    b = FabricBuilder()
    lid = iter(range(1, 1000))
    free: dict[int, int] = {}

    def node(kind: NodeType, guid: int, desc: str) -> int:
        i = b.add_node(kind, guid, 16 if kind == NodeType.SWITCH else 1, desc)
        b.set_port(i, 0 if kind == NodeType.SWITCH else 1, guid=guid, lid=next(lid))
        free[i] = 1
        return i

    def link(a: int, z: int) -> None:
        b.add_link(a, free[a], z, free[z])
        free[a] += 1
        free[z] += 1

    line = [node(NodeType.SWITCH, 0x100 + i, f"line{i}") for i in range(6)]
    spine = [node(NodeType.SWITCH, 0x200 + i, f"spine{i}") for i in range(4)]
    for d in range(2):
        for ln in line[3 * d:3 * d + 3]:
            for sp in spine[2 * d:2 * d + 2]:
                link(ln, sp)
    bundles = [{0: 1, 1: 2, 3: 3}, {0: 1, 2: 2, 4: 1}, {1: 1, 2: 1, 5: 2}, {3: 1, 4: 1, 5: 2}]
    for k, (bundle, hosts) in enumerate(zip(bundles, (4, 12, 4, 4), strict=True)):
        leaf = node(NodeType.SWITCH, 0x300 + k, f"leaf{k}")
        for h in range(hosts):
            link(leaf, node(NodeType.CA, 0x1000 + 16 * (16 * k + h), f"n{16 * k + h} HCA-1"))
        for ln, count in bundle.items():
            for _ in range(count):
                link(leaf, line[ln])
    return b.build()


def _up_cables(g: SwitchGraph, s: int) -> tuple[np.ndarray, np.ndarray]:
    """The up cables of ``s`` (ports) and the switch each leads to."""
    cable, upper = [], []
    for k in np.flatnonzero((g.grp_switch == s) & (g.rank[g.grp_remote] > g.rank[s])):
        at = g.grp_ports[g.grp_port_first[k]:g.grp_port_first[k] + g.grp_port_count[k]]
        cable += at.tolist()
        upper += [int(g.grp_remote[k])] * len(at)
    return np.asarray(cable), np.asarray(upper)


def greedy(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
           leaves: np.ndarray) -> None:
    """The rule one destination at a time, highest NID first: each beyond
    its cable's share, on a cable above the trigger, to the least-loaded
    reaching cable below the share (lowest cable first among equals)."""
    ca = np.flatnonzero(~dest.is_switch)
    for s in leaves.tolist():
        cable, upper = _up_cables(g, s)
        place = {int(p): i for i, p in enumerate(cable.tolist())}
        d = [int(x) for x in ca if int(ports[s, dest.lid[x]]) in place]
        on = {x: place[int(ports[s, dest.lid[x]])] for x in d}
        load = np.bincount(list(on.values()), minlength=len(cable))
        share = -(-len(d) // len(cable))
        hot = load > shortcuts.TRIGGER * share
        for x in sorted(d, key=lambda x: -int(dest.nid[x])):
            j = on[x]
            if not hot[j] or load[j] <= share:
                continue
            ok = [a for a in range(len(cable))
                  if c[upper[a], dest.target[x]] < INF and load[a] < share]
            if ok:
                a = min(ok, key=lambda a: (load[a], a))
                load[j] -= 1
                load[a] += 1
                ports[s, dest.lid[x]] = cable[a]


def without_bundles(f: Fabric) -> RoutingResult:
    """The default's routing of ``f`` as if no leaf had a shortcut (no
    pass of :mod:`smroute.routing.nmodc.bundles`)."""
    mp = pytest.MonkeyPatch()
    mp.setattr(shortcuts, "shortcut_leaves", lambda g, c: np.zeros(0, dtype=np.int64))
    try:
        return route(f, workers=1)
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def routed() -> tuple[Fabric, RoutingResult, RoutingResult]:
    """The fabric, its default routing and the same without the bundles' passes."""
    f = uneven_directors()
    return f, route(f, workers=1), without_bundles(f)


def _most(r: RoutingResult, s: int) -> int:
    """The most end-port destinations on one up cable of leaf ``s``."""
    cable, _ = _up_cables(r.graph, s)
    lids = r.dest.lid[~r.dest.is_switch & (r.dest.target != s)]
    return int(np.bincount(r.tables.ports[s, lids], minlength=256)[cable].max())


def test_every_leaf_sharing_a_line_switch_has_a_shortcut(
        routed: tuple[Fabric, RoutingResult, RoutingResult]) -> None:
    _, r, _ = routed
    assert shortcuts.shortcut_leaves(r.graph, r.costs).tolist() == \
        np.flatnonzero(r.graph.is_leaf).tolist()


def test_the_spread_evens_the_up_cables_and_keeps_every_route_up_down(
        routed: tuple[Fabric, RoutingResult, RoutingResult]) -> None:
    f, r, off = routed
    assert r.mode == off.mode == "tree"
    g = off.graph
    leaves = np.flatnonzero(g.is_leaf)
    spread = off.tables.ports.copy()
    assert shortcuts.spread_up_cables(g, off.costs, off.dest, spread, leaves) > 0
    spread_r = dataclasses.replace(off, tables=dataclasses.replace(off.tables, ports=spread,
                                                                   _index={}))
    before = [_most(off, s) for s in leaves.tolist()]
    after = [_most(spread_r, s) for s in leaves.tolist()]
    assert all(a <= b for a, b in zip(after, before, strict=True))
    assert sum(after) < sum(before), (before, after)
    # only leaves' entries of end-port LIDs moved
    sw, lid = np.nonzero(spread != off.tables.ports)
    assert len(sw) and set(g.rank[sw].tolist()) == {0}
    assert not off.dest.is_switch[np.isin(off.dest.lid, lid)].any()
    # the default's tables (the spread and the bundles' ways up and down)
    assert not np.array_equal(r.tables.ports, off.tables.ports)
    for res in (spread_r, r):
        v = validate_result(res)
        assert v.ok and v.updown_violations == 0 and v.non_minimal > 0  # longer, up*/down*
        assert check_credit_loops(f, res.tables).ok
    assert validate_result(off).non_minimal == 0


def _down_cables(r: RoutingResult, s: int, leaf: int) -> np.ndarray:
    """Per cable into ``leaf`` from the switches below ``s``, how many of the
    leaf's end-port destinations ``s`` sends down it."""
    g, ports, dest = r.graph, r.tables.ports, r.dest
    remote = g.behind()
    count: dict[tuple[int, int], int] = {}
    for lid in dest.lid[~dest.is_switch & (dest.target == leaf)].tolist():
        line = int(remote[s, ports[s, lid]])
        key = (line, int(ports[line, lid]))
        count[key] = count.get(key, 0) + 1
    cabled = [(int(g.grp_switch[k]), int(p)) for k in np.flatnonzero(g.grp_remote == leaf)
              for p in g.grp_ports[g.grp_port_first[k]:g.grp_port_first[k]
                                   + g.grp_port_count[k]].tolist()
              if remote[s, :].tolist().count(int(g.grp_switch[k]))]
    return np.asarray([count.get(c, 0) for c in cabled])


def test_a_spine_deals_a_leaf_over_its_cables_in_unequal_bundles(
        routed: tuple[Fabric, RoutingResult, RoutingResult]) -> None:
    _, r, off = routed
    g = r.graph
    # spine 0 reaches leaf 1 (12 hosts) over line 0 (1 cable) and line 2 (2 cables)
    spine, leaf = 6, 11
    assert g.rank[spine] == 2 and g.is_leaf[leaf]
    dealt, kernel = _down_cables(r, spine, leaf), _down_cables(off, spine, leaf)
    assert len(dealt) == 3 and dealt.sum() == kernel.sum() == 12
    assert dealt.tolist() == [4, 4, 4] and kernel.max() == 6, (dealt, kernel)


def test_line_switches_send_a_leaf_to_many_spines_on_uneven_bundles() -> None:
    f = build_shape("edr-bundles-3xcs7500-1400")
    off, r = without_bundles(f), route(f, workers=1)
    assert r.mode == off.mode and validate_result(r).ok and check_credit_loops(f, r.tables).ok
    g, dest = r.graph, r.dest
    lines = np.flatnonzero(g.rank == 1)
    leaves = np.flatnonzero(g.is_leaf)
    spines = {}
    for res in (off, r):
        seen = []
        for line in lines[:12].tolist():
            for leaf in leaves[::7].tolist():
                lids = dest.lid[~dest.is_switch & (dest.target == leaf)]
                if r.costs[line, leaf] >= UP_PHASE:  # (going up)
                    seen.append(len(np.unique(res.tables.ports[line, lids])))
        spines[id(res)] = np.median(seen)
    # Dmodc's digit: a leaf's destinations reach two or three of a director's 18 spines
    assert spines[id(off)] <= 3 and spines[id(r)] >= 12, spines


@pytest.fixture(scope="module")
def shape() -> tuple[Fabric, RoutingResult, RoutingResult]:
    """The catalogue's uneven-bundles shape, its default routing and the
    same without the bundles' passes."""
    f = build_shape("edr-bundles-3xcs7500-1400")
    return f, route(f, workers=1), without_bundles(f)


def _directors(g: SwitchGraph) -> np.ndarray:
    """``(S,)`` each line switch's director (its first spine), else -1."""
    director = np.full(g.n_switches, -1, dtype=np.int64)
    for s in np.flatnonzero(g.rank == 1).tolist():
        director[s] = g.grp_remote[g.groups_of(s, up=True)].min()
    return director


def _entries(r: RoutingResult, ports: np.ndarray) -> np.ndarray:
    """From every leaf to every end-port destination on another leaf,
    walked: ``(K, 3)`` distinct (destination, director, cable) of the
    cables the routes enter the destination's leaf over (a cable as its
    switch * 256 + port; the director: the switch's first spine)."""
    g, dest = r.graph, r.dest
    behind, director = g.behind(), _directors(g)
    leaves = np.flatnonzero(g.is_leaf)
    d = np.flatnonzero(~dest.is_switch & g.is_leaf[dest.target])
    at, x = np.repeat(leaves, len(d)), np.tile(d, len(leaves))
    keep = at != dest.target[x]
    at, x = at[keep], x[keep]
    got = []
    for _ in range(8):  # the longest route: up, up, down, down (and a turn)
        nxt = behind[at, ports[at, dest.lid[x]]]
        assert (nxt >= 0).all()
        last = nxt == dest.target[x]
        got.append(np.stack([x[last], director[at[last]],
                             at[last] * 256 + ports[at[last], dest.lid[x[last]]]], axis=1))
        at, x = nxt[~last], x[~last]
    assert not len(at)
    return np.unique(np.concatenate(got), axis=0)


def test_one_cable_into_a_leaf_per_director_and_destination(
        shape: tuple[Fabric, RoutingResult, RoutingResult]) -> None:
    """Every leaf's routes to a destination enter its leaf over one cable
    per director (the deal down, and the shortcuts through it); without
    the passes over several."""
    _, r, off = shape
    for res, most in ((r, 1), (off, 2)):
        e = _entries(res, res.tables.ports)
        per = np.unique(e[:, :2], axis=0, return_counts=True)[1]
        assert (per.max() == 1) if most == 1 else (per.max() >= 2), per.max()


def test_a_leaf_shares_a_target_over_the_directors_by_both_cable_counts(
        shape: tuple[Fabric, RoutingResult, RoutingResult]) -> None:
    """A leaf sends a target leaf's destinations into each director in
    proportion to the product of both leaves' cables into it (each within
    one of its share); before, in proportion to its own."""
    _, r, off = shape
    g, dest = r.graph, r.dest
    director = _directors(g)
    dirs = np.unique(director[director >= 0])

    def cables(leaf: int) -> np.ndarray:
        ks = g.groups_of(leaf, up=True)
        return np.asarray([g.grp_port_count[ks][director[g.grp_remote[ks]] == dd].sum()
                           for dd in dirs])

    def sent(res: RoutingResult, a: int, t: int) -> np.ndarray:
        lids = dest.lid[~dest.is_switch & (dest.target == t)]
        ks = g.groups_of(a, up=True)
        to = {int(p): int(director[g.grp_remote[k]]) for k in ks
              for p in g.grp_ports[g.grp_port_first[k]:g.grp_port_first[k]
                                   + g.grp_port_count[k]].tolist()}
        got = [to[int(p)] for p in res.tables.ports[a, lids].tolist()]
        return np.asarray([got.count(int(dd)) for dd in dirs])

    leaves = np.flatnonzero(g.is_leaf)
    far = {}
    for res in (r, off):
        worst = 0.0
        for a in leaves[::5].tolist():
            for t in leaves[3::11].tolist():
                if a == t:
                    continue
                n = sent(res, a, t)
                want = n.sum() * cables(a) * cables(t) / (cables(a) * cables(t)).sum()
                worst = max(worst, float(np.abs(n - want).max()))
        far[id(res)] = worst
    assert far[id(r)] <= 1.0 and far[id(off)] > 2.0, far


def test_the_water_filling_is_the_one_at_a_time_greedy(
        routed: tuple[Fabric, RoutingResult, RoutingResult]) -> None:
    _, _, off = routed
    fabrics = [(off.graph, off.costs, off.dest, off.tables.ports)]
    big = route(build_shape("edr-bundles-3xcs7500-1400"), workers=1)
    fabrics.append((big.graph, big.costs, big.dest, big.tables.ports))
    for g, c, dest, ports in fabrics:
        leaves = shortcuts.shortcut_leaves(g, c)
        assert len(leaves)
        a, b = ports.copy(), ports.copy()
        shortcuts.spread_up_cables(g, c, dest, a, leaves)
        greedy(g, c, dest, b, leaves)
        assert np.array_equal(a, b)
        # spread again, nothing moves
        assert shortcuts.spread_up_cables(g, c, dest, a.copy(), leaves) == 0


@pytest.mark.parametrize("links", [0, 6])
def test_a_fat_tree_has_no_shortcut(links: int) -> None:
    tree = degrade(pgft(3, (4, 4, 4), (1, 4, 2), (1, 1, 1)), np.random.default_rng(1),
                   links=links)[0]
    t = route(tree, workers=1)
    assert not len(shortcuts.shortcut_leaves(t.graph, t.costs))


def test_an_incremental_reroute_equals_a_full_route(
        routed: tuple[Fabric, RoutingResult, RoutingResult]) -> None:
    f, prev, _ = routed
    sw = f.node_type == NodeType.SWITCH
    inter = np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])
    took = []
    for k in range(len(inter)):
        f2 = f.with_removed(links=inter[k:k + 1])
        got = reroute(prev, f2, lmc=None)
        if not got.incremental:  # (the NIDs changed: a full route)
            continue
        full = route(f2, workers=1)
        assert np.array_equal(got.result.tables.ports, full.tables.ports), k
        again = reroute(got.result, f, lmc=None)  # repaired
        assert again.incremental and np.array_equal(again.result.tables.ports,
                                                    prev.tables.ports), k
        took.append(k)
    # a leaf's cable among them
    leaf_cables = [k for k in took if (f.port_node[[f.link_a[inter[k]], f.link_b[inter[k]]]]
                                       >= 10).any()]
    assert len(took) >= 4 and leaf_cables, took


def _services_site() -> Fabric:
    """Two directors, 48 leaves in bundles of 1 to 4 cables to 5 to 9 line
    ASICs, UFM and storage on line ASICs."""
    seed = 281851551
    return build(Shape("s", "s", "ibnetdiscover", seed, bundles_to_directors(
        "CS7500", 2, 36, 18, 36, SWITCHIB, 48, 18, 16, (5, 9), 4, "SB7800", "cn", 2, 8, seed),
        "EDR", CONNECTX5))


def test_where_the_bundles_cost_delivery_on_one_vl_the_tables_go_without_them() -> None:
    """The site above, damaged: with the bundles' ways no orientation
    serves 54 destinations on one VL, without them every one is served.
    The passes are optional (they only even loads): the route goes without
    them and says so."""
    f = degrade(_services_site(), np.random.default_rng(3), links=5)[0]
    r = route(f, workers=1)
    assert validate_result(r).ok and check_credit_loops(f, r.tables).ok
    assert "routed without the pass bundles, through the deal" in r.mode_reason
    assert np.array_equal(r.tables.ports, without_bundles(f).tables.ports)


def test_the_last_optional_pass_goes_first() -> None:
    """The site above, whole: on one VL only the shortcuts through the deal
    leave destinations no orientation serves; the route keeps the other
    bundles' ways (the same tables as without that pass alone), and with
    VLs keeps both."""
    f = _services_site()
    r = route(f, workers=1)
    assert validate_result(r).ok and check_credit_loops(f, r.tables).ok
    assert "routed without the pass through the deal:" in r.mode_reason
    mp = pytest.MonkeyPatch()
    mp.setattr(bundles, "through_the_deal", lambda *a: None)
    try:
        alone = route(f, workers=1)
    finally:
        mp.undo()
    assert np.array_equal(r.tables.ports, alone.tables.ports)
    assert not np.array_equal(r.tables.ports, without_bundles(f).tables.ports)
    v = route(f, workers=1, max_vls=4)
    assert "without the pass" not in v.mode_reason
    assert validate_result(v).ok and check_credit_loops(f, v.tables, v.lanes).ok


def two_directors_unequally() -> Fabric:
    """24 leaves of 20 hosts, one cable to each of 10 line ASICs of a
    CS8500 and of 5 of a CS7510, dealt round-robin (a leaf shares all its
    CS8500 ASICs with every fourth leaf and one or two CS7510 ASICs with
    most others)."""
    from smroute.fabric.generate.sitegen import CONNECTX6, QUANTUM, Site

    s = Site(speed="HDR", host_device=CONNECTX6)
    leaves = s.switches([f"MF0;leaf{i + 1:02d}:MQM/U1" for i in range(24)], 40, QUANTUM)
    for i, leaf in enumerate(leaves):
        for k in range(20):
            s.host(leaf, f"cn-{i + 1:02d}-{k + 1:02d} mlx5_0")
    big = s.director("core1", "CS8500", line_asics=40, spine_asics=20, radix=40, device=QUANTUM)
    small = s.director("core2", "CS7510", line_asics=18, spine_asics=9, radix=36,
                       device=SWITCHIB)
    for leaf in leaves:
        s.cable_director(leaf, big, 10)
        s.cable_director(leaf, small, 5)
    return s.build(np.random.default_rng(2))


def test_a_cable_above_one_and_a_half_shares_gives_up_the_excess(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every leaf has a shortcut through a shared CS7510 line ASIC to most
    leaves; the spread keeps every up cable of a leaf within 1.5 fair
    shares (of its host and aggregation-node destinations).  At twice the
    share some cable carried more than 1.7 shares."""
    f = two_directors_unequally()

    def most(r: RoutingResult) -> float:
        g, dest, ports = r.graph, r.dest, r.tables.ports
        ca = np.flatnonzero(~dest.is_switch)
        worst = 0.0
        for s in shortcuts.shortcut_leaves(g, r.costs).tolist():
            ks = g.groups_of(s, up=True)
            cables = g.grp_ports[g.grp_port_first[ks]]
            on = np.isin(ports[s, dest.lid[ca]], cables)
            load = np.bincount(ports[s, dest.lid[ca]][on], minlength=256)[cables]
            worst = max(worst, load.max() / -(-on.sum() // len(cables)))
        return worst

    r = route(f, workers=1)
    assert len(shortcuts.shortcut_leaves(r.graph, r.costs)) == 24
    assert validate_result(r).ok and check_credit_loops(f, r.tables, r.lanes).ok
    assert most(r) <= 1.5
    monkeypatch.setattr(shortcuts, "TRIGGER", 2.0)
    assert most(route(f, workers=1)) > 1.7
