"""Nmodc's routes inside a pod that lost an upper switch (beyond the paper).

A sibling group of leaves that lost one of its upper switches whole (a
pod's L2 switch removed) keeps that slot as a lost slot
(:mod:`smroute.routing.nmodc.nominal`): its leaves take ``x mod m`` beside
their intact neighbours, and the lost slot's destinations go to one other
slot per redirect digit, the same for a whole pod.  Towards the other pods
that is what keeps the upper switches' digits in step (A2A, random
traffic).  Towards the leaves of their own pod the upper switch goes down
and consumes no digit, but the lost slot's destinations and the slot they
are sent to are then a few NIDs apart: the exchanges of a power-of-two
distance and the shifts of the topological order meet on the leaves'
up-links and the upper switches' down-links (the 1,728-host tree's pod
that lost an L2 switch: 4 flows on a leaf's up-link in recursive doubling
where Dmodc's ``x mod 11`` has 2).

There the leaves take Dmodc's choice (:func:`smroute.routing.kernel.route_block`,
``C[x mod #C]`` over their closer groups): every leaf of the group lost the
same upper switch, so all agree, and the routes are minimal and up*/down*
as the kernel's.  Which entries: those of a leaf whose sibling group lacks
one of its nominal slots in every member, towards the targets that every
closer upper switch reaches going down.  They are partial pairs of the
redirects by load (:func:`~smroute.routing.nmodc.balance.partial_pairs`),
which never weighs them (their upper switch does not route on up), so an
incremental reroute gives them the kernel's entries back and runs this
after the redirects again, as a full route does.  Pure functions on arrays.
"""

from __future__ import annotations

import numpy as np

from smroute.routing import kernel
from smroute.routing.dmodc import INF, UP_PHASE, Destinations, hop_counts
from smroute.routing.nmodc.balance import nominal_leaves, sibling_groups
from smroute.routing.nmodc.nominal import NominalSlots
from smroute.routing.topology import SwitchGraph

__all__ = ["pod_leaves", "pod_targets", "pod_routes"]

#: Leaves whose targets are tested at once (:func:`pod_targets`).
CHUNK = 64


def pod_leaves(g: SwitchGraph, slots: NominalSlots,
               leaves: np.ndarray | None = None) -> np.ndarray:
    """``(B,)`` int64 the nominal leaves (of ``leaves``, default all) whose
    sibling group lacks one of their nominal slots in every member (an
    upper switch the whole group lost) and lacks nothing else: every member
    has the same slots, so all take the same closer groups."""
    cand = nominal_leaves(g, slots)
    if not len(cand):
        return cand
    label = sibling_groups(g, slots, cand)
    width = max(int(slots.arity[cand].max(initial=1)), 1)
    have = slots.slot_grp[cand, :width] >= 0
    within = np.arange(width)[None, :] < slots.arity[cand][:, None]
    seen = np.zeros((int(label.max()) + 1, width), dtype=bool)
    every = np.ones_like(seen)
    np.logical_or.at(seen, label, have)
    np.logical_and.at(every, label, have)
    same = (seen == every).all(axis=1)[label]
    out = cand[same & (within & ~seen[label]).any(axis=1)]
    return out if leaves is None else np.intersect1d(out, leaves)


def pod_targets(g: SwitchGraph, c: np.ndarray, leaves: np.ndarray,
                targets: np.ndarray) -> np.ndarray:
    """``(B, T)`` bool: which of ``targets`` ``(T,)`` (switch ids) each of
    ``leaves`` ``(B,)`` reaches by going up to an upper switch that goes
    down to it, with every closer upper switch going down (eq. 1)."""
    up = g.rank[g.grp_remote] > g.rank[g.grp_switch]
    row = np.full(len(g.rank), -1, dtype=np.int64)
    row[leaves] = np.arange(len(leaves))
    gid = np.flatnonzero(up & (row[g.grp_switch] >= 0))
    r = row[g.grp_switch[gid]]
    o = np.argsort(r, kind="stable")
    r, ups = r[o], g.grp_remote[gid[o]]
    k = np.arange(len(r)) - np.searchsorted(r, r)  # place among the leaf's up groups
    nbr = np.full((len(leaves), int(k.max(initial=-1)) + 1), -1, dtype=np.int64)
    nbr[r, k] = ups  # (B, K) the upper neighbours, -1 past the last
    out = np.zeros((len(leaves), len(targets)), dtype=bool)
    for a in range(0, len(leaves), CHUNK):
        blk, nb = leaves[a:a + CHUNK], nbr[a:a + CHUNK]
        mine = c[blk][:, targets]  # (b, T)
        theirs = c[np.maximum(nb, 0)][:, :, targets]  # (b, K, T)
        closer = ((nb >= 0)[:, :, None] & ((mine >= UP_PHASE) & (mine < INF))[:, None, :]
                  & (hop_counts(theirs) + 1 == hop_counts(mine)[:, None, :]))
        out[a:a + len(blk)] = closer.any(axis=1) & ~(closer & (theirs >= UP_PHASE)).any(axis=1)
    return out


def pod_routes(g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
               ports: np.ndarray, slots: NominalSlots,
               leaves: np.ndarray | None = None) -> np.ndarray:
    """``ports`` ``(S, W)`` uint8, Nmodc's tables of ``dest`` (encoded costs
    ``c``, nominal dividers ``pi``, ``slots``), with Dmodc's entries for
    the pod leaves (:func:`pod_leaves`, of ``leaves`` if given: whole
    sibling groups or not, each leaf is decided alone) towards their pod
    targets (:func:`pod_targets`), in place; returns ``ports``."""
    sw = pod_leaves(g, slots, leaves)
    if not len(sw) or not len(dest.lid):
        return ports
    targets, tgt_of = np.unique(dest.target, return_inverse=True)
    mine = pod_targets(g, c, sw, targets)  # (B, T)
    keep = mine.any(axis=1)
    sw, mine = sw[keep], mine[keep]
    if not len(sw):
        return ports
    out = np.empty((len(sw), ports.shape[1]), dtype=ports.dtype)
    kernel.route_block(g, c, pi, dest, sw, out)
    b, d = np.nonzero(mine[:, tgt_of.ravel()])  # (leaf, destination) pairs
    lid = dest.lid[d]
    ports[sw[b], lid] = out[b, lid]
    return ports
