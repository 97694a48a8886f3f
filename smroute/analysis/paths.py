"""The routing view of a fabric under a set of forwarding tables, and path tracing.

Any :class:`~smroute.tables.lft.ForwardingTables` can be analysed -- ours or
OpenSM's read back from ``opensm-lfts.dump`` -- together with the
:class:`~smroute.fabric.model.Fabric` it routes: switches are matched by node
GUID and destinations by LID, nothing is taken from the routing engine.

Vocabulary
----------
* **End-ports** ``(E,)``: every CA port linked to a switch, ordered by
  (leaf switch, leaf port).  Traffic to an end-port is addressed to its base
  LID.  (Router ports are not end-ports here: a table entry leading to one
  is a dead end for CA traffic.)
* **Leaf**: a switch with at least one end-port; ``leaves`` ``(Lv,)`` lists
  them, ``ep_leaf_row`` gives each end-port's position in ``leaves``.
* **Directed links** get compact integer ids ``0 .. n_links - 1``, one per
  linked switch port ``(switch, port)`` (the switch's *egress* on that port)
  and one per end-port (its *injection* link, CA -> leaf), laid out as:
  ``[0, n_core)`` switch -> switch egress in (switch id, port) order;
  ``n_core + e`` the leaf egress *delivering* to end-port ``e``
  (``deliver_link[e]``); then switch egress to anything else (router ports),
  ``n_switch_links`` in all; then ``n_switch_links + e`` the injection link of
  end-port ``e`` (``inj_link[e]``).  Ids depend on the fabric only, so two
  views of one fabric (e.g. Dmodc's and OpenSM's tables) share them.
  :meth:`RoutingView.link_guid_port` and :meth:`RoutingView.describe_link`
  name an id.

Tracing
-------
A flow from end-port ``a`` to end-port ``b`` crosses ``a``'s injection link,
then at every switch the egress link the table selects for ``b``'s LID,
until the switch port that leads to ``b``.  A walk that meets a
``255`` (no route) entry, an unlinked or management port, a port leading to
another end-port or to a switch missing from the tables is a **dead end**; one
that takes more than ``max_hops`` switch hops is a **loop** (a deterministic
table walk that revisits a switch loops forever).

The path of a flow depends only on (source leaf, destination), so
:func:`pair_paths` walks every (leaf, destination) pair once and keeps the
switch -> switch links ("core" links); a pattern's flows are then a gather
(:meth:`PairPaths.flow_links` adds the injection and delivery links, which
depend on the source and destination alone).

The view itself is :mod:`smroute.analysis.view`; this module walks it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smroute.analysis.view import (
    DEAD_END,
    LOOP,
    NO_ROUTE,
    OK,
    PORTS,
    STATUS_NAMES,
    TO_EP,
    RoutingView,
    routing_view,
)

__all__ = [
    "OK",
    "DEAD_END",
    "LOOP",
    "STATUS_NAMES",
    "NO_ROUTE",
    "PORTS",
    "RoutingView",
    "Trace",
    "PairPaths",
    "routing_view",
    "trace",
    "pair_paths",
    "walk_from_switches",
]

_CHUNK_PAIRS = 1 << 20  # (leaf, destination) pairs walked at once


def walk_from_switches(
    view: RoutingView, start: np.ndarray, dst: np.ndarray, lids: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Walk ``F`` flows from switch ``start[i]`` to end-port ``dst[i]``,
    addressed to ``lids[i]`` (``(F,)`` int64; default the base LID
    ``view.ep_lid[dst]``; with LMC, any of the end-port's LIDs).

    Returns ``(status, hops, steps)``: status ``(F,)`` int8, hops ``(F,)``
    int16 (switch egress links crossed, including the delivering one, or
    until the dead end / loop bound), and per step ``k`` the pair
    ``(flow indices (A_k,) int64, link ids (A_k,) int32)`` of the flows that
    crossed a link at that step.
    """
    n = len(start)
    status = np.full(n, LOOP, dtype=np.int8)
    hops = np.zeros(n, dtype=np.int16)
    steps: list[tuple[np.ndarray, np.ndarray]] = []
    lft = view.lft.ravel()
    width = view.lft.shape[1]
    idx = np.arange(n, dtype=np.int64)
    cur = np.asarray(start, dtype=np.int64)
    d = np.asarray(dst, dtype=np.int64)
    lid = view.ep_lid[d] if lids is None else np.asarray(lids, dtype=np.int64)
    if lids is not None and len(lid) and not 0 < int(lid.min()) <= int(lid.max()) < width:
        raise ValueError(f"LIDs must be in 1..{width - 1} (the tables' width)")
    for _ in range(view.max_hops + 1):
        if not len(idx):
            break
        p = lft[cur * width + lid].astype(np.int64)
        key = cur * PORTS + p
        link = view.link_of[key]
        nx = view.next_sw[key]
        delivered = (nx == TO_EP) & (view.ep_at[key] == d)
        moving = nx >= 0
        crossed = (delivered | moving) & (p != NO_ROUTE) & (link >= 0)
        delivered &= crossed
        moving &= crossed
        steps.append((idx[crossed], link[crossed]))
        hops[idx[crossed]] += 1
        status[idx[delivered]] = OK
        status[idx[~crossed]] = DEAD_END
        idx, cur, d, lid = idx[moving], nx[moving].astype(np.int64), d[moving], lid[moving]
    return status, hops, steps


