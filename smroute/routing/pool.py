"""Worker pool for route computation, with inputs and outputs in shared memory.

The parent lays every input array and the output table out in one shared
memory segment (a file under ``/dev/shm``, mapped by every process); tasks
carry only the segment's path, a small manifest of ``name -> (offset, shape,
dtype)`` and a range of switch ids.  Workers map the segment once per job,
compute their switch rows with :func:`smroute.routing.dmodc.route_block` (or
Nmodc's kernel) and write them into the output table in place: no big array
is pickled.  For Nmodc a second round of tasks then rechooses the leaves'
redirects by load, each on whole groups of sibling leaves, which share no
upper switch (:mod:`smroute.routing.balance`).

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
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import get_context

import numpy as np

from smroute.routing import balance, down_offsets, even_cables, nominal, slot_tables
from smroute.routing.dmodc import Destinations, RouteContext, route_block, route_context
from smroute.routing.slot_tables import AlternativesMemo
from smroute.routing.topology import SwitchGraph

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
#: per job (segment path), what a worker's tasks of that job share: the
#: routing context, the lost slots' alternatives and Nmodc's redirect dividers
_job_cache: dict[str, tuple[RouteContext, AlternativesMemo, np.ndarray | None]] = {}


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


GRAPH_FIELDS = ("sw_guid", "rank", "grp_first", "grp_count", "grp_switch", "grp_remote",
                "grp_port_first", "grp_port_count", "grp_ports")
DEST_FIELDS = ("lid", "nid", "target", "local_port", "is_switch", "owner")


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


def _balance_task(path: str, manifest: Manifest, leaves: np.ndarray) -> int:
    """Worker entry: Nmodc's redirects by load of whole sibling groups of
    ``leaves`` in the shared table (:mod:`smroute.routing.balance`)."""
    a = _attach(path, manifest)
    _balance_leaves(a, leaves)
    return len(leaves)


def _balance_leaves(a: dict[str, np.ndarray], leaves: np.ndarray | None) -> None:
    dest = Destinations(**{f: a["d_" + f] for f in DEST_FIELDS})
    balance.balance_redirects(_graph_from(a), a["c"], a["pi"], dest, a["table"],
                              nominal.unpacked_slots(a["n_slots"]), leaves)


def _offsets(g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
             table: np.ndarray, slots: nominal.NominalSlots | None) -> None:
    """Nmodc's down-cable offsets of foreign residues, on the whole table
    once the redirects by load are in (:mod:`smroute.routing.down_offsets`)."""
    assert slots is not None
    down_offsets.offset_foreign(g, c, pi, dest, table, slots)


def _route_task(path: str, manifest: Manifest, switches: np.ndarray) -> int:
    """Worker entry: compute the table rows of ``switches`` (ascending switch
    ids) in the shared segment."""
    a = _attach(path, manifest)
    _route_rows(a, switches, path)
    return len(switches)


def _route_rows(a: dict[str, np.ndarray], switches: np.ndarray, job: str = "",
                block: int = 64) -> None:
    g = _graph_from(a)
    dest = Destinations(**{f: a["d_" + f] for f in DEST_FIELDS})
    table = a["table"]
    slots = a.get("n_slots")  # Nmodc's nominal slots, else Dmodc
    state = _job_cache.get(job) if job else None  # job: the segment's path, in a worker
    if state is None:
        rd = nominal.redirect_dividers(g, a["pi"]) if slots is not None else None
        state = route_context(a["c"], dest), AlternativesMemo(), rd
        if job:
            _job_cache[job] = state
    ctx, memo, rd = state
    for i in range(0, len(switches), block):
        sw = switches[i:i + block]
        run = int(sw[-1]) - int(sw[0]) + 1 == len(sw)  # a range: routed in place
        out = table[int(sw[0]):int(sw[-1]) + 1] if run else np.empty((len(sw), table.shape[1]),
                                                                       dtype=table.dtype)
        if slots is None:
            route_block(g, a["c"], a["pi"], dest, sw, out, ctx)
        else:
            nominal.route_block(g, a["c"], a["pi"], dest, sw, out, slots, ctx, memo=memo,
                                capacity=a["n_share"], redirect=rd)
        if not run:
            table[sw] = out


def _group_parts(g: SwitchGraph, slots: nominal.NominalSlots, k: int) -> list[np.ndarray]:
    """The nominal leaves in at most ``k`` parts of whole sibling groups
    (:func:`smroute.routing.balance.sibling_groups`), about even in leaves."""
    leaves = balance.nominal_leaves(g, slots)
    if not len(leaves):
        return []
    label = balance.sibling_groups(g, slots, leaves)
    order = np.argsort(label, kind="stable")
    start = np.r_[True, label[order][1:] != label[order][:-1]]
    # cut between groups, at the group boundary nearest each k-th of the leaves
    bounds = np.flatnonzero(start)
    at = np.searchsorted(bounds, np.linspace(0, len(leaves), k + 1)[1:-1])
    cuts = np.unique(bounds[np.minimum(at, len(bounds) - 1)])
    return [p for p in np.split(leaves[order], cuts) if len(p)]


def _graph_from(a: dict[str, np.ndarray]) -> SwitchGraph:
    empty = np.zeros(0, dtype=np.int64)
    return SwitchGraph(
        sw_node=empty, sw_guid=a["g_sw_guid"], sw_lid=empty, n_up=empty,
        grp_switch=a["g_grp_switch"],
        ep_row=empty, ep_switch=empty, ep_switch_port=empty, ep_lid=empty, ep_lmc=empty,
        is_leaf=empty.astype(bool), component=empty,
        rank=a["g_rank"], grp_first=a["g_grp_first"], grp_count=a["g_grp_count"],
        grp_remote=a["g_grp_remote"], grp_port_first=a["g_grp_port_first"],
        grp_port_count=a["g_grp_port_count"], grp_ports=a["g_grp_ports"],
    )


class RoutePool:
    """A pool of ``workers`` processes computing route tables.

    Use as a context manager or call :meth:`close`.  ``workers=None`` means one
    per CPU core.
    """

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._ex: ProcessPoolExecutor | None = None
        if self.workers > 1:
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

    def route(
        self, g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
        slots: nominal.NominalSlots | None = None,
    ) -> np.ndarray:
        """Route table of every switch, shape ``(S, max_lid + 1)`` uint8: Dmodc's,
        or Nmodc's with its nominal ``slots`` (the kernel, then its redirects by
        load, :func:`smroute.routing.balance.balance_redirects`, per group of
        sibling leaves, then its down-cable offsets,
        :mod:`smroute.routing.down_offsets`, and its even cables,
        :mod:`smroute.routing.even_cables`)."""
        n = g.n_switches
        width = dest.max_lid + 1
        packed = nominal.packed_slots(slots) if slots is not None else None
        share = slot_tables.may_share(g, c, dest) if slots is not None else None
        rebalance = slots is not None and g.mode == "tree"
        with self._shared(g, c, pi, dest, (n, width), packed, share) as shared:
            if self._ex is None or n < 2 * self.workers:
                _route_rows(shared.arrays, np.arange(n))
                if rebalance:
                    _balance_leaves(shared.arrays, None)
            else:
                self._rows_parts(shared, np.arange(n))
                if rebalance:
                    assert slots is not None
                    self._balance_parts(shared, g, slots)
            if rebalance:
                _offsets(g, c, pi, dest, shared.arrays["table"], slots)
            if share is not None:
                even_cables.deal_up_cables(g, dest, shared.arrays["table"], share)
            return shared.arrays["table"]

    def rework(self, g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
               ports: np.ndarray, slots: nominal.NominalSlots, share: np.ndarray,
               rows: np.ndarray) -> None:
        """For an incremental reroute of a heavily damaged tree
        (:mod:`smroute.service.reroute`), in the workers: Nmodc's rows of the
        switches ``rows`` (ascending) of ``ports`` ``(S, W)`` uint8 computed in
        full, then its redirects by load over the whole table
        (:func:`smroute.routing.balance.balance_redirects`), in place;
        ``share`` ``(S,)`` bool the switches that may share by capacity.  In
        this process without workers."""
        with self._shared(g, c, pi, dest, ports.shape, nominal.packed_slots(slots),
                          share) as shared:
            shared.arrays["table"][:] = ports
            if self._ex is None:
                _route_rows(shared.arrays, rows)
                _balance_leaves(shared.arrays, None)
            else:
                self._rows_parts(shared, rows)
                self._balance_parts(shared, g, slots)
            ports[:] = shared.arrays["table"]

    def _rows_parts(self, shared: SharedArrays, rows: np.ndarray) -> None:
        """The table rows of ``rows`` in the workers, a few parts each."""
        assert self._ex is not None
        futs = [self._ex.submit(_route_task, shared.path, shared.manifest, part)
                for part in np.array_split(rows, 4 * self.workers) if len(part)]
        for f in futs:
            f.result()

    def _balance_parts(self, shared: SharedArrays, g: SwitchGraph,
                       slots: nominal.NominalSlots) -> None:
        """The redirects by load of the shared table, a part of whole sibling
        groups per worker."""
        assert self._ex is not None
        futs = [self._ex.submit(_balance_task, shared.path, shared.manifest, part)
                for part in _group_parts(g, slots, self.workers)]
        for f in futs:
            f.result()

    @staticmethod
    @contextmanager
    def _shared(
        g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
        table_shape: tuple[int, int], slots: np.ndarray | None = None,
        share: np.ndarray | None = None,
    ) -> Iterator[SharedArrays]:
        inputs = {"c": c, "pi": pi}
        if slots is not None and share is not None:
            inputs["n_slots"], inputs["n_share"] = slots, share
        inputs.update({"g_" + f: getattr(g, f) for f in GRAPH_FIELDS})
        inputs.update({"d_" + f: getattr(dest, f) for f in DEST_FIELDS})
        shared = SharedArrays.create(inputs, {"table": (table_shape, "u1")})
        try:
            yield shared
        finally:
            shared.unlink()
