"""Which pairs need a route, and no global fallback on director sites.

Director sites: a two-level tree whose spines are directors (line and spine
ASICs, as :func:`~smroute.fabric.generate.trees.pgft` wires a three-level PGFT), a
SHARP aggregation node on every ASIC including the spine ASICs, service
hosts on a spine ASIC (``smroute fabric generate ... --agg --spine-hosts``)
or on line ASICs.  Their traffic has no up*/down* path to some end-ports on
upper switches; the tree's routes must stay for every other destination and
the few that need it turn, free of credit loops on one VL.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from smroute.fabric.generate.catalogue import build_shape, director_site
from smroute.fabric.generate.shapes import attach_cas, ring, with_aggregation_nodes
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import REASONS, EndportRole, SwitchRole, fabric_roles, needed_pairs
from smroute.routing import api, dmodc, modes, orient, turn_switches
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.engine import (
    RoutingResult,
    commit_gaps,
    route,
    unrouted_connected,
    validate_result,
)
from smroute.routing.pool import RoutePool
from smroute.routing.topology import SwitchGraph, rooted_graph, switch_graph

ROOT = Path(__file__).resolve().parents[1]

#: a director site (:func:`~smroute.fabric.generate.catalogue.director_site`)
#: with two cables cut: its service hosts' and aggregation nodes' traffic
#: needs another orientation for some destinations
DEGRADED = {"remove_links": 2, "seed": 0}


def _tree_tables(fabric: Fabric, g: SwitchGraph | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The default engine's tree tables of ``fabric`` (or its tables on
    ``g``) and its destination LIDs, no mode applied."""
    g = g if g is not None else switch_graph(fabric, fabric_roles(fabric))
    eng = api.engine(api.DEFAULT)
    prep = eng.prepare(g, None, time.perf_counter, {})
    pool = RoutePool(1)
    try:
        return eng.tables(fabric, prep, pool), prep.dest.lid
    finally:
        pool.close()


# --------------------------------------------------------------------------- needed pairs
def test_needed_pairs_rule() -> None:
    """Hosts need every CA; an aggregation node needs hosts and the
    aggregation nodes on its own or an adjacent switch only; ``every_ca``
    needs every pair."""
    f = director_site(spine_hosts=1)
    roles = fabric_roles(f)
    sw = f.switches
    ep = np.flatnonzero(roles.endport_role >= 0)
    n = needed_pairs(f, roles, sw, ep)
    agg = roles.endport_role[ep] == EndportRole.AGGREGATION
    assert n.agg.sum() == len(sw) and np.array_equal(n.agg, agg)
    sid = {int(s): i for i, s in enumerate(sw)}
    at = np.array([sid[int(roles.attach[e])] for e in ep])
    tops = [sid[i] for i, d in enumerate(f.node_desc) if d.startswith("pgft L3")]
    lines = [sid[i] for i, d in enumerate(f.node_desc) if d.startswith("pgft L2")]
    # the spine ASIC with the service host needs everything; the other spine ASICs
    # carry only their aggregation node
    assert n.every[tops[0]] and not n.every[tops[1:]].any()
    m = n.mask(np.array(tops[1:2]), at, agg)[0]
    assert m[~agg].all()  # an aggregation node to every host
    adjacent = n.adjacent[tops[1], at]
    assert np.array_equal(m[agg], adjacent[agg])  # to aggregation nodes: adjacent only
    assert adjacent[agg].any() and not adjacent[agg].all()
    assert not n.adjacent[tops[1], tops[2]] and n.adjacent[tops[1], tops[1]]
    assert any(n.adjacent[tops[1], x] for x in lines)
    every = needed_pairs(f, roles, sw, ep, every_ca=True)
    assert every.mask(np.array(tops[1:2]), at, agg).all()


# --------------------------------------------------------------------------- no global fallback
def test_service_hosts_on_a_spine_asic_rank_it_above_the_leaves() -> None:
    """Service hosts on a director's spine ASIC do not make it a leaf (it
    shares no spine with the leaves): it keeps its rank above the line
    ASICs, and the tree serves every pair through the turn root."""
    f = director_site()
    roles = fabric_roles(f)
    tops = [i for i, d in enumerate(f.node_desc) if d.startswith("pgft L3")]
    assert roles.rank[tops[0]] == roles.max_rank == 2 and roles.hosts[tops[0]] == 2
    assert roles.switch_role[tops[0]] == SwitchRole.ROOT
    assert REASONS[roles.reason[tops[0]]] == "highest rank"
    r = route(f, workers=1)
    assert r.mode == "tree+turns", r.mode_reason
    assert validate_result(r).ok and check_credit_loops(f, r.tables).ok


def _kept(f: Fabric, r: RoutingResult) -> None:
    """Every destination not oriented keeps the tree's column."""
    tree, lids = _tree_tables(f)
    oriented = r.oriented
    keep = lids[~oriented]
    assert np.array_equal(r.tables.ports[:, keep], tree[:, keep])


