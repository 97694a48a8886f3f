"""The compiled validation walk gives the numpy walk's results (the
reference): status everywhere, hop counts where delivered (and the same
hops elsewhere too), on routed fabrics and on tables broken at random
(dead ends, loops, up*/down* violations, detour columns, a short hop bound)."""

from __future__ import annotations

import native_build
import numpy as np
import pytest

from smroute.fabric.generate.trees import degrade, pgft
from smroute.routing import walk_native
from smroute.routing.engine import route
from smroute.routing.topology import next_switch
from smroute.routing.validate import walk
from smroute.tables.lft import NO_ROUTE


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The library scripts/setup.sh builds, compiled here from the same source."""
    out = native_build.build(tmp_path_factory.mktemp("walk"), walk_native.SOURCE,
                             "libsmroute_walk.so", "-O2", "walk")
    return native_build.loaded(walk_native, out)


def _both(res, ports: np.ndarray, lib, turns=None, max_hops=None) -> None:  # type: ignore[no-untyped-def]
    g, dest = res.walk_graph, res.dest
    ref_st, ref_hp = walk(g, ports, dest, native=False, turns=turns, max_hops=max_hops)
    nxt = next_switch(g)
    nxt = np.pad(nxt, ((0, 0), (0, 256 - nxt.shape[1])), constant_values=-1)
    hops_bound = 2 * max(g.max_rank, 0) + 2 if max_hops is None else max_hops
    chunks = walk_native.native_walk(ports, dest.lid, dest.target, dest.local_port, nxt,
                                     g.rank, turns, hops_bound, chunk=100, lib=lib)
    assert chunks is not None
    st = np.empty_like(ref_st)
    hp = np.empty_like(ref_hp)
    for sl, s, h in chunks:
        st[:, sl], hp[:, sl] = s, h
    assert np.array_equal(st, ref_st)
    assert np.array_equal(hp, ref_hp)
    return None


@pytest.mark.parametrize("degraded", [False, True])
def test_routed_tables(lib, degraded: bool) -> None:  # type: ignore[no-untyped-def]
    fabric = pgft(3, [4, 4, 6], [1, 4, 4], [1, 1, 1])
    if degraded:
        fabric, _ = degrade(fabric, np.random.default_rng(5), links=12)
    res = route(fabric, workers=1)
    _both(res, res.tables.ports, lib)


@pytest.mark.parametrize("seed", range(6))
def test_broken_tables(lib, seed: int) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    fabric = pgft(3, [3, 3, 4], [1, 3, 3], [1, 1, 1])
    res = route(fabric, workers=1)
    ports = res.tables.ports.copy()
    n_sw = ports.shape[0]
    # every switch's ports, shuffled into a share of the entries: loops, wrong turns
    sel = rng.random(ports.shape) < (0.05 + 0.1 * seed)
    ports[sel] = rng.integers(1, int(fabric.num_ports.max()) + 1, size=int(sel.sum()))
    ports[rng.random(ports.shape) < 0.02] = NO_ROUTE
    assert n_sw > 0
    _both(res, ports, lib)
    turns = rng.random(len(res.dest.lid)) < 0.3
    _both(res, ports, lib, turns=turns)
    _both(res, ports, lib, max_hops=2)
    _both(res, ports, lib, turns=turns, max_hops=1)


def test_validate_uses_it_when_built(lib, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """``native=True`` fails without the library and walks with it."""
    res = route(pgft(2, [4, 4], [1, 2], [1, 1]), workers=1)
    g = res.walk_graph
    monkeypatch.setattr(walk_native, "library", lambda path=None: None)
    with pytest.raises(RuntimeError, match="not built"):
        walk(g, res.tables.ports, res.dest, native=True)
    monkeypatch.setattr(walk_native, "library", lambda path=None: lib)
    a = walk(g, res.tables.ports, res.dest, native=True)
    b = walk(g, res.tables.ports, res.dest, native=False)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
