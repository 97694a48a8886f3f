"""The candidate-path model of LMC LID selection (:mod:`smroute.lids.select`).

A flow ``s -> d`` may use any of the ``C = 2**LMC`` LIDs of ``d``; its path
depends only on (source leaf, LID) and is walked through the real tables.
:func:`core_paths` walks flows to their switch -> switch links,
:class:`PathCache` keeps the paths of the base LIDs and of the candidates
walked so far, :class:`Batch` holds the per-(stage, link) load counters of a
batch of stages that the local search (:mod:`smroute.lids.search`) and
the exact colouring (:mod:`smroute.lids.colour`) work on.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from smroute.analysis.paths import OK, RoutingView, walk_from_switches

__all__ = ["Batch", "PathCache", "core_paths", "pad"]

IntArray = npt.NDArray[np.int64]


def core_paths(view: RoutingView, start: IntArray, dst: IntArray,
               lids: IntArray) -> tuple[np.ndarray, np.ndarray]:
    """Walk flows from switch ``start`` to end-port ``dst`` addressed to
    ``lids`` (``(F,)`` each).  Returns ``(links, ok)``: ``(F, H)`` int32
    switch -> switch link ids **plus one** (0 = padding) of delivered flows
    (undelivered rows are all 0), and ``(F,)`` bool delivered."""
    st, hp, steps = walk_from_switches(view, start, dst, lids)
    ok = st == OK
    h = max(1, int(hp[ok].max()) - 1) if ok.any() else 1
    links = np.zeros((len(start), h), dtype=np.int32)
    for k, (fi, lk) in enumerate(steps[:h]):
        keep = ok[fi] & (lk < view.n_core)
        links[fi[keep], k] = lk[keep] + 1
    return links, ok


def pad(a: np.ndarray, h: int) -> np.ndarray:
    if a.shape[1] >= h:
        return a
    out = np.zeros((a.shape[0], h), dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


class PathCache:
    """Paths of ``K`` keys, each a (source leaf switch, destination end-port,
    base LID) triple: the base LID's path walked for every key up front, the
    ``C`` candidates' paths walked on first use and kept.  With a shift
    pattern the keys are the job's (source leaf, destination rank) pairs,
    shared by every stage; otherwise the flows of one batch of stages."""

    def __init__(self, view: RoutingView, start: IntArray, dst_ep: IntArray, base: IntArray,
                 n_cand: int) -> None:
        self.view = view
        self.start, self.dst_ep, self.base = start, dst_ep, base
        self.n_cand = n_cand
        self.base_links, self.base_ok = core_paths(view, start, dst_ep, base)
        self.slot = np.full(len(start), -1, dtype=np.int64)
        self.c_links = np.zeros((0, n_cand, 1), dtype=np.int32)
        self.c_ok = np.zeros((0, n_cand), dtype=bool)
        self.used = 0

    def candidates(self, keys: IntArray) -> tuple[np.ndarray, np.ndarray]:
        """All ``C`` candidate paths of ``keys``: ``(M, C, H)`` links+1 and
        ``(M, C)`` delivered."""
        c = self.n_cand
        new = np.unique(keys[self.slot[keys] < 0])
        if len(new):
            r = np.repeat(new, c)
            off = np.tile(np.arange(c, dtype=np.int64), len(new))
            links, ok = core_paths(self.view, self.start[r], self.dst_ep[r],
                                   self.base[r] + off)
            h = max(links.shape[1], self.c_links.shape[2])
            need = self.used + len(new)
            if need > len(self.c_ok) or h > self.c_links.shape[2]:
                cap = max(need, 2 * len(self.c_ok))
                grown = np.zeros((cap, c, h), dtype=np.int32)
                grown[: self.used, :, : self.c_links.shape[2]] = self.c_links[: self.used]
                ok_g = np.zeros((cap, c), dtype=bool)
                ok_g[: self.used] = self.c_ok[: self.used]
                self.c_links, self.c_ok = grown, ok_g
            self.c_links[self.used:need, :, : links.shape[1]] = links.reshape(len(new), c, -1)
            self.c_ok[self.used:need] = ok.reshape(len(new), c)
            self.slot[new] = np.arange(self.used, need)
            self.used = need
        sl = self.slot[keys]
        return self.c_links[sl], self.c_ok[sl]


class Batch:
    """Local search state for the flows of a batch of ``k`` stages: flow ``i``
    is path key ``key[i]`` of ``cache`` in local stage ``stg[i]``."""

    def __init__(self, view: RoutingView, k: int, stg: IntArray, cache: PathCache,
                 key: IntArray) -> None:
        self.view = view
        self.k = k
        self.nl = view.n_core + 1
        self.stg = stg
        self.cache = cache
        self.key = key
        self.n_cand = cache.n_cand
        self.loads = np.zeros(k * self.nl, dtype=np.int32)

    def keys(self, rows: IntArray, links: np.ndarray) -> IntArray:
        """(stage, link) counter index of every valid link, flattened."""
        kk = (self.stg[rows] * self.nl)[:, None] + links.astype(np.int64)
        return kk[links > 0]

    def add(self, rows: IntArray, links: np.ndarray, sign: int) -> None:
        """Add (``sign`` +1) or remove (-1) flows ``rows`` on ``links`` (links+1)."""
        kk = self.keys(rows, links)
        if len(kk) > len(self.loads) // 8:
            self.loads += sign * np.bincount(kk, minlength=len(self.loads)).astype(np.int32)
        else:
            ku, kc = np.unique(kk, return_counts=True)
            self.loads[ku] += sign * kc.astype(np.int32)

    def candidates(self, rows: IntArray) -> tuple[np.ndarray, np.ndarray]:
        return self.cache.candidates(self.key[rows])

    def stage_core_max(self) -> IntArray:
        return self.loads.reshape(self.k, self.nl).max(axis=1).astype(np.int64)

