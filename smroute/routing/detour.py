"""Detours: routes for end-port pairs with no up*/down* path (beyond the paper).

After heavy loss some switches carrying end-ports share no ancestor with a
destination's switch: no up*/down* path reaches it.  Such routes must turn
up again after going down, which breaks up*/down*'s proof of freedom from
credit loops; they stay deadlock-free if every down->up turn moves the packet
to a higher virtual lane (VL) and the routes on each VL are up*/down*
(:mod:`smroute.routing.vlassign` picks the lanes, :mod:`smroute.routing.deadlock`
checks them).

Per destination switch ``t`` (every end-port LID on it routes alike) the
switches get **layers**, by up*/down* closures in the tree's orientation:

* layer 0: the switches with an up*/down* path to ``t``; they keep the
  routing's own entry (Dmodc's or Nmodc's), unchanged.
* layer ``k``: the switches without a smaller layer that have an up*/down*
  path to some switch of a smaller layer.  Their entry follows Dmodc's
  closed form (eq. 1-4: same NIDs, dividers and port order) towards that
  *set*: the encoded costs of :mod:`smroute.routing.dmodc` with the set at
  cost 0, so a switch below the set only goes down, any other only up, and
  the switches of layer ``k`` on the way route with the same column.
  Nmodc then rechooses these entries among the same closer ports by the
  load on the links (:mod:`smroute.routing.detour_load`).

The forwarding graph towards each destination LID is then a tree (each
switch one next hop; the cost of layer-``k`` switches strictly decreases
until the route enters a smaller layer, and layers never increase along a
route).  Inside a layer a route is up*/down*; it can turn up only where it
enters a smaller layer (by a down link: an up link into a smaller layer
would give the switch that smaller layer), so a route from layer ``k`` turns
at most ``k`` times.  The hop out of a layer-``k`` switch uses VL
``offset + K_t - k`` (``K_t`` the largest layer of a switch carrying
end-ports): nondecreasing along every route and one higher at least at
every turn.  Layers stop at ``max_vls - 1``; switches beyond (or not joined
at all through the tree's links) get no route to ``t`` (reported by the
validation walk, by name).

Vectorized over switches and all detour targets at once (``(S, T)``
matrices); the routes reuse :func:`~smroute.routing.kernel.route_block`.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing import dmodc, kernel
from smroute.routing.detour_load import detours_by_load
from smroute.routing.dmodc import INF, NO_ROUTE, UP_PHASE, Destinations
from smroute.routing.topology import SwitchGraph
from smroute.routing.vlassign import (
    N_SLS,
    VirtualLanes,
    colour,
    lanes,
    target_profiles,
)

__all__ = ["Layers", "UNREACHED", "detour_layers", "detour_routes", "peer_ports",
           "route_detours", "set_costs"]

#: Layer of a switch that reaches no smaller layer (within the cap).
UNREACHED = -1
_BLOCK = 256


@dataclass(frozen=True, eq=False)
class Layers:
    """Layers of the switches towards each detour target.

    targets: ``(T,)`` int64 switch ids; layer: ``(S, T)`` int8 (0 = an
    up*/down* path, ``k`` = ``k``-th closure, :data:`UNREACHED`); costs:
    per layer ``k >= 1`` the ``(S, T)`` uint8 encoded costs towards the
    switches of smaller layers (``costs[k - 1]``).
    """

    targets: np.ndarray
    layer: np.ndarray
    costs: tuple[np.ndarray, ...]

    @property
    def depth(self) -> int:
        """Largest layer any switch has (0 if none needs a detour)."""
        return len(self.costs)


def set_costs(g: SwitchGraph, member: np.ndarray) -> np.ndarray:
    """Encoded up*/down* costs ``(S, T)`` uint8 from every switch to the set
    of switches ``member[:, j]`` ``(S, T)`` bool, per column: the hop count
    of a down-only path where one exists, else :data:`~smroute.routing.dmodc.UP_PHASE`
    plus the hop count of an up*/down* path, else INF; members cost 0.
    The relaxations of :func:`~smroute.routing.dmodc.costs_and_dividers`
    with the members as targets."""
    down = np.where(member & (g.rank >= 0)[:, None], 0, INF).astype(np.uint8)
    lo, hi = g.up_pairs()
    lo_rank, hi_rank = g.rank[lo], g.rank[hi]
    for r in range(g.max_rank):
        sel = lo_rank == r
        dmodc.relax(down, lo[sel], hi[sel])  # a switch above reaches what is below
    both = down.copy()
    for r in range(g.max_rank, 0, -1):
        sel = hi_rank == r
        dmodc.relax(both, hi[sel], lo[sel])  # a switch below goes up first
    if both.size and int(np.where(both < INF, both, 0).max()) >= UP_PHASE - 1:
        raise ValueError("up*/down* paths of 127 hops or more")
    out = np.where(both < INF, both + np.uint8(UP_PHASE), np.uint8(INF)).astype(np.uint8)
    np.copyto(out, down, where=down < INF)
    return out


def detour_layers(g: SwitchGraph, c: np.ndarray, targets: np.ndarray,
                  max_layer: int) -> Layers:
    """:class:`Layers` of every switch towards each switch of ``targets``
    ``(T,)``, up to ``max_layer`` (``c``: the routing's encoded costs
    ``(S, S)``, whose finite entries make layer 0)."""
    targets = np.asarray(targets, dtype=np.int64)
    member = c[:, targets] < INF
    layer = np.where(member, 0, UNREACHED).astype(np.int8)
    costs: list[np.ndarray] = []
    for k in range(1, max_layer + 1):
        if member.all():
            break
        enc = set_costs(g, member)
        new = (enc < INF) & ~member
        if not new.any():
            break
        layer[new] = k
        costs.append(enc)
        member |= new
    return Layers(targets, layer, tuple(costs))


def detour_routes(
    g: SwitchGraph, pi: np.ndarray, dest: Destinations, cols: np.ndarray,
    lay: Layers, tgt_of: np.ndarray, ports: np.ndarray, top: np.ndarray,
) -> None:
    """Write the detour entries of the destinations ``cols`` ``(K,)``
    (indices into ``dest``; ``tgt_of`` ``(K,)`` their column in ``lay``) in
    place in ``ports`` ``(S, max_lid + 1)``: a switch of layer ``1 .. top[j]``
    (``top`` ``(T,)`` the largest layer routed per target) routes towards the
    smaller layers with Dmodc's closed form and dividers ``pi`` ``(S,)``; a
    switch beyond, or unreached, gets :data:`~smroute.routing.dmodc.NO_ROUTE`.
    Layer 0 keeps its entries."""
    lids = dest.lid[cols]
    lay_d = lay.layer[:, tgt_of]  # (S, K)
    routed = (lay_d >= 1) & (lay_d <= top[tgt_of][None, :])
    drop = (lay_d != 0) & ~routed
    if drop.any():
        block = ports[:, lids]
        block[drop] = NO_ROUTE
        ports[:, lids] = block
    k = len(cols)
    for layer, enc in enumerate(lay.costs, start=1):
        at = routed & (lay_d == layer)
        rows = np.flatnonzero(at.any(axis=1))
        if not len(rows):
            continue
        # sub-problem: column j of ``enc`` is destination j's "target"
        sub = Destinations(lid=np.arange(k, dtype=np.int64), nid=dest.nid[cols], target=tgt_of,
                           local_port=np.zeros(k, dtype=np.int64),
                           is_switch=np.zeros(k, dtype=bool), owner=dest.owner[cols])
        ctx = kernel.route_context(enc, sub)
        # the targets are columns, not switches: no switch delivers locally
        ctx = dataclasses.replace(ctx, local_target=np.full(k, -1, dtype=np.int64))
        via = np.empty((len(rows), k), dtype=np.uint8)
        for lo in range(0, len(rows), _BLOCK):
            kernel.route_block(g, enc, pi, sub, rows[lo:lo + _BLOCK], via[lo:lo + _BLOCK], ctx)
        block = ports[np.ix_(rows, lids)]
        np.copyto(block, via, where=at[rows])
        ports[np.ix_(rows, lids)] = block



def peer_ports(fabric: Fabric, g: SwitchGraph) -> np.ndarray:
    """``(S, 256)`` int64: the port at the other end of each switch port's
    cable (0 where none)."""
    peer = np.zeros((g.n_switches, 256), dtype=np.int64)
    sw_id = np.full(fabric.n_nodes, -1, dtype=np.int64)
    sw_id[g.sw_node] = np.arange(g.n_switches)
    rows = np.flatnonzero(fabric.port_peer >= 0)
    node = fabric.port_node[rows]
    ok = fabric.node_type[node] == NodeType.SWITCH
    rows, node = rows[ok], node[ok]
    peer[sw_id[node], fabric.port_num[rows]] = fabric.port_num[fabric.port_peer[rows]]
    return peer


def route_detours(
    fabric: Fabric, g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
    need: np.ndarray, ports: np.ndarray, *, max_vls: int, max_sls: int = N_SLS,
    escape: SwitchGraph | None = None, by_load: bool = False, walk: SwitchGraph | None = None,
) -> tuple[VirtualLanes, np.ndarray]:
    """Route the destinations ``need`` ``(D,)`` bool with detours, in place in
    ``ports`` ``(S, W)`` (the routing's tables: the entries of switches with
    an up*/down* path stay), and give them SLs and SL-to-VL tables within
    ``max_vls`` data VLs (>= 2) and ``max_sls`` SLs (>= 2).

    First every target with layers within ``max_vls`` and SLs 1 ..
    ``max_sls - 1``; if some target needs more (or has a switch with
    end-ports no layer reaches) and ``escape`` (an acyclic orientation of
    every link, :func:`~smroute.routing.topology.rooted_graph`) is given,
    again with one VL and one SL fewer, and the targets left are routed
    up*/down* in ``escape``'s orientation from every switch, on the escape
    SL and a VL of their own.  ``by_load`` (Nmodc): the detours' and the
    escape's entries are then rechosen among the same closer ports by the
    load on the links (:mod:`smroute.routing.detour_load`), except where the
    rechosen detours would leave more targets to the escape than the closed
    form's (their lane profiles agree less often).  ``walk``: the graph
    whose cables the routes take, for their lanes (default ``g``; every
    cable where the entries of switches with a path in ``c`` cross within
    a rank, :mod:`~smroute.routing.cross`).  Returns the
    lanes and the pairs still without a route ``(Q, 2)`` int64 (switch
    carrying end-ports, destination LID): none when ``escape`` is given."""
    if max_vls < 2 or max_sls < 2:
        raise ValueError(f"detours need 2 VLs and 2 SLs, got {max_vls} and {max_sls}")
    cols = np.flatnonzero(need)
    targets, tgt_of = np.unique(dest.target[cols], return_inverse=True)
    tgt_of = tgt_of.astype(np.int64)
    lids = dest.lid[cols]
    orig = ports[:, lids].copy()
    peer = peer_ports(fabric, g)
    n_p = int(fabric.num_ports[g.sw_node].max(initial=0)) + 1
    src = np.unique(g.ep_switch)
    same = g.component[src][:, None] == g.component[targets][None, :]
    lid_target = np.full(ports.shape[1], -1, dtype=np.int32)
    lid_target[lids] = tgt_of
    seg = 2 * max(g.max_rank, 0) + 2  # hops of an up*/down* segment
    esc_hops = 2 * max(escape.max_rank, 0) + 2 if escape is not None else 0
    tries = [(max_vls, max_sls - 1)] + ([(max_vls - 1, max_sls - 2)] if escape else [])
    for n, (vls, sls) in enumerate(tries):
        last = n == len(tries) - 1
        ports[:, lids] = orig
        lay = detour_layers(g, c, targets, vls - 1)
        lay_src = np.where(same, lay.layer[src], 0)
        top = lay_src.max(axis=0, initial=0).astype(np.int64)
        whole = ~((lay_src == UNREACHED).any(axis=0))  # every source reached
        if not whole.all() and not last:
            continue
        detour_routes(g, pi, dest, cols, lay, tgt_of, ports, top)
        from_sw = (lay.layer >= 1) & (lay.layer <= top[None, :]) & whole[None, :]
        # hardest first: most layers, most switches to route
        order = np.lexsort((g.sw_guid[targets], -from_sw.sum(axis=0), -top))
        prof = (peer, lids, tgt_of, lay.layer, top, from_sw, n_p, order)
        paint = functools.partial(colour, max_vls=vls, sls=sls, all_or_none=not last)
        closed = ports[:, lids].copy() if by_load else None
        if by_load:
            detours_by_load(g, ports, dest, cols, lay.layer[:, tgt_of],
                            tuple(e[:, tgt_of] for e in lay.costs), top[tgt_of],
                            seg * (int(top.max(initial=0)) + 1))
        t_sl, keys, vl = paint(target_profiles(walk or g, ports, *prof), len(targets))
        if closed is not None and (t_sl[whole] == 0).any():
            # the rechosen routes share SLs less often: keep the closed form's
            # if it leaves fewer targets to the escape
            loaded = ports[:, lids].copy()
            ports[:, lids] = closed
            alt = paint(target_profiles(walk or g, ports, *prof), len(targets))
            if (alt[0][whole] == 0).sum() < (t_sl[whole] == 0).sum():
                t_sl, keys, vl = alt
            else:
                ports[:, lids] = loaded
        t_sl[~whole] = 0
        left = np.flatnonzero(t_sl == 0)
        if len(left) and not last:
            continue
        from_sw[:, left] = False
        esc_sl = esc_vl = 0
        k_left = np.isin(tgt_of, left)
        if len(left) and escape is not None:
            esc_sl, esc_vl = int(t_sl.max(initial=0)) + 1, int(vl.max(initial=0)) + 1
            c2 = _escape(escape, dest, cols[k_left], ports)
            if by_load:  # one layer: every switch but the target's
                tgt = dest.target[cols[k_left]]
                one = (np.arange(g.n_switches)[:, None] != tgt[None, :]).astype(np.int8)
                detours_by_load(escape, ports, dest, cols[k_left], one, (c2[:, tgt],),
                                np.ones(len(tgt), dtype=np.int64), esc_hops)
            t_sl[left] = esc_sl
            from_sw[:, left] = (g.component[:, None] == g.component[targets[left]][None, :])
        elif len(left):  # no escape: the detours of these targets go
            blk = ports[:, lids[k_left]]
            blk[lay.layer[:, tgt_of[k_left]] != 0] = NO_ROUTE
            ports[:, lids[k_left]] = blk
        longest = max(seg * (int(top.max(initial=0)) + 1), esc_hops if esc_sl else 0)
        res = lanes(g, ports.shape[1], targets, t_sl, lid_target, from_sw, keys, vl, n_p,
                    escape=escape, escape_sl=esc_sl, escape_vl=esc_vl,
                    detour_lids=lids[~k_left],
                    escape_lids=lids[k_left] if esc_sl else np.zeros(0, np.int64),
                    max_hops=longest)
        miss = (ports[np.ix_(src, lids)] == NO_ROUTE) & same[:, tgt_of]
        si, di = np.nonzero(miss)
        return res, np.stack([src[si], lids[di]], axis=1).astype(np.int64)
    raise AssertionError("unreachable")


def _escape(g2: SwitchGraph, dest: Destinations, cols: np.ndarray, ports: np.ndarray
            ) -> np.ndarray:
    """Route the destinations ``cols`` up*/down* in ``g2``'s orientation with
    Dmodc's closed form from every switch, in place in ``ports``; returns
    ``g2``'s encoded costs ``(S, S)``."""
    c2, pi2 = dmodc.costs_and_dividers(g2)
    k = len(cols)
    sub = Destinations(lid=np.arange(k, dtype=np.int64), nid=dest.nid[cols],
                       target=dest.target[cols], local_port=dest.local_port[cols],
                       is_switch=dest.is_switch[cols], owner=dest.owner[cols])
    ctx = kernel.route_context(c2, sub)
    via = np.empty((g2.n_switches, k), dtype=np.uint8)
    for lo in range(0, g2.n_switches, _BLOCK):
        rows = np.arange(lo, min(lo + _BLOCK, g2.n_switches))
        kernel.route_block(g2, c2, pi2, sub, rows, via[lo:lo + len(rows)], ctx)
    ports[:, dest.lid[cols]] = via
    return c2
