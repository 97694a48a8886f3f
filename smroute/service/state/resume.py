"""How the routing daemon comes back after a restart (:func:`read_state`,
taken in by :meth:`~smroute.service.core.RoutingCore.resume` through the
core's transaction, and :func:`catch_up`, before it serves;
:func:`reconcile_live`, once it serves), from what
:mod:`smroute.service.state.durable` wrote.  Nothing here touches the core's
state: catch-up and reconciliation use its public calls (:class:`CoreCalls`).

Resume: the acknowledged state (base fabric, down set in force: the last
commit's plus the journaled events after it, the highest epoch id) is
rebuilt by :func:`smroute.service.state.rebuild.in_force`, whatever damage the
database took.  If part of it is lost the daemon starts degraded
(:mod:`smroute.service.degraded`): no epoch is installed and no tables are
served until the subnet manager's view, a LoadFabric or a confirmed Route.
Otherwise the newest stored epoch whose tables decode and match their
SHA-256 becomes the current epoch, with the same id, tables, down set and
validation result.  Its fabric is the stored base minus its down set; the routing
structure (roles, switch graph, costs, NIDs, destinations: everything but
the routes) is recomputed in the epoch's mode (milliseconds; other
algorithms are routed again and must give the same checksum).  The next id
follows the highest ever committed.  The subnet manager's VL facts on
record (:mod:`smroute.service.state.vlfacts`) come back with it, so that
``max_vls: auto`` reroutes with the VLs it was allowed before the next
``RouteSubnet`` (none on record: one VL until then, said in the log).
Catch-up: reroute from the resumed epoch to the state in force
(``ApplyFaults`` with the step between their down sets), route again if
a committed epoch was lost, and, for a fabric from live discovery, load
and route what discovery finds when its hash differs.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from smroute.discovery.changes import fault_events
from smroute.errors import RoutingError, SmrouteError
from smroute.fabric.faults import DownSet, FaultEvent, degraded_fabric
from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import FabricRoles, GuidOverrides, fabric_roles, needed_pairs
from smroute.routing import api, modes
from smroute.routing.engine import RoutingResult, route
from smroute.routing.pool import RoutePool
from smroute.routing.validate import Validation
from smroute.service.config import LimitsConfig
from smroute.service.degraded import Degraded
from smroute.service.dryrun import FaultOutcome
from smroute.service.epochs import Epoch, EpochStore, FaultRecord, own_tables, table_checksum
from smroute.service.errors import ServiceError
from smroute.service.state import codec
from smroute.service.state.durable import Durable, down_of, lmc_text, lmc_value
from smroute.service.state.rebuild import InForce, in_force
from smroute.service.state.salvage import read_high_water
from smroute.service.state.store import EpochRow, StateError, StateStore
from smroute.service.state.vlfacts import KEY as FACTS_KEY
from smroute.service.state.vlfacts import decode_facts
from smroute.service.vlchoice import AUTO, VlFacts, choose_vls
from smroute.tables.lft import ForwardingTables, lid_labels

LogFn = Callable[..., None]

__all__ = ["CoreCalls", "Resumed", "Stored", "catch_up", "read_state", "rebuild_result",
           "reconcile_live"]


@dataclass(frozen=True)
class Resumed:
    """What :meth:`RoutingCore.resume` found: the epoch now served (``None``
    if none could be read), whether the state in force goes beyond it (journaled events, or
    a later commit that was not stored: :func:`catch_up` reroutes), journal
    events folded in, seconds taken, what was lost (then degraded), and the
    highest epoch id ever committed."""

    epoch: Epoch | None
    behind: bool
    journal_events: int
    seconds: float
    lost: tuple[str, ...] = ()
    last_id: int = 0


def rebuild_result(fabric: Fabric, tables: ForwardingTables, meta: dict[str, Any],
                   roles: FabricRoles, pool: RoutePool | None, max_vls: int = 1
                   ) -> RoutingResult:
    """The routing of ``fabric`` that produced ``tables`` (stored with ``meta``):
    the structure recomputed in the stored mode around the stored tables
    (:attr:`~smroute.routing.api.Guarantees.stateless` engines); other
    engines, and detours over VLs (with ``max_vls``), are routed again.
    :class:`CodecError` if the result does not fit the tables."""
    alg, lmc, mode = str(meta["algorithm"]), lmc_value(str(meta["lmc_setting"])), meta["mode"]
    if not api.engine(alg).guarantees.stateless or \
            modes.routed_again(str(mode), str(meta["mode_reason"])):
        res = own_tables(route(fabric, algorithm=alg, lmc=lmc, pool=pool, roles=roles,
                               workers=1 if pool is None else None, max_vls=max_vls))
        if table_checksum(res.tables) != table_checksum(tables):
            raise codec.CodecError(f"{alg} routes this fabric differently now")
        return dataclasses.replace(res, tables=tables)
    g, _, _ = modes.start(fabric, roles)
    needed = needed_pairs(fabric, roles, g.sw_node, fabric.port_node[g.ep_row].astype(np.int64))
    g, check = modes.mode_graphs(fabric, roles, mode)
    prep = api.engine(alg).prepare(g, lmc, time.perf_counter, {})
    c, pi, nids, dest = prep.costs, prep.dividers, prep.nids, prep.dest
    if not np.array_equal(g.sw_guid, tables.switch_guid) or \
            dest.max_lid + 1 != tables.ports.shape[1]:
        raise codec.CodecError("the stored tables do not fit the stored fabric's switches")
    return RoutingResult(alg, tables, g, c, pi, nids, dest, dict(meta["timings"]), mode,
                         str(meta["mode_reason"]), check, int(meta["turn_lids"]), roles,
                         needed=needed)


def _epoch(row: EpochRow, base: Fabric, pool: RoutePool, max_vls: int, instance: str
           ) -> Epoch:
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
    max_vls = int(m.get("max_vls", max_vls))  # the VLs it was routed with
    res = rebuild_result(fabric, tables, m, fabric_roles(fabric, ov), pool, max_vls)
    ep = Epoch(id=row.id, parent_id=row.parent_id, cause=str(m["cause"]), fabric=fabric,
               base_hash=row.base_hash, result=res, algorithm=str(m["algorithm"]),
               lmc=int(m["lmc"]), timings=dict(m["timings"]),
               faults=tuple(FaultRecord(str(k), int(g), int(p)) for k, g, p in m["faults"]),
               down=down.counts, committed_at=row.committed_at, diff=None,
               down_items=down.items(), instance=instance, resumed=True, max_vls=max_vls,
               max_vls_reason=str(m.get("max_vls_reason", "")))
    if ep.tables_sha256 != row.tables_sha256:
        raise codec.CodecError("the stored tables do not match their SHA-256")
    return ep


class _Bases:
    """Stored base fabrics by content hash, decoded once; one that is lost
    from the database is the configured file's if that has its hash."""

    def __init__(self, store: StateStore, configured: str | None = None) -> None:
        self.store = store
        self.configured = configured
        self.seen: dict[str, Fabric] = {}
        self.from_file: set[str] = set()

    def __call__(self, h: str) -> Fabric:
        if h not in self.seen:
            row = self.store.fabric(h)
            try:
                if row is None:
                    raise codec.CodecError(f"no stored fabric {h[:12]}")
                self.seen[h] = codec.decode_fabric(row.data, h)
            except codec.CodecError:
                f = self._configured()
                if f is None or f.content_hash != h:
                    raise
                self.seen[h] = f
                self.from_file.add(h)
        return self.seen[h]

    def _configured(self) -> Fabric | None:
        if self.configured is None:
            return None
        try:
            return read_topology(self.configured)
        except (SmrouteError, OSError):
            return None


