"""Nmodc (Dmodc with nominal slots, smroute.routing.nmodc.nominal): Dmodc's tables on
complete PGFTs (and so Zahavi's theorems), Dmodc's guarantees on degraded
trees (every pair with an up*/down* path delivered, up*/down*, no credit loop
for ibdmchk), better balance than Dmodc where a damaged switch's modulus
differs from its siblings', the nominal slots themselves, the pool, the
incremental reroute, the CLI and the study's side-by-side run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from smroute.analysis import patterns as P
from smroute.analysis.congestion import a2a_risk, evaluate, sp_risk
from smroute.analysis.paths import pair_paths, routing_view
from smroute.fabric.export.writers import format_topology, write_topology
from smroute.fabric.generate.assemble import DEFAULT_GUID_BASE, Level, assemble
from smroute.fabric.generate.trees import degrade, pgft, slender_tree
from smroute.fabric.ibnetdiscover.parse import parse_topology, read_fabric
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing import api, dmodc, kernel
from smroute.routing.engine import route, validate_result
from smroute.routing.nmodc import balance, nominal, slot_tables
from smroute.routing.nmodc import incremental as nmodc_incremental
from smroute.routing.pool import RoutePool
from smroute.routing.reroute import reroute
from smroute.routing.topology import switch_graph
from smroute.study.degrade import parse_pgft, plan_throw
from smroute.tables.diff import diff_tables

#: Complete PGFTs: Zahavi's figure (parallel links), RLFTs, 2- and 3-level,
#: the study's two trees.
COMPLETE = [
    (3, (2, 2, 3), (1, 2, 2), (1, 2, 1)),
    (2, (4, 8), (1, 4), (1, 2)),
    (2, (6, 12), (1, 6), (1, 1)),
    (3, (4, 4, 4), (1, 4, 4), (1, 1, 1)),
    (3, (3, 3, 4), (1, 3, 3), (1, 1, 1)),
    (3, (2, 2, 2), (1, 2, 2), (1, 2, 2)),
    (2, (12, 12), (1, 6), (1, 2)),
    (3, (4, 4, 4), (1, 4, 2), (1, 1, 2)),
    (2, (18, 36), (1, 18), (1, 1)),
    (3, (12, 12, 12), (1, 12, 12), (1, 1, 1)),
]
STUDY_1728 = "3;12,12,12;1,12,12;1,1,1"
REAL = Path(__file__).resolve().parents[2] / "shared" / "fabrics" / "real"


def _ids(spec: tuple) -> str:
    return f"PGFT({spec[0]};{spec[1]};{spec[2]};{spec[3]})"


def _inter_links(f: Fabric) -> np.ndarray:
    sw = f.node_type == NodeType.SWITCH
    return np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])


# ------------------------------------------------------------------ complete trees
def test_nmodc_is_registered() -> None:
    assert "nmodc" in api.names() and "dmodc" in api.names()


@pytest.mark.parametrize("spec", COMPLETE, ids=_ids)
def test_same_tables_as_dmodc_on_complete_pgft(spec: tuple) -> None:
    f = pgft(*spec)
    a = route(f, algorithm="dmodc", workers=1, labels=False)
    b = route(f, algorithm="nmodc", workers=1, labels=False)
    assert b.algorithm == "nmodc" and b.mode == a.mode == "tree"
    assert np.array_equal(a.dividers, b.dividers)
    assert np.array_equal(a.tables.ports, b.tables.ports)


def test_same_tables_as_dmodc_with_lmc_and_in_the_pool() -> None:
    f = pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1), lmc=2)
    a = route(f, algorithm="dmodc", workers=1, labels=False)
    with RoutePool(2) as pool:
        b = route(f, algorithm="nmodc", pool=pool, labels=False)
    assert np.array_equal(a.tables.ports, b.tables.ports)


@pytest.mark.parametrize("spec", [(3, (2, 2, 3), (1, 2, 2), (1, 2, 1)),
                                  (2, (12, 12), (1, 6), (1, 2)),
                                  (3, (4, 4, 4), (1, 4, 4), (1, 1, 1))], ids=_ids)
def test_zahavi_theorems_hold(spec: tuple) -> None:
    """Zahavi Theorems 1-3 with Nmodc's own tables: SP risk 1 and HSD 1 on
    every stage of every unidirectional CPS in topological order."""
    f = pgft(*spec)
    r = route(f, algorithm="nmodc", workers=1)
    v = routing_view(f, r.tables)
    pp = pair_paths(v)
    order = P.topological_order(v, r)
    n = len(order)
    sp = sp_risk(v, pp, order)
    assert sp.risk_max == 1 and sp.total_unroutable == 0
    for name in P.UNIDIRECTIONAL:
        m = evaluate(v, pp, P.cps(name, n), order)
        assert m.hsd_max == 1 and m.risk_max == 1, name
    assert evaluate(v, pp, P.recursive_doubling_tree(n, spec[1]), order).hsd_max == 1


# ------------------------------------------------------------------ nominal slots
def test_a_damaged_switch_keeps_its_siblings_slots() -> None:
    """A leaf that lost an up-link keeps the nominal arity of its pod and the
    slot every surviving L2 switch has at its siblings; the dividers stay the
    complete tree's (Dmodc's max reduction would not see the loss either)."""
    f = pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1))
    g0 = route(f, algorithm="nmodc", workers=1, labels=False).graph
    s0 = nominal.nominal_slots(g0)
    assert (s0.arity[g0.rank < 2] == 4).all() and (s0.arity[g0.rank == 2] == 0).all()
    leaf = int(g0.leaves[0])
    gid = int(s0.slot_grp[leaf, 1])  # the leaf's link to its pod's second L2
    ports = g0.grp_ports[g0.grp_port_first[gid]:g0.grp_port_first[gid] + 1]
    row = int(f.port_start[g0.sw_node[leaf]]) + int(ports[0])
    link = np.flatnonzero((f.link_a == row) | (f.link_b == row))
    g1 = route(f.with_removed(links=link), algorithm="nmodc", workers=1, labels=False).graph
    s1 = nominal.nominal_slots(g1)
    assert s1.arity[leaf] == 4 and g1.n_up[leaf] == 3
    assert s1.slot_grp[leaf, 1] == -1
    remote0 = g0.grp_remote[s0.slot_grp[leaf]]
    remote1 = g1.grp_remote[np.maximum(s1.slot_grp[leaf], 0)]
    assert np.array_equal(remote0[[0, 2, 3]], remote1[[0, 2, 3]])
    assert nominal.changed_slots(g0, nominal.nominal_slots(g0), g1,
                                 nominal.nominal_slots(g1)).tolist() == [leaf]
    assert np.array_equal(nominal.costs_and_dividers(g1, s1)[1], dmodc.costs_and_dividers(g0)[1])


def _without(f: Fabric, *names: str) -> Fabric:
    """``f`` without the nodes of these descriptions."""
    return f.with_removed(nodes=[list(f.node_desc).index(n) for n in names])


def test_a_pod_that_lost_one_upper_switch_keeps_its_slots() -> None:
    """The leaves of a pod that lost an L2 switch whole keep the nominal
    arity 4 with that slot lost, the other slots those of the intact pods'
    leaves (columns joined through the spines); a pod that lost two L2
    switches takes the union of its survivors (arity 2), as before."""
    f = pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1))
    f1 = _without(f, "pgft L2 0.1.0", "pgft L2 1.1.0", "pgft L2 1.2.0")
    g = route(f1, algorithm="nmodc", workers=1, labels=False).graph
    s = nominal.nominal_slots(g)
    desc = np.array(f1.node_desc)[g.sw_node]
    leaf = {d: i for i, d in enumerate(desc)}
    remote = np.where(s.slot_grp >= 0, desc[g.grp_remote[np.maximum(s.slot_grp, 0)]], "")
    assert s.arity[leaf["pgft L1 0.0.0"]] == 4
    assert remote[leaf["pgft L1 0.0.0"]].tolist() == [
        "pgft L2 0.0.0", "", "pgft L2 0.2.0", "pgft L2 0.3.0"]
    assert remote[leaf["pgft L1 2.0.0"]].tolist() == [f"pgft L2 2.{i}.0" for i in range(4)]
    assert s.arity[leaf["pgft L1 1.0.0"]] == 2
    assert remote[leaf["pgft L1 1.0.0"], :2].tolist() == ["pgft L2 1.0.0", "pgft L2 1.3.0"]
    assert validate_result(route(f1, algorithm="nmodc", workers=1, labels=False)).ok


def test_a_lost_slots_destinations_spread_over_every_other_slot() -> None:
    """With one slot lost, digit ``r`` probes slot ``j + 1 + r`` first: over
    the ``m - 1`` digits the lost slot's destinations take every other slot
    once (a pseudo-random first probe left some slots twice, others never)."""
    from smroute.routing.nmodc.slot_tables import alternatives
    for m in (3, 4, 12, 18):
        avail = ~np.eye(m, dtype=bool)  # pattern j lost slot j
        alt = alternatives(avail, m)  # (m, m - 1, m): [pattern, r, slot]
        for j in range(m):
            assert sorted(alt[j, :, j].tolist()) == [k for k in range(m) if k != j]


def test_redirects_spread_over_the_upper_switchs_links() -> None:
    """Pod 0 lost its second L2 switch, and a spine above the third L2
    switches is gone, so those have arity 3 = 4 - 1.  With the redirect digit
    ``floor(x / m) mod (m - 1)`` the destinations pod 0's leaves redirect to
    its third L2 switch all had that switch's own spine digit and went up
    one link (4 of 4); the tops' divider spreads them over its 3 links."""
    f = pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1))
    f1 = _without(f, "pgft L2 0.1.0", "pgft L3 0.2.0")
    r = route(f1, algorithm="nmodc", workers=1, labels=False)
    g = r.graph
    desc = np.array(f1.node_desc)[g.sw_node]
    sw = {d: i for i, d in enumerate(desc)}
    l2 = sw["pgft L2 0.2.0"]
    assert nominal.nominal_slots(g).arity[l2] == 3
    leaves = [sw[f"pgft L1 0.{i}.0"] for i in range(4)]
    lost = np.flatnonzero(~np.isin(g.ep_switch, leaves) & (r.nids % 4 == 1))  # slot 1's
    for leaf in leaves:
        gid = g.grp_first[leaf] + np.arange(g.grp_count[leaf])
        to_l2 = g.grp_ports[g.grp_port_first[gid[g.grp_remote[gid] == l2]]]
        via = lost[np.isin(r.tables.ports[leaf, g.ep_lid[lost]], to_l2)]
        up = np.bincount(r.tables.ports[l2, g.ep_lid[via]])
        assert len(via) == 4 and (up > 0).sum() == 3 and up.max() == 2


