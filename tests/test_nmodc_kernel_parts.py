"""Nmodc's kernel tasks (smroute.routing.nmodc.engine): the nominal kernel's
rows together (Nmodc.kernel_parts), the partial targets' entries in the
kernel phase of a whole-table route (engine.WHOLE), one row per set of twin
switches (twins.twin_rows), and the helpers that only run faster
(kernel.unique_rows, slot_tables.lids_up_and_below): the
same tables as the kernel over even blocks of rows followed by the pass
"partial", on damaged trees with parallel cables, LMC and aggregation nodes,
in one process and in the pool."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_nmodc_descent import pods_under_directors

from smroute.fabric.generate.shapes import with_aggregation_nodes
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.routing import api, dmodc, kernel
from smroute.routing.api import Prepared
from smroute.routing.engine import route
from smroute.routing.nmodc import engine as nmodc_engine
from smroute.routing.nmodc import nominal, slot_tables
from smroute.routing.nmodc.twins import twin_rows
from smroute.routing.pool import RoutePool, kernel_parts

SMALL = (3, (4, 4, 8), (1, 4, 4), (1, 1, 1))
PARALLEL = (3, (4, 4, 8), (1, 2, 4), (1, 2, 1))
SHARES = (3, (6, 6, 6), (1, 6, 6), (1, 1, 1))

#: (PGFT, LMC, aggregation nodes, links removed, switches removed)
DAMAGED = [
    (SMALL, 0, False, 6, 0),
    (SMALL, 0, False, 3, 1),
    (SMALL, 1, False, 6, 0),
    (SMALL, 0, True, 6, 0),
    (PARALLEL, 0, False, 6, 0),
    (PARALLEL, 0, False, 0, 2),
    (SHARES, 0, False, 6, 0),
]


def _ids(case: tuple) -> str:
    spec, lmc, agg, links, sws = case
    return f"{spec[1]}-{spec[3]}-lmc{lmc}{'-agg' if agg else ''}-{links}l{sws}s"


class _EvenBlocks:
    """An engine as another, without ``kernel_parts``: the pool's even
    parts, so blocks of rows mix Dmodc's rows with the nominal ones (the
    reference, in one process)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        if name == "kernel_parts":
            raise AttributeError(name)
        return getattr(self._engine, name)


def _fabric(case: tuple) -> tuple[Fabric, int | None]:
    spec, lmc, agg, links, sws = case
    f = pgft(*spec, lmc=lmc)
    if agg:
        f = with_aggregation_nodes(f)
    f, _ = degrade(f, np.random.default_rng(3), switches=sws, links=links)
    return f, lmc or None


def _prepared(f: Fabric, lmc: int | None) -> Prepared:
    res = route(f, algorithm="nmodc", workers=1, labels=False, lmc=lmc)
    eng = api.engine("nmodc")
    prep = eng.prepare(res.graph, lmc, lambda: 0.0, {})
    assert isinstance(prep.aux, nmodc_engine.nominal.NominalSlots)
    return prep


@pytest.mark.parametrize("case", DAMAGED, ids=_ids)
def test_whole_route_and_kernel_parts_give_the_reference_tables(case: tuple) -> None:
    f, lmc = _fabric(case)
    prep = _prepared(f, lmc)
    nm = api.engine("nmodc")
    a = nm.arrays(prep)
    # the fabric has what the new paths handle: nominal rows, and (but on
    # the tree with parallel cables that lost switches) partial targets
    assert (~a["n_dmodc"]).any()
    groups = nmodc_engine._mask_groups(a["n_dmodc"], a["n_partial"], a["n_targets"])
    assert groups or case[0] == PARALLEL
    with RoutePool(1) as one:
        ref = one.run(_EvenBlocks(nm), prep)
        whole_even = one.run(_EvenBlocks(nmodc_engine.WHOLE), prep)
        whole_one = one.run(nmodc_engine.WHOLE, prep)
        parts_one = one.run(nm, prep)
    with RoutePool(2) as two:
        whole_two = two.run(nmodc_engine.WHOLE, prep)
        parts_two = two.run(nm, prep)
    for got in (whole_even, whole_one, parts_one, whole_two, parts_two):
        assert np.array_equal(got, ref)


