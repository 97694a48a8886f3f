"""A fabric that is no tree: every destination up*/down* towards every top
switch, and only the destinations some needed pair lacks a path to take
detours (``updown+detours``) or another orientation (``updown+orient``);
never one root for the whole fabric.

The fabrics: hosts on every top switch (so no tree), with login hosts on
the tops that need each other, on a PGFT, a director site (aggregation
nodes on every ASIC), a degraded PGFT and a 174-switch site shape with
director spines, where some destinations no orientation serves free of
credit loops on one VL (reported; detours over two VLs deliver them).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest

from smroute.fabric.generate.catalogue import build_shape, director_site
from smroute.fabric.generate.shapes import attach_cas, with_aggregation_nodes
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import fabric_roles
from smroute.routing import api, modes, orient
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.engine import (
    RoutingResult,
    commit_gaps,
    route,
    unrouted_connected,
    validate_result,
)
from smroute.routing.pool import RoutePool
from smroute.routing.topology import rooted_graph


def _logins_on_tops(f: Fabric, prefix: str) -> Fabric:
    """``f`` with a login host on every switch whose description starts
    with ``prefix`` (its top switches): no tree any more, and the logins'
    traffic to each other has no up*/down* path towards the tops."""
    tops = [i for i, d in enumerate(f.node_desc) if d.startswith(prefix)]
    return attach_cas(f, tops, [f"login{k:02d} HCA-1" for k in range(len(tops))])


def _pgft_tops() -> Fabric:
    return _logins_on_tops(pgft(2, (8, 8), (1, 4), (1, 1)), "pgft L2")


def _director_tops() -> Fabric:
    return _logins_on_tops(director_site(spine_hosts=0, line_hosts=4, remove_links=2, seed=0),
                           "pgft L3")


def _degraded_tops() -> Fabric:
    """Eight cables cut, aggregation nodes on every switch: only one of the
    two orders of :func:`~smroute.routing.orient.orient_each` serves every
    destination."""
    f = _logins_on_tops(pgft(3, (4, 4, 4), (1, 2, 2), (1, 1, 1)), "pgft L3")
    f, _ = degrade(f, np.random.default_rng(2), links=8)
    return with_aggregation_nodes(f)


def _site_tops() -> Fabric:
    """The 174-switch site shape (CS7500 directors, an aggregation node on
    every ASIC) with a login host on every director spine ASIC: their
    traffic to each other needs a down-up turn that closes credit loops
    with the other routes on one VL."""
    f = build_shape("edr-site-174sw")
    rank = fabric_roles(f).rank
    top = np.flatnonzero(rank == rank.max())
    return attach_cas(f, top, [f"login{k:02d} HCA-1" for k in range(len(top))])


FABRICS: dict[str, Callable[[], Fabric]] = {
    "pgft": _pgft_tops, "director": _director_tops, "degraded": _degraded_tops,
    "site": _site_tops}


def _all_roots_tables(f: Fabric, algorithm: str) -> np.ndarray:
    """The engine's tables of ``f`` up*/down* towards every top switch, no
    step of the mode chain applied."""
    roles = fabric_roles(f)
    g = rooted_graph(f, roles, roles.roots)
    eng = api.engine(algorithm)
    prep = eng.prepare(g, None, time.perf_counter, {})
    pool = RoutePool(1)
    try:
        return eng.tables(f, prep, pool)
    finally:
        pool.close()


def _served_kept(f: Fabric, r: RoutingResult, turned: np.ndarray) -> None:
    """Rooted at every top switch, never one; every destination not in
    ``turned`` ``(D,)`` bool keeps its all-roots column exactly."""
    roles = fabric_roles(f)
    assert len(roles.roots) > 1
    assert np.array_equal(r.graph.rank, rooted_graph(f, roles, roles.roots).rank)
    assert 0 < turned.sum() < len(turned)
    ref = _all_roots_tables(f, r.algorithm)
    keep = r.dest.lid[~turned]
    assert np.array_equal(r.tables.ports[:, keep], ref[:, keep])


@pytest.mark.parametrize("algorithm", ["dmodc", "nmodc"])
@pytest.mark.parametrize("name", ["pgft", "director", "degraded"])
def test_one_vl_orients_only_the_destinations_that_need_it(name: str, algorithm: str) -> None:
    """One VL: the destinations the logins need turn, every other column is
    the all-roots up*/down* routing's, every needed pair is delivered and
    the channel dependencies are acyclic."""
    f = FABRICS[name]()
    assert not fabric_roles(f).tree
    r = route(f, workers=1, algorithm=algorithm)
    assert r.mode == "updown+orient", r.mode_reason
    assert "towards the top switches" in r.mode_reason
    assert r.oriented is not None and int(r.oriented.sum()) == r.turn_lids
    _served_kept(f, r, r.oriented)
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unroutable == 0, v.summary()
    assert unrouted_connected(r) == 0
    ck = check_credit_loops(f, r.tables)
    assert ck.ok and ck.unfinished == 0 and ck.vls == 1, ck.summary()


@pytest.mark.parametrize("name", ["pgft", "director", "degraded", "site"])
def test_vls_take_detours_for_only_those_destinations(name: str) -> None:
    """Two VLs: those destinations take detours; the others keep their
    all-roots routes; delivered and free of credit loops over the lanes."""
    f = FABRICS[name]()
    r = route(f, workers=1, max_vls=2)
    assert r.mode == "updown+detours", r.mode_reason
    assert r.lanes is not None
    _served_kept(f, r, np.isin(r.dest.lid, r.lanes.lids))
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unroutable == 0, v.summary()
    ck = check_credit_loops(f, r.tables, lanes=r.lanes)
    assert ck.ok and ck.unfinished == 0, ck.summary()


def test_destinations_no_orientation_serves_are_reported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One VL on the site: the orientation and the anchors leave some
    destinations; only those are oriented again on top of the anchors'
    tables (backwards where no turn switch serves), and every needed pair
    is delivered free of credit loops. Without that search they keep their
    all-roots routes and the needed pairs they leave are reported
    (validation and commit gate), the others are served, and the tables
    stay free of credit loops."""
    f = _site_tops()
    r = route(f, workers=1)
    assert r.mode == "updown+orient", r.mode_reason
    assert "as the anchors left them" in r.mode_reason
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unroutable == 0, v.summary()
    assert check_credit_loops(f, r.tables).ok
    monkeypatch.setattr(orient, "search_turns", lambda *a: False)
    r = route(f, workers=1)
    assert r.mode == "updown+orient", r.mode_reason
    assert "no orientation serves free of credit loops keep their routes up*/down* towards " \
        "every top switch" in r.mode_reason
    assert r.oriented is not None
    _served_kept(f, r, r.oriented)
    v = validate_result(r)
    assert not v.ok and v.ca_pairs_unroutable > 0
    assert commit_gaps(r) == v.ca_pairs_unroutable
    assert check_credit_loops(f, r.tables).ok


@pytest.mark.parametrize(("vls", "mode"), [(1, "updown+orient"), (2, "updown+detours")])
def test_a_stored_epoch_of_the_new_modes_resumes(vls: int, mode: str) -> None:
    """Resume routes ``updown+orient`` and ``updown+detours`` again (their
    oriented destinations and lanes are not stored) and gets the stored
    tables: the result validates."""
    from smroute.service.epochs import own_tables
    from smroute.service.state.resume import rebuild_result

    f = _pgft_tops()
    r = own_tables(route(f, workers=1, max_vls=vls))
    assert r.mode == mode and modes.routed_again(r.mode, r.mode_reason)
    meta = {"algorithm": r.algorithm, "lmc_setting": "fabric", "mode": r.mode,
            "mode_reason": r.mode_reason, "turn_lids": r.turn_lids, "timings": {"x": 1.0}}
    b = rebuild_result(f, r.tables, meta, fabric_roles(f), None, vls)
    assert b.mode == mode
    if vls == 1:
        assert b.oriented is not None and np.array_equal(b.oriented, r.oriented)
    else:
        assert b.lanes is not None and r.lanes is not None
        assert np.array_equal(b.lanes.lids, r.lanes.lids)
    assert validate_result(b).ok
