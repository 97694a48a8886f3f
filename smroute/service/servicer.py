"""The routing daemon: state and operations (:class:`RoutingCore`) and the gRPC
servicer that exposes them (:class:`SmrouteServicer`, service ``smroute.v1.Smroute``).

State: the loaded base fabric, the desired :class:`~smroute.service.faults.DownSet`,
the current routing settings (algorithm, LMC), an
:class:`~smroute.service.epochs.EpochStore`, one
:class:`~smroute.routing.pool.RoutePool` living as long as the daemon, and a
:class:`~smroute.service.faults.Sequencer` that runs every state change on one
thread (so loads, routes and fault batches are totally ordered).  A
background thread validates committed epochs, newest first; superseded ones
are marked skipped.

Errors: every expected failure raises :class:`ServiceError` with a gRPC status
code and a precise message; the servicer's wrapper turns it into the RPC's
status.  Anything else becomes INTERNAL (logged with its traceback) and the
daemon keeps serving.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any, Protocol, TypeVar

import grpc
import numpy as np

from smroute.errors import InputError, RoutingError, SmrouteError
from smroute.fabric.ibnetdiscover import parse_topology, read_topology
from smroute.fabric.model import Fabric, NodeType
from smroute.fabric.roles import GuidOverrides
from smroute.routing.engine import (
    ALGORITHMS,
    RoutingResult,
    route,
    unrouted_connected,
    validate_result,
)
from smroute.routing.pool import RoutePool
from smroute.routing.validate import Validation
from smroute.service._gen import smroute_pb2 as pb
from smroute.service._gen import smroute_pb2_grpc as pb_grpc
from smroute.service.config import LimitsConfig
from smroute.service.epochs import Epoch, EpochStore, FaultRecord, own_tables, padded_blocks
from smroute.service.faults import (
    DownSet,
    FaultEvent,
    FaultEventError,
    FaultJob,
    Sequencer,
    apply_events,
    degraded_fabric,
)
from smroute.service.reroute import Reroute, reroute
from smroute.tables.diff import TableDiff, diff_tables
from smroute.tables.lft import BLOCK, ForwardingTables

__all__ = ["SERVICE_NAME", "RoutingCore", "ServiceError", "SmrouteServicer"]

SERVICE_NAME = "smroute.v1.Smroute"
_KIND_NAMES = {
    pb.FaultEvent.LINK_DOWN: "link_down", pb.FaultEvent.LINK_UP: "link_up",
    pb.FaultEvent.SWITCH_DOWN: "switch_down", pb.FaultEvent.SWITCH_UP: "switch_up",
    pb.FaultEvent.CA_DOWN: "ca_down", pb.FaultEvent.CA_UP: "ca_up",
}
_KIND_ENUM = {v: k for k, v in _KIND_NAMES.items()}
#: Changed entries a Diff / dry run lists at most, whatever the request asks.
MAX_LISTED_ENTRIES = 100_000
#: Longest live discovery (ibnetdiscover) a LoadFabric request may ask for, seconds.
MAX_DISCOVER_TIMEOUT_S = 3600.0


class ServiceError(Exception):
    """An expected RPC failure: ``code`` (grpc.StatusCode) and ``message``."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Metrics(Protocol):
    """What the core reports (implemented by smroute.service.metrics.ServiceMetrics)."""

    def observe_route(self, seconds: float, kind: str) -> None: ...
    def epoch_committed(self, epoch_id: int, table_bytes: int, mode: str = "tree",
                        turn_lids: int = 0) -> None: ...
    def faults_received(self, n: int, kind: str) -> None: ...
    def request(self, method: str, code: str) -> None: ...
    def stream_opened(self, method: str) -> None: ...
    def stream_closed(self, method: str) -> None: ...
    def reroute_failed(self, reason: str) -> None: ...


LogFn = Callable[..., None]


def _no_log(level: str, event: str, **fields: Any) -> None:
    return None


@dataclass(frozen=True)
class FaultOutcome:
    """What a fault job resolves to: the epoch serving after it, the diff against
    the epoch it replaced (``None`` if nothing changed), how many events the
    batch had, whether a new epoch was committed."""

    epoch: Epoch
    diff: TableDiff | None
    coalesced: int
    committed: bool


T = TypeVar("T")


