"""Fault events, the set of down items, and the single job sequencer.

Pure part
---------
A fault event names a link (node GUID + port, either end), a switch or a CA
going down or coming back up.  :func:`apply_events` folds events into a
:class:`DownSet` (frozensets of canonical items) after checking them against
the loaded base fabric; :func:`degraded_fabric` is the base fabric minus the
down items (:meth:`Fabric.with_removed`).  An "up" event for an item that is
not down is a no-op; bringing a switch up restores its links except those
that are themselves down.

Sequencer
---------
:class:`Sequencer` runs every state-changing job (load, route, fault batch,
dry run) on one thread, in arrival order.  Consecutive fault jobs are
coalesced: when a fault job reaches the head of the queue the thread waits
``coalesce_s`` seconds for more, then takes every fault job queued behind it
and hands them to the handler as one batch.  Jobs submitted while a batch is
being rerouted wait in the queue for the next round; none is dropped.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from smroute.errors import InputError
from smroute.fabric.model import Fabric, NodeType

__all__ = [
    "EVENT_KINDS",
    "DownSet",
    "FaultEvent",
    "FaultJob",
    "CallJob",
    "Sequencer",
    "apply_events",
    "degraded_fabric",
    "port_links",
]

EVENT_KINDS = ("link_down", "link_up", "switch_down", "switch_up", "ca_down", "ca_up")


class FaultEventError(InputError):
    """A fault event does not match the loaded fabric."""


@dataclass(frozen=True)
class FaultEvent:
    """kind: one of :data:`EVENT_KINDS`; guid: node GUID; port: port number on
    that node (links only, else 0)."""

    kind: str
    guid: int
    port: int = 0


@dataclass(frozen=True)
class DownSet:
    """Items currently down.  links: canonical ``(guid, port)`` of the link's
    first end (``link_a``) in the base fabric; switches / cas: node GUIDs."""

    links: frozenset[tuple[int, int]] = frozenset()
    switches: frozenset[int] = frozenset()
    cas: frozenset[int] = frozenset()

    @property
    def counts(self) -> tuple[int, int, int]:
        return len(self.links), len(self.switches), len(self.cas)

    def items(self) -> frozenset[tuple[str, int, int]]:
        return frozenset(
            [("link", g, p) for g, p in self.links]
            + [("switch", g, 0) for g in self.switches]
            + [("ca", g, 0) for g in self.cas]
        )

    @property
    def empty(self) -> bool:
        return not (self.links or self.switches or self.cas)


def port_links(fabric: Fabric) -> np.ndarray:
    """Link index of every port row, ``(P,)`` int64, -1 for unlinked ports."""
    out = fabric._cache.get("port_links")
    if isinstance(out, np.ndarray):
        return out
    arr = np.full(fabric.n_ports, -1, dtype=np.int64)
    idx = np.arange(fabric.n_links, dtype=np.int64)
    arr[fabric.link_a] = idx
    arr[fabric.link_b] = idx
    arr.setflags(write=False)
    fabric._cache["port_links"] = arr
    return arr


def _node(base: Fabric, ev: FaultEvent, where: str) -> int:
    try:
        return base.node_by_guid(ev.guid)
    except KeyError:
        raise FaultEventError(f"{where}: no node with GUID {ev.guid:#018x} in the loaded "
                              "fabric") from None


def apply_events(base: Fabric, down: DownSet, events: Sequence[FaultEvent],
                 source: str = "events") -> DownSet:
    """Fold ``events`` (in order) into ``down``; raises :class:`FaultEventError`
    naming the event (``source[i]``) if one does not match ``base``."""
    links = set(down.links)
    switches = set(down.switches)
    cas = set(down.cas)
    pl = port_links(base)
    for i, ev in enumerate(events):
        where = f"{source}[{i}] ({ev.kind} {ev.guid:#018x}" + (
            f" port {ev.port})" if ev.kind.startswith("link") else ")")
        if ev.kind not in EVENT_KINDS:
            raise FaultEventError(f"{where}: unknown kind; expected one of {EVENT_KINDS}")
        n = _node(base, ev, where)
        kind = NodeType(int(base.node_type[n]))
        if ev.kind.startswith("link"):
            if not 1 <= ev.port <= int(base.num_ports[n]):
                raise FaultEventError(f"{where}: port must be 1..{int(base.num_ports[n])}")
            li = int(pl[base.port_row(n, ev.port)])
            if li < 0:
                raise FaultEventError(f"{where}: that port has no link in the loaded fabric")
            a = int(base.link_a[li])
            key = (int(base.node_guid[base.port_node[a]]), int(base.port_num[a]))
            (links.add if ev.kind == "link_down" else links.discard)(key)
        elif ev.kind.startswith("switch"):
            if kind != NodeType.SWITCH:
                raise FaultEventError(f"{where}: node is a {kind.name}, not a switch")
            (switches.add if ev.kind == "switch_down" else switches.discard)(ev.guid)
        else:
            if kind != NodeType.CA:
                raise FaultEventError(f"{where}: node is a {kind.name}, not a CA")
            (cas.add if ev.kind == "ca_down" else cas.discard)(ev.guid)
    return DownSet(frozenset(links), frozenset(switches), frozenset(cas))


def degraded_fabric(base: Fabric, down: DownSet) -> Fabric:
    """``base`` without the down items (``base`` itself if nothing is down)."""
    if down.empty:
        return base
    nodes = base.nodes_by_guid(np.array(sorted(down.switches | down.cas), dtype=np.uint64))
    links: list[int] = []
    if down.links:
        pl = port_links(base)
        keys = sorted(down.links)
        rows = base.port_rows(base.nodes_by_guid(np.array([k[0] for k in keys], np.uint64)),
                              np.array([k[1] for k in keys], dtype=np.int64))
        links = pl[rows].tolist()
    return base.with_removed(nodes=nodes[nodes >= 0], links=np.asarray(links, dtype=np.int64))


# ---------------------------------------------------------------- sequencer


@dataclass(eq=False)
class FaultJob:
    """Events of one ApplyFaults call; ``future`` gets the handler's result."""

    events: tuple[FaultEvent, ...]
    dry_run: bool = False
    received: float = 0.0
    future: Future[Any] = field(default_factory=Future)


