"""Routing epochs: immutable committed routing states and their history.

An :class:`Epoch` is everything one committed routing produced: a monotonic
id, the fabric it routed (the loaded base fabric minus the items that are
down), a private copy of the forwarding tables (the pool's result is a view
of a shared-memory segment that must not be kept alive), the timings, the
fault batch that led to it and the diff against the epoch it replaced.

:class:`EpochStore` keeps the last ``history`` epochs.  A commit is one
reference swap under a lock; readers take :attr:`EpochStore.current` once and
work on that object, so they never see a half-built epoch.  Validation (a
walk of every switch-to-LID route, seconds on large fabrics) runs after the
commit; its result is attached to the store, not to the frozen epoch, and a
waiter can block on it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.routing.engine import RoutingResult
from smroute.routing.validate import Validation
from smroute.tables.diff import TableDiff
from smroute.tables.lft import BLOCK, NO_ROUTE, ForwardingTables

__all__ = ["Epoch", "EpochStore", "FaultRecord", "table_checksum", "padded_blocks", "own_tables"]


@dataclass(frozen=True)
class FaultRecord:
    """One fault event as committed: kind (``link_down`` ...), node GUID, port (0
    for switch/CA events)."""

    kind: str
    guid: int
    port: int = 0


@dataclass(frozen=True, eq=False)
class Epoch:
    """One committed routing state (immutable).

    id: monotonic (1, 2, ...); parent_id: the epoch it replaced (0 = none);
    cause: ``"route"`` or ``"faults"``; fabric: the routed fabric;
    base_hash: content hash of the loaded base fabric; result: the routing
    result, its tables a private copy; timings: seconds per phase (routing
    phases plus ``degrade``, ``diff``, ``commit``); faults: the batch that led
    to it; down: ``(links, switches, cas)`` counts of down items in force;
    committed_at: wall-clock seconds since the epoch; diff: against the parent
    (``None`` for the first epoch or after a new fabric was loaded);
    instance: the serving daemon's instance id; resumed: read from the state
    database at start rather than computed by this instance; max_vls: the
    data VLs the route was allowed, max_vls_reason: why
    (:func:`smroute.service.vlchoice.choose_vls`).
    """

    id: int
    parent_id: int
    cause: str
    fabric: Fabric
    base_hash: str
    result: RoutingResult
    algorithm: str
    lmc: int
    timings: Mapping[str, float]
    faults: tuple[FaultRecord, ...]
    down: tuple[int, int, int]
    committed_at: float
    diff: TableDiff | None = None
    down_items: frozenset[tuple[str, int, int]] = field(default_factory=frozenset)
    instance: str = ""
    resumed: bool = False
    max_vls: int = 1
    max_vls_reason: str = ""

    @property
    def tables(self) -> ForwardingTables:
        return self.result.tables

    @property
    def fabric_hash(self) -> str:
        return self.fabric.content_hash

    @cached_property
    def tables_sha256(self) -> str:
        """:func:`table_checksum` of the tables (computed once, on first use)."""
        return table_checksum(self.tables)

    @cached_property
    def guid_order(self) -> np.ndarray:
        """Table rows in ascending switch GUID order, ``(S,)`` int64."""
        return np.argsort(np.asarray(self.tables.switch_guid, dtype=np.uint64), kind="stable")


def own_tables(result: RoutingResult) -> RoutingResult:
    """``result`` with a private, read-only copy of its table (see module doc)."""
    ports = np.array(result.tables.ports, dtype=np.uint8, copy=True)
    ports.setflags(write=False)
    return dataclasses.replace(result, tables=dataclasses.replace(result.tables, ports=ports,
                                                                  _index={}))


def padded_blocks(ports: np.ndarray) -> np.ndarray:
    """``ports`` ``(S, W)`` padded with NO_ROUTE to whole 64-LID blocks:
    ``(S, ceil(W / 64), 64)`` uint8."""
    s, w = ports.shape
    nb = max(1, -(-w // BLOCK))
    out = np.full((s, nb * BLOCK), NO_ROUTE, dtype=np.uint8)
    out[:, :w] = ports
    return out.reshape(s, nb, BLOCK)


def table_checksum(t: ForwardingTables) -> str:
    """SHA-256 over every switch in ascending GUID order: its GUID as 8 bytes
    little-endian, then its ``max_lid + 1`` LFT bytes (the value sent in
    ``TablesHeader.tables_sha256``)."""
    guids = np.asarray(t.switch_guid, dtype="<u8")
    order = np.argsort(guids, kind="stable")
    ports = np.ascontiguousarray(t.ports, dtype=np.uint8)
    h = hashlib.sha256()
    for r in order.tolist():  # one update per switch row, no copy of the table
        h.update(guids[r].tobytes())
        h.update(ports[r])
    return h.hexdigest()


class EpochStore:
    """The last ``history`` committed epochs (thread-safe).

    ``commit`` appends and wakes every waiter; ``current`` is one reference
    read; ``get(id)`` raises ``KeyError`` for ids no longer (or not yet) kept.
    Validation results: :meth:`set_validation` / :meth:`validation` /
    :meth:`wait_validation`; :attr:`on_validation` (if set) is called with each
    result set (the state database records it).  :meth:`resume` installs an
    epoch read back from the state database.
    """

    def __init__(self, history: int = 8) -> None:
        if history < 1:
            raise ValueError("epoch history must be >= 1")
        self._history = history
        self._epochs: deque[Epoch] = deque()
        self._current: Epoch | None = None
        self._next_id = 1
        self._cond = threading.Condition()
        self._validation: dict[int, Validation | str] = {}
        self.closed = False
        self.on_validation: Callable[[int, Validation | str], None] | None = None

    @property
    def current(self) -> Epoch | None:
        return self._current

    @property
    def history(self) -> int:
        return self._history

    def set_history(self, history: int) -> None:
        """Change how many epochs are kept (older ones are dropped now)."""
        if history < 1:
            raise ValueError("epoch history must be >= 1")
        with self._cond:
            self._history = history
            self._trim()

    def next_id(self) -> int:
        """The id the next commit will get (ids are only assigned by commit)."""
        return self._next_id

    def commit(self, **fields: Any) -> Epoch:
        """Build the epoch with the next id and make it current, atomically.

        ``fields``: every :class:`Epoch` field except ``id`` and ``parent_id``.
        """
        with self._cond:
            parent = self._current
            ep = Epoch(id=self._next_id, parent_id=parent.id if parent else 0,
                       **fields)
            self._next_id += 1
            self._epochs.append(ep)
            self._current = ep
            self._validation[ep.id] = "pending"
            self._trim()
            self._cond.notify_all()
            return ep

    def resume(self, ep: Epoch, validation: Validation | str, next_id: int) -> None:
        """Make ``ep`` (an epoch resumed from the state database) the current and
        only epoch with its recorded ``validation``; the next commit gets
        ``max(next_id, ep.id + 1)``."""
        with self._cond:
            self._epochs = deque([ep])
            self._current = ep
            self._validation = {ep.id: validation}
            self._next_id = max(next_id, ep.id + 1)
            self._cond.notify_all()

    def continue_after(self, last_id: int) -> None:
        """Ids given before a restart go up to ``last_id``: the next commit gets
        a higher one (ids are never reused)."""
        with self._cond:
            self._next_id = max(self._next_id, last_id + 1)

    def _trim(self) -> None:
        while len(self._epochs) > self._history:
            old = self._epochs.popleft()
            self._validation.pop(old.id, None)

    def get(self, epoch_id: int = 0) -> Epoch:
        """Epoch ``epoch_id`` (0 = current); ``KeyError`` with a message if it is
        not in the history."""
        cur = self._current
        if cur is None:
            raise KeyError("no epoch has been committed yet (load a fabric and route it)")
        if epoch_id == 0 or epoch_id == cur.id:
            return cur
        for ep in list(self._epochs):
            if ep.id == epoch_id:
                return ep
        ids = [e.id for e in list(self._epochs)]
        kept = f"{ids[0]}..{ids[-1]}" if ids else "none"
        raise KeyError(f"epoch {epoch_id} is not in the history (kept: {kept})")

    def ids(self) -> list[int]:
        """Ids of the kept epochs, oldest first."""
        return [e.id for e in list(self._epochs)]

    def wait_newer(self, after_id: int, timeout: float) -> list[Epoch]:
        """Epochs newer than ``after_id`` still kept, oldest first; waits up to
        ``timeout`` seconds for one (returns ``[]`` on timeout or close)."""
        with self._cond:
            if not self._newer(after_id) and not self.closed:
                self._cond.wait(timeout)
            return self._newer(after_id)

    def _newer(self, after_id: int) -> list[Epoch]:
        return [e for e in self._epochs if e.id > after_id]

    def close(self) -> None:
        """Wake every waiter for good (shutdown)."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    # ------------------------------------------------------------ validation
    def set_validation(self, epoch_id: int, v: Validation | str) -> None:
        """Attach a validation result (or ``"skipped: why"``) to a kept epoch."""
        with self._cond:
            kept = epoch_id in self._validation
            if kept:
                self._validation[epoch_id] = v
            self._cond.notify_all()
        if kept and self.on_validation is not None:
            self.on_validation(epoch_id, v)

    def validation(self, epoch_id: int) -> Validation | str:
        """The result, ``"pending"`` or ``"skipped: ..."``."""
        with self._cond:
            return self._validation.get(epoch_id, "skipped: epoch no longer kept")

    def wait_validation(self, epoch_id: int, timeout: float) -> Validation | str:
        """:meth:`validation` once it is no longer ``"pending"`` (or after
        ``timeout`` seconds, or at close)."""
        with self._cond:
            self._cond.wait_for(
                lambda: self._validation.get(epoch_id, "gone") != "pending" or self.closed,
                timeout,
            )
            return self._validation.get(epoch_id, "skipped: epoch no longer kept")
