"""Nmodc's entries into the leaves ranked apart
(smroute/routing/nmodc/entries.py) on a site grown in phases: which leaves
are apart, one line switch per director delivering each of their
destinations (several without the pass), every route delivered up*/down*
and free of credit loops, the loads on the leaves' cables and on the line
switches' cables into the pods, the pods climbing to such a leaf by every
spine and the line switches spreading each child's class of NIDs over the
director's spines, fat-trees untouched, and an incremental reroute equal
to a full route."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from routed import reroutes_equal_full_routes

from smroute.analysis.congestion import link_loads
from smroute.analysis.paths import pair_paths, routing_view
from smroute.fabric.generate.catalogue import build_shape
from smroute.fabric.generate.sitegen import CONNECTX5, SWITCHIB, Site
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.engine import RoutingResult, route, validate_result
from smroute.routing.nmodc import entries
from smroute.routing.reroute import reroute
from smroute.routing.topology import switch_graph

SHAPE = "edr-two-depths-2xcs7500-850"


@functools.cache
def site() -> Fabric:
    return build_shape(SHAPE)


@functools.cache
def routed(on: bool, off: str = "enter_dealt") -> RoutingResult:
    """The site routed on one VL, with the pass or without its part ``off``."""
    if on:
        return route(site(), workers=1)
    mp = pytest.MonkeyPatch()
    mp.setattr(entries, off, lambda *a: None)
    try:
        return route(site(), workers=1)
    finally:
        mp.undo()


def delivering(r: RoutingResult) -> list[int]:
    """Per end-port destination on a leaf ranked apart, how many switches
    deliver it into its leaf."""
    g, dest = r.graph, r.dest
    behind = g.behind()
    out = []
    for leaf in entries.apart_leaves(g).tolist():
        d = np.flatnonzero(~dest.is_switch & (dest.target == leaf))
        cols = r.tables.ports[:, dest.lid[d]].astype(np.int64)
        into = np.take_along_axis(behind, np.minimum(cols, 255), axis=1) == leaf
        out += into.sum(axis=0).tolist()
    return out


def test_the_site_s_first_leaves_are_ranked_apart() -> None:
    g = routed(True).graph
    leaves = entries.apart_leaves(g)
    names = {site().node_desc[int(g.sw_node[s])] for s in leaves.tolist()}
    assert len(leaves) == 20 and all(n.startswith("MF0;cn-leaf") for n in names)


def test_one_line_switch_per_director_delivers_each_destination() -> None:
    """With the pass two switches (one per director) deliver each end-port
    destination into its leaf; without it every line switch cabled to the
    leaf does (18)."""
    assert set(delivering(routed(True))) == {2}
    assert min(delivering(routed(False))) > 2


@pytest.mark.parametrize("on", [True, False])
def test_every_route_is_delivered_up_down_and_free_of_credit_loops(on: bool) -> None:
    r = routed(on)
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unroutable == 0
    assert check_credit_loops(site(), r.tables, r.lanes).ok


def test_the_leaves_cables_in_carry_their_share() -> None:
    """All-to-all among the compute hosts: the heaviest cable into a leaf
    ranked apart carries under two destinations' traffic with the pass,
    over twice that without it."""
    def heaviest(r: RoutingResult) -> float:
        view = routing_view(site(), r.tables)
        paths = pair_paths(view)
        hosts = np.flatnonzero(np.char.startswith(
            np.asarray(site().node_desc, dtype=str), "cn-"))
        ep = np.flatnonzero(np.isin(view.ep_node, hosts))
        src, dst = np.repeat(ep, len(ep)), np.tile(ep, len(ep))
        load, _ = link_loads(view, paths, src[src != dst], dst[src != dst])
        g = r.graph
        apart = set(int(g.sw_node[s]) for s in entries.apart_leaves(g).tolist())
        s = view.link_switch
        into = np.array([sw >= 0 and int(view.next_sw[sw * 256 + p]) >= 0
                         and int(view.sw_node[int(view.next_sw[sw * 256 + p])]) in apart
                         for sw, p in zip(s.tolist(), view.link_port.tolist(), strict=True)])
        return float(load[into].max()) / (len(ep) - 1)
    on, off = heaviest(routed(True)), heaviest(routed(False))  # (1.6 and 5.8)
    assert on < 2 < 2 * on < off


def test_the_first_leaves_spread_each_pod_over_the_line_switches_cables() -> None:
    """A leaf ranked apart sends a pod's destinations up by the skewed
    digit: those it sends through one line switch then leave it over two
    or more of its cables into that pod in 99% of the (leaf, line switch,
    pod) triples, against 11% with the leaf's digit ``x mod 18`` (which
    fixes the line switch's ``x mod`` its cables into the pod)."""
    def spread(r: RoutingResult) -> float:
        g, dest, ports = r.graph, r.dest, r.tables.ports
        behind = g.behind()
        apart = entries.apart_leaves(g)
        others = g.is_leaf.copy()
        others[apart] = False
        d = np.flatnonzero(~dest.is_switch & others[dest.target])
        pod = behind[dest.target[d]].max(axis=1)  # (a pod's leaves share their spines)
        hits = []
        for leaf in apart.tolist():
            line = behind[leaf][ports[leaf, dest.lid[d]]]
            for key in np.unique(line * g.n_switches + pod).tolist():
                x = d[line * g.n_switches + pod == key]
                if len(x) > 1:
                    hits.append(len(np.unique(ports[key // g.n_switches, dest.lid[x]])) > 1)
        return float(np.mean(hits))
    assert spread(routed(True)) > 0.9 and spread(routed(False, "up_skewed")) < 0.2


def test_the_pods_climb_to_a_leaf_ranked_apart_by_every_spine() -> None:
    """A pod leaf sends the destinations of a leaf ranked apart up by its
    digit over all nine of its spines (the two it shares line switches with
    alone would be the minimal routes): each first leaf's 18 destinations
    leave every pod leaf over all nine spines."""
    r = routed(True)
    g, dest, ports = r.graph, r.dest, r.tables.ports
    behind = g.behind()
    apart = entries.apart_leaves(g)
    pod = np.flatnonzero(g.is_leaf & ~np.isin(np.arange(g.n_switches), apart))
    used = []
    for leaf in apart.tolist():
        lid = dest.lid[~dest.is_switch & (dest.target == leaf)]
        used += [len(np.unique(behind[s][ports[s, lid]])) for s in pod.tolist()]
    assert set(used) == {9}


def test_a_line_switch_spreads_what_each_child_sends_over_the_spines() -> None:
    """A switch below a line switch sends it the destinations of one class
    of NIDs modulo its stride (a first leaf's ``x mod 18``; a pod spine,
    which its leaves send ``x mod 9``, ``x mod 162``).  The destinations of
    the leaves ranked apart in one such class climb from the line switch
    to distinct spines (by the digit of its strides): 95% of them, against
    70% by the line switches' own digit ``floor(x / 162)``, which sends
    the NIDs of nine first leaves up one spine."""
    r = routed(True)
    g, dest, ports, pi = r.graph, r.dest, r.tables.ports, r.dividers
    behind = g.behind()
    apart = entries.apart_leaves(g)
    d = np.flatnonzero(~dest.is_switch & np.isin(dest.target, apart))
    lid, x = dest.lid[d], dest.nid[d]
    climbing = distinct = 0
    for child in np.flatnonzero(g.rank < 2).tolist():
        via = behind[child][ports[child, lid]]
        for line in np.unique(via[g.rank[np.maximum(via, 0)] == 2]).tolist():
            for cls in np.unique(x % pi[child]).tolist():
                sel = (via == line) & (dest.target[d] != child) & (x % pi[child] == cls)
                up = behind[line][ports[line, lid[sel]]]
                up = up[g.rank[np.maximum(up, 0)] == 3]
                climbing += len(up)
                distinct += len(np.unique(up))
    assert climbing and distinct / climbing > 0.9


@pytest.mark.parametrize("links", [0, 40])
def test_a_fat_tree_has_no_leaf_ranked_apart(links: int) -> None:
    f = pgft(3, (8, 8, 8), (1, 8, 8), (1, 1, 1))
    if links:
        f = degrade(f, np.random.default_rng(2), links=links)[0]
    assert not len(entries.apart_leaves(switch_graph(f)))


def small_site() -> Fabric:
    """A director of 8 line and 4 spine switches, 4 leaves of 4 hosts cabled
    to it straight (4 cables each) beside two pods of 3 leaves behind 2
    spines (2 cables per leaf and spine, 4 from each spine to the director)."""
    site = Site(speed="EDR", host_device=CONNECTX5)
    d = site.director("core1", "CS7500", line_asics=8, spine_asics=4, radix=16, device=SWITCHIB)
    n = 0
    for i in range(4):
        x = site.switch(f"first{i}", 16, SWITCHIB)
        for _ in range(4):
            site.host(x, f"cn{n:03d} mlx5_0")
            n += 1
        site.cable_director(x, d, 4)
    for p in range(2):
        leaves = site.switches([f"p{p}-leaf{i}" for i in range(3)], 16, SWITCHIB)
        spines = site.switches([f"p{p}-spine{j}" for j in range(2)], 16, SWITCHIB)
        for x in leaves:
            for _ in range(4):
                site.host(x, f"cn{n:03d} mlx5_0")
                n += 1
            for s in spines:
                site.cable(x, s, 2)
        for s in spines:
            site.cable_director(s, d, 4)
    return site.build(np.random.default_rng(1))


def test_an_incremental_reroute_equals_a_full_route() -> None:
    """The small site (mode ``tree``, where the reroute is incremental):
    every single cut rerouted equals its full route, the pass included, and
    is delivered up*/down* (a line switch that lost a cable to a spine is
    no entry)."""
    f = small_site()
    prev = route(f, workers=1)
    assert prev.mode == "tree" and len(entries.apart_leaves(prev.graph)) == 4
    assert min(delivering(prev)) == max(delivering(prev)) == 1
    sw = f.node_type == NodeType.SWITCH
    inter = np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])
    for k in range(0, len(inter), 3):
        f2 = f.with_removed(links=inter[k:k + 1])
        got = reroute(prev, f2, lmc=None)
        full = route(f2, workers=1)
        assert got.incremental and validate_result(full).ok, k
        assert "without the pass" not in full.mode_reason, k  # (the guard kept it)
        assert np.array_equal(got.result.tables.ports, full.tables.ports), k


def test_a_line_switch_that_lost_a_spine_is_no_entry() -> None:
    """Both cables between a line switch the first leaves hang off and a
    spine of the director cut: that spine could not send a destination
    down to it, so it is no entry; the pass stays (the guard drops none)
    and every route is delivered up*/down*."""
    f = small_site()
    prev = route(f, workers=1)
    g, behind = prev.graph, prev.graph.behind()
    leaf = int(entries.apart_leaves(g)[0])
    line = int(behind[leaf][behind[leaf] >= 0][0])
    spine = int(behind[line][(behind[line] >= 0) & (g.rank[behind[line]] > g.rank[line])][0])
    nodes = f.port_node[np.stack([f.link_a, f.link_b])]
    pair = {int(g.sw_node[line]), int(g.sw_node[spine])}
    cut = np.flatnonzero([{int(a), int(b)} == pair for a, b in nodes.T.tolist()])
    assert len(cut) == 2
    r = route(f.with_removed(links=cut), workers=1)
    assert validate_result(r).ok and "without the pass" not in r.mode_reason
    assert set(delivering(r)) == {1}


def merged_site(join: str = "all", a_spines: int = 4) -> Fabric:
    """Two leaf/spine clusters joined at their spines: A (8 leaves under 4
    spines) and B (6 leaves under 3 spines), 16 hosts a leaf, hosts named
    in cabling order.  ``join`` ``all``: every spine of A cabled to every
    spine of B (B's spines are the tops, B's leaves ranked apart below
    them); ``pair``: spine ``j`` of A to spine ``j`` of B alone (two cables)."""
    site = Site(speed="EDR", host_device=CONNECTX5)
    sizes = {"a": (8, a_spines), "b": (6, 3)}
    spines = {}
    for c, (n_leaves, n_spines) in sizes.items():
        leaves = site.switches([f"{c}-leaf{i}" for i in range(n_leaves)], 36, SWITCHIB)
        spines[c] = site.switches([f"{c}-spine{j}" for j in range(n_spines)], 36, SWITCHIB)
        for i, x in enumerate(leaves):
            for k in range(16):
                site.host(x, f"cn-{c}{i:02d}-{k:02d} mlx5_0")
            for s in spines[c]:
                site.cable(x, s)
    for j, a in enumerate(spines["a"]):
        for k, b in enumerate(spines["b"]):
            if join == "all" or j == k:
                site.cable(a, b, 1 if join == "all" else 2)
    return site.build(np.random.default_rng(3))


@functools.cache
def merged(join: str, on: bool, a_spines: int = 4) -> RoutingResult:
    """:func:`merged_site` routed on one VL, with the entries through the
    tops or without them."""
    if on:
        return route(merged_site(join, a_spines), workers=1)
    mp = pytest.MonkeyPatch()
    mp.setattr(entries, "_enter_tops", lambda *a: None)
    try:
        return route(merged_site(join, a_spines), workers=1)
    finally:
        mp.undo()


def entry_tops(r: RoutingResult) -> list[list[np.ndarray]]:
    """Per leaf ranked apart (a list each) and end-port destination on it,
    the switches the routes from every other leaf enter it from."""
    g, dest, ports = r.graph, r.dest, r.tables.ports
    behind = g.behind()
    out = []
    for leaf in entries.apart_leaves(g).tolist():
        d = np.flatnonzero(~dest.is_switch & (dest.target == leaf))
        into = []
        for lid in dest.lid[d].tolist():
            last = set()
            for s in np.flatnonzero(g.is_leaf).tolist():
                hops = 0
                while s != leaf and hops < 8:
                    s, prev = int(behind[s, ports[s, lid]]), s
                    hops += 1
                if hops and s == leaf:
                    last.add(prev)
            into.append(np.array(sorted(last)))
        out.append(into)
    return out


def test_each_destination_below_the_tops_enters_through_one_of_them() -> None:
    """Cluster B's leaves hang off the tops: with the entries every switch
    below the tops sends each of their destinations up into one top, and
    each top takes 5 or 6 of a leaf's 16 destinations; without them the
    spines of A and the leaves of B pick the top by digits of their own
    (two or three tops a destination)."""
    on = entry_tops(merged("all", True))
    assert len(on) == 6
    for leaf in on:
        assert {len(t) for t in leaf} == {1}
        assert sorted(np.unique([int(t[0]) for t in leaf], return_counts=True)[1]) == [5, 5, 6]
    assert max(len(t) for leaf in entry_tops(merged("all", False)) for t in leaf) > 1


def name_order_hsd(f: Fabric, r: RoutingResult) -> float:
    """The shift permutations' mean largest link load, compute hosts in
    host-name order."""
    view = routing_view(f, r.tables)
    paths = pair_paths(view)
    names = np.asarray([f.node_desc[int(n)] for n in view.ep_node], dtype=str)
    order = np.argsort(names, kind="stable")
    return float(np.mean([link_loads(view, paths, order, np.roll(order, -k))[0].max()
                          for k in range(1, len(order))]))


@pytest.mark.parametrize(("a_spines", "gain"), [(4, 0.9), (3, 1.0)])
def test_the_entries_through_the_tops_lower_the_shifts_loads(a_spines: int, gain: float) -> None:
    """Host-name order (cluster A, then B), 4 spines in A: 7.64 without the
    entries, 6.44 with them (OpenSM's dnup 6.2, dfsssp 6.53 on this
    cabling).  With 3 spines in A, as many as tops: 7.58 and 7.42.  There a
    spine of A takes the destinations ``x mod 3 = j``, so an entry digit
    ``x mod 3`` would send all of them into one top (18.7): the entry's
    digit mixes ``floor(x / 3)`` in."""
    f = merged_site("all", a_spines)
    on, off = (name_order_hsd(f, merged("all", x, a_spines)) for x in (True, False))
    assert on < gain * off


@pytest.mark.parametrize("join", ["all", "pair"])
def test_the_merged_clusters_are_delivered_free_of_credit_loops(join: str) -> None:
    r = merged(join, True)
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unroutable == 0
    assert check_credit_loops(merged_site(join), r.tables, r.lanes).ok


def test_where_the_leaves_below_choose_the_top_they_follow_the_entry_too() -> None:
    """Spine ``j`` of A cabled to spine ``j`` of B alone: a spine of A has
    one way up, so the leaves of A choose the top; they take the spine of A
    below each destination's entry top, and each destination enters its
    leaf through one top (two or three without the entries)."""
    for leaf in entry_tops(merged("pair", True)):
        assert {len(t) for t in leaf} == {1}
    assert max(len(t) for leaf in entry_tops(merged("pair", False)) for t in leaf) > 1


def test_a_merged_site_rerouted_incrementally_equals_a_full_route() -> None:
    """Every third cable between two switches of the merged clusters cut
    alone: the incremental reroute (the entries through the tops redone)
    equals the full route of the fabric without it (a cut that changes the
    ranks is routed in full)."""
    f = merged_site("all")
    prev = merged("all", True)
    assert prev.mode == "tree"
    sw = f.node_type == NodeType.SWITCH
    cuts = len(range(0, int((sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]]).sum()), 3))
    assert reroutes_equal_full_routes(prev, f, 3) >= cuts // 2
