"""LMC routing properties and LID selection (issue 7), checked by walking the
tables: the base LID keeps Dmodc's tables, the LIDs of a destination turn at
distinct top switches, and the HSD that :func:`select_lids` reports is
recounted from scratch with the chosen DLIDs."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lids_trace import recount

from smroute.analysis.congestion import evaluate
from smroute.analysis.paths import OK, RoutingView, pair_paths, routing_view, trace
from smroute.analysis.patterns import cps, explicit, shifts
from smroute.errors import InputError
from smroute.fabric.generate.trees import degrade, kary_ntree, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.lids.select import _kempe, job_lmc, select_lids
from smroute.routing.engine import RoutingResult, route
from smroute.routing.validate import validate

_CACHE: dict[str, tuple[Fabric, RoutingResult, RoutingView]] = {}


def routed(name: str, f: Fabric, lmc: int | None = None) -> tuple[Fabric, RoutingResult,
                                                                   RoutingView]:
    if name not in _CACHE:
        r = route(f, workers=1, lmc=lmc)
        _CACHE[name] = (f, r, routing_view(f, r.tables))
    return _CACHE[name]


def naruse() -> tuple[Fabric, RoutingResult, RoutingView]:
    """The paper's cluster: a 6-ary-2-tree with 30 hosts (5 per leaf), LMC 3."""
    return routed("naruse", kary_ntree(6, 2, lmc=3, hosts_per_leaf=5))


def turning_switches(view: RoutingView, src: int, dst: int, lids: Iterable[int]) -> list[int]:
    """The highest-level switch each LID's path from ``src`` to ``dst`` visits."""
    lids = list(lids)
    t = trace(view, np.full(len(lids), src), np.full(len(lids), dst), np.array(lids))
    assert t.ok.all()
    out = []
    for row in t.links:
        sw = view.link_switch[row[row >= 0]]
        sw = sw[sw >= 0]
        out.append(int(sw[np.argmax(view.sw_level[sw])]))
    return out


def common_tops(r: RoutingResult, leaf_a: int, leaf_b: int) -> int:
    """How many switches of the lowest common level both leaves reach going up
    (plain Python over the switch graph; 1 for the same leaf)."""
    g = r.graph
    lo, hi = g.up_pairs()
    up: dict[int, set[int]] = {}
    for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
        up.setdefault(a, set()).add(b)
    fa, fb = {leaf_a}, {leaf_b}
    while not fa & fb:
        fa = {y for x in fa for y in up.get(x, ())}
        fb = {y for x in fb for y in up.get(x, ())}
        assert fa and fb
    return len(fa & fb)


# ------------------------------------------------------------------ LMC routing
@pytest.mark.parametrize("spec", [
    (2, (6, 6), (1, 6), (1, 1), 3),
    (2, (4, 8), (1, 4), (1, 1), 2),
    (2, (4, 8), (1, 2), (1, 2), 2),  # parallel links
    (3, (4, 4, 8), (1, 4, 4), (1, 1, 1), 2),
    (3, (4, 4, 8), (1, 4, 4), (1, 1, 1), 4),
    (3, (2, 3, 4), (1, 2, 3), (1, 1, 1), 3),
])
def test_lmc_lids_turn_at_distinct_top_switches(spec: tuple) -> None:
    h, m, w, p, lmc = spec
    f = pgft(h, m, w, p, lmc=lmc)
    r = route(f, workers=1)
    base = route(f, workers=1, lmc=0)
    g = r.graph
    # base LIDs (and switch LIDs) keep exactly the tables of LMC 0
    lids = np.concatenate([g.ep_lid, g.sw_lid[g.sw_lid > 0]])
    assert np.array_equal(r.tables.ports[:, lids], base.tables.ports[:, lids])
    v = routing_view(f, r.tables)
    v_base = routing_view(f, base.tables)
    n_lid = 1 << lmc
    checked = 0
    for la in v.leaves.tolist():
        src = int(np.flatnonzero(v.ep_leaf == la)[0])
        for dst in range(v.n_endports):
            lb = int(v.ep_leaf[dst])
            if lb == la:
                continue
            tops = turning_switches(v, src, dst, v.ep_lid[dst] + np.arange(n_lid))
            assert tops[0] == turning_switches(v_base, src, dst, [v.ep_lid[dst]])[0]
            sa = int(np.flatnonzero(g.sw_node == v.sw_node[la])[0])
            sb = int(np.flatnonzero(g.sw_node == v.sw_node[lb])[0])
            assert len(set(tops)) == min(n_lid, common_tops(r, sa, sb)), (la, dst, tops)
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_degraded_fabrics_route_every_lid_updown_only(seed: int) -> None:
    f0 = pgft(3, (4, 4, 8), (1, 4, 4), (1, 1, 1), lmc=2)
    f, _ = degrade(f0, np.random.default_rng(seed), switches=2, links=12)
    r = route(f, workers=1)
    assert len(r.dest.lid) == 4 * len(r.graph.ep_lid) + int((r.graph.sw_lid > 0).sum())
    val = validate(r.walk_graph, r.tables.ports, r.dest, r.costs)
    assert val.ok, val.summary()
    assert val.updown_violations == 0
    # and LID selection on it delivers every flow and never does worse
    v = routing_view(f, r.tables)
    rng = np.random.default_rng(seed)
    ranks = rng.choice(v.n_endports, 24, replace=False)
    sel = select_lids(v, ranks, shifts(24), rng=rng)
    hsd, bad = recount(v, ranks, shifts(24), sel.dlids)
    assert np.array_equal(hsd, sel.hsd)
    assert bad.sum() == 0 and sel.unroutable.sum() == 0
    assert (sel.hsd <= sel.hsd_base).all()