def test_siblings_beyond_the_rank_arity_use_their_own_groups() -> None:
    """Where siblings' up-neighbours add up to more than half again the
    largest up arity of the rank (no PGFT: leaves on overlapping triples of 6
    L2 switches), a switch's own up groups are its slots; a PGFT whose every leaf
    lost one spine keeps the nominal slots (leaves of 3-level trees: their
    spines route on)."""
    f = pgft(3, (4, 8, 2), (1, 6, 2), (1, 1, 1))
    g = route(f, algorithm="nmodc", workers=1, labels=False).graph

    def without(keep: list[set[int]]) -> Fabric:
        drop = []
        for i, leaf in enumerate(g.leaves.tolist()):
            for k in set(range(6)) - keep[i % len(keep)]:
                gid = int(g.grp_first[leaf]) + k
                row = int(f.port_start[g.sw_node[leaf]]) + int(g.grp_ports[g.grp_port_first[gid]])
                drop.append(int(np.flatnonzero((f.link_a == row) | (f.link_b == row))[0]))
        return f.with_removed(links=drop)

    triples = [{0, 1, 2}, {0, 3, 4}, {1, 3, 5}, {2, 4, 5}]  # any two share a spine
    r1 = route(without(triples), algorithm="nmodc", workers=1, labels=False)
    g1, s1 = r1.graph, nominal.nominal_slots(r1.graph)
    assert r1.mode == "tree" and (g1.n_up[g1.leaves] == 3).all()
    assert (s1.arity[g1.leaves] == 3).all() and (s1.slot_grp[g1.leaves, :3] >= 0).all()
    assert validate_result(r1).ok
    r2 = route(without([set(range(6)) - {i} for i in range(6)]), algorithm="nmodc", workers=1,
               labels=False)
    s2 = nominal.nominal_slots(r2.graph)
    assert r2.mode == "tree" and (s2.arity[r2.graph.leaves] == 6).all()
    assert ((s2.slot_grp[r2.graph.leaves] < 0).sum(axis=1) == 1).all()


@pytest.mark.parametrize("throw", [1, 5, 9])
def test_leaves_of_a_two_level_tree_route_as_dmodc(throw: int) -> None:
    """The study's 648-host 2-level tree with links removed: a spine routes
    no further up and its down-link reaches one leaf, so nominal slots buy
    no balance there (A2A is the leaf's 18 hosts either way); the leaves
    route as Dmodc does, whose modulo over the surviving spines spreads a
    shift's flows more evenly (the study's HSD of the topological shifts)."""
    full = parse_pgft("2;18,36;1,18;1,1").build()
    th = plan_throw(full, "link", 2026, throw)
    dm = route(th.fabric, algorithm="dmodc", workers=1, labels=False)
    nm = route(th.fabric, algorithm="nmodc", workers=1, labels=False)
    assert nominal.nominal_slots(nm.graph).own[nm.graph.leaves].all()
    assert np.array_equal(nm.tables.ports, dm.tables.ports)


