"""Nmodc routes a tree that lost nothing as Dmodc does (smroute.routing.nmodc.as_dmodc):
the test holds only where Nmodc's own kernel and every one of its passes give
Dmodc's tables, and the engine then gives them with Dmodc's kernel alone."""

from __future__ import annotations

import time

import numpy as np
import pytest

from smroute.fabric.generate.catalogue import build_shape
from smroute.fabric.generate.shapes import attach_cas, with_aggregation_nodes
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import fabric_roles
from smroute.routing import dmodc, modes
from smroute.routing.api import Prepared, engine
from smroute.routing.engine import route
from smroute.routing.nmodc import as_dmodc as as_dmodc_module
from smroute.routing.nmodc import cables, nominal, slot_tables
from smroute.routing.nmodc import engine as nmodc_engine
from smroute.routing.nmodc.as_dmodc import AsDmodc, as_dmodc
from smroute.routing.nmodc.wrap import wrap_gaps
from smroute.routing.pool import RoutePool, kernel_rows
from smroute.routing.topology import SwitchGraph

#: complete PGFTs Nmodc routes as Dmodc: 2, 3 and 4 levels, parallel cables
#: (leaf to L2, L2 to spine, both), the 11,664-host tree's shape in small,
#: switches that may share by capacity but whose shares are even (leaves of
#: 16 hosts over 6 cables, parallel ones, bound by their destinations)
FAST = [(2, (18, 36), (1, 18), (1, 1)), (2, (4, 8), (1, 4), (1, 1)),
        (2, (16, 6), (1, 3), (1, 2)),
        (3, (2, 2, 3), (1, 2, 2), (1, 2, 1)), (3, (4, 4, 6), (1, 2, 4), (1, 2, 1)),
        (3, (4, 4, 6), (1, 2, 4), (2, 2, 1)), (3, (6, 6, 12), (1, 3, 6), (1, 2, 1)),
        (3, (6, 6, 12), (1, 6, 6), (1, 1, 1)), (4, (2, 2, 2, 3), (1, 2, 2, 2), (1, 1, 1, 1)),
        (3, (3, 4, 6), (1, 3, 3), (1, 1, 2)), (3, (2, 2, 2), (1, 2, 2), (1, 2, 2)),
        (3, (4, 4, 4), (1, 4, 4), (1, 1, 1))]
#: those without parallel down cables: an aggregation node on every switch too
FAST_AGG = [s for s in FAST if all(p == 1 for p in s[3][1:])]
#: complete PGFTs where Nmodc's tables are not Dmodc's, and why: wrap gaps
#: (21 hosts over 4 spines; 20 over 3 spines of 2 cables)
NOT_FAST = [((2, (3, 7), (1, 4), (1, 1)), "wrap gaps"), ((2, (4, 5), (1, 3), (1, 2)), "wrap gaps")]


def _prepared(f: Fabric) -> Prepared:
    g = modes.start(f, fabric_roles(f))[0]
    return engine("nmodc").prepare(g, None, time.perf_counter, {})


