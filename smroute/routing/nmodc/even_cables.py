"""Nmodc's even cables (beyond the paper): a leaf whose up-going
destinations the shares by capacity redistribute deals each up group's
destinations over its parallel cables in NID order.

The kernel takes a cable inside a group by Dmodc's next digit, ``floor(x /
m) mod #cables``.  Where the shares by capacity apply
(:func:`~smroute.routing.nmodc.slot_tables.sharing`: a switch whose up
cables are bound by their destinations and whose shares can move one), a
leaf's groups no longer carry every ``m``-th NID, and the digit loads a
group's cables unevenly.  On X5's capture, leaf 27b0 sends 21
destinations to spine 8530 as 7, 8 and 6 and 20 to spine 8098 as 8, 5
and 7 (A2A 8: the 9 hosts of the leaf against 8 destinations).  Dealt
in NID order the cables carry 7, 7 and 7 and 7, 7 and 6 (A2A 7, SP 5 to
4, HSD of the shifts 3.62 to 3.56; loginoff: SP 5 to 4, HSD 3.60 to
3.53).

Only the cable inside a group changes, never the group: every route keeps
its switches, so it stays minimal, up*/down* and on the same lanes.  The
deal reads and writes only the leaf's own entries through the group, so it
gives the same result on its own output (an incremental reroute runs it
again over every sharing leaf).  A complete PGFT's leaves and the study's
trees never share (their shares are even, where their up cables are bound
by their destinations at all): their tables do not change.  Pure
functions on arrays, no loop per destination.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import Destinations
from smroute.routing.nmodc.cables import structural_shares
from smroute.routing.runs import runs
from smroute.routing.topology import SwitchGraph

__all__ = ["deal_up_cables", "lmc_offsets", "port_groups"]


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


def lmc_offsets(dest: Destinations, eps: np.ndarray) -> np.ndarray:
    """``(K,)`` int64: the LMC offset of each end-port destination ``eps``
    (indices into ``dest``): its LID less its end-port's base LID."""
    own = dest.owner[eps]
    base = np.full(int(own.max(initial=-1)) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(base, own, dest.lid[eps])
    return (dest.lid[eps] - base[own]).astype(np.int64)


def deal_up_cables(g: SwitchGraph, dest: Destinations, ports: np.ndarray,
                   share: np.ndarray) -> np.ndarray:
    """``ports`` ``(S, W)`` uint8 with the end-port destinations each leaf
    of ``share`` ``(S,)`` bool (:func:`~smroute.routing.nmodc.slot_tables.sharing`)
    sends through an up group of two or more cables dealt over that group's
    cables in NID order, round-robin from its first cable (module doc), each
    LMC offset on its own (offset ``i`` from cable ``i``: the base LIDs alone
    carry most traffic, and dealt together with the other LIDs of their
    end-ports they would all take one cable of each group); in place,
    returns ``ports``.  Switch LIDs keep their cables (no data
    traffic).  Upper switches keep theirs: in a complete PGFT with parallel
    up cables Dmodc sends an L2 switch's up-going destinations through one
    cable of each group (PGFT(3;2,2,2;1,2,2;1,2,2), where
    :func:`~smroute.routing.nmodc.slot_tables.may_share` holds for the L2
    switches), and that is the paper's table; no leaf of a
    complete PGFT shares.  Up: every group not going down (as the shares by
    capacity count them).  The leaves of structural shares
    (:func:`~smroute.routing.nmodc.cables.structural_shares`) keep the
    kernel's cables: their tables give each cable its own entries, in
    turn, and a deal in NID order that skips the leaf's own NIDs would
    break that turn after them."""
    switches = np.flatnonzero(share & (g.rank == 0))
    if len(switches):
        switches = switches[~structural_shares(g)[switches]]
    if not len(switches):
        return ports
    eps = np.flatnonzero(~dest.is_switch)
    off = lmc_offsets(dest, eps)
    o = np.lexsort((dest.nid[eps], off))  # per LMC offset, in NID order
    lids, off = dest.lid[eps[o]], off[o]  # (E,)
    grp, _ = port_groups(g, switches)  # (B, 256)
    dealt = (g.rank[g.grp_remote] >= g.rank[g.grp_switch]) & (g.grp_port_count >= 2)
    gid = np.take_along_axis(grp, ports[switches[:, None], lids[None, :]].astype(np.int64),
                             axis=1)  # (B, E)
    on = gid >= 0
    on[on] = dealt[gid[on]]
    b, e = np.nonzero(on)  # row by row, each row's columns per offset in NID order
    key = (b * len(g.grp_switch) + gid[b, e]) * (int(off.max(initial=0)) + 1) + off[e]
    order = np.argsort(key, kind="stable")
    b, e, key = b[order], e[order], key[order]
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])  # ([0] for none: no run)
    rank = np.arange(len(key)) - np.repeat(first, np.diff(np.r_[first, len(key)]))
    rank += off[e]  # LID offset i of an end-port starts its deal at cable i
    gr = gid[b, e]
    ports[switches[b], lids[e]] = g.grp_ports[g.grp_port_first[gr] + rank % g.grp_port_count[gr]]
    return ports