# ------------------------------------------------------------------ selection
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 30))
def test_naruse_cluster_any_allocation_hsd_1(seed: int, n: int) -> None:
    """Done-when: complete 2-level tree, 2**LMC >= top switches -> HSD 1 in
    every shift stage, for any subset and order of hosts."""
    f, r, v = naruse()
    rng = np.random.default_rng(seed)
    ranks = rng.choice(v.n_endports, n, replace=False)
    sel = select_lids(v, ranks, shifts(n), rng=rng)
    assert (sel.hsd == 1).all(), sel.hsd
    hsd, bad = recount(v, ranks, shifts(n), sel.dlids)
    assert (hsd == 1).all() and bad.sum() == 0


@pytest.mark.parametrize("seed", range(12))
def test_paper_setup_16_of_30_hosts(seed: int) -> None:
    f, r, v = naruse()
    rng = np.random.default_rng(seed)
    ranks = rng.choice(v.n_endports, 16, replace=False)
    sel = select_lids(v, ranks, shifts(16), rng=rng)
    assert (sel.hsd == 1).all()
    # the base LIDs are what the analysis package reports
    ev = evaluate(v, pair_paths(v), shifts(16), ranks)
    assert np.array_equal(ev.max_flows, sel.hsd_base)
    # the DLID matrix: rank s reaches rank d on one of d's 8 LIDs, 0 on the diagonal
    dl = sel.dlids
    assert (np.diag(dl) == 0).all()
    off = dl - v.ep_lid[ranks][None, :]
    np.fill_diagonal(off, 0)
    assert ((off >= 0) & (off < 8)).all()


@pytest.mark.parametrize("spec,n,seeds", [
    ((2, (8, 16), (1, 8), (1, 1), 3), 64, 4),  # 8 tops, 8 LIDs
    ((2, (18, 36), (1, 18), (1, 1), 5), 256, 2),  # the 648-host tree, 32 LIDs >= 18 tops
])
def test_larger_two_level_trees_hsd_1(spec: tuple, n: int, seeds: int) -> None:
    h, m, w, p, lmc = spec
    f, r, v = routed(f"two-{m}", pgft(h, m, w, p, lmc=lmc))
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        ranks = rng.choice(v.n_endports, n, replace=False)
        sel = select_lids(v, ranks, shifts(n), rng=rng)
        assert (sel.hsd == 1).all()
        assert sel.hsd_base_max > 1  # the random allocation did congest with base LIDs


@pytest.mark.parametrize("seed", range(6))
def test_kempe_chains_alone_reach_hsd_1(seed: int) -> None:
    """Without the local search (0 rounds), the exact colouring does it all."""
    f, r, v = naruse()
    rng = np.random.default_rng(seed)
    ranks = rng.choice(v.n_endports, 30, replace=False)
    sel = select_lids(v, ranks, shifts(30), rng=rng, max_rounds=0, sideways_rounds=0)
    assert sel.moves == 0
    assert sel.exact_stages == int((sel.hsd_base > 1).sum()) > 0
    assert (sel.hsd == 1).all()
    hsd, _ = recount(v, ranks, shifts(30), sel.dlids)
    assert (hsd == 1).all()


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 7), n_u=st.integers(1, 6),
       n_v=st.integers(1, 6))
