"""The validation walk compiled: :mod:`smroute.routing.validate`'s walk in C.

``scripts/setup.sh`` builds ``smroute/routing/native/walk.c`` into
``build/walk/libsmroute_walk.so`` (``SMROUTE_WALK_LIB`` names another
place); :func:`native_walk` loads it with ctypes.  Without it (no compiler,
an installed package without the build tree, or a library older than its
source) :func:`native_walk` returns ``None`` and the numpy walk runs: that one
is the reference, and the tests hold the two to the same results.
"""

from __future__ import annotations

import ctypes
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache

import numpy as np

from smroute.routing.native_lib import BUILD, NATIVE, load

__all__ = ["LIBRARY", "SOURCE", "library", "native_walk"]

SOURCE = NATIVE / "walk.c"
#: Where scripts/setup.sh puts the library (the repository's build tree).
LIBRARY = BUILD / "walk" / "libsmroute_walk.so"
#: Destination columns walked per call (bounds the memory of one call).
COLUMNS = 2048
#: The most threads walking at once.
THREADS = 4

_P = np.ctypeslib.ndpointer


@cache
def library(path: str | None = None) -> ctypes.CDLL | None:
    """The compiled walk at ``path`` (default ``SMROUTE_WALK_LIB`` or
    :data:`LIBRARY`), or ``None`` if absent, unloadable or older than its source."""
    lib = load(SOURCE, LIBRARY, "SMROUTE_WALK_LIB", path)
    if lib is None:
        return None
    fn = lib.smroute_walk
    fn.restype = ctypes.c_int
    fn.argtypes = [
        ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, _P(np.uint8, flags="C"),
        _P(np.int64, flags="C"), _P(np.int32, flags="C"), _P(np.int8, flags="C"),
        _P(np.int64, flags="C"), _P(np.int64, flags="C"), _P(np.uint8, flags="C"),
        ctypes.c_int64, _P(np.int8, flags="C"), _P(np.int16, flags="C"),
    ]
    return lib


def native_walk(
    ports: np.ndarray, lids: np.ndarray, target: np.ndarray, local_port: np.ndarray,
    nxt: np.ndarray, rank: np.ndarray, turns: np.ndarray | None, max_hops: int,
    chunk: int = COLUMNS, lib: ctypes.CDLL | None = None, threads: int | None = None,
) -> Iterator[tuple[slice, np.ndarray, np.ndarray]] | None:
    """``(columns, status (S, k), hops (S, k))`` per chunk of destination
    columns, as the numpy walk yields them, or ``None`` without the library.
    ``nxt`` ``(S, 256)``: the switch behind each port (< 0 none); ``rank``
    ``(S,)`` the switches' ranks.  ``threads``: chunks walked at once
    (default: the CPUs this process may use, at most :data:`THREADS`)."""
    lib = lib or library()
    if lib is None:
        return None
    if threads is None:
        threads = min(THREADS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1)
    n_sw, n_d = int(ports.shape[0]), int(len(lids))
    nxt32 = np.ascontiguousarray(nxt, dtype=np.int32)
    rank8 = np.ascontiguousarray(rank, dtype=np.int8)
    tgt = np.ascontiguousarray(target, dtype=np.int64)
    loc = np.ascontiguousarray(local_port, dtype=np.int64)
    freed = (np.zeros(n_d, dtype=np.uint8) if turns is None
             else np.ascontiguousarray(turns, dtype=np.uint8))

    table = np.ascontiguousarray(ports, dtype=np.uint8)
    lid64 = np.ascontiguousarray(lids, dtype=np.int64)

    def one(c0: int) -> tuple[slice, np.ndarray, np.ndarray]:
        sl = slice(c0, min(c0 + chunk, n_d))
        k = sl.stop - sl.start
        st = np.empty((n_sw, k), dtype=np.int8)
        hp = np.empty((n_sw, k), dtype=np.int16)
        if lib.smroute_walk(n_sw, k, table.shape[1], table, lid64[sl], nxt32, rank8,
                            tgt[sl], loc[sl], freed[sl], max_hops, st, hp) != 0:
            raise MemoryError("the compiled validation walk ran out of memory")
        return sl, st, hp

    def chunks() -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
        # the library runs without the GIL: chunks walk in threads, in order,
        # a few ahead of the consumer (which counts one while the next walk)
        starts = deque(range(0, n_d, chunk))
        with ThreadPoolExecutor(max(1, threads)) as ex:
            ahead: deque[Future[tuple[slice, np.ndarray, np.ndarray]]] = deque()
            while starts or ahead:
                while starts and len(ahead) <= threads:
                    ahead.append(ex.submit(one, starts.popleft()))
                yield ahead.popleft().result()

    return chunks()
