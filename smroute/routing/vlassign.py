"""Service levels and SL-to-VL tables for routes with detours (beyond the paper).

The routes of :mod:`smroute.routing.detour` are up*/down* within each layer
and turn up again only where they enter a smaller layer.  A packet keeps its
service level (SL) end to end; each switch maps (input port, output port,
SL) to the virtual lane (VL) of the next link with its SL-to-VL tables.  So
the lane of a hop is a function of (switch, input port, output port, SL):
the SL selects a *lane profile*.

* SL 0 maps to VL 0 everywhere: every pair with an up*/down* path uses it.
* A path to a detour target ``t`` (a destination switch: its end-port LIDs)
  from a switch of layer ``>= 1`` (no up*/down* path) uses the target's SL
  ``s_t``.  Its hop out of switch ``x`` wants VL ``o + K_t - layer_t(x)``
  (``K_t``: the largest routed layer; ``o``: the target's shift in its SL):
  nondecreasing along the route and one higher at each down->up turn.  So
  every VL carries only up*/down* segments of the tree's orientation
  (acyclic) and no packet goes back to a lower VL: no credit loop
  (:mod:`smroute.routing.deadlock` checks it).
* Targets are coloured greedily (largest ``K_t`` first): a target shares SL
  ``s >= 1`` with the targets already on it when every (switch, input port,
  output port) both use asks for the same VL up to one shift of its profile
  and the SL's lanes still fit (the SL's profile starts at VL 0).  Input
  ports tell apart a route that turned at a switch from one that starts
  there, so a turn switch of one target can be a source of another.
* An *escape* SL (optional): the targets that find no SL, or need more
  layers than the VLs allow, are routed up*/down* in another acyclic
  orientation (:func:`~smroute.routing.topology.rooted_graph`) from every
  switch, on a VL of their own that nothing else uses.

The first and last hops (from and to an end-port) depend on nothing and
nothing depends on them: VL 0.  ``path_sl(slid, dlid)`` is
:meth:`VirtualLanes.sl_of` of the source's switch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from smroute.routing.dmodc import NO_ROUTE
from smroute.routing.topology import SwitchGraph, next_switch

__all__ = ["N_SLS", "VirtualLanes", "Profiles", "colour", "distinct", "lanes", "target_profiles"]

#: Service levels of InfiniBand (SL 0..15).
N_SLS = 16
#: Input port standing for "the route starts here" (port 0 or an end-port's port).
INJECT = 0
#: Destination columns whose paths are followed at once.
_COLUMNS = 2048


def distinct(a: np.ndarray) -> np.ndarray:
    """The distinct values of the int array ``a``, ascending (a sort: numpy's
    hash-based ``np.unique`` takes 15 times longer on millions of int64)."""
    s = np.sort(np.asarray(a).ravel())
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


@dataclass(frozen=True, eq=False)
class VirtualLanes:
    """SLs and SL-to-VL tables of a routing with detours.

    targets ``(T,)`` int64 switch ids of the detour targets; target_sl
    ``(T,)`` uint8 their SL; lid_target ``(W,)`` int32 the target column of
    each detoured LID (-1 for the others); from_switch ``(S, T)`` bool: the
    switches whose paths to the target use its SL (the others use SL 0).

    SL-to-VL: port_vl ``(S, P, 16)`` uint8, the VL of SL ``sl`` leaving
    switch ``s`` by port ``p`` from any input port (``P`` = highest port +
    1); exceptions for some input ports: exc_key ``(N,)`` int64 ascending
    ``(s * P + in) * P + out`` and exc_vl ``(N, 16)`` uint8.  End-ports map
    every SL to VL 0.  n_vls: data VLs used (highest VL + 1); n_sls: SLs used
    (highest + 1); escape_sl: the escape SL (0: none); detour_lids /
    escape_lids: LIDs routed with layered detours / with the escape;
    max_hops: switch-to-switch hops of the longest route.
    """

    targets: np.ndarray
    target_sl: np.ndarray
    lid_target: np.ndarray
    from_switch: np.ndarray
    port_vl: np.ndarray
    exc_key: np.ndarray
    exc_vl: np.ndarray
    n_vls: int
    n_sls: int
    escape_sl: int
    detour_lids: np.ndarray
    escape_lids: np.ndarray
    max_hops: int

    @property
    def n_ports(self) -> int:
        return int(self.port_vl.shape[1])

    @property
    def lids(self) -> np.ndarray:
        """Every LID routed with a detour or the escape, ascending."""
        return np.union1d(self.detour_lids, self.escape_lids)

    def sl_of(self, src_switch: np.ndarray, dlid: np.ndarray) -> np.ndarray:
        """SL of the paths from switches ``src_switch`` to LIDs ``dlid``
        (broadcast int arrays; a CA's path: its switch's), uint8."""
        s, d = np.broadcast_arrays(np.asarray(src_switch, np.int64), np.asarray(dlid, np.int64))
        w = len(self.lid_target)
        col = np.where((d >= 0) & (d < w), self.lid_target[np.clip(d, 0, w - 1)], -1)
        c0 = np.maximum(col, 0)
        use = (col >= 0) & self.from_switch[s, c0]
        return np.where(use, self.target_sl[c0], 0).astype(np.uint8)

    def sl2vl(self, switch: np.ndarray, in_port: np.ndarray, out_port: np.ndarray) -> np.ndarray:
        """VL per SL ``(..., 16)`` uint8 of (switch, input port, output port)
        (broadcast int arrays; ports ``< P``)."""
        s, i, o = np.broadcast_arrays(*(np.asarray(a, np.int64) for a in (
            switch, in_port, out_port)))
        out = np.array(self.port_vl[s, o])
        if len(self.exc_key):
            key = (s * self.n_ports + i) * self.n_ports + o
            at = np.minimum(np.searchsorted(self.exc_key, key), len(self.exc_key) - 1)
            hit = self.exc_key[at] == key
            out[hit] = self.exc_vl[at[hit]]
        return out

    def vl_of(self, switch: np.ndarray, in_port: np.ndarray, out_port: np.ndarray,
              sl: np.ndarray) -> np.ndarray:
        """The VL of SL ``sl`` at (switch, input port, output port): broadcast
        int arrays, uint8 (:meth:`sl2vl`, one SL each)."""
        s, i, o, q = np.broadcast_arrays(*(np.asarray(a, np.int64) for a in (
            switch, in_port, out_port, sl)))
        out = np.array(self.port_vl[s, o, q])
        if len(self.exc_key):
            key = (s * self.n_ports + i) * self.n_ports + o
            at = np.minimum(np.searchsorted(self.exc_key, key), len(self.exc_key) - 1)
            hit = self.exc_key[at] == key
            out[hit] = self.exc_vl[at[hit], q[hit]]
        return out

@dataclass(frozen=True, eq=False)
class Profiles:
    """The lanes some detour targets' SL paths ask for.

    targets ``(B,)`` int64 their columns; key ``(H,)`` int64 ``(switch * P
    + in) * P + out`` (``in`` = :data:`INJECT` where the route starts) and
    want ``(H,)`` int64 its VL before the target's shift, concatenated over
    the targets: ``targets[b]`` owns ``[first[b], first[b + 1])``; n_ports: ``P``.
    """

    targets: np.ndarray
    key: np.ndarray
    want: np.ndarray
    first: np.ndarray
    n_ports: int


def target_profiles(
    g: SwitchGraph, ports: np.ndarray, peer: np.ndarray, lids: np.ndarray, tgt_of: np.ndarray,
    layer: np.ndarray, top: np.ndarray, from_switch: np.ndarray, n_ports: int,
    order: np.ndarray,
) -> Iterator[Profiles]:
    """:class:`Profiles` of the targets (columns of ``layer`` ``(S, T)``) in
    ``order`` ``(T,)``, in batches: the hops of the paths to the LIDs
    ``lids`` ``(K,)`` of target ``tgt_of`` ``(K,)`` from the switches
    ``from_switch[:, target]`` along ``ports`` ``(S, W)``, wanting VL
    ``top[target] - layer``.  ``peer`` ``(S, 256)``: the remote port of each
    switch port (:func:`~smroute.routing.detour.peer_ports`).  Vectorized
    over a batch of targets (about :data:`_COLUMNS` destination columns)."""
    nxt = next_switch(g)
    n_sw, n_t = ports.shape[0], layer.shape[1]
    per_t = n_sw * n_ports * n_ports  # keys of one target
    max_hops = (2 * max(g.max_rank, 0) + 2) * (int(top.max(initial=0)) + 1)
    rank = np.empty(n_t, dtype=np.int64)
    rank[order] = np.arange(n_t)
    o = np.argsort(rank[tgt_of], kind="stable")  # columns in the targets' order
    lids, tgt_of = lids[o], tgt_of[o]
    bounds = np.searchsorted(rank[tgt_of], np.arange(n_t + 1))
    t0 = 0
    while t0 < n_t:
        t1 = int(np.searchsorted(bounds, bounds[t0] + _COLUMNS, side="right")) - 1
        t1 = min(max(t1, t0 + 1), n_t)
        cols = slice(int(bounds[t0]), int(bounds[t1]))
        tj = tgt_of[cols]
        blk = ports[:, lids[cols]].astype(np.int64)  # (S, C)
        nx = np.where(blk == NO_ROUTE, -1, nxt[np.arange(n_sw)[:, None],
                                               np.minimum(blk, nxt.shape[1] - 1)])
        start = from_switch[:, tj] & (nx >= 0)
        on = start.copy()
        for _ in range(max_hops):  # the switches on some path: follow the next hops
            ri, ci = np.nonzero(on & (nx >= 0))
            new = np.zeros_like(on)
            new[nx[ri, ci], ci] = True
            new &= ~on
            if not new.any():
                break
            on |= new
        ri, ci = np.nonzero(on & (nx >= 0))
        xs = nx[ri, ci]  # the hop ri -> xs enters xs by the peer port
        fw = nx[xs, ci] >= 0
        ri, ci, xs = ri[fw], ci[fw], xs[fw]
        rk = rank[tj]
        k_in = rk[ci] * per_t + (xs * n_ports + peer[ri, blk[ri, ci]]) * n_ports + blk[xs, ci]
        si, sc = np.nonzero(start)
        k_st = rk[sc] * per_t + (si * n_ports + INJECT) * n_ports + blk[si, sc]
        both = distinct(np.concatenate([k_in, k_st]))  # by target (rank), then key
        r, key = both // per_t, both % per_t
        tgt = order[r]
        want = top[tgt] - layer[key // (n_ports * n_ports), tgt].astype(np.int64)
        first = np.searchsorted(r, np.arange(t0, t1 + 1)).astype(np.int64)
        yield Profiles(order[t0:t1], key, want, first, n_ports)
        t0 = t1


def colour(batches: Iterable[Profiles], n_t: int, *, max_vls: int, sls: int,
           all_or_none: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Greedy SLs ``1 .. sls`` for ``n_t`` targets (module doc), in the
    order of the ``batches`` of their profiles, each SL's lanes within
    ``max_vls`` (``all_or_none``: stop at the first target without an SL,
    reading no more batches).  Returns ``(target_sl (T,) uint8, 0 = none
    found; keys (N,) int64; vl (N, sls + 1) int16)``: the distinct keys of
    the profiles read and the VL each SL gives them (-1: unused)."""
    keys = np.zeros(0, dtype=np.int64)
    vl = np.full((0, sls + 1), -1, dtype=np.int16)
    sl_hi = np.full(sls + 1, -1, dtype=np.int64)
    target_sl = np.zeros(n_t, dtype=np.uint8)
    big = 1 << 14
    cand = np.arange(1, sls + 1)
    for prof in batches:
        if sls < 1:
            break
        at = np.minimum(np.searchsorted(keys, prof.key), max(len(keys) - 1, 0))
        new = prof.key if not len(keys) else prof.key[keys[at] != prof.key]
        if len(new):  # grow the key set, keep the VLs given so far
            merged = distinct(np.concatenate([keys, new]))
            grown = np.full((len(merged), sls + 1), -1, dtype=np.int16)
            grown[np.searchsorted(merged, keys)] = vl
            keys, vl = merged, grown
        if _colour_batch(prof, np.searchsorted(keys, prof.key), vl, sl_hi, target_sl, cand,
                         max_vls, big) and all_or_none:
            break
    return target_sl, keys, vl


