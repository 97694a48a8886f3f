"""Nmodc's redirects by load (beyond the paper): where a leaf's nominal slot
does not lead closer to a destination (or does through too few cables), the
up group it takes instead.

Nmodc's kernel (:mod:`smroute.routing.nmodc.nominal`) sends a destination whose
nominal slot is lost to the other slots in a fixed probe order.  Every leaf
probes in the same order, so leaves that lost the same slot agree; but a
leaf that also lacks the first alternative takes a third upper switch, where
no other leaf sends that destination, and on a heavily damaged tree these
single-leaf detours pile up on the upper switches that lost up-links
themselves (the 1,728-host study tree with 655 links removed: 55 of the 87
destinations on its hottest up-link came from one to four leaves each).

This pass rechooses those redirected entries, as a leaf's upper switch's
egress for the destination is known once every table is computed.  The
candidates are the first ``REDIRECT_CHOICES`` closer slots in the probe order and
the kernel's choice:

* an upper switch to which another leaf of the sibling group already sends
  the destination costs nothing (the destination crosses its up-link
  anyway);
* otherwise the one whose egress link carries the fewest destinations;
* a slot the leaf already took for another redirected destination of the
  same NID window (``floor(x / m)``, a shift permutation's neighbours)
  costs ``REDIRECT_SPREAD`` more per such destination;
* the kernel's choice stays unless another is lighter by more than
  ``REDIRECT_KEEP`` destinations (its probe order spreads a shift permutation's
  lost slots over distinct groups), and ties go to the probe order.

A slot can also lead closer through too few cables, for cables lost: such
a *reduced* slot gives up the share of its destinations it lacks the
cables for, and they are placed as the redirected entries are
(:mod:`smroute.routing.nmodc.capacity`).

Only entries whose upper switches route on up are weighed: a down-link
from an upper switch reaches the target leaf alone, whose end-ports bound
its risk (X5's leaves keep their shares by capacity).  Groups of sibling
leaves share no upper switch, so each is balanced on its own (the worker
pool runs parts of them in parallel, :mod:`smroute.routing.pool`).  A
group's destinations are dealt in NID order round-robin into ``REDIRECT_BLOCKS``
blocks, placed block after block: NIDs next to each other see each other's
load.  Inside a block, an entry with a free upper switch is placed at once
and, of the others, the first of each destination and sibling group per
round (the leaf with the smallest GUID: nothing depends on the node order
of the fabric), so the leaves missing a destination's nominal slot agree
on where it goes.  Siblings with the same closer slots towards a target
choose alike and are weighed once (through the one with the smallest
GUID).
Every choice is a group that leads closer, so routes stay minimal and
up*/down* (no credit loop) and the tables validate as the kernel's do.  A
tree with no redirected entry (every complete PGFT) keeps the kernel's
tables.

Pure functions on arrays; the loops run per block and round (and per
probe position), never per destination.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from smroute.routing.dmodc import INF, UP_PHASE, Destinations, seen_cost
from smroute.routing.nmodc import capacity, keys, native
from smroute.routing.nmodc.load import nominal_load
from smroute.routing.nmodc.native import components
from smroute.routing.nmodc.nominal import NominalSlots, redirect_dividers
from smroute.routing.nmodc.slot_tables import probe_offsets
from smroute.routing.runs import dense as distinct
from smroute.routing.runs import runs, stable_order
from smroute.routing.topology import SwitchGraph

__all__ = ["nominal_leaves", "sibling_groups", "PartialPairs", "partial_pairs",
           "balance_redirects"]

#: Blocks of destinations placed at once: the load a placement sees is updated
#: between blocks (more: each choice sees more of the others, a round per block).
REDIRECT_BLOCKS = 32
#: The kernel's choice stays unless another is lighter by more than this
#: many destinations (higher: closer to the kernel's spread, less balance).
REDIRECT_KEEP = 2
#: Added to a candidate's cost per entry of the same leaf and NID window
#: (``floor(x / m)``) already redirected to that slot: the kernel's probe order
#: spreads a shift permutation's lost slots over distinct groups, and so does
#: this (1,728-host tree, 13 heavy link throws: SP 247 to 225 in all, A2A 758
#: to 810).
REDIRECT_SPREAD = 2
#: Candidates weighed per entry besides the kernel's: the first closer slots
#: in probe order (all 11 on the 1,728-host tree's 64+ band: A2A 31.5 against 33).
REDIRECT_CHOICES = 4


def _up_cost(c_up: np.ndarray) -> np.ndarray:
    """A neighbour's encoded cost as seen from below (Dmodc's up phase)."""
    return seen_cost(c_up, False)


def _on_targets(t_of: np.ndarray, n_t: int, pick: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(which, e)``: for every index ``i`` of ``pick`` ``(K,)`` (target
    indices), each destination ``e`` (index into ``t_of``) on that target."""
    by_t = stable_order(t_of, n_t)
    n_on = np.bincount(t_of, minlength=n_t)
    which, at = runs((np.cumsum(n_on) - n_on)[pick], n_on[pick])
    return which, by_t[at]


