"""Worker pool for route computation, with inputs and outputs in shared memory.

The pool knows no engine: it lays out the arrays an engine prepared
(:meth:`~smroute.routing.api.Engine.arrays`) and the output table in one
shared memory segment (a file under ``/dev/shm``, mapped by every process);
tasks carry only the segment's path, a small manifest of ``name -> (offset,
shape, dtype)``, the engine (by reference) and a range of switch ids.
Workers map the segment once per job, run the engine's kernel on their
switch rows and write them into the output table in place: no big array is
pickled.  Then the engine's passes (:meth:`~smroute.routing.api.Engine.passes`)
run over the whole table in order, those with parts one part per task.

The pool (``spawn`` processes, so it is safe to create from a threaded
daemon) lives as long as its owner; ``workers=1`` computes in the calling
process through the same code path.  Workers keep the memory a job freed
for the next one (:func:`_keep_heap`).
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from smroute.routing.api import Arrays, Engine, Pass, Prepared

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = ["RoutePool", "SharedArrays"]

Manifest = dict[str, tuple[int, tuple[int, ...], str]]
_ALIGN = 64


def _shm_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else (
        tempfile.gettempdir()
    )


@dataclass
class SharedArrays:
    """Named arrays in one memory-mapped file.

    ``arrays`` are views into the mapping; the mapping stays valid for as long
    as any view is referenced, even after :meth:`unlink` removed the file.
    """

    path: str
    manifest: Manifest
    arrays: dict[str, np.ndarray]

    @classmethod
    def create(
        cls, inputs: dict[str, np.ndarray], outputs: dict[str, tuple[tuple[int, ...], str]]
    ) -> SharedArrays:
        """Copy ``inputs`` into a new segment and reserve zeroed ``outputs``."""
        manifest: Manifest = {}
        off = 0
        specs = [(k, v.shape, v.dtype.str) for k, v in inputs.items()]
        specs += [(k, shape, np.dtype(dt).str) for k, (shape, dt) in outputs.items()]
        for name, shape, dt in specs:
            manifest[name] = (off, tuple(int(s) for s in shape), dt)
            size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
            off += (size + _ALIGN - 1) // _ALIGN * _ALIGN
        fd, path = tempfile.mkstemp(prefix="smroute-", suffix=".shm", dir=_shm_dir())
        try:
            os.ftruncate(fd, max(off, 1))
            mm = mmap.mmap(fd, max(off, 1))
        finally:
            os.close(fd)
        arrays = _views(mm, manifest)
        for k, v in inputs.items():
            arrays[k][...] = v
        return cls(path, manifest, arrays)

    def unlink(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def _views(mm: mmap.mmap, manifest: Manifest) -> dict[str, np.ndarray]:
    out = {}
    for name, (off, shape, dt) in manifest.items():
        count = int(np.prod(shape, dtype=np.int64))
        out[name] = np.frombuffer(mm, dtype=np.dtype(dt), count=count, offset=off).reshape(shape)
    return out


_worker_cache: dict[str, dict[str, np.ndarray]] = {}
#: per job (segment path), what a worker's kernel calls of that job share
#: (the engine's per-job cache)
_job_cache: dict[str, dict[str, Any]] = {}
#: rows a kernel call routes at once
ROW_BLOCK = 64


def _attach(path: str, manifest: Manifest) -> dict[str, np.ndarray]:
    arrays = _worker_cache.get(path)
    if arrays is None:
        _worker_cache.clear()  # one job at a time: drop the previous mapping
        _job_cache.clear()
        with open(path, "r+b") as fh:
            mm = mmap.mmap(fh.fileno(), 0)
        arrays = _views(mm, manifest)
        _worker_cache[path] = arrays
    return arrays


#: glibc's ``mallopt`` parameters, its largest mmap threshold (64-bit) and
#: the free heap top a worker keeps.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _MMAP_MAX, _TRIM = -1, -3, 32 << 20, 64 << 20


def _keep_heap() -> None:
    """Worker start: keep freed memory in the heap for the next job.  glibc
    hands an allocation above its mmap threshold (128 KiB, raised to the
    largest block freed) back to the system when freed, so a job's
    temporary arrays (several MiB each) page-fault anew on every run.  A
    fixed threshold of 32 MiB keeps them in the heap, and the heap's free
    top is trimmed beyond 64 MiB: Dmodc on the 11,664-host tree 0.36 to
    0.25 s, with 1,000 links removed 0.60 to 0.38 s (``bench/route_bench.py``);
    the two workers then hold 170-310 MiB between jobs instead of 120-150.
    Nothing changes where the C library has no ``mallopt`` (not glibc)."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX)
        libc.mallopt(_M_TRIM_THRESHOLD, _TRIM)
    except (OSError, AttributeError):
        pass


def _kernel_task(path: str, manifest: Manifest, engine: Engine, switches: np.ndarray) -> int:
    """Worker entry: ``engine``'s table rows of ``switches`` (ascending
    switch ids) in the shared segment."""
    a = _attach(path, manifest)
    kernel_rows(engine, a, switches, _job_cache.setdefault(path, {}))
    return len(switches)


