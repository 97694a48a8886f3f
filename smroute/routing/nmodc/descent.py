"""Nmodc's way down where the low digit sends every arrival one way (beyond
the paper).

A switch that reaches a target through several closer groups below takes
``C[t mod #C]`` (:mod:`smroute.routing.nmodc.nominal`, down-going routes).
The destinations that arrive there from other subtrees are the ones whose
nominal up-route reaches it: every switch on the way up takes slot
``floor(t / Pi) mod m``, so siblings agree, and the destination's own
up-route from its leaf (:func:`up_chain`) names the switch at each rank.
Where those arrivals' columns are strided (director line ASICs cabled
round-robin: the spines of every eighth column share a line ASIC), ``t mod
#C`` is the same for all of them and one down-link carries every arrival
of the target while the others idle (unequal pods under four directors:
SP 16, RP 15 against Dmodc's 10 and 7).  There each arrival takes the child
its own up-route came from instead: the reverse of the destination's
up-route, a down-only route one hop closer, minimal and up*/down*.  Where
the low digit already spreads a target's arrivals over several groups
(Mellanox selene's storage cores) nothing changes.

Which (switch, target) pairs take it is decided once per routing from the
structure alone (:func:`descent_keys`); the kernel then reads only the
switch's own groups and the destination's NID and target
(:func:`apply_descent`), so a block of rows or of columns gets the entries
a full route gives.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import UP_PHASE, Destinations
from smroute.routing.nmodc.nominal import NominalSlots
from smroute.routing.runs import dense
from smroute.routing.topology import SwitchGraph

__all__ = ["apply_descent", "descent_keys", "up_chain", "up_groups"]


def up_groups(g: SwitchGraph) -> np.ndarray:
    """``(S, U)`` int64: each switch's up groups in group order, -1 padded."""
    n = len(g.rank)
    up = np.flatnonzero(g.rank[g.grp_remote] > g.rank[g.grp_switch]) if len(g.grp_remote) else (
        np.zeros(0, dtype=np.int64))
    sw = g.grp_switch[up]
    count = np.bincount(sw, minlength=n)
    out = np.full((n, max(int(count.max(initial=0)), 1)), -1, dtype=np.int64)
    first = np.concatenate([[0], np.cumsum(count)[:-1]])
    out[sw, np.arange(len(up)) - first[sw]] = up
    return out


def up_chain(g: SwitchGraph, slots: NominalSlots, pi: np.ndarray, nid: np.ndarray,
             target: np.ndarray) -> np.ndarray:
    """``(R + 1, D)`` int64: per rank, the switch the nominal up-route of
    each destination (NIDs ``nid``, leaves ``target``) from its own leaf
    reaches: slot ``floor(t / Pi) mod m`` of a switch with nominal slots, up
    group ``floor(t / Pi) mod #up`` of one with its own; -1 past a slot
    without a link or the top."""
    ups = up_groups(g)
    n_up = (ups >= 0).sum(axis=1)
    cur = target.astype(np.int64)
    out = [cur]
    for _ in range(max(int(g.rank.max(initial=0)), 0)):
        at = np.maximum(cur, 0)
        own = slots.own[at]
        m = np.where(own, n_up[at], slots.arity[at])
        x = nid // np.maximum(pi[at], 1)
        j = np.where(m > 0, x % np.maximum(m, 1), 0)
        grp = np.where(own, ups[at, np.minimum(j, ups.shape[1] - 1)],
                       slots.slot_grp[at, np.minimum(j, slots.slot_grp.shape[1] - 1)])
        cur = np.where((cur >= 0) & (m > 0) & (grp >= 0), g.grp_remote[np.maximum(grp, 0)], -1)
        out.append(cur)
    return np.stack(out)


