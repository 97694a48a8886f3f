"""D-mod-K (Zahavi, eq. 1): the closed form on complete PGFTs, as a baseline.

A level-``l`` switch ``(l, b_h..b_1)`` routes to host ``j`` (Zahavi's end-port
index) *up* through up-port ``q = floor(j / W_l) mod (w_{l+1} p_{l+1})`` where
``W_l = prod_{k<=l} w_k``, unless the host is in its subtree (``a_t = b_t``
for all ``t > l``); then *down* through down-port ``r = a_l + k m_l`` with
``k = floor(j / W_l) mod p_l`` (the paper gives only the up rule; picking the
parallel down-link by the same quotient is the natural extension, and what
Dmodc's eq. 4 does).  Port numbers follow
:mod:`smroute.fabric.generate.trees`'s convention (down-port ``r`` is IB port
``r + 1``, up-port ``q`` is ``m_l p_l + q + 1``).

Node tuples come from the generator's node descriptions, so D-mod-K only
applies to fabrics made by :func:`smroute.fabric.generate.trees.pgft` (or their
ibnetdiscover round trip).  Switch LIDs are not end-ports and have no
D-mod-K index; their columns are routed by Dmodc's rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smroute.errors import RoutingError
from smroute.fabric.generate.trees import fabric_tuples
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing.dmodc import NO_ROUTE, Destinations
from smroute.routing.kernel import route_block
from smroute.routing.topology import SwitchGraph

__all__ = ["PgftShape", "infer_pgft", "route_tables"]

_BLOCK = 64


@dataclass(frozen=True)
class PgftShape:
    """PGFT(h; m; w; p) parameters, index 0 = level 1."""

    h: int
    m: tuple[int, ...]
    w: tuple[int, ...]
    p: tuple[int, ...]


def infer_pgft(fabric: Fabric) -> tuple[PgftShape, np.ndarray, np.ndarray]:
    """PGFT parameters and node tuples of a generated, complete PGFT.

    Returns ``(shape, levels (N,), digits (N, h))`` (digits: ``a_h`` first).
    ``m_t`` is the range of host digit ``t``, ``w_t`` the range of digit ``t``
    at the top level, ``p_l`` the links between a level-``l`` switch and one
    of its children.  Raises :class:`RoutingError` if the fabric does not
    look like a complete generated PGFT.
    """
    levels, digits = fabric_tuples(fabric)
    if (levels < 0).any() or digits.shape[1] == 0:
        raise RoutingError("D-mod-K needs a generated PGFT (node descriptions carry tuples)")
    h = digits.shape[1]
    hosts = levels == 0
    top = levels == h
    if not hosts.any() or not top.any():
        raise RoutingError("D-mod-K: the fabric has no hosts or no top-level switch")
    m = tuple(int(x) + 1 for x in digits[hosts].max(axis=0)[::-1])
    w = tuple(int(x) + 1 for x in digits[top].max(axis=0)[::-1])
    la, lb = fabric.port_node[fabric.link_a], fabric.port_node[fabric.link_b]
    p = []
    for lv in range(1, h + 1):
        sel = ((levels[la] == lv) & (levels[lb] == lv - 1)) | (
            (levels[lb] == lv) & (levels[la] == lv - 1)
        )
        pairs = np.stack([np.minimum(la[sel], lb[sel]), np.maximum(la[sel], lb[sel])], axis=1)
        _, counts = np.unique(pairs, axis=0, return_counts=True)
        p.append(int(counts.max()) if len(counts) else 1)
    return PgftShape(h, m, w, tuple(p)), levels, digits


def route_tables(
    fabric: Fabric, g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations
) -> np.ndarray:
    """D-mod-K tables, shape ``(S, max_lid + 1)`` uint8, same layout as Dmodc's."""
    shape, levels, digits = infer_pgft(fabric)
    h, m, w, p = shape.h, np.array(shape.m), np.array(shape.w), np.array(shape.p)
    n_sw = g.n_switches
    out = np.full((n_sw, dest.max_lid + 1), NO_ROUTE, dtype=np.uint8)

    # switch LIDs: Dmodc's rule
    sw_d = np.flatnonzero(dest.is_switch)
    sub = Destinations(*(getattr(dest, f)[sw_d] for f in
                         ("lid", "nid", "target", "local_port", "is_switch", "owner")))
    tmp = np.empty((min(_BLOCK, n_sw), out.shape[1]), dtype=np.uint8)
    for s in range(0, n_sw, _BLOCK):
        sl = np.arange(s, min(s + _BLOCK, n_sw))
        route_block(g, c, pi, sub, sl, tmp[: len(sl)])
        out[sl[:, None], sub.lid[None, :]] = tmp[: len(sl)][:, sub.lid]

    # host LIDs: the closed form
    ep_d = np.flatnonzero(~dest.is_switch)
    host_node = fabric.port_node[g.ep_row[dest.owner[ep_d]]]
    if (fabric.node_type[host_node] != NodeType.CA).any():
        raise RoutingError("D-mod-K: an end-port is not a CA")
    hd = digits[host_node][:, ::-1]  # (D, h): column t-1 = a_t
    mp = np.concatenate([[1], np.cumprod(m)])  # mp[t] = prod_{k<=t} m_k
    j = (hd * mp[None, :h]).sum(axis=1)
    j = j + (dest.nid[ep_d] - _base_nid(dest, ep_d))  # LMC offset, as in Dmodc
    lids = dest.lid[ep_d]
    wprod = np.concatenate([[1], np.cumprod(w)])  # W_l = wprod[l]
    sw_level = levels[g.sw_node]
    sw_digits = digits[g.sw_node][:, ::-1]
    for lv in range(1, h + 1):
        rows = np.flatnonzero(sw_level == lv)
        x = j // wprod[lv]
        down_ports = m[lv - 1] * p[lv - 1]
        for s in range(0, len(rows), _BLOCK):
            r = rows[s : s + _BLOCK]
            bd = sw_digits[r]  # (B, h)
            inside = (bd[:, None, lv:] == hd[None, :, lv:]).all(axis=2)  # (B, D)
            k_down = x % p[lv - 1]
            down = hd[:, lv - 1] + k_down * m[lv - 1] + 1
            if lv < h:
                up = down_ports + x % (w[lv] * p[lv]) + 1
                port = np.where(inside, down[None, :], up[None, :])
            else:
                port = np.where(inside, down[None, :], NO_ROUTE)
            out[r[:, None], lids[None, :]] = port.astype(np.uint8)
    return out


def _base_nid(dest: Destinations, ep_d: np.ndarray) -> np.ndarray:
    """NID of each end-port's base LID (so ``nid - base`` is the LMC offset)."""
    owner = dest.owner[ep_d]
    base = np.full(int(owner.max()) + 1 if len(owner) else 0, np.iinfo(np.int64).max)
    np.minimum.at(base, owner, dest.nid[ep_d])
    return base[owner]