def test_wrap_gaps_let_a_shift_wrap_cleanly() -> None:
    """The study's 648-host 2-level tree, switch throw 10 (spines 0, 8, 11,
    17 and 4 leaves removed): 576 hosts on 14 spines, so a shift window
    across the wrap from the last NID to 0 takes one spine 3 times with
    Dmodc's NIDs.  Nmodc's NIDs get a gap of 2 at one leaf boundary and the
    shift-permutation risk falls to the 2 every window of 18 NIDs over 14
    spines needs (ftree's 2, OpenSM's others 3)."""
    full = parse_pgft("2;18,36;1,18;1,1").build()
    th = plan_throw(full, "switch", 2026, 10)
    assert th.removed == 8
    nm = route(th.fabric, algorithm="nmodc", workers=1, labels=False)
    assert validate_result(nm).ok
    e = len(nm.nids)
    assert e == 576 and np.array_equal(np.sort(nm.nids), np.arange(e))  # the order is kept
    t = nm.dest.nid[~nm.dest.is_switch]
    assert np.array_equal(np.unique(np.diff(np.sort(t))), [1, 3])  # one gap of 2
    assert nm.dest.nid[nm.dest.is_switch].min() == t.max() + 1
    assert _a2a_sp(th.fabric, "dmodc")[1] == 3
    assert _a2a_sp(th.fabric, "nmodc")[1] == 2
    # no gap where the wrap is clean: spine 11 removed (648 hosts on 17 spines:
    # the wrap jumps by -648 mod 17 = 15 <= 17 - 1)
    one = plan_throw(full, "switch", 2026, 30)
    assert one.removed == 1
    r1 = route(one.fabric, algorithm="nmodc", workers=1, labels=False)
    assert np.array_equal(r1.dest.nid, route(one.fabric, algorithm="dmodc", workers=1,
                                             labels=False).dest.nid)


def test_wrap_gaps_in_the_reroute_and_the_pool() -> None:
    """PGFT(2;5,8;1,5;1,1) without 2 spines and 3 leaves: 25 hosts on 3
    spines, leaves of 5, so the wrap jumps by 2 > 3 - 2 and the NIDs get a
    gap of 1.  A link event then gives the leaves unequal arities (no gap):
    the reroute follows the NIDs both ways and equals a full route, and the
    pool routes with the gaps as the process does."""
    f = pgft(2, (5, 8), (1, 5), (1, 1))
    sw = f.switches
    spines = [n for n in sw.tolist() if f.node_desc[n].startswith("pgft L2")][:2]
    leaves = [n for n in sw.tolist() if f.node_desc[n].startswith("pgft L1")][:3]
    base = f.with_removed(nodes=spines + leaves)
    r0 = route(base, algorithm="nmodc", workers=1, lmc=0)
    t = np.sort(r0.dest.nid[~r0.dest.is_switch])
    assert len(t) == 25 and t[-1] == 25  # one gap of 1
    with RoutePool(2) as pool:
        assert np.array_equal(route(base, algorithm="nmodc", pool=pool, lmc=0).tables.ports,
                              r0.tables.ports)
    f1 = base.with_removed(links=_inter_links(base)[:1])
    r1 = reroute(r0, f1, lmc=0)
    full1 = route(f1, algorithm="nmodc", workers=1, lmc=0)
    assert np.array_equal(full1.dest.nid[~full1.dest.is_switch], full1.nids)  # no gap
    assert np.array_equal(r1.result.tables.ports, full1.tables.ports)
    back = reroute(r1.result, base, lmc=0)
    assert np.array_equal(back.result.tables.ports, r0.tables.ports)
    assert np.array_equal(back.result.dest.nid, r0.dest.nid)


def test_one_and_two_lookup_kernels_agree() -> None:
    full = parse_pgft(STUDY_1728).build()
    th = plan_throw(full, "link", 2026, 20)  # 475 links removed: many patterns
    r = route(th.fabric, algorithm="nmodc", workers=1, labels=False)
    slots = nominal.packed_slots(nominal.nominal_slots(r.graph))
    ctx = kernel.route_context(r.costs, r.dest)
    rows = np.arange(0, r.graph.n_switches, 7)[:64]
    out = []
    for one in (True, False):
        o = np.empty((len(rows), r.dest.max_lid + 1), dtype=np.uint8)
        nominal.route_block(r.graph, r.costs, r.dividers, r.dest, rows, o, slots, ctx,
                            one_lookup=one)
        out.append(o)
    assert np.array_equal(out[0], out[1])
    # the route's tables are the kernel's but for the leaves' redirects by load
    red = np.unique(balance.partial_pairs(r.graph, r.costs, r.dest,
                                          nominal.nominal_slots(r.graph)).leaf_target[0])
    assert np.isin(rows, red).any() and not np.isin(rows, red).all()
    same = ~np.isin(rows, red)
    assert np.array_equal(out[0][same], r.tables.ports[rows[same]])
    full_tables = np.array(r.tables.ports, copy=True)
    full_tables[rows] = out[0]
    assert not np.array_equal(full_tables, r.tables.ports)


@pytest.mark.parametrize("links", [1, 40])
def test_closer_slots_dense_and_per_pair_agree(links: int) -> None:
    """The redirects by load read the closer slots of the partial pairs on
    a dense grid of their leaves and targets, or one cell per pair where
    they are few (one link down: 1,294 pairs on a 648 x 648 grid); both give
    every pair the same slots, the same routing-on bit and the same
    slots of reduced capacity."""
    f = pgft(3, (6, 6, 12), (1, 6, 6), (1, 1, 1))
    f, _ = degrade(f, np.random.default_rng(links), links=links)
    r = route(f, algorithm="nmodc", workers=1, labels=False)
    g, c, dest = r.graph, r.costs, r.dest
    pr = balance.partial_pairs(g, c, dest, nominal.nominal_slots(g))
    goes_up = c[pr.ups[:, None], pr.targets[None, :]] >= dmodc.UP_PHASE
    assert len(pr.pb)
    got = []
    for dense in (True, False):
        closer, on, li, ti, kept = balance._closer(pr, goes_up, dense)
        got.append((closer[li, :, ti], on[li, ti], None if kept is None else kept[li, :, ti]))
    assert np.array_equal(got[0][0], got[1][0]) and np.array_equal(got[0][1], got[1][1])
    assert (got[0][2] is None) == (got[1][2] is None)
    assert got[0][2] is None or np.array_equal(got[0][2], got[1][2])
    assert got[0][0].any() and not got[0][0].all()


def test_alternatives_memo_gives_the_same_tables() -> None:
    """The lost slots' alternatives a worker keeps across its blocks are the
    ones :func:`alternatives` computes, for patterns met again and new ones
    alike, and the kernel's tables do not change with the memo."""
    from smroute.routing.nmodc.slot_tables import AlternativesMemo, alternatives
    rng = np.random.default_rng(7)
    memo = AlternativesMemo()
    for m in (3, 12, 18, 12):
        seen = rng.random((40, m)) < 0.7
        seen[:, :2] = True  # at least two closer slots
        seen[:, 2] = False  # and a lost one
        for rows in (seen[:25], seen[10:]):  # overlapping calls: hits and misses
            rows = np.unique(rows, axis=0)
            assert np.array_equal(memo.get(rows, m), alternatives(rows, m))
    full = parse_pgft(STUDY_1728).build()
    r = route(plan_throw(full, "link", 2026, 20).fabric, algorithm="nmodc", workers=1,
              labels=False)
    slots = nominal.packed_slots(nominal.nominal_slots(r.graph))
    ctx = kernel.route_context(r.costs, r.dest)
    out = []
    for memo_ in (None, AlternativesMemo()):
        o = np.empty((r.graph.n_switches, r.dest.max_lid + 1), dtype=np.uint8)
        for lo in range(0, r.graph.n_switches, 64):
            hi = min(lo + 64, r.graph.n_switches)
            nominal.route_block(r.graph, r.costs, r.dividers, r.dest, np.arange(lo, hi),
                                o[lo:hi], slots, ctx, memo=memo_)
        out.append(o)
    assert np.array_equal(out[0], out[1])


