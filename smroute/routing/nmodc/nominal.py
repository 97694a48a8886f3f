"""Nmodc: Dmodc with nominal slots (beyond the paper), for degraded fat-trees.

Dmodc (:mod:`smroute.routing.dmodc`) takes ``floor(t / Pi) mod #C`` over the
groups ``C`` that lead closer to the target.  On a degraded tree a switch
that lost an up-link then uses a different modulus than its intact siblings
(``t mod 11`` next to ``t mod 12``), so damaged switches send different
destination sets through the same upper links and the all-to-all congestion
risk adds up.  Nmodc keeps Dmodc's costs, closer groups (eq. 1), NIDs and
port choice inside a group, and changes only which closer group a route
takes:

* **Nominal slots.**  Siblings are switches joined through shared
  up-neighbours (transitively); the up-neighbours of a switch's siblings,
  sorted by GUID, are its nominal slots ``U(s)`` and ``m(s) = #U(s)`` its
  nominal arity.  In a complete PGFT siblings share exactly the same
  up-neighbours, so ``U(s)`` is the switch's own up groups in Dmodc's order. A
  degraded switch keeps the slot each surviving up-neighbour has among its
  siblings.  A pendant up-neighbour (nothing above it and no other switch
  below: a management switch with a few hosts off one leaf, ranked above
  it) is no slot: its siblings keep the spines' arity, and the leaf it
  hangs off routes with its own groups (the management island shape:
  host-name shift HSD 2.86 to 2.72).  A group of siblings that lost one
  up-neighbour whole (an upper switch removed, not only its links) keeps
  that slot as a lost slot, found
  through the upper switches' own columns (:func:`_column_slots`): its
  switches keep their intact siblings' modulus (the 1,728-host tree's pod that
  lost an L2 switch: ``x mod 12``, not ``x mod 11``).  Where ``#U(s)`` exceeds
  the largest up arity of any switch of that rank by more than half, the
  siblings are no PGFT's (e.g. leaves on overlapping pairs of spines), and in
  the general up*/down* orientation (no tree levels), the switch's own up
  groups are its slots and it routes up exactly as Dmodc does (``C[x mod #C]``
  over its closer groups): it has no siblings to agree with, and a slot table
  with alternatives there spreads worse (Mellanox selene's spines: SP 26
  against Dmodc's 18).  So does a leaf whose up-neighbours all are top
  switches (a 2-level tree): no upper switch routes on, and a top's down-link
  reaches one leaf, whose end-ports bound its risk as they bound the leaf's
  own up-links'; there Dmodc's modulo over the surviving spines spreads a
  shift's flows more evenly (the 648-host study tree with 4-15 links removed:
  HSD of the topological shifts 1.54 against 1.6 with nominal slots).
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
  (selene: SP 18 to 4, A2A 35 to 24, RP 16 to 6).  Where it sends every
  destination that arrives from the other subtrees down one link (strided
  columns under directors), those take their own up-route's child instead
  (:mod:`smroute.routing.nmodc.descent`).
* **Up-going routes.**  With ``x = floor(t / Pi[s])``: a route with a single
  closer group takes it.  Otherwise it takes nominal
  slot ``j = x mod m`` if that slot's group leads closer; the destinations
  of a lost slot go to the other slots in a fixed probe order per redirect
  digit ``r = floor(t / Rd[s]) mod (m - 1)``, the first closer slot not yet
  taken by a lost slot before ``j`` for the same ``r``.  ``Rd[s]`` is the
  divider of the top switches above (:func:`redirect_dividers`): a digit no
  upper switch consumes, so the destinations a switch redirects to an upper
  switch spread over that switch's up-links.  Digit ``r`` probes slot ``j +
  1 + r`` first (a single lost slot's destinations go to every other slot
  alike), then the others in a pseudo-random order per ``r`` (rendezvous
  hashing): every switch probes a destination's slots in the same order, so
  siblings that lost the same slot keep sending the same destination sets
  through the same upper links, and the lost slots of ``m`` consecutive
  NIDs (a shift permutation's) go to distinct surviving slots.  Both cases
  are one closed form: the pattern's slot table ``T`` of length ``L = m``
  (every slot leads closer) or ``L = m * (m - 1)``, the group is ``T[x mod
  L]`` (every slot leads closer) or ``T[(x mod m) + m * r]``, and the port
  inside it ``floor(x / L) mod #g`` (eq. 4 with ``L`` for ``#C``).
* **Shares by capacity.**  Where a switch's up-going cables are bound by
  their destinations rather than their sources (fewer destinations per
  cable than end-ports below it) and its other up-going destinations, or
  unequal cable counts, load them unevenly, the destinations free to take
  any up group are shared out by water-filling instead of evenly
  (:func:`~smroute.routing.nmodc.slot_tables.capacity_tables`), then dealt over
  a group's cables (:mod:`~smroute.routing.nmodc.even_cables`; X5: A2A 9 to 7).
* **Wrap gaps.**  Where a shift permutation's window would not wrap
  cleanly from the last NID to the first (the leaves' modulus does not
  divide the host count), the NIDs get a gap at a leaf boundary
  (:mod:`~smroute.routing.nmodc.wrap`; 2-level trees with equal leaves:
  the 648-host study tree with spines and leaves removed).
* **Redirects by load.**  Once every table is computed, the leaves'
  entries whose nominal slot does not lead closer are rechosen by the load
  of the upper switches' up-links (:mod:`smroute.routing.nmodc.balance`): the
  probe order alone lets a leaf missing two slots put a destination on a
  third upper switch by itself, and on heavy damage these pile up (the
  1,728-host study tree with 655 links removed: A2A 87, 45 by load).

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

from smroute.routing.dmodc import INF, NO_ROUTE, UP_PHASE, Destinations, dividers
from smroute.routing.dmodc import costs_and_dividers as dmodc_costs
from smroute.routing.kernel import (
    RouteContext,
    cable_ports,
    closer_groups,
    dedupe_rows,
    local_routes,
    route_context,
    slot_offsets,
    unique_rows,
)
from smroute.routing.nmodc import native
from smroute.routing.nmodc.cables import cables_down, counted_cables, lost_up, structural_shares
from smroute.routing.nmodc.native import components
from smroute.routing.nmodc.slot_tables import (
    AlternativesMemo,
    capacity_tables,
    occurrences,
    slot_tables,
)
from smroute.routing.runs import place_in_runs
from smroute.routing.topology import SwitchGraph

__all__ = ["NominalSlots", "nominal_slots", "pendant_up", "nominal_dividers",
           "redirect_dividers", "packed_slots", "unpacked_slots", "costs_and_dividers",
           "route_block", "changed_slots"]


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


def pendant_up(g: SwitchGraph) -> np.ndarray:
    """``(G,)`` bool: the up groups whose upper switch is *pendant*: nothing
    above it and no other switch below it (a management switch with a few
    hosts off one leaf, ranked above it).  It carries no traffic between
    other switches, so it is no slot of its child's siblings
    (:func:`nominal_slots`) and no up cable of the modulus a shift's window
    takes (:func:`~smroute.routing.nmodc.wrap.wrap_gaps`)."""
    up = (g.rank[g.grp_remote] > g.rank[g.grp_switch]) & (g.rank[g.grp_switch] >= 0)
    return up & ((g.n_up == 0) & (g.grp_count == 1))[g.grp_remote]


def nominal_slots(g: SwitchGraph) -> NominalSlots:
    """The nominal slots of every switch of ``g`` (module doc)."""
    n = g.n_switches
    up = (g.rank[g.grp_remote] > g.rank[g.grp_switch]) & (g.rank[g.grp_switch] >= 0)
    gid = np.flatnonzero(up)
    lo, hi = g.grp_switch[gid], g.grp_remote[gid]
    # a pendant up-neighbour is no slot of its child's siblings; the child
    # routes with its own groups
    pendant = pendant_up(g)[gid]
    n_pendant = np.bincount(lo[pendant], minlength=n)
    # siblings: a switch as a child (0 .. n-1) joined to its up-neighbours as
    # parents (n .. 2n-1); a component's parents are its members' union
    comp = components(2 * n, lo[~pendant], hi[~pendant] + n)[:n]
    o = np.lexsort((g.sw_guid[hi], comp[lo]))
    o = o[~pendant[o]]
    kc, kh = comp[lo][o], hi[o]
    first = np.ones(len(kc), dtype=bool)
    first[1:] = (kc[1:] != kc[:-1]) | (kh[1:] != kh[:-1])
    uc, uh = kc[first], kh[first]  # union members, by component then GUID
    u_slot = place_in_runs(uc)
    # (without a pendant up-neighbour the siblings' components are the columns')
    u_slot, g_size = _column_slots(g, uc, uh, u_slot, None if pendant.any() else comp)
    size = g_size[comp]  # (S,) nominal arity of each switch's siblings
    top = np.zeros(g.max_rank + 2, dtype=np.int64)  # largest up arity per rank (+1: rank -1)
    np.maximum.at(top, g.rank + 1, g.n_up)
    nominal = 2 * size <= 3 * top[g.rank + 1]  # a rank's switches lost under a third
    # a leaf whose up-neighbours all are top switches (a 2-level tree) routes
    # as Dmodc does: no upper switch routes on, and a top's down-link reaches
    # one leaf, whose end-ports bound its risk
    routes_on = np.zeros(n, dtype=bool)
    routes_on[lo[g.n_up[hi] > 0]] = True
    nominal &= routes_on | (g.rank != 0)
    nominal &= n_pendant == 0
    if g.mode != "tree":  # the general up*/down* orientation: no PGFT levels
        nominal[:] = False
    arity = np.where(nominal, size, g.n_up - n_pendant).astype(np.int64)
    # slot of every up group: its place in the union, or among its own up groups
    keys = uc * n + uh
    ko = np.argsort(keys, kind="stable")
    at = np.searchsorted(keys[ko], comp[lo] * n + hi)
    own = place_in_runs(lo)  # lo ascending: groups by switch
    union = u_slot[ko[np.minimum(at, len(ko) - 1)]] if len(ko) else own
    slot = np.where(nominal[lo], union, own)
    slot_grp = np.full((n, max(int(arity.max(initial=0)), int(g.n_up.max(initial=0)), 1)), -1,
                       dtype=np.int64)
    slot_grp[lo, slot] = gid
    return NominalSlots(slot_grp, arity, ~nominal)


def _column_slots(g: SwitchGraph, uc: np.ndarray, uh: np.ndarray, u_slot: np.ndarray,
                  up_comp: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Slots for the up-neighbours a sibling group lost whole (a switch
    removed, not only its links).  ``uc`` / ``uh`` ``(U,)`` int64: the
    union members (sibling group label, up-neighbour), ``u_slot`` their
    place by GUID in the group.  Returns the members' slots and ``(S,)``
    int64 the nominal arity per group label.

    Up-neighbours joined through shared up-neighbours of their own are one
    *column* (the 1,728-host tree's L2 switches of one index in every pod,
    joined through their spines).  Groups joined through shared columns are
    one family.  A column's slot is the one the family's complete groups
    (a member in every column) give it, or, in a family without complete
    groups, its place by smallest GUID.  A group that lost one column keeps
    the others' slots and the lost one stays a lost slot: its arity is the
    family's, so its switches take ``x mod 12`` beside their intact
    neighbours instead of ``x mod 11``, and a destination enters its leaf
    through the same upper switch from every pod (with ``x mod 11`` it
    entered through up to 5).  A group that lost two columns or more keeps
    its own union: the redirects of several lost slots pile up on the
    survivors (the 1,728-host tree with 64+ switches removed: median SP 21
    against 24 with every group on columns).  A family with a group that has two members in
    one column, or whose complete groups disagree, keeps its groups' own
    unions.  ``up_comp``: the components of the switches joined by every up
    link (child 0 .. n-1, parent n .. 2n-1) if known."""
    n = g.n_switches
    size = np.bincount(uc, minlength=n)
    if not len(uc):
        return u_slot, size
    if up_comp is None:  # (U,) column of each member
        plo, phi = g.up_pairs()
        up_comp = components(2 * n, plo, phi + n)[:n]
    col = up_comp[uh]
    fam_of = components(2 * n, uc, col + n)[:n]  # per group label: its family
    fam = fam_of[uc]
    # columns per family; groups with two members in one column are no PGFT's
    fc = np.unique(fam * n + col)
    n_cols = np.bincount(fc // n, minlength=n)
    gc = uc * n + col
    dup = np.zeros(n, dtype=bool)
    srt = np.sort(gc)
    dup[srt[1:][srt[1:] == srt[:-1]] // n] = True
    bad_fam = np.zeros(n, dtype=bool)
    bad_fam[fam[dup[uc]]] = True
    complete = size[uc] == n_cols[fam]
    # the complete groups' slot of each (family, column): all must agree
    key = fam * n + col
    lo_pos = np.full(len(fc), np.iinfo(np.int64).max)
    hi_pos = np.full(len(fc), -1)
    at = np.searchsorted(fc, key)
    np.minimum.at(lo_pos, at[complete], u_slot[complete])
    np.maximum.at(hi_pos, at[complete], u_slot[complete])
    seen = hi_pos >= 0
    bad_fam[fc[seen & (lo_pos != hi_pos)] // n] = True
    # a family without complete groups: its columns by their smallest GUID
    none = np.ones(n, dtype=bool)
    none[fam[complete]] = False
    first_guid = np.full(len(fc), np.iinfo(np.uint64).max, dtype=np.uint64)
    np.minimum.at(first_guid, at, g.sw_guid[uh])
    o = np.lexsort((first_guid, fc // n))
    rank = np.empty(len(fc), dtype=np.int64)
    rank[o] = np.arange(len(fc)) - np.searchsorted(fc[o] // n, fc[o] // n)
    lo_pos = np.where(none[fc // n], rank, lo_pos)
    use = ~bad_fam[fam] & ~complete & (n_cols[fam] - size[uc] <= 1)  # one column lost
    out = u_slot.copy()
    out[use] = lo_pos[at[use]]
    g_size = size.copy()
    g_size[uc[use]] = n_cols[fam[use]]
    return out, g_size


def nominal_dividers(g: SwitchGraph, arity: np.ndarray) -> np.ndarray:
    """Algorithm 1's dividers with the nominal arities ``arity`` ``(S,)`` in
    place of the up-counts (:func:`~smroute.routing.dmodc.dividers`)."""
    return dividers(g, arity)


def redirect_dividers(g: SwitchGraph, pi: np.ndarray, n_eps: int) -> np.ndarray:
    """The divider of a lost slot's next digit, ``(S,)`` int64: the
    dividers ``pi`` ``(S,)`` of the top switches above each switch (the
    largest, where it reaches several), ``pi`` itself at a top.

    A destination whose nominal slot ``x mod m`` is lost takes the slot its
    next digit ``r`` picks (module doc).  The switches above consume the
    digits ``floor(t / pi[u]) mod m(u)`` up to their tops, and a digit they
    consume must not pick the redirect: where an upper switch's arity is
    ``m - 1`` (a pod's upper switches that lost a top switch), ``floor(x /
    m) mod (m - 1)`` is that switch's own digit, and every destination a
    leaf redirects to it goes up one of its links (the 1,728-host tree
    with an L2 switch and a spine of another column removed, on columns
    (:func:`_column_slots`): 24 destinations on one link, 15 with ``rd``).
    ``floor(t / rd) mod (m - 1)`` with ``rd`` the tops' divider is a digit
    no switch above consumes; where the ``n_eps`` end-ports do not reach ``rd
    (m - 1)`` (few leaves under a large director: it piles the redirects
    up), a leaf's is ``n_eps // (m - 1)`` unless an up switch's arity is ``m - 1``."""
    rd = pi.astype(np.int64).copy()
    lo, hi = g.up_pairs()
    lo_rank = g.rank[lo]
    for r in range(int(lo_rank.max(initial=-1)), -1, -1):
        sel = lo_rank == r
        np.maximum.at(rd, lo[sel], rd[hi[sel]])
    m = np.ones(len(rd), dtype=np.int64)  # the arity, from the dividers above
    np.maximum.at(m, lo, pi[hi].astype(np.int64) // np.maximum(pi[lo].astype(np.int64), 1))
    minus_one = np.zeros(len(rd), dtype=bool)
    np.logical_or.at(minus_one, lo, m[hi] == m[lo] - 1)
    short = (m >= 3) & (n_eps < rd * (m - 1)) & (g.rank == 0) & ~minus_one
    rd[short] = np.maximum(n_eps // (m[short] - 1), 1)
    return rd


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
    memo: AlternativesMemo | None = None,
    capacity: bool | np.ndarray = True,
    redirect: np.ndarray | None = None,
    cables: np.ndarray | None = None,
) -> None:
    """Nmodc's routes of ``switches`` for every destination (module doc).

    As :func:`smroute.routing.kernel.route_block`, with ``pi`` the nominal
    dividers and ``slot_grp`` ``(S, M)`` the nominal slots with the arity
    folded in (:func:`packed_slots`).  ``one_lookup``: lay every pattern's
    table out per switch as ports (one lookup per destination) or look the
    entry up, then the switch's port (two); ``None``: one lookup unless the
    tables outnumber the destinations (heavy damage).  Same tables either way.
    ``memo`` / ``redirect``: the lost slots' alternatives known from earlier
    blocks, :func:`redirect_dividers` (the same tables, sooner).
    ``capacity``: the switches with shares by capacity, ``(S,)`` bool or
    one for all: ``False`` for switches that cannot share
    (:func:`~smroute.routing.nmodc.slot_tables.may_share`) routed to a subset of
    the destinations, where the shares, which weigh the whole row, would see
    only part of it; the pool passes
    :func:`~smroute.routing.nmodc.slot_tables.sharing` (shares skipped where
    they cannot move anything: the same tables).  ``cables``: ``(G,)`` the
    cables of each group as the shares count them
    (:func:`~smroute.routing.nmodc.cables.counted_cables`, computed
    here where not given)."""
    out[:] = NO_ROUTE
    b = len(switches)
    if b == 0 or len(dest.lid) == 0:
        return
    if ctx is None:
        ctx = route_context(c, dest)
    if len(g.grp_remote):
        rd = redirect if redirect is not None else redirect_dividers(g, pi, len(g.ep_switch))
        _route_remote(g, pi, dest, switches, out, ctx, slot_grp, one_lookup, memo, capacity, rd,
                      cables)
    local_routes(dest, switches, out, ctx)


def packed_slots(slots: NominalSlots) -> np.ndarray:
    """``slot_grp`` with the arity folded in: ``(S, M)`` int64, -1 for a slot
    without a link, -2 past the switch's nominal arity, every entry -3 for a
    switch with its own groups as slots (one array for the worker pool and
    :func:`route_block`)."""
    m = slots.slot_grp.shape[1]
    past = np.arange(m)[None, :] >= slots.arity[:, None]
    return np.where(slots.own[:, None], -3, np.where(past, -2, slots.slot_grp))


def unpacked_slots(packed: np.ndarray) -> NominalSlots:
    """:func:`packed_slots` back to :class:`NominalSlots` (the arity of a
    switch with its own groups as slots is not kept: 0)."""
    own = packed[:, 0] == -3 if packed.shape[1] else np.zeros(len(packed), dtype=bool)
    arity = np.where(own, 0, (packed != -2).sum(axis=1)).astype(np.int64)
    return NominalSlots(np.where(packed >= 0, packed, -1), arity, own)


def _route_remote(
    g: SwitchGraph, pi: np.ndarray, dest: Destinations, switches: np.ndarray,
    out: np.ndarray, ctx: RouteContext, slot_grp: np.ndarray, one_lookup: bool | None,
    memo: AlternativesMemo | None, capacity: bool | np.ndarray, redirect: np.ndarray,
    cables: np.ndarray | None,
) -> None:
    """Routes through the switches' port groups (module doc); fills ``out`` rows.

    Closer groups per (switch, distinct target) exactly as Dmodc's kernel;
    patterns are keyed by the closer nominal slots (up-going) or group
    positions (down-going) and the nominal arity, and each pattern's slot
    table (:func:`~smroute.routing.nmodc.slot_tables.slot_tables`, by capacity where
    :func:`~smroute.routing.nmodc.slot_tables.capacity_tables` finds a gain) is laid
    out once per switch as ports."""
    b = len(switches)
    bi = np.arange(b)
    ng = g.grp_count[switches]
    gmax = max(int(ng.max()), 1)
    g0 = g.grp_first[switches]
    # up-going patterns read the closer bits through the nominal slots
    sg = slot_grp[switches]  # (B, M)
    n_slot = sg.shape[1]
    own = sg[:, 0] == -3  # routes as Dmodc: its closer groups, C[x mod #C]
    arity = np.where(own, 0, np.where(sg[:, -1] == -2, np.argmax(sg == -2, axis=1), n_slot))
    spos = np.where(sg >= 0, sg - g0[:, None], gmax)  # group position; gmax: none
    w = max(gmax, n_slot)
    nb = -(-w // 8)
    # one column more than any switch has groups: never closer (a lost slot)
    cl = closer_groups(g, switches, ctx, gmax + 1, closer=native.library() is None)
    gidx, valid, down_k, col_of, n_u = cl.gidx, cl.valid, cl.down, cl.col_of, cl.n_u
    cs_t, closer = cl.cs, cl.closer
    up_bu = (cs_t >= UP_PHASE) & (cs_t < INF)  # (U', B)
    keyb = native.pattern_keys(cl, own, arity, spos, nb)  # (B, U', nb + 1), compiled
    if keyb is None:  # (the reference)
        bits = np.zeros((n_u, b, nb * 8), dtype=bool)  # whole bytes: a flat packbits
        nominal_up = up_bu & ~own[None, :]
        np.logical_and(closer[:, :, :gmax], ~nominal_up[:, :, None], out=bits[:, :, :gmax])
        at_slot = (bi[:, None] * closer.shape[2] + spos).ravel()  # (np.take: C order)
        bits[:, :, :n_slot] |= np.take(closer.reshape(n_u, -1), at_slot, axis=1).reshape(
            n_u, b, n_slot) & nominal_up[:, :, None]
        mkey = np.where(nominal_up, arity[None, :], 0).astype(np.uint8)
        packed = np.packbits(bits, bitorder="little").reshape(n_u, b, nb)  # (U', B, nb)
        keyb = np.concatenate([packed, mkey[:, :, None]], axis=2).transpose(1, 0, 2)
    pat_of, first = dedupe_rows(np.ascontiguousarray(keyb.reshape(b * n_u, nb + 1)))
    pat_rows = keyb.reshape(b * n_u, nb + 1)[first]
    pat_of = pat_of.reshape(b, n_u)
    pbits = np.unpackbits(pat_rows[:, :nb], axis=1, bitorder="little")[:, :w].astype(bool)
    pm = pat_rows[:, nb].astype(np.int64)
    tables = slot_tables(pbits, pm, gmax, memo)
    is_lossy = (pm > 2) & (tables[0] == pm * (pm - 1))
    # per switch, per lookup column (group position, gmax + slot, dead): the group
    cols = np.concatenate([np.arange(gmax)[None, :].repeat(b, axis=0), spos,
                           np.full((b, w - n_slot + 1), gmax)], axis=1)  # (B, gmax + w + 1)
    dead = cols >= ng[:, None]
    grp_lut = gidx[bi[:, None], np.minimum(cols, gmax)]
    tgt = col_of[ctx.tgt_i]  # (D,)
    per_target = np.bincount(tgt, minlength=n_u)  # (U',) destination LIDs
    down_bu = cs_t < UP_PHASE  # (U', B) the target is the switch or below it
    share = capacity if isinstance(capacity, bool) else capacity[switches][:, None]
    length, start, val = tables
    if np.any(share):
        counted = counted_cables(g) if cables is None else cables
        struct = structural_shares(g)[switches]
        toward = None
        lost = np.flatnonzero(lost_up(g)[ctx.tgt_u]) if struct.any() else np.zeros(0, np.int64)
        if len(lost):  # the targets that lost a cable up: a column each
            ext = np.concatenate([np.arange(n_u), col_of[lost]])
            own_col = np.full(len(ctx.tgt_u), -1)
            own_col[lost] = n_u + np.arange(len(lost))
            tgt = np.where(own_col[ctx.tgt_i] >= 0, own_col[ctx.tgt_i], tgt)
            pat_of, up_bu, down_bu = pat_of[:, ext], up_bu[ext], down_bu[ext]
            per_target = np.bincount(tgt, minlength=len(ext))
            sb = np.flatnonzero(struct)
            toward = (np.tile(sb, len(lost)), np.repeat(own_col[lost], len(sb)),
                      cables_down(g, ctx.tgt_u[lost], gidx[sb], counted))
        (length, start, val), pat_of = capacity_tables(
            tables, pat_of, pbits.sum(axis=1), up_bu.T & share, ((~down_k) & valid).sum(axis=1),
            per_target, per_target @ down_bu, cols, counted[gidx], struct, toward=toward)
    pat_len = length[pat_of]  # (B, U')
    piv = pi[switches]
    # a down-going route with several closer groups takes C[t mod #C]
    spread = down_bu.T & (pat_len > 1)  # (B, U')
    # a table with lost slots: entry j + m * r, r the redirect digit
    lossy = np.zeros(len(length), dtype=bool)  # (capacity tables, appended, have none)
    lossy[:len(pat_rows)] = is_lossy
    lm = lossy[pat_of]  # (B, U')
    parallel = bool((g.grp_port_count[grp_lut][~dead] > 1).any())
    if native.nominal_ports(dest.nid, tgt, ctx.lid_cols, piv, spread, lm,
                            (arity, piv, redirect[switches]), pat_len, start[pat_of], val, dead,
                            g.grp_port_first[grp_lut], g.grp_port_count[grp_lut], g.grp_ports,
                            occurrences(length, val) if parallel else None, out):
        return  # (compiled: the same ports as below, the reference)
    nid = dest.nid.astype(np.int32)
    x = (nid // np.int32(piv[0]))[None, :] if bool((piv == piv[0]).all()) else (
        nid[None, :] // piv[:, None].astype(np.int32))
    if spread.any():
        x = np.where(np.take(spread, tgt, axis=1), nid[None, :], x)
    rows = np.flatnonzero(lm.any(axis=1))
    digit = x
    if len(rows):  # the switches with lost slots, by (arity, divider, redirect divider)
        kinds, kind_of = unique_rows(np.stack([arity[rows], piv[rows], redirect[switches[rows]]],
                                              axis=1))
        m, p, q = (kinds[:, i, None].astype(np.int32) for i in range(3))
        v = (nid // p % m + m * (nid // q % (m - 1))).astype(np.float32)  # (K, D) j + m * r
        kind = np.zeros(b, dtype=np.intp)
        kind[rows] = kind_of.ravel()
        digit = np.where(np.take(lm, tgt, axis=1), v[kind], x.astype(np.float32))  # (exact)
    n_flat, n_col = len(val), cols.shape[1]
    one = bool(one_lookup or (one_lookup is None and n_flat <= len(dest.lid)))
    # (B, D) the table entries (one lookup: in the switch's own copy of the tables)
    first = start[pat_of] + (bi * n_flat)[:, None] if one else start[pat_of]
    quot, ent_f = slot_offsets(digit, pat_len, tgt, first, quotient=parallel)
    if parallel and digit is not x:  # the round of a lost slot's entry: of x
        quot = slot_offsets(x, pat_len, tgt, first, quotient=True)[0]
    at = ent = ent_f.astype(np.intp)
    if one:  # per switch, every table entry's column: one lookup per destination
        sel = val[None, :] + (bi * n_col)[:, None]  # (B, F)
    else:  # many patterns (heavy damage): the entry's column, then the switch's lookup
        sel = np.arange(b * n_col).reshape(b, n_col)
        at = np.take(val.astype(np.int64), ent)
        at += (bi * n_col)[:, None]
    grp_sel, dead_sel = grp_lut.ravel()[sel], dead.ravel()[sel]
    if not parallel:
        port_lut = np.where(dead_sel, NO_ROUTE, g.grp_ports[g.grp_port_first[grp_sel]])
        port = np.take(port_lut.astype(np.uint8).ravel(), at)
    else:  # parallel links: the group's destinations take its cables in turn
        occ, count = occurrences(length, val)
        if one:  # the entries are in the switch's copy of the tables
            occ, count = np.tile(occ, b), np.tile(count, b)
        turn = quot if (count == 1).all() else quot * count[ent] + occ[ent]
        port = cable_ports(g, grp_sel, dead_sel, at, turn)
    out.reshape(b, -1)[:, ctx.lid_cols] = port


def costs_and_dividers(g: SwitchGraph, slots: NominalSlots) -> tuple[np.ndarray, np.ndarray]:
    """Dmodc's encoded costs ``(S, S)`` uint8 and Nmodc's nominal dividers ``(S,)``."""
    return dmodc_costs(g)[0], nominal_dividers(g, slots.arity)


def changed_slots(g0: SwitchGraph, s0: NominalSlots, g1: SwitchGraph,
                  s1: NominalSlots) -> np.ndarray:
    """Switch ids (same switch set) whose nominal slots differ between two
    graphs of a fabric and their :func:`nominal_slots`, ``(R,)`` int64: a
    slot leads to another switch, or to none, or the nominal arity changed
    (what an incremental reroute must recompute in full, beside the
    switches whose port groups changed)."""
    a, b = _slot_remotes(g0, s0), _slot_remotes(g1, s1)
    w = max(a.shape[1], b.shape[1])
    a = np.pad(a, ((0, 0), (0, w - a.shape[1])), constant_values=-2)
    b = np.pad(b, ((0, 0), (0, w - b.shape[1])), constant_values=-2)
    return np.flatnonzero((a != b).any(axis=1))


def _slot_remotes(g: SwitchGraph, slots: NominalSlots) -> np.ndarray:
    """``(S, M)`` int64: the switch behind each nominal slot, -1 without a
    link, -2 past the nominal arity."""
    p = packed_slots(slots)
    return np.where(p >= 0, g.grp_remote[np.maximum(p, 0)] if len(g.grp_remote) else -1, p)
