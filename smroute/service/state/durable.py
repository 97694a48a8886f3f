"""What the routing daemon keeps across restarts: the link between
:class:`~smroute.service.core.RoutingCore` and its
:class:`~smroute.service.state.store.StateStore` (:class:`Durable`); how it comes
back is :mod:`smroute.service.state.resume`.

Writes (each durable before the call it belongs to is answered, unless said):

* ``LoadFabric``: the base fabric (encoded), its source and, for the
  configured file, the SHA-256 of its bytes; the journal is cleared.
* ``ApplyFaults``: a batch's events, once checked, are journaled before the
  reroute starts, so an answered call's events survive ``kill -9`` even if
  their epoch was never written.  If the journal cannot be written the call
  fails (UNAVAILABLE) and nothing changes.
* ``RouteSubnet``: the subnet manager's VL facts (``max_vls: auto``;
  :mod:`smroute.service.state.vlfacts`) when they changed, before it is
  routed; cleared by ``LoadFabric``.  If they cannot be written the call
  goes on (logged): a restart then routes on one VL until the next
  ``RouteSubnet``.
* Every commit: the epoch id (ids are never reused after a crash), the
  routing settings and the down set in force (and the base fabric, if it
  came some other way than LoadFabric); then the high-water mark beside the
  database (:mod:`smroute.service.state.salvage`: the id, base and down set, kept
  apart so that damage to the database cannot send ids back or hide what
  was acknowledged; written at LoadFabric too, and with the journal
  position and events at every journaled batch; fsynced by the writer
  thread, never in the answer's path); the epoch itself
  (metadata, down set, compressed tables) goes to a writer thread, which
  also drops the journal rows it includes.  When the writer falls behind, an epoch
  superseded before it was written is skipped (the journal holds its
  events).  Validation results follow.
"""

from __future__ import annotations

import errno
import hashlib
import secrets
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from smroute.errors import SmrouteError
from smroute.fabric.faults import DownSet, FaultEvent
from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import GuidOverrides
from smroute.routing import api
from smroute.routing.validate import Validation
from smroute.service.epochs import Epoch
from smroute.service.errors import ServiceError, Status
from smroute.service.state import codec
from smroute.service.state.salvage import (
    MARK_PENDING,
    HighWater,
    down_digest,
    sync_high_water,
    write_high_water,
)
from smroute.service.state.store import EpochRow, FabricRow, StateError, StateStore
from smroute.service.state.vlfacts import KEY as FACTS_KEY
from smroute.service.state.vlfacts import encode_facts
from smroute.service.vlchoice import VlFacts

__all__ = ["Durable", "down_of", "file_sha256", "lmc_text", "lmc_value", "new_instance_id"]

LogFn = Callable[..., None]


def _no_log(level: str, event: str, **fields: Any) -> None:
    return None


def new_instance_id() -> str:
    """A random 64-bit instance id, 16 hex digits (one per daemon start)."""
    return secrets.token_hex(8)


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes (``""`` if it cannot be read)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return ""
    return h.hexdigest()


def lmc_text(lmc: int | None) -> str:
    return "fabric" if lmc is None else str(lmc)


def lmc_value(text: str) -> int | None:
    return None if text in ("fabric", "None") else int(text)


