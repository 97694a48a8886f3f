"""Small graph helpers over edge arrays, shared by ranking, summary and analysis."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["bfs_distance", "components", "first_per_group", "shared_neighbours"]


def bfs_distance(
    n: int, src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64], seeds: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """BFS hop distance from ``seeds`` over directed edges ``src -> dst``.

    ``src``/``dst``: ``(E,)`` node ids in ``0 .. n-1`` (give both directions
    for an undirected graph); ``seeds``: node ids or an ``(n,)`` bool mask.
    Returns ``(n,)`` int64, -1 where unreachable.  One vectorized pass over
    the edges per BFS level.
    """
    dist = np.full(n, -1, dtype=np.int64)
    frontier = np.zeros(n, dtype=bool)
    frontier[np.asarray(seeds)] = True
    dist[frontier] = 0
    d = 0
    while frontier.any():
        d += 1
        nxt = dst[frontier[src]]
        nxt = nxt[dist[nxt] < 0]
        dist[nxt] = d
        frontier = np.zeros(n, dtype=bool)
        frontier[nxt] = True
    return dist


def components(n_nodes: int, a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Connected-component label per node (the smallest node index in its
    component) for an undirected graph given as edge arrays ``a``, ``b``.

    Min-label propagation with pointer jumping; each round is vectorized.
    """
    ea = np.asarray(a, dtype=np.int64)
    eb = np.asarray(b, dtype=np.int64)
    labels = np.arange(n_nodes, dtype=np.int64)
    if ea.size == 0:
        return labels
    while True:
        lo = np.minimum(labels[ea], labels[eb])
        new = labels.copy()
        # hook: each endpoint's root takes the smaller label of the edge
        np.minimum.at(new, labels[ea], lo)
        np.minimum.at(new, labels[eb], lo)
        np.minimum.at(new, ea, lo)
        np.minimum.at(new, eb, lo)
        # pointer jumping until labels are roots
        while True:
            jumped = new[new]
            if np.array_equal(jumped, new):
                break
            new = jumped
        if np.array_equal(new, labels):
            return labels
        labels = new


def first_per_group(order: npt.NDArray[np.int64],
                    labels: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The first element of each group in ``order`` ``(K,)`` (indices sorted
    with the group label as the primary key, e.g. by ``np.lexsort``), where
    ``labels`` ``(K,)`` are the group labels of ``order``'s elements, in
    ``order``'s order: ``(G,)`` int64, one per group."""
    first = np.ones(len(order), dtype=bool)
    first[1:] = labels[1:] != labels[:-1]
    return order[first]


def shared_neighbours(n: int, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64],
                      rows: npt.NDArray[np.int64], cols: npt.NDArray[np.int64]
                      ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For each node of ``rows`` ``(R,)`` in the undirected graph of edges
    ``a``-``b`` over nodes ``0 .. n-1``: the most distinct neighbours it
    shares with one node of ``cols`` ``(C,)`` (0 if ``cols`` is empty), and
    its number of distinct neighbours; ``(R,)`` int64 each."""
    used = np.unique(np.concatenate([a, b, rows, cols]))
    at = np.searchsorted(used, np.arange(n)).clip(max=max(len(used) - 1, 0))
    adj = np.zeros((len(used), len(used)), dtype=np.int32)
    adj[at[a], at[b]] = adj[at[b], at[a]] = 1
    r = adj[at[rows]]
    most = (r @ adj[at[cols]].T).max(axis=1) if len(cols) else np.zeros(len(rows), np.int64)
    return most.astype(np.int64), r.sum(axis=1).astype(np.int64)