class RoutingCore:
    """The daemon's state machine (no gRPC here; see module doc).

    ``clock`` (monotonic seconds) times phases; ``wallclock`` stamps commits.
    """

    def __init__(
        self,
        *,
        workers: int = 2,
        algorithm: str = "dmodc",
        lmc: int = 0,
        epoch_history: int = 8,
        coalesce_s: float = 0.02,
        limits: LimitsConfig | None = None,
        fabric_dirs: Sequence[str | os.PathLike[str]] = (),
        log: LogFn = _no_log,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.perf_counter,
        wallclock: Callable[[], float] = time.time,
        validate_epochs: bool = True,
        incremental: bool = True,
        overrides: GuidOverrides | None = None,
    ) -> None:
        if algorithm not in ALGORITHMS:
            raise InputError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
        self.algorithm = algorithm
        self.lmc = lmc
        #: Operator overrides of the fabric's roles (OpenSM guid files); the
        #: daemon replaces them on SIGHUP; the next route uses them.
        self.overrides = overrides
        self.limits = limits or LimitsConfig()
        #: Directories LoadFabric(path=...) may read from (empty: none); the
        #: daemon replaces the tuple on SIGHUP.
        self.fabric_dirs: tuple[str, ...] = tuple(os.fspath(d) for d in fabric_dirs)
        self.log = log
        self.metrics = metrics
        self.clock = clock
        self.wallclock = wallclock
        self.store = EpochStore(epoch_history)
        self.pool = RoutePool(workers)
        self.base: Fabric | None = None
        self._epoch_base: Fabric | None = None
        self.incremental = incremental
        self.base_source = ""
        self.down = DownSet()
        self.shutting_down = threading.Event()
        self._streams = 0
        self._watchers = 0
        self._count_lock = threading.Lock()
        self._analyze_lock = threading.Lock()
        self._analyzer: ProcessPoolExecutor | None = None
        self._aux_lock = threading.Lock()
        self._validate_epochs = validate_epochs
        self._val_cond = threading.Condition()
        self._val_next: Epoch | None = None
        self._val_thread = threading.Thread(target=self._validator, name="smroute-validate",
                                            daemon=True)
        self._val_thread.start()
        self.seq = Sequencer(self._run_batch, self._run_dry, coalesce_s=coalesce_s)

    # ------------------------------------------------------------ helpers
    def _metric(self, name: str, *args: Any) -> None:
        if self.metrics is not None:
            try:
                getattr(self.metrics, name)(*args)
            except Exception as err:  # noqa: BLE001 - metrics must never break serving
                self.log("warning", "metrics_error", metric=name, error=str(err))

    def _wait(self, fut: Future[T]) -> T:
        try:
            return fut.result()
        except ServiceError:
            raise
        except (RoutingError, FaultEventError) as err:
            code = (grpc.StatusCode.INVALID_ARGUMENT if isinstance(err, InputError)
                    else grpc.StatusCode.FAILED_PRECONDITION)
            raise ServiceError(code, str(err)) from None
        except RuntimeError as err:
            if self.shutting_down.is_set():
                raise ServiceError(grpc.StatusCode.UNAVAILABLE, str(err)) from None
            raise

    def close(self) -> None:
        """Stop the sequencer (after its queued jobs), the validator and the pool."""
        self.shutting_down.set()
        self.store.close()
        self.seq.close()
        with self._val_cond:
            self._val_next = None
            self._val_cond.notify_all()
        self._val_thread.join(10)
        if self._analyzer is not None:
            self._analyzer.shutdown(cancel_futures=True)
        self.pool.close()

    # ------------------------------------------------------------ load
    def parse_fabric_text(self, text: str, source: str) -> Fabric:
        """Parse ibnetdiscover text (bounded by ``max_topology_bytes``)."""
        n = len(text.encode("utf-8", errors="replace")) if len(text) * 4 > \
            self.limits.max_topology_bytes else len(text)
        if n > self.limits.max_topology_bytes:
            raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                               f"{source}: topology text is {n} bytes; the limit "
                               f"(limits.max_topology_bytes) is {self.limits.max_topology_bytes}")
        if not text.strip():
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"{source}: empty topology text; expected ibnetdiscover output")
        try:
            return parse_topology(text.splitlines(), source)
        except InputError as err:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, str(err)) from None

    def read_fabric_path(self, path: str) -> Fabric:
        """Parse the operator's configured topology file (no directory check, no
        size bound: it comes from the config, not from a request; requests go
        through :meth:`read_request_path`).  NOT_FOUND if it cannot be read,
        INVALID_ARGUMENT naming the line if it does not parse."""
        if not path:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, "path is empty")
        try:
            return read_topology(path)
        except InputError as err:
            code = (grpc.StatusCode.NOT_FOUND if isinstance(err.__cause__, OSError)
                    else grpc.StatusCode.INVALID_ARGUMENT)
            raise ServiceError(code, str(err)) from None

    def read_request_path(self, path: str) -> Fabric:
        """Parse the topology file a ``LoadFabric(path=...)`` request names.

        Only regular files whose real path (symlinks and ``..`` resolved) lies
        inside one of :attr:`fabric_dirs` are opened; anything else is
        PERMISSION_DENIED before the file is touched, so a client cannot read
        (or probe the existence of) other files through parse errors.  The
        file is opened without following a final symlink, and the opened
        descriptor's path is checked again (a directory swapped between the
        check and the open is caught).  Bounded by ``max_topology_bytes``.
        """
        dirs = self.fabric_dirs
        real = check_fabric_path(path, dirs)
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(real, flags)
        except OSError as err:
            if err.errno == errno.ELOOP:  # the checked file was replaced by a symlink
                raise ServiceError(grpc.StatusCode.PERMISSION_DENIED,
                                   f"LoadFabric path {path} is a symlink that cannot be "
                                   "resolved inside fabric_dirs") from None
            raise ServiceError(grpc.StatusCode.NOT_FOUND,
                               f"{path}: cannot read: {err.strerror or err}") from None
        limit = self.limits.max_topology_bytes
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ServiceError(grpc.StatusCode.PERMISSION_DENIED,
                                   f"LoadFabric path {path} is not a regular file; expected "
                                   "an ibnetdiscover file inside fabric_dirs")
            opened = _fd_path(fd)
            if opened is not None and _inside_dirs(
                    opened, [os.path.realpath(d) for d in dirs]) is None:
                raise ServiceError(grpc.StatusCode.PERMISSION_DENIED,
                                   f"LoadFabric path {path} changed while it was opened and "
                                   f"is now outside fabric_dirs ({', '.join(dirs)})")
            if st.st_size > limit:
                raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                   f"{path}: {st.st_size} bytes; the limit "
                                   f"(limits.max_topology_bytes) is {limit}")
            fh = os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        with fh:
            try:
                data = fh.read(limit + 1)  # bounded even if the file grew after fstat
            except OSError as err:
                raise ServiceError(grpc.StatusCode.NOT_FOUND,
                                   f"{path}: cannot read: {err.strerror or err}") from None
        return self.parse_fabric_text(data.decode("utf-8", errors="replace"), path)

    def discover_fabric(self, ca: str, port: int, timeout: float) -> Fabric:
        """Live discovery through smroute.discovery, parsed like a file.
        ``timeout`` (seconds, 0 = 120) must be in 0..MAX_DISCOVER_TIMEOUT_S: a
        request cannot hold an RPC thread on ibnetdiscover for longer."""
        if not 0 <= timeout <= MAX_DISCOVER_TIMEOUT_S:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"live timeout_s {timeout:g}: expected 0 (default 120) .. "
                               f"{MAX_DISCOVER_TIMEOUT_S:g} seconds")
        try:
            from smroute.discovery.discover import DiscoveryError, discover_topology_lines
        except ImportError:
            raise ServiceError(grpc.StatusCode.UNIMPLEMENTED,
                               "live discovery is not available in this build "
                               "(smroute.discovery.discover is missing)") from None
        try:
            lines = discover_topology_lines(ca=ca or None, port=port or None,
                                            timeout=timeout or 120.0)
        except DiscoveryError as err:
            raise ServiceError(grpc.StatusCode.FAILED_PRECONDITION, str(err)) from None
        try:
            return parse_topology(lines, "live discovery")
        except InputError as err:
            raise ServiceError(grpc.StatusCode.FAILED_PRECONDITION, str(err)) from None

    def load_fabric(self, fabric: Fabric, source: str) -> Fabric:
        """Make ``fabric`` the base fabric (clears down items); does not route."""
        def do() -> Fabric:
            self.base = fabric
            self.base_source = source
            self.down = DownSet()
            self.log("info", "fabric_loaded", source=source, hash=fabric.content_hash,
                     switches=len(fabric.switches), cas=len(fabric.cas), links=fabric.n_links)
            return fabric
        return self._wait(self.seq.call(do))

    # ------------------------------------------------------------ route
    def _route(self, fabric: Fabric, algorithm: str, lmc: int) -> RoutingResult:
        res = route(fabric, algorithm=algorithm, lmc=lmc, pool=self.pool, clock=self.clock,
                    overrides=self.overrides)
        return own_tables(res)

    def route(self, algorithm: str = "", lmc: int | None = None) -> Epoch:
        """Route the base fabric minus down items and commit (cause ``route``)."""
        alg = algorithm or self.algorithm
        if alg not in ALGORITHMS:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"unknown algorithm {alg!r}; expected one of {ALGORITHMS}")
        use_lmc = self.lmc if lmc is None else lmc
        if not 0 <= use_lmc <= 7:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, f"lmc must be 0..7, got {lmc}")

        def do() -> Epoch:
            base = self._need_base()
            t0 = self.clock()
            fabric = degraded_fabric(base, self.down)
            t1 = self.clock()
            try:
                res = self._route(fabric, alg, use_lmc)
            except RoutingError as err:
                self._metric("reroute_failed", "route")
                raise ServiceError(grpc.StatusCode.FAILED_PRECONDITION,
                                   f"cannot route {self.base_source}: {err}") from None
            t2 = self.clock()
            parent = self.store.current
            diff = diff_tables(parent.tables, res.tables) if parent is not None else None
            t3 = self.clock()
            kept = self.algorithm, self.lmc
            self.algorithm, self.lmc = alg, use_lmc
            timings = {"degrade": t1 - t0, **res.timings, "diff": t3 - t2}
            try:
                ep = self._commit("route", fabric, base, res, timings, (), diff)
            except ServiceError:
                self.algorithm, self.lmc = kept  # a refused route changes nothing
                raise
            self._metric("observe_route", t3 - t0, "route")
            return ep
        return self._wait(self.seq.call(do))

    def _reroute(self, cur: Epoch, base: Fabric, fabric: Fabric) -> Reroute:
        """Route ``fabric`` (``base`` minus down items) knowing the serving epoch:
        incrementally when ``cur`` routed the same loaded fabric (see
        smroute.service.reroute), else in full."""
        same = base is self._epoch_base
        return reroute(cur.result, fabric, lmc=self.lmc, algorithm=self.algorithm,
                       pool=self.pool, clock=self.clock,
                       incremental=same and self.incremental)

    def _need_base(self) -> Fabric:
        if self.base is None:
            raise ServiceError(grpc.StatusCode.FAILED_PRECONDITION,
                               "no fabric loaded: call LoadFabric first (or set fabric: in "
                               "the config)")
        return self.base

    def _commit(self, cause: str, fabric: Fabric, base: Fabric, res: RoutingResult,
                timings: dict[str, float], faults: tuple[FaultRecord, ...],
                diff: TableDiff | None, t_event: float | None = None) -> Epoch:
        """Commit; ``t_event``: clock time of the first event (timings then get
        ``event_to_commit``: everything up to the reference swap, which is O(1))."""
        # Dmodc routes every pair that cables join by construction (the cheap
        # first-hop check guards it); other algorithms are walked in full now
        gaps = unrouted_connected(res)
        if not gaps and res.algorithm != "dmodc":
            gaps = validate_result(res, max_failures=0).ca_pairs_unroutable
        if gaps:
            self._metric("reroute_failed", "unrouted_pairs")
            serving = self.store.current.id if self.store.current is not None else 0
            self.log("error", "epoch_refused", cause=cause, unrouted_ca_pairs=gaps,
                     serving=serving, mode=res.mode)
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"refused to commit: the {res.algorithm} tables leave {gaps} CA pairs that "
                f"cables join unrouted; " + (f"epoch {serving} keeps serving" if serving
                                              else "no epoch is served"))
        if t_event is not None:
            timings["event_to_commit"] = self.clock() - t_event
        self._epoch_base = base
        ep = self.store.commit(
            cause=cause, fabric=fabric, base_hash=base.content_hash, result=res,
            algorithm=res.algorithm, lmc=self.lmc, timings=timings, faults=faults,
            down=self.down.counts, committed_at=self.wallclock(), diff=diff,
            down_items=self.down.items(),
        )
        self._metric("epoch_committed", ep.id, ep.tables.nbytes(), res.mode, res.turn_lids)
        self.log("info", "epoch_committed", epoch=ep.id, cause=cause, mode=res.mode,
                 fabric_hash=fabric.content_hash, faults=len(faults),
                 diff=diff.summary() if diff is not None else "",
                 seconds={k: round(v, 4) for k, v in timings.items()})
        with self._val_cond:
            self._val_next = ep
            self._val_cond.notify_all()
        return ep

    # ------------------------------------------------------------ validation
    #: Validation walks of more (switch, LID) pairs than this wait for a quiet
    #: period (no commit for :attr:`VALIDATE_QUIET_S`) so they do not slow a burst of
    #: reroutes, and run in the helper process (off this process's GIL); the
    #: thread also runs at a lower OS priority.
    VALIDATE_BIG_PAIRS = 2_000_000
    VALIDATE_QUIET_S = 1.0

    def _validator(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        while True:
            with self._val_cond:
                while self._val_next is None and not self.shutting_down.is_set():
                    self._val_cond.wait()
                ep, self._val_next = self._val_next, None
                while ep is not None and not self.shutting_down.is_set() and (
                        ep.tables.n_switches * len(ep.result.dest.lid) > self.VALIDATE_BIG_PAIRS):
                    self._val_cond.wait(self.VALIDATE_QUIET_S)
                    if self._val_next is None:
                        break  # quiet: validate ep
                    ep, self._val_next = self._val_next, None
            if ep is None or self.shutting_down.is_set():
                return
            # an older epoch still pending when a newer one arrived is skipped
            for eid in self.store.ids():
                if eid < ep.id and self.store.validation(eid) == "pending":
                    self.store.set_validation(eid, f"skipped: superseded by epoch {ep.id}")
            if not self._validate_epochs:
                self.store.set_validation(ep.id, "skipped: validation disabled")
                continue
            try:
                r = ep.result
                job = functools.partial(validate_result, r, max_failures=10)
                if r.tables.n_switches * len(r.dest.lid) > self.VALIDATE_BIG_PAIRS:
                    # large: in the helper process, off this process's GIL
                    v = self._aux().submit(job).result()
                else:
                    v = job()
                self.store.set_validation(ep.id, v)
                self.log("info" if v.ok else "warning", "epoch_validated", epoch=ep.id,
                         summary=v.summary())
            except Exception as err:  # noqa: BLE001 - never kill the thread
                self.store.set_validation(ep.id, f"skipped: validation failed: {err}")
                self.log("error", "validation_error", epoch=ep.id, error=str(err))

    # ------------------------------------------------------------ faults
    def check_events(self, events: Sequence[FaultEvent]) -> None:
        """Reject a bad batch now (INVALID_ARGUMENT / RESOURCE_EXHAUSTED)."""
        if not events:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                               "events is empty; expected at least one fault event")
        if len(events) > self.limits.max_fault_events:
            raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                               f"{len(events)} events; the limit (limits.max_fault_events) is "
                               f"{self.limits.max_fault_events}")
        base = self._need_base()
        if self.store.current is None:
            raise ServiceError(grpc.StatusCode.FAILED_PRECONDITION,
                               "no epoch committed yet: call Route first")
        try:
            apply_events(base, DownSet(), events)
        except FaultEventError as err:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, str(err)) from None

    def apply_faults(self, events: Sequence[FaultEvent], *, dry_run: bool = False
                     ) -> FaultOutcome:
        """Queue the events; returns once the epoch including them is committed
        (or, ``dry_run``, once the would-be tables and diff are computed)."""
        self.check_events(events)
        kinds: dict[str, int] = {}
        for e in events:
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
        for k, n in kinds.items():
            self._metric("faults_received", n, k)
        job = FaultJob(tuple(events), dry_run=dry_run, received=self.clock())
        return self._wait(self.seq.submit(job))  # type: ignore[no-any-return]

    def _run_batch(self, jobs: list[FaultJob]) -> None:
        t0 = min(j.received for j in jobs)
        t_start = self.clock()
        cpu0 = time.thread_time()
        cur = self.store.current
        if self.base is None or cur is None:
            err = ServiceError(grpc.StatusCode.FAILED_PRECONDITION,
                               "no routed fabric: call LoadFabric and Route first")
            for j in jobs:
                j.future.set_exception(err)
            return
        base = self.base
        down = self.down
        ok: list[FaultJob] = []
        for j in jobs:
            try:
                down = apply_events(base, down, j.events)
                ok.append(j)
            except FaultEventError as e:
                j.future.set_exception(ServiceError(grpc.StatusCode.INVALID_ARGUMENT, str(e)))
        if not ok:
            return
        n_events = sum(len(j.events) for j in ok)
        self.down = down  # the desired state, even if rerouting it fails below
        records = tuple(FaultRecord(e.kind, e.guid, e.port) for j in ok for e in j.events)
        if down.items() == cur.down_items and cur.base_hash == base.content_hash:
            for j in ok:
                j.future.set_result(FaultOutcome(cur, None, n_events, False))
            return
        fabric = degraded_fabric(base, down)
        t1 = self.clock()
        try:
            rr = self._reroute(cur, base, fabric)
        except RoutingError as err:
            msg = (f"reroute after {n_events} fault events failed; epoch {cur.id} keeps "
                   f"serving: {err}")
            self._metric("reroute_failed", "routing_error")
            self.log("error", "reroute_failed", events=n_events, serving=cur.id, error=str(err))
            for j in ok:
                j.future.set_exception(ServiceError(grpc.StatusCode.FAILED_PRECONDITION, msg))
            return
        res, diff = rr.result, rr.diff
        timings = {"queued": t_start - t0, "degrade": t1 - t_start, **rr.timings}
        # CPU seconds of this thread (the incremental path runs here only): the
        # figure that does not depend on how busy the machine is
        timings["cpu"] = time.thread_time() - cpu0
        self.log("debug", "rerouted", incremental=rr.incremental, why_full=rr.reason or None,
                 rows=rr.rows, lids=rr.lids)
        try:
            ep = self._commit("faults", fabric, base, res, timings, records, diff, t_event=t0)
        except ServiceError as err:
            for j in ok:
                j.future.set_exception(err)
            return
        self._metric("observe_route", self.clock() - t_start, "reroute")
        for j in ok:
            j.future.set_result(FaultOutcome(ep, diff, n_events, True))

    def _run_dry(self, job: FaultJob) -> None:
        cur = self.store.current
        base = self._need_base()
        if cur is None:
            raise ServiceError(grpc.StatusCode.FAILED_PRECONDITION,
                               "no epoch committed yet: call Route first")
        down = apply_events(base, self.down, job.events)
        fabric = degraded_fabric(base, down)
        try:
            rr = self._reroute(cur, base, fabric)
        except RoutingError as err:
            raise ServiceError(grpc.StatusCode.FAILED_PRECONDITION,
                               f"dry run: the fabric after these events cannot be routed: {err}"
                               ) from None
        res, diff, timings = rr.result, rr.diff, rr.timings
        pseudo = Epoch(
            id=0, parent_id=cur.id, cause="dry_run", fabric=fabric,
            base_hash=base.content_hash, result=res, algorithm=res.algorithm, lmc=self.lmc,
            timings=timings, faults=tuple(FaultRecord(e.kind, e.guid, e.port)
                                          for e in job.events),
            down=down.counts, committed_at=0.0, diff=diff, down_items=down.items(),
        )
        job.future.set_result(FaultOutcome(pseudo, diff, len(job.events), False))

    # ------------------------------------------------------------ analysis
    def _aux(self) -> ProcessPoolExecutor:
        """The helper process for analyses and large validation walks (spawned
        on first use, kept for the daemon's life; jobs run one at a time)."""
        with self._aux_lock:
            if self._analyzer is None:
                self._analyzer = ProcessPoolExecutor(1, mp_context=get_context("spawn"))
            return self._analyzer

    def analyze(self, ep: Epoch, order: str, seed: int, samples: int) -> dict[str, Any]:
        """Congestion metrics of ``ep`` (see :func:`analyze_tables`), computed in
        a separate process (made on first use, kept for the daemon's life) so a
        long analysis does not hold this process's GIL against reroutes; one
        analysis at a time."""
        with self._analyze_lock:
            r = ep.result
            fut = self._aux().submit(analyze_tables, ep.fabric, ep.tables,
                                     r.graph.ep_row, r.nids, order, seed, samples)
            try:
                return fut.result()  # type: ignore[no-any-return]
            except BrokenProcessPool:
                with self._aux_lock:
                    self._analyzer = None
                raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                   "the analysis process died (out of memory?); try a "
                                   "smaller rp_samples or raise the daemon's memory") from None

    # ------------------------------------------------------------ streams
    def acquire_stream(self, kind: str) -> None:
        """Count an open stream (``"tables"`` or ``"watch"``); RESOURCE_EXHAUSTED
        beyond the configured limit."""
        with self._count_lock:
            if kind == "watch":
                if self._watchers >= self.limits.max_watchers:
                    raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                       f"{self._watchers} Watch streams open; the limit "
                                       f"(limits.max_watchers) is {self.limits.max_watchers}")
                self._watchers += 1
            else:
                if self._streams >= self.limits.max_streams:
                    raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                       f"{self._streams} GetTables streams open; the limit "
                                       f"(limits.max_streams) is {self.limits.max_streams}")
                self._streams += 1

    def release_stream(self, kind: str) -> None:
        """Undo :meth:`acquire_stream` of the same ``kind``."""
        with self._count_lock:
            if kind == "watch":
                self._watchers -= 1
            else:
                self._streams -= 1

    def epoch(self, epoch_id: int) -> Epoch:
        """Epoch ``epoch_id`` (0 = current); NOT_FOUND if not kept."""
        try:
            return self.store.get(epoch_id)
        except KeyError as err:
            code = (grpc.StatusCode.FAILED_PRECONDITION if self.store.current is None
                    else grpc.StatusCode.NOT_FOUND)
            raise ServiceError(code, str(err.args[0])) from None