def _closer_down(g: SwitchGraph, c: np.ndarray, s: np.ndarray, tgt: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per entry ``(s, tgt)``: the group ids of ``s`` by position ``(K, W)``
    and which lead closer down to ``tgt`` ``(K, W)`` bool."""
    width = max(int(g.grp_count[s].max(initial=0)), 1)
    k = np.arange(width)[None, :]
    valid = k < g.grp_count[s][:, None]
    gid = np.where(valid, g.grp_first[s][:, None] + k, 0)
    rem = g.grp_remote[gid] if len(g.grp_remote) else gid
    here = c[s, tgt]
    below = c[rem, tgt[:, None]]
    closer = (valid & (g.rank[rem] < g.rank[s][:, None]) & (here < UP_PHASE)[:, None]
              & (below < here[:, None]))
    return gid, closer


def _shared_below(g: SwitchGraph, c: np.ndarray, targets: np.ndarray,
                  n_below: np.ndarray | None = None) -> np.ndarray:
    """``(S,)`` bool: some target lies below two of the switch's children
    (else no target has two closer groups below it: every PGFT); ``n_below``:
    the switches at or below each switch if known."""
    every = len(targets) == c.shape[1]  # (targets ascending, distinct: every switch)
    if every and n_below is not None:
        below = n_below
    else:
        below = ((c if every else np.take(c, targets, axis=1)) < UP_PHASE).sum(axis=1,
                                                                               dtype=np.int32)
    down = np.flatnonzero(g.rank[g.grp_remote] < g.rank[g.grp_switch]) if len(g.grp_remote) else (
        np.zeros(0, dtype=np.int64))
    children = np.bincount(g.grp_switch[down], weights=below[g.grp_remote[down]],
                           minlength=len(g.rank))
    return children > below


def descent_keys(g: SwitchGraph, c: np.ndarray, slots: NominalSlots, pi: np.ndarray,
                 dest: Destinations, below: np.ndarray | None = None) -> np.ndarray:
    """Sorted ``(K,)`` int64 keys ``switch * S + target`` of the targets a
    switch sends its arrivals to by their own up-routes (module doc): the
    low digit sends every arrival of the target's closer groups through
    one group, their up-routes through more.  ``below``: the switches at
    or below each switch (``c < UP_PHASE`` per row) if known."""
    n = len(g.rank)
    none = np.zeros(0, dtype=np.int64)
    if g.mode != "tree" or not len(dest.lid) or int(g.rank.max(initial=0)) < 1:
        return none
    multi = _shared_below(g, c, dense(dest.target, n)[0], below)  # per distinct target
    if not multi.any():
        return none
    chain = up_chain(g, slots, pi, dest.nid, dest.target)
    s_l, ch_l, d_l = [], [], []
    for r in range(1, chain.shape[0]):
        ok = (chain[r] >= 0) & (chain[r - 1] >= 0) & ~dest.is_switch
        ok &= multi[np.maximum(chain[r], 0)]
        d = np.flatnonzero(ok)
        s_l.append(chain[r][d])
        ch_l.append(chain[r - 1][d])
        d_l.append(d)
    s, child, d = (np.concatenate(a) for a in (s_l, ch_l, d_l))
    if not len(s):
        return none
    tgt = dest.target[d]
    pairs, pair_of = np.unique(s * n + tgt, return_inverse=True)  # (many arrivals share one)
    gid, closer = (a[pair_of.ravel()] for a in _closer_down(g, c, pairs // n, pairs % n))
    n_c = closer.sum(axis=1)
    spread = n_c >= 2
    s, child, d, tgt, gid, closer, n_c = (a[spread] for a in (s, child, d, tgt, gid, closer,
                                                              n_c))
    if not len(s):
        return none
    rank_in = np.cumsum(closer, axis=1) - 1
    k = dest.nid[d] % n_c
    low = gid[np.arange(len(s)), np.argmax(closer & (rank_in == k[:, None]), axis=1)]
    back = closer & (g.grp_remote[gid] == child[:, None])
    has = back.any(axis=1)
    mine = np.where(has, gid[np.arange(len(s)), np.argmax(back, axis=1)], -1)
    # one set per switch and closer groups (packed): the low digit's groups,
    # the up-routes' groups
    keys = np.concatenate([s[:, None], np.packbits(closer, axis=1).astype(np.int64)], axis=1)
    _, set_of = np.unique(keys, axis=0, return_inverse=True)
    set_of = set_of.ravel()
    n_sets = int(set_of.max()) + 1
    big = np.iinfo(np.int64).max

    def spans(v: np.ndarray) -> np.ndarray:
        lo, hi = np.full(n_sets, big), np.full(n_sets, -1)
        np.minimum.at(lo, set_of, v)
        np.maximum.at(hi, set_of, v)
        return hi > lo

    every = np.ones(n_sets, dtype=bool)
    np.logical_and.at(every, set_of, has)
    take = ~spans(low) & spans(mine) & every
    pick = take[set_of]
    return np.unique(s[pick] * n + tgt[pick])


def apply_descent(g: SwitchGraph, c: np.ndarray, slots: NominalSlots, pi: np.ndarray,
                  keys: np.ndarray, dest: Destinations, switches: np.ndarray,
                  out: np.ndarray) -> None:
    """The entries of ``switches`` (rows of ``out``, columns ``dest.lid``)
    that :func:`descent_keys` names take the child of the destination's own
    up-route; the cable inside the group is ``floor(t / #C) mod #cables``."""
    if not len(keys) or not len(switches) or not len(dest.lid):
        return
    n = len(g.rank)
    rows = np.flatnonzero(np.isin(switches, keys // n))
    if not len(rows):
        return
    chain = up_chain(g, slots, pi, dest.nid, dest.target)
    for i in rows.tolist():
        s = int(switches[i])
        r = int(g.rank[s])
        if r < 1 or r >= chain.shape[0]:
            continue
        key = s * n + dest.target
        pos = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
        d = np.flatnonzero((keys[pos] == key) & (chain[r] == s) & (chain[r - 1] >= 0)
                           & ~dest.is_switch)
        if not len(d):
            continue
        tg, tg_of = np.unique(dest.target[d], return_inverse=True)
        gid, closer = (a[tg_of.ravel()] for a in _closer_down(
            g, c, np.full(len(tg), s, dtype=np.int64), tg))
        back = closer & (g.grp_remote[gid] == chain[r - 1][d][:, None])
        ok = back.any(axis=1)
        d, gid, back, n_c = d[ok], gid[ok], back[ok], closer[ok].sum(axis=1)
        grp = gid[np.arange(len(d)), np.argmax(back, axis=1)]
        cable = (dest.nid[d] // n_c) % g.grp_port_count[grp]
        out[i, dest.lid[d]] = g.grp_ports[g.grp_port_first[grp] + cable]