@dataclass(frozen=True, eq=False)
class Trace:
    """Paths of ``F`` flows.

    links: ``(F, H)`` int32 link ids hop by hop, column 0 the injection link,
        padded with -1 (dead ends and loops keep the links they crossed).
    hops: ``(F,)`` int16 links crossed (injection included).
    status: ``(F,)`` int8 :data:`OK` / :data:`DEAD_END` / :data:`LOOP`.
    """

    links: np.ndarray
    hops: np.ndarray
    status: np.ndarray

    @property
    def ok(self) -> np.ndarray:
        return self.status == OK


def trace(view: RoutingView, src_ep: npt.ArrayLike, dst_ep: npt.ArrayLike,
          lids: npt.ArrayLike | None = None) -> Trace:
    """Trace flows ``src_ep[i] -> dst_ep[i]`` (end-port indices, ``(F,)`` each)
    through the tables, all at once: ``O(F * hops)`` numpy work.  ``lids``
    ``(F,)``: the DLID of each flow (default the destination's base LID; with
    LMC any LID of the destination port)."""
    s = np.asarray(src_ep, dtype=np.int64)
    d = np.asarray(dst_ep, dtype=np.int64)
    lid = None if lids is None else np.asarray(lids, dtype=np.int64)
    status, hops, steps = walk_from_switches(view, view.ep_leaf[s], d, lid)
    h = 1 + len(steps)
    links = np.full((len(s), h), -1, dtype=np.int32)
    links[:, 0] = view.inj_link[s]
    for k, (fi, lk) in enumerate(steps):
        links[fi, k + 1] = lk
    last = int(np.flatnonzero((links >= 0).any(axis=0)).max()) + 1 if len(s) else 1
    return Trace(links[:, :last], (hops + 1).astype(np.int16), status)


