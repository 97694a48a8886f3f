"""Nmodc's down-cable offsets of foreign residues (beyond the paper).

An upper switch ``u`` takes a down cable by the digit ``x = floor(t /
Pi[u])`` (Dmodc's eq. 4 inside the group): ``x mod #cables`` for a group
of parallel cables.  In a complete PGFT each child sends ``u`` only the
NIDs of its slot ``j`` of ``u``, ``floor(t / Pi[s]) mod m(s) = j``: one
residue per value of ``x``, and consecutive values of ``x`` spread a
shift permutation's destinations over the cables.  Where a child sends
``u`` a destination of another slot, by capacity (a leaf with more cables
to ``u`` than to its other up-neighbours,
:func:`~smroute.routing.nmodc.slot_tables.capacity_tables`) or as a redirect, that
foreign destination has the ``x`` of a native neighbour and takes its
cable: the two share it while the other cables of the group idle
(Loginoff's capture: leaf ib1's extra destinations through ib7 take the
cables of their NID neighbours, HSD of the topological shifts 3.81).

This pass, run on the final tables (after the redirects by load), moves
such a destination ``k = (floor(t / Pi[s]) - j) mod m(s)`` (its slot's
distance from ``u``'s at the child ``s``; the largest over the children
that send it) places of ``ceil(#cables / m(s))`` cables along ``u``'s down
group: the foreign residues take the cables their native neighbours leave
free.  End-ports on ``u`` itself send it every destination, each judged at
the child its down entry leads to (Loginoff's spine ib7 has hosts).  Only
``u``'s down entries of destinations that some child (or end-port of
``u``) sends from a foreign slot change, and only in down groups of two or
more cables; the entries that decide it never do, so the
same pass finds the same entries in its own output (:func:`move_entries`
with ``undo``: the reroute's way back to the tables before the pass).  A
complete PGFT, and any tree without parallel down cables, keeps its tables.
Every change keeps a route on a cable of the same group: routes stay
minimal up*/down*.  Pure functions on arrays, no loop per destination.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import INF, UP_PHASE, Destinations, seen_cost
from smroute.routing.nmodc.nominal import NominalSlots
from smroute.routing.nmodc.slot_tables import may_share
from smroute.routing.runs import runs
from smroute.routing.topology import SwitchGraph

__all__ = ["port_groups", "foreign_entries", "offset_foreign", "move_entries"]


def port_groups(g: SwitchGraph, switches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(group (B, 256), place (B, 256))`` int64: the group id holding each
    port of ``switches`` ``(B,)`` (-1: none) and the port's place in it."""
    grp = np.full((len(switches), 256), -1, dtype=np.int64)
    place = np.zeros((len(switches), 256), dtype=np.int64)
    row = np.full(g.n_switches, -1, dtype=np.int64)
    row[switches] = np.arange(len(switches))
    gid = np.flatnonzero(row[g.grp_switch] >= 0)
    which, at = runs(g.grp_port_first[gid], g.grp_port_count[gid])
    r = row[g.grp_switch[gid]][which]
    grp[r, g.grp_ports[at]] = gid[which]
    place[r, g.grp_ports[at]] = at - g.grp_port_first[gid][which]
    return grp, place


def _may_stray(g: SwitchGraph, c: np.ndarray, dest: Destinations, slots: NominalSlots,
               senders: np.ndarray) -> np.ndarray:
    """``(B,)`` bool: the ``senders`` ``(B,)`` that may send an upper switch
    a foreign destination it routes down: a target they route up to, that
    one of their slots' switches reaches going down (not the switch
    itself), through a slot that is lost or does not lead closer (a lost
    slot's alternatives, the redirects by load); or shares by capacity
    (:func:`~smroute.routing.nmodc.slot_tables.may_share`).  Elsewhere every slot
    leads closer and the kernel takes the nominal one (a complete PGFT: no
    sender, no work)."""
    targets = np.unique(dest.target)
    ct = c[:, targets]  # (S, T)
    cs = ct[senders]  # (B, T)
    m = slots.arity[senders]
    sg = slots.slot_grp[senders, :max(int(m.max(initial=0)), 1)]  # (B, M)
    inside = np.arange(sg.shape[1])[None, :] < m[:, None]
    # per distinct set of slot switches (-1 lost, -2 past the arity): the
    # worst slot's cost as seen from below, and whether one goes down
    key = np.where(inside, np.where(sg >= 0, g.grp_remote[np.maximum(sg, 0)], -1), -2)
    sets, set_of = np.unique(key, axis=0, return_inverse=True)  # (K, M)
    at = ct[np.maximum(sets, 0)]  # (K, M, T)
    has = (sets >= 0)[:, :, None]
    worst = np.where(has, seen_cost(at, False), 0).max(axis=1)  # (K, T)
    below = ((at > 0) & (at < UP_PHASE) & has).any(axis=1)  # (K, T)
    lost = (sets == -1).any(axis=1)[:, None]  # (K, 1)
    set_of = set_of.ravel()
    stray = (lost[set_of] | (worst[set_of] >= cs)) & below[set_of]
    up = (cs >= UP_PHASE) & (cs < INF)
    return (stray & up).any(axis=1) | may_share(g, c, dest)[senders]