# ------------------------------------------------------------------ degraded trees
@pytest.mark.parametrize("seed", range(4))
def test_degraded_tree_routes_every_pair_updown(seed: int) -> None:
    f = pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1))
    d, _ = degrade(f, np.random.default_rng(seed), switches=2, links=10)
    r = route(d, algorithm="nmodc", workers=1)
    v = validate_result(r)
    assert v.ok, v.summary()
    assert v.updown_violations == 0 and v.loops == 0 and v.ca_pairs_unroutable == 0


@pytest.mark.parametrize("throw", [6, 17])
def test_heavy_damage_leaves_no_more_pairs_than_dmodc(throw: int) -> None:
    """The study's 1,728-host tree with 699 / 1,469 links removed (tree mode;
    general up*/down* fallback): routes stay up*/down* and deliver whatever
    Dmodc delivers."""
    full = parse_pgft(STUDY_1728).build()
    th = plan_throw(full, "link", 2026, throw)
    a = route(th.fabric, algorithm="dmodc", workers=1)
    b = route(th.fabric, algorithm="nmodc", workers=1)
    assert b.mode == a.mode
    va, vb = validate_result(a), validate_result(b)
    assert vb.updown_violations == 0 and vb.loops == 0 and vb.dead_ends <= va.dead_ends
    assert vb.ca_pairs_unroutable <= va.ca_pairs_unroutable
    assert np.array_equal(b.tables.ports == 255, a.tables.ports == 255)


def test_slender_tree_routes_every_pair() -> None:
    r = route(slender_tree(4, 2, 3), algorithm="nmodc", workers=1)
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unroutable == 0, v.summary()


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibdmchk") is None,
                    reason="ibdmchk (Debian package ibutils) is not installed")
def test_ibdmchk_finds_no_credit_loop(tmp_path: Path) -> None:
    from smroute.cli.route_cmd import hop_table
    from smroute.lab.ibdmchk import run_ibdmchk
    from smroute.tables.formats import write_tables

    full = pgft(3, (4, 4, 4), (1, 4, 2), (1, 1, 1))
    f, _ = degrade(full, np.random.default_rng(20240607), switches=2, links=10)
    r = route(f, algorithm="nmodc", workers=1)
    fdbs = tmp_path / "opensm.fdbs"
    write_tables(r.tables, fdbs, "fdbs", fabric=f, hops=hop_table(r))
    rep = run_ibdmchk(fdbs, tmp_path / "opensm-subnet.lst", timeout=600)
    assert rep.credit_loops is False and rep.missing_paths == 0 and rep.ok, rep.stdout[-2000:]


# ------------------------------------------------------------------ balance
def _a2a_sp(fabric: Fabric, algorithm: str) -> tuple[int, int]:
    r = route(fabric, algorithm=algorithm, workers=1, labels=False)
    v = routing_view(fabric, r.tables)
    pp = pair_paths(v)
    order = P.topological_order(v, r)
    assert pp.unroutable_pairs == 0
    return a2a_risk(v, pp, order).value, sp_risk(v, pp, order).risk_max


@pytest.mark.parametrize(("throw", "bound"), [(0, 17), (47, 50)])
def test_damaged_siblings_send_the_same_destinations(throw: int, bound: int) -> None:
    """The study's 1,728-host tree, link throws 0 (13 links removed) and 47
    (284): Dmodc's damaged switches pick by ``t mod 11`` beside ``t mod 12``
    (A2A 38 and 107; OpenSM's best, dfsssp: 19 and 43); Nmodc keeps the
    nominal slots (16 and 42) without losing Dmodc's shift-permutation risk
    by more than the lost links force."""
    full = parse_pgft(STUDY_1728).build()
    th = plan_throw(full, "link", 2026, throw)
    a2a_d, sp_d = _a2a_sp(th.fabric, "dmodc")
    a2a_n, sp_n = _a2a_sp(th.fabric, "nmodc")
    assert a2a_d > 2 * bound  # the bound fails on Dmodc ...
    assert a2a_n <= bound  # ... and holds on Nmodc
    assert sp_n <= sp_d + 1


def _kernel_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Route Nmodc without its redirects by load (the kernel's tables)."""
    monkeypatch.setattr(balance, "balance_redirects",
                        lambda g, c, pi, dest, ports, slots, leaves=None, **kw: ports)


def test_redirects_by_load_on_heavy_damage(monkeypatch: pytest.MonkeyPatch) -> None:
    """The study's 1,728-host tree, link throw 33 (655 links removed): the
    kernel's probe order sends the destinations of leaves missing two slots
    to a third upper switch, alone, and those pile up on the upper switches
    that lost up-links (A2A 87); chosen by load the redirects reach A2A 45 or
    less (OpenSM's best there, sssp: 54), every pair still delivered on a
    minimal up*/down* route.  Only leaves' rows change."""
    full = parse_pgft(STUDY_1728).build()
    th = plan_throw(full, "link", 2026, 33)
    nm = route(th.fabric, algorithm="nmodc", workers=1, labels=False)
    assert validate_result(nm).ok
    a2a, _ = _a2a_sp(th.fabric, "nmodc")
    with monkeypatch.context() as mp:
        _kernel_only(mp)
        kernel = route(th.fabric, algorithm="nmodc", workers=1, labels=False)
        a2a_kernel, _ = _a2a_sp(th.fabric, "nmodc")
    assert a2a_kernel > 80 and a2a <= 45
    rows = np.flatnonzero((kernel.tables.ports != nm.tables.ports).any(axis=1))
    assert len(rows) and (nm.graph.rank[rows] == 0).all()
    red = np.unique(balance.partial_pairs(nm.graph, nm.costs, nm.dest,
                                          nominal.nominal_slots(nm.graph)).leaf_target[0])
    assert np.isin(rows, red).all()


def test_redirects_by_load_in_the_pool_equal_in_process() -> None:
    """The pool runs the redirects by load per part of whole sibling groups
    in its workers: the same tables as one process."""
    full = parse_pgft(STUDY_1728).build()
    f = plan_throw(full, "link", 2026, 33).fabric
    one = route(f, algorithm="nmodc", workers=1, labels=False)
    with RoutePool(2) as pool:
        two = route(f, algorithm="nmodc", pool=pool, labels=False)
    assert np.array_equal(one.tables.ports, two.tables.ports)


def test_no_redirect_on_a_complete_tree() -> None:
    r = route(pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1)), algorithm="nmodc", workers=1)
    slots = nominal.nominal_slots(r.graph)
    assert len(balance.partial_pairs(r.graph, r.costs, r.dest, slots).pb) == 0
    ports = np.array(r.tables.ports)
    assert balance.balance_redirects(r.graph, r.costs, r.dividers, r.dest, ports,
                                     slots, n_eps=len(r.graph.ep_switch)) is ports


