"""Nmodc's steps over many small arrays, compiled
(``smroute/routing/native/nmodc.c``): the nominal kernel's pattern keys and
its ports once the slot tables are laid out
(:mod:`smroute.routing.nmodc.nominal`); the redirects by load's candidates,
the load of the upper switches' egress links and the placing rounds
(:mod:`smroute.routing.nmodc.balance`, :mod:`smroute.routing.nmodc.load`);
connected components (:func:`smroute.fabric.graph.components`); the
searches of a growing acyclic graph (:func:`reach`,
:mod:`smroute.routing.acyclic`).

``scripts/setup.sh`` builds it into ``build/nmodc/libsmroute_nmodc.so``
(``SMROUTE_NMODC_LIB`` names another place); without it (no compiler, an
installed package without the build tree, a library older than its source)
each function returns ``None`` / ``False`` (:func:`components`: the numpy
result) and the numpy code runs: that one is the reference, and the tests
hold the two to the same tables.
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np

from smroute.fabric import graph
from smroute.routing.kernel import Closer, unique_rows
from smroute.routing.native_lib import BUILD, NATIVE, load

__all__ = ["LIBRARY", "SOURCE", "components", "first_slots", "library", "nominal_ports",
           "pattern_keys", "place", "reach", "up_load"]

SOURCE = NATIVE / "nmodc.c"
#: Where scripts/setup.sh puts the library (the repository's build tree).
LIBRARY = BUILD / "nmodc" / "libsmroute_nmodc.so"

_P = np.ctypeslib.ndpointer
_I64 = _P(np.int64, flags="C")
_U32 = _P(np.uint32, flags="C")
_U8 = _P(np.uint8, flags="C")
_N = ctypes.c_int64
#: NIDs, dividers, table lengths and cable turns below this: 32-bit arithmetic is exact.
_LIMIT = 1 << 31


@cache
def library(path: str | None = None) -> ctypes.CDLL | None:
    """The compiled steps at ``path`` (default ``SMROUTE_NMODC_LIB`` or
    :data:`LIBRARY`), or ``None`` if absent, unloadable or older than its source."""
    lib = load(SOURCE, LIBRARY, "SMROUTE_NMODC_LIB", path)
    ports = getattr(lib, "smroute_nominal_ports", None)
    count = getattr(lib, "smroute_up_load", None)
    keys = getattr(lib, "smroute_pattern_keys", None)
    if lib is None or ports is None or count is None or keys is None:  # absent, or another
        return None
    place = getattr(lib, "smroute_place", None)
    first = getattr(lib, "smroute_first_slots", None)
    if place is None or first is None:
        return None
    comp = getattr(lib, "smroute_components", None)
    search = getattr(lib, "smroute_reach", None)
    if comp is None or search is None:
        return None
    comp.restype = None
    comp.argtypes = [_N, _N, _I64, _I64, _I64]
    search.restype = ctypes.c_int
    search.argtypes = [_N, _I64, _I64, _N, _I64, _I64, _N, _I64, _I64, _N, _N, ctypes.c_void_p,
                       _N, _U8, _I64]
    first.restype = None
    first.argtypes = [_N, *([_I64] * 4), _N, _I64, _N, _U8, _N, _N, _I64, _N]
    place.restype = ctypes.c_int
    place.argtypes = [_N, _N, _N, *([_I64] * 7), _N, _N, _U8, _I64, _N, _I64, _I64]
    keys.restype = None
    keys.argtypes = [_N, _N, _N, _U8, _I64, _I64, _N, _U8, _U8, _I64, _I64, _N, _N, _U8, _U8]
    ports.restype = None
    ports.argtypes = [_N, _N, _N, _U32, _I64, _I64, _U32, _I64, _U32, _I64, _U8, _U8, _I64,
                      _I64, _I64, _N, _U8, _I64, _I64, _I64, ctypes.c_void_p, ctypes.c_void_p,
                      _U8, _N]
    count.restype = None
    count.argtypes = [_N, _N, _N, _N, _I64, _I64, _I64, _I64, _U8, _I64, _I64, _I64, _U8,
                      _N, _I64]
    return lib


def _i64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def _u8(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.uint8)


def nominal_ports(nid: np.ndarray, tgt: np.ndarray, lid_cols: slice | np.ndarray,
                  piv: np.ndarray, spread: np.ndarray, lossy: np.ndarray,
                  kinds: tuple[np.ndarray, np.ndarray, np.ndarray], length: np.ndarray,
                  first: np.ndarray, val: np.ndarray, dead: np.ndarray, cable0: np.ndarray,
                  cables: np.ndarray, ports: np.ndarray,
                  turns: tuple[np.ndarray, np.ndarray] | None, out: np.ndarray) -> bool:
    """The nominal kernel's ports of ``B`` switches towards ``D`` destinations
    into ``out`` ``(B, W)`` uint8 (C-contiguous) at the columns ``lid_cols``, as its numpy
    code writes them, or ``False`` (nothing written) without the library.
    ``nid`` / ``tgt`` ``(D,)``: NIDs, target columns (of ``U``); ``piv``
    ``(B,)`` dividers; ``spread`` / ``lossy`` ``(B, U)`` bool: the NID is
    the digit, the digit is a lost slot's (``kinds``: its arity, divider and
    redirect divider ``(B,)``); ``length`` / ``first`` ``(B, U)``: each
    target's slot table; ``val`` ``(F,)`` every entry's lookup column;
    ``dead`` / ``cable0`` / ``cables`` ``(B, C)``: per lookup column, no
    route, the group's first cable (into ``ports``) and cable count;
    ``turns``: per entry its occurrence and count among those of its value
    (parallel cables; ``None``: one cable a group)."""
    lib = library()
    if lib is None or out.dtype != np.uint8 or not out.flags.c_contiguous:
        return False
    b, d = len(piv), len(nid)
    if d and max(int(nid.max()), int(length.max(initial=1)), int(piv.max(initial=1)),
                 *(int(k.max(initial=1)) for k in kinds)) >= _LIMIT:
        return False
    if turns is not None and int(turns[1].max(initial=0)) * (int(nid.max()) + 1) >= _LIMIT:
        return False
    rows = out.reshape(b, -1)  # (a view: contiguous)
    cols = np.arange(rows.shape[1])[lid_cols] if isinstance(lid_cols, slice) else lid_cols
    v = nid.astype(np.uint32)
    # the digits per distinct divider, a lost slot's per (arity, divider, redirect divider)
    pv, xi = np.unique(piv, return_inverse=True)
    xs = v[None, :] // pv[:, None].astype(np.uint32)
    kv, vi = unique_rows(np.stack(kinds, axis=1) * np.asarray(lossy.any(axis=1))[:, None])
    m, p, q = (np.maximum(kv[:, i, None], 2 if i == 0 else 1).astype(np.uint32)
               for i in range(3))
    vs = v // p % m + m * (v // q % (m - 1))
    occ, count = (None, None) if turns is None else (
        np.ascontiguousarray(t, dtype=np.int32) for t in turns)
    lib.smroute_nominal_ports(
        b, d, spread.shape[1], v, _i64(tgt), _i64(cols), xs, _i64(xi.ravel()),
        np.ascontiguousarray(vs), _i64(vi.ravel()), _u8(spread), _u8(lossy), _i64(length),
        _i64(first), _i64(val), dead.shape[1], _u8(dead), _i64(cable0), _i64(cables),
        _i64(ports), None if occ is None else occ.ctypes.data,
        None if count is None else count.ctypes.data, rows, rows.shape[1])
    return True


def pattern_keys(cl: Closer, own: np.ndarray, arity: np.ndarray, spos: np.ndarray,
                 nb: int) -> np.ndarray | None:
    """``(B, U', nb + 1)`` uint8: the nominal kernel's pattern key of each
    switch and collapsed target of ``cl`` (made without its closer bits:
    :func:`~smroute.routing.kernel.closer_groups`), as its numpy code builds
    it: the closer groups as bits (read through the nominal slots, ``spos``
    ``(B, M)`` their group positions, where the switch goes up and is not
    ``own``) and the nominal ``arity`` there; ``None`` without the library."""
    lib = library()
    if lib is None or cl.sub is None or cl.row_of is None:
        return None
    b, width = cl.valid.shape
    sub = np.ascontiguousarray(cl.sub, dtype=np.uint8)
    out = np.empty((b, cl.n_u, nb + 1), dtype=np.uint8)
    lib.smroute_pattern_keys(b, cl.n_u, sub.shape[1], sub, _i64(cl.row_of[:b]),
                             _i64(cl.row_of[b:]), width, _u8(cl.down), _u8(own), _i64(arity),
                             _i64(spos), spos.shape[1], nb, np.zeros(width, np.uint8), out)
    return out


def up_load(key: np.ndarray, slot: np.ndarray, res: np.ndarray, carried: np.ndarray,
            t_of: np.ndarray, up: np.ndarray, lid: np.ndarray,
            ports: np.ndarray) -> np.ndarray | None:
    """``(U * 256,)`` int64: per egress link ``(u, port)`` of ``U`` upper
    switches, the destinations ``e`` (of ``E``) whose residue ``res[key[u],
    e]`` (``res`` ``(K, E)`` int64 ``>= 0``) is ``u``'s slot ``slot[u]``
    and whose target ``t_of[e]`` ``u`` carries (``carried`` ``(U, T)``
    bool), through port ``ports[up[u], lid[e]]``; ``None`` without the library."""
    lib = library()
    if lib is None or ports.dtype != np.uint8 or not ports.flags.c_contiguous:
        return None
    n_e = res.shape[1]
    top = max(int(res.max(initial=0)), int(slot.max(initial=0))) + 1
    # per key, the destinations by residue and where each residue's run starts
    by_res = np.argsort(res, axis=1, kind="stable")
    counts = np.zeros((len(res), top + 1), dtype=np.int64)
    np.add.at(counts, (np.arange(len(res))[:, None], res + 1), 1)
    first = np.cumsum(counts, axis=1)
    load_ = np.zeros(len(key) * 256, dtype=np.int64)
    lib.smroute_up_load(len(key), n_e, top + 1, carried.shape[1], _i64(key), _i64(slot),
                        _i64(by_res), _i64(first), _u8(carried), _i64(t_of), _i64(up), _i64(lid),
                        ports, ports.shape[1], load_)
    return load_


def place(starts: np.ndarray, ck: np.ndarray, lk: np.ndarray, tk: np.ndarray,
          cand: np.ndarray, key: np.ndarray, order: np.ndarray, spread: int, keep: int,
          carry: np.ndarray, load_: np.ndarray, taken: np.ndarray, choice: np.ndarray) -> bool:
    """The placing rounds of the redirects by load
    (:func:`smroute.routing.nmodc.balance.balance_redirects`), as its numpy
    loop runs them: per block of entries (``starts``), in placing order, the
    candidates' flat indices ``ck`` / ``lk`` / ``tk`` ``(R, K)`` into
    ``carry`` (bool), ``load_`` (one past its end: a missing candidate,
    2**40) and ``taken`` (int64, updated in place),
    ``cand`` ``(R, K)`` the slots, ``key`` ``(R,)`` the destination and
    sibling group, ``order`` each entry's place in ``choice`` (written);
    ``False`` (nothing done) without the library."""
    lib = library()
    if lib is None or carry.dtype != np.bool_ or not all(
            a.dtype == np.int64 and a.flags.c_contiguous for a in (load_, taken, choice)):
        return False
    n, k = cand.shape
    rc = lib.smroute_place(n, k, len(starts) - 1, _i64(starts), _i64(ck), _i64(lk), _i64(tk),
                           _i64(cand), _i64(key), _i64(order), spread, keep, carry.view(np.uint8),
                           load_, len(load_), taken, choice)
    if rc != 0:
        raise MemoryError("the compiled redirects by load ran out of memory")
    return True


def first_slots(closer: np.ndarray, cls: np.ndarray, x: np.ndarray, y: np.ndarray, m: int,
                off: np.ndarray, sel: np.ndarray, out: np.ndarray) -> bool:
    """Into ``out`` ``(R, K + 1)`` int64 rows ``sel`` (entries of nominal
    arity ``m``): the first ``K`` closer slots (``closer`` ``(C, M)`` bool of
    each entry's class ``cls``) in the probe order of its digit ``x`` and
    redirect digit ``y`` (``off``: the arity's probe offsets), as the numpy
    probing of :mod:`smroute.routing.nmodc.balance` finds them; ``False``
    (nothing written) without the library."""
    lib = library()
    if lib is None or out.dtype != np.int64 or not out.flags.c_contiguous:
        return False
    flat = np.ascontiguousarray(closer).view(np.uint8)
    lib.smroute_first_slots(len(sel), _i64(sel), _i64(cls), _i64(x), _i64(y), m, _i64(off),
                            off.shape[1], flat, closer.shape[1], out.shape[1] - 1, out,
                            out.shape[1])
    return True


def components(n_nodes: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`smroute.fabric.graph.components` (the reference, which runs
    without the library or with an edge outside ``0 .. n_nodes - 1``),
    compiled: ``(n_nodes,)`` int64 the smallest node of each node's component."""
    lib = library()
    ea, eb = _i64(a), _i64(b)
    if lib is None or (len(ea) and min(int(ea.min()), int(eb.min())) < 0) or (
            len(ea) and max(int(ea.max()), int(eb.max())) >= n_nodes):
        return graph.components(n_nodes, a, b)
    label = np.empty(n_nodes, dtype=np.int64)
    lib.smroute_components(n_nodes, len(ea), ea, eb, label)
    return label


def reach(row: np.ndarray, to: np.ndarray, at2: np.ndarray, to2: np.ndarray,
          start: np.ndarray, pos: np.ndarray, lo: int, hi: int, within: np.ndarray | None,
          stop: int) -> np.ndarray | None:
    """``(n,)`` bool: the nodes reached from ``start`` by the edges ``x ->
    to[row[x]:row[x + 1]]`` and ``at2 -> to2`` (``at2`` ascending) through
    nodes at positions ``lo .. hi`` (and of ``within`` if given), the start
    nodes seen whatever their position; with ``stop >= 0``, ended once it
    is reached (the nodes seen then are some of the others).
    :func:`smroute.routing.acyclic` ``_reach`` is the reference; ``None``
    without the library."""
    lib = library()
    if lib is None:
        return None
    n = len(pos)
    seen = np.zeros(n, dtype=np.uint8)
    w = None if within is None else np.ascontiguousarray(within, dtype=np.uint8)
    lib.smroute_reach(n, _i64(row), _i64(to), len(at2), _i64(at2), _i64(to2), len(start),
                      _i64(start), _i64(pos), lo, hi, None if w is None else w.ctypes.data,
                      stop, seen, np.empty(max(n, 1), dtype=np.int64))
    return seen.view(bool)