def _nominal_only(g: SwitchGraph, *_: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = g.n_switches
    return np.zeros(n, dtype=bool), np.full(n, -1), np.zeros((0, n), dtype=bool)


def _full_path(monkeypatch: pytest.MonkeyPatch, f: Fabric) -> np.ndarray:
    """Nmodc's tables of ``f`` by its nominal kernel on every row and its passes."""
    with monkeypatch.context() as m:
        m.setattr(nmodc_engine, "as_dmodc", lambda *a: "forced")
        m.setattr(nmodc_engine, "dmodc_rows", _nominal_only)
        return route(f, algorithm="nmodc", workers=1).tables.ports


def _kernel_and_passes(prep: Prepared) -> tuple[np.ndarray, list[tuple[str, int]]]:
    """Nmodc's nominal kernel's table of ``prep`` and the entries each pass changes."""
    nm = engine("nmodc")
    full = Prepared(prep.graph, prep.costs, nominal.nominal_dividers(
        prep.graph, nominal.nominal_slots(prep.graph).arity), prep.nids, prep.dest,
        nominal.nominal_slots(prep.graph))
    a = nm.arrays(full)
    a["table"] = np.zeros((prep.graph.n_switches, prep.dest.max_lid + 1), dtype=np.uint8)
    kernel_rows(nm, a, np.arange(prep.graph.n_switches), {})
    kern = a["table"].copy()
    changed = []
    for p in nm.passes(full):
        before = a["table"].copy()
        p.run(a, None)
        changed.append((p.name, int((before != a["table"]).sum())))
    return kern, changed


@pytest.mark.parametrize(("shape", "agg"), [(s, False) for s in FAST]
                         + [(s, True) for s in FAST_AGG])
def test_a_complete_pgft_is_routed_as_dmodc(shape: tuple, agg: bool) -> None:
    f = with_aggregation_nodes(pgft(*shape)) if agg else pgft(*shape)
    prep = _prepared(f)
    assert isinstance(prep.aux, AsDmodc)
    # Nmodc's own kernel gives Dmodc's entries and no pass changes one
    want = route(f, algorithm="dmodc", workers=1)
    kern, changed = _kernel_and_passes(prep)
    dm = engine("dmodc")
    a = dm.arrays(prep)
    a["table"] = np.zeros_like(kern)
    kernel_rows(dm, a, np.arange(prep.graph.n_switches), {})
    assert np.array_equal(kern, a["table"])
    assert changed and all(n == 0 for _, n in changed), changed
    # so the engine gives them, in every mode the tree takes
    got = route(f, algorithm="nmodc", workers=1)
    assert np.array_equal(got.tables.ports, want.tables.ports)
    assert got.mode == want.mode == ("tree+turns" if agg else "tree")


def test_aggregation_nodes_over_parallel_down_cables_route_as_dmodc() -> None:
    f = with_aggregation_nodes(pgft(3, (4, 4, 6), (1, 2, 4), (1, 2, 1)))
    prep = _prepared(f)
    assert isinstance(prep.aux, AsDmodc)
    want = route(f, algorithm="dmodc", workers=1)
    got = route(f, algorithm="nmodc", workers=1)
    assert np.array_equal(got.tables.ports, want.tables.ports)


@pytest.mark.parametrize(("shape", "why"), NOT_FAST)
def test_a_complete_pgft_nmodc_changes_is_not_routed_as_dmodc(
        monkeypatch: pytest.MonkeyPatch, shape: tuple, why: str) -> None:
    f = pgft(*shape)
    prep = _prepared(f)
    assert not isinstance(prep.aux, AsDmodc)
    g = prep.graph
    if why == "wrap gaps":
        assert wrap_gaps(g, prep.nids) is not prep.nids
    else:
        assert as_dmodc(g, prep.costs, prep.dest) == why
    got = route(f, algorithm="nmodc", workers=1).tables.ports
    assert np.array_equal(got, _full_path(monkeypatch, f))
    assert not np.array_equal(got, route(f, algorithm="dmodc", workers=1).tables.ports)


@pytest.mark.parametrize("shape", FAST + [s for s, _ in NOT_FAST])
def test_the_share_condition_counts_what_may_share_counts(
        monkeypatch: pytest.MonkeyPatch, shape: tuple) -> None:
    """Condition 5 finds the switches may_share finds, without its (S, T)
    products, and those it says the sibling groups' loads settle are even
    by even_shares' own reading."""
    prep = _prepared(pgft(*shape))
    g, c, dest = prep.graph, prep.costs, prep.dest
    seen: list[tuple[np.ndarray, np.ndarray]] = []

    def spy(g: object, c: object, w: object, share: np.ndarray, counted: object,
            known: np.ndarray) -> np.ndarray:
        seen.append((share, known))
        return np.ones(len(share), dtype=bool)

    monkeypatch.setattr(as_dmodc_module, "even_shares", spy)
    as_dmodc(g, c, dest)
    want = np.flatnonzero(slot_tables.may_share(g, c, dest))
    share, known = seen[0] if seen else (np.zeros(0, np.int64), np.zeros(0, bool))
    assert np.array_equal(share, want)
    w = np.bincount(dest.target, minlength=g.n_switches)
    assert slot_tables.even_shares(g, c, w, share[known], cables.counted_cables(g)).all()
    assert known.all()  # (a complete PGFT: every one settled by its group)


@pytest.mark.parametrize("links", [1, 3, 12])
@pytest.mark.parametrize("shape", [FAST[3], FAST[6], FAST[7], (3, (4, 4, 4), (1, 4, 4), (1, 1, 1))])
def test_damaged_trees_keep_nmodc_s_tables(monkeypatch: pytest.MonkeyPatch, shape: tuple,
                                           links: int) -> None:
    for seed in range(3):
        f = degrade(pgft(*shape), np.random.default_rng(seed), links=links)[0]
        got = route(f, algorithm="nmodc", workers=1).tables.ports
        assert np.array_equal(got, _full_path(monkeypatch, f)), (shape, links, seed)


@pytest.mark.parametrize("agg", [False, True])
def test_on_a_damaged_tree_most_rows_are_dmodc_s_kernel_s(monkeypatch: pytest.MonkeyPatch,
                                                          agg: bool) -> None:
    """Where one link is lost, the switches around it take Nmodc's kernel
    and the others Dmodc's (but towards the targets the loss made partial):
    the same tables, most rows by Dmodc's kernel."""
    f = degrade(pgft(3, (6, 6, 12), (1, 6, 6), (1, 1, 1)), np.random.default_rng(4), links=2)[0]
    f = with_aggregation_nodes(f) if agg else f
    prep = _prepared(f)
    a = engine("nmodc").arrays(prep)
    rows, partial = a["n_dmodc"], a["n_partial"]
    assert 0.8 * len(rows) < rows.sum() < len(rows)
    assert (a["n_targets"][partial[rows & (partial >= 0)]].any(axis=1)).any()
    assert np.array_equal(route(f, algorithm="nmodc", workers=1).tables.ports,
                          _full_path(monkeypatch, f))


def test_a_tree_that_lost_a_top_switch_in_every_pod_alike_is_still_routed_as_dmodc() -> None:
    """A whole spine removed: every L2 of its column lost the same
    up-neighbour, the tree is a complete PGFT with one spine less."""
    f = pgft(3, (4, 4, 6), (1, 2, 4), (1, 2, 1))
    roles = fabric_roles(f)
    top = np.flatnonzero(roles.rank == roles.rank.max())[0]
    f = f.with_removed(nodes=[top])
    assert isinstance(_prepared(f).aux, AsDmodc)
    assert np.array_equal(route(f, algorithm="nmodc", workers=1).tables.ports,
                          route(f, algorithm="dmodc", workers=1).tables.ports)


def test_a_pool_routes_it_with_dmodc_s_kernel() -> None:
    f = pgft(3, (6, 6, 12), (1, 3, 6), (1, 2, 1), lmc=1)
    with RoutePool(2) as pool:
        got = route(f, algorithm="nmodc", pool=pool, lmc=1)
        want = route(f, algorithm="dmodc", pool=pool, lmc=1)
    assert np.array_equal(got.tables.ports, want.tables.ports)
    assert engine("nmodc").passes(_prepared(f)) == ()


def test_an_incremental_reroute_in_the_pool_redoes_the_partial_entries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reroute's whole rows in the pool take Dmodc's kernel where they
    can; the pass "partial" runs with the redirects by load: the same
    tables as a full route."""
    from smroute.fabric.model.base import NodeType
    from smroute.routing.nmodc import incremental
    from smroute.routing.reroute import reroute

    monkeypatch.setattr(incremental, "POOL_PAIRS", 0)
    f0 = degrade(pgft(3, (6, 6, 12), (1, 6, 6), (1, 1, 1)), np.random.default_rng(2), links=3)[0]
    sw = f0.node_type == NodeType.SWITCH
    inter = np.flatnonzero(sw[f0.port_node[f0.link_a]] & sw[f0.port_node[f0.link_b]])
    with RoutePool(2) as pool:
        prev = route(f0, algorithm="nmodc", pool=pool)
        for k in (0, 7, 21):
            f1 = f0.with_removed(links=[inter[k]])
            rr = reroute(prev, f1, lmc=None, pool=pool)
            assert rr.incremental
            assert np.array_equal(rr.result.tables.ports,
                                  route(f1, algorithm="nmodc", workers=1).tables.ports)


def _even_shares_switch_by_switch(g: SwitchGraph, c: np.ndarray, w: np.ndarray,
                                  sw: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """:func:`slot_tables.even_shares` read literally, one switch at a time."""
    out = np.zeros(len(sw), dtype=bool)
    for i, s in enumerate(sw.tolist()):
        mine = np.flatnonzero((g.grp_switch == s) & (g.rank[g.grp_remote] >= g.rank[s]))
        hop = c[g.grp_remote[mine]] & np.uint8(dmodc.UP_PHASE - 1)
        near = hop == hop.min(axis=0)
        n_near = near.sum(axis=0)
        going = (c[s] >= dmodc.UP_PHASE) & (c[s] < dmodc.INF) & (w > 0)
        if not (going & (n_near == len(mine))).any():
            out[i] = True  # nothing to share
            continue
        if len(set(counted[mine].tolist())) > 1:
            continue
        one = going & (n_near == 1)
        loads = [int(w[one & near[j]].sum()) for j in range(len(mine))]
        partial = going & (n_near > 1) & (n_near < len(mine))
        out[i] = len(set(loads)) == 1 and not partial.any()
    return out


#: complete and damaged trees (lost parallel cables, aggregation nodes, a
#: management island off a leaf) whose switches that may share by capacity
#: are even, uneven, or some of each
EVEN_CASES = [((3, (4, 4, 4), (1, 4, 4), (1, 1, 1)), 0, True),
              ((3, (4, 4, 4), (1, 4, 4), (1, 1, 1)), 3, True),
              ((3, (4, 4, 4), (1, 4, 4), (1, 1, 1)), 8, False),
              ((2, (16, 6), (1, 3), (1, 2)), 3, False),
              ((3, (6, 6, 12), (1, 3, 6), (1, 2, 1)), 8, True),
              ("hdr-mgmt-island-300", 0, False), ("hdr-mgmt-island-300", 4, False)]


def test_even_shares_reads_each_switch_as_the_rule_says() -> None:
    """The switches whose shares by capacity cannot move a destination,
    found for all at once by kinds of up-neighbours, are those the rule
    finds one switch at a time."""
    verdicts = []
    for shape, links, agg in EVEN_CASES:
        for seed in range(3):
            f = build_shape(shape) if isinstance(shape, str) else pgft(*shape)
            f = degrade(f, np.random.default_rng(seed), links=links)[0] if links else f
            prep = _prepared(with_aggregation_nodes(f) if agg else f)
            g, c = prep.graph, prep.costs
            w = np.bincount(prep.dest.target, minlength=g.n_switches)
            counted = cables.counted_cables(g)
            sw = np.flatnonzero(slot_tables.may_share(g, c, prep.dest, counted))
            got = slot_tables.even_shares(g, c, w, sw, counted)
            assert np.array_equal(got, _even_shares_switch_by_switch(g, c, w, sw, counted)), (
                shape, links, agg, seed)
            verdicts += got.tolist()
    assert 50 < sum(verdicts) < len(verdicts) - 30


@pytest.mark.parametrize(("shape", "rank"), [((2, (16, 6), (1, 3), (1, 2)), 1),
                                            ((3, (4, 4, 4), (1, 4, 4), (1, 1, 1)), 2),
                                            ((3, (12, 2, 2), (1, 2, 2), (1, 2, 1)), 1)])
def test_a_host_on_one_upper_switch_makes_the_shares_uneven(monkeypatch: pytest.MonkeyPatch,
                                                            shape: tuple, rank: int) -> None:
    """A UFM host on one upper switch of ``rank``: the sibling groups below
    it carry one destination more on that up-neighbour (through a top
    switch, or an up-neighbour that routes on), so the groups' loads settle
    nothing, the switches that may share do, and Nmodc's tables are its
    full path's."""
    f = pgft(*shape)
    g = _prepared(f).graph
    f = attach_cas(f, [int(g.sw_node[np.flatnonzero(g.rank == rank)[0]])], ["ufm-01 HCA-1"])
    prep = _prepared(f)
    assert as_dmodc(prep.graph, prep.costs, prep.dest) == "shares by capacity"
    assert np.array_equal(route(f, algorithm="nmodc", workers=1).tables.ports,
                          _full_path(monkeypatch, f))