def analyze_tables(fabric: Fabric, tables: ForwardingTables, ep_row: np.ndarray,
                   nids: np.ndarray, order: str, seed: int, samples: int) -> dict[str, Any]:
    """Gliksberg's congestion risk (A2A, RP median over ``samples`` random
    permutations, SP max) and the SP hot-spot degree of ``tables`` on
    ``fabric``, participants in Dmodc's topological order (``ep_row`` /
    ``nids`` of the routing) or a random one; ``seed`` seeds the generator.
    Returns the AnalyzeResponse fields (runs in the analysis process)."""
    from smroute.analysis.congestion import congestion_risk
    from smroute.analysis.paths import pair_paths, routing_view
    from smroute.analysis.patterns import random_order, topological_order_from

    rng = np.random.default_rng(seed)
    view = routing_view(fabric, tables)
    paths = pair_paths(view)
    o = (topological_order_from(view, ep_row, nids) if order == "topological"
         else random_order(view, rng))
    risk = congestion_risk(view, paths, o, rng, samples=samples)
    return dict(
        end_ports=view.n_endports, a2a_risk=int(risk.a2a.value),
        rp_risk_median=risk.rp.risk_median, sp_risk_max=risk.sp.risk_max,
        sp_hsd_avg=risk.sp.hsd_avg, sp_hsd_max=risk.sp.hsd_max,
        unroutable_a2a=risk.unroutable["A2A"], unroutable_rp=risk.unroutable["RP"],
        unroutable_sp=risk.unroutable["SP"],
    )


