"""Nmodc: Dmodc with nominal slots (beyond the paper), for degraded fat-trees.

Dmodc (:mod:`smroute.routing.dmodc`) takes ``floor(t / Pi) mod #C`` over the
groups ``C`` that lead closer to the target.  On a degraded tree a switch
that lost an up-link then uses a different modulus than its intact siblings
(``t mod 11`` next to ``t mod 12``), so damaged switches send different
destination sets through the same upper links and the all-to-all congestion
risk adds up.  Nmodc keeps Dmodc's costs, closer groups (eq. 1), NIDs and
port choice inside a group, and changes only which closer group an
up-going route takes:

* **Nominal slots.**  Siblings are switches joined through shared
  up-neighbours (transitively); the up-neighbours of a switch's siblings,
  sorted by GUID, are its nominal slots ``U(s)`` and ``m(s) = #U(s)`` its
  nominal arity.  In a complete PGFT siblings share exactly the same
  up-neighbours, so ``U(s)`` is the switch's own up groups in Dmodc's order.
  A degraded switch keeps the slot each surviving up-neighbour has among its
  siblings.  Where ``#U(s)`` exceeds the largest up arity of any switch of
  that rank by more than half, the siblings are no PGFT's (e.g. leaves on
  overlapping pairs of spines), and in the general up*/down* orientation
  (no tree levels), the switch's own up groups are its slots and it routes
  up exactly as Dmodc does (``C[x mod #C]`` over its closer groups): it has no
  siblings to agree with, and a slot table with alternatives there spreads
  worse (Mellanox selene's spines: SP 26 against Dmodc's 18).  So does a
  leaf whose up-neighbours all are top switches (a 2-level tree): no upper
  switch routes on, and a top's down-link reaches one leaf, whose end-ports
  bound its risk as they bound the leaf's own up-links'; there Dmodc's
  modulo over the surviving spines spreads a shift's flows more evenly
  (the 648-host study tree with 4-15 links removed: HSD of the topological
  shifts 1.54 against 1.6 with nominal slots).
* **Nominal dividers.**  Algorithm 1's max reduction with ``m(s)`` in place
  of the up-count: ``Pi[s'] = max over children s of Pi[s] * m(s)``.
* **Down-going routes.**  A route whose target lies below takes ``C[t mod
  #C]`` (Dmodc: ``C[floor(t / Pi[s]) mod #C]``).  In a PGFT a switch has one
  closer group below it, so nothing changes there.  Where it has several
  (cores joined to several spines of a pod, as on Mellanox selene's storage
  fabric), the destinations that reach it from above differ in the digits
  the up-going choices below consumed, not in ``floor(t / Pi)``: with
  ``Pi`` above a pod's NID count that digit is the same for the whole pod,
  and Dmodc sends all of a pod's destinations through one down-link.  The
  lowest digit spreads one leaf's end-ports over the closer down-links
  (selene: SP 18 to 4, A2A 35 to 24, RP 16 to 6).
* **Up-going routes.**  With ``x = floor(t / Pi[s])``: a route with a single
  closer group takes it.  Otherwise it takes nominal
  slot ``j = x mod m`` if that slot's group leads closer; the destinations
  of a lost slot go to the other slots in a fixed pseudo-random probe order
  per next digit ``r = floor(x / m) mod (m - 1)`` (rendezvous hashing), the
  first closer slot not yet taken by a lost slot before ``j`` for the same
  ``r``: every switch probes a destination's slots in the same order, so
  siblings that lost the same slot keep sending the same destination sets
  through the same upper links, the lost load spreads evenly over the
  surviving slots, and the lost slots of ``m`` consecutive NIDs (a shift
  permutation's) go to distinct surviving slots.  Both cases are one closed
  form: the pattern's slot table ``T`` of length ``L = m`` (every slot leads
  closer) or ``L = m * (m - 1)`` (``T[j + m * r]``), the group is
  ``T[x mod L]`` and the port inside it ``floor(x / L) mod #g`` (eq. 4 with
  ``L`` for ``#C``).

Every route still takes a closer group, so Dmodc's guarantees hold as they
are: minimal up*/down* routes (no credit loop), and every pair with an
up*/down* path delivered.  On a complete PGFT every up-going pattern has all
``m`` slots (or one closer group), ``L = #C`` and the dividers are Dmodc's:
the tables are Dmodc's, entry for entry.  The block kernel is Dmodc's
vectorized one with other slot tables: one modulo and one lookup per
destination (two when the tables outnumber the destinations, on heavily
degraded trees).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smroute.fabric.graph import components
from smroute.routing.dmodc import (
    INF,
    NO_ROUTE,
    UP_PHASE,
    Destinations,
    RouteContext,
    _dedupe_rows,
    _mod,
    route_context,
)
from smroute.routing.dmodc import costs_and_dividers as dmodc_costs
from smroute.routing.topology import SwitchGraph

__all__ = ["NominalSlots", "nominal_slots", "nominal_dividers", "packed_slots",
           "costs_and_dividers", "route_block"]


@dataclass(frozen=True, eq=False)
class NominalSlots:
    """Nominal up slots of every switch.

    slot_grp ``(S, M)`` int64: the group id (index into the ``grp_*`` arrays)
    of slot ``j`` of switch ``s``, -1 where ``s`` has no link to that slot's
    switch (or ``j >= arity[s]``); arity ``(S,)`` int64: ``m(s)``, 0 for a
    switch without up-neighbours; own ``(S,)`` bool: the switch's slots are
    its own up groups (no PGFT siblings): it routes as Dmodc does.
    """

    slot_grp: np.ndarray
    arity: np.ndarray
    own: np.ndarray


def nominal_slots(g: SwitchGraph) -> NominalSlots:
    """The nominal slots of every switch of ``g`` (module doc)."""
    n = g.n_switches
    up = (g.rank[g.grp_remote] > g.rank[g.grp_switch]) & (g.rank[g.grp_switch] >= 0)
    gid = np.flatnonzero(up)
    lo, hi = g.grp_switch[gid], g.grp_remote[gid]
    # siblings: a switch as a child (0 .. n-1) joined to its up-neighbours as
    # parents (n .. 2n-1); a component's parents are its members' union
    comp = components(2 * n, lo, hi + n)[:n]
    o = np.lexsort((g.sw_guid[hi], comp[lo]))
    kc, kh = comp[lo][o], hi[o]
    first = np.ones(len(kc), dtype=bool)
    first[1:] = (kc[1:] != kc[:-1]) | (kh[1:] != kh[:-1])
    uc, uh = kc[first], kh[first]  # union members, by component then GUID
    u_slot = np.arange(len(uc)) - np.searchsorted(uc, uc)
    size = np.bincount(uc, minlength=n)[comp]  # (S,) union size of each switch's siblings
    top = np.zeros(g.max_rank + 2, dtype=np.int64)  # largest up arity per rank (+1: rank -1)
    np.maximum.at(top, g.rank + 1, g.n_up)
    nominal = 2 * size <= 3 * top[g.rank + 1]  # a rank's switches lost under a third
    # a leaf whose up-neighbours all are top switches (a 2-level tree) routes
    # as Dmodc does: no upper switch routes on, and a top's down-link reaches
    # one leaf, whose end-ports bound its risk
    routes_on = np.zeros(n, dtype=bool)
    np.logical_or.at(routes_on, lo, g.n_up[hi] > 0)
    nominal &= routes_on | (g.rank != 0)
    if g.mode != "tree":  # the general up*/down* orientation: no PGFT levels
        nominal[:] = False
    arity = np.where(nominal, size, g.n_up).astype(np.int64)
    # slot of every up group: its place in the union, or among its own up groups
    keys = uc * n + uh
    ko = np.argsort(keys, kind="stable")
    at = np.searchsorted(keys[ko], comp[lo] * n + hi)
    own = np.arange(len(lo)) - np.searchsorted(lo, lo)  # lo ascending: groups by switch
    slot = np.where(nominal[lo], u_slot[ko[np.minimum(at, len(ko) - 1)]], own)
    slot_grp = np.full((n, max(int(arity.max(initial=0)), 1)), -1, dtype=np.int64)
    slot_grp[lo, slot] = gid
    return NominalSlots(slot_grp, arity, ~nominal)


def nominal_dividers(g: SwitchGraph, arity: np.ndarray) -> np.ndarray:
    """Algorithm 1's dividers with the nominal arities ``arity`` ``(S,)`` in
    place of the up-counts: ``(S,)`` int64, 1 at the leaves, going up
    ``Pi[s'] = max over children s of Pi[s] * arity[s]``."""
    pi = np.ones(g.n_switches, dtype=np.int64)
    lo, hi = g.up_pairs()
    lo_rank = g.rank[lo]
    for r in range(g.max_rank):
        sel = lo_rank == r
        np.maximum.at(pi, hi[sel], pi[lo[sel]] * arity[lo[sel]])
    return pi


def route_block(
    g: SwitchGraph,
    c: np.ndarray,
    pi: np.ndarray,
    dest: Destinations,
    switches: np.ndarray,
    out: np.ndarray,
    slot_grp: np.ndarray,
    ctx: RouteContext | None = None,
    *,
    one_lookup: bool | None = None,
) -> None:
    """Nmodc's routes of ``switches`` for every destination (module doc).

    As :func:`smroute.routing.dmodc.route_block`, with ``pi`` the nominal
    dividers and ``slot_grp`` ``(S, M)`` the nominal slots with the arity
    folded in (:func:`packed_slots`).  ``one_lookup``: lay every pattern's
    table out per switch as ports (one lookup per destination) or look the
    entry up, then the switch's port (two); ``None``: one lookup unless the
    tables outnumber the destinations (heavy damage).  Same tables either way.
    """
    out[:] = NO_ROUTE
    b = len(switches)
    if b == 0 or len(dest.lid) == 0:
        return
    if ctx is None:
        ctx = route_context(c, dest)
    if len(g.grp_remote):
        _route_remote(g, pi, dest, switches, out, ctx, slot_grp, one_lookup)
    lo = np.searchsorted(ctx.local_target, switches, side="left")
    hi = np.searchsorted(ctx.local_target, switches, side="right")
    cnt_h = hi - lo
    if cnt_h.any():
        hb = np.repeat(np.arange(b), cnt_h)
        hd = ctx.local_order[np.repeat(lo - np.cumsum(cnt_h) + cnt_h, cnt_h)
                             + np.arange(int(cnt_h.sum()))]
        out.reshape(b, -1)[hb, dest.lid[hd]] = dest.local_port[hd]


def packed_slots(slots: NominalSlots) -> np.ndarray:
    """``slot_grp`` with the arity folded in: ``(S, M)`` int64, -1 for a slot
    without a link, -2 past the switch's nominal arity, every entry -3 for a
    switch with its own groups as slots (one array for the worker pool and
    :func:`route_block`)."""
    m = slots.slot_grp.shape[1]
    past = np.arange(m)[None, :] >= slots.arity[:, None]
    return np.where(slots.own[:, None], -3, np.where(past, -2, slots.slot_grp))


def _probe_offsets(m: int) -> np.ndarray:
    """``(m - 1, m - 1)`` int64: row ``r`` is the order in which a destination
    whose nominal slot ``j`` is lost probes the other slots: ``j + 1 +
    offsets[r, k]`` (mod ``m``), a fixed pseudo-random permutation of
    ``0 .. m - 2`` per ``r`` (rendezvous hashing: every switch probes in the
    same order, so switches agree wherever they have the slot; the first
    surviving slot is close to uniform over the survivors)."""
    n = max(m - 1, 1)
    r = np.arange(n, dtype=np.uint64)[:, None]
    k = np.arange(n, dtype=np.uint64)[None, :]
    h = (r * np.uint64(0x9E3779B97F4A7C15) + k * np.uint64(0xBF58476D1CE4E5B9)
         + np.uint64(m * 0x94D049BB133111EB % (1 << 64)))
    h ^= h >> np.uint64(31)
    h *= np.uint64(0xD6E8FEB86659FD93)
    h ^= h >> np.uint64(29)
    return np.argsort(h, axis=1, kind="stable").astype(np.int64)


def _alternatives(avail: np.ndarray, m: int) -> np.ndarray:
    """Where the lost slots of ``P`` patterns go: ``avail`` ``(P, m)`` bool
    (closer nominal slots, at least two per pattern) -> ``(P, m - 1, m)``
    int16, the slot taken by a destination of slot ``j`` with next digit
    ``r`` (``[p, r, j]``; ``j`` itself where it leads closer).  Lost slots
    are served in slot order, each taking the first closer slot of its
    probe order (:func:`_probe_offsets`) that the fewest lost slots before
    it took for the same ``r`` (level by level: every closer slot once, then
    every one twice, ...): the lost slots of ``m`` consecutive NIDs spread
    evenly over the closer groups."""
    n_p = len(avail)
    off = _probe_offsets(m).ravel().astype(np.int32)  # [r * (m - 1) + k]
    out = np.broadcast_to(np.arange(m, dtype=np.int16)[None, None, :], (n_p, m - 1, m)).copy()
    flat_out, flat_avail = out.reshape(-1), avail.reshape(-1)
    taken = np.zeros(n_p * (m - 1) * m, dtype=np.int16)  # [(p * (m - 1) + r) * m + slot]
    lost_p, lost_j = np.nonzero(~avail)  # by pattern, then slot: the serving order
    rank = np.arange(len(lost_p)) - np.searchsorted(lost_p, lost_p)
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


def _slot_tables(pbits: np.ndarray, pm: np.ndarray, gmax: int) -> tuple[np.ndarray, ...]:
    """Slot tables of ``P`` patterns: ``pbits`` ``(P, W)`` bool (closer
    nominal slots of an up-going pattern, closer group positions of a
    down-going one), ``pm`` ``(P,)`` nominal arity (0: down-going).

    Returns ``(length (P,), start (P,), value (F,))``: pattern ``p``'s table
    is ``value[start[p] : start[p] + length[p]]``, entries encoded as a
    column of the per-switch lookup of :func:`_route_remote`: a group
    position (down-going), ``gmax`` + a nominal slot (up-going), or
    ``gmax + W`` (no closer group).  An up-going table with lost slots has
    ``m * (m - 1)`` entries: entry ``j + m * r`` is slot ``j`` if it leads
    closer, else its alternative for ``r`` (:func:`_alternatives`)."""
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
        alt = _alternatives(pbits[ps, :m], m).reshape(len(ps), -1)  # (p, (m - 1) * m)
        value[start[ps, None] + np.arange(alt.shape[1])[None, :]] = gmax + alt
    return length, start, value


def _occurrences(length: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per entry of the slot tables (:func:`_slot_tables`), ``(occ (F,),
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


def _route_remote(
    g: SwitchGraph, pi: np.ndarray, dest: Destinations, switches: np.ndarray,
    out: np.ndarray, ctx: RouteContext, slot_grp: np.ndarray, one_lookup: bool | None,
) -> None:
    """Routes through the switches' port groups (module doc); fills ``out`` rows.

    Closer groups per (switch, distinct target) exactly as Dmodc's kernel;
    patterns are keyed by the closer nominal slots (up-going) or group
    positions (down-going) and the nominal arity, and each pattern's slot
    table (:func:`_slot_tables`) is laid out once per switch as ports."""
    b = len(switches)
    bi = np.arange(b)
    ng = g.grp_count[switches]
    gmax = max(int(ng.max()), 1)
    valid = np.arange(gmax)[None, :] < ng[:, None]
    g0 = g.grp_first[switches]
    gidx = np.where(valid, g0[:, None] + np.arange(gmax)[None, :], 0)
    remote = np.where(valid, g.grp_remote[gidx], len(ctx.ext) - 1)
    rows_used, row_of = np.unique(np.concatenate([switches, remote.ravel()]), return_inverse=True)
    sub_t = np.take(ctx.ext_t, rows_used, axis=1)  # (U, R)
    col_of, reps = _dedupe_rows(sub_t)
    n_u = len(reps)
    sub_t = sub_t[reps]  # (U', R)
    cs_t = sub_t[:, row_of[:b]]  # (U', B)
    hop = np.uint8(UP_PHASE - 1)
    as_down = np.where(sub_t < UP_PHASE, sub_t, np.uint8(INF))
    as_up = np.where(sub_t < INF, (sub_t & hop) | np.uint8(UP_PHASE), np.uint8(INF))
    down_k = g.rank[np.where(valid, remote, 0)] < g.rank[switches][:, None]  # (B, G)
    pick = row_of[b:].reshape(remote.shape) + np.where(down_k, 0, sub_t.shape[1])
    rem_t = np.concatenate([as_down, as_up], axis=1)[:, pick]  # (U', B, G)
    closer = rem_t < cs_t[:, :, None]
    closer &= (cs_t < INF)[:, :, None]
    # up-going patterns read the closer bits through the nominal slots
    sg = slot_grp[switches]  # (B, M)
    n_slot = sg.shape[1]
    arity = np.where(sg[:, -1] == -2, np.argmax(sg == -2, axis=1), n_slot)  # (B,)
    own = sg[:, 0] == -3  # routes as Dmodc: its closer groups, C[x mod #C]
    arity[own] = 0
    spos = np.where(sg >= 0, sg - g0[:, None], gmax)  # group position; gmax: none
    padded = np.concatenate([closer, np.zeros(closer.shape[:2] + (1,), bool)], axis=2)
    up_bu = (cs_t >= UP_PHASE) & (cs_t < INF)  # (U', B)
    w = max(gmax, n_slot)
    bits = np.zeros((n_u, b, w), dtype=bool)
    nominal_up = up_bu & ~own[None, :]
    bits[:, :, :n_slot] = padded[:, bi[:, None], spos] & nominal_up[:, :, None]
    bits[:, :, :gmax] |= closer & ~nominal_up[:, :, None]
    mkey = np.where(nominal_up, arity[None, :], 0).astype(np.uint8)
    packed = np.packbits(bits, axis=2, bitorder="little")  # (U', B, nb)
    nb = packed.shape[2]
    keyb = np.concatenate([packed, mkey[:, :, None]], axis=2).transpose(1, 0, 2)
    pat_of, first = _dedupe_rows(np.ascontiguousarray(keyb.reshape(b * n_u, nb + 1)))
    pat_rows = keyb.reshape(b * n_u, nb + 1)[first]
    pat_of = pat_of.reshape(b, n_u)
    pbits = np.unpackbits(pat_rows[:, :nb], axis=1, bitorder="little")[:, :w].astype(bool)
    length, start, val = _slot_tables(pbits, pat_rows[:, nb].astype(np.int64), gmax)
    # per switch, per lookup column (group position, gmax + slot, dead): the group
    cols = np.concatenate([np.arange(gmax)[None, :].repeat(b, axis=0), spos,
                           np.full((b, w - n_slot + 1), gmax)], axis=1)  # (B, gmax + w + 1)
    dead = cols >= ng[:, None]
    gidx_pad = np.concatenate([gidx, np.zeros((b, 1), dtype=gidx.dtype)], axis=1)
    grp_lut = gidx_pad[bi[:, None], np.minimum(cols, gmax)]
    tgt = col_of[ctx.tgt_i]  # (D,)
    piv = pi[switches]
    nid = dest.nid.astype(np.int32)
    x = (nid // np.int32(piv[0]))[None, :] if bool((piv == piv[0]).all()) else (
        nid[None, :] // piv[:, None].astype(np.int32))
    # a down-going route with several closer groups takes C[t mod #C]
    spread = ((cs_t < UP_PHASE).T & (length[pat_of] > 1))  # (B, U')
    if spread.any():
        x = np.where(spread[:, tgt], nid[None, :], x)
    len_d = length[pat_of].astype(np.int32)[:, tgt]  # (B, D)
    ent = start[pat_of].astype(np.int32)[:, tgt] + _mod(x, len_d)  # table entry
    n_flat, n_col = len(val), cols.shape[1]
    if one_lookup or (one_lookup is None and n_flat <= len(dest.lid)):
        # per switch, every table entry's column: one lookup per destination
        sel = val[None, :] + (bi * n_col)[:, None]  # (B, F)
        at = ent + (bi * n_flat)[:, None].astype(np.int32)
    else:  # many patterns (heavy damage): the entry's column, then the switch's lookup
        sel = np.arange(b * n_col).reshape(b, n_col)
        at = val[ent] + (bi * n_col)[:, None]
    grp_sel, dead_sel = grp_lut.ravel()[sel], dead.ravel()[sel]
    cnt = g.grp_port_count[grp_sel]
    if (cnt[~dead_sel] == 1).all():
        port_lut = np.where(dead_sel, NO_ROUTE, g.grp_ports[g.grp_port_first[grp_sel]])
        port = port_lut.astype(np.uint8).ravel()[at]
    else:  # parallel links: the group's destinations take its cables in turn
        grp = grp_sel.ravel()[at]
        occ, count = _occurrences(length, val)
        turn = (x // len_d) * count[ent] + occ[ent]
        port = g.grp_ports[g.grp_port_first[grp] + turn % g.grp_port_count[grp]]
        port = np.where(dead_sel.ravel()[at], NO_ROUTE, port)
    out.reshape(b, -1)[:, dest.lid] = port


def costs_and_dividers(g: SwitchGraph) -> tuple[np.ndarray, np.ndarray]:
    """Dmodc's encoded costs ``(S, S)`` uint8 and Nmodc's nominal dividers ``(S,)``."""
    c, _ = dmodc_costs(g)
    return c, nominal_dividers(g, nominal_slots(g).arity)


def changed_slots(g0: SwitchGraph, g1: SwitchGraph) -> np.ndarray:
    """Switch ids (same switch set) whose nominal slots differ between two
    graphs of a fabric, ``(R,)`` int64: a slot leads to another switch, or to
    none, or the nominal arity changed (what an incremental reroute must
    recompute in full, beside the switches whose port groups changed)."""
    a, b = _slot_remotes(g0), _slot_remotes(g1)
    w = max(a.shape[1], b.shape[1])
    a = np.pad(a, ((0, 0), (0, w - a.shape[1])), constant_values=-2)
    b = np.pad(b, ((0, 0), (0, w - b.shape[1])), constant_values=-2)
    return np.flatnonzero((a != b).any(axis=1))


def _slot_remotes(g: SwitchGraph) -> np.ndarray:
    """``(S, M)`` int64: the switch behind each nominal slot, -1 without a
    link, -2 past the nominal arity."""
    p = packed_slots(nominal_slots(g))
    return np.where(p >= 0, g.grp_remote[np.maximum(p, 0)] if len(g.grp_remote) else -1, p)
