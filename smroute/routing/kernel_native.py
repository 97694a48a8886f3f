"""Dmodc's closed-form routes compiled: :mod:`smroute.routing.kernel`'s
eq. 1-4 in C (``smroute/routing/native/route.c``).

``scripts/setup.sh`` builds it into ``build/kernel/libsmroute_kernel.so``
(``SMROUTE_KERNEL_LIB`` names another place); :func:`native_routes` loads it
with ctypes.  Without it (no compiler, an installed package without the
build tree, or a library older than its source) :func:`native_routes`
returns ``False`` and the numpy kernel runs: that one is the reference, and
the tests hold the two to the same tables.
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np

from smroute.routing.native_lib import BUILD, NATIVE, load

__all__ = ["LIBRARY", "SOURCE", "library", "native_routes"]

SOURCE = NATIVE / "route.c"
#: Where scripts/setup.sh puts the library (the repository's build tree).
LIBRARY = BUILD / "kernel" / "libsmroute_kernel.so"
#: A block's targets are collapsed into classes (those whose costs agree on
#: every row the block reads) where COLLAPSE x those rows < the block's port
#: groups (a block of leaves): the closer groups are then compared per class.
COLLAPSE = 8
#: NIDs and dividers below this: the numpy kernel's int32 arithmetic is exact.
_INT32 = 1 << 31

_P = np.ctypeslib.ndpointer
_I64 = _P(np.int64, flags="C")


@cache
def library(path: str | None = None) -> ctypes.CDLL | None:
    """The compiled kernel at ``path`` (default ``SMROUTE_KERNEL_LIB`` or
    :data:`LIBRARY`), or ``None`` if absent, unloadable or older than its source."""
    lib = load(SOURCE, LIBRARY, "SMROUTE_KERNEL_LIB", path)
    fn = getattr(lib, "smroute_route", None)
    if lib is None or fn is None:  # absent, or another library
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [
        ctypes.c_int64, _I64, ctypes.c_int64, ctypes.c_int64, _P(np.uint8, flags="C"),
        ctypes.c_int64, _I64, _I64, ctypes.c_void_p, ctypes.c_int64,
        _I64, _I64, _I64, _I64, _I64, _I64, _I64, _I64,
        _P(np.uint8, flags="C"), ctypes.c_int64, ctypes.c_int64,
    ]
    return lib


def _i64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def native_routes(
    switches: np.ndarray, rows: np.ndarray, tgt_i: np.ndarray, nid: np.ndarray,
    cols: np.ndarray | slice, pi: np.ndarray, rank: np.ndarray, grp: tuple[np.ndarray, ...],
    out: np.ndarray, lib: ctypes.CDLL | None = None,
) -> bool:
    """Eq. 1-4 of ``switches`` into the destinations' columns ``cols`` of
    ``out`` rows (as the numpy kernel writes them), or ``False`` (nothing
    written) without the library.  ``rows`` ``(S, U)`` uint8: every
    switch's costs to the targets; ``tgt_i`` ``(D,)``: each destination's target
    among them; ``cols``: the destinations' columns, an array or a slice;
    ``grp``: the graph's ``grp_first, grp_count, grp_remote, grp_port_first,
    grp_port_count, grp_ports``."""
    lib = lib or library()
    if lib is None or not out.flags.c_contiguous or out.dtype != np.uint8:
        return False
    if len(nid) and (int(nid.max()) >= _INT32 or int(pi[switches].max()) >= _INT32):
        return False
    col_arr = None if isinstance(cols, slice) else _i64(cols)
    rc = lib.smroute_route(
        len(switches), _i64(switches), rows.shape[1], rows.shape[0],
        np.ascontiguousarray(rows, dtype=np.uint8),
        len(nid), _i64(tgt_i), _i64(nid), None if col_arr is None else col_arr.ctypes.data,
        cols.start if isinstance(cols, slice) else 0, _i64(pi), _i64(rank),
        *(_i64(a) for a in grp), out, out.shape[1] if out.ndim > 1 else out.size, COLLAPSE)
    if rc != 0:
        raise MemoryError("the compiled routing kernel ran out of memory")
    return True