def _newest(store: StateStore, bases: _Bases, pool: RoutePool, max_vls: int, instance: str,
            log: LogFn) -> tuple[Epoch | None, Validation | str]:
    """The newest stored epoch that can be rebuilt, and its validation result."""
    for eid in store.epoch_ids():
        row = store.epoch(eid)
        if row is None:
            continue
        try:
            return _epoch(row, bases(row.base_hash), pool, max_vls, instance), \
                codec.validation_from_json(row.validation)
        except (codec.CodecError, RoutingError, KeyError, TypeError, ValueError) as err:
            log("warning", "state_epoch_unreadable", epoch=eid, error=str(err))
    return None, "pending"


@dataclass(frozen=True)
class Stored:
    """What the state database holds to resume (:func:`read_state`): the base
    fabric (``None``: none, or lost), its source, the down set in force and
    the last journal position in it (with how many journaled events it folds
    in), the newest epoch that could be rebuilt (``None``: none) with its
    validation result, the highest epoch id ever committed, and the routing
    settings an RPC chose that survive the restart (``None``: the config's
    stand); where a damaged database was moved to, the damage seen, what of
    the acknowledged state was lost (empty: nothing; else no epoch), the
    hash of the base fabric as stored in the database (``""``: not stored),
    and the subnet manager's VL facts (``None``: none on record)."""

    base: Fabric | None
    base_source: str
    down: DownSet
    journal_seq: int
    journal_events: int
    epoch: Epoch | None
    validation: Validation | str
    last_id: int
    settings: tuple[str, int | None] | None
    moved_aside: str
    damage: str = ""
    lost: tuple[str, ...] = ()
    stored_base: str = ""
    vl_facts: VlFacts | None = None


