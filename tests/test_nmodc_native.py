"""Nmodc's compiled steps (smroute/routing/native/nmodc.c: the nominal
kernel's ports, the upper switches' load) give the numpy code's results
(the reference), bit for bit: on degraded trees (links, switches, heavy
damage), with parallel cables, aggregation nodes, LMC > 0, a director
site, the fixtures; in process and in the pool.  Without the library the
numpy code runs."""

from __future__ import annotations

from pathlib import Path

import native_build
import numpy as np
import pytest

from smroute.fabric.generate.shapes import with_aggregation_nodes
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.ibnetdiscover.parse import read_fabric
from smroute.fabric.model.arrays import Fabric
from smroute.routing.engine import route
from smroute.routing.nmodc import balance, load, native, nominal

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The library scripts/setup.sh builds, compiled here from the same source."""
    out = native_build.build(tmp_path_factory.mktemp("nmodc"), native.SOURCE,
                             "libsmroute_nmodc.so", "-O3", "Nmodc steps")
    return native_build.loaded(native, out)


def _tree(links: int = 0, switches: int = 0, seed: int = 1, parallel: bool = False,
          agg: bool = False, lmc: int = 0) -> Fabric:
    f = (pgft(3, [6, 6, 12], [1, 3, 6], [1, 2, 1], lmc=lmc) if parallel
         else pgft(3, [6, 6, 12], [1, 6, 6], [1, 1, 1], lmc=lmc))
    if agg:
        f = with_aggregation_nodes(f)
    if links or switches:
        f = degrade(f, np.random.default_rng(seed), links=links, switches=switches)[0]
    return f


def _counted(step, calls: list[str]):  # type: ignore[no-untyped-def]
    """``step``, noting each call in ``calls``."""
    def run(*args, **kw):  # type: ignore[no-untyped-def]
        calls.append(step.__name__)
        return step(*args, **kw)
    return run


def _same(fabric: Fabric, lib, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
          workers: int = 1) -> int:
    """Nmodc's tables with the library and without are equal; returns how
    many times the compiled kernel and redirect steps ran."""
    monkeypatch.setattr(native, "library", lambda path=None: None)
    ref = route(fabric, algorithm="nmodc", workers=1, labels=False)
    monkeypatch.setattr(native, "library", lambda path=None: lib)
    calls: list[str] = []
    for name in ("nominal_ports", "pattern_keys", "up_load", "place", "first_slots"):
        monkeypatch.setattr(native, name, _counted(getattr(native, name), calls))
    got = route(fabric, algorithm="nmodc", workers=workers, labels=False)
    assert got.mode == ref.mode
    assert np.array_equal(got.tables.ports, ref.tables.ports)
    return len(calls)


@pytest.mark.parametrize("case", [
    dict(links=30), dict(links=30, seed=2), dict(switches=3), dict(switches=2, links=20),
    dict(links=150, seed=3), dict(links=25, parallel=True), dict(links=25, agg=True),
    dict(links=25, lmc=1)], ids=str)
def test_degraded_trees(lib, monkeypatch: pytest.MonkeyPatch, case: dict) -> None:  # type: ignore[no-untyped-def]
    assert _same(_tree(**case), lib, monkeypatch) > 0  # the compiled steps ran


def test_complete_tree_needs_no_compiled_step(lib, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A complete tree routes as Dmodc: the same tables, no nominal step."""
    assert _same(_tree(), lib, monkeypatch) == 0


@pytest.mark.parametrize("path", sorted((ROOT / "fixtures").glob("*.topo")), ids=lambda p: p.name)
def test_fixtures(lib, monkeypatch: pytest.MonkeyPatch, path: Path) -> None:  # type: ignore[no-untyped-def]
    _same(read_fabric(path), lib, monkeypatch)


def test_director_site(lib, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Few leaves under a large director (the redirect divider of the
    end-ports), one leaf cable lost."""
    from test_nmodc_redirects import _director_site  # a fixture fabric of that module

    f, cut = _director_site()
    assert _same(f.with_removed(links=[cut]), lib, monkeypatch) > 0


def test_in_the_pool(lib) -> None:  # type: ignore[no-untyped-def]
    """The workers load the library scripts/setup.sh built (or none): their
    tables equal the numpy reference in process."""
    f = _tree(links=40, switches=1, seed=5)
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(native, "library", lambda path=None: None)
        ref = route(f, algorithm="nmodc", workers=1, labels=False)
    finally:
        mp.undo()
    got = route(f, algorithm="nmodc", workers=2, labels=False)
    assert np.array_equal(got.tables.ports, ref.tables.ports)


def test_load_compiled_and_numpy_agree(lib, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The upper switches' egress load, counted in C and in numpy, on the
    kernel's tables of a damaged tree."""
    monkeypatch.setattr(native, "library", lambda path=None: lib)
    for case in (dict(links=60), dict(switches=2, links=10, seed=4),
                 dict(links=30, parallel=True)):
        res = route(_tree(**case), algorithm="nmodc", workers=1, labels=False)
        g, slots = res.graph, nominal.nominal_slots(res.graph)
        pr = balance.partial_pairs(g, res.costs, res.dest, slots)
        table = np.ascontiguousarray(res.tables.ports)
        got = load.nominal_load(res.dividers, res.dest, table, slots, pr)
        want = load.nominal_load(res.dividers, res.dest, table, slots, pr, compiled=False)
        assert got.sum() > 0 and np.array_equal(got, want)
        # some upper switches' links alone: theirs as in the whole count, the others 0
        used = np.arange(len(pr.ups)) % 3 == 1
        for compiled in (True, False):
            part = load.nominal_load(res.dividers, res.dest, table, slots, pr, used,
                                     compiled=compiled).reshape(-1, 256)
            assert np.array_equal(part[used], want.reshape(-1, 256)[used])
            assert not part[~used].any()


def test_without_the_library_numpy_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """No library: the steps say so and Nmodc routes with numpy alone."""
    monkeypatch.setattr(native, "library", lambda path=None: None)
    out = np.zeros((1, 4), dtype=np.uint8)
    assert native.up_load(*(np.zeros(1, np.int64),) * 2, np.zeros((1, 1), np.int64),
                          np.ones((1, 1), bool), *(np.zeros(1, np.int64),) * 3, out) is None
    res = route(_tree(links=30), algorithm="nmodc", workers=1, labels=False)
    assert res.mode == "tree"


def test_stale_or_another_library_is_not_used(lib, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    native_build.refuses_stale_and_foreign(native, lib, tmp_path)


def test_components_compiled_and_numpy_agree(lib, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Connected components by union-find give fabric.graph's labels (the
    smallest node of each component) on random graphs and a tree's up links;
    an edge outside the nodes falls back to the reference (its error)."""
    from smroute.fabric import graph

    monkeypatch.setattr(native, "library", lambda path=None: lib)
    rng = np.random.default_rng(0)
    for n, m in ((1, 0), (10, 0), (500, 300), (3000, 9000)):
        for _ in range(5):
            a, b = rng.integers(0, n, m), rng.integers(0, n, m)
            assert np.array_equal(native.components(n, a, b), graph.components(n, a, b))
    res = route(_tree(links=30), algorithm="nmodc", workers=1, labels=False)
    lo, hi = res.graph.up_pairs()
    n = res.graph.n_switches
    assert np.array_equal(native.components(2 * n, lo, hi + n),
                          graph.components(2 * n, lo, hi + n))
    with pytest.raises(IndexError):
        native.components(3, np.array([0]), np.array([3]))