def nominal_leaves(g: SwitchGraph, slots: NominalSlots) -> np.ndarray:
    """``(B,)`` int64 the leaves this pass concerns: rank 0, nominal slots
    (not their own), nominal arity 2+, tree mode."""
    return np.flatnonzero((g.rank == 0) & ~slots.own & (slots.arity >= 2) & (g.mode == "tree"))


def _uppers(g: SwitchGraph, slots: NominalSlots,
            leaves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ups (U,), slot_ui (B, M), siblings (B,))`` int64 of ``leaves``: the
    upper switches of their nominal slots, each slot's index into ``ups``
    (-1: no link, or past the leaf's arity), and a label per group of leaves
    joined through shared upper switches (0 to the number of groups - 1)."""
    width = max(int(slots.arity[leaves].max(initial=1)), 1)
    sg = slots.slot_grp[leaves, :width]
    b, j = np.nonzero(sg >= 0)
    ups, ui = distinct(g.grp_remote[sg[b, j]], len(g.rank))
    slot_ui = np.full(sg.shape, -1, dtype=np.int64)
    slot_ui[b, j] = ui
    sib = components(len(leaves) + len(ups), b, len(leaves) + ui)[:len(leaves)]
    return ups, slot_ui, distinct(sib, len(leaves))[1]  # labels 0, 1, ...


def sibling_groups(g: SwitchGraph, slots: NominalSlots, leaves: np.ndarray) -> np.ndarray:
    """``(B,)`` int64 a label per group of ``leaves`` joined through shared
    upper switches: groups share no upper switch, so the pass runs on each
    alone (:func:`balance_redirects`'s ``leaves``)."""
    return _uppers(g, slots, leaves)[2]


@dataclass(frozen=True, eq=False)
class PartialPairs:
    """The partial (leaf, target) pairs of the nominal leaves.

    leaves ``(B,)`` int64 nominal leaves (rank 0, arity 2+, tree mode); ups
    ``(U,)`` int64 the upper switches of their nominal slots and slot_ui
    ``(B, M)`` int64 each slot's index into ``ups`` (-1: no link, or past
    the leaf's arity); siblings ``(B,)`` int64 a label per group of leaves
    joined through shared upper switches; eps ``(E,)`` int64 the end-port
    destinations (indices into the routed ones) and t_of ``(E,)`` int64
    their target (index into targets ``(T,)`` int64, the switches they hang
    off); up_cost ``(U, T)`` and leaf_cost ``(B, T)`` uint8 encoded costs to
    them, an upper switch's as seen from below: slot ``j`` of leaf ``b``
    leads closer to target ``t`` where ``up_cost[slot_ui[b, j], t] <
    leaf_cost[b, t]``.  The pairs ``(P,)`` int64: leaf index ``pb`` and
    target index ``pt``, reduced slots' pairs included.  up_cap ``(U, T)``
    int32 and up_low ``(U, T)`` bool: the up cables of each upper switch
    towards each target, and where they may make a reduced slot
    (:func:`~smroute.routing.nmodc.capacity.with_reduced`; ``(0, 0)`` where
    no slot is reduced); whole ``(B,)`` bool: the leaves with all their
    nominal slots.
    """

    leaves: np.ndarray
    ups: np.ndarray
    slot_ui: np.ndarray
    siblings: np.ndarray
    eps: np.ndarray
    t_of: np.ndarray
    targets: np.ndarray
    up_cost: np.ndarray
    leaf_cost: np.ndarray
    pb: np.ndarray
    pt: np.ndarray
    up_cap: np.ndarray
    up_low: np.ndarray
    whole: np.ndarray

    @property
    def leaf_target(self) -> tuple[np.ndarray, np.ndarray]:
        """``(leaf, target)`` ``(P,)`` int64 switch ids of the pairs: where
        :func:`balance_redirects` may change a table (the entries of the
        target's LIDs only)."""
        return self.leaves[self.pb], self.targets[self.pt]


@dataclass(frozen=True, eq=False)
class _Redirected:
    """The leaves' redirected entries.

    pairs: the partial (leaf, target) pairs (:class:`PartialPairs`), where some
    slots lead closer to a target and some do not; pair_class ``(P,)``
    int64: siblings with the same closer slots towards a target choose
    alike, a class per (sibling group, target, closer slots).
    class_closer ``(C, M)`` bool: the slots leading closer of each class.
    Per redirected entry of a class's first pair, ``(R,)`` int64: rows
    (index into ``pairs.leaves``), dests (index into the routed
    destinations), x (digit ``floor(nid / Pi)``; the nominal slot ``x mod
    m`` is not closer, or reduced) and entry_class; routes_on ``(R,)`` bool: the
    upper switch of one of the class's closer slots routes on up.
    """

    pairs: PartialPairs
    pair_class: np.ndarray
    class_closer: np.ndarray
    rows: np.ndarray
    dests: np.ndarray
    x: np.ndarray
    entry_class: np.ndarray
    routes_on: np.ndarray


def _closer(pr: PartialPairs, goes_up: np.ndarray, dense: bool | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """``(closer (B', M, T') bool, routes_on (B', T') bool, li, ti, kept)``:
    the slots leading closer to each target, and whether the upper switch
    of one of them routes on up (``goes_up`` ``(U, T)`` bool), over cells
    that hold the partial pairs; ``li`` / ``ti`` ``(P,)`` int64 each pair's
    cell; ``kept`` ``(B', M, T')`` float32 the share each slot keeps
    (:func:`~smroute.routing.nmodc.capacity.kept_share`; ``None`` where no slot may be
    reduced).  Dense over the pairs' ``B'`` leaves and ``T'`` targets (one
    comparison per leaf, slot and target, no gather per pair and slot)
    where the pairs fill an eighth of that grid or more, else one cell per
    pair (``T' = 1``: a few damaged leaves, an incremental reroute);
    ``dense`` forces either (the same pairs' bits)."""
    lv, li = distinct(pr.pb, len(pr.leaves))
    tv, ti = distinct(pr.pt, len(pr.targets))
    if not (dense if dense is not None else 8 * len(pr.pb) >= len(lv) * len(tv)):
        ui, n_t = np.take(pr.slot_ui, pr.pb, axis=0), pr.up_cost.shape[1]  # (P, M)
        at, own = np.maximum(ui, 0) * n_t + pr.pt[:, None], pr.pb * n_t + pr.pt  # flat
        closer = (ui >= 0) & (np.take(pr.up_cost, at) < np.take(pr.leaf_cost, own)[:, None])
        on = (closer & np.take(goes_up, at)).any(axis=1)
        kept = None if not pr.up_low.size else capacity.kept_share(
            closer, np.take(pr.up_cap, at), np.take(pr.up_low, at),
            (ui >= 0) & pr.whole[pr.pb][:, None])[:, :, None]
        return (closer[:, :, None], on[:, None], np.arange(len(ui)), np.zeros(len(ui), np.int64),
                kept)
    ui = pr.slot_ui[lv]  # (B', M)
    at = np.maximum(ui, 0)
    closer = np.take(pr.up_cost, tv, axis=1)[at] < np.take(pr.leaf_cost[lv], tv, axis=1)[:, None]
    closer &= (ui >= 0)[:, :, None]
    kept = None if not pr.up_low.size else capacity.kept_share(
        closer, np.take(pr.up_cap, tv, axis=1)[at], np.take(pr.up_low, tv, axis=1)[at],
        ((ui >= 0) & pr.whole[lv][:, None])[:, :, None])
    return closer, (closer & np.take(goes_up, tv, axis=1)[at]).any(axis=1), li, ti, kept


def partial_pairs(g: SwitchGraph, c: np.ndarray, dest: Destinations, slots: NominalSlots,
                  leaves: np.ndarray | None = None) -> PartialPairs:
    """A leaf missing one of its slots has a partial pair with every target
    it reaches; a leaf with all of them with the targets some of its sibling
    group's upper switches do not lead closer to (``(groups, M, T)`` costs,
    so a complete tree costs next to nothing)."""
    if leaves is None:
        leaves = nominal_leaves(g, slots)
    m = slots.arity[leaves]
    ups, slot_ui, sib = _uppers(g, slots, leaves)
    width = slot_ui.shape[1]
    eps = np.flatnonzero(~dest.is_switch)
    targets, t_of = distinct(dest.target[eps], len(c))
    up_cost = _up_cost(np.take(np.take(c, ups, axis=0), targets, axis=1))
    leaf_cost = np.take(np.take(c, leaves, axis=0), targets, axis=1)
    b, j = np.nonzero(slot_ui >= 0)
    # every sibling group's slots (the union) and its worst upper cost per target
    labels, grp_of = np.unique(sib, return_inverse=True)
    union = np.full((len(labels), width), -1, dtype=np.int64)
    union[grp_of[b], j] = slot_ui[b, j]
    worst = np.where((union >= 0)[:, :, None], up_cost[np.maximum(union, 0)], 0).max(axis=1)
    damaged: np.ndarray = ((slot_ui < 0) & (np.arange(width)[None, :] < m[:, None])).any(axis=1)
    reach = (leaf_cost < INF) & (targets[None, :] != leaves[:, None])
    partial = reach & (damaged[:, None] | (worst[grp_of] >= leaf_cost))
    up_cap, up_low = capacity.with_reduced(g, c, ups, targets, slot_ui, ~damaged, reach,
                                           partial, up_cost, leaf_cost)
    pb, pt = np.nonzero(partial)
    return PartialPairs(leaves, ups, slot_ui, sib, eps, t_of, targets, up_cost, leaf_cost, pb, pt,
                        up_cap, up_low, ~damaged)


def _redirected(g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
                slots: NominalSlots, pr: PartialPairs, rd: np.ndarray) -> _Redirected:
    """The redirected entries (:class:`_Redirected`) of the partial pairs ``pr``
    (:func:`partial_pairs`; ``rd`` the redirect dividers)."""
    leaves, slot_ui, targets, t_of, eps = pr.leaves, pr.slot_ui, pr.targets, pr.t_of, pr.eps
    pb, pt = pr.pb, pr.pt
    m = slots.arity[leaves]
    width = slot_ui.shape[1]
    # the closer slots of one pair of each key (:func:`~smroute.routing.nmodc.keys.pair_keys`),
    # read by all of its pairs
    first, of = keys.pair_keys(slot_ui, pr.siblings, pr.leaf_cost, pb, pt)
    closer, routes_on, li, ti, kept = _closer(replace(pr, pb=pb[first], pt=pt[first]),
                                              np.take(c[pr.ups], targets, axis=1) >= UP_PHASE)
    where = pr.siblings[pb[first]] * len(targets) + pt[first]
    # (a class: the same closer slots and the same reduced ones)
    bits = closer if kept is None else np.concatenate([closer, kept < 1], axis=1)
    n_bits = bits.shape[1]
    if n_bits <= 62 and int(where.max(initial=0)) < (1 << (62 - n_bits)):
        kind = np.dtype(np.uint32 if n_bits <= 32 else np.int64)  # (uint32: 2.8x faster)
        code = np.zeros((closer.shape[0], closer.shape[2]), dtype=kind)  # (B', T')
        for j in range(n_bits):
            code |= np.left_shift(bits[:, j].astype(kind), kind.type(j))
        key_class = np.unique((where << n_bits) | code[li, ti].astype(np.int64),
                              return_inverse=True)[1].ravel()
    else:
        packed = np.packbits(bits, axis=1).transpose(0, 2, 1)[li, ti]  # (K, bytes)
        key_class = np.unique(np.concatenate([where[:, None], packed.astype(np.int64)], axis=1),
                              axis=0, return_inverse=True)[1].ravel()
    # (a key's pairs share its class: the same distinct values, the same ids)
    pair_class, li, ti = key_class[of], li[of], ti[of]
    # a class's representative: its leaf with the smallest GUID (the same
    # whatever the node order of the fabric)
    o = np.lexsort((g.sw_guid[leaves[pb]], pair_class))
    rep = o[np.flatnonzero(np.diff(pair_class[o], prepend=-1))]
    class_closer = closer[li[rep], :, ti[rep]]  # (C, M)
    class_kept = (np.ones(class_closer.shape, np.float32) if kept is None
                  else kept[li[rep], :, ti[rep]])
    # per class, the destinations on its target whose nominal slot x mod m
    # is one of its slots that do not lead closer or are reduced
    rep_leaf = pb[rep]
    lc, ls = np.nonzero((~class_closer | (class_kept < 1))
                        & (np.arange(width)[None, :] < m[rep_leaf][:, None]))
    parts = []
    # each class's arity and divider, as one key (a class's pairs share them)
    base = int(pi[leaves].max(initial=0)) + 1
    kind = (m[rep_leaf] * base + pi[leaves[rep_leaf]])[lc]
    for k in np.unique(kind).tolist():
        mv, p = divmod(k, base)
        sel = np.flatnonzero(kind == k)
        res = (dest.nid[eps] // p) % mv
        which, e = _on_targets(t_of * mv + res, len(targets) * mv,
                               pt[rep[lc[sel]]] * mv + ls[sel])
        # a reduced slot gives up the share of its destinations it lacks
        # the cables for: those whose redirect digit is below that share of m - 1
        if kept is not None:
            cl, sl = lc[sel][which], ls[sel][which]
            r = (dest.nid[eps[e]] // rd[leaves[rep_leaf[cl]]]) % max(mv - 1, 1)
            ok = ~class_closer[cl, sl] | (r < np.rint((1 - class_kept[cl, sl]) * (mv - 1)))
            which, e = which[ok], e[ok]
        parts.append((lc[sel][which], e, dest.nid[eps[e]] // p))
    cls, e, x = (np.concatenate(a) for a in zip(*parts, strict=True)) if parts else (
        np.zeros(0, dtype=np.int64),) * 3
    # the class's closer slots whose upper switch routes on up
    on = routes_on[li[rep], ti[rep]][cls]
    return _Redirected(pr, pair_class, class_closer, pb[rep[cls]], eps[e], x, cls, on)


def balance_redirects(g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
                      ports: np.ndarray, slots: NominalSlots,
                      leaves: np.ndarray | None = None,
                      pairs: PartialPairs | None = None, *, n_eps: int,
                      redirect: np.ndarray | None = None) -> np.ndarray:
    """``ports`` ``(S, W)`` uint8, Nmodc's kernel tables of ``dest`` (with its
    encoded costs ``c`` ``(S, S)``, nominal dividers ``pi`` ``(S,)`` and
    ``slots``), with the leaves' redirected entries rechosen by load (module
    doc), in place; returns ``ports``.  ``leaves``: only these (whole sibling
    groups, :func:`sibling_groups`; default every nominal leaf): the groups
    are independent, so the pool runs them in parallel.  ``pairs``: the
    partial pairs of ``leaves`` if known (:func:`partial_pairs`); ``n_eps``: the end-ports;
    ``redirect``: their redirect dividers if known (:func:`redirect_dividers`)."""
    pr = pairs if pairs is not None else partial_pairs(g, c, dest, slots, leaves)
    busy = np.zeros(int(pr.siblings.max(initial=-1)) + 1, dtype=bool)
    busy[pr.siblings[pr.pb]] = True
    if not busy.all():  # the groups without a partial pair keep the kernel's tables
        pr = partial_pairs(g, c, dest, slots, pr.leaves[busy[pr.siblings]])
    rd = redirect if redirect is not None else redirect_dividers(g, pi, n_eps)
    red = _redirected(g, c, pi, dest, slots, pr, rd)
    if not len(red.rows):
        return ports
    # every redirected entry of a class: its candidate slots, the kernel's
    pr, rows, d, xr = red.pairs, red.rows, red.dests, red.x
    sw = pr.leaves[rows]
    m = slots.arity[sw]
    width = pr.slot_ui.shape[1]
    kern = _port_slots(g, slots.slot_grp[pr.leaves, :width])[rows, ports[sw, dest.lid[d]]].astype(
        np.int64)
    # only where an upper switch routes on up: a down-link from it reaches
    # the target leaf alone, whose end-ports bound its risk
    on = red.routes_on & (kern >= 0)
    choice = kern.copy()
    sel = np.flatnonzero(on)
    # candidates: the first REDIRECT_CHOICES closer slots in probe order, the kernel's
    y = dest.nid[d[sel]] // rd[sw[sel]]
    first = _first_candidates(red.class_closer, red.entry_class[sel], xr[sel], y, m[sel])
    cand = np.concatenate([first, kern[sel, None]], axis=1)
    valid = cand >= 0
    up_c = np.where(valid, pr.slot_ui.ravel()[rows[sel][:, None] * width + np.maximum(cand, 0)],
                    0)
    lk = up_c * 256 + ports[pr.ups[up_c], dest.lid[d[sel]][:, None]]
    # the kernel's choice is settled where its destination has no other
    # entry in the sibling group and no candidate is lighter by more than REDIRECT_KEEP
    sib = pr.siblings[rows[sel]]
    key = d[sel] * (int(sib.max(initial=0)) + 1) + sib
    n_key = keys.ids(key, counts=True)
    used = np.zeros(len(pr.ups), dtype=bool)  # (the load of the candidates' links alone)
    used[up_c[valid]] = True
    load = nominal_load(pi, dest, ports, slots, pr, used)
    cost = np.where(valid, load[lk], np.iinfo(np.int64).max)
    settled = (n_key == 1) & (cost[:, -1] <= cost.min(axis=1) + REDIRECT_KEEP)
    np.add.at(load, lk[settled, -1], 1)
    rest = ~settled
    if rest.any():
        r = sel[rest]
        w = xr[r] // m[r]
        window = rows[r] * (int(w.max()) + 1) + w
        choice[r] = _place(cand[rest], up_c[rest], lk[rest], d[r], sib[rest], window,
                           _guid_rank(g, pr.leaves)[rows[r]], len(pr.ups), load, dest)
    # every pair of the class takes the same slot, through its own group
    by_cls = stable_order(red.entry_class, int(red.pair_class.max(initial=-1)) + 1)
    which, ent = _on_targets(red.entry_class[by_cls], int(red.pair_class.max()) + 1,
                             red.pair_class)
    ent = by_cls[ent]
    moved = choice[ent] != kern[ent]  # (the others keep the kernel's port in the group)
    ent, which = ent[moved], which[moved]
    leaf = pr.leaves[pr.pb[which]]
    gid = slots.slot_grp[leaf, choice[ent]]
    port = g.grp_ports[g.grp_port_first[gid] + (xr[ent] // m[ent]) % g.grp_port_count[gid]]
    ports[leaf, dest.lid[d[ent]]] = port
    return ports


def _place(cand: np.ndarray, up_c: np.ndarray, lk: np.ndarray, d: np.ndarray, sib: np.ndarray,
           window: np.ndarray, guid: np.ndarray, n_up: int, load: np.ndarray,
           dest: Destinations) -> np.ndarray:
    """The slot each of ``R`` redirected entries takes (module doc): ``cand``
    ``(R, K)`` candidate slots in probe order (-1 none), the kernel's last;
    ``up_c`` / ``lk`` ``(R, K)`` their upper switches (of ``n_up``) and
    egress links; ``d`` destination, ``sib`` sibling group, ``window`` the
    leaf and NID window ``floor(x / m)``, ``guid`` the leaf's rank by GUID;
    ``load`` ``(n_up * 256,)`` the
    destinations per egress link (updated in place).  Returns ``(R,)``
    int64 slots."""
    n, k = cand.shape
    valid = cand >= 0
    win = keys.ids(window)
    n_slot = int(cand.max(initial=0)) + 1
    n_taken = (len(win) and int(win.max()) + 1) * n_slot
    d_vals, d_of = distinct(d, int(d.max(initial=0)) + 1)  # the destinations numbered densely
    n_d = len(d_vals)
    n_carry = n_up * n_d
    # destinations in NID order, dealt round-robin into REDIRECT_BLOCKS blocks: NIDs
    # next to each other (a shift permutation's) are placed one after another
    # (ranked per sibling group: groups are independent)
    nid = dest.nid[d]
    n_nid = int(nid.max(initial=0)) + 1
    by_sib = np.argsort(sib * n_nid + nid, kind="stable")
    new = np.r_[True, (d[by_sib][1:] != d[by_sib][:-1]) | (sib[by_sib][1:] != sib[by_sib][:-1])]
    rank = np.cumsum(new) - 1
    start_sib = np.r_[True, sib[by_sib][1:] != sib[by_sib][:-1]]
    rank -= rank[np.flatnonzero(start_sib)][np.cumsum(start_sib) - 1]
    block_of = np.empty(n, dtype=np.int64)
    block_of[by_sib] = rank % REDIRECT_BLOCKS
    n_sib = int(sib.max(initial=0)) + 1
    # (the leaves of one destination and sibling group by GUID: the first
    # of them leads, whatever the node order of the fabric; one int64 key:
    # 32 blocks, NIDs below 2**16, groups and leaves below 2**20 each)
    order = np.argsort(((block_of * n_nid + nid) * n_sib + sib) * (int(guid.max()) + 1) + guid,
                       kind="stable")
    starts = np.searchsorted(block_of[order], np.arange(REDIRECT_BLOCKS + 1))
    choice = np.full(n, -1, dtype=np.int64)
    # per entry, in placing order: flat indices into carry, taken and load;
    # a missing candidate points past their ends, at a carry that is never
    # set, no redirects and a load no candidate reaches
    bad = ~np.take(valid, order, axis=0)  # (take: faster than [order] for rows)
    cand_o, e_o = np.take(cand, order, axis=0), d_of[order]
    ck = np.take(up_c, order, axis=0) * n_d + e_o[:, None]
    ck[bad] = n_carry
    tk = np.maximum(cand_o, 0) + (win[order] * n_slot)[:, None]
    tk[bad] = n_taken
    lk_o = np.take(lk, order, axis=0)
    lk_o[bad] = len(load)
    key_o = e_o * n_sib + sib[order]
    # per (upper switch, destination): sent by a redirect already; per
    # (window, slot): redirects taken
    carry_f = np.zeros(n_carry + 1, dtype=bool)
    taken_f = np.zeros(n_taken + 1, dtype=np.int64)
    if native.place(starts, ck, lk_o, tk, cand_o, key_o, order, REDIRECT_SPREAD, REDIRECT_KEEP,
                    carry_f, load, taken_f, choice):  # (compiled: the rounds below)
        return choice
    load_f = np.append(load, np.int64(1) << 40)
    for bi in range(REDIRECT_BLOCKS):
        pend = np.arange(starts[bi], starts[bi + 1])
        while len(pend):
            c_k = ck[pend]
            cost = np.where(carry_f[c_k], 0, load_f[lk_o[pend]] + 1)
            cost += REDIRECT_SPREAD * taken_f[tk[pend]]
            best = np.argmin(cost, axis=1)  # the first of equal costs
            cb = cost.min(axis=1)
            free = cb == 0
            # an entry without a free upper switch keeps the kernel's unless
            # it is heavier by more than REDIRECT_KEEP; the first such entry of each
            # destination and sibling group is placed this round
            best = np.where(~free & (cost[:, -1] <= cb + REDIRECT_KEEP), k - 1, best)
            other = np.flatnonzero(~free)
            key = key_o[pend[other]]
            lead = other[np.concatenate(([True], key[1:] != key[:-1]))] if len(other) else other
            placed = np.concatenate([np.flatnonzero(free), lead])
            pp, bp = pend[placed], best[placed]
            choice[order[pp]] = cand_o[pp, bp]
            carry_f[c_k[lead, best[lead]]] = True
            np.add.at(load_f, lk_o[pend[lead], best[lead]], 1)
            np.add.at(taken_f, tk[pp, bp], 1)
            done = free
            done[lead] = True
            pend = pend[~done]
    load[:] = load_f[:-1]
    return choice


def _guid_rank(g: SwitchGraph, leaves: np.ndarray) -> np.ndarray:
    """``(B,)`` int64: each of ``leaves``' rank by GUID."""
    rank = np.empty(len(leaves), dtype=np.int64)
    rank[np.argsort(g.sw_guid[leaves])] = np.arange(len(leaves))
    return rank


def _first_candidates(closer: np.ndarray, cls: np.ndarray, x: np.ndarray, y: np.ndarray,
                      m: np.ndarray) -> np.ndarray:
    """``(R, REDIRECT_CHOICES)`` int64: the first closer slots (``closer`` ``(C, M)``
    of each entry's class ``cls`` ``(R,)``) in the probe order of each entry
    (digit ``x``, redirect digit ``y``, nominal arity ``m``;
    :func:`~smroute.routing.nmodc.nominal.redirect_dividers`), -1 past the last."""
    out = np.full((len(x), REDIRECT_CHOICES + 1), -1, dtype=np.int64)  # the last: a slot not taken
    flat = np.ascontiguousarray(closer).ravel()
    for mv in np.unique(m).tolist():
        sel = np.flatnonzero(m == mv)
        off = probe_offsets(mv)  # (mv - 1, mv - 1)
        if native.first_slots(closer, cls, x, y, mv, off, sel, out):
            continue  # (compiled: the probing below)
        j0 = x[sel] % mv
        r = y[sel] % max(mv - 1, 1)
        row = cls[sel] * closer.shape[1]
        got = np.zeros(len(sel), dtype=np.int64)
        for q in range(mv - 1):  # the entries still short of REDIRECT_CHOICES
            slot = (j0 + 1 + off[r, q]) % mv  # the q-th probed slot
            take = flat[row + slot]
            out[sel, np.where(take, got, REDIRECT_CHOICES)] = slot
            got += take
            more = got < REDIRECT_CHOICES
            if not more.all():
                sel, j0, r, row, got = sel[more], j0[more], r[more], row[more], got[more]
                if not len(sel):
                    break
    return out[:, :REDIRECT_CHOICES]


def _port_slots(g: SwitchGraph, grp: np.ndarray) -> np.ndarray:
    """``(B, 256)`` int16: the slot whose group (``grp`` ``(B, M)`` group
    ids, -1 none) holds each port of each leaf, -1 for none."""
    out = np.full((len(grp), 256), -1, dtype=np.int16)  # (slots below 2**15)
    b, j = np.nonzero(grp >= 0)
    gid = grp[b, j]
    which, at = runs(g.grp_port_first[gid], g.grp_port_count[gid])
    out[b[which], g.grp_ports[at]] = j[which]
    return out