def test_degraded_director_site_turns_on_one_vl() -> None:
    """The destinations that need it turn, every other column is the tree's,
    every needed pair is delivered and the channel dependencies are acyclic
    on one VL; the turn switch they share serves the aggregation-node pairs
    no traffic needs too (routed where it costs nothing)."""
    f = director_site(**DEGRADED)
    r = route(f, workers=1)
    assert r.mode == "tree+orient", r.mode_reason
    assert r.oriented is not None and 0 < r.oriented.sum() == r.turn_lids
    assert r.turn_lids < (~r.dest.is_switch).sum() // 2  # not the fabric
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unroutable == 0, v.summary()
    assert unrouted_connected(r) == 0
    ck = check_credit_loops(f, r.tables)
    assert ck.ok and ck.unfinished == 0 and ck.vls == 1, ck.summary()
    _kept(f, r)
    assert v.ca_pairs_unneeded == 0


def test_a_tree_that_fell_back_to_one_root_keeps_its_routes() -> None:
    """A degraded director site whose turns the greedy search could not all
    place fell back to ``updown`` from one root for every destination.  Now
    every destination that can turn free of credit loops does, the others
    keep the tree's routes: never one orientation for the whole tree."""
    f = director_site(remove_links=3, seed=2)
    r = route(f, workers=1)
    assert r.mode == "tree+orient", r.mode_reason
    assert "no orientation serves" not in r.mode_reason
    assert validate_result(r).ok and check_credit_loops(f, r.tables).ok
    assert r.oriented is not None
    _kept(f, r)


def test_destinations_no_orientation_serves_are_reported() -> None:
    """Cut so many cables that some destinations need more than one turn:
    those keep the tree's routes, the needed pairs they leave are reported
    (validation and commit gate fail, as for any unroutable needed pair),
    the others are served, and the tables stay free of credit loops."""
    f = director_site(spine_hosts=0, line_hosts=4, remove_links=20, seed=1)
    r = route(f, workers=1)
    assert r.mode == "tree+orient", r.mode_reason
    assert "no orientation serves free of credit loops keep the tree's routes" in r.mode_reason
    v = validate_result(r)
    assert not v.ok and v.ca_pairs_unroutable > 0
    assert commit_gaps(r) == v.ca_pairs_unroutable
    assert check_credit_loops(f, r.tables).ok
    _kept(f, r)



def test_the_other_order_serves_what_the_first_leaves() -> None:
    """One destination at a time, fewest lacking switches first, leaves some
    destinations of this site; most first serves them all: the order that
    serves more is kept (delivered, free of credit loops on one VL).  (The
    chain serves this site earlier, through the turn switch the destinations
    share: the step is called as the chain calls it.)"""
    f = director_site(spine_hosts=0, line_hosts=4, remove_links=20, seed=0)
    roles = fabric_roles(f)
    g, mode, _ = modes.start(f, roles)
    assert mode == "tree"
    eng = api.engine(api.DEFAULT)
    prep = eng.prepare(g, None, time.perf_counter, {})
    c, pi, dest = prep.costs, prep.dividers, prep.dest
    ports, _ = _tree_tables(f, g)
    needed = needed_pairs(f, roles, g.sw_node, f.port_node[g.ep_row].astype(np.int64))
    need = modes.turn_destinations(g, c, dest)
    turns = turn_switches.needed_turns(g, c, dest, needed) & need
    fixed = orient.fixed_routes(f, g, ports, dest.lid[need])
    g2 = rooted_graph(f, roles, modes.turn_roots(g), like=g)
    escape = (g2, *dmodc.costs_and_dividers(g2))
    fewest = orient.orient_each(f, g, c, pi, dest, turns, needed, ports.copy(), escape=escape,
                                fixed=fixed)
    assert 0 < fewest.sum() < turns.sum()
    trial = ports.copy()
    ori, why = orient.orient_one_by_one(f, g, c, pi, dest, trial, turns, needed, fixed, escape,
                                        walk_on=orient.walk_graph(g, g2))
    assert ori is not None and ori.complete and not why
    assert not orient.undelivered(g, dest, trial, turns, needed, c).any()
    assert check_credit_loops(f, orient.as_tables(f, g, trial)).ok


def _sharp_tree(links: int, seed: int) -> Fabric:
    """PGFT(3;4,4,4;1,4,4;1,1,1), a SHARP aggregation node on every switch,
    ``links`` random switch-to-switch cables cut (``seed``): a leaf cut from
    a spine reaches the aggregation nodes above that spine only by turning
    at another leaf, from another spine's cable to that spine's."""
    base = with_aggregation_nodes(pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1)))
    return degrade(base, np.random.default_rng(seed), links=links)[0]


def test_shared_turn_switches_cover_each_destination_with_its_options() -> None:
    """Each destination that needs a turn gets a switch it may turn at
    (:func:`~smroute.routing.turn_switches.turn_options`; -1 where none: some
    source needs two turns), the switch most of them may turn at first: on
    one site one switch serves them all where each destination's own first
    option spreads them over three; on another two serve all but the four
    that need two turns."""
    for seed, shared in ((2, 1), (8, 2)):
        f = _sharp_tree(12, seed)
        roles = fabric_roles(f)
        g, _, _ = modes.start(f, roles)
        prep = api.engine(api.DEFAULT).prepare(g, None, time.perf_counter, {})
        c, dest = prep.costs, prep.dest
        needed = needed_pairs(f, roles, g.sw_node, f.port_node[g.ep_row].astype(np.int64))
        turns = turn_switches.needed_turns(g, c, dest, needed)
        root = turn_switches.shared_roots(g, c, dest, turns, needed)
        for j, r in zip(np.flatnonzero(turns).tolist(), root.tolist(), strict=True):
            low, high = turn_switches.turn_options(g, c, dest, j, needed)
            assert (r in low and r in high) if r >= 0 else not len(low)
        assert len(np.unique(root[root >= 0])) == shared
        own = turn_switches.turn_roots(g, c, dest, turns, needed)
        assert np.array_equal(own < 0, root < 0)
        assert np.bincount(root[root >= 0]).max() > np.bincount(own[own >= 0]).max()


