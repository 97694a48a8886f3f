"""Exact LID selection on 2-level trees (:mod:`smroute.lids.select`).

Where every candidate path is leaf -> top -> leaf (one link per (leaf, top)),
a stage is a bipartite multigraph between source and destination leaves whose
proper edge colourings by top switch are exactly the LID choices with HSD 1:
:func:`exact_stage` builds that graph for one stage of a
:class:`~smroute.lids.paths.Batch`, :func:`kempe` colours it with
Kempe-chain swaps (König's theorem).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from smroute.lids.paths import Batch

__all__ = ["exact_stage", "kempe"]

IntArray = npt.NDArray[np.int64]


def kempe(src: list[int], dst: list[int], avail: list[list[int]],
          colour: list[int]) -> list[int] | None:
    """Proper edge colouring of a bipartite multigraph (``src[e]`` on one side,
    ``dst[e]`` on the other) with colours ``0 .. T-1``; edge ``e`` may take
    colour ``c`` if ``avail[e][c] >= 0``.  Starts from ``colour`` (-1 = none),
    keeping every edge that does not clash; Kempe chains (alternating α/β
    paths) free a colour at both ends of the others (König).  Returns the
    colours, or None if the graph or the availabilities do not allow it."""
    col = list(colour)
    n_col = len(avail[0]) if avail else 0
    at_u: dict[tuple[int, int], int] = {}
    at_v: dict[tuple[int, int], int] = {}
    todo: list[int] = []
    for e, c in enumerate(col):
        if c >= 0 and avail[e][c] >= 0 and (src[e], c) not in at_u and (dst[e], c) not in at_v:
            at_u[src[e], c] = e
            at_v[dst[e], c] = e
        else:
            col[e] = -1
            todo.append(e)
    for e in todo:
        u, v = src[e], dst[e]
        ok_e = avail[e]
        fu = [c for c in range(n_col) if ok_e[c] >= 0 and (u, c) not in at_u]
        both = [c for c in fu if (v, c) not in at_v]
        if both:
            c = both[0]
        else:
            fv = [c for c in range(n_col) if ok_e[c] >= 0 and (v, c) not in at_v]
            done = False
            for a in fu:
                for bcol in fv:
                    chain: list[int] = []
                    x, side = v, 1  # at a destination vertex, follow its α edge
                    while True:
                        nxt = at_v.get((x, a)) if side else at_u.get((x, bcol))
                        if nxt is None:
                            break
                        chain.append(nxt)
                        x, side = (src[nxt], 0) if side else (dst[nxt], 1)
                    if all(avail[y][a] >= 0 and avail[y][bcol] >= 0 for y in chain):
                        for y in chain:
                            del at_u[src[y], col[y]]
                            del at_v[dst[y], col[y]]
                        for y in chain:
                            col[y] = bcol if col[y] == a else a
                            at_u[src[y], col[y]] = y
                            at_v[dst[y], col[y]] = y
                        done = True
                        break
                if done:
                    break
            if not done:
                return None
            c = a
        col[e] = c
        at_u[u, c] = e
        at_v[v, c] = e
    return col


def exact_stage(b: Batch, rows: IntArray, cur: np.ndarray) -> np.ndarray | None:
    """Kempe colouring of one stage's inter-leaf flows ``rows`` on a 2-level
    fabric; returns the new offsets ``(len(rows),)`` or None if the candidate
    paths are not leaf -> top -> leaf with one link per (leaf, top)."""
    cl, cok = b.candidates(rows)
    m, c = cok.shape
    if cl.shape[2] < 2:
        return None
    up, dn = cl[:, :, 0].astype(np.int64) - 1, cl[:, :, 1].astype(np.int64) - 1
    n_links = (cl[:, :, 0] > 0).astype(np.int64)
    for j in range(1, cl.shape[2]):
        n_links += cl[:, :, j] > 0
    two = cok & (n_links == 2)
    if not two.any(axis=1).all():
        return None
    view = b.view
    top = np.where(two, view.link_switch[np.maximum(dn, 0)], -1)
    sleaf = b.cache.start[b.key[rows]]
    # the up link must be a function of (source leaf, top), the down link of
    # (top, destination): then colour = top switch
    keys_u = (np.repeat(sleaf, c) * (view.n_switches + 1) + top.ravel())[two.ravel()]
    ups = up.ravel()[two.ravel()]
    dleaf = view.ep_leaf[b.cache.dst_ep[b.key[rows]]]
    keys_v = (top.ravel() * (view.n_switches + 1) + np.repeat(dleaf, c))[two.ravel()]
    dns = dn.ravel()[two.ravel()]
    for kk, ll in ((keys_u, ups), (keys_v, dns)):
        o = np.lexsort((ll, kk))
        ks, ls = kk[o], ll[o]
        if ((ks[1:] == ks[:-1]) & (ls[1:] != ls[:-1])).any():
            return None
    # colours = top switches, compacted; avail[i, colour] = the smallest
    # offset of flow i turning there (-1: none)
    tops, tidx = np.unique(top[two], return_inverse=True)
    colour_of = np.full(top.shape, -1, dtype=np.int64)
    colour_of[two] = tidx
    avail = np.full((m, len(tops)), -1, dtype=np.int64)
    for j in range(c - 1, -1, -1):
        have = colour_of[:, j] >= 0
        avail[np.flatnonzero(have), colour_of[have, j]] = j
    cd = cur[rows]
    if cd.shape[1] < 2:
        return None
    two_now = (cd[:, 1] > 0) & ((cd[:, 2] == 0) if cd.shape[1] > 2 else True)
    last = np.where(two_now, cd[:, 1] - 1, 0)
    cur_top = np.where(two_now, view.link_switch[last], -1)
    pos = np.minimum(np.searchsorted(tops, cur_top), len(tops) - 1)
    cur_col = np.where(two_now & (tops[pos] == cur_top), pos, -1)
    col = kempe(sleaf.tolist(), dleaf.tolist(), avail.tolist(), cur_col.tolist())
    if col is None:
        return None
    return avail[np.arange(m), np.asarray(col, dtype=np.int64)]
