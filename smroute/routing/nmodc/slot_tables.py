"""Nmodc's slot tables (:mod:`smroute.routing.nmodc.nominal`): per pattern of
closer groups, the table a destination indexes with its digit.

A table is a run of ``length`` entries in one flat ``value`` array from
``start``; an entry is a column of the per-switch lookup of Nmodc's kernel
(a group position, or ``gmax`` + a nominal slot).  Pure functions on arrays.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import INF, UP_PHASE, Destinations
from smroute.routing.kernel import dedupe_rows
from smroute.routing.nmodc.cables import counted_cables, unequal_cables
from smroute.routing.runs import place_in_runs, runs
from smroute.routing.topology import SwitchGraph

__all__ = ["probe_offsets", "alternatives", "AlternativesMemo", "slot_tables", "capacity_tables",
           "spread_entries", "may_share", "sharing", "even_shares", "equal_loads",
           "sole_nearest", "lids_up_and_below", "occurrences"]


def probe_offsets(m: int) -> np.ndarray:
    """``(m - 1, m - 1)`` int64: row ``r`` is the order in which a destination
    whose nominal slot ``j`` is lost probes the other slots: ``j + 1 +
    offsets[r, k]`` (mod ``m``), a permutation of ``0 .. m - 2`` per ``r``
    that starts with ``r`` (a single lost slot's destinations go to each
    other slot for one ``r``: the 1,728-host tree with 16-63 links removed,
    median A2A 19 to 17) and goes on in a fixed pseudo-random order
    (rendezvous hashing: every switch probes in the same order, so switches
    agree wherever they have the slot)."""
    n = max(m - 1, 1)
    r = np.arange(n, dtype=np.uint64)[:, None]
    k = np.arange(n, dtype=np.uint64)[None, :]
    h = (r * np.uint64(0x9E3779B97F4A7C15) + k * np.uint64(0xBF58476D1CE4E5B9)
         + np.uint64(m * 0x94D049BB133111EB % (1 << 64)))
    h ^= h >> np.uint64(31)
    h *= np.uint64(0xD6E8FEB86659FD93)
    h ^= h >> np.uint64(29)
    h[np.arange(n), np.arange(n)] = 0  # digit r probes offset r first
    return np.argsort(h, axis=1, kind="stable").astype(np.int64)


def alternatives(avail: np.ndarray, m: int) -> np.ndarray:
    """Where the lost slots of ``P`` patterns go: ``avail`` ``(P, m)`` bool
    (closer nominal slots, at least two per pattern) -> ``(P, m - 1, m)``
    int16, the slot taken by a destination of slot ``j`` with next digit
    ``r`` (``[p, r, j]``; ``j`` itself where it leads closer).  Lost slots
    are served in slot order, each taking the first closer slot of its
    probe order (:func:`probe_offsets`) that the fewest lost slots before
    it took for the same ``r`` (level by level: every closer slot once, then
    every one twice, ...): the lost slots of ``m`` consecutive NIDs spread
    evenly over the closer groups."""
    n_p = len(avail)
    off = probe_offsets(m).ravel().astype(np.int32)  # [r * (m - 1) + k]
    out = np.broadcast_to(np.arange(m, dtype=np.int16)[None, None, :], (n_p, m - 1, m)).copy()
    flat_out, flat_avail = out.reshape(-1), avail.reshape(-1)
    taken = np.zeros(n_p * (m - 1) * m, dtype=np.int16)  # [(p * (m - 1) + r) * m + slot]
    lost_p, lost_j = np.nonzero(~avail)  # by pattern, then slot: the serving order
    rank = place_in_runs(lost_p)
    n_avail = avail.sum(axis=1)
    for q in range(int(rank.max(initial=-1)) + 1):  # the q-th lost slot of every pattern
        sel = rank == q
        n = int(sel.sum())
        j = np.repeat(lost_j[sel].astype(np.int32), m - 1)  # one entry per (lost slot, r)
        r = np.tile(np.arange(m - 1, dtype=np.int32), n)
        pr = np.repeat(lost_p[sel].astype(np.int32), m - 1) * np.int32(m - 1) + r
        base_a = (pr // (m - 1)) * m  # avail row
        base_t = pr * m  # taken row
        level = np.repeat(q // n_avail[lost_p[sel]], m - 1)  # a slot taken <= level times is free
        pick = np.full(len(pr), -1, dtype=np.int16)
        act = np.arange(len(pr))
        for k in range(m - 1):
            if not len(act):
                break
            cand = (j[act] + 1 + off[r[act] * (m - 1) + k]) % m
            ok = flat_avail[base_a[act] + cand] & (taken[base_t[act] + cand] <= level[act])
            pick[act[ok]] = cand[ok]
            act = act[~ok]
        flat_out[base_t + j] = pick
        taken[base_t + pick] += 1
    return out


class AlternativesMemo:
    """The :func:`alternatives` of the patterns seen so far, per arity.  A
    worker routes its switches block by block, and the blocks meet the same
    patterns again (the 11,664-host tree with 1,000 links removed: 20,886
    patterns with lost slots over the blocks, 3,879 distinct).  Arities
    above 64 are not kept."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def get(self, avail: np.ndarray, m: int) -> np.ndarray:
        """:func:`alternatives` of ``avail`` ``(P, m)`` bool (distinct rows)."""
        if m > 64:
            return alternatives(avail, m)
        packed = np.zeros((len(avail), 8), dtype=np.uint8)
        packed[:, :(m + 7) // 8] = np.packbits(avail, axis=1, bitorder="little")
        key = packed.view("<u8").ravel()
        keys, tabs = self._known.get(m, (np.zeros(0, np.uint64), np.zeros((0, m - 1, m), np.int16)))
        at = np.minimum(np.searchsorted(keys, key), max(len(keys) - 1, 0))
        hit = (keys[at] == key) if len(keys) else np.zeros(len(key), dtype=bool)
        out = np.empty((len(avail), m - 1, m), dtype=np.int16)
        out[hit] = tabs[at[hit]]
        miss = np.flatnonzero(~hit)
        if len(miss):
            out[miss] = alternatives(avail[miss], m)
            keys, tabs = np.concatenate([keys, key[miss]]), np.concatenate([tabs, out[miss]])
            o = np.argsort(keys, kind="stable")
            self._known[m] = (keys[o], tabs[o])
        return out


def slot_tables(pbits: np.ndarray, pm: np.ndarray, gmax: int,
                memo: AlternativesMemo | None = None,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Slot tables of ``P`` patterns: ``pbits`` ``(P, W)`` bool (closer
    nominal slots of an up-going pattern, closer group positions of a
    down-going one), ``pm`` ``(P,)`` nominal arity (0: down-going).

    Returns ``(length (P,), start (P,), value (F,))``: pattern ``p``'s table
    is ``value[start[p] : start[p] + length[p]]``, entries encoded as a
    column of the per-switch lookup of Nmodc's kernel (module doc): a group
    position (down-going), ``gmax`` + a nominal slot (up-going), or
    ``gmax + W`` (no closer group).  An up-going table with lost slots has
    ``m * (m - 1)`` entries: entry ``j + m * r`` is slot ``j`` if it leads
    closer, else its alternative for ``r`` (:func:`alternatives`, through
    ``memo`` where given)."""
    n_c = pbits.sum(axis=1)
    is_up = pm > 0
    full = (n_c == pm) | (n_c == 1)  # one closer group: every slot takes it
    lossy = is_up & ~full & (n_c > 1)
    length = np.where(n_c <= 1, 1, np.where(is_up, np.where(full, pm, pm * (pm - 1)), n_c))
    start = np.cumsum(length) - length
    w = pbits.shape[1]
    value = np.empty(int(length.sum()), dtype=np.int32)
    # short tables (no lost slot): closer group positions, all nominal slots,
    # the one closer slot, or none
    short = np.flatnonzero(~lossy)
    i = np.arange(max(int(length[short].max(initial=1)), 1))[None, :]
    first = np.argsort(~pbits[short], axis=1, kind="stable")  # closer positions first
    val = np.where(is_up[short, None], gmax + np.where(n_c[short, None] == 1, first[:, :1], i),
                   first[:, np.minimum(i[0], w - 1)])
    val = np.where(n_c[short, None] == 0, gmax + w, val)
    ok = i < length[short, None]
    value[(start[short, None] + i)[ok]] = val[ok]
    # tables with lost slots: entry j + m * r from the alternatives
    lossy_p = np.flatnonzero(lossy)
    for m in np.unique(pm[lossy_p]).tolist():
        ps = lossy_p[pm[lossy_p] == m]
        avail = pbits[ps, :m]
        alt = (memo.get(avail, m) if memo is not None else alternatives(avail, m)).reshape(
            len(ps), -1)  # (p, (m - 1) * m)
        value[start[ps, None] + np.arange(alt.shape[1])[None, :]] = gmax + alt
    return length, start, value


def capacity_tables(
    tables: tuple[np.ndarray, np.ndarray, np.ndarray], pat_of: np.ndarray, n_closer: np.ndarray,
    up: np.ndarray, n_up: np.ndarray, count: np.ndarray, below: np.ndarray, cols: np.ndarray,
    cables: np.ndarray, structural: np.ndarray | None = None, resolution: int = 4,
    parallel_resolution: int = 10,
    toward: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """Shares by capacity for the destinations free to take any up group.

    ``tables`` ``(length, start, value)`` and ``pat_of`` ``(B, U)``: the
    patterns of ``B`` switches towards ``U`` targets (:func:`slot_tables`);
    ``n_closer`` ``(P,)`` closer groups per pattern; ``up`` ``(B, U)``
    up-going; ``n_up`` ``(B,)`` up groups per switch; ``count`` ``(U,)``
    destination LIDs per target; ``below`` ``(B,)`` destination LIDs below
    each switch (the sources that can send up through it); ``cols`` ``(B, C)``
    the group position of each table value per switch; ``cables`` ``(B,
    gmax + 1)`` cables per group position, as the shares count them
    (:func:`counted_cables`); ``structural`` ``(B,)`` bool the switches of
    :func:`~smroute.routing.nmodc.cables.structural_shares`.

    A switch's other up-going destinations (fewer closer groups: targets
    some up groups do not reach) load its groups unevenly, and its groups
    may have unequal cable counts.  Its free destinations (every up group
    closer, a table without lost slots) then go by water-filling: group
    ``g`` takes ``max(0, lam * cables[g] - load[g])`` of them, ``lam`` the
    level that places all, in a table of ``resolution * #groups`` entries,
    each group's spread evenly.  Where the groups have parallel cables, of
    ``parallel_resolution * #groups`` entries: Dmodc's table that many
    times over with the fewest entries moved from the groups above their
    share to those below it, so that as few destinations as the shares need
    leave their nominal group, the groups above it giving theirs in turns
    (consecutive NIDs keep to different groups).  Where the shares round
    to the cables themselves and every group is at its usual count (a leaf
    cabled twice to some spines and once to others,
    :func:`~smroute.routing.nmodc.cables.structural_shares`), one entry per
    cable, spread: every cable carries the same destinations, and
    consecutive NIDs take the cables in turn; ``toward`` ``(tb, tu, tcab)``:
    such a switch (row) and a target (column) its groups reach over
    ``tcab`` ``(R, gmax + 1)`` cables down (a leaf that lost one): one
    entry per cable either side has, for that target alone.
    ``parallel_resolution`` 10 is tuned on Loginoff's capture (a leaf with 4
    cables to one spine, 3 to the other): 8 to 10 and 15 to 32 reach A2A 18,
    of those 9, 10 and 20 keep the topological shifts' HSD at or below
    minhop's (3.60 against 3.63; 8, 16, 24 and 32, the lengths whose shares
    come closest to the water-filling's, 3.67).  A switch changes only where
    this lowers the all-to-all risk a cable can reach, ``min(destinations
    per cable, below)``, by half a destination or more: its cables are bound
    by their destinations, not by their sources (X5: a leaf of 9 hosts whose
    peers on 2 of the 4 spines crowd those spines' cables).  Complete trees
    have no such switch: tables unchanged.  Returns the extended tables and
    ``pat_of``."""
    length, start, value = tables
    b, n_u = pat_of.shape
    free = (up & (length[pat_of] == n_closer[pat_of]) & (n_closer[pat_of] == n_up[:, None])
            & (n_up[:, None] > 1))
    if not free.any():
        return tables, pat_of
    gcols = cables.shape[1]
    sw = np.flatnonzero(free.any(axis=1))
    # the other up-going destinations of those switches, spread over their
    # tables' entries: per pattern the share of each value, per switch the
    # destinations per pattern, then per group position
    ob, ou = np.nonzero(up[sw] & ~free[sw])
    load: np.ndarray = np.zeros((len(sw), gcols))
    if len(ob):
        pats, op = np.unique(pat_of[sw[ob], ou], return_inverse=True)
        ln = length[pats]
        row = np.repeat(np.arange(len(pats)), ln)
        ent = start[pats][row] + np.arange(int(ln.sum())) - np.repeat(np.cumsum(ln) - ln, ln)
        n_val = cols.shape[1]
        of_value = np.bincount(row * n_val + value[ent], weights=1.0 / ln[row],
                               minlength=len(pats) * n_val).reshape(len(pats), n_val)
        per_pat = np.bincount(ob * len(pats) + op, weights=count[ou].astype(np.float64),
                              minlength=len(sw) * len(pats)).reshape(len(sw), len(pats))
        at = np.arange(len(sw))[:, None] * gcols + cols[sw]
        # einsum, not a BLAS product: idle BLAS threads spin on the workers' CPU
        by_value = np.einsum("sp,pv->sv", per_pat, of_value)
        load = np.bincount(at.ravel(), weights=by_value.ravel(),
                           minlength=len(sw) * gcols).reshape(len(sw), gcols)
    fp = pat_of[sw, np.argmax(free[sw], axis=1)]  # a switch's free targets share one pattern
    n_free = np.where(free[sw], count[None, :], 0).sum(axis=1).astype(np.float64)
    k = n_closer[fp]
    kmax = int(k.max())
    inside = np.arange(kmax)[None, :] < k[:, None]
    pos = cols[sw[:, None], value[start[fp][:, None] + np.minimum(np.arange(kmax), k[:, None] - 1)]]
    cab = np.where(inside, cables[sw[:, None], pos], 0).astype(np.float64)
    ld = np.where(inside, np.take_along_axis(load, pos, axis=1), 0.0)
    lo = np.zeros(len(sw))  # water level by bisection
    hi = (n_free + ld.sum(axis=1)) / cab.sum(axis=1) + (ld / np.maximum(cab, 1)).max(axis=1)
    for _ in range(50):
        mid = (lo + hi) / 2
        short = np.maximum(0.0, mid[:, None] * cab - ld).sum(axis=1, where=inside) < n_free
        lo, hi = np.where(short, mid, lo), np.where(short, hi, mid)
    even = ((ld + (n_free / k)[:, None]) / np.maximum(cab, 1)).max(axis=1, where=inside,
                                                                     initial=0.0)
    filled = np.maximum(hi[:, None], ld / np.maximum(cab, 1)).max(axis=1, where=inside,
                                                                   initial=0.0)
    src = below[sw].astype(np.float64)
    gain = np.minimum(even, src) - np.minimum(filled, src) >= 0.5
    # groups of unequal cables: a permutation loads a cable by the
    # destinations it carries, whatever the sources below
    uneq = (np.where(inside, cab, 0).max(axis=1) > np.where(inside, cab, np.inf).min(axis=1))
    gain |= uneq & (even - filled >= 0.5)
    if not gain.any():
        return tables, pat_of
    sw, fp, k, inside = sw[gain], fp[gain], k[gain], inside[gain]
    share = np.where(inside, np.maximum(0.0, hi[gain][:, None] * cab[gain] - ld[gain]), 0.0)
    share /= share.sum(axis=1, keepdims=True)
    n = len(sw)
    # parallel cables: the nominal table with the fewest entries moved, at
    # parallel_resolution; else the entries spread at resolution
    par = ((cab[gain] > 1) & inside).any(axis=1)
    rep = np.where(par, parallel_resolution, resolution)
    new_len = rep * k
    # entries per group: largest remainder
    want = share * new_len[:, None]
    got = np.floor(want).astype(np.int64)
    rest = new_len - got.sum(axis=1)
    order = np.argsort(np.where(inside, got - want, 1.0), axis=1, kind="stable")
    bump = np.arange(kmax)[None, :] < rest[:, None]
    got[np.nonzero(bump)[0], order[bump]] += 1
    # structural shares that round to the cables: one entry per cable, spread
    total = cab[gain].sum(axis=1)
    whole = np.zeros(n, dtype=bool)
    if structural is not None:
        whole = structural[sw] & (np.abs(share * total[:, None] - cab[gain]) < 0.5).all(
            axis=1, where=inside)
    par &= ~whole
    new_len = np.where(whole, total.astype(np.int64), new_len)
    got = np.where(whole[:, None], cab[gain].astype(np.int64), got)
    spread = spread_entries(got)[0]
    # moved: Dmodc's table ``rep`` times over (entry e: group e mod k), then
    # the fewest entries moved from the groups above their share to those
    # below it: a giver's q-th of d moved entries is its occurrence
    # floor((q + 1/2) rep / d); the moved entries go in table order to the
    # takers, the j-th of a taker's c at (j + 1/2) / c
    first = np.cumsum(new_len) - new_len
    e_row = np.repeat(np.arange(n), new_len)
    e_grp = (np.arange(len(e_row)) - first[e_row]) % k[e_row]
    give, take = (np.where(inside & par[:, None], np.maximum(a, 0), 0).ravel()
                  for a in (rep[:, None] - got, got - rep[:, None]))
    g_row, g_grp, q = _ragged(n, kmax, give)
    # (a row's givers take turns: moved in one round, consecutive NIDs took one group)
    gives = give.reshape(n, kmax) > 0
    n_giv = gives.sum(axis=1)[g_row]
    turn = (np.cumsum(gives, axis=1) - 1).ravel()[g_row * kmax + g_grp]
    g_pos = (((2 * q * n_giv + 2 * turn + 1) * rep[g_row])
             // (2 * n_giv * give[g_row * kmax + g_grp]) * k[g_row] + g_grp)
    og = np.lexsort((g_pos, g_row))
    t_row, t_grp, tq = _ragged(n, kmax, take)
    ot = np.lexsort((t_grp, (tq + 0.5) / take[t_row * kmax + t_grp], t_row))
    e_grp[first[g_row[og]] + g_pos[og]] = t_grp[ot]
    e_grp = np.where(par[e_row], e_grp, spread)
    new_value = value[start[fp][e_row] + e_grp]
    pat_of = pat_of.copy()
    fb, fu = np.nonzero(free[sw])
    pat_of[sw[fb], fu] = len(length) + fb
    if toward is not None and whole.any():  # (fewer cables down: fewer entries)
        tb, tu, tcab = toward
        row = np.full(b, -1)
        row[sw[whole]] = np.flatnonzero(whole)
        keep = (row[tb] >= 0) & free[tb, tu]
        tb, tu, r = tb[keep], tu[keep], row[tb[keep]]
        at = np.take_along_axis(tcab[keep], pos[gain][r], axis=1)
        t_got = np.where(inside[r], np.minimum(at, got[r]), 0).astype(np.int64)
        less = (t_got < got[r]).any(axis=1)
        tb, tu, r, t_got = tb[less], tu[less], r[less], t_got[less]
        t_len = t_got.sum(axis=1)
        pat_of[tb, tu] = len(length) + n + np.arange(len(r))
        new_len = np.concatenate([new_len, t_len])
        t_val = value[start[fp][r][np.repeat(np.arange(len(r)), t_len)] + spread_entries(t_got)[0]]
        new_value = np.concatenate([new_value, t_val])
    new_start = len(value) + np.cumsum(new_len) - new_len
    return ((np.concatenate([length, new_len]), np.concatenate([start, new_start]),
             np.concatenate([value, new_value])), pat_of)


def spread_entries(got: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The tables of ``got`` ``(n, k)`` entries per group, rows
    concatenated: each entry's group and its occurrence among the group's
    entries, the j-th of a group's c at (j + 1/2) / c through its table
    (ties by group)."""
    n, kmax = got.shape
    c_row, c_grp, cj = _ragged(n, kmax, got.ravel())
    order = np.lexsort((c_grp, (cj + 0.5) / got.ravel()[c_row * kmax + c_grp], c_row))
    return c_grp[order], cj[order]


def _ragged(n: int, kmax: int, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(row, group, q)`` int64: ``c`` ``(n * kmax,)`` counts per (row,
    group), expanded to the ``q``-th of each (row, group), row after row."""
    first = np.cumsum(c) - c
    which, at = runs(first, c)  # which: the flat (row, group) index
    return which // kmax, which % kmax, at - first[which]


def may_share(g: SwitchGraph, c: np.ndarray, dest: Destinations,
              counted: np.ndarray | None = None) -> np.ndarray:
    """``(S,)`` bool: the switches whose up-going destinations the shares by
    capacity (:func:`capacity_tables`) can redistribute, from the costs
    ``c`` ``(S, S)``.  Sharing needs the water level (destinations per cable
    after sharing, at least the up-going destination LIDs per up cable)
    half a destination below the LIDs below the switch; elsewhere a
    switch's entries depend on their own columns only (what an incremental
    reroute needs to know).  On the 11,664-host tree a leaf has 647
    destinations per up cable against 18 below it.  ``counted``: the
    cables the shares count (default :func:`counted_cables`)."""
    going_up, below = lids_up_and_below(c, dest)
    # the groups the kernel counts as up: every one not going down
    not_down = g.rank[g.grp_remote] >= g.rank[g.grp_switch]
    counted = counted_cables(g) if counted is None else counted
    groups = np.bincount(g.grp_switch[not_down], minlength=g.n_switches)
    cables = np.bincount(g.grp_switch[not_down], weights=counted[not_down],
                         minlength=g.n_switches).astype(np.int64)
    return (groups > 1) & ((2 * going_up <= (2 * below - 1) * cables)
                           | unequal_cables(g, not_down, counted))


def sharing(g: SwitchGraph, c: np.ndarray, dest: Destinations,
            counted: np.ndarray | None = None) -> np.ndarray:
    """``(S,)`` bool: the switches of :func:`may_share` whose shares by
    capacity can move a destination (not those of :func:`even_shares`).
    Dmodc's digit already spreads the others' destinations over their
    cables, which the even up cables
    (:mod:`~smroute.routing.nmodc.even_cables`) then keep: a complete PGFT
    whose leaves have more hosts than up cables, parallel ones among them,
    keeps Dmodc's tables (PGFT(2;16,6;1,3;1,2): shift risk in topological
    order 3, dealt 4).  ``counted``: as :func:`may_share`'s."""
    counted = counted_cables(g) if counted is None else counted
    share = may_share(g, c, dest, counted)
    sw = np.flatnonzero(share)
    if len(sw):
        w = np.bincount(dest.target, minlength=c.shape[1])
        share[sw[even_shares(g, c, w, sw, counted)]] = False
    return share