@pytest.mark.parametrize("links", [0, 6])
def test_whole_route_after_the_descent_on_directors(links: int) -> None:
    """Unequal pods under directors (the descent names entries, some
    switches have partial targets, others route nominally): the whole-table
    route gives the tables of the kernel and the pass "partial"."""
    f = pods_under_directors()
    if links:
        f = degrade(f, np.random.default_rng(1), links=links)[0]
    prep = _prepared(f, None)
    nm = api.engine("nmodc")
    a = nm.arrays(prep)
    assert len(a["n_desc"]) and (~a["n_dmodc"]).any()
    assert nmodc_engine._mask_groups(a["n_dmodc"], a["n_partial"], a["n_targets"])
    with RoutePool(1) as one:
        ref = one.run(_EvenBlocks(nm), prep)
        whole = one.run(nmodc_engine.WHOLE, prep)
    with RoutePool(2) as two:
        whole_two = two.run(nmodc_engine.WHOLE, prep)
    assert np.array_equal(whole, ref) and np.array_equal(whole_two, ref)


def test_the_partial_targets_entries_change_the_tables() -> None:
    """Without the pass "partial" (and not in the kernel) the tables differ:
    the comparison above sees a lost partial entry."""
    f, lmc = _fabric(DAMAGED[0])
    prep = _prepared(f, lmc)
    nm = api.engine("nmodc")
    with RoutePool(1) as one:
        ref = one.run(nm, prep)
        without = one.run(nm, prep, passes=[p for p in nm.passes(prep) if p.name != "partial"])
    assert not np.array_equal(ref, without)


