"""The ragged-run helpers of :mod:`smroute.routing.runs` against their
definitions."""

from __future__ import annotations

import numpy as np
import pytest

from smroute.routing.runs import place_in_runs, runs, stable_order


@pytest.mark.parametrize("seed", range(5))
def test_place_in_runs_is_arange_less_searchsorted(seed: int) -> None:
    rng = np.random.default_rng(seed)
    v = np.sort(rng.integers(0, rng.integers(1, 50), rng.integers(0, 400)))
    np.testing.assert_array_equal(place_in_runs(v), np.arange(len(v)) - np.searchsorted(v, v))


@pytest.mark.parametrize("v", [[], [7], [3, 3, 3], [1, 2, 3], [0, 0, 1, 1, 1, 5]])
def test_place_in_runs_small(v: list[int]) -> None:
    a = np.asarray(v, dtype=np.int64)
    np.testing.assert_array_equal(place_in_runs(a), np.arange(len(a)) - np.searchsorted(a, a))


def test_runs_expands_each_run() -> None:
    which, at = runs(np.array([5, 0, 9]), np.array([2, 0, 3]))
    np.testing.assert_array_equal(which, [0, 0, 2, 2, 2])
    np.testing.assert_array_equal(at, [5, 6, 9, 10, 11])


@pytest.mark.parametrize("top", [1, 300, 1 << 16, (1 << 16) + 1, 1 << 40])
def test_stable_order_is_a_stable_argsort(top: int) -> None:
    rng = np.random.default_rng(top % 1000)
    v = rng.integers(0, top, 5000)
    np.testing.assert_array_equal(stable_order(v, top), np.argsort(v, kind="stable"))