#: Hop counts :func:`even_shares` compares at once (kinds by up-neighbours
#: times up-neighbours times switches).
EVEN_CHUNK = 1 << 22


def even_shares(g: SwitchGraph, c: np.ndarray, w: np.ndarray, sw: np.ndarray,
                counted: np.ndarray, known: np.ndarray | None = None) -> np.ndarray:
    """``(B,)`` bool: the switches ``sw`` ``(B,)`` whose shares by capacity
    (:func:`capacity_tables`) cannot move a destination: those without a
    destination that every up group leads closer to (a leaf with a pendant
    up-neighbour: nothing is free to share), and those whose up groups all
    count the same ``counted`` cables and carry the same destination LIDs
    (``w`` ``(S,)`` per target switch) from the targets only one of them
    leads closer to, with no target some but not all lead closer to: there
    the water-filling is the even spread.  Costs ``c`` ``(S, S)``;
    ``known`` ``(B,)`` bool: switches the caller knows to be such (not read
    again)."""
    if known is not None and known.any():
        out = known.copy()
        out[~known] = even_shares(g, c, w, sw[~known], counted)
        return out
    if not len(sw):
        return np.zeros(0, dtype=bool)
    not_down = g.rank[g.grp_remote] >= g.rank[g.grp_switch]
    row = np.full(g.n_switches, -1, dtype=np.int64)
    row[sw] = np.arange(len(sw))
    # the up-neighbours of each switch, in group order
    gid = np.flatnonzero(not_down & (row[g.grp_switch] >= 0))
    at = place_in_runs(g.grp_switch[gid])
    ups = np.full((len(sw), int(at.max(initial=0)) + 1), -1, dtype=np.int64)
    ups[row[g.grp_switch[gid]], at] = g.grp_remote[gid]
    same_cables = ~unequal_cables(g, gid, counted)[sw]
    key = (ups + 1).astype(">u2" if g.n_switches < 1 << 16 else ">u8")  # (as bytes)
    kind_of, first = dedupe_rows(key.view(np.uint8).reshape(len(ups), -1))
    kinds = ups[first]
    width = (kinds >= 0).sum(axis=1)
    counts = w > 0  # the targets with destination LIDs: the only ones counted
    out = np.zeros(len(sw), dtype=bool)

    # the kinds of one up-count together, (K, k, S) hop counts at most
    # EVEN_CHUNK at a time (a kind's up-neighbours: its first k columns)
    for kw in np.unique(width).tolist():
        of_w = np.flatnonzero(width == kw)
        step = max(1, EVEN_CHUNK // max(kw * c.shape[1], 1))
        for lo in range(0, len(of_w), step):
            ks = of_w[lo:lo + step]
            hop = c[kinds[ks, :kw]] & np.uint8(UP_PHASE - 1)  # (K, k, S), INF as 127
            near = hop == hop.min(axis=1, keepdims=True)
            # (a port's up groups are fewer than 255)
            n_near = near.view(np.uint8).sum(axis=1, dtype=np.uint8)  # (K, S)
            one, partial = n_near == 1, (n_near > 1) & (n_near < kw)
            local = np.full(len(kinds), -1, dtype=np.int64)
            local[ks] = np.arange(len(ks))
            mine = np.flatnonzero(local[kind_of] >= 0)
            # equal loads from the targets a single one leads closer to
            # (:func:`equal_loads`), and no target some but not all
            # lead closer to: read per switch at its kind's such targets
            # only (on a complete tree its own up-neighbours)
            same = mine[same_cables[mine]]
            kidx = local[kind_of[same]]
            kk, tt = np.nonzero(one & counts)
            owner = sole_nearest(near)[kk, tt]
            b, p = _going_up_pairs(c, sw[same], kidx, kk, tt, len(ks))
            out[same] = equal_loads(b, owner[p], w[tt[p]], len(same), kw)
            if partial.any():
                kk, tt = np.nonzero(partial & counts)
                out[same[_going_up_pairs(c, sw[same], kidx, kk, tt, len(ks))[0]]] = False
            # the others: no destination every up group leads closer to,
            # nothing to share
            rest = mine[~out[mine]]
            if len(rest):
                full = np.flatnonzero(((n_near == kw) & counts).any(axis=0))
                x = c[sw[rest]][:, full]
                out[rest] = ~((x >= UP_PHASE) & (x < INF)
                              & (n_near[:, full] == kw)[local[kind_of[rest]]]).any(axis=1)
    return out


def sole_nearest(near: np.ndarray) -> np.ndarray:
    """``(K, S)`` uint8: per row of ``near`` ``(K, k, S)`` bool (which of
    ``k < 256`` up-neighbours are nearest to each target), the place of the
    nearest one where it is the only one (elsewhere meaningless)."""
    k = near.shape[1]
    return (near.view(np.uint8) * np.arange(k, dtype=np.uint8)[:, None]).sum(axis=1,
                                                                             dtype=np.uint8)


def equal_loads(row: np.ndarray, owner: np.ndarray, weight: np.ndarray, n_rows: int,
                width: int) -> np.ndarray:
    """``(n_rows,)`` bool: whether the ``weight`` ``(N,)`` summed per (``row``,
    ``owner``) ``(N,)`` each is the same on the ``width`` owners of a row
    (summed by bincount: exact, no BLAS thread spinning on the workers' CPU)."""
    loads = np.bincount(row * width + owner, weights=weight.astype(np.float64),
                        minlength=n_rows * width).reshape(n_rows, width)
    return (loads == loads[:, :1]).all(axis=1)


def _going_up_pairs(c: np.ndarray, rows: np.ndarray, kind: np.ndarray, kk: np.ndarray,
                    tt: np.ndarray, n_kinds: int) -> tuple[np.ndarray, np.ndarray]:
    """``(b, p)`` int64: per switch ``rows[b]`` of kind ``kind[b]``, the
    pairs ``p`` of its kind (``kk[p]``, ascending with ``p``; ``n_kinds``
    kinds) whose target ``tt[p]`` it reaches going up (costs ``c`` ``(S,
    S)``)."""
    n_t = np.bincount(kk, minlength=n_kinds)
    b, p = runs((np.cumsum(n_t) - n_t)[kind], n_t[kind])
    x = c[rows[b], tt[p]]
    keep = (x >= UP_PHASE) & (x < INF)
    return b[keep], p[keep]


def lids_up_and_below(c: np.ndarray, dest: Destinations) -> tuple[np.ndarray, np.ndarray]:
    """``(going_up, below)`` ``(S,)``: per switch, the destination LIDs of
    ``dest`` it reaches going up, and those at or below it (costs ``c``
    ``(S, S)``).  Sums of bytes where a target has fewer than 256 LIDs
    (exact), else einsum, not a BLAS product (whose idle threads spin on
    the CPU the pool's workers need; exact below 2**53)."""
    count = np.bincount(dest.target, minlength=c.shape[1])
    if count.max(initial=0) < 256 and c.shape[1] < (1 << 24):
        w = count.astype(np.uint8)
        t = np.empty(c.shape, dtype=np.uint8)
        sums = []
        for bound in (UP_PHASE, INF):
            np.less(c, bound, out=t.view(bool))
            np.multiply(t, w, out=t)
            sums.append(t.sum(axis=1, dtype=np.uint32).astype(np.int64))
        return sums[1] - sums[0], sums[0]
    targets = np.flatnonzero(count)
    ct, wf = c[:, targets], count[targets].astype(np.float64)
    return (np.einsum("st,t->s", (ct >= UP_PHASE) & (ct < INF), wf),
            np.einsum("st,t->s", ct < UP_PHASE, wf))


def occurrences(length: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per entry of the slot tables (:func:`slot_tables`), ``(occ (F,),
    count (F,))`` int32: how many entries of its pattern's table before it
    hold the same value, and how many hold it in all.  A destination at entry
    ``e`` in round ``q = floor(x / length)`` is then the ``q * count[e] +
    occ[e]``-th of its group, whose parallel cables it takes in turn (one
    entry per value, as in every table without lost slots: ``q``, Dmodc's
    digit)."""
    pat = np.repeat(np.arange(len(length)), length)
    key = pat * (int(value.max(initial=0)) + 1) + value
    order = np.argsort(key, kind="stable")
    ks = key[order]
    first = np.ones(len(ks), dtype=bool)
    first[1:] = ks[1:] != ks[:-1]
    run = np.cumsum(first) - 1
    start = np.flatnonzero(first)
    occ = np.empty(len(key), dtype=np.int32)
    occ[order] = np.arange(len(ks)) - start[run]
    count = np.empty(len(key), dtype=np.int32)
    count[order] = np.diff(np.append(start, len(ks)))[run]
    return occ, count
