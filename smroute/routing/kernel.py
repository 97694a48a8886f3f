"""The kernels' shared part: Dmodc's closed-form routes (eq. 1-4,
:func:`route_block`) and what Nmodc's kernel
(:mod:`smroute.routing.nmodc.nominal`) does the same way: the per-job
context (:func:`route_context`), the closer port groups of a block of
switches (:func:`closer_groups`, eq. 1), the destinations on the switch
itself (:func:`local_routes`), the slot arithmetic (:func:`slot_offsets`,
eq. 3) and the port inside a group of parallel cables (:func:`cable_ports`,
eq. 4).  Costs are encoded as :mod:`smroute.routing.dmodc` says.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from smroute.routing.dmodc import INF, NO_ROUTE, UP_PHASE, Destinations
from smroute.routing.kernel_native import LIBRARY, library, native_routes
from smroute.routing.runs import dense, stable_order
from smroute.routing.topology import SwitchGraph

__all__ = ["Closer", "RouteContext", "cable_ports", "closer_groups", "dedupe_rows",
           "local_routes", "route_block", "route_context", "slot_offsets", "unique_rows"]


@dataclass(frozen=True, eq=False)
class RouteContext:
    """Per-job data shared by every block: distinct targets and their cost columns.

    c ``(S, S)`` uint8 the encoded costs; tgt_u ``(U,)`` distinct target
    switches; tgt_i ``(D,)`` index of each destination's target in ``tgt_u``;
    local_order / local_target: destinations sorted by target switch;
    lid_cols: the table columns of the destinations, a slice where their LIDs
    ascend without a gap (a block's routes are then written as one copy, 28x
    faster than by index).  Made when first read (the compiled kernel reads
    ``rows`` only, the numpy kernel ``ext_t``): rows ``(S, U)`` uint8
    C-contiguous, every switch's costs to the targets (``c`` itself where
    every switch is a target); ext_t ``(U, S + 1)`` uint8 C-contiguous, its
    transpose with an extra all-INF column (used for padding); ext its
    transpose ``(S + 1, U)`` (a view).
    """

    c: np.ndarray
    tgt_u: np.ndarray
    tgt_i: np.ndarray
    local_order: np.ndarray
    local_target: np.ndarray
    lid_cols: slice | np.ndarray

    @property
    def ext(self) -> np.ndarray:
        return self.ext_t.T

    @cached_property
    def ext_t(self) -> np.ndarray:
        # transposed in blocks of rows (a cache-sized block at a time: 4x
        # faster than one transposing copy)
        rows = self.rows
        n = len(rows)
        out = np.empty((rows.shape[1], n + 1), dtype=rows.dtype)
        body = out[:, :n]
        for i in range(0, n, _BLOCK):
            body[:, i:i + _BLOCK] = rows[i:i + _BLOCK].T
        out[:, n] = INF
        return out

    def ext_columns(self, rows_used: np.ndarray) -> np.ndarray:
        """``ext_t[:, rows_used]`` ``(U, R)`` uint8 C-contiguous
        (``rows_used`` ascending, ``S`` the all-INF row), from ``ext_t``
        where it is made or most rows are read by the numpy kernel, else
        from ``c`` directly (a few switches' rows, or a block beside those
        the compiled kernel routes: no transposition of every switch's)."""
        n = self.c.shape[0]
        if "ext_t" in self.__dict__ or (2 * len(rows_used) > n and library() is None):
            return np.take(self.ext_t, rows_used, axis=1)
        real = rows_used[rows_used < n]
        got = np.take(self.c, real, axis=0)
        if len(self.tgt_u) != self.c.shape[1]:  # (else every switch is a target, in order)
            got = np.take(got, self.tgt_u, axis=1)
        out = np.full((len(self.tgt_u), len(rows_used)), INF, dtype=np.uint8)
        out[:, :len(real)] = got.T
        return out

    @cached_property
    def rows(self) -> np.ndarray:
        c, tgt_u = self.c, self.tgt_u
        every = len(tgt_u) == c.shape[1] and bool((tgt_u == np.arange(len(tgt_u))).all())
        return np.ascontiguousarray(c) if every else np.take(c, tgt_u, axis=1)


#: Rows of the costs transposed at a time (:attr:`RouteContext.ext_t`).
_BLOCK = 128


def route_context(c: np.ndarray, dest: Destinations) -> RouteContext:
    tgt_u, tgt_i = dense(dest.target, c.shape[1])  # the distinct targets, no sort
    order = stable_order(dest.target, c.shape[1])
    lid = dest.lid
    run = len(lid) and bool((np.diff(lid) == 1).all())
    cols = slice(int(lid[0]), int(lid[-1]) + 1) if run else lid
    return RouteContext(c, tgt_u, tgt_i.astype(np.int64), order, dest.target[order], cols)


#: Integers below this are exact in float32, and so is their division (:func:`_mod`).
_EXACT = 1 << 24


def _mod(q: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``q % n`` for int32 ``q >= 0``, ``1 <= n``, broadcast; float32 SIMD when exact.

    With ``q, n < 2**24`` the correctly rounded float32 quotient ``q / n`` is
    never rounded up to the next integer: if ``2**(E-1) <= q / n < 2**E``,
    half an ulp there is ``2**(E-25) <= q * 2**-24 / n < 1 / n``, the gap below
    that integer.  So ``floor(q / n)`` is exact, and so are ``floor(q/n) * n``
    and the remainder (integers below ``2**24``): the result equals integer
    ``%`` (checked for every ``q < 2**16``, ``n <= 4096``).
    """
    return _divmod(q, n, quotient=False)[1]


def _divmod(q: np.ndarray, n: np.ndarray,
            quotient: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(q // n, q % n)`` int32, as :func:`_mod` (float32 SIMD when exact);
    without ``quotient`` an empty one (one conversion less)."""
    if q.size and (int(q.max()) >= _EXACT or int(n.max()) >= _EXACT):
        return (q // n if quotient else np.zeros(0, np.int32)), q % n
    quot, d = _float_divmod(q.astype(np.float32), n.astype(np.float32), quotient)
    return quot, d.astype(np.int32)


def _float_divmod(qf: np.ndarray, nf: np.ndarray,
                  quotient: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(q // n, q % n)`` of float32 ``qf`` / ``nf`` holding exact integers
    (:func:`_mod`): the quotient int32 (empty without ``quotient``), the
    remainder float32."""
    d = qf / nf
    np.floor(d, out=d)
    quot = d.astype(np.int32) if quotient else np.zeros(0, np.int32)
    d *= nf
    np.subtract(qf, d, out=d)
    return quot, d


def slot_offsets(q: np.ndarray, n: np.ndarray, tgt: np.ndarray, start: np.ndarray,
                 quotient: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A block's places in per-target tables: ``(quot, entry)`` ``(B, D)``
    with ``entry = start[:, tgt] + q % n[:, tgt]`` float (exact integers)
    and ``quot = q // n[:, tgt]`` int32 (empty without ``quotient``), for
    ``q`` ``(1 or B, D)`` int32 ``>= 0`` and ``n``, ``start`` ``(B, T)``
    (``n >= 1``).  In float32 where exact (:func:`_mod`, and the entries
    below ``2**24``); the per-target arrays are gathered with ``np.take``,
    whose result is C-ordered (``a[:, tgt]`` would be F-ordered, strided in
    every pass after it)."""
    top = int(start.max(initial=0)) + int(n.max(initial=1))
    if q.size and (int(q.max()) >= _EXACT or top >= _EXACT):
        qi, nd = q.astype(np.int64), np.take(n, tgt, axis=1)
        entry = np.take(start.astype(np.float64), tgt, axis=1)
        entry += qi % nd
        return ((qi // nd).astype(np.int32) if quotient else np.zeros(0, np.int32)), entry
    quot, d = _float_divmod(q.astype(np.float32, copy=False),
                            np.take(n.astype(np.float32), tgt, axis=1), quotient)
    d += np.take(start.astype(np.float32), tgt, axis=1)
    return quot, d


def cable_ports(g: SwitchGraph, grp: np.ndarray, dead: np.ndarray, at: np.ndarray,
                 turn: np.ndarray) -> np.ndarray:
    """``(B, D)`` uint8 ports of parallel links (eq. 4 inside a group):
    cable ``turn mod #cables`` (``turn`` ``(B, D)`` int32) of the group that
    each destination's lookup ``at`` ``(B, D)`` (flat index into the lookup
    columns ``grp`` ``(B, C)`` int64 group ids, ``dead`` ``(B, C)`` bool:
    NO_ROUTE) finds; one lookup in a per-column table of the group's
    cables."""
    cnt = g.grp_port_count[grp]
    k = int(cnt.max())
    c = np.arange(k)
    lut = np.where(dead[..., None] | (c >= cnt[..., None]), NO_ROUTE, g.grp_ports[
        np.minimum(g.grp_port_first[grp][..., None] + c, len(g.grp_ports) - 1)]).astype(np.uint8)
    alive = np.unique(cnt[~dead])  # one cable count (a dead column: NO_ROUTE on every cable)
    n = (np.full(1, alive[0], dtype=np.int32) if len(alive) == 1
         else np.take(np.where(dead, 1, cnt).ravel(), at))
    pick = at * np.int32(k)
    pick += _mod(turn, n)
    return np.take(lut.ravel(), pick)


def dedupe_rows(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group equal rows of ``m`` (``(U, R)`` uint8, C-contiguous), exactly.

    Returns ``(row_of (U,), reps (U',))``: row ``u`` equals row
    ``reps[row_of[u]]``.  Rows are compared as raw bytes, in their order
    (rows of up to 8 bytes as big-endian integers: the same order, sorted
    several times faster than byte strings).
    """
    if m.shape[1] == 0:
        return np.zeros(m.shape[0], dtype=np.int64), np.zeros(min(m.shape[0], 1), dtype=np.int64)
    if m.shape[1] <= 8:
        padded = np.zeros((m.shape[0], 8), dtype=np.uint8)
        padded[:, :m.shape[1]] = m
        v = padded.view(">u8").ravel()
        # distinct values hashed, then found: faster than unique's inverse
        row_of = np.searchsorted(np.unique(v), v)
        first = np.full(int(row_of.max(initial=-1)) + 1, len(v), dtype=np.int64)
        np.minimum.at(first, row_of, np.arange(len(v)))
        return row_of, first
    v = np.ascontiguousarray(m).view(np.dtype((np.void, m.shape[1]))).ravel()
    _, first, row_of = np.unique(v, return_index=True, return_inverse=True)
    return row_of.ravel(), first


@dataclass(frozen=True, eq=False)
class Closer:
    """The closer port groups of a block of ``B`` switches (eq. 1), over
    ``G`` group positions per switch (padding positions never closer).

    gidx ``(B, G)`` the group at each position (0 past the switch's groups);
    valid ``(B, G)`` bool a group is there; down ``(B, G)`` bool it leads
    down; col_of ``(U,)`` the collapsed target of each distinct target of the
    context; n_u: collapsed targets; cs ``(U', B)`` uint8 the switches' costs
    to them; closer ``(U', B, G)`` bool: the group leads closer (empty
    where not asked for: sub ``(U', R)`` uint8, the collapsed targets' costs
    of the ``R`` rows the block reads, and row_of ``(B + B * G,)`` the
    switches' rows then their groups' remotes', from which it is computed)."""

    gidx: np.ndarray
    valid: np.ndarray
    down: np.ndarray
    col_of: np.ndarray
    n_u: int
    cs: np.ndarray
    closer: np.ndarray
    sub: np.ndarray | None = None
    row_of: np.ndarray | None = None


def closer_groups(g: SwitchGraph, switches: np.ndarray, ctx: RouteContext,
                  width: int, closer: bool = True) -> Closer:
    """Eq. 1 for ``switches`` over ``width`` group positions (at least the
    most groups a switch of the block has), per distinct target; targets
    whose cost columns agree on every row the block reads are collapsed.
    Without ``closer``: the costs it is computed from instead (:class:`Closer`)."""
    b = len(switches)
    ng = g.grp_count[switches]
    valid = np.arange(width)[None, :] < ng[:, None]
    gidx = np.where(valid, g.grp_first[switches][:, None] + np.arange(width)[None, :], 0)
    n_ext = ctx.c.shape[0] + 1  # the switches and an all-INF row
    remote = np.where(valid, g.grp_remote[gidx], n_ext - 1)
    # Targets whose cost columns agree on every row this block reads have the
    # same closer-group patterns: collapse them (exact byte comparison).
    rows_used, row_of = dense(np.concatenate([switches, remote.ravel()]), n_ext)
    sub_t = ctx.ext_columns(rows_used)  # (U, R)
    col_of, reps = dedupe_rows(sub_t)
    sub_t = sub_t[reps]  # (U', R)
    cs_t = np.take(sub_t, row_of[:b], axis=1)  # (U', B)
    down_k = g.rank[np.where(valid, remote, 0)] < g.rank[switches][:, None]  # (B, G)
    if not closer:
        return Closer(gidx, valid, down_k, col_of, len(reps), cs_t,
                      np.zeros((0, 0, 0), dtype=bool), sub_t, row_of)
    # closer[u, b, k]: group k of switch b leads closer to target u (eq. 1):
    # below the switch, down to a shorter down-only path; else up, one hop
    # nearer.  One comparison does both: a remote reached by a down link is
    # read as its down-only cost (INF without one: a switch above a down-only
    # path has one itself), one reached by an up link as UP_PHASE + its hop
    # count, so it never beats a down-only cost and compares hops otherwise.
    hop = np.uint8(UP_PHASE - 1)
    as_down = np.where(sub_t < UP_PHASE, sub_t, np.uint8(INF))
    as_up = (sub_t & hop) | np.uint8(UP_PHASE)  # (INF has every low bit set: stays INF)
    pick = row_of[b:].reshape(remote.shape) + np.where(down_k, 0, sub_t.shape[1])
    rem_t = np.take(np.concatenate([as_down, as_up], axis=1), pick, axis=1)  # (U', B, G)
    near = rem_t < cs_t[:, :, None]  # padding groups read the all-INF row: never closer
    near &= (cs_t < INF)[:, :, None]
    return Closer(gidx, valid, down_k, col_of, len(reps), cs_t, near)


def unique_rows(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(m, axis=0, return_inverse=True)`` for ``m`` ``(R, K)``
    int64 (its distinct rows in lexicographic order, and each row's index
    among them), by one integer key of the entries' ranks (no sort of
    structured rows; the key of the columns so far ranked anew where the
    next would overflow it: the same order)."""
    if not m.size:
        return np.unique(m, axis=0, return_inverse=True)
    if (m == m[0]).all():  # one distinct row (the common case)
        return m[:1].copy(), np.zeros(len(m), dtype=np.int64)
    v, rank = np.unique(m, return_inverse=True)
    rank = rank.reshape(m.shape)
    key, n = np.zeros(len(m), dtype=np.int64), 1
    for k in range(m.shape[1]):
        if n * len(v) >= 1 << 62:
            key = np.unique(key, return_inverse=True)[1].ravel()
            n = int(key.max()) + 1
        key = key * len(v) + rank[:, k]
        n *= len(v)
    _, first, row_of = np.unique(key, return_index=True, return_inverse=True)
    return m[first], row_of.ravel()


def local_routes(dest: Destinations, switches: np.ndarray, out: np.ndarray,
                 ctx: RouteContext) -> None:
    """The entries of the destinations hanging off (or being) ``switches``
    themselves: their local port, into ``out`` rows."""
    b = len(switches)
    lo = np.searchsorted(ctx.local_target, switches, side="left")
    hi = np.searchsorted(ctx.local_target, switches, side="right")
    cnt_h = hi - lo
    if cnt_h.any():
        hb = np.repeat(np.arange(b), cnt_h)
        hd = ctx.local_order[np.repeat(lo - np.cumsum(cnt_h) + cnt_h, cnt_h)
                             + np.arange(int(cnt_h.sum()))]
        out.reshape(b, -1)[hb, dest.lid[hd]] = dest.local_port[hd]


def route_block(
    g: SwitchGraph,
    c: np.ndarray,
    pi: np.ndarray,
    dest: Destinations,
    switches: np.ndarray,
    out: np.ndarray,
    ctx: RouteContext | None = None,
    native: bool | None = None,
) -> None:
    """Closed-form routes (eq. 1-4) of ``switches`` for every destination.

    ``out``: ``(len(switches), max_lid + 1)`` uint8 rows, filled with the output
    port per LID (:data:`NO_ROUTE` where unreachable or not a destination).

    Vectorized over the block of switches and all destinations.  The set of
    port groups leading closer to a target switch (eq. 1) is computed once per
    (switch, distinct target) as a bit pattern over the switch's group
    positions; patterns are shared by many (switch, target) pairs (e.g. "all
    up groups"), so the ordered candidate lists of eq. 3 and their ports are
    laid out once per (switch, pattern).  Per destination only eq. 3-4's
    arithmetic and one lookup remain.

    ``native``: the compiled kernel (:mod:`smroute.routing.kernel_native`,
    the same tables) where built (``None``, the default), always (``True``:
    an error without it) or never.
    """
    b = len(switches)
    if b == 0 or len(dest.lid) == 0:
        out[:] = NO_ROUTE
        return
    if ctx is None:
        ctx = route_context(c, dest)
    cols = ctx.lid_cols
    rows = out.reshape(b, -1)
    if isinstance(cols, slice):  # the compiled kernel writes the destinations' columns
        rows[:, :cols.start] = NO_ROUTE
        rows[:, cols.stop:] = NO_ROUTE
    else:
        rows[:] = NO_ROUTE
    grp = (g.grp_first, g.grp_count, g.grp_remote, g.grp_port_first, g.grp_port_count,
           g.grp_ports)
    if len(g.grp_remote) == 0 or native is False or not native_routes(
            switches, ctx.rows, ctx.tgt_i, dest.nid, cols, pi, g.rank, grp, rows):
        if native and len(g.grp_remote):
            raise RuntimeError(f"the compiled routing kernel is not built ({LIBRARY}: "
                               "scripts/setup.sh builds it)")
        if isinstance(cols, slice):
            rows[:, cols] = NO_ROUTE
        if len(g.grp_remote):
            _route_remote(g, pi, dest, switches, out, ctx)
    local_routes(dest, switches, out, ctx)


def _route_remote(
    g: SwitchGraph, pi: np.ndarray, dest: Destinations, switches: np.ndarray,
    out: np.ndarray, ctx: RouteContext,
) -> None:
    """Eq. 1-4 for every destination through the switches' port groups (see
    :func:`route_block`); fills ``out`` rows."""
    b = len(switches)
    gmax = max(int(g.grp_count[switches].max()), 1)
    cl = closer_groups(g, switches, ctx, -(-gmax // 8) * 8)  # whole bytes: a flat packbits
    gidx, col_of, n_u, closer = cl.gidx, cl.col_of, cl.n_u, cl.closer
    # pattern key per (b, u): the closer bits packed over group positions
    packed = np.packbits(closer, bitorder="little").reshape(n_u, b, -1)  # (U', B, ceil(G/8))
    rows = np.ascontiguousarray(packed.transpose(1, 0, 2)).reshape(b * n_u, -1)
    pat_of, first = dedupe_rows(rows)
    bits = np.unpackbits(rows[first], axis=1, bitorder="little")[:, :gmax].astype(bool)
    pat_of = pat_of.reshape(b, n_u)
    # empty patterns get one NO_ROUTE slot, so every lookup is valid
    pat_len = bits.sum(axis=1)
    empty = pat_len == 0
    bits[empty, 0] = True
    slot_len = np.maximum(pat_len, 1)
    pat_p, pat_pos = np.nonzero(bits)  # ordered group positions per pattern
    pat_start = np.cumsum(slot_len) - slot_len
    n_slots = int(slot_len.sum())
    # per (switch, pattern slot): its group
    grp_lut = gidx[:, pat_pos]  # (B, n_slots)
    dead = empty[pat_p]
    piv = pi[switches]
    same_pi = bool((piv == piv[0]).all())
    nid = dest.nid.astype(np.int32)
    q = (nid // np.int32(piv[0]))[None, :] if same_pi else nid[None, :] // piv[:, None].astype(
        np.int32)
    start_bu = pat_start[pat_of] + (np.arange(b) * n_slots)[:, None]  # (B, U)
    tgt = col_of[ctx.tgt_i]  # (D,) collapsed target of each destination
    parallel = not (g.grp_port_count[grp_lut] == 1).all()
    quot, pick = slot_offsets(q, slot_len[pat_of], tgt, start_bu, quotient=parallel)
    pick = pick.astype(np.intp)  # (B, D) flat slot index
    if not parallel:
        port_lut = np.where(dead[None, :], NO_ROUTE, g.grp_ports[g.grp_port_first[grp_lut]])
        port = np.take(port_lut.astype(np.uint8).ravel(), pick)
    else:  # parallel links: eq. 4 picks the port inside the group
        port = cable_ports(g, grp_lut, np.broadcast_to(dead, grp_lut.shape), pick, quot)
    out.reshape(b, -1)[:, ctx.lid_cols] = port