@pytest.mark.parametrize(("links", "seed", "phrase"), [
    (12, 2, "(through the one switch most of them may turn at; the channel"),
    (12, 8, "through the one switch most of them may turn at, the other"),
])
def test_a_damaged_sharp_tree_turns_at_the_switch_most_destinations_share(
        links: int, seed: int, phrase: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Aggregation node to host pairs on a damaged tree need turns; every
    destination's own first turn switch spreads the turns over several
    switches, whose turns close cycles (one's cable into it after another's
    cable out of it, and back), and one at a time the greedy choices block
    the last destinations.  Turns at the one leaf most of them share close
    none among themselves (one spine of each index above it): every needed
    pair is delivered, free of credit loops on one VL, all at once (seed 2)
    or with the few that switch cannot serve oriented one at a time on top
    (seed 8).  Without the shared switch it is not."""
    f = _sharp_tree(links, seed)
    r = route(f, workers=1)
    assert r.mode == "tree+orient" and phrase in r.mode_reason, r.mode_reason
    assert validate_result(r).ok and check_credit_loops(f, r.tables).ok
    _kept(f, r)
    real = turn_switches.turn_roots
    monkeypatch.setattr(turn_switches, "shared_roots",
                        lambda g, c, dest, turns, needed: real(
                            g, c, dest, turns, needed))
    assert not validate_result(route(f, workers=1)).ok


def test_every_ca_pair_option_routes_the_unneeded_pairs_too() -> None:
    """``all_ca_pairs``: every CA pair must be delivered; by default they
    are not."""
    f = director_site(**DEGRADED)
    r = route(f, workers=1, all_ca_pairs=True)
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unneeded == 0, v.summary()
    assert unrouted_connected(r) == 0


def test_line_hosts_keep_the_tree_and_its_turns() -> None:
    """UFM and storage hosts on the line ASICs: mode ``tree+turns`` as
    before, tables unchanged by the rule (what the turn serves for free is
    still routed)."""
    f = director_site(spine_hosts=0, line_hosts=4)
    r = route(f, workers=1)
    assert r.mode == "tree+turns", r.mode_reason
    every = route(f, workers=1, all_ca_pairs=True)
    assert np.array_equal(r.tables.ports, every.tables.ports)
    assert validate_result(r).ok


@pytest.mark.parametrize(("links", "seed"), [(6, 3), (15, 4)])
def test_degraded_director_site_no_global_fallback(links: int, seed: int) -> None:
    """Degraded director sites that fell back to ``updown``: the tree's
    routes stay for every destination they serve."""
    f = director_site(spine_hosts=0, line_hosts=4, remove_links=links, seed=seed)
    r = route(f, workers=1)
    assert r.mode == "tree+orient", r.mode_reason
    assert validate_result(r).ok
    assert check_credit_loops(f, r.tables).ok
    assert r.oriented is not None
    tree, lids = _tree_tables(f)
    keep = lids[~r.oriented]
    assert np.array_equal(r.tables.ports[:, keep], tree[:, keep])


def test_updown_roots_are_every_top_switch() -> None:
    """A fabric that is no tree is rooted at every top switch, as OpenSM's
    updn chooses its roots (here: hosts on every switch of a PGFT's top),
    even where end-ports on the top switches need each other: never one."""
    f = pgft(2, (4, 4), (1, 2), (1, 1))
    tops = [i for i, d in enumerate(f.node_desc) if d.startswith("pgft L2")]
    f = attach_cas(f, tops, [f"login{k:02d} HCA-1" for k in range(len(tops))])
    roles = fabric_roles(f)
    assert not roles.tree
    top = np.flatnonzero(roles.switch_role == SwitchRole.ROOT)
    assert len(top) == 2 and np.array_equal(roles.roots, top)
    # the login hosts on the two tops need each other: no up*/down* path
    # between tops, so only their destinations take another orientation
    r = route(f, workers=1)
    assert r.mode == "updown+orient" and validate_result(r).ok, r.mode_reason
    assert "rooted at one switch" not in r.mode_reason
    assert np.array_equal(r.graph.rank, rooted_graph(f, roles, roles.roots).rank)
    # a ring has no top: its centre, one per component
    assert len(fabric_roles(ring(5, 2)).roots) == 1


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibdmchk") is None,
                    reason="ibdmchk (Debian package ibutils) is not installed")
def test_ibdmchk_finds_no_credit_loop_in_turned_tables(tmp_path: Path) -> None:
    """ibutils' ibdmchk on the tables of a degraded director site turned on
    one VL, every CA pair routed: every path found, no credit loop."""
    from smroute.cli.route_cmd import hop_table
    from smroute.lab.ibdmchk import run_ibdmchk
    from smroute.tables.formats import write_tables

    f = director_site(spine_hosts=0, line_hosts=4, remove_links=6, seed=3)
    r = route(f, workers=1, all_ca_pairs=True)
    assert r.mode == "tree+orient", r.mode_reason
    fdbs = tmp_path / "opensm.fdbs"
    write_tables(r.tables, fdbs, "fdbs", fabric=f, hops=hop_table(r))
    rep = run_ibdmchk(fdbs, fdbs.with_name("opensm-subnet.lst"), timeout=600)
    assert rep.missing_paths == 0 and rep.credit_loops is False, rep.stdout[-2000:]


# --------------------------------------------------------------------------- option and config key
def test_config_key_route_all_ca_pairs(tmp_path: Path) -> None:
    """The daemon's ``route_all_ca_pairs`` key: a bool, default off."""
    from smroute.service.config import ConfigError, default_config, load_config

    assert default_config().route_all_ca_pairs is False
    good = tmp_path / "good.yaml"
    good.write_text("route_all_ca_pairs: true\n")
    assert load_config(good).route_all_ca_pairs is True
    bad = tmp_path / "bad.yaml"
    bad.write_text("route_all_ca_pairs: 3\n")
    with pytest.raises(ConfigError, match="route_all_ca_pairs"):
        load_config(bad)
    # smroute serve --route-all-ca-pairs overrides the file
    from smroute.cli.main import build_parser
    from smroute.cli.serve_cmd import config_from_args

    cfg, over = config_from_args(build_parser().parse_args(["serve", "--route-all-ca-pairs"]))
    assert cfg.route_all_ca_pairs is True and over == {"route_all_ca_pairs": True}
    cfg, over = config_from_args(build_parser().parse_args(["serve"]))
    assert cfg.route_all_ca_pairs is False and not over


def test_fabric_summary_counts_the_needed_pairs() -> None:
    """``smroute fabric summary``: CA pairs that need a route and those that
    need none, by the same rule (every aggregation node pair on switches not
    adjacent), in the text and the JSON."""
    from smroute.fabric.summary import format_summary, summarize

    f = director_site()
    s = summarize(f)
    roles = fabric_roles(f)
    n_ep = int((roles.endport_role >= 0).sum())
    assert s.ca_pairs_needed + s.ca_pairs_unneeded == n_ep * (n_ep - 1)
    # 44 switches with one aggregation node each: pairs on switches not adjacent
    sw = f.switches
    n = needed_pairs(f, roles, sw, np.flatnonzero(roles.endport_role >= 0))
    assert s.ca_pairs_unneeded == int((~n.adjacent).sum()) > 0
    assert s.to_dict()["ca_pairs"]["unneeded"] == s.ca_pairs_unneeded
    assert any("need none (aggregation nodes" in line for line in format_summary(s))


def test_a_resumed_tree_orient_epoch_validates() -> None:
    """A daemon resuming a ``tree+orient`` epoch routes it again (the turns
    are not recomputed around stored tables) and gets the same tables, which
    its validation accepts."""
    from smroute.service.epochs import own_tables
    from smroute.service.state.resume import rebuild_result

    f = director_site(**DEGRADED)
    r = own_tables(route(f, workers=1))
    assert r.mode == "tree+orient"
    meta = {"algorithm": r.algorithm, "lmc_setting": "fabric", "mode": r.mode,
            "mode_reason": r.mode_reason, "turn_lids": r.turn_lids, "timings": {"x": 1.0}}
    b = rebuild_result(f, r.tables, meta, fabric_roles(f), None)
    assert b.mode == "tree+orient" and b.oriented is not None
    assert np.array_equal(b.oriented, r.oriented)
    assert validate_result(b).ok


def test_a_resumed_updown_epoch_has_its_graph() -> None:
    """Resume recomputes the structure around stored ``updown`` tables on
    the graph the routing used (rooted at every top switch); a stored
    ``updown`` routing rooted at one switch per component is routed again
    and resumes only if the tables agree (they no longer do: refused, so
    the daemon routes the state in force anew)."""
    from smroute.service.epochs import own_tables
    from smroute.service.state.codec import CodecError
    from smroute.service.state.resume import rebuild_result

    f = pgft(2, (4, 4), (1, 1), (1, 1))  # one spine, with a host: no tree, one root
    f = attach_cas(f, [i for i, d in enumerate(f.node_desc) if d.startswith("pgft L2")],
                   ["login01 HCA-1"])
    r = own_tables(route(f, workers=1))
    assert r.mode == "updown", r.mode_reason
    meta = {"algorithm": r.algorithm, "lmc_setting": "fabric", "mode": r.mode,
            "mode_reason": r.mode_reason, "turn_lids": r.turn_lids, "timings": {"x": 1.0}}
    b = rebuild_result(f, r.tables, meta, fabric_roles(f), None)
    assert np.array_equal(b.graph.rank, r.graph.rank)
    assert np.array_equal(b.costs, r.costs)
    assert validate_result(b).ok

    f = pgft(2, (4, 4), (1, 2), (1, 1))
    tops = [i for i, d in enumerate(f.node_desc) if d.startswith("pgft L2")]
    f = attach_cas(f, tops, [f"login{k:02d} HCA-1" for k in range(len(tops))])
    roles = fabric_roles(f)
    tables = own_tables(route(f, workers=1)).tables
    tables = type(tables)(tables.switch_guid, tables.switch_lid, tables.switch_desc,
                          _tree_tables(f, rooted_graph(f, roles, roles.roots[:1]))[0])
    old = dict(meta, mode="updown", turn_lids=0, mode_reason=(
        "no tree: hosts on every level; end-ports on the top switches need each other: "
        "rooted at one switch per component"))
    with pytest.raises(CodecError, match="routes this fabric differently now"):
        rebuild_result(f, tables, old, roles, None)


# --------------------------------------------------------------------------- ranking on sites
def _compute_metrics(f: Fabric, r: RoutingResult) -> tuple[int, int, float]:
    """SP, A2A and the median RP (100 random permutations) of ``r``'s tables
    over the compute hosts in port-GUID order (smroute.analysis)."""
    from smroute.analysis import patterns
    from smroute.analysis.congestion import a2a_risk, evaluate
    from smroute.analysis.paths import pair_paths, routing_view

    view = routing_view(f, r.tables)
    paths = pair_paths(view)
    roles = fabric_roles(f)
    ep = np.flatnonzero(roles.endport_role[view.ep_node] == EndportRole.COMPUTE)
    o = ep[np.argsort(view.ep_guid[ep], kind="stable")]
    n = len(o)
    sp = evaluate(view, paths, patterns.cps("shift", n), o)
    rp = evaluate(view, paths, patterns.random_permutations(n, np.random.default_rng(1), 100), o)
    assert sp.total_unroutable == 0 and rp.total_unroutable == 0
    return int(sp.risk_max), int(a2a_risk(view, paths, o).value), float(rp.risk_median)


@pytest.mark.parametrize("algorithm", ["dmodc", "nmodc"])
def test_ufm_on_a_director_line_asic_does_not_invert_the_core(algorithm: str) -> None:
    """Three unequal pods under one CS7500 whose first line ASIC carries the
    UFM host: that ASIC was taken for a leaf, which put the director's spine
    ASICs below its line ASICs, so 57 destinations turned and the compute
    hosts' figures were SP 14, RP 12 (OpenSM's nue: 9 and 6).  Ranked as an
    upper switch, the director keeps its shape: SP <= 10, RP <= 6, every
    needed pair delivered, no credit loop on one VL."""
    f = build_shape("edr-pods-cs7500-core-450")
    roles = fabric_roles(f)
    ufm = [int(roles.attach[i]) for i, d in enumerate(f.node_desc) if d.startswith("ufm-")]
    assert ufm and all(roles.rank[s] == 2 for s in ufm)  # a line ASIC, above the pod spines
    spines = [i for i, d in enumerate(f.node_desc) if "CS7500/S" in d]
    assert all(roles.rank[s] == roles.max_rank == 3 for s in spines)
    r = route(f, workers=1, algorithm=algorithm)
    assert r.mode == "tree+orient" and r.turn_lids <= 20, r.mode_reason
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unroutable == 0, v.summary()
    ck = check_credit_loops(f, r.tables)
    assert ck.ok and ck.unfinished == 0 and ck.vls == 1, ck.summary()
    sp, a2a, rp = _compute_metrics(f, r)
    assert sp <= 10 and a2a <= 24 and rp <= 6, (sp, a2a, rp)


def test_ufm_on_a_core_switch_keeps_it_a_core() -> None:
    """A DGX A100 SuperPOD-like site with UFM and storage on six of its 20
    core switches: they were taken for leaves (rank 0) and the tree fell
    back to one root for every destination.  Ranked as cores, the tree
    serves every pair through the turn root."""
    f = build_shape("hdr-dgx-a100-1100")
    roles = fabric_roles(f)
    cores = [i for i, d in enumerate(f.node_desc) if d.startswith("MF0;core-")]
    assert sum(roles.hosts[c] > 0 for c in cores) == 6
    assert all(roles.rank[c] == roles.max_rank == 2 for c in cores)
    r = route(f, workers=1)
    assert r.mode == "tree+turns", r.mode_reason
    assert validate_result(r).ok and check_credit_loops(f, r.tables).ok


def test_a_small_leaf_stays_a_leaf() -> None:
    """A leaf with one host among leaves with four shares its spines with
    the leaves beside it: still a leaf (a 3-level PGFT, so its spines' other
    neighbours are core switches without hosts)."""
    f = pgft(3, (4, 4, 4), (1, 2, 2), (1, 1, 1))
    roles = fabric_roles(f)
    leaf = int(roles.leaves[0])
    hosts = [i for i in range(f.n_nodes) if roles.attach[i] == leaf]
    small = f.with_removed(nodes=hosts[1:])
    r2 = fabric_roles(small)
    assert len(r2.leaves) == len(roles.leaves) and r2.rank.max() == 2
    assert route(small, workers=1).mode == "tree"


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibdmchk") is None,
                    reason="ibdmchk (Debian package ibutils) is not installed")
def test_ibdmchk_on_the_pods_under_a_director(tmp_path: Path) -> None:
    """ibutils' ibdmchk on the default's tables of the pods under a CS7500
    (one VL, every CA pair routed): every path found, no credit loop."""
    from smroute.cli.route_cmd import hop_table
    from smroute.lab.ibdmchk import run_ibdmchk
    from smroute.tables.formats import write_tables

    f = build_shape("edr-pods-cs7500-core-450")
    r = route(f, workers=1, all_ca_pairs=True)
    assert validate_result(r).ok
    fdbs = tmp_path / "opensm.fdbs"
    write_tables(r.tables, fdbs, "fdbs", fabric=f, hops=hop_table(r))
    rep = run_ibdmchk(fdbs, fdbs.with_name("opensm-subnet.lst"), timeout=600)
    assert rep.missing_paths == 0 and rep.credit_loops is False, rep.stdout[-2000:]


@pytest.mark.parametrize(("n", "m", "rounds", "width"), [(60, 120, 200, 4), (300, 900, 600, 12)])
def test_acyclic_growth_agrees_with_the_whole_graph_check(n: int, m: int, rounds: int,
                                                         width: int) -> None:
    """Growing an acyclic dependency graph edge set by edge set (sets with
    several edges against the order, single edges, enough kept sets that
    the index is rebuilt): each set is kept exactly when the whole graph
    (every kept set and it) has no cycle, a set refused before is refused
    again, and the kept order stays topological."""
    from smroute.routing.acyclic import AcyclicGrowth, cyclic_core

    rng = np.random.default_rng(7)
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    s, d = np.minimum(a, b), np.maximum(a, b)
    keep = s != d
    edges = s[keep] * n + d[keep]  # forward edges only: acyclic
    g = AcyclicGrowth(n, edges)
    kept, accepted, refused = edges, 0, 0
    refused_sets: list[np.ndarray] = []
    for i in range(rounds):
        # (every third set one edge: the search that stops at its tail)
        new = rng.integers(0, n, (1 if i % 3 == 0 else rng.integers(1, width), 2))
        codes = new[:, 0] * n + new[:, 1]
        union = np.concatenate([kept, codes])
        ok = not cyclic_core(n, union // n, union % n).any()
        assert g.add(codes) is ok
        if ok:
            kept, accepted = union, accepted + 1
        else:
            refused, refused_sets = refused + 1, [*refused_sets, codes]
        # a set refused before is refused again (remembered, in any order)
        again = refused_sets[int(rng.integers(len(refused_sets)))] if refused_sets else codes[:0]
        assert not len(again) or g.add(rng.permutation(again)) is False
        assert (g.pos[kept // n] < g.pos[kept % n]).all()
        assert np.array_equal(np.sort(g.pos), np.arange(n))
    assert accepted > 10 and refused
    assert accepted * 2 > AcyclicGrowth.REINDEX * len(edges)  # the index was rebuilt


#: Two leaves with a host each, each below its own spine; the spines are
#: cabled to each other (one rank: a cable the tree's ranking does not use).
EQUAL_RANK_ONLY = "\n".join([
    'vendid=0x2c9',
    'devid=0xc738',
    'sysimgguid=0x0002c90300000001',
    'switchguid=0x0002c90300000001(0002c90300000001)',
    'Switch\t4 "S-0002c90300000001"\t\t# "leaf A" base port 0 lid 1 lmc 0',
    '[1]\t"H-0002c90400000001"[1](0002c90400000002) \t\t# "host a" lid 11 4xEDR',
    '[2]\t"S-0002c90300000003"[1]\t\t# "spine 1" lid 3 4xEDR',
    '',
    'vendid=0x2c9',
    'devid=0xc738',
    'sysimgguid=0x0002c90300000002',
    'switchguid=0x0002c90300000002(0002c90300000002)',
    'Switch\t4 "S-0002c90300000002"\t\t# "leaf B" base port 0 lid 2 lmc 0',
    '[1]\t"H-0002c90400000003"[1](0002c90400000004) \t\t# "host b" lid 12 4xEDR',
    '[2]\t"S-0002c90300000004"[1]\t\t# "spine 2" lid 4 4xEDR',
    '',
    'vendid=0x2c9',
    'devid=0xc738',
    'sysimgguid=0x0002c90300000003',
    'switchguid=0x0002c90300000003(0002c90300000003)',
    'Switch\t4 "S-0002c90300000003"\t\t# "spine 1" base port 0 lid 3 lmc 0',
    '[1]\t"S-0002c90300000001"[2]\t\t# "leaf A" lid 1 4xEDR',
    '[2]\t"S-0002c90300000004"[2]\t\t# "spine 2" lid 4 4xEDR',
    '[3]\t"S-0002c90300000005"[2]\t\t# "leaf C" lid 5 4xEDR',
    '',
    'vendid=0x2c9',
    'devid=0xc738',
    'sysimgguid=0x0002c90300000004',
    'switchguid=0x0002c90300000004(0002c90300000004)',
    'Switch\t4 "S-0002c90300000004"\t\t# "spine 2" base port 0 lid 4 lmc 0',
    '[1]\t"S-0002c90300000002"[2]\t\t# "leaf B" lid 2 4xEDR',
    '[2]\t"S-0002c90300000003"[2]\t\t# "spine 1" lid 3 4xEDR',
    '[3]\t"S-0002c90300000005"[3]\t\t# "leaf C" lid 5 4xEDR',
    '',
    'vendid=0x2c9',
    'devid=0xc738',
    'sysimgguid=0x0002c90300000005',
    'switchguid=0x0002c90300000005(0002c90300000005)',
    'Switch\t4 "S-0002c90300000005"\t\t# "leaf C" base port 0 lid 5 lmc 0',
    '[1]\t"H-0002c90400000005"[1](0002c90400000006) \t\t# "host c" lid 13 4xEDR',
    '[2]\t"S-0002c90300000003"[3]\t\t# "spine 1" lid 3 4xEDR',
    '[3]\t"S-0002c90300000004"[3]\t\t# "spine 2" lid 4 4xEDR',
    '',
    'vendid=0x2c9',
    'devid=0x1017',
    'sysimgguid=0x0002c90400000001',
    'caguid=0x0002c90400000001',
    'Ca\t1 "H-0002c90400000001"\t\t# "host a"',
    '[1](0002c90400000002) \t"S-0002c90300000001"[1]\t\t# lid 11 lmc 0 "leaf A" lid 1 4xEDR',
    '',
    'vendid=0x2c9',
    'devid=0x1017',
    'sysimgguid=0x0002c90400000003',
    'caguid=0x0002c90400000003',
    'Ca\t1 "H-0002c90400000003"\t\t# "host b"',
    '[1](0002c90400000004) \t"S-0002c90300000002"[1]\t\t# lid 12 lmc 0 "leaf B" lid 2 4xEDR',
    '',
    'vendid=0x2c9',
    'devid=0x1017',
    'sysimgguid=0x0002c90400000005',
    'caguid=0x0002c90400000005',
    'Ca\t1 "H-0002c90400000005"\t\t# "host c"',
    '[1](0002c90400000006) \t"S-0002c90300000005"[1]\t\t# lid 13 lmc 0 "leaf C" lid 5 4xEDR',
])


def test_hosts_joined_by_a_cable_within_a_rank_are_routed_on_one_vl() -> None:
    """Hosts a and b's only path up*/down* or across crosses the cable
    between the two spines, which the tree's graph leaves out (leaf C under
    both closes an odd cycle: no ranking from one side makes the chain up
    and down): routed up, across it, down (mode ``tree+cross``).  Every
    needed pair delivered, free of credit loops (the check follows every
    cable)."""
    from smroute.fabric.ibnetdiscover.parse import parse_topology

    f = parse_topology(EQUAL_RANK_ONLY.splitlines(), "equal-rank.topo")
    r = route(f, workers=1)
    assert r.mode == "tree+cross", r.mode_reason
    v = validate_result(r)
    assert v.ok and v.delivered == v.pairs and v.ca_pairs_unroutable == 0, v
    assert check_credit_loops(f, r.tables).ok


def test_pairs_two_cables_within_a_rank_apart_cross_both_on_one_vl() -> None:
    """Three spines in a chain (cables within the spines' rank), a leaf
    with a host under each, and one under the first two (an odd cycle: no
    ranking from one side makes the chain up and down): the outer hosts
    are two such cables apart, so no route crosses once; the switches
    without a route take routes up*/down* in the cross order, across both
    cables, on top of the crossing routes of the middle host, which stay.
    Every needed pair delivered, free of credit loops."""
    from smroute.fabric.generate.sitegen import Site

    site = Site()
    leaves = site.switches([f"leaf {k}" for k in "ABC"], 8, 0xD2F0)
    spines = site.switches([f"spine {k}" for k in "123"], 8, 0xD2F0)
    for k, (leaf, spine) in enumerate(zip(leaves, spines, strict=True)):
        site.host(leaf, f"host {k}")
        site.cable(leaf, spine)
    site.cable(spines[0], spines[1])
    site.cable(spines[1], spines[2])
    both = site.switch("leaf D", 8, 0xD2F0)
    site.host(both, "host 3")
    site.cable(both, spines[0])
    site.cable(both, spines[1])
    f = site.build(np.random.default_rng(0))
    r = route(f, workers=1)
    assert r.mode == "tree+cross", r.mode_reason
    assert "take routes up*, across one cable" in r.mode_reason
    assert "in an order of the switches" in r.mode_reason
    v = validate_result(r)
    assert v.ok and v.delivered == v.pairs and v.ca_pairs_unroutable == 0, v
    assert check_credit_loops(f, r.tables).ok


def test_destinations_no_order_serves_are_oriented_on_top_of_the_crossing_routes() -> None:
    """A Dragonfly+ (spine ``j`` to spine ``j`` of every group) with an
    aggregation node on every switch and ten cables cut: a leaf that lost
    its cable to spine ``j`` reaches the aggregation nodes on the spines
    ``j`` only down a leaf and up again, in no order of the switches.
    Those destinations take the turn switches' orientation on top of the
    crossing routes of the others; every needed pair delivered, free of
    credit loops on one VL."""
    from smroute.fabric.generate.shapes import dragonfly_plus, with_aggregation_nodes
    from smroute.fabric.generate.trees import degrade

    full = dragonfly_plus(8, 4, 4, 12, seed=21)
    f = with_aggregation_nodes(degrade(full, np.random.default_rng(7), links=10)[0])
    r = route(f, workers=1)
    assert r.mode == "tree+orient", r.mode_reason
    assert "take routes up*, across one cable" in r.mode_reason
    assert "turn root's routes" in r.mode_reason
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unroutable == 0, v
    assert check_credit_loops(f, r.tables).ok


def test_compiled_search_reaches_what_the_numpy_search_reaches() -> None:
    """The search of the acyclic growth in C (``nmodc/native.reach``) and in
    numpy (the reference) see the same nodes from the same starts, within
    the same positions and mask, over an index by rows and one searched; a
    stop node is reached by both or by neither."""
    from smroute.routing import acyclic
    from smroute.routing.nmodc import native

    if native.library() is None:
        pytest.skip("the compiled Nmodc steps are not built (scripts/setup.sh builds them)")
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(2, 80))
        a = rng.integers(0, n, int(rng.integers(0, 4 * n)))
        b = rng.integers(0, n, len(a))
        extra = int(rng.integers(0, n))
        ea, eb = rng.integers(0, n, extra), rng.integers(0, n, extra)
        index = (acyclic._Index(a, b, n), acyclic._Index(ea, eb))
        pos = rng.permutation(n)
        lo, hi = sorted(int(x) for x in rng.integers(0, n, 2))
        within = rng.random(n) < 0.8 if rng.random() < 0.5 else None
        start = rng.integers(0, n, int(rng.integers(1, 4)))
        want = acyclic._reach(index, start, pos, lo, hi, within, compiled=False)
        got = acyclic._reach(index, start, pos, lo, hi, within)
        assert np.array_equal(got, want)
        stop = int(rng.integers(0, n))
        s_want = acyclic._reach(index, start, pos, lo, hi, within, stop, compiled=False)
        s_got = acyclic._reach(index, start, pos, lo, hi, within, stop)
        assert s_got[stop] == s_want[stop] == want[stop]


@pytest.mark.parametrize("algorithm", api.names())
def test_turning_one_destination_at_a_time_beside_switch_destinations(algorithm: str) -> None:
    """A small three-level tree with one link cut turns its destinations one
    at a time while switch LIDs (whose owner is a switch, not a CA) are
    among the destinations: valid tables, in mode tree+orient."""
    from smroute.study.runner import load_fabric, plan_throw

    full = load_fabric(f"file:{ROOT / 'fixtures' / 'pgft-3-2.2.3-1.2.2-1.2.1.topo'}")
    r = route(plan_throw(full, "link", 4, 0).fabric, algorithm=algorithm, workers=1,
              labels=False)
    assert r.mode == "tree+orient" and validate_result(r).ok


def test_dependencies_of_some_lids_beside_the_others_are_the_whole_sets() -> None:
    """The dependencies towards some LIDs merged with those towards every
    other LID (the fixed routes an orientation does not change) are the
    whole table set's, and their loop check reads the same."""
    from smroute.routing.deadlock import channel_links, dependencies, loop_check, merged

    f = pgft(3, (2, 2, 3), (1, 2, 2), (1, 2, 1))
    r = route(f, workers=1, labels=False)
    whole = dependencies(f, r.tables, max_hops=12)
    links = channel_links(f)
    some = np.flatnonzero(f.lid_to_port >= 0)[::3]
    parts = merged(dependencies(f, r.tables, max_hops=12, skip=some, links=links),
                   dependencies(f, r.tables, max_hops=12, lids=some, links=links))
    assert len(some) and len(parts.edges) > 0
    assert np.array_equal(parts.edges, whole.edges) and np.array_equal(parts.used, whole.used)
    assert (parts.pairs, parts.unfinished) == (whole.pairs, whole.unfinished)
    a, b = loop_check(f, parts), check_credit_loops(f, r.tables, max_hops=12)
    assert (a.summary(), a.per_vl, a.cyclic) == (b.summary(), b.per_vl, b.cyclic)


@pytest.mark.parametrize("turned", [False, True])
def test_dependencies_marked_in_a_table_are_the_sorted_ones(monkeypatch: pytest.MonkeyPatch,
                                                            turned: bool) -> None:
    """On VL 0 a walk large against the (link, port) table marks its
    dependencies there; they are the codes the per-hop sort finds (a tree,
    and a director site whose routes turn)."""
    from smroute.routing import deadlock

    f = (director_site(spine_hosts=0, line_hosts=4, remove_links=20, seed=0) if turned
         else pgft(3, (4, 4, 6), (1, 2, 4), (1, 2, 1)))
    r = route(f, workers=1, labels=False)
    assert (r.mode == "tree+orient") == turned
    links = deadlock.channel_links(f)
    assert len(f.switches) * len(np.flatnonzero(f.lid_to_port >= 0)) * 4 >= (
        links.n_links * links.nxt.shape[1])  # (the table is used)
    dense = deadlock.dependencies(f, r.tables, links=links)
    monkeypatch.setattr(deadlock, "DENSE_PAIRS", 0)
    sorted_ = deadlock.dependencies(f, r.tables, links=links)
    assert len(dense.edges) > 100
    assert np.array_equal(dense.edges, sorted_.edges)
    assert np.array_equal(dense.used, sorted_.used)
    assert (dense.pairs, dense.unfinished) == (sorted_.pairs, sorted_.unfinished)