# =================================================================== proto conversion


def _validation_msg(v: Validation | str) -> pb.Validation:
    if isinstance(v, str):
        if v == "pending":
            return pb.Validation(state=pb.Validation.PENDING, summary="validation pending")
        return pb.Validation(state=pb.Validation.SKIPPED, summary=v)
    return pb.Validation(
        state=pb.Validation.DONE, ok=v.ok, pairs=v.pairs, delivered=v.delivered,
        dead_ends=v.dead_ends, loops=v.loops, updown_violations=v.updown_violations,
        non_minimal=v.non_minimal, ca_pairs_unroutable=v.ca_pairs_unroutable,
        summary=v.summary(), failures=[str(f) for f in v.failures],
    )


def diff_summary_msg(d: TableDiff | None) -> pb.DiffSummary:
    """The DiffSummary message of ``d`` (empty for ``None``)."""
    if d is None:
        return pb.DiffSummary()
    return pb.DiffSummary(
        identical=d.identical, switches_compared=d.switches_compared,
        switches_changed=d.switches_changed, entries_changed=d.entries_changed,
        lids_changed=d.lids_changed, blocks_changed=d.blocks_changed,
        switches_only_a=len(d.only_old_guid), switches_only_b=len(d.only_new_guid),
    )


def _changes_msg(d: TableDiff, max_entries: int) -> tuple[list[pb.SwitchChange], bool]:
    limit = min(max_entries, MAX_LISTED_ENTRIES)
    listed = 0
    out = []
    for sd in d.switches():
        k = min(len(sd.lids), max(0, limit - listed))
        listed += k
        out.append(pb.SwitchChange(
            guid=sd.guid, desc=sd.desc, old_lid=sd.old_lid, new_lid=sd.new_lid,
            lids_changed=len(sd.lids), blocks=sd.blocks.tolist(),
            changes=[pb.EntryChange(lid=lid, old_port=o, new_port=n) for lid, o, n in zip(
                sd.lids[:k].tolist(), sd.old_ports[:k].tolist(), sd.new_ports[:k].tolist(),
                strict=True)],
        ))
    return out, listed < d.entries_changed


