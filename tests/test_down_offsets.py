"""Nmodc's down-cable offsets of foreign residues
(smroute.routing.nmodc.down_offsets) and the shares by capacity that send them:
Loginoff's capture at or below OpenSM's best engine on every metric, no
change on complete PGFTs with parallel cables, the pool and the
incremental reroute equal to a from-scratch route."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_nominal_routing import _inter_links, leaf_spine_tree

from smroute.analysis import patterns as P
from smroute.analysis.compare import CompareConfig, compare_tables
from smroute.analysis.paths import routing_view
from smroute.fabric.generate.shapes import with_aggregation_nodes
from smroute.fabric.generate.trees import pgft
from smroute.fabric.ibnetdiscover.parse import read_fabric
from smroute.fabric.model.arrays import Fabric
from smroute.routing.engine import RoutingResult, route, validate_result
from smroute.routing.nmodc import down_offsets, nominal
from smroute.routing.nmodc.incremental import nominal_state
from smroute.routing.pool import RoutePool
from smroute.routing.reroute import reroute
from smroute.tables.diff import diff_tables

REAL = Path(__file__).resolve().parents[2] / "shared" / "fabrics" / "real"
LOGINOFF = REAL / "loginoff-infiniband_topology-topo"


def _loginoff_shaped() -> Fabric:
    """Loginoff's shape without its spine's hosts: 6 leaves on 2 spines, 4
    cables to each, but one leaf with 3 cables to the first spine."""
    return leaf_spine_tree([24, 22, 24, 24, 24, 24], [[4, 4]] * 5 + [[3, 4]])


def _foreign(r: RoutingResult) -> int:
    g = r.graph
    return len(down_offsets.foreign_entries(g, r.costs, r.dividers, r.dest, r.tables.ports,
                                            nominal.nominal_slots(g))[0])


def test_loginoff_capture_is_at_or_below_opensms_best() -> None:
    """Loginoff's capture: leaf ib1 has 4 cables to spine ib7 (which has
    hosts of its own) and 3 to ib8.  Dmodc shares ib1's destinations
    evenly over the two spines: A2A 20 on the 3 cables.  OpenSM's best
    (minhop, updn): SP 5, A2A 18, RP 6, HSD of the topological shifts 3.632.
    Nmodc shares by capacity (A2A 18) and its spines give the destinations
    ib1 sends them from the other spine's slot their own down cables."""
    if not LOGINOFF.exists():
        pytest.skip(f"{LOGINOFF} is not here (the shared real captures)")
    f = read_fabric(LOGINOFF)
    rs = {a: route(f, algorithm=a, workers=1, labels=False) for a in ("dmodc", "nmodc")}
    assert validate_result(rs["nmodc"]).ok and _foreign(rs["nmodc"]) > 0
    order = P.topological_order(routing_view(f, rs["dmodc"].tables), rs["dmodc"])
    got = {m.name: m.values for m in compare_tables(
        f, {a: r.tables for a, r in rs.items()}, order, np.random.default_rng(1),
        CompareConfig(rp_samples=1000, random_orders=0))}
    assert got["dmodc"]["a2a"] == 20
    v = got["nmodc"]
    assert v["sp"] <= 5 and v["a2a"] <= 18 and v["rp"] <= 6, v
    assert v["hsd_topo_shift"] <= 3.632, v


def test_complete_pgft_with_parallel_cables_has_no_foreign_entry() -> None:
    """Zahavi's PGFT(3;2,2,3;1,2,2;1,2,1): every child sends an upper switch
    the destinations of its slot only; the pass finds nothing to move and
    the tables are Dmodc's."""
    f = pgft(3, (2, 2, 3), (1, 2, 2), (1, 2, 1))
    a = route(f, algorithm="dmodc", workers=1, labels=False)
    b = route(f, algorithm="nmodc", workers=1, labels=False)
    assert _foreign(b) == 0
    assert np.array_equal(a.tables.ports, b.tables.ports)


