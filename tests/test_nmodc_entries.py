"""Nmodc's entries into the leaves ranked apart
(smroute/routing/nmodc/entries.py) on a site grown in phases: which leaves
are apart, one line switch per director delivering each of their
destinations (several without the pass), every route delivered up*/down*
and free of credit loops, the loads on the leaves' cables and on the line
switches' cables into the pods, fat-trees untouched, and an incremental
reroute equal to a full route."""

from __future__ import annotations

import functools

import numpy as np
import pytest

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
