"""Nmodc's descent (smroute/routing/nmodc/descent.py): where the low digit
sends every arrival of a target down one link, each takes the child its own
up-route came from."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from smroute.analysis import patterns as P
from smroute.analysis.congestion import evaluate
from smroute.analysis.paths import pair_paths, routing_view
from smroute.fabric.generate.sitegen import QUANTUM, Site
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.ibnetdiscover.parse import read_fabric
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import fabric_roles
from smroute.routing import api
from smroute.routing.engine import route, validate_result
from smroute.routing.nmodc import descent, engine
from smroute.routing.nmodc.as_dmodc import AsDmodc
from smroute.routing.reroute import reroute
from smroute.routing.topology import switch_graph

REAL = Path(__file__).resolve().parents[2] / "shared" / "fabrics" / "real"


def pods_under_directors(pods: tuple[int, ...] = (6, 6, 6, 4), hosts: int = 8,
                         spines: int = 8, directors: int = 2, line: int = 8,
                         spine_asics: int = 4, cables: int = 2, radix: int = 40,
                         seed: int = 5) -> Fabric:
    """Unequal pods (leaves of ``hosts`` hosts, ``spines`` spines each)
    under directors whose line ASICs take the spines' cables round-robin:
    the spines of every ``line / cables``-th column share line ASICs."""
    site = Site()
    groups = []
    for p, n in enumerate(pods):
        leaves = site.switches([f"MF0;p{p}-leaf{i}:MQM8790/U1" for i in range(n)], radix,
                               QUANTUM)
        for i, leaf in enumerate(leaves):
            for h in range(hosts):
                site.host(leaf, f"cn-p{p}-l{i}-h{h} HCA-1")
        sp = site.switches([f"MF0;p{p}-spine{j}:MQM8790/U1" for j in range(spines)], radix,
                           QUANTUM)
        for leaf in leaves:
            for s in sp:
                site.cable(leaf, s)
        groups.append(sp)
    dirs = [site.director(f"core{k}", "CS8500", line_asics=line, spine_asics=spine_asics,
                          radix=radix, device=QUANTUM) for k in range(directors)]
    for sp in groups:
        for s in sp:
            for d in dirs:
                site.cable_director(s, d, cables)
    return site.build(np.random.default_rng(seed))


def keys_of(f: Fabric) -> np.ndarray:
    g = switch_graph(f, fabric_roles(f))
    prep = api.engine("nmodc").prepare(g, None, time.monotonic, {})
    assert not isinstance(prep.aux, AsDmodc)
    return descent.descent_keys(g, prep.costs, prep.aux, prep.dividers, prep.dest)


def shift_hsd(f: Fabric, tables) -> tuple[int, float]:  # type: ignore[no-untyped-def]
    view = routing_view(f, tables)
    paths = pair_paths(view)
    o = np.argsort(view.ep_guid, kind="stable")
    sp = evaluate(view, paths, P.cps("shift", len(o)), o)
    assert sp.total_unroutable == 0
    return sp.risk_max, sp.hsd_avg


def test_strided_arrivals_take_their_own_up_routes_down(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    f = pods_under_directors()
    assert len(keys_of(f))
    with_it = route(f, workers=1, labels=False)
    assert with_it.mode == "tree"
    assert validate_result(with_it).ok
    sp, hsd = shift_hsd(f, with_it.tables)
    monkeypatch.setattr(engine, "descent_keys", lambda *a: np.zeros(0, dtype=np.int64))
    without = route(f, workers=1, labels=False)
    sp0, hsd0 = shift_hsd(f, without.tables)
    dm = shift_hsd(f, route(f, workers=1, labels=False, algorithm="dmodc").tables)
    # the low digit sent every arrival of a pod down one spine
    assert (sp, hsd) < (sp0, hsd0)
    assert sp <= dm[0] and hsd <= dm[1] + 1e-9


@pytest.mark.parametrize("shape", [
    {"pods": (9, 9, 9, 9), "spines": 16, "directors": 4},
    {"pods": (10, 10, 10, 8), "spines": 16, "line": 16, "spine_asics": 16, "radix": 64},
    {"pods": (8, 8, 6), "line": 16, "cables": 4, "spine_asics": 16, "radix": 64},
    {"pods": (16, 16, 12), "hosts": 16, "spines": 16, "line": 32, "cables": 4,
     "spine_asics": 16, "radix": 64},
    {"pods": (4, 4, 3), "spines": 6, "line": 6},  # no strided columns: nothing to do
])
def test_other_sizes_are_no_worse(shape: dict[str, object],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    f = pods_under_directors(**shape)  # type: ignore[arg-type]
    res = route(f, workers=1, labels=False)
    assert validate_result(res).ok
    ours = shift_hsd(f, res.tables)
    dm = shift_hsd(f, route(f, workers=1, labels=False, algorithm="dmodc").tables)
    monkeypatch.setattr(engine, "descent_keys", lambda *a: np.zeros(0, dtype=np.int64))
    before = shift_hsd(f, route(f, workers=1, labels=False).tables)
    assert ours[0] <= min(dm[0], before[0])
    assert ours[1] <= min(dm[1], before[1]) + 1e-9


def test_trees_without_shared_children_have_no_descent() -> None:
    f = degrade(pgft(3, (6, 6, 12), (1, 6, 6), (1, 1, 1)), np.random.default_rng(2),
                links=20)[0]
    assert not len(keys_of(f))
    selene = REAL / "Mellanox-ufm_sdk_3.0-selene.storage.txt"
    if selene.exists():  # the low digit spreads its cores' arrivals: nothing changes
        assert not len(keys_of(read_fabric(selene)))


def test_a_reroute_equals_a_full_route() -> None:
    f0 = pods_under_directors()
    sw = f0.node_type == NodeType.SWITCH
    inter = np.flatnonzero(sw[f0.port_node[f0.link_a]] & sw[f0.port_node[f0.link_b]])
    prev = route(f0, workers=1)
    for k in np.random.default_rng(3).choice(len(inter), size=6, replace=False).tolist():
        f1 = f0.with_removed(links=[inter[k]])
        rr = reroute(prev, f1, lmc=None)
        assert rr.incremental
        full = route(f1, workers=1)
        assert np.array_equal(rr.result.tables.ports, full.tables.ports), k
        prev = rr.result


def test_the_pool_gives_the_same_descent() -> None:
    from smroute.routing.pool import RoutePool

    f = pods_under_directors()
    one = route(f, workers=1, labels=False)
    with RoutePool(2) as pool:
        two = route(f, pool=pool, labels=False)
    assert np.array_equal(one.tables.ports, two.tables.ports)