class Durable:
    """The daemon's writes to its state database (module doc); ``store=None``
    keeps nothing (every method a no-op).  ``instance``: this start's id;
    ``configured``: the config's ``fabric:`` file, whose bytes are hashed when
    it is loaded; ``settings``: the config's (algorithm, lmc)."""

    def __init__(self, store: StateStore | None, *, instance: str = "", log: LogFn = _no_log,
                 configured: str | Path | None = None,
                 settings: tuple[str, int | None] = (api.DEFAULT, 0)) -> None:
        self.store = store
        self.instance = instance or new_instance_id()
        self.log = log
        self.configured = str(configured) if configured is not None else None
        self.settings = settings
        #: the last journal position whose events are in the core's down set
        self.journal_seq = 0
        #: the highest epoch id committed (by any instance)
        self.last_epoch_id = 0
        self._base = ""  # content hash of the base fabric stored
        self._facts: str | None = None  # digest of the VL facts stored (None: unknown)
        self._mark: HighWater | None = None  # the high-water mark written last
        self._q: deque[tuple[Any, ...]] = deque()
        self._cond = threading.Condition()
        self._busy = False
        self._stop = False
        self._thread: threading.Thread | None = None
        if store is not None:
            self._thread = threading.Thread(target=self._writer, name="smroute-state",
                                            daemon=True)
            self._thread.start()

    # ------------------------------------------------------------ synchronous
    def _sync(self, what: str, fn: Callable[[StateStore], Any]) -> Any:
        if self.store is None:
            return None
        try:
            return fn(self.store)
        except StateError as err:
            self.log("error", "state_write_failed", what=what, error=str(err))
            raise ServiceError(Status.UNAVAILABLE, f"{what} not recorded: {err}") from None

    def fabric_loaded(self, fabric: Fabric, source: str) -> None:
        """Record the new base fabric (before LoadFabric answers); UNAVAILABLE
        if it cannot be."""
        if self.store is None:
            return
        sha = file_sha256(source) if source == self.configured else ""
        self.vl_facts(None)  # a loaded fabric has none (cleared first: never stale ones)
        row = FabricRow(fabric.content_hash, source, sha, codec.encode_fabric(fabric))
        self._sync("the loaded fabric", lambda s: s.put_fabric(row))
        # the journal is cleared; its positions go on (none of them is missing)
        seq = self._sync("the loaded fabric", lambda s: s.journal_high())
        self._base, self.journal_seq = fabric.content_hash, int(seq or 0)
        self.mark(fabric.content_hash, DownSet())

    def vl_facts(self, facts: VlFacts | None, text: str | None = None) -> None:
        """Keep the subnet manager's VL facts for the next start when they
        changed (logged if they cannot be).  ``text``: their stored form as
        read at start (recorded, not written)."""
        if self.store is None:
            return
        stored = text is not None
        text = text if text is not None else encode_facts(facts)
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest == self._facts or stored:
            self._facts = digest
            return
        try:
            self.store.set_meta(**{FACTS_KEY: text})
            self._facts = digest
        except StateError as err:
            self._facts = None
            self.log("error", "state_write_failed", what="the VL facts", error=str(err))

    def journal(self, base_hash: str, events: Sequence[FaultEvent]) -> None:
        """Journal a checked batch (before it is rerouted and answered);
        UNAVAILABLE if it cannot be."""
        rows = [(e.kind, e.guid, e.port) for e in events]
        if not rows:
            return
        seq = self._sync("the fault events", lambda s: s.append_journal(base_hash, rows))
        if seq is not None:
            self.journal_seq = int(seq)
            if self._mark is not None:  # the positions given and events, beside the database
                first = int(seq) - len(rows) + 1
                pending = self._mark.pending + tuple(
                    (first + i, k, g, p) for i, (k, g, p) in enumerate(rows))
                self._write_mark(replace(self._mark, journal_high=int(seq),
                                         pending=pending[:MARK_PENDING]), sync=False)

    def committed(self, ep: Epoch, base: Fabric, lmc_setting: int | None) -> None:
        """A commit: its id, settings and down set now, the epoch by the writer."""
        if self.store is None:
            return
        try:
            if base.content_hash != self._base:  # came without LoadFabric (RouteSubnet)
                self.store.put_fabric(FabricRow(base.content_hash, "", "",
                                                codec.encode_fabric(base)))
                self._base = base.content_hash
            self.store.set_meta(last_epoch_id=ep.id, algorithm=ep.algorithm,
                                lmc=lmc_text(lmc_setting), down_base=ep.base_hash,
                                down=codec.down_to_json(down_of(ep)), down_seq=self.journal_seq)
        except StateError as err:
            self.log("error", "state_write_failed", what=f"epoch {ep.id}", error=str(err))
        self.last_epoch_id = max(self.last_epoch_id, ep.id)
        self.mark(ep.base_hash, down_of(ep))
        self._put(("epoch", ep, self.journal_seq, lmc_setting))

    def mark(self, base_hash: str, down: DownSet, journal_seq: int | None = None) -> None:
        """Rewrite the high-water mark: the last epoch id, ``base_hash`` and
        ``down`` in force with the journal position (logged if it cannot be)."""
        if self.store is None:
            return
        seq = self.journal_seq if journal_seq is None else journal_seq
        text = codec.down_to_json(down)
        self._write_mark(HighWater(self.last_epoch_id, base_hash, down_digest(text), seq, text,
                                   max(seq, self.journal_seq)))

    def adopt_mark(self, hw: HighWater | None) -> None:
        """The high-water mark read at start (rewritten from the next journaled batch)."""
        self._mark = hw

    def _write_mark(self, hw: HighWater, sync: bool = True) -> None:
        assert self.store is not None
        self._mark = hw = replace(hw, n=self._mark.n + 1 if self._mark is not None else 0)
        try:  # on disk by the writer thread (not in the answer's path)
            write_high_water(self.store.path, hw, False)
            if sync:
                self._put(("mark",))
        except OSError as err:  # (as SQLite says it)
            why = "disk is full" if err.errno == errno.ENOSPC else err.strerror or str(err)
            self.log("error", "state_write_failed", what="the epoch high-water mark",
                     error=why)

    def validation(self, epoch_id: int, v: Validation | str) -> None:
        """An epoch's validation result (by the writer thread)."""
        if self.store is not None:
            self._put(("validation", epoch_id, codec.validation_to_json(v)))

    # ------------------------------------------------------------ writer thread
    def _put(self, item: tuple[Any, ...]) -> None:
        with self._cond:
            self._q.append(item)
            self._cond.notify_all()

    def _writer(self) -> None:
        while True:
            with self._cond:
                while not self._q and not self._stop:
                    self._cond.wait()
                if not self._q:
                    return
                item = self._q.popleft()
                if item[0] in ("epoch", "mark") and any(i[0] == item[0] for i in self._q):
                    continue  # superseded before it was written: the journal holds it
                self._busy = True
            try:
                assert self.store is not None
                if item[0] == "epoch":
                    self.store.put_epoch(self._row(item[1], item[2], item[3]))
                elif item[0] == "mark":
                    sync_high_water(self.store.path)
                else:
                    self.store.set_validation(item[1], item[2])
            except (StateError, ValueError, OSError) as err:
                what = (f"epoch {item[1].id}" if item[0] == "epoch" else
                        "the epoch high-water mark" if item[0] == "mark" else
                        f"validation {item[1]}")
                self.log("error", "state_write_failed", what=what, error=str(err))
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _row(self, ep: Epoch, journal_seq: int, lmc_setting: int | None) -> EpochRow:
        r = ep.result
        ov = r.roles.overrides if r.roles is not None else GuidOverrides()
        meta = {
            "cause": ep.cause, "algorithm": ep.algorithm, "lmc": ep.lmc,
            "lmc_setting": lmc_text(lmc_setting), "mode": r.mode,
            "mode_reason": r.mode_reason, "turn_lids": r.turn_lids,
            "max_vls": ep.max_vls, "max_vls_reason": ep.max_vls_reason,
            "timings": dict(ep.timings), "fabric_hash": ep.fabric_hash,
            "faults": [[f.kind, f.guid, f.port] for f in ep.faults],
            "overrides": {k: sorted(getattr(ov, k)) for k in ("roots", "compute", "io")},
        }
        t = ep.tables
        return EpochRow(
            id=ep.id, parent_id=ep.parent_id, instance=self.instance, base_hash=ep.base_hash,
            meta=meta, down=codec.down_to_json(down_of(ep)), journal_seq=journal_seq,
            tables=codec.encode_tables(t.switch_guid, t.switch_lid, t.switch_desc, t.ports),
            tables_sha256=ep.tables_sha256, validation=codec.validation_to_json("pending"),
            committed_at=ep.committed_at)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued write is done; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._q and not self._busy, timeout)

    def close(self) -> None:
        """Finish the queued writes, stop the writer, close the database."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(60)
        if self.store is not None:
            self.store.close()

    # ------------------------------------------------------------ configured fabric
    def configured_unchanged(self, base: Fabric | None, base_source: str) -> bool:
        """True if the resumed ``base`` fabric (from ``base_source``) is the
        configured file's: the same file bytes as when it was loaded (no need
        to parse it again), or the same fabric."""
        if self.store is None or self.configured is None or base is None:
            return False
        sha = self.store.meta().get("base_source_sha256", "")
        if base_source == self.configured and sha and file_sha256(self.configured) == sha:
            return True
        try:  # the file's bytes not on record (a damaged row): its fabric's hash
            return read_topology(self.configured).content_hash == base.content_hash
        except (SmrouteError, OSError):
            return False

    def resumed(self, base_hash: str, journal_seq: int) -> None:
        """The core took in the stored state: base ``base_hash`` is stored, and
        the journal up to ``journal_seq`` is in its down set."""
        self._base, self.journal_seq = base_hash, journal_seq


def down_of(ep: Epoch) -> DownSet:
    """The down set of ``ep`` (from its ``down_items``)."""
    items = ep.down_items
    return DownSet(frozenset((g, p) for k, g, p in items if k == "link"),
                   frozenset(g for k, g, _ in items if k == "switch"),
                   frozenset(g for k, g, _ in items if k == "ca"))