def _pass_task(path: str, manifest: Manifest,
               run: Callable[[Arrays, np.ndarray | None], None], part: np.ndarray) -> int:
    """Worker entry: one part of a pass over the shared table."""
    run(_attach(path, manifest), part)
    return len(part)


def kernel_rows(engine: Engine, a: Arrays, switches: np.ndarray, cache: dict[str, Any],
                block: int = ROW_BLOCK) -> None:
    """``engine``'s rows of ``switches`` (ascending) into ``a["table"]``,
    ``block`` rows a kernel call (a run of consecutive switches is routed
    in place)."""
    table = a["table"]
    for i in range(0, len(switches), block):
        sw = switches[i:i + block]
        run = int(sw[-1]) - int(sw[0]) + 1 == len(sw)
        out = table[int(sw[0]):int(sw[-1]) + 1] if run else np.empty((len(sw), table.shape[1]),
                                                                       dtype=table.dtype)
        engine.kernel(a, sw, out, cache)
        if not run:
            table[sw] = out


def kernel_parts(engine: Engine, a: Arrays, rows: np.ndarray, workers: int) -> list[np.ndarray]:
    """``rows`` (ascending) in the parts the kernel tasks route: the
    engine's ``kernel_parts(a, rows, workers)`` where it has one (rows of
    unequal cost: each part ascending, parts in the order to run), else
    ``4 * workers`` even parts (one for one worker)."""
    own = getattr(engine, "kernel_parts", None)
    if own is not None:
        return [p for p in own(a, rows, workers) if len(p)]
    if workers == 1:
        return [rows]
    return [p for p in np.array_split(rows, 4 * workers) if len(p)]


class RoutePool:
    """A pool of ``workers`` processes computing route tables.

    Use as a context manager or call :meth:`close`.  ``workers=None`` means one
    per CPU core.
    """

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._ex: ProcessPoolExecutor | None = None
        if self.workers > 1:  # imported here: an in-process route needs neither
            from concurrent.futures import ProcessPoolExecutor
            from multiprocessing import get_context

            self._ex = ProcessPoolExecutor(self.workers, mp_context=get_context("spawn"),
                                           initializer=_keep_heap)
            # start the processes now, not on the first (timed) job
            list(self._ex.map(int, range(self.workers)))

    def __enter__(self) -> RoutePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (empty when computing in-process)."""
        if self._ex is None:
            return []
        return [p.pid for p in getattr(self._ex, "_processes", {}).values() if p.pid]

    def close(self) -> None:
        if self._ex is not None:
            self._ex.shutdown(cancel_futures=True)
            self._ex = None

    def run(self, engine: Engine, prep: Prepared, *, rows: np.ndarray | None = None,
            table: np.ndarray | None = None, passes: Sequence[Pass] | None = None
            ) -> np.ndarray:
        """``engine``'s table of ``prep``, ``(S, max_lid + 1)`` uint8: its
        kernel on every switch, then its passes in order.  With ``table``
        ``(S, W)``: its rows ``rows`` (ascending switch ids, default all)
        routed anew, then ``passes`` (default the engine's), in place in
        ``table`` (returned)."""
        n = prep.graph.n_switches
        shape = table.shape if table is not None else (n, prep.dest.max_lid + 1)
        rows = np.arange(n) if rows is None else rows
        steps = engine.passes(prep) if passes is None else passes
        with self._shared(engine.arrays(prep), shape) as shared:
            a = shared.arrays
            if table is not None:
                a["table"][:] = table
            # few rows (or switches): in this process, cheaper than the trip
            if self._ex is None or len(rows) < 2 * self.workers:
                cache: dict[str, Any] = {}
                for part in kernel_parts(engine, a, rows, 1):
                    kernel_rows(engine, a, part, cache)
            else:
                self._parts(_kernel_task, shared, engine,
                            kernel_parts(engine, a, rows, self.workers))
            here = self._ex is None or shape[0] < 2 * self.workers
            for step in steps:
                if here or step.parts is None:
                    step.run(a, None)
                else:
                    self._parts(_pass_task, shared, step.run, step.parts(self.workers))
            if table is None:
                return a["table"]
            table[:] = a["table"]
            return table

    def _parts(self, task: Callable[..., int], shared: SharedArrays, what: object,
               parts: Sequence[np.ndarray]) -> None:
        """``task(path, manifest, what, part)`` for every part, in the workers."""
        assert self._ex is not None
        futs = [self._ex.submit(task, shared.path, shared.manifest, what, part)
                for part in parts]
        for f in futs:
            f.result()

    @staticmethod
    @contextmanager
    def _shared(inputs: Arrays, table_shape: tuple[int, ...]) -> Iterator[SharedArrays]:
        shared = SharedArrays.create(inputs, {"table": (table_shape, "u1")})
        try:
            yield shared
        finally:
            shared.unlink()
