"""Twin switches: switches whose rows Nmodc's kernel
(:func:`~smroute.routing.nmodc.nominal.route_block`, without shares by
capacity) computes the same towards a set of targets, by construction.

The kernel reads, of a switch ``s`` and a target ``t``: its encoded cost
``c[s, t]``; per port group position, the remote switch's cost ``c[r, t]``,
whether the group goes down (the remote's rank below ``s``'s) and the
group's ports (in cable order); the nominal slots as group positions (with
the arity and the own-groups mark folded in, ``n_slots``); its divider and
redirect divider.  Nothing else of ``s`` enters an entry towards ``t``
(group ids index the port arrays only), but the destinations on ``s``
itself (its local ports): a switch among the targets has no twin, as its
cost to itself (0) is no other switch's.
Switches equal in all of these (the leaves of intact pods towards a damaged
pod's leaf: the same costs, slots and port numbers) get the same entries,
and the kernel routes one of each set (:func:`twin_rows`).  A real fabric
cabled unevenly has fewer twins: the rows stay the kernel's either way.
"""

from __future__ import annotations

import numpy as np

from smroute.routing.kernel import dedupe_rows
from smroute.routing.topology import SwitchGraph

__all__ = ["twin_rows"]


def twin_rows(g: SwitchGraph, c: np.ndarray, n_slots: np.ndarray, pi: np.ndarray,
              rd: np.ndarray, sw: np.ndarray,
              targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, row_of)``: of the switches ``sw`` ``(B,)``, one of each set
    of twins towards ``targets`` ``(T,)`` (switch ids) (module doc),
    ``first`` ``(R,)`` indices into ``sw``, ascending; ``row_of`` ``(B,)``
    each switch's index into ``first``: its row is that twin's.  ``c``
    ``(S, S)`` the encoded costs, ``n_slots`` the packed nominal slots
    (:func:`~smroute.routing.nmodc.nominal.packed_slots`), ``pi`` / ``rd``
    ``(S,)`` the dividers and redirect dividers."""
    b = len(sw)
    if b < 2:
        return np.arange(b), np.arange(b)
    n_g = g.grp_count[sw]
    width = max(int(n_g.max()), 1)
    valid = np.arange(width)[None, :] < n_g[:, None]
    gid = np.where(valid, g.grp_first[sw][:, None] + np.arange(width)[None, :], 0)
    remote = np.where(valid, g.grp_remote[gid], 0) if len(g.grp_remote) else gid
    # the cost rows read (the switches' and their remotes'), at the targets
    used = np.zeros(len(c), dtype=bool)
    used[sw] = True
    used[remote[valid]] = True
    rows = np.flatnonzero(used)
    at_row = np.cumsum(used) - 1
    ct = np.take(np.take(c, rows, axis=0), targets, axis=1)  # (R, T)
    rem = np.take(ct, at_row[remote], axis=0)  # (B, G, T)
    rem[~valid] = 0
    down = valid & (g.rank[remote] < g.rank[sw][:, None])
    count = np.where(valid, g.grp_port_count[gid], 0) if len(g.grp_remote) else gid
    k = max(int(count.max(initial=1)), 1)
    cable = np.arange(k)
    at = np.minimum((g.grp_port_first[gid] if len(g.grp_remote) else gid)[..., None] + cable,
                    max(len(g.grp_ports) - 1, 0))
    ports = np.where(cable < count[..., None], g.grp_ports[at] if len(g.grp_ports) else 0, -1)
    slots = n_slots[sw]
    slot_pos = np.where(slots >= 0, slots - g.grp_first[sw][:, None], slots)
    words = np.concatenate([n_g[:, None], slot_pos, pi[sw][:, None], rd[sw][:, None],
                            ports.reshape(b, -1)], axis=1).astype(np.int64)
    key = np.concatenate([words.view(np.uint8).reshape(b, -1), ct[at_row[sw]],
                          rem.reshape(b, -1), down.view(np.uint8)], axis=1)
    row_of, first = dedupe_rows(np.ascontiguousarray(key))
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(first), dtype=np.int64)
    rank[order] = np.arange(len(first))
    return first[order], rank[row_of]