def _colour_batch(prof: Profiles, idx: np.ndarray, vl: np.ndarray, sl_hi: np.ndarray,
                  target_sl: np.ndarray, cand: np.ndarray, max_vls: int, big: int) -> bool:
    """:func:`colour`'s greedy step over one batch, in place; whether some
    target found no SL."""
    failed = False
    for b, j in enumerate(prof.targets.tolist()):
        at = idx[prof.first[b]:prof.first[b + 1]]
        want = prof.want[prof.first[b]:prof.first[b + 1]]
        if not len(at):
            continue
        have = vl[at][:, cand].T.astype(np.int64)  # (sls, H)
        used = have >= 0
        d_lo = np.where(used, have - want, big).min(axis=1)
        d_hi = np.where(used, have - want, -big).max(axis=1)
        fresh = ~used.any(axis=1)
        d = np.where(fresh, np.where(sl_hi[cand] >= 0, 0, -int(want.min())), d_lo)
        lo = np.minimum(np.where(sl_hi[cand] >= 0, 0, big), d + int(want.min()))
        hi = np.maximum(sl_hi[cand], d + int(want.max()))
        ok = (fresh | (d_lo == d_hi)) & (hi - lo < max_vls)
        if not ok.any():
            failed = True
            continue
        i = int(np.argmax(ok))
        s = int(cand[i])
        vl[at, s] = want + d[i]
        if lo[i]:  # the SL's lanes start at VL 0
            col = vl[:, s]
            col[col >= 0] -= lo[i]
        sl_hi[s] = hi[i] - lo[i]
        target_sl[j] = s
    return failed


