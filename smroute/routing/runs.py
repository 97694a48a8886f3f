"""Ragged runs of array positions, expanded without a Python loop."""

from __future__ import annotations

import numpy as np

__all__ = ["runs"]


def runs(first: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(which, at)`` int64: for every run ``i`` (``first`` / ``count``
    ``(K,)`` int64), its positions ``first[i] .. first[i] + count[i] - 1``,
    run after run; ``which`` names the run of each position."""
    which = np.repeat(np.arange(len(first)), count)
    return which, first[which] + np.arange(len(which)) - np.repeat(np.cumsum(count) - count,
                                                                     count)