# ------------------------------------------------------------------ reroute, CLI, study
def test_incremental_reroute_equals_full_route() -> None:
    """Random chained link sets on a 3-level tree, each rerouted from the
    previous state; some remove a pod's last link to an L2 switch (nominal
    slots change); always equal to a from-scratch Nmodc route."""
    f = pgft(3, (2, 2, 4), (1, 2, 2), (1, 1, 1))
    inter = _inter_links(f)
    rng = np.random.default_rng(5)
    prev = route(f, algorithm="nmodc", workers=1, lmc=0)
    paths = set()
    for _ in range(25):
        li = rng.choice(inter, size=int(rng.integers(1, 5)), replace=False)
        f2 = f.with_removed(links=li)
        r = reroute(prev, f2, lmc=0)
        full = route(f2, algorithm="nmodc", workers=1, lmc=0)
        assert r.result.algorithm == "nmodc"
        assert np.array_equal(r.result.tables.ports, full.tables.ports), r.reason
        assert diff_tables(prev.tables, full.tables).entries_changed == r.diff.entries_changed
        paths.add(r.incremental)
        prev = r.result
    assert paths == {True, False}
    # a Dmodc routing is never patched with Nmodc's kernel (and back)
    d = route(f, algorithm="dmodc", workers=1, lmc=0)
    f2 = f.with_removed(links=inter[:1])
    r = reroute(d, f2, lmc=0, algorithm="nmodc")
    assert not r.incremental and r.reason == "algorithm nmodc"
    assert np.array_equal(r.result.tables.ports,
                          route(f2, algorithm="nmodc", workers=1, lmc=0).tables.ports)


def test_cli_route_with_nmodc(tmp_path: Path) -> None:
    fabric = tmp_path / "fabric.topo"
    write_topology(degrade(pgft(2, (4, 8), (1, 4), (1, 1)), np.random.default_rng(3),
                           links=3)[0], fabric)
    out = tmp_path / "lfts.json"
    p = subprocess.run([sys.executable, "-m", "smroute", "route", str(fabric), "--algorithm",
                        "nmodc", "--workers", "1", "--format", "json", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "nmodc" in p.stdout + p.stderr and out.is_file()


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibsim") is None, reason="ibsim (ibsim-utils) is not installed")
def test_side_by_side_routes_nmodc_beside_dmodc(tmp_path: Path) -> None:
    from smroute.analysis.compare import CompareConfig
    from smroute.lab.sidebyside import DEFAULT_ENGINES, ENGINES, run_side_by_side

    assert DEFAULT_ENGINES[:2] == ("nmodc", "dmodc") and set(DEFAULT_ENGINES) < set(ENGINES)
    f, _ = degrade(pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1)), np.random.default_rng(2), links=6)
    engines = ("dmodc", "nmodc", "minhop")  # OpenSM assigns the LIDs
    r = run_side_by_side(f, tmp_path, np.random.default_rng(1), engines=engines,
                         config=CompareConfig(rp_samples=50, random_orders=1))
    assert list(r.runs) == list(engines)
    for e in engines:
        assert r.runs[e].status == "ok", r.runs[e].error
        assert r.metrics[e].unroutable["pairs"] == 0
    assert r.metrics["nmodc"].values["a2a"] <= r.metrics["dmodc"].values["a2a"]


def test_daemon_routes_and_reroutes_with_nmodc() -> None:
    """The daemon's config accepts ``algorithm: nmodc``; its core routes with
    it and a link fault gives the tables of a from-scratch Nmodc route."""
    from smroute.fabric.faults import FaultEvent
    from smroute.service.config import parse_config
    from smroute.service.core import RoutingCore

    assert parse_config("algorithm: nmodc\n", "smroute.yaml").algorithm == "nmodc"
    f = pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1))
    link = int(_inter_links(f)[5])
    row = int(f.link_a[link])
    node = int(f.port_node[row])
    core = RoutingCore(workers=1, algorithm="nmodc", coalesce_s=0.0, validate_epochs=False)
    try:
        core.load_fabric(f, "test")
        e1 = core.route()
        assert e1.result.algorithm == "nmodc"
        out = core.apply_faults([FaultEvent("link_down", int(f.node_guid[node]),
                                             int(f.port_num[row]))])
        assert out.committed and out.epoch.result.algorithm == "nmodc"
        full = route(f.with_removed(links=[link]), algorithm="nmodc", workers=1)
        assert np.array_equal(out.epoch.result.tables.ports, full.tables.ports)
    finally:
        core.close()


def test_a_groups_destinations_take_its_parallel_cables_in_turn() -> None:
    """A leaf that lost every cable to one spine (PGFT with 2 cables per
    leaf-spine pair): each surviving spine group carries its share of the
    destinations, and its two cables carry them evenly (within one), as
    Dmodc's do where no slot is lost (the table's round, not its length)."""
    f = pgft(2, (4, 8), (1, 4), (1, 2))  # 8 leaves x 4 hosts, 4 spines, 2 cables each
    g0 = route(f, algorithm="nmodc", workers=1, labels=False).graph
    leaf = int(g0.leaves[0])
    spine = int(g0.grp_remote[g0.grp_first[leaf] + g0.grp_count[leaf] - 1])
    node, other = g0.sw_node[leaf], g0.sw_node[spine]
    a, b = f.port_node[f.link_a], f.port_node[f.link_b]
    cut = np.flatnonzero(((a == node) & (b == other)) | ((a == other) & (b == node)))
    assert len(cut) == 2
    res = route(f.with_removed(links=cut), algorithm="nmodc", workers=1, labels=False)
    g = res.graph
    leaf_t = np.flatnonzero(g.sw_guid == g0.sw_guid[leaf])[0]
    remote = ~res.dest.is_switch & (res.dest.target != leaf_t)
    ports = res.tables.ports[leaf_t, res.dest.lid[remote]]
    for k in range(g.grp_count[leaf_t]):
        grp = g.grp_first[leaf_t] + k
        cables = g.grp_ports[g.grp_port_first[grp]:g.grp_port_first[grp]
                             + g.grp_port_count[grp]]
        if g.rank[g.grp_remote[grp]] <= g.rank[leaf_t]:
            continue
        per = np.array([(ports == p).sum() for p in cables])
        assert len(per) == 2 and per.sum() >= 9, per  # 28 destinations over 3 spines
        assert per.max() - per.min() <= 1, per


def test_switches_without_pgft_siblings_route_as_dmodc() -> None:
    """On selene's storage fabric (real capture) the spines' siblings reach
    32 cores and 4 host-less leaves that rank as roots: no PGFT, so their
    slots are their own groups and they must route exactly as Dmodc does (a
    slot table with alternatives there sent SP from 18 to 26 and A2A from 35
    to 48); the leaves keep their nominal slots."""
    path = REAL / "Mellanox-ufm_sdk_3.0-selene.storage.txt"
    if not path.exists():
        pytest.skip(f"{path} is not here (the shared real captures)")
    f = read_fabric(path)
    f = f[0] if isinstance(f, tuple) else f
    dm = route(f, algorithm="dmodc", workers=1, labels=False)
    nm = route(f, algorithm="nmodc", workers=1, labels=False)
    g = nm.graph
    spines = np.flatnonzero(g.rank == 1)
    assert np.array_equal(nm.tables.ports[spines], dm.tables.ports[spines])
    assert not np.array_equal(nm.tables.ports, dm.tables.ports)  # the leaves differ
    own = nominal.nominal_slots(g).own
    assert own[spines].all() and not own[g.rank == 0].any()
    # the cores reach a pod through 8 spines: Nmodc spreads it over them
    # (down-going C[t mod #C]); OpenSM's best on this capture, dfsssp and
    # sssp, have A2A 24 and SP 7 (bench/real_fabrics.py); the leaves' probe
    # order that starts at slot j + 1 + r cost one SP here (5) until the
    # redirect digit spread over the NIDs, which do not fill this tree
    a2a, sp = _a2a_sp(f, "nmodc")
    assert (a2a, sp) == (24, 4) and _a2a_sp(f, "dmodc") == (35, 18)


