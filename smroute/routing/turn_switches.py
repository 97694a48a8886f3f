"""Which switches the routes of a destination the tree cannot serve may
turn at, on one VL: the destinations some needed pair lacks an up*/down*
path to (:func:`needed_turns`), the switches lacking one
(:func:`lacking_sources`), the switches each may turn at
(:func:`turn_options`: a path to the destination that every lacking switch
has a path to), each one's first (:func:`turn_roots`) and those most of
them share (:func:`shared_roots`).  Pure: arrays in, arrays out; used by
:mod:`smroute.routing.orient`.
"""

from __future__ import annotations

import numpy as np

from smroute.fabric.roles import NeededPairs
from smroute.routing.dmodc import INF, Destinations
from smroute.routing.topology import SwitchGraph

__all__ = ["lacking_sources", "needed_turns", "option_keys", "shared_roots", "turn_options",
           "turn_roots"]


def needed_turns(g: SwitchGraph, c: np.ndarray, dest: Destinations,
                 needed: NeededPairs | None) -> np.ndarray:
    """``(D,)`` bool: end-port destinations that some switch carrying
    end-ports needs (``needed``; ``None``: every CA) but has no up*/down*
    path to, although cables join them (costs ``c``).  Switch LIDs without an
    up*/down* path stay unrouted: they never need a turn."""
    src = np.unique(g.ep_switch)
    if not len(src) or not len(dest.lid):
        return np.zeros(len(dest.lid), dtype=bool)
    unreached = c[src] == INF  # (sources, S)
    if len(np.unique(g.component)) > 1:
        unreached &= g.component[src][:, None] == g.component[None, :]
    ca = ~dest.is_switch
    any_t = unreached.any(axis=0)  # per target switch
    if needed is None:
        return ca & any_t[dest.target]
    agg_t = (unreached & (needed.every[src][:, None] | needed.adjacent[src])).any(axis=0)
    agg = np.zeros(len(dest.lid), dtype=bool)
    agg[ca] = needed.agg[dest.owner[ca]]
    return ca & np.where(agg, agg_t[dest.target], any_t[dest.target])


def turn_options(g: SwitchGraph, c: np.ndarray, dest: Destinations, j: int,
                 needed: NeededPairs) -> tuple[np.ndarray, np.ndarray]:
    """The switches destination ``j``'s routes may turn at: those with an
    up*/down* path to it that every switch carrying end-ports that need it
    but lack a path has a path to; ``(low, high)`` int64, leaves by most up
    groups then lowest GUID first, and the highest ranks first."""
    ok = _may_turn(g, c, dest, j, needed)
    low, high = _low_first(g), _high_first(g)
    return low[ok[low]], high[ok[high]]


def _may_turn(g: SwitchGraph, c: np.ndarray, dest: Destinations, j: int,
              needed: NeededPairs) -> np.ndarray:
    """``(S,)`` bool: the switches of :func:`turn_options`."""
    t = int(dest.target[j])
    lack = lacking_sources(g, c, dest, j, needed)
    ok = (c[:, t] < INF) & (c[lack] < INF).all(axis=0) & (g.rank >= 0)
    return ok & (g.component == g.component[t])


def _low_first(g: SwitchGraph) -> np.ndarray:
    """``(S,)`` int64: switch ids, leaves by most up groups then lowest GUID first."""
    return np.lexsort((g.sw_guid, -g.n_up, ~g.is_leaf))


def _high_first(g: SwitchGraph) -> np.ndarray:
    """``(S,)`` int64: switch ids, the highest ranks then lowest GUID first."""
    return np.lexsort((g.sw_guid, -g.rank))


def _options_by_key(g: SwitchGraph, c: np.ndarray, dest: Destinations, sel: np.ndarray,
                    needed: NeededPairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The turn options of the destinations ``sel`` once per
    :func:`option_keys` key: ``(which, ok, weight)``, each destination's key
    ``(len(sel),)``, per key the switches it may turn at ``(K, S)`` bool
    (:func:`turn_options`) and its destinations ``(K,)``."""
    keys, first, which, weight = np.unique(option_keys(dest, sel, needed), return_index=True,
                                           return_inverse=True, return_counts=True)
    ok = np.zeros((len(keys), g.n_switches), dtype=bool)
    for k, i in enumerate(first.tolist()):
        ok[k] = _may_turn(g, c, dest, int(sel[i]), needed)
    return which, ok, weight


def option_keys(dest: Destinations, sel: np.ndarray, needed: NeededPairs) -> np.ndarray:
    """``(K,)`` int64: per destination of ``sel``, a key the destinations
    with the same turn options share (the target switch, and whether an
    aggregation node)."""
    return dest.target[sel] * 2 + (~dest.is_switch[sel] & needed.agg[
        np.where(dest.is_switch[sel], 0, dest.owner[sel])])


def lacking_sources(g: SwitchGraph, c: np.ndarray, dest: Destinations, j: int,
                    needed: NeededPairs) -> np.ndarray:
    """``(K,)`` int64: the switches carrying end-ports that need destination
    ``j`` but have no up*/down* path to it (same component)."""
    t = int(dest.target[j])
    a = bool(not dest.is_switch[j] and needed.agg[dest.owner[j]])
    src = np.unique(g.ep_switch)
    lack = src[(c[src, t] == INF) & (g.component[src] == g.component[t])]
    return lack[needed.mask(lack, np.array([t]), np.array([a]))[:, 0]]


def turn_roots(g: SwitchGraph, c: np.ndarray, dest: Destinations, turns: np.ndarray,
               needed: NeededPairs, *, low_first: bool = True) -> np.ndarray:
    """``(K,)`` int64: per destination of ``turns`` ``(D,)`` bool, the first
    switch of :func:`turn_options` (``low_first``: of the low list, else of
    the high one), -1 if none."""
    which, ok, _ = _options_by_key(g, c, dest, np.flatnonzero(turns), needed)
    order = _low_first(g) if low_first else _high_first(g)
    root = np.where(ok.any(axis=1), order[np.argmax(ok[:, order], axis=1)], -1)
    return root[which]


def shared_roots(g: SwitchGraph, c: np.ndarray, dest: Destinations, turns: np.ndarray,
                 needed: NeededPairs) -> np.ndarray:
    """``(K,)`` int64: per destination of ``turns`` ``(D,)`` bool, a turn
    switch as many share as may: the switch most of them may turn at
    (:func:`turn_options`; on a tie the first of the low list) for those,
    then the same for the others; -1 where none.  Turns at one leaf close a
    cycle only through a chain of the tree's up*/down* routes from one of
    its cables up back to one of its cables down: up through one
    up-neighbour and down through another that shares an ancestor with it.
    Where a leaf's up-neighbours share none (a PGFT's leaf: one spine per
    index, each index its own tops) turns at it close none, while turns at
    two leaves, one from index ``a`` to ``b`` and the other back, do (the
    channel-dependency check decides each case)."""
    which, ok, weight = _options_by_key(g, c, dest, np.flatnonzero(turns), needed)
    low = _low_first(g)
    root = np.full(len(ok), -1, dtype=np.int64)
    left = ok.any(axis=1)
    while left.any():
        r = int(low[np.argmax((weight[left] @ ok[left])[low])])
        took = left & ok[:, r]
        root[took] = r
        left &= ~took
    return root[which]
