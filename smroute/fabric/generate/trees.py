"""Deterministic fat-tree generators: PGFT / XGFT / k-ary-n-tree (Zahavi),
thin-trees and slender-trees (Navaridas), plus seeded degradation.

Every generator returns an immutable :class:`~smroute.fabric.model.Fabric`
with GUIDs, LIDs, widths and speeds set, so it can be routed directly or
written out with :mod:`smroute.fabric.export.writers`.  Real-world shapes
(SHARP aggregation nodes on every switch, hosts on spines, two-switch and
ring fabrics, directors, split ports) are in
:mod:`smroute.fabric.generate.shapes`.  Construction is vectorized with
numpy (no Python loop per link): PGFT(3;32,32,40;1,32,32;1,1,1), 40,960
hosts, builds in well under a second.  Turning levels and link rows into a
fabric (GUIDs, LIDs) is :mod:`smroute.fabric.generate.assemble`; reading
tuples and the host order back from descriptions is :mod:`smroute.fabric.generate.tuples`.

PGFT wiring (Zahavi, section IV.B)
----------------------------------
``PGFT(h; m_1..m_h; w_1..w_h; p_1..p_h)``.  A node is the tuple
``(l, a_h, .., a_1)``; level 0 are hosts (CAs), levels ``1..h`` switches.  At
level ``l`` digit ``a_t`` ranges over ``w_t`` for ``t <= l`` and over ``m_t``
for ``t > l``, so level ``l`` has ``prod_{t<=l} w_t * prod_{t>l} m_t`` nodes
(hosts: ``prod m_t``).  A level-``l`` node has ``w_{l+1} p_{l+1}`` up-going
ports ``q`` and ``m_l p_l`` down-going ports ``r``.  Up-port
``(l, a, q)`` and down-port ``(l+1, b, r)`` are linked iff ``b_t = a_t`` for
every ``t != l+1`` and, for the k-th (``0 <= k < p_{l+1}``) parallel link,
``q = b_{l+1} + k w_{l+1}`` and ``r = a_{l+1} + k m_{l+1}``.

Conventions
-----------
* **Port numbers.**  Switch down-port ``r`` is IB port ``r + 1`` (ports
  ``1 .. m_l p_l``); up-port ``q`` is IB port ``m_l p_l + q + 1``.  A host's
  up-port ``q`` is IB port ``q + 1`` (RLFT hosts have the single port 1).  A
  switch has ``m_l p_l + w_{l+1} p_{l+1}`` ports (top level: ``m_h p_h``), or
  ``switch_ports`` if given (extra ports stay unconnected).
* **Node order.**  Present hosts first, in topological order (see below),
  then switches level 1, 2, .., h, each level in tuple index order.
* **Tuple index.**  Within a level, a tuple's index is mixed-radix with
  ``a_1`` least significant: ``idx = sum_t a_t prod_{k<t} R_k`` where
  ``R_k`` is the digit's range at that level.  For hosts this is Zahavi's /
  D-mod-K end-port index ``j = sum_t a_t prod_{k<t} m_k`` (``N = prod m_t``,
  eq. 12): the hosts of one leaf switch are contiguous.  (The products of
  ``w`` in eq. 1 and eq. 8 are the divisors D-mod-K applies to ``j``, not the
  radix of ``j``.)  :func:`topological_host_order` recovers this order from
  node descriptions, also on degraded fabrics.
* **Descriptions.**  Switch: ``"<name> L<l> <a_h>.<..>.<a_1>"`` (``name`` is
  ``pgft`` by default, ``kary``/``thin``/``xgft``/``slender`` for the other
  generators), e.g. ``"pgft L2 1.0.3"``.  Host: ``"host <a_h>.<..>.<a_1>"``.
  Slender-trees are not PGFTs: their switches carry the single digit of
  Navaridas' switch number (``"slender L1 17"``) and hosts their index
  (``"host 130"``).  :func:`parse_tuple` reads both back.
* **GUIDs.**  ``node_guid = guid_base + (level << 28) + (index << 4)`` with
  ``index`` the tuple index in its level (hosts keep their full-tree index
  when ``hosts_per_leaf`` thins leaves out).  A switch's port-0 GUID equals its
  node GUID (its other ports carry no GUID); a CA's port ``p`` has GUID
  ``node_guid + p`` -- what ibsim assigns too.  ``sysimg_guid = node_guid``.
  Vendor 0x2c9; device 0xcb20 (switches) / 0x1017 (CAs).
* **LIDs.**  CA ports first, in node order then port order: the ``k``-th CA
  port (``k = 0, 1, ..``) gets base LID ``(k + 1) << lmc`` (aligned to
  ``2**lmc``) and LMC ``lmc``; then switches, consecutively from
  ``(n_ca_ports + 1) << lmc``, with LMC 0.  LIDs above 0xBFFF raise
  :class:`~smroute.fabric.model.FabricError`.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smroute.fabric.generate.assemble import DEFAULT_GUID_BASE, MAX_UNICAST_LID, Level, assemble
from smroute.fabric.generate.tuples import fabric_tuples, parse_tuple, topological_host_order
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError, NodeType

__all__ = [
    "DEFAULT_GUID_BASE",
    "MAX_UNICAST_LID",
    "Removed",
    "degrade",
    "fabric_tuples",
    "is_rlft",
    "kary_ntree",
    "level_sizes",
    "navaridas_tree",
    "parse_tuple",
    "pgft",
    "rlft_check",
    "slender_tree",
    "thin_tree",
    "topological_host_order",
    "xgft",
]

IntArray = npt.NDArray[np.int64]


# --------------------------------------------------------------------------- helpers
def _as_params(h: int, name: str, vals: Sequence[int]) -> list[int]:
    out = [int(v) for v in vals]
    if len(out) != h:
        raise FabricError(f"PGFT: {name} has {len(out)} values, expected h={h}")
    if any(v < 1 for v in out):
        raise FabricError(f"PGFT: {name} values must be >= 1, got {out}")
    return out


def _radices(level: int, m: Sequence[int], w: Sequence[int]) -> list[int]:
    """Digit ranges ``[R_1, .., R_h]`` at ``level`` (index 0 is digit a_1)."""
    return [w[t] if t < level else m[t] for t in range(len(m))]


def level_sizes(h: int, m: Sequence[int], w: Sequence[int]) -> list[int]:
    """Number of nodes per level ``0..h`` of PGFT(h; m; w; .) (level 0 = hosts)."""
    return [int(np.prod(_radices(lv, m, w), dtype=np.int64)) for lv in range(h + 1)]


def _digits(index: IntArray, radices: Sequence[int]) -> IntArray:
    """Mixed-radix digits of ``index`` (K,), shape ``(K, h)`` int64, column 0 is
    ``a_h`` and column ``h-1`` is ``a_1`` (the least significant)."""
    h = len(radices)
    out = np.empty((len(index), h), dtype=np.int64)
    rest = np.asarray(index, dtype=np.int64).copy()
    for t in range(h):  # t = 0 is a_1
        out[:, h - 1 - t] = rest % radices[t]
        rest //= radices[t]
    return out


def _tuple_strings(digits: IntArray) -> list[str]:
    return [".".join(map(str, row)) for row in digits.tolist()]


# --------------------------------------------------------------------------- PGFT
def pgft(
    h: int,
    m: Sequence[int],
    w: Sequence[int],
    p: Sequence[int],
    *,
    hosts_per_leaf: int | None = None,
    lmc: int = 0,
    speed: str = "EDR",
    width: int = 4,
    guid_base: int = DEFAULT_GUID_BASE,
    switch_ports: int | None = None,
    name: str = "pgft",
) -> Fabric:
    """PGFT(h; m_1..m_h; w_1..w_h; p_1..p_h) wired by Zahavi's rule (module doc).

    ``hosts_per_leaf`` (1..m_1) keeps only hosts with ``a_1 < hosts_per_leaf``
    (a partially populated tree; leaf down-ports of missing hosts stay
    unconnected).  ``lmc`` sets the CA ports' LMC (LIDs aligned to ``2**lmc``);
    ``speed`` (a name from :data:`~smroute.fabric.model.SPEEDS`) and ``width``
    (lanes) are set on every linked port.  ``switch_ports`` gives every switch
    that many ports (must cover the largest level's need, at most 255).
    """
    h = int(h)
    if h < 1:
        raise FabricError(f"PGFT: h must be >= 1, got {h}")
    m_, w_, p_ = _as_params(h, "m", m), _as_params(h, "w", w), _as_params(h, "p", p)
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
        raise FabricError(f"bad generator name {name!r}")
    sizes = level_sizes(h, m_, w_)
    down = [m_[lv - 1] * p_[lv - 1] for lv in range(1, h + 1)]
    up = [w_[lv] * p_[lv] if lv < h else 0 for lv in range(1, h + 1)]
    sw_ports = [d + u for d, u in zip(down, up, strict=True)]
    if switch_ports is not None:
        if switch_ports < max(sw_ports):
            raise FabricError(
                f"switch_ports={switch_ports} is below the {max(sw_ports)} ports a switch needs"
            )
        sw_ports = [int(switch_ports)] * h
    if max(sw_ports) > 255 or w_[0] * p_[0] > 255:
        raise FabricError("PGFT needs more than 255 ports on a node")
    host_ports = w_[0] * p_[0]

    present = None
    if hosts_per_leaf is not None:
        if not 1 <= hosts_per_leaf <= m_[0]:
            raise FabricError(f"hosts_per_leaf={hosts_per_leaf} not in 1..m_1={m_[0]}")
        present = (np.arange(sizes[0], dtype=np.int64) % m_[0]) < hosts_per_leaf

    levels: list[Level] = []
    for lv in range(h + 1):
        digits = _digits(np.arange(sizes[lv], dtype=np.int64), _radices(lv, m_, w_))
        strs = _tuple_strings(digits)
        if lv == 0:
            descs = [f"host {s}" for s in strs]
            nports = np.full(sizes[0], host_ports, dtype=np.int64)
        else:
            descs = [f"{name} L{lv} {s}" for s in strs]
            nports = np.full(sizes[lv], sw_ports[lv - 1], dtype=np.int64)
        levels.append(Level(lv, sizes[lv], nports, descs, present if lv == 0 else None))

    links = []
    for lv in range(h):  # lower level lv, upper level lv + 1, digit t = lv + 1
        mt, wt, pt = m_[lv], w_[lv], p_[lv]
        stride = int(np.prod(w_[:lv], dtype=np.int64))  # prod_{t' <= lv} w_t'
        idx = np.arange(sizes[lv], dtype=np.int64)
        low = idx % stride
        a = (idx // stride) % mt
        high = idx // (stride * mt)
        bb = np.arange(wt, dtype=np.int64)
        kk = np.arange(pt, dtype=np.int64)
        # shapes (K, w, p)
        upper = (low + stride * high * wt)[:, None, None] + (stride * bb)[None, :, None]
        upper = np.broadcast_to(upper, (len(idx), wt, pt))
        q = np.broadcast_to(bb[None, :, None] + wt * kk[None, None, :], upper.shape)
        r = np.broadcast_to(a[:, None, None] + mt * kk[None, None, :], upper.shape)
        lower = np.broadcast_to(idx[:, None, None], upper.shape)
        lower_down = 0 if lv == 0 else m_[lv - 1] * p_[lv - 1]
        links.append((
            lv, lower.ravel(), (lower_down + q + 1).ravel(),
            lv + 1, upper.ravel(), (r + 1).ravel(),
        ))
    return assemble(levels, links, lmc=lmc, speed=speed, width=width, guid_base=guid_base)


def xgft(h: int, m: Sequence[int], w: Sequence[int], **kwargs: object) -> Fabric:
    """XGFT(h; m; w) = PGFT(h; m; w; 1..1); keyword arguments as :func:`pgft`."""
    kwargs.setdefault("name", "xgft")
    return pgft(h, m, w, [1] * int(h), **kwargs)  # type: ignore[arg-type]


def kary_ntree(k: int, n: int, **kwargs: object) -> Fabric:
    """k-ary n-tree (Petrini; Navaridas' "k,n-fat-tree"): ``k**n`` hosts,
    ``n k**(n-1)`` switches = XGFT(n; k..k; 1, k..k).  Top switches have ``k``
    ports unless ``switch_ports`` (e.g. ``2k``) is given."""
    kwargs.setdefault("name", "kary")
    return pgft(n, [k] * n, [1] + [k] * (n - 1), [1] * n, **kwargs)  # type: ignore[arg-type]


def thin_tree(k: int, k_up: int, n: int, **kwargs: object) -> Fabric:
    """Navaridas' ``k:k',n``-thin-tree (``k`` down-ports, ``k' = k_up``
    up-ports per switch, ``n`` levels): the k,n-fat-tree with the upper digits
    restricted to ``k'`` values, i.e. XGFT(n; k..k; 1, k'..k').  ``k**n``
    hosts, ``k'**i k**(n-1-i)`` switches at Navaridas level ``i`` (our level
    ``i + 1``)."""
    if not 1 <= k_up <= k:
        raise FabricError(f"thin-tree needs 1 <= k' <= k, got k={k} k'={k_up}")
    kwargs.setdefault("name", "thin")
    return pgft(n, [k] * n, [1] + [k_up] * (n - 1), [1] * n, **kwargs)  # type: ignore[arg-type]


def slender_tree(
    k: int,
    k_up: int,
    n: int,
    *,
    lmc: int = 0,
    speed: str = "EDR",
    width: int = 4,
    guid_base: int = DEFAULT_GUID_BASE,
    switch_ports: int | None = None,
) -> Fabric:
    """Navaridas' ``k:k',n``-slender-tree (``k' = k_up`` must divide ``k`` and
    be smaller).  Navaridas level ``i`` (our level ``i + 1``) has
    ``S_i = k' (k/k')**(n-1-i)`` switches; switch ``s`` at level ``i < n-1``
    links its up-port ``u`` (``0 <= u < k'``) to down-port ``s mod k`` of switch
    ``k' floor(s/k) + u`` at level ``i+1``.  Leaf switch ``s`` has hosts
    ``s k .. s k + k - 1`` on down-ports ``0..k-1``, so ``N = k'^2 (k/k')**n``.
    Ports: down-port ``d`` is IB port ``d + 1``, up-port ``u`` IB port
    ``k + u + 1``; top switches have ``k`` ports (or ``switch_ports``)."""
    if not (1 <= k_up < k and k % k_up == 0):
        raise FabricError(f"slender-tree needs k' < k and k' | k, got k={k} k'={k_up}")
    if n < 1:
        raise FabricError(f"slender-tree needs n >= 1, got {n}")
    r = k // k_up
    counts = [k_up * r ** (n - 1 - i) for i in range(n)]
    ports = [k + k_up if i < n - 1 else k for i in range(n)]
    if switch_ports is not None:
        if switch_ports < max(ports) or switch_ports > 255:
            raise FabricError(f"switch_ports={switch_ports} not in {max(ports)}..255")
        ports = [int(switch_ports)] * n
    n_hosts = counts[0] * k
    levels = [Level(0, n_hosts, np.ones(n_hosts, dtype=np.int64),
                    [f"host {j}" for j in range(n_hosts)])]
    for i in range(n):
        levels.append(Level(
            i + 1, counts[i], np.full(counts[i], ports[i], dtype=np.int64),
            [f"slender L{i + 1} {s}" for s in range(counts[i])],
        ))
    hosts = np.arange(n_hosts, dtype=np.int64)
    links = [(0, hosts, np.ones(n_hosts, dtype=np.int64), 1, hosts // k, hosts % k + 1)]
    for i in range(n - 1):
        s = np.repeat(np.arange(counts[i], dtype=np.int64), k_up)
        u = np.tile(np.arange(k_up, dtype=np.int64), counts[i])
        links.append((i + 1, s, k + u + 1, i + 2, k_up * (s // k) + u, s % k + 1))
    return assemble(levels, links, lmc=lmc, speed=speed, width=width, guid_base=guid_base)


_NAV_RE = re.compile(
    r"^\s*(\d+)\s*(?:[:,]\s*(\d+)\s*)?,\s*(\d+)\s*-?\s*(fat|thin|slender)[- ]?tree\s*$", re.I
)


def navaridas_tree(spec: str, **kwargs: object) -> Fabric:
    """A tree from Navaridas' notation: ``"8,4-fat-tree"`` (k,n),
    ``"8:4,4-thin-tree"`` or ``"8:4,8-slender-tree"`` (k:k',n; ``"8,4,4-thin-tree"``
    is accepted too).  Keyword arguments go to the generator."""
    mo = _NAV_RE.match(spec)
    if not mo:
        raise FabricError(f"not a Navaridas tree spec: {spec!r}")
    k, kp, n, kind = int(mo[1]), mo[2], int(mo[3]), mo[4].lower()
    if kind == "fat":
        if kp is not None and int(kp) != k:
            raise FabricError(f"a fat-tree has k' = k: {spec!r}")
        return kary_ntree(k, n, **kwargs)
    if kp is None:
        raise FabricError(f"{kind}-tree needs k:k',n: {spec!r}")
    if kind == "thin":
        return thin_tree(k, int(kp), n, **kwargs)
    return slender_tree(k, int(kp), n, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- RLFT
def rlft_check(h: int, m: Sequence[int], w: Sequence[int], p: Sequence[int]) -> list[str]:
    """Rules of Zahavi's Real Life Fat-Tree violated by PGFT(h; m; w; p); empty
    if it is an RLFT: (1) ``w_1 = p_1 = 1`` (single-homed hosts), (2) constant
    CBB ``m_l p_l = w_{l+1} p_{l+1}`` for ``l = 1..h-1``, (3) every switch has
    the same port count ``m_l p_l + w_{l+1} p_{l+1}`` (top level: ``m_h p_h``)."""
    out: list[str] = []
    try:
        m_, w_, p_ = _as_params(h, "m", m), _as_params(h, "w", w), _as_params(h, "p", p)
    except FabricError as exc:
        return [str(exc)]
    if w_[0] != 1 or p_[0] != 1:
        out.append(f"hosts must have one link: w_1 = p_1 = 1 (got w_1={w_[0]}, p_1={p_[0]})")
    for lv in range(1, h):
        dn, upc = m_[lv - 1] * p_[lv - 1], w_[lv] * p_[lv]
        if dn != upc:
            out.append(
                f"constant CBB: m_{lv} p_{lv} = {dn} != w_{lv + 1} p_{lv + 1} = {upc}"
            )
    ports = [m_[lv - 1] * p_[lv - 1] + (w_[lv] * p_[lv] if lv < h else 0)
             for lv in range(1, h + 1)]
    if len(set(ports)) > 1:
        out.append(f"switch port counts differ per level: {ports}")
    return out


def is_rlft(h: int, m: Sequence[int], w: Sequence[int], p: Sequence[int]) -> bool:
    """True if PGFT(h; m; w; p) is a Real Life Fat-Tree (see :func:`rlft_check`)."""
    return not rlft_check(h, m, w, p)


# --------------------------------------------------------------------------- degradation
@dataclass(frozen=True)
class Removed:
    """What :func:`degrade` removed, in terms of the *source* fabric.

    ``nodes`` (S,) int64 node indices and ``node_guids`` (S,) uint64;
    ``links`` (L,) int64 link indices of the explicitly removed links (links
    that disappear with a removed switch are not listed) and ``link_ends``
    (L, 4) uint64 rows ``(guid_a, port_a, guid_b, port_b)``.
    """

    nodes: IntArray
    node_guids: npt.NDArray[np.uint64]
    links: IntArray
    link_ends: npt.NDArray[np.uint64]


def degrade(
    fabric: Fabric,
    rng: np.random.Generator,
    *,
    switches: int = 0,
    links: int = 0,
) -> tuple[Fabric, Removed]:
    """Remove ``switches`` random switches, then ``links`` random
    switch-to-switch links (host links are never picked; links of removed
    switches are not candidates), each drawn uniformly without replacement
    with ``rng``.  The same fabric, seed and counts give the same result.
    Returns the degraded fabric (via :meth:`Fabric.with_removed`) and a
    :class:`Removed` record; raises :class:`FabricError` if fewer candidates
    exist than requested."""
    sw = fabric.switches
    if not 0 <= switches <= len(sw):
        raise FabricError(f"cannot remove {switches} of {len(sw)} switches")
    drop_nodes = np.sort(rng.choice(sw, size=switches, replace=False)) if switches else (
        np.zeros(0, dtype=np.int64))
    dropped = np.zeros(fabric.n_nodes, dtype=bool)
    dropped[drop_nodes] = True
    na = fabric.port_node[fabric.link_a]
    nb = fabric.port_node[fabric.link_b]
    is_sw = fabric.node_type == NodeType.SWITCH
    cand = np.flatnonzero(is_sw[na] & is_sw[nb] & ~dropped[na] & ~dropped[nb])
    if not 0 <= links <= len(cand):
        raise FabricError(f"cannot remove {links} of {len(cand)} switch-to-switch links")
    drop_links = np.sort(rng.choice(cand, size=links, replace=False)) if links else (
        np.zeros(0, dtype=np.int64))
    drop_nodes = drop_nodes.astype(np.int64)
    drop_links = drop_links.astype(np.int64)
    ends = np.stack([
        fabric.node_guid[na[drop_links]],
        fabric.port_num[fabric.link_a[drop_links]].astype(np.uint64),
        fabric.node_guid[nb[drop_links]],
        fabric.port_num[fabric.link_b[drop_links]].astype(np.uint64),
    ], axis=1).astype(np.uint64)
    removed = Removed(
        nodes=drop_nodes, node_guids=fabric.node_guid[drop_nodes].copy(),
        links=drop_links, link_ends=ends,
    )
    return fabric.with_removed(nodes=drop_nodes, links=drop_links), removed