def two_plane_tree(pods: int, k: int, hosts: int, cores: int) -> Fabric:
    """A 3-level tree of ``pods`` pods of ``k`` leaves (``hosts`` hosts each)
    and ``k`` spines, every leaf on every spine of its pod; even spines go up
    to the ``cores`` cores of plane 0, odd ones to those of plane 1, so a core
    reaches each pod through ``k / 2`` spines (selene's storage fabric has
    this shape)."""
    n = pods * k
    ar = np.arange
    one = np.ones
    levels = [Level(0, n * hosts, one(n * hosts, np.int64),
                    [f"host {i}" for i in range(n * hosts)]),
              Level(1, n, np.full(n, hosts + k), [f"leaf {i}" for i in range(n)]),
              Level(2, n, np.full(n, k + cores), [f"spine {i}" for i in range(n)]),
              Level(3, 2 * cores, np.full(2 * cores, pods * k // 2),
                    [f"core {i}" for i in range(2 * cores)])]
    h = ar(n * hosts)
    leaf, j = np.divmod(ar(n * k), k)  # leaf, its j-th spine
    sp, c = np.divmod(ar(n * cores), cores)  # spine, its c-th core
    links = [(0, h, one(len(h), np.int64), 1, h // hosts, h % hosts + 1),
             (1, leaf, hosts + 1 + j, 2, leaf // k * k + j, leaf % k + 1),
             (2, sp, k + 1 + c, 3, sp % 2 * cores + c, sp // k * (k // 2) + sp % k // 2 + 1)]
    return assemble(levels, links, lmc=0, speed="EDR", width=4, guid_base=DEFAULT_GUID_BASE)


def test_a_down_going_route_spreads_a_pods_destinations_over_the_closer_groups() -> None:
    """A core reaches each pod through 4 spines and its divider (64) is the
    pod's NID count: Dmodc's ``floor(t / 64) mod 4`` is the same for every
    destination of a pod, so it sends a whole pod through one of the 4
    down-links; Nmodc's ``t mod 4`` uses all 4, and the shift-permutation
    risk halves."""
    f = two_plane_tree(pods=3, k=8, hosts=8, cores=8)
    sp = {}
    for algorithm, links_per_pod in (("dmodc", 1), ("nmodc", 4)):
        r = route(f, algorithm=algorithm, workers=1, labels=False)
        g = r.graph
        assert r.mode == "tree" and validate_result(r).ok
        pod = np.searchsorted(g.leaves, g.ep_switch) // 8  # leaves in GUID (= index) order
        for core in np.flatnonzero(g.rank == 2):
            ports = r.tables.ports[core, g.ep_lid]
            used = [len(np.unique(ports[pod == p])) for p in range(3)]
            assert used == [links_per_pod] * 3, (algorithm, int(core), used)
        sp[algorithm] = _a2a_sp(f, algorithm)[1]
    assert sp == {"dmodc": 4, "nmodc": 2}


def leaf_spine_tree(hosts: list[int], cables: list[list[int]]) -> Fabric:
    """A 2-level tree: leaf ``i`` with ``hosts[i]`` hosts and ``cables[i][j]``
    cables to spine ``j`` (leaf ports after its hosts, spine ports by leaf)."""
    h, cab = np.asarray(hosts), np.asarray(cables)
    n_leaf, n_spine = cab.shape
    n_host = int(h.sum())
    levels = [Level(0, n_host, np.ones(n_host, np.int64), [f"host {i}" for i in range(n_host)]),
              Level(1, n_leaf, (h + cab.sum(axis=1)).astype(np.int64),
                    [f"leaf {i}" for i in range(n_leaf)]),
              Level(2, n_spine, cab.sum(axis=0).astype(np.int64),
                    [f"spine {i}" for i in range(n_spine)])]
    on = np.repeat(np.arange(n_leaf), h)
    li, si = np.nonzero(cab)
    lf, sp = np.repeat(li, cab[li, si]), np.repeat(si, cab[li, si])  # by leaf, then spine
    k = np.arange(len(lf))
    by_spine = np.lexsort((lf, sp))
    sport = np.empty(len(lf), np.int64)
    sport[by_spine] = k - np.searchsorted(sp[by_spine], sp[by_spine]) + 1
    links = [(0, np.arange(n_host), np.ones(n_host, np.int64), 1, on,
              np.arange(n_host) - np.repeat(np.cumsum(h) - h, h) + 1),
             (1, lf, h[lf] + 1 + k - np.searchsorted(lf, lf), 2, sp, sport)]
    return assemble(levels, links, lmc=0, speed="EDR", width=4, guid_base=DEFAULT_GUID_BASE)


def test_cables_bound_by_their_destinations_are_shared_by_capacity() -> None:
    """X5's shape: 4 spines, 3 cables from most leaves to each, a 21-host leaf
    on spines 0 and 1 only.  The 9-host leaf sends that leaf's hosts through
    spines 0 and 1 alone and Dmodc's even shares put 9 destinations on some
    of their cables (A2A 9: all 9 hosts send through them).  Nmodc fills
    spines 2 and 3 with more of the free destinations, and deals each
    spine's destinations evenly over its 3 cables
    (:mod:`smroute.routing.nmodc.even_cables`; by the digit alone one cable took
    8): at most 7 per cable and A2A 7; so does the 24-host leaf (8 to 6).
    The 5- and 6-host leaves' cables are bound by their sources: they keep
    Dmodc's shares."""
    f = leaf_spine_tree([24, 9, 6, 21, 5, 24], [[3, 3, 3, 3], [3, 3, 3, 3], [1, 1, 1, 1],
                                                [6, 6, 0, 0], [3, 3, 3, 3], [3, 3, 3, 3]])
    dm = route(f, algorithm="dmodc", workers=1, labels=False)
    nm = route(f, algorithm="nmodc", workers=1, labels=False)
    assert validate_result(nm).ok
    assert _a2a_sp(f, "dmodc")[0] == 9 and _a2a_sp(f, "nmodc")[0] == 7
    g = nm.graph
    most = {}
    for leaf in g.leaves[g.n_up[g.leaves] == 4]:
        remote = g.ep_lid[g.ep_switch != leaf]
        most[int(np.bincount(g.ep_switch)[leaf])] = (
            int(np.bincount(dm.tables.ports[leaf, remote]).max()),
            int(np.bincount(nm.tables.ports[leaf, remote]).max()))
    assert most == {24: (8, 6), 9: (9, 7), 6: (27, 27), 5: (9, 9)}


def test_x5_capture_is_shared_by_capacity() -> None:
    """The X5 capture (real, the fabric the test above is shaped after): A2A
    7 and SP 4 against Dmodc's 9 and 4 (8 and 5 before the even cables);
    OpenSM's best there, nue, has A2A 7 and SP 6, minhop and dfsssp 8 and
    6-7 (bench/real_fabrics.py)."""
    path = REAL / "ltaulell-HPC_toolset-X5.topofile"
    if not path.exists():
        pytest.skip(f"{path} is not here (the shared real captures)")
    f = read_fabric(path)
    f = f[0] if isinstance(f, tuple) else f
    assert _a2a_sp(f, "dmodc") == (9, 4) and _a2a_sp(f, "nmodc") == (7, 4)


@pytest.mark.parametrize("in_pool", [False, True])
def test_incremental_reroute_with_redirects_by_load(in_pool: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """From the 1,728-host study tree's link throw 20 (475 links removed),
    more links lost one after another, each rerouted from the previous
    state: the redirects by load read every table, so the leaves with a
    redirected entry before or after are recomputed and the pass rerun;
    always equal to a from-scratch Nmodc route.  ``in_pool``: the whole
    rows and the pass in a pool's workers (a heavily damaged tree's path,
    taken here from the first partial pair)."""
    full = parse_pgft(STUDY_1728).build()
    f = plan_throw(full, "link", 2026, 20).fabric
    prev = route(f, algorithm="nmodc", workers=1, lmc=0)
    inter = _inter_links(f)
    rng = np.random.default_rng(11)
    with RoutePool(2 if in_pool else 1) as pool:
        worked = []
        if in_pool:
            monkeypatch.setattr(nmodc_incremental, "POOL_PAIRS", 1)
            run = pool.run
            monkeypatch.setattr(pool, "run", lambda *a, **k: worked.append(run(*a, **k)))
        for _ in range(3):
            f = f.with_removed(links=rng.choice(inter, size=2, replace=False))
            inter = _inter_links(f)
            r = reroute(prev, f, lmc=0, pool=pool if in_pool else None)
            full_route = route(f, algorithm="nmodc", workers=1, lmc=0)
            assert r.incremental, r.reason
            assert np.array_equal(r.result.tables.ports, full_route.tables.ports)
            assert diff_tables(prev.tables, full_route.tables).entries_changed == \
                r.diff.entries_changed
            prev = r.result
        assert len(worked) == (3 if in_pool else 0)


@pytest.mark.parametrize("which", ["x5", "pgft666", "throw4"])
def test_switches_that_cannot_share_by_capacity_never_do(which: str) -> None:
    """``slot_tables.may_share`` is a sound bound: where it says a switch
    cannot share its cables by capacity, its row is the same with the
    shares turned off (what lets the reroute route it to a subset of the
    destinations), and it does flag the X5-shaped tree's sharing leaves."""
    if which == "x5":
        f = leaf_spine_tree([24, 9, 6, 21, 5, 24],
                            [[3, 3, 3, 3], [3, 3, 3, 3], [1, 1, 1, 1], [6, 6, 0, 0], [3, 3, 3, 3],
                             [3, 3, 3, 3]])
    elif which == "pgft666":
        f = pgft(3, (6, 6, 6), (1, 6, 6), (1, 1, 1))
        inter = _inter_links(f)
        f = f.with_removed(links=np.random.default_rng(5).choice(inter, 9, replace=False))
    else:
        f = plan_throw(parse_pgft(STUDY_1728).build(), "link", 2026, 4).fabric
    r = route(f, algorithm="nmodc", workers=1, labels=False)
    g = r.graph
    can = slot_tables.may_share(g, r.costs, r.dest)
    slots = nominal.packed_slots(nominal.nominal_slots(g))
    rows = np.arange(g.n_switches)
    out = []
    for capacity in (True, False):
        o = np.empty((g.n_switches, r.dest.max_lid + 1), dtype=np.uint8)
        nominal.route_block(g, r.costs, r.dividers, r.dest, rows, o, slots, capacity=capacity)
        out.append(o)
    assert np.array_equal(out[0][~can], out[1][~can])
    shared = (out[0] != out[1]).any(axis=1)
    assert not shared[~can].any()
    if which == "x5":
        assert shared.any() and can[shared].all()


def test_incremental_reroute_restores_the_kernels_redirected_entries() -> None:
    """Links lost one set after another on a complete 216-host tree: a leaf
    whose redirects by load changed entries keeps them in its table, and
    the reroute gives those entries (its partial targets' LIDs) the
    kernel's values back before the pass reruns, without recomputing the
    leaf's whole row; always equal to a from-scratch route."""
    f = pgft(3, (6, 6, 6), (1, 6, 6), (1, 1, 1))
    prev = route(f, algorithm="nmodc", workers=1, lmc=0)
    rng = np.random.default_rng(5)
    partial = 0
    for k in range(8):
        f = f.with_removed(links=rng.choice(_inter_links(f), size=1 + k % 3, replace=False))
        r = reroute(prev, f, lmc=0)
        full = route(f, algorithm="nmodc", workers=1, lmc=0)
        assert r.incremental, r.reason
        assert np.array_equal(r.result.tables.ports, full.tables.ports)
        assert diff_tables(prev.tables, full.tables).entries_changed == r.diff.entries_changed
        leaves = np.unique(balance.partial_pairs(
            r.result.graph, r.result.costs, r.result.dest,
            nominal.nominal_slots(r.result.graph)).leaf_target[0])
        partial += r.rows < len(leaves)
        prev = r.result
    assert partial  # leaves with redirects whose rows were not recomputed in full


def test_incremental_reroute_with_shares_by_capacity() -> None:
    """On the X5-shaped tree (shares by capacity on the 9- and 24-host
    leaves) every single-cable loss, rerouted from the intact routing,
    equals a from-scratch Nmodc route: a switch's shares read its whole
    row, so the reroute recomputes whole rows where an entry changed."""
    f = leaf_spine_tree([24, 9, 6, 21, 5, 24], [[3, 3, 3, 3], [3, 3, 3, 3], [1, 1, 1, 1],
                                                [6, 6, 0, 0], [3, 3, 3, 3], [3, 3, 3, 3]])
    prev = route(f, algorithm="nmodc", workers=1, lmc=0)
    inter = _inter_links(f)
    for link in inter:
        f2 = f.with_removed(links=[link])
        r = reroute(prev, f2, lmc=0)
        full = route(f2, algorithm="nmodc", workers=1, lmc=0)
        assert r.incremental
        assert np.array_equal(r.result.tables.ports, full.tables.ports)


def _nodes_shuffled(fabric: Fabric, seed: int) -> Fabric:
    """The same fabric with its nodes listed in another order (an
    ibnetdiscover text round trip with the node records shuffled)."""
    chunks = "\n".join(format_topology(fabric)).strip("\n").split("\n\n")
    order = np.random.default_rng(seed).permutation(len(chunks) - 1) + 1
    return parse_topology("\n\n".join([chunks[0]] + [chunks[i] for i in order]).splitlines(),
                          "shuffled")


@pytest.mark.parametrize("shape, seed", [((3, (6, 6, 6), (1, 6, 6), (1, 1, 1)), 1),
                                         ((3, (4, 4, 8), (1, 4, 4), (1, 1, 1)), 2)])
def test_nmodc_tables_do_not_depend_on_the_node_order(shape: tuple, seed: int) -> None:
    """A fabric discovered from another port lists its nodes in another
    order; the tables must not change (the detours' hardest-first order and
    the redirects' representatives and ties go by GUID).  Both trees are
    detoured; on the first the redirects by load, on the second the
    detours' order differed before."""
    fabric, _ = degrade(pgft(*shape), np.random.default_rng(seed), links=150)
    other = _nodes_shuffled(fabric, 5)
    assert not np.array_equal(fabric.node_guid, other.node_guid)
    for alg in api.names(lab=True):
        a = route(fabric, algorithm=alg, workers=1, labels=False, max_vls=4)
        b = route(other, algorithm=alg, workers=1, labels=False, max_vls=4)
        assert a.mode == b.mode
        assert diff_tables(a.tables, b.tables).identical, alg
        assert alg != "nmodc" or a.mode == "tree+detours"


def test_loginoff_capture_is_at_or_below_opensms_best() -> None:
    """Loginoff's capture: leaf ib1 has 4 cables to spine ib7 (which has
    hosts of its own) and 3 to ib8.  Dmodc shares ib1's destinations
    evenly over the two spines: A2A 20 on the 3 cables.  OpenSM's best
    (minhop, updn), every CA in the topological order: SP 5, A2A 18, RP 6,
    HSD of the shifts 3.632.  Nmodc shares by capacity: A2A 18."""
    from smroute.analysis.compare import CompareConfig, compare_tables

    path = REAL / "loginoff-infiniband_topology-topo"
    if not path.exists():
        pytest.skip(f"{path} is not here (the shared real captures)")
    f = read_fabric(path)
    rs = {a: route(f, algorithm=a, workers=1, labels=False) for a in ("dmodc", "nmodc")}
    assert validate_result(rs["nmodc"]).ok
    order = P.topological_order(routing_view(f, rs["dmodc"].tables), rs["dmodc"])
    got = {m.name: m.values for m in compare_tables(
        f, {a: r.tables for a, r in rs.items()}, order, np.random.default_rng(1),
        CompareConfig(rp_samples=1000, random_orders=0))}
    assert got["dmodc"]["a2a"] == 20
    v = got["nmodc"]
    assert v["sp"] <= 5 and v["a2a"] <= 18 and v["rp"] <= 6, v
    assert v["hsd_topo_shift"] <= 3.632, v


def _island_tree(leaves: int = 8, hosts: int = 10, spines: int = 5, mgmt: int | None = 4
                 ) -> Fabric:
    """A 2-level tree (2 cables per leaf and spine) with a management switch
    of ``mgmt`` hosts hanging off the first leaf (2 cables; ``None``: no
    such switch)."""
    from smroute.fabric.generate.sitegen import QUANTUM, Site

    site = Site()
    lv = site.switches([f"MF0;leaf{i}:MQM8790/U1" for i in range(leaves)], 40, QUANTUM)
    for i, leaf in enumerate(lv):
        for h in range(hosts):
            site.host(leaf, f"cn-{i:02d}-{h:02d} HCA-1")
    sp = site.switches([f"MF0;spine{j}:MQM8790/U1" for j in range(spines)], 40, QUANTUM)
    for leaf in lv:
        for s in sp:
            site.cable(leaf, s, 2)
    if mgmt is not None:
        m = site.switch("MF0;mgmt-sw:MQM8700/U1", 40, QUANTUM)
        site.cable(lv[0], m, 2)
        for h in range(mgmt):
            site.host(m, f"mgmt-{h:02d} HCA-1")
    return site.build(np.random.default_rng(1))


def test_a_pendant_management_switch_is_no_nominal_slot() -> None:
    """The management switch off one leaf ranks above it (few hosts) but
    nothing routes on through it: the leaves keep the spines' arity (5, not
    6), so the spines' divider is 5 and the shifts of the compute hosts in
    name order are contention-free (Dmodc's divider 6: SP 2)."""
    from smroute.fabric.roles import fabric_roles

    f = _island_tree()
    g = switch_graph(f, fabric_roles(f))
    slots = nominal.nominal_slots(g)
    leaves = np.flatnonzero(g.rank == 0)
    assert (slots.arity[leaves] == 5).all()
    assert (nominal.nominal_dividers(g, slots.arity)[g.rank == 1] <= 5).all()
    assert _name_order_shifts(f, "nmodc") == (1, 1.0)
    assert _name_order_shifts(f, "dmodc")[0] == 2


def test_a_pendant_management_switch_keeps_the_wrap_gaps() -> None:
    """Leaves of 9 hosts over 5 spines of 2 cables (a modulus of 10): a
    shift's window wraps from the last of the 72 compute NIDs to 0 by 8 >
    10 - 9, so the NIDs get gaps at leaf boundaries.  The management switch
    off the first leaf is no up cable of that modulus; counted as a sixth
    group of that leaf, it left the NIDs without gaps (name-order SP 2,
    shift HSD 1.68)."""
    f = _island_tree(hosts=9)
    r = route(f, workers=1, labels=False, algorithm="nmodc")
    t = np.sort(r.dest.nid[~r.dest.is_switch])
    assert t[-1] > len(t) - 1  # gaps
    assert _name_order_shifts(f, "nmodc") == (1, 1.0)


@pytest.mark.parametrize("mgmt", [None, 0, 3])
def test_leaves_whose_shares_cannot_move_anything_keep_the_digit_s_cables(
        mgmt: int | None) -> None:
    """Leaves of 16 hosts over 3 spines of 2 cables: their cables are bound
    by their destinations (``may_share``), but the shares are even, and the
    leaf under a management switch (with or without hosts) has no
    destination that switch leads closer to: none shares, the even up
    cables keep Dmodc's digit, and the name-order shifts are the tree's
    without the switch (SP 3, HSD 2.62; dealt in NID order: SP 4, HSD 2.87)."""
    f = _island_tree(leaves=6, hosts=16, spines=3, mgmt=mgmt)
    r = route(f, workers=1, labels=False, algorithm="nmodc")
    g = r.graph
    assert slot_tables.may_share(g, r.costs, r.dest)[g.rank == 0].all()
    assert not slot_tables.sharing(g, r.costs, r.dest).any()
    sp, hsd = _name_order_shifts(f, "nmodc")
    assert (sp, round(hsd, 2)) == (3, 2.62)


def _name_order_shifts(f: Fabric, algorithm: str) -> tuple[int, float]:
    """The shift permutation's risk and HSD over the compute hosts of ``f``
    in host-name order, routed by ``algorithm`` (validated)."""
    from smroute.fabric.roles import EndportRole, fabric_roles

    r = route(f, workers=1, labels=False, algorithm=algorithm)
    assert validate_result(r).ok
    view = routing_view(f, r.tables)
    roles = fabric_roles(f)
    comp = np.flatnonzero(roles.endport_role[view.ep_node] == EndportRole.COMPUTE)
    o = comp[np.argsort([f.node_desc[int(n)] for n in view.ep_node[comp]], kind="stable")]
    sp = evaluate(view, pair_paths(view), P.cps("shift", len(o)), o)
    return sp.risk_max, sp.hsd_avg
