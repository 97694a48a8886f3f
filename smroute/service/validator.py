"""The daemon's background validation of committed epochs (:class:`EpochValidator`).

One thread walks the newest committed epoch (:func:`~smroute.routing.engine.
validate_result`); an older one still pending when a newer arrives is marked
skipped.  Walks of more (switch, LID) pairs than :attr:`EpochValidator.big_pairs`
wait for a quiet period (no commit for :attr:`EpochValidator.quiet_s`) so they do
not slow a burst of reroutes, unless someone waits for that epoch (a
``RouteSubnet`` answer: :meth:`EpochValidator.soon`), and run in the daemon's
helper process (off its GIL), which starts as soon as the thread takes such an
epoch.  The thread runs at a lower OS priority.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from smroute.routing.engine import validate_result
from smroute.service.epochs import Epoch, EpochStore

__all__ = ["EpochValidator"]


class EpochValidator:
    """Validates epochs handed to :meth:`later` in a background thread, into
    ``store``; ``aux`` gives the helper process (made on first call),
    ``log(level, event, **fields)``; ``enabled`` False marks them skipped;
    ``stopping`` set: no walk starts any more (:meth:`close` ends the thread)."""

    def __init__(self, store: EpochStore, aux: Callable[[], ProcessPoolExecutor],
                 log: Callable[..., None], enabled: bool, stopping: threading.Event) -> None:
        self.store, self._aux, self.log, self.enabled = store, aux, log, enabled
        self._stopping = stopping
        #: Walks of more (switch, LID) pairs wait for a quiet period, in the helper.
        self.big_pairs = 2_000_000
        #: Seconds without a commit that make a quiet period.
        self.quiet_s = 1.0
        self._cond = threading.Condition()
        self._next: Epoch | None = None
        self._urgent = -1  # an epoch whose validation someone waits for
        self._thread = threading.Thread(target=self._run, name="smroute-validate", daemon=True)
        self._thread.start()

    def later(self, ep: Epoch) -> None:
        """Hand ``ep`` to the background walk (the newest wins)."""
        with self._cond:
            self._next = ep
            self._cond.notify_all()

    def soon(self, ep: Epoch) -> None:
        """Someone waits for ``ep``'s validation: no quiet period for it."""
        with self._cond:
            self._urgent = ep.id
            self._cond.notify_all()

    def close(self) -> None:
        """End the thread once ``stopping`` is set (a walk under way finishes
        first, up to 10 s)."""
        with self._cond:
            self._next = None
            self._cond.notify_all()
        self._thread.join(10)

    def _big(self, ep: Epoch) -> bool:
        return ep.tables.n_switches * len(ep.result.dest.lid) > self.big_pairs

    def _take(self) -> Epoch | None:
        """The epoch to walk next, once its quiet period is over (None: stop)."""
        with self._cond:
            while self._next is None and not self._stopping.is_set():
                self._cond.wait()
            ep, self._next = self._next, None
            if ep is not None and self.enabled and self._big(ep):
                self._aux()  # (its process starts now, during the quiet period)
            while (ep is not None and not self._stopping.is_set() and self._big(ep)
                   and ep.id != self._urgent):
                self._cond.wait(self.quiet_s)
                if self._next is None:
                    break  # quiet, or someone waits: walk ep
                ep, self._next = self._next, None
            return None if self._stopping.is_set() else ep

    def _run(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        while (ep := self._take()) is not None:
            # an older epoch still pending when a newer one arrived is skipped
            for eid in self.store.ids():
                if eid < ep.id and self.store.validation(eid) == "pending":
                    self.store.set_validation(eid, f"skipped: superseded by epoch {ep.id}")
            if self.store.validation(ep.id) != "pending":
                continue  # validated meanwhile (a RouteSubnet answer's delta walk)
            if not self.enabled:
                self.store.set_validation(ep.id, "skipped: validation disabled")
                continue
            try:
                job = functools.partial(validate_result, ep.result, max_failures=10)
                v = self._aux().submit(job).result() if self._big(ep) else job()
                self.store.set_validation(ep.id, v)
                self.log("info" if v.ok else "warning", "epoch_validated", epoch=ep.id,
                         summary=v.summary())
            except Exception as err:  # noqa: BLE001 - never kill the thread
                self.store.set_validation(ep.id, f"skipped: validation failed: {err}")
                self.log("error", "validation_error", epoch=ep.id, error=str(err))
