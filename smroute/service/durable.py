"""What the routing daemon keeps across restarts, and how it comes back: the
link between :class:`~smroute.service.core.RoutingCore` and its
:class:`~smroute.service.store.StateStore` (:class:`Durable`, :func:`resume`,
:func:`catch_up`).

Writes (each durable before the call it belongs to is answered, unless said):

* ``LoadFabric``: the base fabric (encoded), its source and, for the
  configured file, the SHA-256 of its bytes; the journal is cleared.
* ``ApplyFaults``: a batch's events, once checked, are journaled before the
  reroute starts, so an answered call's events survive ``kill -9`` even if
  their epoch was never written.  If the journal cannot be written the call
  fails (UNAVAILABLE) and nothing changes.
* Every commit: the epoch id (ids are never reused after a crash), the
  routing settings and the down set in force (and the base fabric, if it
  came some other way than LoadFabric); the epoch itself (metadata, down
  set, compressed tables) goes to a writer thread, which also drops the
  journal rows it includes.
  When the writer falls behind, an epoch superseded before it was written is
  skipped (the journal holds its events).  Validation results follow.

Resume (:func:`resume`, before the daemon serves): the newest stored epoch
whose tables decode and match their SHA-256 becomes the current epoch, with
the same id, tables, down set and validation result; the down set in force
is the last commit's plus the journaled events after it.  Its fabric is the
stored base minus its down set; the routing structure (roles, switch graph,
costs, NIDs, destinations: everything but the routes) is recomputed in the
epoch's mode (milliseconds; other algorithms are routed again and must give
the same checksum).  The next id follows the highest ever committed.
:func:`catch_up` (once serving) replays journaled events through
``ApplyFaults`` (the step from the resumed epoch's down set to the one in
force), routes again if a committed epoch was lost, and, for a
fabric from live discovery, loads and routes what discovery finds when its
hash differs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from smroute.discovery.changes import fault_events
from smroute.errors import RoutingError
from smroute.fabric.faults import (
    DownSet,
    FaultEvent,
    FaultEventError,
    apply_events,
    degraded_fabric,
)
from smroute.fabric.model import Fabric
from smroute.fabric.roles import FabricRoles, GuidOverrides, fabric_roles
from smroute.routing import dmodc
from smroute.routing.engine import RoutingResult, route, turn_roots
from smroute.routing.pool import RoutePool
from smroute.routing.topology import rooted_graph, switch_graph
from smroute.routing.validate import Validation
from smroute.service import state_codec as codec
from smroute.service.epochs import Epoch, FaultRecord, own_tables, table_checksum
from smroute.service.errors import ServiceError, Status
from smroute.service.store import EpochRow, FabricRow, StateError, StateStore
from smroute.tables.lft import ForwardingTables, lid_labels

if TYPE_CHECKING:
    from smroute.service.core import RoutingCore

__all__ = ["Durable", "Resumed", "catch_up", "new_instance_id", "rebuild_result", "resume"]

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


def _lmc_text(lmc: int | None) -> str:
    return "fabric" if lmc is None else str(lmc)


def _lmc_value(text: str) -> int | None:
    return None if text in ("fabric", "None") else int(text)


class Durable:
    """The daemon's writes to its state database (module doc); ``store=None``
    keeps nothing (every method a no-op).  ``instance``: this start's id;
    ``configured``: the config's ``fabric:`` file, whose bytes are hashed when
    it is loaded; ``settings``: the config's (algorithm, lmc)."""

    def __init__(self, store: StateStore | None, *, instance: str = "", log: LogFn = _no_log,
                 configured: str | Path | None = None,
                 settings: tuple[str, int | None] = ("dmodc", 0)) -> None:
        self.store = store
        self.instance = instance or new_instance_id()
        self.log = log
        self.configured = str(configured) if configured is not None else None
        self.settings = settings
        #: the last journal position whose events are in the core's down set
        self.journal_seq = 0
        self._base = ""  # content hash of the base fabric stored
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
        row = FabricRow(fabric.content_hash, source, sha, codec.encode_fabric(fabric))
        self._sync("the loaded fabric", lambda s: s.put_fabric(row))
        self._base, self.journal_seq = fabric.content_hash, 0

    def journal(self, base_hash: str, events: Sequence[FaultEvent]) -> None:
        """Journal a checked batch (before it is rerouted and answered);
        UNAVAILABLE if it cannot be."""
        rows = [(e.kind, e.guid, e.port) for e in events]
        seq = self._sync("the fault events", lambda s: s.append_journal(base_hash, rows))
        if seq is not None:
            self.journal_seq = int(seq)

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
                                lmc=_lmc_text(lmc_setting), down_base=ep.base_hash,
                                down=codec.down_to_json(_down(ep)), down_seq=self.journal_seq)
        except StateError as err:
            self.log("error", "state_write_failed", what=f"epoch {ep.id}", error=str(err))
        self._put(("epoch", ep, self.journal_seq, lmc_setting))

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
                if item[0] == "epoch" and any(i[0] == "epoch" for i in self._q):
                    continue  # superseded before it was written: the journal holds it
                self._busy = True
            try:
                assert self.store is not None
                if item[0] == "epoch":
                    self.store.put_epoch(self._row(item[1], item[2], item[3]))
                else:
                    self.store.set_validation(item[1], item[2])
            except (StateError, ValueError) as err:
                what = f"epoch {item[1].id}" if item[0] == "epoch" else f"validation {item[1]}"
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
            "lmc_setting": _lmc_text(lmc_setting), "mode": r.mode,
            "mode_reason": r.mode_reason, "turn_lids": r.turn_lids,
            "timings": dict(ep.timings), "fabric_hash": ep.fabric_hash,
            "faults": [[f.kind, f.guid, f.port] for f in ep.faults],
            "overrides": {k: sorted(getattr(ov, k)) for k in ("roots", "compute", "io")},
        }
        t = ep.tables
        return EpochRow(
            id=ep.id, parent_id=ep.parent_id, instance=self.instance, base_hash=ep.base_hash,
            meta=meta, down=codec.down_to_json(_down(ep)), journal_seq=journal_seq,
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
    def configured_unchanged(self, core: RoutingCore) -> bool:
        """True if the resumed state is the configured fabric's, routed: the
        same file bytes as when it was loaded (no need to parse it again)."""
        if self.store is None or self.configured is None or core.base is None:
            return False
        cur = core.store.current
        sha = self.store.meta().get("base_source_sha256", "")
        return (core.base_source == self.configured and cur is not None
                and cur.base_hash == core.base.content_hash and bool(sha)
                and file_sha256(self.configured) == sha)


def _down(ep: Epoch) -> DownSet:
    """The down set of ``ep`` (from its ``down_items``)."""
    items = ep.down_items
    return DownSet(frozenset((g, p) for k, g, p in items if k == "link"),
                   frozenset(g for k, g, _ in items if k == "switch"),
                   frozenset(g for k, g, _ in items if k == "ca"))


# ---------------------------------------------------------------- resume


@dataclass(frozen=True)
class Resumed:
    """What :func:`resume` found: the epoch now served (``None`` if none could
    be read), whether the state in force goes beyond it (journaled events, or
    a later commit that was not stored: :func:`catch_up` reroutes), journal
    events folded in, seconds taken."""

    epoch: Epoch | None
    behind: bool
    journal_events: int
    seconds: float


def rebuild_result(fabric: Fabric, tables: ForwardingTables, meta: dict[str, Any],
                   roles: FabricRoles, pool: RoutePool | None) -> RoutingResult:
    """The routing of ``fabric`` that produced ``tables`` (stored with ``meta``):
    the structure recomputed in the stored mode around the stored tables (Dmodc,
    Dmodk); other algorithms are routed again.  :class:`CodecError` if the
    result does not fit the tables."""
    alg, lmc, mode = str(meta["algorithm"]), _lmc_value(str(meta["lmc_setting"])), meta["mode"]
    if alg not in ("dmodc", "dmodk"):
        res = own_tables(route(fabric, algorithm=alg, lmc=lmc, pool=pool, roles=roles))
        if table_checksum(res.tables) != table_checksum(tables):
            raise codec.CodecError(f"{alg} routes this fabric differently now")
        return dataclasses.replace(res, tables=tables)
    check = None
    g = switch_graph(fabric, roles) if roles.tree else rooted_graph(fabric, roles, roles.roots)
    if roles.tree and mode == "tree+turns":
        check = rooted_graph(fabric, roles, turn_roots(g), like=g)
    elif roles.tree and mode == "updown":  # the turn-root check failed
        g = rooted_graph(fabric, roles, turn_roots(g), like=g)
    c, pi = dmodc.costs_and_dividers(g)
    nids = dmodc.topological_nids(g, c)
    dest = dmodc.destinations(g, nids, lmc=lmc)
    if not np.array_equal(g.sw_guid, tables.switch_guid) or \
            dest.max_lid + 1 != tables.ports.shape[1]:
        raise codec.CodecError("the stored tables do not fit the stored fabric's switches")
    return RoutingResult(alg, tables, g, c, pi, nids, dest, dict(meta["timings"]), mode,
                         str(meta["mode_reason"]), check, int(meta["turn_lids"]), roles)


def _epoch(row: EpochRow, base: Fabric, core: RoutingCore) -> Epoch:
    """The stored epoch ``row`` rebuilt on ``base`` (:class:`CodecError`,
    ``KeyError`` ... if it cannot be)."""
    m = row.meta
    down = codec.down_from_json(row.down)
    fabric = degraded_fabric(base, down)
    guid, lid, desc, ports = codec.decode_tables(row.tables)
    ports.setflags(write=False)
    lg, lk, ld = lid_labels(fabric, ports.shape[1])
    tables = ForwardingTables(guid, lid, desc, ports, lg, lk, ld)
    ov = GuidOverrides(*(frozenset(int(x) for x in m["overrides"][k])
                         for k in ("roots", "compute", "io")))
    res = rebuild_result(fabric, tables, m, fabric_roles(fabric, ov), core.pool)
    ep = Epoch(id=row.id, parent_id=row.parent_id, cause=str(m["cause"]), fabric=fabric,
               base_hash=row.base_hash, result=res, algorithm=str(m["algorithm"]),
               lmc=int(m["lmc"]), timings=dict(m["timings"]),
               faults=tuple(FaultRecord(str(k), int(g), int(p)) for k, g, p in m["faults"]),
               down=down.counts, committed_at=row.committed_at, diff=None,
               down_items=down.items(), instance=core.durable.instance, resumed=True)
    if ep.tables_sha256 != row.tables_sha256:
        raise codec.CodecError("the stored tables do not match their SHA-256")
    return ep


class _Bases:
    """Stored base fabrics by content hash, decoded once."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.seen: dict[str, Fabric] = {}

    def __call__(self, h: str) -> Fabric:
        if h not in self.seen:
            row = self.store.fabric(h)
            if row is None:
                raise codec.CodecError(f"no stored fabric {h[:12]}")
            self.seen[h] = codec.decode_fabric(row.data, h)
        return self.seen[h]


def _newest(store: StateStore, bases: _Bases, core: RoutingCore
            ) -> tuple[Epoch | None, Validation | str]:
    """The newest stored epoch that can be rebuilt, and its validation result."""
    for eid in store.epoch_ids():
        row = store.epoch(eid)
        if row is None:
            continue
        try:
            return _epoch(row, bases(row.base_hash), core), codec.validation_from_json(
                row.validation)
        except (codec.CodecError, RoutingError, KeyError, TypeError, ValueError) as err:
            core.log("warning", "state_epoch_unreadable", epoch=eid, error=str(err))
    return None, "pending"


def _in_force(store: StateStore, meta: dict[str, str], base: Fabric, core: RoutingCore
              ) -> tuple[DownSet, int, int]:
    """The down set in force on ``base``: the last commit's plus the journaled
    events after it; with the last journal position and how many events."""
    down, after = DownSet(), 0
    if meta.get("down_base") == base.content_hash:
        down, after = codec.down_from_json(meta["down"]), int(meta.get("down_seq", "0"))
    rows = [j for j in store.journal(after) if j.base_hash == base.content_hash]
    for j in rows:
        try:
            down = apply_events(base, down, [FaultEvent(j.kind, j.guid, j.port)], "journal")
        except FaultEventError as err:
            core.log("warning", "journal_event_skipped", seq=j.seq, error=str(err))
    return down, max([after] + [j.seq for j in rows]), len(rows)


def resume(core: RoutingCore) -> Resumed | None:
    """Take the state database's last committed epoch, base fabric, down set and
    settings into ``core`` (on its sequencer, before the daemon serves); see
    the module doc.  ``None`` when there is nothing to resume."""
    d = core.durable
    store = d.store
    if store is None:
        return None
    t0 = time.perf_counter()
    try:
        meta = store.meta()
        if not meta.get("base_hash"):
            return None
        bases = _Bases(store)
        base = bases(meta["base_hash"])
        ep, validation = _newest(store, bases, core)
        down, seq, n_journal = _in_force(store, meta, base, core)
        store.set_meta(config_algorithm=d.settings[0], config_lmc=_lmc_text(d.settings[1]))
    except (codec.CodecError, StateError) as err:
        core.log("error", "state_unreadable", error=str(err), message="starting empty")
        return None
    # an RPC's settings survive a restart unless the config's changed meanwhile
    cfg = (meta.get("config_algorithm"), meta.get("config_lmc"))
    if cfg == (d.settings[0], _lmc_text(d.settings[1])) and "algorithm" in meta:
        core.algorithm, core.lmc = meta["algorithm"], _lmc_value(meta["lmc"])
    core.base, core.base_source, core.down = base, meta.get("base_source", ""), down
    d._base, d.journal_seq = base.content_hash, seq
    last = int(meta.get("last_epoch_id", "0"))
    core.store.continue_after(last)
    if ep is not None:
        core.store.resume(ep, validation, last + 1)
        if ep.base_hash == base.content_hash:
            core._epoch_base = base  # the next reroute may be incremental
        if validation == "pending":
            core.validate_later(ep)
    behind = n_journal > 0 or last > (ep.id if ep is not None else 0)
    out = Resumed(ep, behind, n_journal, time.perf_counter() - t0)
    core.log("info", "resumed", epoch=ep.id if ep else None, instance=d.instance,
             down=down.summary(), journal_events=n_journal, last_committed=last,
             algorithm=core.algorithm, lmc=_lmc_text(core.lmc), seconds=round(out.seconds, 4),
             moved_aside=str(store.moved_aside) if store.moved_aside else None)
    return out


def catch_up(core: RoutingCore, r: Resumed) -> None:
    """Once serving: reroute from the resumed epoch to the state in force
    (ApplyFaults with the step between their down sets, in chunks; a full
    route if the base or the settings changed), then reconcile a fabric from
    live discovery with what discovery finds now."""
    cur, base = core.store.current, core.base
    try:
        if r.behind and base is not None:
            events = (fault_events(_down(cur), core.down)
                      if cur is not None and cur.base_hash == base.content_hash else [])
            n = core.limits.max_fault_events
            for i in range(0, len(events), n):
                ep = core.apply_faults(events[i:i + n]).epoch
            if not events:
                ep = core.route()
            core.log("info", "caught_up", epoch=ep.id, events=len(events),
                     journal_events=r.journal_events)
    except ServiceError as err:
        core.log("error", "catch_up_failed", error=err.message)
    src = core.base_source
    if core.base is not None and src.startswith("live") and not core.shutting_down.is_set():
        try:
            seen = core.discover_fabric(src.partition(":")[2], 0, 0.0)
            if seen.content_hash != core.base.content_hash:
                core.load_fabric(seen, src)
                ep = core.route()
                core.log("info", "live_fabric_reconciled", epoch=ep.id,
                         hash=seen.content_hash)
        except ServiceError as err:
            core.log("error", "live_reconcile_failed", error=err.message)