def test_kempe_colours_any_bipartite_multigraph(seed: int, k: int, n_u: int, n_v: int) -> None:
    """König: max degree <= k colours suffice, from any (clashing) start."""
    rng = np.random.default_rng(seed)
    deg_u, deg_v = np.zeros(n_u, int), np.zeros(n_v, int)
    src, dst = [], []
    for _ in range(int(rng.integers(0, k * min(n_u, n_v) + 1))):
        u, v_ = int(rng.integers(n_u)), int(rng.integers(n_v))
        if deg_u[u] < k and deg_v[v_] < k:
            src.append(u)
            dst.append(v_)
            deg_u[u] += 1
            deg_v[v_] += 1
    avail = [list(range(k)) for _ in src]
    start = rng.integers(-1, k, size=len(src)).tolist()
    col = _kempe(src, dst, avail, start)
    assert col is not None
    assert len(set(zip(src, col, strict=True))) == len(src)
    assert len(set(zip(dst, col, strict=True))) == len(src)


def test_kempe_refuses_when_a_leaf_has_more_flows_than_colours() -> None:
    avail = [[0, 1]] * 3
    assert _kempe([0, 0, 0], [0, 1, 2], avail, [-1, -1, -1]) is None


@pytest.mark.parametrize("lmc,n", [(2, 40), (4, 40)])
def test_three_level_tree_improves_and_counts_exactly(lmc: int, n: int) -> None:
    f, r, v = routed(f"three-{lmc}", pgft(3, (4, 4, 8), (1, 4, 4), (1, 1, 1), lmc=lmc))
    rng = np.random.default_rng(7)
    ranks = rng.choice(v.n_endports, n, replace=False)
    sel = select_lids(v, ranks, shifts(n), rng=rng)
    hsd, bad = recount(v, ranks, shifts(n), sel.dlids)
    assert np.array_equal(hsd, sel.hsd) and bad.sum() == 0
    base, _ = recount(v, ranks, shifts(n), np.broadcast_to(v.ep_lid[ranks], (n, n)))
    assert np.array_equal(base, sel.hsd_base)
    assert (sel.hsd <= sel.hsd_base).all()
    assert sel.hsd_avg < sel.hsd_base_avg - 0.5


@pytest.mark.parametrize("name", ["ring", "binomial", "dissemination", "tournament",
                                  "recursive-doubling", "recursive-halving"])
def test_other_collectives(name: str) -> None:
    f, r, v = naruse()
    rng = np.random.default_rng(3)
    ranks = rng.choice(v.n_endports, 22, replace=False)
    pat = cps(name, 22)
    sel = select_lids(v, ranks, pat, rng=rng)
    hsd, _ = recount(v, ranks, pat, sel.dlids)
    assert np.array_equal(hsd, sel.hsd)
    assert (sel.hsd == 1).all()


def test_repeated_pairs_and_non_permutation_stages() -> None:
    """A pair used in two stages has one DLID; a stage where a rank sends twice
    loads its injection link twice."""
    f, r, v = naruse()
    ranks = np.arange(12)
    pat = explicit("mixed", 12, [
        ([0, 1, 2, 6], [6, 7, 8, 0]),
        ([0, 1, 3], [6, 7, 9]),  # pairs (0,6), (1,7) again
        ([0, 0, 5], [6, 11, 11]),  # 0 sends twice, 11 receives twice
    ])
    assert not pat.permutation
    sel = select_lids(v, ranks, pat, rng=np.random.default_rng(0))
    hsd, _ = recount(v, ranks, pat, sel.dlids)
    assert np.array_equal(hsd, sel.hsd)
    assert sel.hsd[2] == 2


def test_opensm_style_tables_without_lmc_structure() -> None:
    """LID selection only trusts the tables: shuffle which LID of each port
    takes which path (as another engine might) and the recount still agrees."""
    f, r, _ = naruse()
    ports = r.tables.ports.copy()
    g = r.graph
    rng = np.random.default_rng(5)
    for lid in g.ep_lid.tolist():
        perm = rng.permutation(8)
        ports[:, lid + np.arange(8)] = ports[:, lid + perm]
    from dataclasses import replace
    v = routing_view(f, replace(r.tables, ports=ports))
    ranks = rng.choice(v.n_endports, 20, replace=False)
    sel = select_lids(v, ranks, shifts(20), rng=rng)
    hsd, _ = recount(v, ranks, shifts(20), sel.dlids)
    assert np.array_equal(hsd, sel.hsd) and (hsd == 1).all()


