"""The daemon's helper process (:class:`HelperProcess`): one spawned process,
made on first use and kept for the daemon's life, that runs congestion
analyses and large validation walks so they do not hold the daemon's GIL
against reroutes; its jobs run one at a time."""

from __future__ import annotations

import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any

from smroute.analysis.compare import analyze_tables
from smroute.service.epochs import Epoch
from smroute.service.errors import ServiceError, Status

__all__ = ["HelperProcess"]


class HelperProcess:
    """The helper process (module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._analyze_lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None

    @property
    def started(self) -> bool:
        """Whether the process was made (some job needed it)."""
        return self._executor is not None

    def executor(self) -> ProcessPoolExecutor:
        """The process's executor (spawned on first use)."""
        with self._lock:
            if self._executor is None:
                self._executor = ProcessPoolExecutor(1, mp_context=get_context("spawn"))
                self._executor.submit(int)  # start the process (its imports) now
            return self._executor

    def analyze(self, ep: Epoch, order: str, seed: int, samples: int) -> dict[str, Any]:
        """Congestion metrics of ``ep`` (see :func:`analyze_tables`), one
        analysis at a time; RESOURCE_EXHAUSTED if the process dies."""
        with self._analyze_lock:
            r = ep.result
            fut = self.executor().submit(analyze_tables, ep.fabric, ep.tables,
                                         r.graph.ep_row, r.nids, order, seed, samples)
            try:
                return fut.result()  # type: ignore[no-any-return]
            except BrokenProcessPool:
                with self._lock:
                    self._executor = None
                raise ServiceError(Status.RESOURCE_EXHAUSTED,
                                   "the analysis process died (out of memory?); try a "
                                   "smaller rp_samples or raise the daemon's memory") from None

    def close(self) -> None:
        """Stop the process (queued jobs cancelled)."""
        if self._executor is not None:
            self._executor.shutdown(cancel_futures=True)