@dataclass(frozen=True, eq=False)
class PairPaths:
    """Core (switch -> switch) links of every (leaf, destination end-port) pair.

    links: ``(Lv * E, H)`` int32, row ``leaf_row * E + end-port``: the
        switch -> switch link ids from the leaf to the end-port's leaf, padded
        with -1; rows of pairs that are not delivered are all -1.  (A
        delivered flow also crosses its injection link and
        ``view.deliver_link`` of its destination.)
    status: ``(Lv * E,)`` int8 per pair (:data:`OK`, :data:`DEAD_END`, :data:`LOOP`).
    hops: ``(Lv * E,)`` int16 core links per delivered pair (0 otherwise).
    n_leaves, n_endports, n_links, n_core: sizes.
    """

    links: np.ndarray
    status: np.ndarray
    hops: np.ndarray
    n_leaves: int
    n_endports: int
    n_links: int
    n_core: int

    @property
    def all_ok(self) -> bool:
        return bool((self.status == OK).all())

    @property
    def unroutable_pairs(self) -> int:
        return int((self.status != OK).sum())

    def gather(self, pair: np.ndarray) -> np.ndarray:
        """``links`` rows of ``pair`` (any shape ``X``): ``X + (H,)`` int32.

        Takes whole rows through a 1-D void view of the table, several times
        faster than 2-D fancy indexing when the rows are scattered."""
        h = self.links.shape[1]
        rows = self.links.view(np.dtype((np.void, 4 * h))).reshape(-1)
        return np.take(rows, pair).view(np.int32).reshape(*np.shape(pair), h)

    def pair_index(self, view: RoutingView, src_ep: np.ndarray, dst_ep: np.ndarray) -> np.ndarray:
        """Row of each flow's (source leaf, destination) pair, ``(F,)`` int64."""
        return view.ep_leaf_row[src_ep] * self.n_endports + dst_ep

    def flow_links(self, view: RoutingView, src_ep: npt.ArrayLike,
                   dst_ep: npt.ArrayLike) -> Trace:
        """The links of delivered flows as :func:`trace` gives them, by
        gathering: ``(F, H + 2)`` links (injection, core links, delivery),
        padded with -1; undelivered flows keep only their injection link
        (their status says why)."""
        s = np.asarray(src_ep, dtype=np.int64)
        d = np.asarray(dst_ep, dtype=np.int64)
        pair = self.pair_index(view, s, d)
        h = self.links.shape[1]
        links = np.full((len(s), h + 2), -1, dtype=np.int32)
        links[:, 0] = view.inj_link[s]
        links[:, 1:h + 1] = self.gather(pair)
        st = self.status[pair]
        ok = st == OK
        hops = self.hops[pair].astype(np.int64)
        links[np.flatnonzero(ok), 1 + hops[ok]] = view.deliver_link[d[ok]]
        return Trace(links, np.where(ok, hops + 2, 1).astype(np.int16), st)


def pair_paths(view: RoutingView) -> PairPaths:
    """Walk every (leaf, end-port) pair once (in chunks of destinations) and
    keep their core links: ``Lv * E * H`` int32, e.g. 648 x 11,664 x 4
    (121 MB) for the 11,664-host PGFT."""
    n_lv, n_ep = view.n_leaves, view.n_endports
    status = np.empty((n_lv, n_ep), dtype=np.int8)
    hops = np.zeros((n_lv, n_ep), dtype=np.int16)
    chunk = max(1, _CHUNK_PAIRS // max(n_lv, 1))
    parts: list[tuple[int, int, np.ndarray]] = []
    h_max = 0
    for c0 in range(0, n_ep, chunk):
        c1 = min(c0 + chunk, n_ep)
        nc = c1 - c0
        start = np.repeat(view.leaves, nc)
        dst = np.tile(np.arange(c0, c1, dtype=np.int64), n_lv)
        st, hp, steps = walk_from_switches(view, start, dst)
        ok = st == OK
        core = np.where(ok, hp.astype(np.int64) - 1, 0)
        h = int(core.max()) if len(core) else 0
        links = np.full((n_lv * nc, max(h, 1)), -1, dtype=np.int32)
        for k, (fi, lk) in enumerate(steps[:h]):
            keep = ok[fi] & (lk < view.n_core)
            links[fi[keep], k] = lk[keep]
        status[:, c0:c1] = st.reshape(n_lv, nc)
        hops[:, c0:c1] = core.reshape(n_lv, nc)
        parts.append((c0, c1, links.reshape(n_lv, nc, -1)))
        h_max = max(h_max, h)
    out = np.full((n_lv, n_ep, max(h_max, 1)), -1, dtype=np.int32)
    for c0, c1, lk in parts:
        out[:, c0:c1, : lk.shape[2]] = lk
    return PairPaths(
        links=np.ascontiguousarray(out.reshape(n_lv * n_ep, -1)),
        status=status.ravel(),
        hops=hops.ravel(),
        n_leaves=n_lv,
        n_endports=n_ep,
        n_links=view.n_links,
        n_core=view.n_core,
    )
