"""The routing-engine contract (smroute.routing.api), for every engine of
the registry and a dummy one that plugs in with a registry entry alone:

* Dmodc's exact tables on complete PGFTs, where an engine declares it;
* the incremental reroute equal to a full route after link, switch and CA
  faults and their repair (engines without a hook: the full route);
* the pool equal to the in-process route;
* tables that do not depend on the order the fabric lists its nodes;
* the commit gate: the daemon commits an engine's tables on a degraded
  tree, and refuses those that leave connected pairs unrouted;
* free of credit loops (the channel dependency graph, every VL);
* the registry's own rules (lab-only engines not offered to the daemon).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from test_nominal_routing import _nodes_shuffled

from smroute.errors import InputError, RoutingError
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import fabric_roles
from smroute.routing import api, dmodc, kernel
from smroute.routing.builtin import Dmodc
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.engine import RoutingResult, commit_gaps, route, validate_result
from smroute.routing.pool import RoutePool
from smroute.routing.reroute import IncrementalHook, reroute
from smroute.service.core import RoutingCore
from smroute.service.errors import ServiceError
from smroute.service.sequencer import FaultEvent
from smroute.tables.diff import diff_tables


def _mark_done(a: api.Arrays, part: np.ndarray | None) -> None:
    """The dummy's pass: a no-op over the table that checks it sees the kernel's
    rows (every switch row has some entry), whole or per part."""
    rows = np.arange(len(a["table"])) if part is None else part
    assert (a["table"][rows] != dmodc.NO_ROUTE).any(axis=1).all() or not len(rows)


class Dummy:
    """A minimal engine written against the interface alone: Dmodc's kernel
    (so it states Dmodc's tables), one pass with parallel parts, the generic
    incremental reroute.  Lives in this module: the pool's workers import it
    by reference."""

    name = "dummy"
    title = "Dummy"
    guarantees = api.Guarantees(closer_groups=True, incremental=True, dmodc_tables=True)
    incremental: IncrementalHook | None = IncrementalHook()
    pooled = True

    def prepare(self, g: Any, lmc: int | None, clock: Any, timings: dict[str, float],
                costs: np.ndarray | None = None) -> api.Prepared:
        c, pi = dmodc.costs_and_dividers(g) if costs is None else (costs, dmodc.dividers(g))
        nids = dmodc.topological_nids(g, c)
        timings["costs"] = timings["nids"] = 0.0
        return api.Prepared(g, c, pi, nids, dmodc.destinations(g, nids, lmc=lmc))

    def tables(self, fabric: Fabric, prep: api.Prepared, pool: api.Runner | None) -> np.ndarray:
        assert pool is not None
        return pool.run(self, prep)

    def arrays(self, prep: api.Prepared) -> api.Arrays:
        return api.base_arrays(prep)

    def kernel(self, a: api.Arrays, switches: np.ndarray, out: np.ndarray,
               cache: dict[str, Any]) -> None:
        if not cache:
            cache["g"], cache["dest"] = api.graph_from(a), api.dest_from(a)
        kernel.route_block(cache["g"], a["c"], a["pi"], cache["dest"], switches, out)

    def passes(self, prep: api.Prepared) -> Sequence[api.Pass]:
        n = prep.graph.n_switches
        return [api.Pass("check", _mark_done,
                         lambda k: [p for p in np.array_split(np.arange(n), k) if len(p)])]


@pytest.fixture(params=[*api.names(lab=True), Dummy.name])
def eng(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[api.Engine]:
    """Every registered engine, and the dummy with its registry entry."""
    if request.param == Dummy.name:
        monkeypatch.setitem(api.REGISTRY, Dummy.name, Dummy())
    yield api.engine(request.param)


COMPLETE = [(2, (4, 8), (1, 4), (1, 1)), (3, (2, 2, 3), (1, 2, 2), (1, 2, 1)),
            (3, (4, 4, 4), (1, 4, 4), (1, 1, 1))]


def _degraded(seed: int = 3, links: int = 10) -> Fabric:
    return degrade(pgft(3, [4, 4, 4], [1, 4, 4], [1, 1, 1]), np.random.default_rng(seed),
                   links=links)[0]


def _same(a: RoutingResult, b: RoutingResult) -> bool:
    return bool(np.array_equal(a.tables.ports, b.tables.ports))


def test_the_registry_offers_every_engine_but_the_lab_only_ones() -> None:
    assert api.names()[0] == api.DEFAULT
    assert set(api.names()) < set(api.names(lab=True))
    for name in api.names(lab=True):
        e = api.engine(name)
        assert e.name == name
        assert (name in api.names()) != e.guarantees.lab_only
        assert e.guarantees.incremental == (e.incremental is not None)
        assert not e.guarantees.trees_only or e.guarantees.lab_only or name == api.DEFAULT
    lab = [n for n in api.names(lab=True) if n not in api.names()]
    with pytest.raises(RoutingError, match="unknown algorithm"):
        api.engine(lab[0], lab=False)
    with pytest.raises(InputError, match="unknown algorithm"):
        RoutingCore(workers=1, algorithm=lab[0])


@pytest.mark.parametrize("shape", COMPLETE)
@pytest.mark.parametrize("lmc", [0, 1])
def test_dmodc_tables_on_complete_pgfts(eng: api.Engine, shape: tuple, lmc: int) -> None:
    if not eng.guarantees.dmodc_tables:
        pytest.skip(f"{eng.name} does not state Dmodc's tables")
    f = pgft(*shape, lmc=lmc)
    want = route(f, algorithm="dmodc", workers=1, lmc=lmc)
    got = route(f, algorithm=eng.name, workers=1, lmc=lmc)
    assert got.algorithm == eng.name and got.mode == "tree"
    assert _same(got, want)


def _fault_steps(f: Fabric) -> list[tuple[str, Fabric]]:
    """The fabric after a link fault, after a second one, repaired, after an
    upper switch's loss, repaired, after a CA's loss, repaired."""
    sw = f.node_type == NodeType.SWITCH
    inter = np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])
    links = np.random.default_rng(1).choice(inter, size=2, replace=False)
    upper = np.flatnonzero(sw & (fabric_roles(f).rank > 0))[1]
    ca = np.flatnonzero(f.node_type == NodeType.CA)[5]
    return [("link", f.with_removed(links=links[:1])), ("links", f.with_removed(links=links)),
            ("link repair", f), ("switch", f.with_removed(nodes=[upper])),
            ("switch repair", f), ("CA", f.with_removed(nodes=[ca])), ("CA repair", f)]


@pytest.mark.parametrize("complete", [True, False])
def test_incremental_reroute_equals_a_full_route(eng: api.Engine, complete: bool) -> None:
    f = pgft(3, [4, 4, 4], [1, 4, 4], [1, 1, 1]) if complete else _degraded()
    prev = route(f, algorithm=eng.name, workers=1, lmc=0)
    took = []
    for what, f2 in _fault_steps(f):
        r = reroute(prev, f2, lmc=0)
        full = route(f2, algorithm=eng.name, workers=1, lmc=0)
        assert _same(r.result, full), what
        assert diff_tables(prev.tables, full.tables).entries_changed == \
            r.diff.entries_changed, what
        took.append(r.incremental)
        prev = r.result
    # links: incremental where the engine has a hook; switch and CA sets change: full
    assert took[:3] == [eng.incremental is not None] * 3
    assert not any(took[3:])


def test_the_pool_equals_the_in_process_route(eng: api.Engine) -> None:
    f = _degraded(5, 20)
    with RoutePool(2) as pool:
        for fab in (f, pgft(2, [4, 8], [1, 4], [1, 1])):
            a = route(fab, algorithm=eng.name, pool=pool, lmc=0)
            b = route(fab, algorithm=eng.name, workers=1, lmc=0)
            assert _same(a, b)


def test_tables_do_not_depend_on_the_node_order(eng: api.Engine) -> None:
    f = _degraded(2, 30)
    other = _nodes_shuffled(f, 3)
    assert not np.array_equal(f.node_guid, other.node_guid)
    a = route(f, algorithm=eng.name, workers=1, labels=False, max_vls=4)
    b = route(other, algorithm=eng.name, workers=1, labels=False, max_vls=4)
    assert a.mode == b.mode and diff_tables(a.tables, b.tables).identical


@pytest.mark.parametrize("complete", [True, False])
def test_the_commit_gate(eng: api.Engine, complete: bool,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon commits the engine's tables where they route every pair
    the cables join (the validation walk says so), refuses them where they
    do not (D-mod-K on a degraded tree) and once a leaf's row is wiped."""
    offered = eng
    if eng.guarantees.lab_only:  # as if the daemon offered it
        cls = type("Offered", (type(eng),), {
            "name": "offered", "guarantees": dataclasses.replace(eng.guarantees,
                                                                 lab_only=False)})
        offered = cls()
        monkeypatch.setitem(api.REGISTRY, offered.name, offered)
    f = pgft(3, [4, 4, 4], [1, 4, 4], [1, 1, 1]) if complete else _degraded(4, 12)
    gaps = validate_result(route(f, algorithm=eng.name, workers=1)).ca_pairs_unroutable
    assert gaps == 0 or not eng.guarantees.closer_groups  # routed by construction
    core = RoutingCore(workers=1, coalesce_s=0.0, validate_epochs=False)
    try:
        core.load_fabric(f, "fabric")
        if gaps:
            with pytest.raises(ServiceError, match=f"leave {gaps} CA pairs"):
                core.route(offered.name)
            assert core.store.current is None
            return
        ep = core.route(offered.name)
        assert ep.algorithm == offered.name
        assert commit_gaps(ep.result) == 0 and validate_result(ep.result).ok
        # a wiped leaf row: the gate sees the pairs it leaves unrouted
        ports = ep.result.tables.ports.copy()
        leaf = int(np.flatnonzero(ep.result.graph.is_leaf)[0])
        ports[leaf] = dmodc.NO_ROUTE
        broken = dataclasses.replace(ep.result, tables=dataclasses.replace(
            ep.result.tables, ports=ports, _index={}))
        assert commit_gaps(broken) > 0
        out = core.apply_faults([FaultEvent("ca_down", int(f.node_guid[f.cas[0]]), 0)])
        assert out.committed and commit_gaps(out.epoch.result) == 0
    finally:
        core.close()


@pytest.mark.parametrize("vls", [1, 4])
def test_free_of_credit_loops(eng: api.Engine, vls: int) -> None:
    for f in (pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1]), _degraded(6, 40)):
        r = route(f, algorithm=eng.name, workers=1, max_vls=vls)
        ck = check_credit_loops(f, r.tables, r.lanes)
        assert ck.ok and not ck.cycle and ck.unfinished == 0, (eng.name, ck.summary())


def test_the_dummy_is_no_builtin_engine() -> None:
    """The dummy plugs in through its registry entry alone: without it the
    name is unknown everywhere."""
    assert Dummy.name not in api.names(lab=True)
    with pytest.raises(RoutingError):
        route(pgft(2, [2, 2], [1, 2], [1, 1]), algorithm=Dummy.name, workers=1)
    assert isinstance(api.engine("dmodc"), Dmodc)


def test_the_default_is_nmodc_everywhere_none_is_named() -> None:
    """One switch, api.DEFAULT: the routing, the daemon's settings and its
    config file's example route with Nmodc unless told otherwise."""
    from pathlib import Path

    from smroute.service.config import parse_config
    from smroute.service.settings import ServiceConfig

    assert api.DEFAULT == "nmodc" and api.names()[0] == "nmodc"
    assert route(pgft(2, [2, 4], [1, 2], [1, 1]), workers=1).algorithm == "nmodc"
    assert ServiceConfig().algorithm == "nmodc"
    yaml = Path(__file__).resolve().parent.parent / "deploy" / "smroute.yaml"
    assert parse_config(yaml.read_text(), str(yaml)).algorithm == "nmodc"
