"""Integer keys for the redirects by load (:mod:`smroute.routing.nmodc.balance`):
ids of keys (by a table over their range where it is small, no sort), and
the partial pairs grouped by what their closer slots depend on."""

from __future__ import annotations

import numpy as np

from smroute.routing.kernel import dedupe_rows
from smroute.routing.runs import dense

__all__ = ["ids", "pair_keys"]


def ids(key: np.ndarray, counts: bool = False) -> np.ndarray:
    """``(R,)`` int64 for ``key`` ``(R,)`` int64 ``>= 0``: each element's
    index among the distinct values, sorted (``np.unique``'s inverse), or
    with ``counts`` how many elements equal it; by a table over the values'
    range where it is small, no sort."""
    top = int(key.max(initial=-1)) + 1
    if counts and top <= 64 * len(key) + (1 << 22):  # (a count table: cheap even sparse)
        return np.bincount(key, minlength=top)[key]
    if top > 16 * len(key) + (1 << 14):  # (a sort of R keys: cheaper than a sparse table)
        _, inv, n = np.unique(key, return_inverse=True, return_counts=True)
        return n[inv.ravel()] if counts else inv.ravel()
    if counts:
        return np.bincount(key, minlength=top)[key]
    return dense(key, top)[1]


def pair_keys(slot_ui: np.ndarray, siblings: np.ndarray, leaf_cost: np.ndarray, pb: np.ndarray,
              pt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first (K,), of (P,))``: the partial pairs (leaf ``pb``, target
    ``pt``, :class:`~smroute.routing.nmodc.balance.PartialPairs`) by key:
    leaves with the same slots (``slot_ui`` ``(B, M)``: the same upper
    switches in the same places) and sibling group, towards one target at
    the same cost (``leaf_cost`` ``(B, T)``).  A leaf's closer slots towards
    a target, and whether their upper switches route on, read nothing else,
    so a key's pairs share them (the leaves of a pod that lost an upper
    switch, towards every target): one pair of each key (indices into the
    pairs) and each pair's key.  Every pair is its own key where the leaves
    of a key differ in cost to its target."""
    n_p = len(pb)
    if not n_p:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    rows = np.ascontiguousarray(np.concatenate([slot_ui, siblings[:, None]], axis=1),
                                dtype=np.int64)
    sid = dedupe_rows(rows.view(np.uint8).reshape(len(rows), -1))[0]
    of = ids(sid[pb] * leaf_cost.shape[1] + pt)
    first = np.empty(int(of.max()) + 1, dtype=np.int64)
    first[of] = np.arange(n_p)  # (any pair of the key)
    cost = np.take(leaf_cost, pb * leaf_cost.shape[1] + pt)
    if not (cost == cost[first[of]]).all():
        return np.arange(n_p), np.arange(n_p)
    return first, of
