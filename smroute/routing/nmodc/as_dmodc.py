"""Where Nmodc routes as Dmodc does: the test that lets the engine skip its
nominal slots and passes (:class:`~smroute.routing.nmodc.engine.Nmodc`
then runs Dmodc's kernel and no pass: the same tables, sooner).

Nmodc differs from Dmodc only where something is lost or uneven
(:mod:`smroute.routing.nmodc.nominal`).  :func:`as_dmodc` proves, from the
switch graph, the costs and the destinations, that nothing is, i.e. that
every part of Nmodc gives Dmodc's entries:

1. **Siblings share their up-neighbours** (a switch's siblings: the
   switches joined to it through shared up-neighbours).  Then the union of
   a sibling group's up-neighbours is each member's own set, sorted by GUID
   as Dmodc's groups are: nominal slot ``j`` is up group ``j``.  Every
   upper switch's children are then one whole sibling group, so the up
   groups of a switch all reach the same switches going down.
2. **No group lacks a column of its family** (the lost slots of
   :func:`~smroute.routing.nmodc.nominal.nominal_slots`: an upper switch
   removed whole): every group has one up-neighbour in each column of its
   family.  With 1, the nominal arity is the up-count: Nmodc's dividers are
   Dmodc's, and no slot is lost.
3. **Unique down paths**: from every switch, at most one down path to
   another (counted by a sum over the children against the costs' count of
   the switches below): a route going down has one closer group, so
   Nmodc's spread over several (``C[t mod #C]``) never applies.
4. **No partial pattern**: towards any target, either all of a sibling
   group's up-neighbours are nearest or exactly one is.  Nmodc's slot
   tables then hold all ``m`` slots or the one closer group, Dmodc's
   ``C[x mod #C]`` entry for entry, and the lost-slot redirects never
   apply, nor do the redirects by load (:mod:`~smroute.routing.nmodc.balance`:
   their only candidate is the kernel's group).
5. **No share by capacity**
   (:func:`~smroute.routing.nmodc.slot_tables.may_share`, from the same
   counts without the ``(S, T)`` products, and a switch whose up groups
   have unequal cable counts): no switch may share, or each
   that may has the same cables on each up group and the same destination
   LIDs on each from the targets only it leads closer to: the water-filling
   is then the even spread (no gain) and the kernel keeps its tables, and
   no such switch shares (:func:`~smroute.routing.nmodc.slot_tables.even_shares`,
   the test :func:`~smroute.routing.nmodc.slot_tables.sharing` applies), so the
   even up cables (:mod:`~smroute.routing.nmodc.even_cables`) keep Dmodc's
   cables too.  By 1 and 4 no target one up-neighbour alone is nearest to
   lies below a member of the sibling group, and every member reaches each
   going up: the loads are the group's, computed once with condition 4
   (every switch of a complete PGFT settled there; even_shares reads only
   the others).
6. **No wrap gap**: :func:`~smroute.routing.nmodc.wrap.wrap_gaps` keeps
   the topological NIDs (the caller checks it).

On a damaged tree most switches still route as Dmodc does, given Nmodc's
dividers and NIDs: :func:`dmodc_rows` finds them switch by switch (their
slots complete and their own, conditions 3 and 4 at the switch, no share by
capacity there), and Nmodc's kernel routes their rows with Dmodc's.

Every complete PGFT passes (with parallel cables and aggregation nodes), so
does such a tree that lost whole top switches of every pod alike;
tests/test_nmodc_as_dmodc.py holds the test to Nmodc's full path on
complete and damaged trees.  The cost: a few passes over the cost rows of
the sibling groups' up-neighbours (the 11,664-host tree: 648 of its 1,620
rows) and of the switches with several down groups (PGFT(3;18,18,18): 1 ms,
3% of Dmodc's routing time).
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import UP_PHASE, Destinations
from smroute.routing.kernel import dedupe_rows
from smroute.routing.nmodc.cables import counted_cables, unequal_cables
from smroute.routing.nmodc.native import components
from smroute.routing.nmodc.nominal import NominalSlots
from smroute.routing.nmodc.slot_tables import equal_loads, even_shares, sole_nearest
from smroute.routing.runs import place_in_runs
from smroute.routing.topology import SwitchGraph

__all__ = ["AS_DMODC", "AsDmodc", "as_dmodc", "dmodc_rows"]


class AsDmodc:
    """The :attr:`~smroute.routing.api.Prepared.aux` of a tree Nmodc routes
    as Dmodc does (:func:`as_dmodc`): no nominal slots."""

    def __repr__(self) -> str:
        return "AS_DMODC"


AS_DMODC = AsDmodc()


def as_dmodc(g: SwitchGraph, c: np.ndarray, dest: Destinations) -> str:
    """``""`` where Nmodc's tables of ``g`` are Dmodc's by the module doc's
    conditions 1-6 (``c`` ``(S, S)`` the encoded costs, ``dest`` the routed
    destinations), else the first condition that fails."""
    n = g.n_switches
    rank = g.rank
    if g.mode != "tree" or not n or (rank < 0).any():
        return "no ranked tree"
    step = rank[g.grp_remote] - rank[g.grp_switch]
    up = step > 0
    gid = np.flatnonzero(up)
    lo, hi = g.grp_switch[gid], g.grp_remote[gid]  # lo ascending: groups by switch
    k = g.n_up
    # 1. siblings share their up-neighbours: label a switch by the smallest
    # child of its first up-neighbour; every upper switch's children carry
    # its label, and as many up-neighbours as carry that label
    rep = np.full(n, n, dtype=np.int64)
    np.minimum.at(rep, hi, lo)
    first = np.searchsorted(lo, np.arange(n))  # (S,) each switch's first up group
    has_up = k > 0
    label = np.full(n, -1, dtype=np.int64)
    label[has_up] = rep[hi[np.minimum(first[has_up], len(hi) - 1)]]
    if not (rep[hi] == label[lo]).all():
        return "siblings differ in their up-neighbours"
    uppers = np.flatnonzero(rep < n)
    per_label = np.bincount(rep[uppers], minlength=n)
    if not (k[has_up] == per_label[label[has_up]]).all():
        return "siblings differ in their up-neighbours"
    # one member per sibling group (its smallest, the label) and its up-neighbours
    heads = np.flatnonzero(has_up & (label == np.arange(n)))
    own = label[lo] == lo
    h_lo, h_hi = lo[own], hi[own]
    # 2. columns (an upper switch's sibling group; a top is its own) and
    # families (groups joined through shared columns): a member in each column
    col = np.where(has_up[h_hi], label[h_hi], n + h_hi)
    fam = components(3 * n, h_lo, n + col)[h_lo]
    fc = np.unique(fam * (2 * n) + col)
    n_cols = np.bincount(fc // (2 * n), minlength=3 * n)
    g_cols = np.bincount(np.unique(h_lo * (2 * n) + col) // (2 * n), minlength=n)
    if not ((g_cols[heads] == k[heads]) & (n_cols[fam[np.searchsorted(h_lo, heads)]]
                                           == k[heads])).all():
        return "a sibling group lacks a column of its family"
    # 3. unique down paths: the paths below each switch, counted over its
    # children, against the switches its costs put below it
    d_sw, d_ch = hi, lo  # the down groups: the up groups' other ends
    w = np.bincount(dest.target, minlength=n).astype(np.int64)  # destination LIDs per switch
    paths = np.ones(n, dtype=np.int64)
    below = w.copy()  # destination LIDs at or below, with unique down paths
    for r in range(1, g.max_rank + 1):
        sel = rank[d_sw] == r
        np.add.at(paths, d_sw[sel], paths[d_ch[sel]])
        np.add.at(below, d_sw[sel], below[d_ch[sel]])
    # a switch with two children or more is an up-neighbour of their
    # sibling group, whose up-neighbours all have the same children (1):
    # one of them per group is counted
    big = np.bincount(label[has_up], minlength=n)[heads] >= 2
    fork = hi[np.minimum(first[heads[big]], len(hi) - 1)]
    if len(fork) and not ((c[fork] < UP_PHASE).sum(axis=1, dtype=np.int32) == paths[fork]).all():
        return "several down paths"
    # 4. per sibling group, towards every target: all up-neighbours nearest
    # or one; 5. no share by capacity (may_share's counts: the destination
    # LIDs the group's up-neighbours reach, less those below the switch)
    reach = np.zeros(n, dtype=np.int64)  # per head: destination LIDs its switches reach
    # per head: its up-neighbours carry the same destination LIDs from the
    # targets one of them alone is nearest to (by 1, none is below a member
    # of the group, and each member reaches each going up: even_shares' test
    # of a member, whose up groups are these, with equal cables)
    even = np.zeros(n, dtype=bool)
    slot = np.full((n, max(int(k.max(initial=0)), 1)), -1, dtype=np.int64)
    slot[h_lo, place_in_runs(h_lo)] = h_hi
    rows = heads[(k[heads] >= 2) & (k[slot[heads]] > 0).any(axis=1, where=slot[heads] >= 0)]
    for m in np.unique(k[rows]).tolist():
        hs = rows[k[rows] == m]
        # hop counts, INF read as UP_PHASE - 1 (no path is that long)
        hop = c[slot[hs, :m]] & np.uint8(UP_PHASE - 1)  # (H, m, S)
        near = hop.min(axis=1)
        is_near = hop == near[:, None, :]
        # (a port's up groups are fewer than 255)
        n_near = is_near.view(np.uint8).sum(axis=1, dtype=np.uint8)
        if ((n_near > 1) & (n_near < m)).any():
            return "partial up-going patterns"
        reach[hs] = (near < UP_PHASE - 1) @ w
        i, t = np.nonzero(n_near == 1)
        even[hs] = equal_loads(i, sole_nearest(is_near)[i, t], w[t], len(hs), m)
    in_rows = np.zeros(n, dtype=bool)
    in_rows[rows] = True
    tops = heads[(k[heads] >= 2) & ~in_rows[heads]]
    if len(tops):  # tops only: what they have below (their children: the group)
        kids = np.bincount(label[has_up], weights=below[has_up], minlength=n).astype(np.int64)
        reach[tops] = kids[tops] + np.where(slot[tops] >= 0, w[slot[tops]], 0).sum(axis=1)
        # (tops reach below the group alone: each is the one target only it is nearest to)
        loads = np.where(slot[tops] >= 0, w[slot[tops]], w[slot[tops, :1]])
        even[tops] = (loads == loads[:, :1]).all(axis=1)
    counted = counted_cables(g)
    cables = np.bincount(g.grp_switch[gid], weights=counted[gid], minlength=n).astype(np.int64)
    s = np.flatnonzero(k >= 2)
    going_up = reach[label[s]] - below[s]
    unequal = unequal_cables(g, up, counted)[s]
    share = (2 * going_up <= (2 * below[s] - 1) * cables[s]) | unequal
    # the group's loads settle a switch with equal cables (not where a cable
    # within a rank is an up group to even_shares and none here)
    known = ~unequal & even[label[s]] & ~(step == 0).any()
    if share.any() and not even_shares(g, c, w, s[share], counted, known[share]).all():
        return "shares by capacity"
    return ""


def dmodc_rows(g: SwitchGraph, c: np.ndarray, slots: NominalSlots, share: np.ndarray,
               below: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where Nmodc's kernel (:func:`~smroute.routing.nmodc.nominal.route_block`)
    gives Dmodc's kernel's entries (:func:`~smroute.routing.kernel.route_block`)
    with the same dividers and destinations.

    Returns ``(rows, partial, targets)``: ``rows`` ``(S,)`` bool the
    switches whose nominal slots are their own up groups in order, none
    lost (or that route with their own groups), with at most one down path
    to any switch (one closer group going down) and no share by capacity
    (``share`` ``(S,)`` bool false); their entries are Dmodc's
    but towards the targets where some but not all of their up groups lead
    closer: those targets are ``partial`` (``(S,)`` int64, an index into
    the rows of ``targets`` ``(P, S)`` bool, -1: none), per set of
    up-neighbours over every target.  ``c`` ``(S, S)`` the encoded costs;
    ``below`` ``(S,)`` the switches at or below each (``c < UP_PHASE`` per
    row) if known."""
    n = g.n_switches
    rank = g.rank
    up = (rank[g.grp_remote] > rank[g.grp_switch]) & (rank[g.grp_switch] >= 0)
    gid = np.flatnonzero(up)
    lo = g.grp_switch[gid]
    at = place_in_runs(lo)
    ok = (slots.own | (slots.arity == g.n_up)) & ~share
    ok[lo[slots.slot_grp[lo, at] != gid]] = False
    # one down path from a switch to any switch: the paths counted over its
    # children against the switches its costs put below it
    down = rank[g.grp_remote] < rank[g.grp_switch]
    d_sw, d_ch = g.grp_switch[down], g.grp_remote[down]
    paths = np.ones(n, dtype=np.int64)
    for r in range(1, g.max_rank + 1):
        sel = rank[d_sw] == r
        np.add.at(paths, d_sw[sel], paths[d_ch[sel]])
    fork = np.flatnonzero(ok & (np.bincount(d_sw, minlength=n) >= 2))
    if len(fork):
        n_below = (below[fork] if below is not None
                   else (c[fork] < UP_PHASE).sum(axis=1, dtype=np.int32))
        ok[fork[n_below != paths[fork]]] = False
    # the targets some but not all of a set of up-neighbours are nearest to
    partial = np.full(n, -1, dtype=np.int64)
    nom = np.flatnonzero(ok & ~slots.own & (g.n_up >= 3))
    if not len(nom):
        return ok, partial, np.zeros((0, n), dtype=bool)
    width = int(g.n_up[nom].max())
    ups = np.full((len(nom), width), -1, dtype=np.int64)
    sel = ok[lo] & ~slots.own[lo] & (g.n_up[lo] >= 3)
    row = np.zeros(n, dtype=np.int64)  # (each switch's row: no search)
    row[nom] = np.arange(len(nom))
    ups[row[lo[sel]], at[sel]] = g.grp_remote[gid[sel]]
    # distinct rows in order: big-endian bytes of ups + 1 (>= 0) sort as the rows
    set_of, first = dedupe_rows((ups + 1).astype(">u8").view(np.uint8).reshape(len(ups), -1))
    sets = ups[first]
    m_of = (sets >= 0).sum(axis=1)
    targets = np.zeros((len(sets), n), dtype=bool)
    for m in np.unique(m_of).tolist():
        ks = np.flatnonzero(m_of == m)
        hop = c[sets[ks, :m]] & np.uint8(UP_PHASE - 1)  # (K, m, S), INF as 127
        n_near = (hop == hop.min(axis=1)[:, None, :]).sum(axis=1, dtype=np.int32)
        targets[ks] = (n_near > 1) & (n_near < m)
    partial[nom] = set_of
    return ok, partial, targets
