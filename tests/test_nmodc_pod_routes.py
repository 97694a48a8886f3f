"""Nmodc's routes inside a pod that lost an upper switch
(smroute/routing/nmodc/pod_routes.py): the pod's leaves take Dmodc's entries
towards the hosts of their own pod."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from smroute.analysis import patterns as P
from smroute.analysis.congestion import evaluate
from smroute.analysis.paths import pair_paths, routing_view
from smroute.fabric.model.arrays import Fabric
from smroute.routing.api import Prepared
from smroute.routing.engine import RoutingResult, route, validate_result
from smroute.routing.nmodc import engine, pod_routes
from smroute.routing.nmodc.incremental import slots_of
from smroute.routing.reroute import reroute
from smroute.routing.topology import switch_graph
from smroute.study.degrade import parse_pgft

SPEC = "3;6,6,6;1,6,6;1,1,1"  # 216 hosts, 6 pods of 6 leaves and 6 L2 switches


@pytest.fixture(scope="module")
def full() -> Fabric:
    return parse_pgft(SPEC).build()


def node(f: Fabric, desc: str) -> int:
    return next(i for i, d in enumerate(f.node_desc) if d == desc)


def without(f: Fabric, *descs: str) -> Fabric:
    return f.with_removed(nodes=[node(f, d) for d in descs])


def links_between(f: Fabric, a: str, b: str) -> list[int]:
    na, nb = node(f, a), node(f, b)
    ends = np.stack([f.port_node[f.link_a], f.port_node[f.link_b]], axis=1)
    return np.flatnonzero(((ends[:, 0] == na) & (ends[:, 1] == nb))
                          | ((ends[:, 0] == nb) & (ends[:, 1] == na))).tolist()


@pytest.fixture()
def no_pod_routes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Nmodc as it routes without this module."""
    monkeypatch.setattr(engine, "pod_routes", lambda *a, **k: a[4])
    yield


def nmodc(f: Fabric) -> RoutingResult:
    return route(f, algorithm="nmodc", workers=1, labels=False)


def pod_hosts(f: Fabric, res: RoutingResult, pod: str) -> np.ndarray:
    """The hosts under the leaves ``pgft L1 <pod>.*``, in Dmodc's topological
    order (end-port indices of the routing view)."""
    view = routing_view(f, res.tables)
    order = P.topological_order_from(view, res.graph.ep_row, res.nids)
    leaf = np.array([f.node_desc[view.sw_node[s]] for s in view.ep_leaf[order]])
    return order[np.char.startswith(leaf, f"pgft L1 {pod}.")]


def stage_loads(f: Fabric, res: RoutingResult, hosts: np.ndarray) -> dict[str, np.ndarray]:
    view = routing_view(f, res.tables)
    paths = pair_paths(view)
    return {c: evaluate(view, paths, P.cps(c, len(hosts)), hosts).max_flows
            for c in ("recursive-doubling", "recursive-halving", "dissemination", "shift")}


def test_a_power_of_two_exchange_in_the_pod_loads_no_link_above_dmodc(full: Fabric) -> None:
    """The hosts of the pod that lost an L2 switch exchange at power-of-two
    distances (and shift) in topological order: no stage loads a link more
    than under Dmodc's tables (without the pod routes, recursive doubling
    puts 3 flows on a link where Dmodc has 2)."""
    fab = without(full, "pgft L2 1.2.0")
    d = route(fab, algorithm="dmodc", workers=1, labels=False)
    hosts = pod_hosts(fab, d, "1")
    assert len(hosts) == 36
    mine, ref = stage_loads(fab, nmodc(fab), hosts), stage_loads(fab, d, hosts)
    for c, loads in mine.items():
        assert (loads <= ref[c]).all(), (c, loads, ref[c])


def test_the_exchange_is_worse_without_the_pod_routes(full: Fabric,
                                                      no_pod_routes: None) -> None:
    """(The test above fails without this module.)"""
    fab = without(full, "pgft L2 1.2.0")
    d = route(fab, algorithm="dmodc", workers=1, labels=False)
    hosts = pod_hosts(fab, d, "1")
    mine, ref = stage_loads(fab, nmodc(fab), hosts), stage_loads(fab, d, hosts)
    assert (mine["recursive-doubling"] > ref["recursive-doubling"]).any()


