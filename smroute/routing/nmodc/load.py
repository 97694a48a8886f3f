"""The load the redirects by load start from (:mod:`smroute.routing.nmodc.balance`):
the destinations the leaves' nominal slots send through each egress link of
their upper switches, counted from the kernel's tables (compiled where
:mod:`smroute.routing.nmodc.native` is built; the numpy count here is the
reference, the same counts)."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from smroute.routing.dmodc import Destinations
from smroute.routing.nmodc import native
from smroute.routing.nmodc.nominal import NominalSlots
from smroute.routing.runs import place_in_runs, stable_order

__all__ = ["Pairs", "carried", "nominal_load"]


class Pairs(Protocol):
    """What the load reads of the partial pairs
    (:class:`~smroute.routing.nmodc.balance.PartialPairs`, whose doc says
    what each array holds)."""

    @property
    def leaves(self) -> np.ndarray: ...
    @property
    def ups(self) -> np.ndarray: ...
    @property
    def slot_ui(self) -> np.ndarray: ...
    @property
    def eps(self) -> np.ndarray: ...
    @property
    def t_of(self) -> np.ndarray: ...
    @property
    def up_cost(self) -> np.ndarray: ...
    @property
    def leaf_cost(self) -> np.ndarray: ...


def carried(pr: Pairs, used: np.ndarray | None = None) -> np.ndarray:
    """``(U, T)`` bool: a leaf below upper switch ``u`` reaches target ``t``
    through ``u`` (the highest cost of ``u``'s children against ``u``'s; a
    leaf's cost to itself is 0); ``used`` ``(U,)`` bool: only these upper
    switches' rows (the others False)."""
    b, _ = np.nonzero(pr.slot_ui >= 0)
    u = pr.slot_ui[pr.slot_ui >= 0]
    o = stable_order(u, len(pr.ups))
    b_by_u, u_sorted = b[o], u[o]
    nth = place_in_runs(u_sorted)
    n_u, n_t = pr.up_cost.shape
    # each upper switch's children in a row (-1: none), their highest cost
    child = np.full((n_u, int(nth.max(initial=-1)) + 1), -1, dtype=np.int64)
    child[u_sorted, nth] = b_by_u
    at = np.arange(n_u) if used is None else np.flatnonzero(used)
    child = child[at]
    highest = np.zeros((len(at), n_t), dtype=pr.leaf_cost.dtype)
    for k in range(child.shape[1]):
        has = np.flatnonzero(child[:, k] >= 0)
        if len(has) == len(at):
            np.maximum(highest, np.take(pr.leaf_cost, child[:, k], axis=0), out=highest)
        else:
            highest[has] = np.maximum(highest[has], np.take(pr.leaf_cost, child[has, k], axis=0))
    if used is None:
        return pr.up_cost < highest
    out = np.zeros((n_u, n_t), dtype=bool)
    out[at] = np.take(pr.up_cost, at, axis=0) < highest
    return out


def nominal_load(pi: np.ndarray, dest: Destinations, ports: np.ndarray, slots: NominalSlots,
                 pr: Pairs, used: np.ndarray | None = None, compiled: bool = True) -> np.ndarray:
    """``(U * 256,)`` int64: per egress link ``(upper switch index, port)``
    of the upper switches of the partial pairs ``pr``, the end-port
    destinations the leaves' nominal slots send through it in ``ports``
    ``(S, W)`` uint8 (the kernel's tables).  Siblings share their nominal
    slots, so an upper switch takes the destinations of its slot ``j`` (``x
    mod m == j``) on the targets it leads some leaf below it closer to
    (:func:`carried`).  ``used`` ``(U,)`` bool: only these upper switches'
    links (the others 0); ``compiled``: count in C where the library is built."""
    ups, leaves = pr.ups, pr.leaves
    b, j = np.nonzero(pr.slot_ui >= 0)
    u = pr.slot_ui[b, j]
    through = carried(pr, used)
    at = np.arange(len(ups)) if used is None else np.flatnonzero(used)
    # u's slot, arity and divider (one per upper switch: its siblings')
    slot_of = np.zeros(len(ups), dtype=np.int64)
    slot_of[u] = j
    m_of = np.ones(len(ups), dtype=np.int64)
    m_of[u] = slots.arity[leaves[b]]
    pi_of = np.ones(len(ups), dtype=np.int64)
    pi_of[u] = pi[leaves[b]]
    eps, t_of = pr.eps, pr.t_of
    kinds = sorted(set(zip(m_of.tolist(), pi_of.tolist(), strict=True)))
    if compiled and len(ups):
        base = int(pi_of.max()) + 1
        kind_of = np.searchsorted(np.array([m * base + p for m, p in kinds]), m_of * base + pi_of)
        res = np.stack([(dest.nid[eps] // p) % m for m, p in kinds])  # (K, E)
        got = native.up_load(kind_of[at], slot_of[at], res, through[at], t_of, ups[at],
                             dest.lid[eps], ports)
        if got is not None:
            out = np.zeros((len(ups), 256), dtype=np.int64)
            out[at] = got.reshape(len(at), 256)
            return out.ravel()
    links = []
    for m, p in kinds:
        us = np.intersect1d(np.flatnonzero((m_of == m) & (pi_of == p)), at)
        res = (dest.nid[eps] // p) % m
        for j in np.unique(slot_of[us]).tolist():  # a slot's switches share its destinations
            uj, ej = us[slot_of[us] == j], np.flatnonzero(res == j)
            keep = np.take(np.take(through, uj, axis=0), t_of[ej], axis=1)
            egress = np.take(np.take(ports, ups[uj], axis=0), dest.lid[eps[ej]], axis=1)
            links.append((uj[:, None] * 256 + egress)[keep])
    return np.bincount(np.concatenate(links) if links else np.zeros(0, np.int64),
                       minlength=len(ups) * 256).astype(np.int64, copy=False)