def epoch_msg(ep: Epoch, validation: Validation | str | None = None) -> pb.Epoch:
    """The wire form of an epoch (``validation``: the store's result, if known)."""
    t = ep.tables
    return pb.Epoch(
        id=ep.id, parent_id=ep.parent_id, cause=ep.cause, fabric_hash=ep.fabric_hash,
        base_fabric_hash=ep.base_hash, algorithm=ep.algorithm, lmc=ep.lmc,
        switches=t.n_switches, max_lid=t.max_lid, tables_sha256=ep.tables_sha256,
        committed_unix_s=ep.committed_at, timings=dict(ep.timings),
        faults=[pb.FaultEvent(kind=_KIND_ENUM[f.kind], node_guid=f.guid, port=f.port)
                for f in ep.faults],
        down_links=ep.down[0], down_switches=ep.down[1], down_cas=ep.down[2],
        validation=_validation_msg(validation if validation is not None else "skipped"),
        diff_from_parent=diff_summary_msg(ep.diff),
        routing_mode=ep.result.mode, routing_mode_reason=ep.result.mode_reason,
        turn_lids=ep.result.turn_lids,
    )


def fabric_summary_msg(f: Fabric, source: str) -> pb.FabricSummary:
    """The FabricSummary message of ``f`` loaded from ``source``."""
    return pb.FabricSummary(
        content_hash=f.content_hash, switches=len(f.switches), cas=len(f.cas),
        routers=int((f.node_type == NodeType.ROUTER).sum()), links=f.n_links,
        max_lid=max(len(f.lid_to_port) - 1, 0), source=source,
    )