def test_fewer_lids_than_top_switches_still_never_worse() -> None:
    f, r, v = naruse()
    for seed in range(5):
        rng = np.random.default_rng(seed)
        ranks = rng.choice(v.n_endports, 30, replace=False)
        sel = select_lids(v, ranks, shifts(30), rng=rng, lmc=1)
        assert sel.lmc == 1
        off = sel.dlids - v.ep_lid[ranks][None, :]
        np.fill_diagonal(off, 0)
        assert set(np.unique(off).tolist()) <= {0, 1}
        assert (sel.hsd <= sel.hsd_base).all()
        hsd, _ = recount(v, ranks, shifts(30), sel.dlids)
        assert np.array_equal(hsd, sel.hsd)


def test_lmc_0_is_the_base() -> None:
    f, r, v = naruse()
    ranks = np.arange(30)[::-1].copy()
    sel = select_lids(v, ranks, shifts(30), rng=np.random.default_rng(0), lmc=0)
    assert np.array_equal(sel.hsd, sel.hsd_base)
    assert (sel.offset == 0).all()


def test_bad_inputs() -> None:
    f, r, v = naruse()
    rng = np.random.default_rng(0)
    assert job_lmc(v, np.arange(4)) == 3
    with pytest.raises(InputError, match="LMC mismatch"):
        select_lids(v, np.arange(4), shifts(4), rng=rng, lmc=4)
    with pytest.raises(InputError, match="listed twice"):
        select_lids(v, np.array([1, 2, 1]), shifts(3), rng=rng)
    with pytest.raises(InputError, match="participants"):
        select_lids(v, np.arange(4), shifts(5), rng=rng)
    with pytest.raises(InputError, match="out of"):
        select_lids(v, np.array([0, 99]), shifts(2), rng=rng)
    # tables routed without the extra LIDs
    f2 = kary_ntree(6, 2, lmc=3, hosts_per_leaf=5)
    r2 = route(f2, workers=1, lmc=0)
    v2 = routing_view(f2, r2.tables)
    sel = select_lids(v2, np.arange(6), shifts(6), rng=rng, lmc=0)
    assert sel.lmc == 0
    with pytest.raises(InputError, match="do not route LID"):
        select_lids(v2, np.arange(6), shifts(6), rng=rng)


def test_trace_checks_lid_range() -> None:
    f, r, v = naruse()
    with pytest.raises(ValueError, match="LIDs must be"):
        trace(v, [0], [1], [v.lft.shape[1]])
    t = trace(v, [0], [7], [v.ep_lid[7] + 3])
    assert t.status[0] == OK


def test_undelivered_base_lid_takes_another_lid() -> None:
    """A table that drops the base LID of a destination at one leaf: the flows
    from that leaf use another of its LIDs, and every flow is delivered."""
    from dataclasses import replace

    from smroute.tables.lft import NO_ROUTE

    f, r, _ = naruse()
    ports = r.tables.ports.copy()
    g = r.graph
    dst_ep = 0
    far_leaf = int(np.flatnonzero(g.rank == 0)[-1])
    assert far_leaf != int(g.ep_switch[dst_ep])
    ports[far_leaf, g.ep_lid[dst_ep]] = NO_ROUTE
    v = routing_view(f, replace(r.tables, ports=ports))
    d = int(v.endports_of_rows([g.ep_row[dst_ep]])[0])
    srcs = np.flatnonzero(v.ep_leaf == np.flatnonzero(v.sw_node == g.sw_node[far_leaf])[0])
    ranks = np.concatenate([[d], srcs[:3]])
    n = len(ranks)
    sel = select_lids(v, ranks, shifts(n), rng=np.random.default_rng(0))
    assert sel.unroutable.sum() == 0
    hsd, bad = recount(v, ranks, shifts(n), sel.dlids)
    assert bad.sum() == 0 and np.array_equal(hsd, sel.hsd)
    assert (sel.dlids[1:, 0] != v.ep_lid[d]).all()  # not the base LID from that leaf
    # with base LIDs only, those flows are dead ends
    _, bad_base = recount(v, ranks, shifts(n), np.broadcast_to(v.ep_lid[ranks], (n, n)))
    assert bad_base.sum() == 3
