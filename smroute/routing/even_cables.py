"""Nmodc's even cables (beyond the paper): where the shares by capacity
redistribute a switch's up-going destinations, each up group deals them over
its parallel cables in NID order.

The kernel takes a cable inside a group by Dmodc's next digit, ``floor(x /
m) mod #cables``.  Where the shares by capacity apply
(:func:`~smroute.routing.slot_tables.may_share`: a switch whose up cables
are bound by their destinations), the destinations a group carries are no
longer every ``m``-th NID, and the digit loads the group's cables unevenly.
On X5's capture, leaf 27b0 sends 21 destinations to spine 8530 as 7, 8 and
6 and 20 to spine 8098 as 8, 5 and 7 (A2A 8, the 9 hosts of the leaf
against 8 destinations). Dealt in NID order the cables carry 7, 7 and 7
and 7, 7 and 6 (A2A 7, SP 5 to 4, HSD of the shifts 3.62 to 3.56).

Only the cable inside a group changes, never the group: every route keeps
its switches, so it stays minimal, up*/down* and on the same lanes.  The
deal reads and writes only the switch's own entries through the group, so
it gives the same result on its own output (an incremental reroute can run
it again over every such switch).  A complete PGFT and the study's trees
have no such switch: their tables do not change.  Pure functions on
arrays, no loop per destination.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.dmodc import Destinations
from smroute.routing.down_offsets import port_groups
from smroute.routing.topology import SwitchGraph

__all__ = ["deal_up_cables"]


def deal_up_cables(g: SwitchGraph, dest: Destinations, ports: np.ndarray,
                   share: np.ndarray) -> np.ndarray:
    """``ports`` ``(S, W)`` uint8 with the end-port destinations each leaf
    of ``share`` ``(S,)`` bool (:func:`~smroute.routing.slot_tables.may_share`)
    sends through an up group of two or more cables dealt over that group's
    cables in NID order, round-robin from its first cable, at the leaves
    where some such group's cables carry counts more than one apart (module
    doc); in place, returns ``ports``.  A leaf whose groups are even keeps
    its cables (a complete PGFT's), and so do switch LIDs (no data
    traffic).  Upper switches keep theirs: in a complete PGFT with parallel
    up cables Dmodc sends an L2 switch's up-going destinations through one
    cable of each group (PGFT(3;2,2,2;1,2,2;1,2,2)), and that is the paper's
    table.  Up: every group not going down (as the shares by capacity count
    them)."""
    switches = np.flatnonzero(share & (g.rank == 0))
    if not len(switches):
        return ports
    eps = np.flatnonzero(~dest.is_switch)
    lids = dest.lid[eps[np.argsort(dest.nid[eps], kind="stable")]]  # (E,) in NID order
    grp, place = port_groups(g, switches)  # (B, 256) each
    dealt = (g.rank[g.grp_remote] >= g.rank[g.grp_switch]) & (g.grp_port_count >= 2)
    sub = ports[switches[:, None], lids[None, :]].astype(np.int64)  # (B, E)
    gid = np.take_along_axis(grp, sub, axis=1)
    on = gid >= 0
    on[on] = dealt[gid[on]]
    b, e = np.nonzero(on)  # row by row, each row's columns in NID order
    if not len(b):
        return ports
    key = b * len(g.grp_switch) + gid[b, e]
    order = np.argsort(key, kind="stable")
    b, e, key = b[order], e[order], key[order]
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    size = np.diff(np.r_[first, len(key)])
    gg = gid[b[first], e[first]]  # per (switch, group) run: the group
    # only the switches with a group whose cables are uneven (more than one apart)
    n_c = g.grp_port_count[gg]
    width = int(n_c.max(initial=1))
    run = np.repeat(np.arange(len(first)), size)
    cnt = np.bincount(run * width + place[b, sub[b, e]],
                      minlength=len(first) * width).reshape(len(first), width)
    low = np.where(np.arange(width)[None, :] < n_c[:, None], cnt, len(key)).min(axis=1)
    uneven = np.zeros(len(switches), dtype=bool)
    uneven[b[first][cnt.max(axis=1) - low > 1]] = True
    uneven = uneven[b]
    rank = (np.arange(len(key)) - np.repeat(first, size))[uneven]
    b, e, gr = b[uneven], e[uneven], np.repeat(gg, size)[uneven]
    ports[switches[b], lids[e]] = g.grp_ports[g.grp_port_first[gr] + rank % g.grp_port_count[gr]]
    return ports