def events_from_msgs(msgs: Sequence[pb.FaultEvent]) -> list[FaultEvent]:
    """FaultEvent messages -> :class:`FaultEvent` (INVALID_ARGUMENT naming ``events[i]``)."""
    out = []
    for i, m in enumerate(msgs):
        kind = _KIND_NAMES.get(m.kind)
        if kind is None:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"events[{i}]: kind is unset or unknown ({m.kind}); expected "
                               "LINK_DOWN, LINK_UP, SWITCH_DOWN, SWITCH_UP, CA_DOWN or CA_UP")
        if kind.startswith("link") and m.port == 0:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"events[{i}] ({kind} {m.node_guid:#018x}): port is 0; "
                               "expected the port number of the link on that node")
        out.append(FaultEvent(kind, int(m.node_guid), int(m.port)))
    return out


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


@functools.lru_cache(maxsize=1024)
def _block_prefix(index: int) -> bytes:
    """Wire bytes of ``SwitchTable.blocks`` (field 4) entry ``index`` up to its
    64 port bytes: tag, length, ``index`` (field 1), ``ports`` tag and length."""
    body = b"\x08" + _varint(index) + b"\x12" + _varint(BLOCK)
    return b"\x22" + _varint(len(body) + BLOCK) + body


def _encode_full(ports: np.ndarray) -> np.ndarray:
    """Every block of every row of ``ports`` (``(R, W)`` uint8) in wire form,
    ``(R, L)`` uint8: row ``r`` is what :func:`_encode_blocks` gives for all of
    its blocks, laid out with numpy for all rows at once."""
    padded = padded_blocks(ports)  # (R, nb, 64)
    r, nb, _ = padded.shape
    prefixes = [_block_prefix(i) for i in range(nb)]
    plen = np.array([len(p) for p in prefixes], dtype=np.int64)
    off = np.concatenate([[0], np.cumsum(plen + BLOCK)])
    pre_pos = np.repeat(off[:-1], plen) + (np.arange(int(plen.sum()))
                                           - np.repeat(np.cumsum(plen) - plen, plen))
    data_pos = (np.repeat(off[:-1] + plen, BLOCK) + np.tile(np.arange(BLOCK), nb))
    out = np.empty((r, int(off[-1])), dtype=np.uint8)
    out[:, pre_pos] = np.frombuffer(b"".join(prefixes), dtype=np.uint8)[None, :]
    out[:, data_pos] = padded.reshape(r, nb * BLOCK)
    return out


def _encode_blocks(row: bytes, idx: Iterable[int]) -> bytes:
    """The ``blocks`` of a SwitchTable in protobuf wire form (parsed by
    ``MergeFromString``: building 200+ LftBlock objects per switch in Python was
    the main cost of a GetTables stream)."""
    return b"".join(_block_prefix(i) + row[i * BLOCK:(i + 1) * BLOCK] for i in idx)


def table_messages(ep: Epoch, guids: Sequence[int], since: Epoch | None
                   ) -> tuple[pb.TablesHeader, Iterator[pb.SwitchTable]]:
    """Header and per-switch messages of ``ep`` (only the blocks changed since
    ``since`` if given), restricted to ``guids`` (empty: all)."""
    t = ep.tables
    want: set[int] | None = None
    if guids:
        want = set(int(g) for g in guids)
        have = set(int(g) for g in t.switch_guid.tolist())
        if since is not None:
            have |= set(int(g) for g in since.tables.switch_guid.tolist())
        missing = sorted(want - have)
        if missing:
            raise ServiceError(grpc.StatusCode.NOT_FOUND,
                               f"switch {missing[0]:#018x} is not in epoch {ep.id}"
                               + (f" ({len(missing)} unknown GUIDs)" if len(missing) > 1 else ""))
    order = ep.guid_order
    rows_all = order if want is None else np.array(
        [r for r in order.tolist() if int(t.switch_guid[r]) in want], dtype=np.int64)
    removed: list[tuple[int, str]] = []
    if since is None:
        blocks_of: dict[int, np.ndarray | None] = {int(r): None for r in rows_all.tolist()}
    else:
        d = ep.diff if (ep.diff is not None and ep.parent_id == since.id) else diff_tables(
            since.tables, t)
        blocks_of = {}
        row_in_new = {int(g): i for i, g in enumerate(t.switch_guid.tolist())}
        sel = set(rows_all.tolist())
        for ci in d.changed_switch_indices().tolist():
            r = row_in_new[int(d.common_guid[ci])]
            if r in sel:
                lo, hi = np.searchsorted(d.block_switch, [ci, ci + 1])
                blocks_of[r] = d.block[lo:hi]
        for g in d.only_new_guid.tolist():
            r = row_in_new[int(g)]
            if r in sel:
                blocks_of[r] = None
        for g, desc in zip(d.only_old_guid.tolist(), d.only_old_desc, strict=True):
            if want is None or int(g) in want:
                removed.append((int(g), desc))
        blocks_of = {r: blocks_of[r] for r in sorted(blocks_of, key=lambda r: int(
            t.switch_guid[r]))}
    header = pb.TablesHeader(epoch=ep.id, since_epoch=since.id if since else 0,
                             max_lid=t.max_lid, switches=len(blocks_of) + len(removed),
                             tables_sha256=ep.tables_sha256)

    def gen() -> Iterator[pb.SwitchTable]:
        rows = list(blocks_of)
        for c0 in range(0, len(rows), 256):  # encode full rows 256 switches at a time
            chunk = rows[c0:c0 + 256]
            full = [r for r in chunk if blocks_of[r] is None]
            enc = _encode_full(t.ports[full]) if full else None
            at = {r: i for i, r in enumerate(full)}
            for r in chunk:
                msg = pb.SwitchTable(guid=int(t.switch_guid[r]), lid=int(t.switch_lid[r]),
                                     desc=t.switch_desc[r])
                blocks = blocks_of[r]
                if blocks is None:
                    assert enc is not None
                    msg.MergeFromString(enc[at[r]].tobytes())
                else:
                    msg.MergeFromString(_encode_blocks(
                        padded_blocks(t.ports[r:r + 1]).tobytes(), blocks.tolist()))
                yield msg
        for g, desc in removed:
            yield pb.SwitchTable(guid=g, desc=desc, removed=True)

    return header, gen()


