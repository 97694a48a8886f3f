"""The cables down into a leaf in the turn of the leaves' tables (beyond the
paper).

A leaf whose up groups count unequal cables shares its destinations with
one table entry per cable (:func:`~smroute.routing.nmodc.cables.structural_shares`,
:func:`~smroute.routing.nmodc.slot_tables.capacity_tables`): destination
``t`` takes entry ``t mod L`` of a table of ``L`` entries over its slots,
the j-th of a slot's ``c`` entries at ``(j + 1/2) / c`` through it, and
cable ``(floor(t / L) c + j) mod #cables`` of the slot's group.  An
upper switch that reaches the target leaf through ``c >= 2`` cables took
cable ``floor(t / Pi) mod c`` of them, which does not follow the leaves'
turn: the destinations of a run of consecutive NIDs that arrived over
different cables could leave over one (a leaf/spine grown with bigger
spines, 20 hosts a leaf: host-name shift HSD 2.57 where the leaves'
tables allow 2).  There it
takes the cable of the leaves' turn instead, ``(floor(t / L) c + j) mod
#cables`` with ``j`` its slot's occurrence at entry ``t mod L`` of the
target's table: a function of the destination alone, so the destinations
of consecutive NIDs leave over the cables in turn, as they arrived.  A
destination whose entry is not the switch's (it arrives from a leaf that
shares otherwise) keeps its cable.

Which (switch, target) pairs take it is decided once per routing from the
structure alone (:func:`turn_tables`: where every leaf shares so over
as many up groups); the kernel then reads only the destination's NID and
target (:func:`apply_turns`), so a block of rows or of columns gets the
entries a full route gives.  Pure functions on arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np

from smroute.routing.dmodc import Destinations
from smroute.routing.nmodc.cables import counted_cables, structural_shares
from smroute.routing.nmodc.descent import up_groups
from smroute.routing.nmodc.nominal import NominalSlots
from smroute.routing.topology import SwitchGraph

__all__ = ["TurnTables", "apply_turns", "turn_tables"]


@dataclass(frozen=True, eq=False)
class TurnTables:
    """Per target leaf of the turns (``(T,)`` ``leaf``, switch ids
    ascending), its table as the leaves with one entry per cable lay it out
    towards it: ``length`` ``(T,)`` entries from ``start`` ``(T,)`` in the
    flat ``slot`` / ``occurrence`` / ``count`` arrays (each entry's slot,
    its occurrence among the slot's entries, the slot's entries); per
    (upper switch, target) pair of ``key`` ``(K,)`` (``upper * S +
    leaf``, ascending) the upper switch's slot at the target and its
    group down to it."""

    leaf: np.ndarray
    length: np.ndarray
    start: np.ndarray
    slot: np.ndarray
    occurrence: np.ndarray
    count: np.ndarray
    key: np.ndarray
    key_slot: np.ndarray
    key_group: np.ndarray


_TURNS: WeakKeyDictionary[SwitchGraph, TurnTables | None] = WeakKeyDictionary()


def turn_tables(g: SwitchGraph, slots: NominalSlots) -> TurnTables | None:
    """The :class:`TurnTables` of ``g``: the targets are the leaves (rank
    0) with every slot, the pairs their slots' upper switches cabled to
    them more than once; ``None`` unless every leaf has structural shares
    (:func:`~smroute.routing.nmodc.cables.structural_shares`) over as many
    up groups (a leaf that lost a whole group redirects its entries, which
    follow no turn: 24 grown leaf/spines with 2 to 12 cables cut, host-name
    shift HSD worse in 23 cells and better in 19 with the turns there)."""
    if g in _TURNS:
        return _TURNS[g]
    out = None
    struct = structural_shares(g)
    low = np.flatnonzero(g.rank == 0)
    up = g.rank[g.grp_remote] > g.rank[g.grp_switch]
    n_up = np.bincount(g.grp_switch[up], minlength=len(g.rank))[low]
    if len(low) and struct[low].all() and (n_up == n_up[0]).all():
        # a leaf's table is over its nominal slots, or its own up groups
        ups = up_groups(g)
        width = max(slots.slot_grp.shape[1], ups.shape[1])
        grp = np.full((len(g.rank), width), -1, dtype=np.int64)
        grp[:, :slots.slot_grp.shape[1]] = slots.slot_grp
        grp[slots.own] = -1
        grp[slots.own, :ups.shape[1]] = ups[slots.own]
        arity = np.where(slots.own, (ups >= 0).sum(axis=1), slots.arity)
        inside = np.arange(width)[None, :] < arity[:, None]
        whole = ((grp >= 0) | ~inside).all(axis=1) & (arity > 1)
        leaf = np.flatnonzero(struct & whole)
        if len(leaf):
            out = _tables(g, grp[leaf], arity[leaf], leaf)
    _TURNS[g] = out
    return out


def _tables(g: SwitchGraph, grp: np.ndarray, arity: np.ndarray,
            leaf: np.ndarray) -> TurnTables | None:
    """:func:`turn_tables` of the targets ``leaf`` with the groups ``grp``
    ``(T, W)`` of their tables' slots (``arity`` ``(T,)`` each)."""
    k = int(arity.max())
    grp = grp[:, :k]
    inside = np.arange(k)[None, :] < arity[:, None]
    got = np.where(inside, counted_cables(g)[np.maximum(grp, 0)], 0)
    # the j-th of a slot's c entries at (j + 1/2) / c, ties by slot
    row, s = np.nonzero(got > 0)
    reps = got[row, s]
    e_row, e_slot = np.repeat(row, reps), np.repeat(s, reps)
    occ = np.arange(len(e_row)) - np.repeat(np.cumsum(reps) - reps, reps)
    order = np.lexsort((e_slot, (occ + 0.5) / got[e_row, e_slot], e_row))
    length = got.sum(axis=1)
    start = np.cumsum(length) - length
    # the upper switches cabled to a target more than once
    bi, j = np.nonzero(inside & (grp >= 0))
    gid = grp[bi, j]
    up = g.grp_remote[gid]
    down = _group_between(g, up, leaf[bi])
    many = (down >= 0) & (g.grp_port_count[np.maximum(down, 0)] > 1)
    if not many.any():
        return None
    key = up[many] * len(g.rank) + leaf[bi[many]]
    o = np.argsort(key, kind="stable")
    return TurnTables(leaf, length, start, e_slot[order], occ[order],
                      got[e_row, e_slot][order], key[o], j[many][o], down[many][o])