def read_state(d: Durable, pool: RoutePool, max_vls: int, log: LogFn) -> Stored | None:
    """Read what ``d``'s state database holds to resume (see the module doc),
    rebuilt from whatever is intact; ``None`` when there is nothing to
    resume.  The high-water mark and the highest epoch id go to ``d``; the
    core takes the rest in through its transaction
    (:meth:`smroute.service.core.RoutingCore.resume`)."""
    store = d.store
    if store is None:
        return None
    bases = _Bases(store, d.configured)
    try:
        meta = store.meta()
        got = in_force(store, bases, log)
    except StateError as err:  # opened, but reads fail: all of it is lost
        meta, got = {}, InForce(lost=[f"everything: {err}"])
        hw, _ = read_high_water(store.path)
        got.last_epoch_id = hw.epoch_id if hw is not None else 0
    d.last_epoch_id = got.last_epoch_id
    d.adopt_mark(got.high_water)
    try:  # a full disk must not throw away the state just read: logged, written next start
        store.set_meta(config_algorithm=d.settings[0], config_lmc=lmc_text(d.settings[1]))
    except StateError as err:
        log("error", "state_write_failed", what="the config's routing settings",
            error=str(err))
    if got.base is None and not got.lost:
        return None  # nothing to resume
    ep: Epoch | None = None
    validation: Validation | str = "pending"
    settings = None
    facts = _vl_facts(d, meta, log) if got.base is not None else None
    if got.base is not None and not got.lost:
        ep, validation = _newest(store, bases, pool, max_vls, d.instance, log)
        if got.high_water is None:  # a database of an older smroute: its first mark
            d.mark(got.base.content_hash, *got.commit)
        settings = _settings(d, meta, log)
    stored = got.base is not None and got.base.content_hash not in bases.from_file
    return Stored(got.base, meta.get("base_source", ""), got.down, got.seq,
                  got.journal_events, ep, validation, got.last_epoch_id, settings,
                  str(store.moved_aside) if store.moved_aside else "", "; ".join(store.damage),
                  tuple(got.lost), got.base.content_hash if stored and got.base else "",
                  facts)


def _vl_facts(d: Durable, meta: dict[str, str], log: LogFn) -> VlFacts | None:
    """The subnet manager's VL facts on record (``max_vls: auto``), said in
    the log: restored, none (a fabric from another source), or none on
    record (an older smroute's database, a damaged row): then one VL until
    the subnet manager's next ``RouteSubnet``."""
    text = meta.get(FACTS_KEY)
    until = "max_vls auto routes on one VL until the subnet manager's next RouteSubnet"
    if text is None:
        log("warning", "state_vl_facts_missing", message=(
            f"the state database holds no VL facts (an older smroute's database, or a damaged "
            f"row): {until}"))
        return None
    try:
        facts = decode_facts(text)
    except codec.CodecError as err:
        log("error", "state_vl_facts_unreadable", error=str(err), message=until)
        return None
    d.vl_facts(facts, text)
    if facts is not None:
        vc = choose_vls(AUTO, facts)
        log("info", "state_vl_facts_restored", nodes=len(facts.guid), cables=len(facts.guid_a),
            auto_vls=vc.vls, reason=vc.reason)
    return facts