def _foreign_sends(j_lut: np.ndarray, judge_lut: np.ndarray, ports: np.ndarray,
                   rows: np.ndarray, dest: Destinations, pi: np.ndarray, m: np.ndarray,
                   block: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """``(r, d)`` int64: the rows (index into ``rows`` ``(R,)``, switch ids)
    and destinations (index into ``dest``) whose table entry (``ports``
    ``(S, W)`` uint8) is a port of slot ``j`` (``j_lut`` ``(R, 256)`` per
    port, -1 none) other than the digit ``floor(nid / pi) mod m`` of the
    switch ``judge_lut`` ``(R, 256)`` names for that port.  In blocks of
    rows, int16, the digits once per (divider, arity): the ``(R, D)``
    arrays of a big fabric stay in cache."""
    judges = np.unique(judge_lut[j_lut >= 0])
    kinds, kind_of = np.unique(np.stack([pi[judges], m[judges]], axis=1), axis=0,
                               return_inverse=True)
    digits = ((dest.nid[None, :] // kinds[:, :1]) % kinds[:, 1:]).astype(np.int16)  # (K, D)
    kind_sw = np.zeros(len(pi), dtype=np.int16)
    kind_sw[judges] = kind_of.ravel()
    kind_lut = kind_sw[judge_lut]
    j16 = np.where(j_lut >= 0, j_lut, -1).astype(np.int16)
    rs, ds = [], []
    for lo in range(0, len(rows), block):
        p = ports[rows[lo:lo + block]][:, dest.lid]  # (b, D)
        j = np.take_along_axis(j16[lo:lo + block], p, axis=1)
        present = np.unique(kind_lut[lo:lo + block][j16[lo:lo + block] >= 0])
        if len(present) == 1:
            hit = (j >= 0) & (j != digits[present[0]])
        else:
            kk = np.take_along_axis(kind_lut[lo:lo + block], p, axis=1)
            hit = np.zeros(j.shape, dtype=bool)
            for k in present.tolist():
                hit |= (kk == k) & (j != digits[k])
            hit &= j >= 0
        r, d = np.nonzero(hit)
        rs.append(r + lo)
        ds.append(d)
    return np.concatenate(rs), np.concatenate(ds)


def foreign_entries(
    g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations, ports: np.ndarray,
    slots: NominalSlots,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The upper switches' down entries this pass moves (module doc):
    ``(u (K,), d (K,), shift (K,))`` int64, switch id, destination index
    (into ``dest``) and places along the down group; ``ports`` ``(S, W)``
    uint8 the tables (before or after the pass: the same entries), ``c``
    ``(S, S)`` the encoded costs, ``pi`` ``(S,)`` the nominal dividers,
    ``slots`` the nominal slots (a switch with its own groups as slots:
    those, by its arity)."""
    empty = np.zeros(0, dtype=np.int64)
    par = (g.rank[g.grp_remote] < g.rank[g.grp_switch]) & (g.grp_port_count > 1)
    if g.mode != "tree" or not par.any() or not len(dest.lid):
        return empty, empty, empty
    n = g.n_switches
    has = np.zeros(n, dtype=bool)
    has[g.grp_switch[par]] = True  # switches with parallel down cables
    m = slots.arity
    width = slots.slot_grp.shape[1]
    inside = (slots.slot_grp >= 0) & (np.arange(width)[None, :] < m[:, None])
    s_j, j_j = np.nonzero(inside)
    gid = slots.slot_grp[s_j, j_j]
    up = has[g.grp_remote[gid]] & (m[s_j] >= 2)
    s_j, j_j, gid = s_j[up], j_j[up], gid[up]
    if not len(s_j):
        return empty, empty, empty
    # per group: the slot of the upper switch at the child, on the child's up
    # group and on the upper switch's parallel down group to the child; the
    # switch whose digit judges it (the child) and whose entry moves (the
    # upper switch)
    key = g.grp_switch * n + g.grp_remote
    o = np.argsort(key, kind="stable")
    at = np.minimum(np.searchsorted(key[o], g.grp_remote[gid] * n + s_j), len(o) - 1)
    back = o[at][key[o][at] == g.grp_remote[gid] * n + s_j]  # (one per up group)
    back_j = j_j[key[o][at] == g.grp_remote[gid] * n + s_j]
    slot = np.full(len(g.grp_remote), -1, dtype=np.int64)
    slot[gid] = j_j
    down_slot = np.full(len(g.grp_remote), -1, dtype=np.int64)
    down_slot[back[par[back]]] = back_j[par[back]]
    is_down = g.rank[g.grp_remote] < g.rank[g.grp_switch]
    judge = np.where(is_down, g.grp_remote, g.grp_switch)
    moves = np.where(is_down, g.grp_switch, g.grp_remote)
    # children that may send a destination up from a foreign slot; upper
    # switches with end-ports, which send it every destination (judged at the
    # child its down entry leads to)
    senders = np.unique(s_j)
    senders = senders[_may_stray(g, c, dest, slots, senders)]
    hosts = np.flatnonzero(has & (np.bincount(g.ep_switch, minlength=n) > 0))
    rows = np.union1d(senders, hosts)
    if not len(rows):
        return empty, empty, empty
    grp, _ = port_groups(g, rows)
    e = np.maximum(grp, 0)
    as_sender = np.isin(rows, senders)[:, None] & ~is_down[e]
    as_host = np.isin(rows, hosts)[:, None] & is_down[e]
    j_lut = np.where((grp >= 0) & as_sender, slot[e], np.where((grp >= 0) & as_host,
                                                               down_slot[e], -1))
    r, d = _foreign_sends(j_lut, judge[e], ports, rows, dest, pi, m)
    eg = grp[r, ports[rows[r], dest.lid[d]]]
    v, u = judge[eg], moves[eg]
    mk = m[v]
    k = ((dest.nid[d] // pi[v]) - j_lut[r, ports[rows[r], dest.lid[d]]]) % mk
    # u's entry: a down group of parallel cables
    ups = np.unique(u)
    ugrp, _ = port_groups(g, ups)
    ue = ugrp[np.searchsorted(ups, u), ports[u, dest.lid[d]]]
    ok = (ue >= 0) & par[np.maximum(ue, 0)]
    u, d, k, mk, ue = u[ok], d[ok], k[ok], mk[ok], ue[ok]
    if not len(u):
        return empty, empty, empty
    cnt = g.grp_port_count[ue]
    shift = k * (-(-cnt // mk))
    # the largest over the sources that send it
    key = u * len(dest.lid) + d
    o = np.lexsort((shift, key))
    last = np.r_[key[o][1:] != key[o][:-1], True]
    o = o[last]
    return u[o].astype(np.int64), d[o].astype(np.int64), shift[o].astype(np.int64)


def offset_foreign(
    g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations, ports: np.ndarray,
    slots: NominalSlots,
) -> np.ndarray:
    """``ports`` ``(S, W)`` uint8, Nmodc's tables, with the upper switches'
    down entries of foreign residues moved along their groups (module doc),
    in place; returns ``ports``."""
    return move_entries(g, dest, ports, foreign_entries(g, c, pi, dest, ports, slots))


def move_entries(g: SwitchGraph, dest: Destinations, ports: np.ndarray,
                 entries: tuple[np.ndarray, np.ndarray, np.ndarray],
                 undo: bool = False) -> np.ndarray:
    """``ports`` with ``entries`` (:func:`foreign_entries`) moved along
    their groups, in place; ``undo``: moved back (the tables before
    :func:`offset_foreign`, from its output).  Returns ``ports``."""
    u, d, shift = entries
    if not len(u):
        return ports
    ups, row = np.unique(u, return_inverse=True)
    ugrp, place = port_groups(g, ups)
    lid = dest.lid[d]
    cur = ports[u, lid]
    grp = ugrp[row, cur]
    cnt = g.grp_port_count[grp]
    at = (place[row, cur] + (-shift if undo else shift)) % cnt
    ports[u, lid] = g.grp_ports[g.grp_port_first[grp] + at]
    return ports