def lanes(
    g: SwitchGraph, width: int, targets: np.ndarray, target_sl: np.ndarray,
    lid_target: np.ndarray, from_switch: np.ndarray, keys: np.ndarray, vl: np.ndarray,
    n_ports: int, *, escape: SwitchGraph | None = None, escape_sl: int = 0, escape_vl: int = 0,
    detour_lids: np.ndarray, escape_lids: np.ndarray, max_hops: int,
) -> VirtualLanes:
    """Assemble :class:`VirtualLanes` from :func:`colour`'s ``keys`` / ``vl``
    (SL columns ``0 .. vl.shape[1] - 1``) and the escape SL's VL on every
    switch-to-switch port of ``escape`` (``escape_sl`` 0: none); ``max_hops``:
    the longest route.  Keys with :data:`INJECT`
    as input port stand for port 0 and every end-port's port of the switch."""
    n_sw = g.n_switches
    port_vl = np.zeros((n_sw, n_ports, N_SLS), dtype=np.uint8)
    if escape_sl and escape is not None:
        sw, _, port = escape.cables()
        port_vl[sw, port, escape_sl] = escape_vl
    ek = np.zeros(0, dtype=np.int64)
    ev = np.zeros((0, N_SLS), dtype=np.uint8)
    rows = np.flatnonzero((vl >= 0).any(axis=1))
    if len(rows):
        k, v = keys[rows], vl[rows]
        sw, rest = k // (n_ports * n_ports), k % (n_ports * n_ports)
        inp, out = rest // n_ports, rest % n_ports
        # an injection key: one row per port a route can start from
        ep_cnt = np.bincount(g.ep_switch, minlength=n_sw)
        ep_first = np.searchsorted(g.ep_switch, np.arange(n_sw))
        inj = inp == INJECT
        n_rep = np.where(inj, 1 + ep_cnt[sw], 1)
        rsw, rout, rinp = np.repeat(sw, n_rep), np.repeat(out, n_rep), np.repeat(inp, n_rep)
        src_row = np.repeat(np.arange(len(k)), n_rep)
        pos = np.arange(len(rsw)) - np.repeat(np.cumsum(n_rep) - n_rep, n_rep)
        more = np.repeat(inj, n_rep) & (pos > 0)
        rinp[more] = g.ep_switch_port[np.repeat(ep_first[sw], n_rep)[more] + pos[more] - 1]
        ek = (rsw * n_ports + rinp) * n_ports + rout
        ev = port_vl[rsw, rout].copy()
        vv = v[src_row]
        ncol = vl.shape[1]
        ev[:, :ncol] = np.where(vv >= 0, vv, ev[:, :ncol])
        o = np.argsort(ek, kind="stable")
        ek, ev = ek[o], ev[o]
    top_vl = max(int(vl.max(initial=-1)), escape_vl if escape_sl else 0)
    return VirtualLanes(
        targets=np.asarray(targets, np.int64), target_sl=target_sl.astype(np.uint8),
        lid_target=lid_target, from_switch=from_switch, port_vl=port_vl, exc_key=ek,
        exc_vl=ev, n_vls=top_vl + 1, n_sls=int(target_sl.max(initial=0)) + 1,
        escape_sl=escape_sl, detour_lids=np.sort(detour_lids).astype(np.int64),
        escape_lids=np.sort(escape_lids).astype(np.int64), max_hops=max_hops)
