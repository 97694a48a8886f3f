"""Directed graphs as edge arrays (the channel dependency graphs of
:mod:`smroute.routing.deadlock`): cycles by peeling (:func:`cyclic_core`,
:func:`find_cycle`), a topological order (:func:`topological_order`) and an
acyclic graph grown by sets of edges (:class:`AcyclicGrowth`).  Pure numpy,
loops per level of a search, never per node; the growth's searches run
compiled where ``scripts/setup.sh`` built the library
(:func:`smroute.routing.nmodc.native.reach`; the numpy search is the
reference, the same nodes)."""

from __future__ import annotations

import numpy as np

from smroute.routing.nmodc import native

__all__ = ["AcyclicGrowth", "CycleError", "cyclic_core", "find_cycle", "topological_order"]


def cyclic_core(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``(n,)`` bool: the nodes of the directed graph ``src -> dst`` (``(E,)``
    node ids) left after repeatedly removing every node without an incoming
    or without an outgoing edge -- empty iff the graph is acyclic."""
    alive = np.ones(n, dtype=bool)
    s, d = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    while True:
        indeg = np.bincount(d, minlength=n)
        outdeg = np.bincount(s, minlength=n)
        dead = alive & ((indeg == 0) | (outdeg == 0))
        if not dead.any():
            return alive
        alive &= ~dead
        keep = alive[s] & alive[d]
        s, d = s[keep], d[keep]


class CycleError(ValueError):
    """The graph given as acyclic has a cycle."""


def topological_order(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``(n,)`` int64 position of each node of the acyclic graph ``src ->
    dst`` in a topological order (a permutation of ``0 .. n-1``; every edge
    goes to a higher position): nodes by their longest path from a node
    without incoming edges, then by id.  :class:`CycleError` if the graph
    has a cycle."""
    level = np.zeros(n, dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    s, d = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    k = 0
    while len(s):
        indeg = np.bincount(d, minlength=n)
        free = alive & (indeg == 0)
        if not free.any():
            raise CycleError("the graph has a cycle")
        level[free] = k
        alive &= ~free
        keep = alive[s]
        s, d = s[keep], d[keep]
        k += 1
    level[alive] = k
    pos = np.empty(n, dtype=np.int64)
    pos[np.lexsort((np.arange(n), level))] = np.arange(n)
    return pos


def find_cycle(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """One cycle of the directed graph ``src -> dst`` as node ids in edge
    order (``(k,)`` int64, the first node not repeated), empty if acyclic."""
    alive = cyclic_core(n, src, dst)
    if not alive.any():
        return np.zeros(0, dtype=np.int64)
    s, d = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    keep = alive[s] & alive[d]
    s, d = s[keep], d[keep]
    o = np.argsort(s, kind="stable")
    s, d = s[o], d[o]
    first = np.searchsorted(s, np.arange(n))
    nxt = d[np.minimum(first, len(d) - 1)]  # every live node has a live successor
    seen: dict[int, int] = {}
    path: list[int] = []
    x = int(np.flatnonzero(alive)[0])
    while x not in seen:
        seen[x] = len(path)
        path.append(x)
        x = int(nxt[x])
    return np.asarray(path[seen[x]:], dtype=np.int64)


class AcyclicGrowth:
    """An acyclic graph that grows by sets of edges, each kept only if the
    graph stays acyclic (:meth:`add`), with a topological order of its
    nodes (:attr:`pos`).

    A set's edges that go against the order (*back* edges) are the only way
    a cycle can form, and every node of such a cycle lies between the lowest
    head and the highest tail of them, is reached from a back edge's head
    and reaches a back edge's tail: only those nodes are checked
    (:func:`cyclic_core`) and reordered (the nodes reached from the heads
    move up, those reaching the tails move down, the ones that are both take
    a topological order of their own: the batch form of Pearce and Kelly's
    dynamic topological order).  The searches follow an index of the edges
    by tail and by head, rebuilt once the edges added since outnumber
    :data:`REINDEX` of them.  The graph only grows, so a set refused once
    is refused again: small sets refused are remembered (a search that
    tries a cable again costs nothing), and a set with one back edge is
    refused as soon as the search from its head meets its tail."""

    #: the most edges of a refused set it remembers
    REMEMBER = 8

    #: the share of edges added since the last index that triggers a new one
    REINDEX = 0.125

    def __init__(self, n: int, codes: np.ndarray) -> None:
        """``codes``: edges as ``before * n + after`` (the graph must be acyclic)."""
        self.n = n
        c = np.unique(np.asarray(codes, np.int64))
        self.src, self.dst = c // n, c % n
        self.pos = topological_order(n, self.src, self.dst)
        self._refused: set[bytes] = set()
        self._new_out = self._new_in = _Index(np.zeros(0, np.int64), np.zeros(0, np.int64))
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []  # (added, not merged in yet)
        self._n_new = 0
        self._by_dst = (self.dst, self.src)
        self._index()

    def _index(self) -> None:
        """Index every edge (those added since the last index joined to the
        rest; the rest kept in each index's order, so a stable sort merges
        them in a pass)."""
        self._merge_pending()
        self._out = _Index(np.concatenate([self.src, self._new_out.at]),
                           np.concatenate([self.dst, self._new_out.to]), self.n)
        self._in = _Index(np.concatenate([self._by_dst[0], self._new_in.at]),
                          np.concatenate([self._by_dst[1], self._new_in.to]), self.n)
        self.src, self.dst = self._out.at, self._out.to
        self._by_dst = (self._in.at, self._in.to)
        self._new_out = self._new_in = _Index(np.zeros(0, np.int64), np.zeros(0, np.int64))
        self._n_new = 0

    def _merge_pending(self) -> None:
        """The edges added without a search, merged into the index of the new ones."""
        if self._pending:
            s, d = (np.concatenate(x) for x in zip(*self._pending, strict=True))
            self._new_out, self._new_in = self._new_out.merged(s, d), self._new_in.merged(d, s)
            self._pending = []

    def add(self, codes: np.ndarray) -> bool:
        """Add the edges ``codes`` if the graph stays acyclic; whether it did."""
        n, pos = self.n, self.pos
        c = np.unique(np.asarray(codes, np.int64))
        key = c.tobytes() if len(c) <= self.REMEMBER else None
        if key in self._refused:
            return False
        s, d = c // n, c % n
        back = pos[s] >= pos[d]
        if back.any():
            lo, hi = int(pos[d[back]].min()), int(pos[s[back]].max())
            # the edges beside the index, with these (merged in: no sort of them)
            self._merge_pending()
            new_out, new_in = self._new_out.merged(s, d), self._new_in.merged(d, s)
            out, into = (self._out, new_out), (self._in, new_in)
            heads, tails = np.unique(d[back]), np.unique(s[back])
            one = len(heads) == 1 == len(tails)  # one back edge: a cycle once its head
            fwd = _reach(out, heads, pos, lo, hi, stop=int(tails[0]) if one else -1)
            if one and fwd[tails[0]]:  # reaches its tail
                return self._refuse(key)
            # those reached from a head that reach a tail: the paths between stay reached
            both = np.flatnonzero(_reach(into, tails[fwd[tails]], pos, lo, hi, fwd))
            local = np.full(n, -1, dtype=np.int64)
            local[both] = np.arange(len(both))
            ws, wd = _among(out, both, n)
            ws, wd = local[ws], local[wd]
            if cyclic_core(len(both), ws, wd).any():
                return self._refuse(key)
            bwd = _reach(into, tails, pos, lo, hi)
            self._reorder(np.flatnonzero(bwd & ~fwd), both, ws, wd,
                          np.flatnonzero(fwd & ~bwd))
            self._new_out, self._new_in = new_out, new_in
        else:
            self._pending.append((s, d))
        self._n_new += len(s)
        if self._n_new > self.REINDEX * (len(self.src) + self._n_new):
            self._index()
        return True

    def _refuse(self, key: bytes | None) -> bool:
        """Remember a refused set (its key; ``None``: too large); ``False``."""
        if key is not None:
            self._refused.add(key)
        return False

    def _reorder(self, down: np.ndarray, both: np.ndarray, ws: np.ndarray, wd: np.ndarray,
                 up: np.ndarray) -> None:
        """Give the nodes ``down`` (reach a back edge's tail only), ``both``
        (with the edges ``ws -> wd`` among them, as positions in ``both``)
        and ``up`` (reached from a
        back edge's head only) their own positions again, in that order:
        ``down`` and ``up`` keep their relative orders (so each node of
        ``down`` moves down and each of ``up`` moves up, past no edge of the
        rest), ``both`` a topological order of its edges."""
        pos = self.pos
        mid = both[np.argsort(topological_order(len(both), ws, wd))]
        nodes = np.concatenate([down[np.argsort(pos[down])], mid, up[np.argsort(pos[up])]])
        pos[nodes] = np.sort(pos[nodes])


class _Index:
    """Edges ``a -> b`` indexed by ``a``: with ``n``, compressed rows of
    the nodes ``0 .. n-1``, else searched (few edges)."""

    def __init__(self, a: np.ndarray, b: np.ndarray, n: int | None = None) -> None:
        o = np.argsort(a, kind="stable")
        self.at, self.to = a[o], b[o]
        self.start = None if n is None else np.searchsorted(self.at, np.arange(n + 1))

    def merged(self, a: np.ndarray, b: np.ndarray) -> _Index:
        """These edges and ``a -> b``, searched (merged in: these are not
        sorted again)."""
        o = np.argsort(a, kind="stable")
        at = np.searchsorted(self.at, a[o], side="right")
        out = _Index.__new__(_Index)
        out.at, out.to = np.insert(self.at, at, a[o]), np.insert(self.to, at, b[o])
        out.start = None
        return out

    def ends(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The edges out of ``nodes``: ``(from, to)``."""
        if self.start is None:
            lo = np.searchsorted(self.at, nodes, "left")
            k = np.searchsorted(self.at, nodes, "right") - lo
        else:
            lo = self.start[nodes]
            k = self.start[nodes + 1] - lo
        first = np.repeat(lo - np.cumsum(k) + k, k)
        return np.repeat(nodes, k), self.to[first + np.arange(int(k.sum()))]


def _reach(index: tuple[_Index, ...], start: np.ndarray, pos: np.ndarray, lo: int,
           hi: int, within: np.ndarray | None = None, stop: int = -1,
           compiled: bool = True) -> np.ndarray:
    """``(n,)`` bool: the nodes reached from ``start`` by the edges of
    ``index``, through nodes at positions ``lo .. hi`` (and of ``within``
    ``(n,)`` bool if given); ``stop``: a node whose reach ends the search
    (what is seen so far, with it: only whether it is seen is defined).
    ``compiled``: searched in C where the library is built (an index by
    rows and one searched, as :meth:`AcyclicGrowth.add` gives; this numpy
    search is the reference)."""
    if compiled and len(index) == 2 and index[0].start is not None and index[1].start is None:
        got = native.reach(index[0].start, index[0].to, index[1].at, index[1].to,
                           np.asarray(start, np.int64), pos, lo, hi, within, stop)
        if got is not None:
            return got
    n = len(pos)
    seen = np.zeros(n, dtype=bool)
    tag = np.empty(n, dtype=np.int64)
    seen[start] = True
    front = start
    while len(front) and not (stop >= 0 and seen[stop]):
        nxt = np.concatenate([ix.ends(front)[1] for ix in index])
        p = pos[nxt]
        keep = (p >= lo) & (p <= hi) & ~seen[nxt]
        nxt = nxt[keep if within is None else keep & within[nxt]]
        tag[nxt] = np.arange(len(nxt))  # one of each node: the last one
        nxt = nxt[tag[nxt] == np.arange(len(nxt))]
        seen[nxt] = True
        front = nxt
    return seen


def _among(index: tuple[_Index, ...], nodes: np.ndarray, n: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """The edges of ``index`` between ``nodes`` (of ``n``)."""
    inside = np.zeros(n, dtype=bool)
    inside[nodes] = True
    a, b = (np.concatenate(x) for x in zip(*(ix.ends(nodes) for ix in index), strict=True))
    keep = inside[b]
    return a[keep], b[keep]
