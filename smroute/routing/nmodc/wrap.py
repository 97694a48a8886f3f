"""Nmodc's wrap gaps (beyond the paper): where a shift permutation's window
would not wrap cleanly from the last host's NID to the first, the NIDs get
gaps at leaf boundaries (:func:`wrap_gaps`).  Pure, on arrays."""

from __future__ import annotations

import numpy as np

from smroute.routing.nmodc.cables import structural_shares
from smroute.routing.nmodc.nominal import pendant_up
from smroute.routing.topology import SwitchGraph

__all__ = ["wrap_gaps"]


def wrap_gaps(g: SwitchGraph, t: np.ndarray) -> np.ndarray:
    """Nmodc's NIDs: the topological NIDs ``t`` ``(E,)`` int64 (a permutation
    of ``0 .. E-1``), with a gap at a leaf boundary where a shift
    permutation's window would not wrap cleanly; ``(E,)`` int64, ``t`` itself
    where none is needed.

    A leaf of ``w`` hosts sends a shift's ``w`` flows to ``w`` consecutive
    NIDs, and with ``m`` up cables (the groups times the cables of a
    complete group: the group from ``x``, the cable from the quotient, eq.
    4) takes ``x mod m``: ``w = q m + r``
    consecutive NIDs load a cable at most ``q + 1`` times.  Across a
    boundary where the NIDs jump by ``r + e`` (mod ``m``) instead of the
    leaf's ``w``, a window still does so if and only if ``0 <= e <= m - r``
    (``e = 0`` where ``r = 0``).  The cyclic shift wraps from the last NID
    of the ``E`` hosts on the leaves to 0 (the end-ports numbered after them
    are few or send no application traffic), a jump of ``e0 = -E mod m``:
    beyond ``m - r`` a window there loads a cable ``q + 2`` times (the
    648-host 2-level tree with 4 spines and 4 leaves removed: 576 hosts,
    ``e0 = 12 > 14 - 4``, shift-permutation risk 3 where ftree has 2).  Gaps
    of ``e0 - (m - r)`` in all, at most ``m - r`` each, spread over the leaf
    boundaries, bring the wrap back into range.  Only where every leaf has
    ``w`` hosts and ``m`` up cables and no upper switch routes on (a 2-level
    tree: one modulus for every pair; a pendant up-neighbour, a management
    switch off one leaf, is no up cable); elsewhere ``t``.  Where every
    leaf has one table entry per cable
    (:func:`~smroute.routing.nmodc.cables.structural_shares`: single and
    double spines) with as many cables, ``m`` is those cables.
    """
    leaves = g.leaves
    _, hi = g.up_pairs()
    if g.mode != "tree" or not len(leaves) or not len(t) or (g.n_up[hi] > 0).any():
        return t
    # the cables of a complete group (a lost cable keeps the NIDs: no reroute
    # in full for one cable); a pendant up-neighbour is none of them
    pendant = pendant_up(g)
    up = g.is_leaf[g.grp_switch] & (g.rank[g.grp_remote] > 0) & ~pendant
    n_up = g.n_up - np.bincount(g.grp_switch[pendant], minlength=g.n_switches)
    m = int(n_up[leaves[0]]) * int(g.grp_port_count[up].max(initial=1))
    cab = np.bincount(g.grp_switch[up], weights=g.grp_port_count[up], minlength=g.n_switches)
    if structural_shares(g)[leaves].all() and (cab[leaves] == cab[leaves[0]]).all():
        m = int(cab[leaves[0]])  # one table entry per cable
    o = np.argsort(t)
    host = g.is_leaf[g.ep_switch[o]] & ~g.ep_agg[o]  # first; the others take the last gap
    n = int(np.argmin(host)) if not host.all() else len(o)
    if n == 0 or host[n:].any():
        return t
    sw = g.ep_switch[o[:n]]
    first = np.r_[True, sw[1:] != sw[:-1]]
    size = np.diff(np.r_[np.flatnonzero(first), len(sw)])
    w = int(size[0])
    if (m < 2 or (n_up[leaves] != n_up[leaves[0]]).any()
            or (size != w).any() or w % m == 0):
        return t
    need = (-n) % m - (m - w % m)
    if need <= 0:
        return t
    k = -(-need // (m - w % m))  # gaps of at most m - r
    if k >= len(size):
        return t
    gap = np.zeros(len(size), dtype=np.int64)
    gap[(np.arange(1, k + 1) * len(size)) // (k + 1)] = need // k + (np.arange(k) < need % k)
    shift = np.full(len(t), need, dtype=np.int64)
    shift[:n] = np.cumsum(gap)[np.cumsum(first) - 1]
    out = np.empty_like(t)
    out[o] = np.arange(len(t)) + shift
    return out
