"""The compiled routing kernel gives the numpy kernel's tables (the
reference), bit for bit: on complete and degraded trees, with aggregation
nodes, parallel cables, LMC > 0, switches of more than 64 port groups, the
fixtures (irregular fabrics routed through orientations and detours, which
reuse the kernel) and the real captures; blocks of 1, 7 and 64 switches,
with the targets collapsed into classes or not."""

from __future__ import annotations

from pathlib import Path

import native_build
import numpy as np
import pytest

from smroute.errors import SmrouteError
from smroute.fabric.generate.shapes import with_aggregation_nodes
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.ibnetdiscover.parse import read_fabric
from smroute.fabric.model.arrays import Fabric
from smroute.routing import kernel, kernel_native
from smroute.routing.engine import route

ROOT = Path(__file__).resolve().parents[1]
REAL = Path("/work/shared/fabrics/real")


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The library scripts/setup.sh builds, compiled here from the same source."""
    out = native_build.build(tmp_path_factory.mktemp("kernel"), kernel_native.SOURCE,
                             "libsmroute_kernel.so", "-O3", "kernel")
    return native_build.loaded(kernel_native, out)


def _blocks(res, native: bool, block: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Every row of ``res``'s graph through :func:`kernel.route_block`."""
    g, dest = res.graph, res.dest
    ctx = kernel.route_context(res.costs, dest)
    out = np.empty((g.n_switches, dest.max_lid + 1), dtype=np.uint8)
    for i in range(0, g.n_switches, block):
        sw = np.arange(i, min(i + block, g.n_switches))
        kernel.route_block(g, res.costs, res.dividers, dest, sw, out[i:i + len(sw)], ctx,
                           native=native)
    return out


def _same(fabric: Fabric, lib, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
          lmc: int | None = None) -> None:
    """Whole routings (every engine step that reuses the kernel) and the
    kernel's blocks, compiled and numpy, are equal."""
    monkeypatch.setattr(kernel_native, "library", lambda path=None: None)
    ref = route(fabric, workers=1, lmc=lmc, labels=False)
    monkeypatch.setattr(kernel_native, "library", lambda path=None: lib)
    got = route(fabric, workers=1, lmc=lmc, labels=False)
    assert got.mode == ref.mode
    assert np.array_equal(got.tables.ports, ref.tables.ports)
    for block in (1, 7, 64):
        want = _blocks(ref, False, block)
        # targets collapsed into classes in every block, in none, as by default
        for collapse in (0, 10**9, kernel_native.COLLAPSE):
            monkeypatch.setattr(kernel_native, "COLLAPSE", collapse)
            assert np.array_equal(_blocks(ref, True, block), want)


@pytest.mark.parametrize("case", ["complete", "degraded", "agg", "parallel", "lmc2",
                                  "wide", "degraded-parallel"])
def test_generated(lib, monkeypatch: pytest.MonkeyPatch, case: str) -> None:  # type: ignore[no-untyped-def]
    fabric = {
        "complete": lambda: pgft(3, [4, 4, 6], [1, 4, 4], [1, 1, 1]),
        "degraded": lambda: degrade(pgft(3, [4, 4, 6], [1, 4, 4], [1, 1, 1]),
                                    np.random.default_rng(3), links=15)[0],
        "agg": lambda: with_aggregation_nodes(pgft(3, [4, 4, 6], [1, 4, 4], [1, 1, 1])),
        "parallel": lambda: pgft(3, [4, 4, 6], [1, 2, 4], [1, 2, 1]),
        "lmc2": lambda: pgft(2, [4, 6], [1, 3], [1, 1], lmc=2),
        # spines of 80 port groups: masks of two words
        "wide": lambda: pgft(2, [3, 80], [1, 2], [1, 1]),
        "degraded-parallel": lambda: degrade(pgft(3, [4, 4, 6], [1, 2, 4], [1, 2, 1]),
                                             np.random.default_rng(7), links=10)[0],
    }[case]()
    _same(fabric, lib, monkeypatch)


@pytest.mark.parametrize("path", sorted((ROOT / "fixtures").glob("*.topo")), ids=lambda p: p.name)
def test_fixtures(lib, monkeypatch: pytest.MonkeyPatch, path: Path) -> None:  # type: ignore[no-untyped-def]
    _same(read_fabric(path), lib, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(REAL.glob("*")) if REAL.is_dir() else [],
                         ids=lambda p: p.name)
def test_real_captures(lib, monkeypatch: pytest.MonkeyPatch, path: Path) -> None:  # type: ignore[no-untyped-def]
    if path.suffix == ".md":
        pytest.skip("not a capture")
    try:
        fabric = read_fabric(path)
        monkeypatch.setattr(kernel_native, "library", lambda path=None: None)
        route(fabric, workers=1, labels=False)
    except SmrouteError as e:
        pytest.skip(f"not routable: {e}")
    _same(fabric, lib, monkeypatch)


def test_native_true_needs_the_library(lib, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """``native=True`` fails without the library and routes with it."""
    res = route(pgft(2, [4, 4], [1, 2], [1, 1]), workers=1, labels=False)
    monkeypatch.setattr(kernel_native, "library", lambda path=None: None)
    with pytest.raises(RuntimeError, match="not built"):
        _blocks(res, True, 64)
    monkeypatch.setattr(kernel_native, "library", lambda path=None: lib)
    assert np.array_equal(_blocks(res, True, 64), res.tables.ports)


def test_stale_or_another_library_is_not_used(lib, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    native_build.refuses_stale_and_foreign(kernel_native, lib, tmp_path)