@dataclass(eq=False)
class CallJob:
    """Any other state-changing job: ``fn()`` runs on the sequencer thread."""

    fn: Callable[[], Any]
    future: Future[Any] = field(default_factory=Future)


class Sequencer:
    """One thread running jobs in order, coalescing fault bursts (module doc).

    ``on_batch(jobs)`` is called with a list of non-dry-run :class:`FaultJob`
    and must resolve each job's future; ``on_dry_run(job)`` for dry runs;
    ``sleep`` is injected for tests.
    """

    def __init__(
        self,
        on_batch: Callable[[list[FaultJob]], None],
        on_dry_run: Callable[[FaultJob], None],
        *,
        coalesce_s: float = 0.02,
        clock: Callable[[], float] = time.monotonic,
        name: str = "smroute-sequencer",
    ) -> None:
        self._on_batch = on_batch
        self._on_dry_run = on_dry_run
        self.coalesce_s = coalesce_s
        self._clock = clock
        self._q: deque[FaultJob | CallJob] = deque()
        self._cond = threading.Condition()
        self._stop = False
        self.batches = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: FaultJob | CallJob) -> Future[Any]:
        """Queue ``job``; its future (failed at once if the sequencer is closing)."""
        with self._cond:
            if self._stop:
                job.future.set_exception(RuntimeError("the daemon is shutting down"))
                return job.future
            self._q.append(job)
            self._cond.notify_all()
        return job.future

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn()`` on the sequencer thread, in order with the other jobs."""
        return self.submit(CallJob(fn))

    def pending(self) -> int:
        """Jobs waiting in the queue."""
        with self._cond:
            return len(self._q)

    def close(self, timeout: float = 30.0) -> None:
        """Finish the queued jobs, then stop the thread."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def _is_batchable(self, j: FaultJob | CallJob) -> bool:
        return isinstance(j, FaultJob) and not j.dry_run

    def _next(self) -> list[FaultJob] | FaultJob | CallJob | None:
        with self._cond:
            while not self._q and not self._stop:
                self._cond.wait()
            if not self._q:
                return None
            head = self._q[0]
            if not self._is_batchable(head):
                return self._q.popleft()
            # wait a short window for the rest of a burst
            deadline = self._clock() + self.coalesce_s
            while not self._stop:
                left = deadline - self._clock()
                if left <= 0:
                    break
                self._cond.wait(left)
            batch: list[FaultJob] = []
            while self._q and self._is_batchable(self._q[0]):
                j = self._q.popleft()
                assert isinstance(j, FaultJob)
                batch.append(j)
            return batch

    def _run(self) -> None:
        while True:
            item = self._next()
            if item is None:
                return
            try:
                if isinstance(item, list):
                    self.batches += 1
                    self._on_batch(item)
                elif isinstance(item, FaultJob):
                    self._on_dry_run(item)
                else:
                    if item.future.set_running_or_notify_cancel():
                        item.future.set_result(item.fn())
            except BaseException as err:  # noqa: BLE001 - reported to the callers
                for j in item if isinstance(item, list) else [item]:
                    if not j.future.done():
                        j.future.set_exception(err)