def test_a_whole_route_has_no_partial_pass_and_the_engine_keeps_it() -> None:
    """The reroute's pool runs the pass "partial" by name: the registered
    engine keeps it; the whole-table route computes it in the kernel."""
    f, lmc = _fabric(DAMAGED[0])
    prep = _prepared(f, lmc)
    assert "partial" in [p.name for p in api.engine("nmodc").passes(prep)]
    assert "partial" not in [p.name for p in nmodc_engine.WHOLE.passes(prep)]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_kernel_parts_cover_every_row_once_nominal_rows_first(workers: int) -> None:
    f, lmc = _fabric(DAMAGED[0])
    prep = _prepared(f, lmc)
    a = nmodc_engine.WHOLE.arrays(prep)
    rows = np.arange(prep.graph.n_switches)
    parts = kernel_parts(nmodc_engine.WHOLE, a, rows, workers)
    assert np.array_equal(np.sort(np.concatenate(parts)), rows)
    assert all((np.diff(p) > 0).all() for p in parts)
    nominal_rows = np.flatnonzero(~a["n_dmodc"])
    lead = np.concatenate(parts[:min(workers, len(nominal_rows))])
    assert np.array_equal(lead, nominal_rows)
    # every group with the same partial targets whole in one part (with
    # other whole groups) of at most a 4 * workers-th of the rows, or, larger
    # than that, in parts of its own of at most a workers-th of the rows
    groups = nmodc_engine._mask_groups(a["n_dmodc"], a["n_partial"], a["n_targets"])
    label = np.full(len(rows), -1)
    for i, grp in enumerate(groups):
        label[grp] = i
    most = len(rows) if workers == 1 else -(-len(rows) // (4 * workers))
    for p in parts:
        got = np.unique(label[p])
        if got[0] < 0:  # Dmodc's other rows: no group
            assert len(got) == 1
            continue
        if len(got) > 1 or len(groups[got[0]]) <= most:  # whole groups
            assert len(p) <= most
            assert all(np.isin(groups[i], p).all() for i in got)
        else:
            assert len(p) <= -(-len(rows) // workers)
    for grp in groups:
        if len(grp) <= most:
            assert sum(np.isin(grp, p).any() for p in parts) == 1
    assert {int(x) for p in parts for x in np.unique(label[p])} >= set(range(len(groups)))
    # a subset of rows (an incremental reroute's): those rows only
    sub = rows[::3]
    got = np.concatenate(kernel_parts(nmodc_engine.WHOLE, a, sub, workers))
    assert np.array_equal(np.sort(got), sub)


def test_dmodc_keeps_the_pools_even_parts() -> None:
    a: dict[str, np.ndarray] = {}
    rows = np.arange(37)
    dm = api.engine("dmodc")
    assert [len(p) for p in kernel_parts(dm, a, rows, 1)] == [37]
    parts = kernel_parts(dm, a, rows, 2)
    assert len(parts) == 8 and np.array_equal(np.concatenate(parts), rows)


def test_unique_rows_is_numpys_unique_over_rows() -> None:
    rng = np.random.default_rng(0)
    for _ in range(100):
        scale = int(rng.integers(1, 1 << 40))
        m = rng.integers(0, int(rng.integers(1, 30)), size=(int(rng.integers(0, 50)), 3)) * scale
        want, inv = np.unique(m, axis=0, return_inverse=True)
        got, row_of = kernel.unique_rows(m.astype(np.int64))
        assert got.shape == want.shape and np.array_equal(got, want)
        assert np.array_equal(row_of, inv.ravel())


def test_unique_rows_ranks_its_key_anew_before_it_overflows() -> None:
    """Rows wide enough that the ranks of all their columns overflow one
    int64 key (18 up-neighbours of 324: 324**18), some of them repeated,
    give numpy's answer."""
    rng = np.random.default_rng(1)
    for width in (8, 18, 40):
        base = rng.integers(-(1 << 50), 1 << 50, size=(60, width))
        m = np.concatenate([base, base[rng.integers(0, 60, size=40)]])
        m[::7, -1] = 3  # rows that differ in the last column only
        want, inv = np.unique(m, axis=0, return_inverse=True)
        got, row_of = kernel.unique_rows(m)
        assert np.array_equal(got, want) and np.array_equal(row_of, inv.ravel())


@pytest.mark.parametrize("lmc", [0, 4])
def test_lids_up_and_below_are_the_weighted_counts(lmc: int) -> None:
    """Sums of bytes (fewer than 256 LIDs per target) and the einsum (more:
    every destination five times over, a leaf's 4 hosts with LMC 4 then
    have 320 LIDs) both count every destination LID reached going up and
    below."""
    f, _ = _fabric((SMALL, lmc, False, 6, 0))
    res = route(f, algorithm="nmodc", workers=1, labels=False, lmc=lmc or None)
    c, dest = res.costs, res.dest
    w = np.bincount(dest.target, minlength=c.shape[1])
    up = ((c >= dmodc.UP_PHASE) & (c < dmodc.INF)).astype(np.int64) @ w
    below = (c < dmodc.UP_PHASE).astype(np.int64) @ w
    got_up, got_below = slot_tables.lids_up_and_below(c, dest)
    assert np.array_equal(got_up, up) and np.array_equal(got_below, below)
    big = dmodc.Destinations(**{k: np.repeat(getattr(dest, k), 5) for k in
                                ("lid", "nid", "target", "local_port", "is_switch", "owner")})
    assert np.bincount(big.target).max() >= 256 or lmc == 0
    got_up, got_below = slot_tables.lids_up_and_below(c, big)
    assert np.array_equal(got_up, 5 * up) and np.array_equal(got_below, 5 * below)


@pytest.mark.parametrize("case", DAMAGED, ids=_ids)
def test_twin_rows_are_the_kernels_rows(case: tuple) -> None:
    """The kernel routes one switch of each set of twins towards their
    partial targets (twins.twin_rows): every switch's row is the kernel's
    own; towards every target (the switches among them have no twin), too."""
    f, lmc = _fabric(case)
    prep = _prepared(f, lmc)
    a = api.engine("nmodc").arrays(prep)
    g, dest = prep.graph, prep.dest
    rd = nominal.redirect_dividers(g, a["pi"], len(prep.nids))
    fewer = 0
    groups = nmodc_engine._mask_groups(a["n_dmodc"], a["n_partial"], a["n_targets"])
    every = np.ones(g.n_switches, dtype=bool)
    for sw, targets in [*((grp, a["n_targets"][a["n_partial"][grp[0]]]) for grp in groups),
                        (np.flatnonzero(a["n_dmodc"]), every)]:
        sel = np.flatnonzero(targets[dest.target])
        first, row_of = twin_rows(g, a["c"], a["n_slots"], a["pi"], rd, sw,
                                  np.flatnonzero(targets))
        assert (np.diff(first) > 0).all() and np.array_equal(first[row_of[first]], first)
        want = np.empty((len(sw), len(sel)), dtype=np.uint8)
        nominal.route_block(g, a["c"], a["pi"], api.subset(dest, sel), sw, want, a["n_slots"],
                            capacity=False, redirect=rd)
        assert np.array_equal(want[first][row_of], want)
        fewer += len(sw) - len(first)
    assert fewer > 0 or case[0] == PARALLEL


@pytest.mark.parametrize("k", [1, 2, 3])
def test_balance_parts_whole_sibling_groups_even_in_work(k: int) -> None:
    """The pass "balance"'s parts cover the nominal leaves once, each
    sibling group whole; a leaf that lost a slot weighs
    LOST_SLOT_WEIGHT leaves when the parts are cut."""
    from smroute.routing.nmodc import balance

    f, _ = degrade(pgft(*SHARES), np.random.default_rng(0), links=6)
    prep = _prepared(f, None)
    g, slots = prep.graph, prep.aux
    parts = nmodc_engine.group_parts(g, slots, k)
    leaves = balance.nominal_leaves(g, slots)
    assert np.array_equal(np.sort(np.concatenate(parts)), leaves)
    label = balance.sibling_groups(g, slots, leaves)
    at = {int(s): i for i, p in enumerate(parts) for s in p}
    for lab in np.unique(label):
        assert len({at[int(s)] for s in leaves[label == lab]}) == 1
    assert len(parts) <= k
    if k == 2:  # the cut sits nearer the weighted middle than any other group boundary
        width = slots.slot_grp.shape[1]
        lost = ((slots.slot_grp[leaves, :width] < 0)
                & (np.arange(width)[None, :] < slots.arity[leaves][:, None])).any(axis=1)
        assert lost.any()
        w = {int(s): (nmodc_engine.LOST_SLOT_WEIGHT if x else 1)
             for s, x in zip(leaves, lost, strict=True)}
        half = sum(w.values()) / 2
        first = sum(w[int(s)] for s in parts[0])
        last = label[np.searchsorted(leaves, parts[0][-1])]  # its last group, by label order
        assert first >= half > first - sum(w[int(s)] for s in leaves[label == last])


@pytest.mark.parametrize("case", DAMAGED, ids=_ids)
def test_partial_entries_of_groups_together_are_each_groups_alone(
        case: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """The groups with the same partial targets routed in one kernel call
    (their twins towards all their targets) get each group's entries alone."""
    from smroute.routing.nmodc.slot_tables import AlternativesMemo

    f, lmc = _fabric(case)
    prep = _prepared(f, lmc)
    a = nmodc_engine.WHOLE.arrays(prep)
    groups = nmodc_engine._mask_groups(a["n_dmodc"], a["n_partial"], a["n_targets"])
    if len(groups) < 2:
        pytest.skip("fewer than two groups with partial targets on this tree")
    g, dest = prep.graph, prep.dest
    rd = nominal.redirect_dividers(g, a["pi"], int(a["n_eps"][0]))
    alone = [nmodc_engine._partial_entries(a, [grp], g, dest, AlternativesMemo(), rd)[0]
             for grp in groups]
    monkeypatch.setattr(nmodc_engine, "CALL_ENTRIES", 1 << 40)  # always together
    together = nmodc_engine._partial_entries(a, groups, g, dest, AlternativesMemo(), rd)
    for (s1, e1), (s2, e2) in zip(alone, together, strict=True):
        assert np.array_equal(s1, s2) and np.array_equal(e1, e2)


@pytest.mark.parametrize("case", DAMAGED, ids=_ids)
def test_known_counts_below_give_the_same_rows_and_descent_keys(case: tuple) -> None:
    """dmodc_rows and descent_keys read the switches below each switch
    from the counts given (Nmodc.arrays counts them once) as from the costs."""
    from smroute.routing.nmodc.as_dmodc import dmodc_rows
    from smroute.routing.nmodc.descent import descent_keys

    f, lmc = _fabric(case)
    prep = _prepared(f, lmc)
    g, c, slots = prep.graph, prep.costs, prep.aux
    below = (c < dmodc.UP_PHASE).sum(axis=1, dtype=np.int32)
    share = slot_tables.may_share(g, c, prep.dest)
    for x, y in zip(dmodc_rows(g, c, slots, share), dmodc_rows(g, c, slots, share, below),
                    strict=True):
        assert np.array_equal(x, y)
    assert np.array_equal(descent_keys(g, c, slots, prep.dividers, prep.dest),
                          descent_keys(g, c, slots, prep.dividers, prep.dest, below))
    # and the counts are read: wrong ones give other rows
    wrong = dmodc_rows(g, c, slots, share, below + 1)[0]
    assert not np.array_equal(wrong, dmodc_rows(g, c, slots, share)[0])
