"""The daemon's single job sequencer; fault events and down sets themselves
are :mod:`smroute.fabric.faults` (re-exported here for the daemon).

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
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from smroute.fabric.faults import (
    EVENT_KINDS,
    DownSet,
    FaultEvent,
    FaultEventError,
    FaultKind,
    apply_events,
    degraded_fabric,
    port_links,
)

__all__ = [
    "EVENT_KINDS",
    "FaultEventError",
    "FaultKind",
    "DownSet",
    "FaultEvent",
    "FaultJob",
    "CallJob",
    "Sequencer",
    "apply_events",
    "degraded_fabric",
    "port_links",
]

# ---------------------------------------------------------------- sequencer


@dataclass(eq=False)
class FaultJob:
    """Events of one ApplyFaults call; ``future`` gets the handler's result;
    ``journaled``: the events are on disk already (a restart's catch-up)."""

    events: tuple[FaultEvent, ...]
    dry_run: bool = False
    received: float = 0.0
    journaled: bool = False
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

    def on_thread(self) -> bool:
        """True when called from the sequencer thread itself (a job running)."""
        return threading.current_thread() is self._thread

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
