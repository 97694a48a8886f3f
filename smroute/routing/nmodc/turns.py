"""The cables down into a switch in the turn of its rank's tables (beyond
the paper).

A switch whose up groups count unequal cables shares its destinations
with one table entry per cable (:func:`~smroute.routing.nmodc.cables.structural_shares`,
:func:`~smroute.routing.nmodc.slot_tables.capacity_tables`): destination
``t`` takes entry ``x mod L`` (``x = floor(t / Pi)``) of a table of ``L``
entries over its slots, the j-th of a slot's ``c`` entries at ``(j +
1/2) / c`` through it, and cable ``(floor(x / L) c + j) mod #cables`` of
the slot's group.  An upper switch that goes down to a switch of that
rank through ``c >= 2`` cables took cable ``floor(t / Pi) mod c`` of
them, which does not follow that turn: the destinations of a run of
consecutive NIDs that arrived over different cables could leave over one
(a leaf/spine grown with bigger spines, 20 hosts a leaf: host-name shift
HSD 2.57 where the leaves' tables allow 2; a three-level tree grown with
bigger cores: 3.04 where the spines' allow 1.96).  There it takes the
cable of the turn instead, ``(floor(x / L) c + j) mod #cables`` with
``j`` its slot's occurrence at entry ``x mod L`` of the lower switch's
table (its rank's switches lay theirs out alike): a function of the
destination alone, so the destinations of consecutive NIDs leave over
the cables in turn, as they arrived.  A destination whose entry is not
the switch's (it arrives from a switch that shares otherwise) keeps its
cable.

Which (upper, lower) pairs take it is decided once per routing from the
structure alone (:func:`turn_tables`: the ranks whose every switch shares
so over as many up groups); the kernel then reads only the entry's port
and the destination's NID (:func:`apply_turns`), so a block of rows or of
columns gets the entries a full route gives.  Pure functions on arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np

from smroute.routing.dmodc import Destinations
from smroute.routing.nmodc.cables import counted_cables, structural_shares
from smroute.routing.nmodc.descent import up_groups
from smroute.routing.nmodc.nominal import NominalSlots
from smroute.routing.nmodc.slot_tables import spread_entries
from smroute.routing.runs import runs
from smroute.routing.topology import SwitchGraph

__all__ = ["TurnTables", "apply_turns", "turn_tables"]


@dataclass(frozen=True, eq=False)
class TurnTables:
    """Per lower switch of the turns (``(T,)`` ``lower``, switch ids
    ascending), its table as the switches of its rank with one entry per
    cable lay it out: ``length`` ``(T,)`` entries from ``start`` ``(T,)``
    in the flat ``slot`` / ``occurrence`` / ``count`` arrays (each entry's slot,
    its occurrence among the slot's entries, the slot's entries); per
    (upper, lower) pair of ``key`` ``(K,)`` (``upper * S + lower``,
    ascending) the upper switch's slot at the lower one and its group down
    to it."""

    lower: np.ndarray
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
    """The :class:`TurnTables` of ``g``: the lower switches are those with
    every slot of the ranks whose every switch has structural shares
    (:func:`~smroute.routing.nmodc.cables.structural_shares`) over as many
    up groups, the pairs their slots' upper switches cabled to them more
    than once; ``None`` without any (a switch that lost a whole group
    redirects its entries, which follow no turn)."""
    if g in _TURNS:
        return _TURNS[g]
    out = None
    struct = structural_shares(g)
    up = g.rank[g.grp_remote] > g.rank[g.grp_switch]
    n_up = np.bincount(g.grp_switch[up], minlength=len(g.rank))
    # the ranks whose every switch shares so, over as many up groups
    ranks = [r for r in range(int(g.rank.max(initial=0))) if struct[g.rank == r].all()
             and len(np.unique(n_up[g.rank == r])) == 1]
    if ranks:
        # a switch's table is over its nominal slots, or its own up groups
        ups = up_groups(g)
        width = max(slots.slot_grp.shape[1], ups.shape[1])
        grp = np.full((len(g.rank), width), -1, dtype=np.int64)
        grp[:, :slots.slot_grp.shape[1]] = slots.slot_grp
        grp[slots.own] = -1
        grp[slots.own, :ups.shape[1]] = ups[slots.own]
        arity = np.where(slots.own, (ups >= 0).sum(axis=1), slots.arity)
        inside = np.arange(width)[None, :] < arity[:, None]
        whole = ((grp >= 0) | ~inside).all(axis=1) & (arity > 1)
        lower = np.flatnonzero(np.isin(g.rank, ranks) & whole)
        if len(lower):
            out = _tables(g, grp[lower], arity[lower], lower)
    _TURNS[g] = out
    return out


def _tables(g: SwitchGraph, grp: np.ndarray, arity: np.ndarray,
            lower: np.ndarray) -> TurnTables | None:
    """:func:`turn_tables` of the switches ``lower`` with the groups
    ``grp`` ``(T, W)`` of their tables' slots (``arity`` ``(T,)`` each)."""
    k = int(arity.max())
    grp = grp[:, :k]
    inside = np.arange(k)[None, :] < arity[:, None]
    got = np.where(inside, counted_cables(g)[np.maximum(grp, 0)], 0)
    e_slot, occ = spread_entries(got)  # (as the shares by capacity lay them out)
    length = got.sum(axis=1)
    start = np.cumsum(length) - length
    e_row = np.repeat(np.arange(len(lower)), length)
    # the upper switches cabled to a lower one more than once
    bi, j = np.nonzero(inside & (grp >= 0))
    gid = grp[bi, j]
    up = g.grp_remote[gid]
    down = _group_between(g, up, lower[bi])
    many = (down >= 0) & (g.grp_port_count[np.maximum(down, 0)] > 1)
    if not many.any():
        return None
    key = up[many] * len(g.rank) + lower[bi[many]]
    o = np.argsort(key, kind="stable")
    return TurnTables(lower, length, start, e_slot, occ, got[e_row, e_slot], key[o], j[many][o],
                      down[many][o])


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
    that go down to a lower switch of ``tt`` (:func:`turn_tables`) over
    several cables, where the destination's entry in that switch's table
    is the switch's slot, take the cable of that entry's turn (module
    doc)."""
    if tt is None or not len(switches) or not len(dest.lid):
        return
    n = len(g.rank)
    rows = np.flatnonzero(np.isin(switches, tt.key // n))
    d = np.flatnonzero(~dest.is_switch)
    if not len(rows) or not len(d):
        return
    lid = dest.lid[d]
    for i in rows.tolist():
        s = int(switches[i])
        # the switch below each entry's port
        below = np.full(256, -1, dtype=np.int64)
        gs = np.arange(g.grp_first[s], g.grp_first[s] + g.grp_count[s])
        which, at = runs(g.grp_port_first[gs].astype(np.int64),
                         g.grp_port_count[gs].astype(np.int64))
        below[g.grp_ports[at]] = g.grp_remote[gs[which]]
        low = below[out[i, lid]]
        key = s * n + low
        pos = np.minimum(np.searchsorted(tt.key, key), len(tt.key) - 1)
        hit = np.flatnonzero((tt.key[pos] == key) & (low >= 0))
        if not len(hit):
            continue
        t = np.searchsorted(tt.lower, low[hit])
        x = dest.nid[d[hit]] // pi[low[hit]]
        e = tt.start[t] + x % tt.length[t]
        take = tt.slot[e] == tt.key_slot[pos[hit]]
        hit, t, x, e = hit[take], t[take], x[take], e[take]
        grp = tt.key_group[pos[hit]]
        turn = (x // tt.length[t]) * tt.count[e] + tt.occurrence[e]
        cable = turn % g.grp_port_count[grp]
        out[i, lid[hit]] = g.grp_ports[g.grp_port_first[grp] + cable]