def _settings(d: Durable, meta: dict[str, str], log: LogFn) -> tuple[str, int | None] | None:
    """An RPC's settings: they survive a restart unless the config's changed
    meanwhile (``None``: the config's stand)."""
    cfg = (meta.get("config_algorithm"), meta.get("config_lmc"))
    if cfg == (d.settings[0], lmc_text(d.settings[1])) and meta.get("algorithm") in api.names():
        try:
            return meta["algorithm"], lmc_value(meta.get("lmc", ""))
        except ValueError:
            log("warning", "state_settings_unreadable", lmc=meta.get("lmc", "")[:20])
    return None


class CoreCalls(Protocol):
    """What :func:`catch_up` and :func:`reconcile_live` use of the daemon's
    core (:class:`smroute.service.core.RoutingCore`): its public calls only."""

    @property
    def store(self) -> EpochStore: ...
    @property
    def base(self) -> Fabric | None: ...
    @property
    def base_source(self) -> str: ...
    @property
    def down(self) -> DownSet: ...
    @property
    def limits(self) -> LimitsConfig: ...
    @property
    def shutting_down(self) -> threading.Event: ...
    @property
    def state_loss(self) -> Degraded: ...
    def log(self, level: str, event: str, **fields: Any) -> None: ...
    def apply_faults(self, events: Sequence[FaultEvent], *, dry_run: bool = False,
                     journaled: bool = False) -> FaultOutcome: ...
    def route(self, algorithm: str = "", lmc: int | None = None) -> Epoch: ...
    def load_fabric(self, fabric: Fabric, source: str) -> Fabric: ...
    def discover_fabric(self, ca: str, port: int, timeout: float) -> Fabric: ...


def catch_up(core: CoreCalls, r: Resumed) -> None:
    """Before serving: reroute from the resumed epoch to the state in force
    (``ApplyFaults`` with the step between their down sets, in chunks; a full
    route if the base or the settings changed), so that no client sees an
    epoch older than what the previous instance acknowledged: if that fails
    while the epoch served is older than the last one committed, the daemon
    is degraded (it would serve a down set without acknowledged faults)."""
    cur, base = core.store.current, core.base
    try:
        if r.behind and base is not None and not r.lost:
            events = (fault_events(down_of(cur), core.down)
                      if cur is not None and cur.base_hash == base.content_hash else [])
            n = core.limits.max_fault_events
            for i in range(0, len(events), n):
                # durable already (journal, last commit): routed even on a full disk
                ep = core.apply_faults(events[i:i + n], journaled=True).epoch
            if not events:
                ep = core.route()
            core.log("info", "caught_up", epoch=ep.id, events=len(events),
                     journal_events=r.journal_events)
    except ServiceError as err:
        core.log("error", "catch_up_failed", error=err.message)
        served = core.store.current
        if r.last_id > (served.id if served is not None else 0):
            core.state_loss.enter(f"the state committed last (epoch {r.last_id}) could not be "
                                  f"routed again: {err.message}", core.down)


def reconcile_live(core: CoreCalls) -> None:
    """Once serving: for a fabric from live discovery, load and route what
    discovery finds now when its hash differs from the resumed base."""
    src = core.base_source
    if core.base is not None and src.startswith("live") and not core.shutting_down.is_set() \
            and not core.state_loss.lost:
        try:
            seen = core.discover_fabric(src.partition(":")[2], 0, 0.0)
            if seen.content_hash != core.base.content_hash:
                core.load_fabric(seen, src)
                ep = core.route()
                core.log("info", "live_fabric_reconciled", epoch=ep.id,
                         hash=seen.content_hash)
        except ServiceError as err:
            core.log("error", "live_reconcile_failed", error=err.message)