def _group_between(g: SwitchGraph, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(N,)`` int64: the group of switch ``a[i]`` to switch ``b[i]``, -1
    where there is none."""
    n = len(g.rank)
    have = g.grp_switch.astype(np.int64) * n + g.grp_remote
    o = np.argsort(have, kind="stable")
    want = a.astype(np.int64) * n + b
    at = np.minimum(np.searchsorted(have[o], want), max(len(o) - 1, 0))
    return np.where(have[o][at] == want, o[at], -1) if len(o) else np.full(len(a), -1)


def apply_turns(g: SwitchGraph, tt: TurnTables | None, pi: np.ndarray, dest: Destinations,
                switches: np.ndarray, out: np.ndarray) -> None:
    """The entries of ``switches`` (rows of ``out``, columns ``dest.lid``)
    towards the targets of ``tt`` (:func:`turn_tables`) whose destination's
    entry in the target's table is the switch's slot take the cable of that
    entry's turn (module doc)."""
    if tt is None or not len(switches) or not len(dest.lid):
        return
    n = len(g.rank)
    rows = np.flatnonzero(np.isin(switches, tt.key // n))
    if not len(rows):
        return
    at = np.searchsorted(tt.leaf, dest.target)
    mine = (at < len(tt.leaf)) & ~dest.is_switch
    mine[mine] = tt.leaf[at[mine]] == dest.target[mine]
    d = np.flatnonzero(mine)
    if not len(d):
        return
    t = at[d]
    x = dest.nid[d] // pi[dest.target[d]]
    e = tt.start[t] + x % tt.length[t]
    for i in rows.tolist():
        s = int(switches[i])
        key = s * n + dest.target[d]
        pos = np.minimum(np.searchsorted(tt.key, key), len(tt.key) - 1)
        take = (tt.key[pos] == key) & (tt.slot[e] == tt.key_slot[pos])
        if not take.any():
            continue
        grp = tt.key_group[pos[take]]
        turn = (x[take] // tt.length[t[take]]) * tt.count[e[take]] + tt.occurrence[e[take]]
        cable = turn % g.grp_port_count[grp]
        out[i, dest.lid[d[take]]] = g.grp_ports[g.grp_port_first[grp] + cable]