def test_offsets_move_only_upper_switches_entries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On the Loginoff-shaped tree the pass moves some spine entries down
    their group (the rest of the tables as without it), and undoing it
    gives the tables without it; the pool's two workers agree."""
    f = _loginoff_shaped()
    r = route(f, algorithm="nmodc", workers=1, labels=False)
    g = r.graph
    assert validate_result(r).ok and _foreign(r) > 0
    monkeypatch.setattr(down_offsets, "offset_foreign", lambda *a: None)
    without = route(f, algorithm="nmodc", workers=1, labels=False).tables.ports
    monkeypatch.undo()
    diff = r.tables.ports != without
    assert diff.any() and (g.rank[np.flatnonzero(diff.any(axis=1))] > 0).all()
    entries = down_offsets.foreign_entries(g, r.costs, r.dividers, r.dest, r.tables.ports,
                                           nominal.nominal_slots(g))
    back = down_offsets.move_entries(g, r.dest, r.tables.ports.copy(), entries, undo=True)
    assert np.array_equal(back, without)
    with RoutePool(2) as p:
        par = route(f, algorithm="nmodc", pool=p, labels=False)
    assert np.array_equal(par.tables.ports, r.tables.ports)


@pytest.mark.parametrize("which", ["shaped", "loginoff"])
def test_chained_reroutes_with_down_offsets(which: str) -> None:
    """Links lost one set after another, each rerouted from the previous
    state: the spines' offset entries before the change get the kernel's
    back and the pass reruns; always equal to a from-scratch route, with
    the same diff."""
    if which == "loginoff":
        if not LOGINOFF.exists():
            pytest.skip(f"{LOGINOFF} is not here (the shared real captures)")
        f = read_fabric(LOGINOFF)
    else:
        f = _loginoff_shaped()
    prev = route(f, algorithm="nmodc", workers=1, lmc=0)
    assert _foreign(prev) > 0
    rng = np.random.default_rng(3)
    for k in range(6):
        f = f.with_removed(links=rng.choice(_inter_links(f), size=1 + k % 2, replace=False))
        r = reroute(prev, f, lmc=0)
        full = route(f, algorithm="nmodc", workers=1, lmc=0)
        assert r.incremental, r.reason
        assert np.array_equal(r.result.tables.ports, full.tables.ports), k
        assert diff_tables(prev.tables, full.tables).entries_changed == r.diff.entries_changed
        # what the next reroute reads of this one is what it would compute
        carried, fresh = r.result.state, nominal_state(r.result)
        assert carried is not None
        assert np.array_equal(carried.slots.slot_grp, fresh.slots.slot_grp)
        assert np.array_equal(carried.share, fresh.share)
        for a, b in zip(carried.pairs + carried.offsets, fresh.pairs + fresh.offsets,
                        strict=True):
            assert np.array_equal(a, b)
        prev = r.result


@pytest.mark.parametrize("case", ["pgft-links", "pgft-switches", "shaped", "x5", "agg"])
def test_the_sender_filter_drops_no_foreign_entry(case: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass reads only the senders that may leave their nominal slot
    (``_may_stray``, from the costs); with every sender read it finds the
    same entries, on damaged trees with parallel cables and on a complete
    one whose upper switches carry end-ports (aggregation nodes)."""
    rng = np.random.default_rng(11)
    if case == "x5":
        x5 = REAL / "ltaulell-HPC_toolset-X5.topofile"
        if not x5.exists():
            pytest.skip(f"{x5} is not here (the shared real captures)")
        f = read_fabric(x5)
    elif case == "agg":  # complete: only the upper switches' aggregation nodes send foreign
        f = with_aggregation_nodes(pgft(3, (4, 4, 8), (1, 2, 4), (1, 2, 1)))
    elif case == "shaped":
        f = _loginoff_shaped()
        f = f.with_removed(links=rng.choice(_inter_links(f), size=3, replace=False))
    else:
        f = pgft(3, (4, 4, 8), (1, 2, 4), (1, 2, 1))
        if case == "pgft-links":
            f = f.with_removed(links=rng.choice(_inter_links(f), size=24, replace=False))
        else:  # an L2 switch
            f = f.with_removed(nodes=[f.switches[40]])
    r = route(f, algorithm="nmodc", workers=1, labels=False)
    got = down_offsets.foreign_entries(r.graph, r.costs, r.dividers, r.dest, r.tables.ports,
                                       nominal.nominal_slots(r.graph))
    monkeypatch.setattr(down_offsets, "_may_stray", lambda *a: np.ones(len(a[-1]), bool))
    every = down_offsets.foreign_entries(r.graph, r.costs, r.dividers, r.dest, r.tables.ports,
                                         nominal.nominal_slots(r.graph))
    assert len(every[0]) > 0
    for a, b in zip(got, every, strict=True):
        assert np.array_equal(a, b)