def test_only_the_pod_leaves_entries_towards_their_pod_change(
        full: Fabric, monkeypatch: pytest.MonkeyPatch) -> None:
    """The leaves of the pod that lost an upper switch take Dmodc's entries
    towards the pod's other leaves (their hosts and switch LIDs); every other entry is the
    one Nmodc gives without this module; the tables validate."""
    fab = without(full, "pgft L2 1.2.0")
    res = nmodc(fab)
    validate_result(res)
    d = route(fab, algorithm="dmodc", workers=1, labels=False)
    with monkeypatch.context() as m:
        m.setattr(engine, "pod_routes", lambda *a, **k: a[4])
        before = nmodc(fab)
    g = switch_graph(fab)
    leaves = pod_routes.pod_leaves(g, slots_of(_prep(fab)))
    assert sorted(fab.node_desc[g.sw_node[s]] for s in leaves) == [
        f"pgft L1 1.{i}.0" for i in range(6)]
    view = routing_view(fab, res.tables)
    in_pod = np.char.startswith(
        np.array([fab.node_desc[view.sw_node[s]] for s in view.ep_leaf]), "pgft L1 1.")
    changed = np.zeros_like(res.tables.ports, dtype=bool)
    for s in leaves.tolist():
        row = res.tables.row_of(int(g.sw_guid[s]))
        mine = in_pod & (view.ep_leaf != int(np.flatnonzero(view.sw_guid == g.sw_guid[s])[0]))
        # the hosts and the switch LIDs of the pod's other leaves
        lids = np.concatenate([view.ep_lid[mine], g.sw_lid[np.setdiff1d(leaves, [s])]])
        assert (res.tables.ports[row, lids] == d.tables.ports[row, lids]).all()
        changed[row, lids] = True
    assert (res.tables.ports[~changed] == before.tables.ports[~changed]).all()
    assert not np.array_equal(res.tables.ports, before.tables.ports)


def _prep(fab: Fabric) -> Prepared:
    return engine.Nmodc().prepare(switch_graph(fab), None, lambda: 0.0, {})


def test_a_pod_that_lost_two_upper_switches_and_a_complete_tree_are_left_alone(
        full: Fabric, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pod that lost two L2 switches routes over its own survivors
    (``x mod 4``, Dmodc's rule already): no pod leaves, the same tables."""
    fab = without(full, "pgft L2 1.2.0", "pgft L2 1.4.0")
    assert not len(pod_routes.pod_leaves(switch_graph(fab), slots_of(_prep(fab))))
    res = nmodc(fab)
    with monkeypatch.context() as m:
        m.setattr(engine, "pod_routes", lambda *a, **k: a[4])
        assert np.array_equal(res.tables.ports, nmodc(fab).tables.ports)
    d = route(full, algorithm="dmodc", workers=1, labels=False)
    assert np.array_equal(nmodc(full).tables.ports, d.tables.ports)


def test_a_reroute_equals_a_full_route(full: Fabric) -> None:
    """Incremental reroutes of a tree whose pod lost an L2 switch: a link
    inside the pod, an up-link of one of its L2 switches, a link of another
    pod, and back (a switch removed or added is a full route)."""
    f1 = without(full, "pgft L2 1.2.0")
    f2 = f1.with_removed(links=links_between(f1, "pgft L2 1.3.0", "pgft L1 1.4.0"))
    f3 = f2.with_removed(links=links_between(f2, "pgft L2 1.3.0", "pgft L3 0.3.0"))
    f4 = f3.with_removed(links=links_between(f3, "pgft L2 2.4.0", "pgft L1 2.1.0"))
    assert f1.n_links > f2.n_links > f3.n_links > f4.n_links
    prev = nmodc(f1)
    for f in (f2, f3, f4, f3, f1):
        rr = reroute(prev, f, lmc=None)
        assert rr.incremental
        assert np.array_equal(rr.result.tables.ports, nmodc(f).tables.ports)
        prev = rr.result


def test_the_pool_gives_the_same_tables(full: Fabric) -> None:
    """The pass runs in parts of whole sibling groups in the pool's workers:
    the same tables as in one process."""
    from smroute.routing.pool import RoutePool

    fab = without(full, "pgft L2 1.2.0", "pgft L2 3.5.0", "pgft L3 2.0.0")
    one = nmodc(fab)
    with RoutePool(2) as pool:
        two = route(fab, algorithm="nmodc", pool=pool, labels=False)
    assert np.array_equal(one.tables.ports, two.tables.ports)