# =================================================================== gRPC servicer

def _inside_dirs(real: str, real_dirs: Iterable[str]) -> str | None:
    """The first of ``real_dirs`` (real paths) containing ``real``, or ``None``."""
    for d in real_dirs:
        try:
            if os.path.commonpath([real, d]) == d:
                return d
        except ValueError:  # mixed absolute / relative: never inside
            continue
    return None


def _fd_path(fd: int) -> str | None:
    """The path of the file open as ``fd`` (Linux ``/proc/self/fd``), or ``None``."""
    try:
        p = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return p if p.startswith("/") else None


def check_fabric_path(path: str, fabric_dirs: Sequence[str]) -> str:
    """The real path of ``path`` if a LoadFabric request may read it.

    ``path`` must be absolute; its real path (:func:`os.path.realpath`:
    symlinks and ``..`` resolved) must lie inside the real path of one of
    ``fabric_dirs``.  Raises :class:`ServiceError`: INVALID_ARGUMENT for an
    empty or relative path, PERMISSION_DENIED when server-side paths are
    disabled (no ``fabric_dirs``) or the path is outside them.  Whether the
    file exists is not revealed for paths outside the directories.
    """
    if not path:
        raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, "path is empty")
    if not fabric_dirs:
        raise ServiceError(grpc.StatusCode.PERMISSION_DENIED,
                           f"LoadFabric path {path}: server-side paths are disabled; set "
                           "fabric_dirs in the config (or smroute serve --fabric-dir DIR), or "
                           "send the topology as topology_text")
    if "\0" in path or not os.path.isabs(path):
        raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                           f"LoadFabric path {path!r}: expected an absolute path on the server")
    real_dirs = [os.path.realpath(d) for d in fabric_dirs]
    real = os.path.realpath(path)
    if _inside_dirs(real, real_dirs) is not None:
        return real
    listed = ", ".join(fabric_dirs)
    if _inside_dirs(os.path.normpath(path), [os.path.normpath(d) for d in fabric_dirs] + real_dirs):
        # written inside a directory, but a symlink there leads out of it
        raise ServiceError(grpc.StatusCode.PERMISSION_DENIED,
                           f"LoadFabric path {path} resolves to {real}, which is outside "
                           f"fabric_dirs ({listed}); symlinks out of fabric_dirs are not "
                           "followed")
    raise ServiceError(grpc.StatusCode.PERMISSION_DENIED,
                       f"LoadFabric path {path} is outside fabric_dirs ({listed}); put the file "
                       "in one of them (or add its directory to fabric_dirs), or send the "
                       "topology as topology_text")


F = TypeVar("F", bound=Callable[..., Any])


def _status_name(code: grpc.StatusCode) -> str:
    return str(code.name)


class SmrouteServicer(pb_grpc.SmrouteServicer):
    """gRPC adapter over a :class:`RoutingCore` (see module doc for errors)."""

    def __init__(self, core: RoutingCore) -> None:
        self.core = core

    # -------------------------------------------------------- plumbing
    def _fail(self, method: str, context: grpc.ServicerContext, err: BaseException) -> None:
        core = self.core
        if isinstance(err, ServiceError):
            code, msg = err.code, err.message
        elif isinstance(err, InputError):
            code, msg = grpc.StatusCode.INVALID_ARGUMENT, str(err)
        elif isinstance(err, SmrouteError):
            code, msg = grpc.StatusCode.FAILED_PRECONDITION, str(err)
        else:
            code, msg = grpc.StatusCode.INTERNAL, f"internal error: {type(err).__name__}: {err}"
            core.log("error", "internal_error", method=method, error=msg,
                     traceback=traceback.format_exc())
        core._metric("request", method, _status_name(code))
        core.log("info", "request_failed", method=method, code=_status_name(code), message=msg)
        context.abort(code, msg)

    @staticmethod
    def _unary(method: str) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            @functools.wraps(fn)
            def wrapper(self: SmrouteServicer, request: Any, context: grpc.ServicerContext
                        ) -> Any:
                try:
                    out = fn(self, request, context)
                except Exception as err:  # noqa: BLE001 - mapped to a status
                    self._fail(method, context, err)
                    raise AssertionError("unreachable") from None
                self.core._metric("request", method, "OK")
                return out
            return wrapper  # type: ignore[return-value]
        return deco

    @staticmethod
    def _stream(method: str, kind: str) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            @functools.wraps(fn)
            def wrapper(self: SmrouteServicer, request: Any, context: grpc.ServicerContext
                        ) -> Iterator[Any]:
                core = self.core
                try:
                    core.acquire_stream(kind)
                except ServiceError as err:
                    self._fail(method, context, err)
                core._metric("stream_opened", method)
                try:
                    yield from fn(self, request, context)
                except GeneratorExit:
                    raise
                except Exception as err:  # noqa: BLE001 - mapped to a status
                    self._fail(method, context, err)
                else:
                    core._metric("request", method, "OK")
                finally:
                    core.release_stream(kind)
                    core._metric("stream_closed", method)
            return wrapper  # type: ignore[return-value]
        return deco

    # -------------------------------------------------------- RPCs
    @_unary("LoadFabric")
    def LoadFabric(self, request: pb.LoadFabricRequest, context: grpc.ServicerContext
                   ) -> pb.LoadFabricResponse:
        core = self.core
        which = request.WhichOneof("source")
        if which == "topology_text":
            source = request.source_name or "<topology_text>"
            fabric = core.parse_fabric_text(request.topology_text, source)
        elif which == "path":
            source = request.path
            fabric = core.read_request_path(request.path)
        elif which == "live":
            source = "live" + (f":{request.live.ca}" if request.live.ca else "")
            fabric = core.discover_fabric(request.live.ca, request.live.port,
                                          request.live.timeout_s)
        else:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                               "no source: expected one of topology_text, path, live")
        core.load_fabric(fabric, source)
        return pb.LoadFabricResponse(fabric=fabric_summary_msg(fabric, source))

    @_unary("Route")
    def Route(self, request: pb.RouteRequest, context: grpc.ServicerContext
              ) -> pb.RouteResponse:
        core = self.core
        lmc = request.lmc if request.HasField("lmc") else None
        ep = core.route(request.algorithm, lmc)
        v = (core.store.wait_validation(ep.id, 600.0) if request.wait_validation
             else core.store.validation(ep.id))
        return pb.RouteResponse(epoch=epoch_msg(ep, v))

    @_unary("GetEpoch")
    def GetEpoch(self, request: pb.GetEpochRequest, context: grpc.ServicerContext) -> pb.Epoch:
        ep = self.core.epoch(request.epoch)
        return epoch_msg(ep, self.core.store.validation(ep.id))

    @_stream("GetTables", "tables")
    def GetTables(self, request: pb.GetTablesRequest, context: grpc.ServicerContext
                  ) -> Iterator[pb.GetTablesResponse]:
        core = self.core
        ep = core.epoch(request.epoch)
        since = None
        if request.since_epoch:
            try:
                since = core.store.get(request.since_epoch)
            except KeyError as err:
                raise ServiceError(grpc.StatusCode.NOT_FOUND,
                                   f"since_epoch: {err.args[0]}; fetch the full tables") from None
        header, items = table_messages(ep, list(request.switch_guids), since)
        yield pb.GetTablesResponse(header=header)
        for item in items:
            if not context.is_active():
                return
            yield pb.GetTablesResponse(switch=item)

    @_unary("ApplyFaults")
    def ApplyFaults(self, request: pb.ApplyFaultsRequest, context: grpc.ServicerContext
                    ) -> pb.ApplyFaultsResponse:
        core = self.core
        events = events_from_msgs(request.events)
        out = core.apply_faults(events, dry_run=request.dry_run)
        v = None if request.dry_run else core.store.validation(out.epoch.id)
        resp = pb.ApplyFaultsResponse(
            committed=out.committed, epoch=epoch_msg(out.epoch, v),
            diff=diff_summary_msg(out.diff), coalesced_events=out.coalesced,
        )
        if request.dry_run and request.max_entries and out.diff is not None:
            changes, truncated = _changes_msg(out.diff, request.max_entries)
            resp.changes.extend(changes)
            resp.truncated = truncated
        return resp

    @_unary("Diff")
    def Diff(self, request: pb.DiffRequest, context: grpc.ServicerContext) -> pb.DiffResponse:
        core = self.core
        a = core.epoch(request.epoch_a)
        b = core.epoch(request.epoch_b)
        d = b.diff if (b.diff is not None and b.parent_id == a.id) else diff_tables(
            a.tables, b.tables)
        changes, truncated = _changes_msg(d, request.max_entries)
        if not request.max_entries:
            for c in changes:
                del c.changes[:]
            truncated = d.entries_changed > 0
        return pb.DiffResponse(epoch_a=a.id, epoch_b=b.id, summary=diff_summary_msg(d),
                               switches=changes, truncated=truncated)

    @_stream("Watch", "watch")
    def Watch(self, request: pb.WatchRequest, context: grpc.ServicerContext
              ) -> Iterator[pb.Epoch]:
        core = self.core
        cur = core.store.current
        last = 0
        if cur is not None:
            yield epoch_msg(cur, core.store.validation(cur.id))
            last = cur.id
        while context.is_active() and not core.shutting_down.is_set():
            for ep in core.store.wait_newer(last, 0.5):
                yield epoch_msg(ep, core.store.validation(ep.id))
                last = ep.id

    @_unary("Analyze")
    def Analyze(self, request: pb.AnalyzeRequest, context: grpc.ServicerContext
                ) -> pb.AnalyzeResponse:
        core = self.core
        ep = core.epoch(request.epoch)
        order_name = request.order or "topological"
        if order_name not in ("topological", "random"):
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"order {order_name!r}: expected 'topological' or 'random'")
        samples = request.rp_samples or 100
        if samples > 1000:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"rp_samples {samples}: expected at most 1000")
        n_hosts = len(ep.fabric.cas)
        if n_hosts > core.limits.analyze_max_hosts:
            raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                               f"epoch {ep.id} has {n_hosts} CAs; Analyze is limited to "
                               f"{core.limits.analyze_max_hosts} (limits.analyze_max_hosts)")
        t0 = time.perf_counter()
        m = core.analyze(ep, order_name, int(request.seed), samples)
        return pb.AnalyzeResponse(epoch=ep.id, seconds=time.perf_counter() - t0,
                                  order=order_name, **m)

    @_unary("SelectLids")
    def SelectLids(self, request: pb.SelectLidsRequest, context: grpc.ServicerContext
                   ) -> pb.SelectLidsResponse:
        from smroute.service.lids_rpc import select_lids_response

        return select_lids_response(self.core.epoch(request.epoch), request)

