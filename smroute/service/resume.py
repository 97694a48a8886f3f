"""How the routing daemon comes back after a restart (:func:`resume` and
:func:`catch_up`, before it serves; :func:`reconcile_live`, once it serves),
from what :mod:`smroute.service.durable` wrote.

Resume: the acknowledged state (base fabric, down set in force: the last
commit's plus the journaled events after it, the highest epoch id) is
rebuilt by :func:`smroute.service.rebuild.in_force`, whatever damage the
database took.  If part of it is lost the daemon starts degraded: no epoch
is installed and no tables are served until the subnet manager's view,
a LoadFabric or a confirmed Route (:meth:`RoutingCore.enter_degraded`).
Otherwise the newest stored epoch whose tables decode and match their
SHA-256 becomes the current epoch, with the same id, tables, down set and
validation result.  Its fabric is the stored base minus its down set; the routing
structure (roles, switch graph, costs, NIDs, destinations: everything but
the routes) is recomputed in the epoch's mode (milliseconds; other
algorithms are routed again and must give the same checksum).  The next id
follows the highest ever committed.  Catch-up: reroute from the resumed
epoch to the state in force (``ApplyFaults`` with the step between their
down sets), route again if a committed epoch was lost, and, for a fabric
from live discovery, load and route what discovery finds when its hash
differs.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from smroute.discovery.changes import fault_events
from smroute.errors import RoutingError, SmrouteError
from smroute.fabric.faults import degraded_fabric
from smroute.fabric.ibnetdiscover import read_topology
from smroute.fabric.model import Fabric
from smroute.fabric.roles import FabricRoles, GuidOverrides, fabric_roles
from smroute.routing import dmodc
from smroute.routing.engine import ALGORITHMS, RoutingResult, route, turn_roots
from smroute.routing.pool import RoutePool
from smroute.routing.topology import rooted_graph, switch_graph
from smroute.routing.validate import Validation
from smroute.service import state_codec as codec
from smroute.service.durable import down_of, lmc_text, lmc_value
from smroute.service.epochs import Epoch, FaultRecord, own_tables, table_checksum
from smroute.service.errors import ServiceError
from smroute.service.rebuild import InForce, describe, in_force
from smroute.service.salvage import read_high_water
from smroute.service.store import EpochRow, StateError, StateStore
from smroute.tables.lft import ForwardingTables, lid_labels

if TYPE_CHECKING:
    from smroute.service.core import RoutingCore

__all__ = ["Resumed", "catch_up", "rebuild_result", "reconcile_live", "resume"]


@dataclass(frozen=True)
class Resumed:
    """What :func:`resume` found: the epoch now served (``None`` if none could
    be read), whether the state in force goes beyond it (journaled events, or
    a later commit that was not stored: :func:`catch_up` reroutes), journal
    events folded in, seconds taken, what was lost (then degraded)."""

    epoch: Epoch | None
    behind: bool
    journal_events: int
    seconds: float
    lost: tuple[str, ...] = ()


def rebuild_result(fabric: Fabric, tables: ForwardingTables, meta: dict[str, Any],
                   roles: FabricRoles, pool: RoutePool | None, max_vls: int = 1
                   ) -> RoutingResult:
    """The routing of ``fabric`` that produced ``tables`` (stored with ``meta``):
    the structure recomputed in the stored mode around the stored tables (Dmodc,
    Dmodk); other algorithms, and detours over VLs (with ``max_vls``), are
    routed again.  :class:`CodecError` if the result does not fit the tables."""
    alg, lmc, mode = str(meta["algorithm"]), lmc_value(str(meta["lmc_setting"])), meta["mode"]
    if alg not in ("dmodc", "dmodk") or mode == "tree+detours":
        res = own_tables(route(fabric, algorithm=alg, lmc=lmc, pool=pool, roles=roles,
                               workers=1 if pool is None else None, max_vls=max_vls))
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
    res = rebuild_result(fabric, tables, m, fabric_roles(fabric, ov), core.pool, core.max_vls)
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


def resume(core: RoutingCore) -> Resumed | None:
    """Take the state database's last committed epoch, base fabric, down set and
    settings into ``core`` (on its sequencer, before the daemon serves); see
    the module doc.  ``None`` when there is nothing to resume."""
    d = core.durable
    store = d.store
    if store is None:
        return None
    t0 = time.perf_counter()
    if store.moved_aside is not None and core.metrics is not None:
        core.metrics.state_db_moved_aside()
    bases = _Bases(store, d.configured)
    try:
        meta = store.meta()
        got = in_force(store, bases, core.log)
    except StateError as err:  # opened, but reads fail: all of it is lost
        meta, got = {}, InForce(lost=[f"everything: {err}"])
        hw, _ = read_high_water(store.path)
        got.last_epoch_id = hw.epoch_id if hw is not None else 0
    d.last_epoch_id = got.last_epoch_id
    d.adopt_mark(got.high_water)
    core.store.continue_after(got.last_epoch_id)
    try:  # a full disk must not throw away the state just read: logged, written next start
        store.set_meta(config_algorithm=d.settings[0], config_lmc=lmc_text(d.settings[1]))
    except StateError as err:
        core.log("error", "state_write_failed", what="the config's routing settings",
                 error=str(err))
    if got.base is None and not got.lost:
        return None  # nothing to resume
    if got.lost:
        return _degraded(core, got, meta, time.perf_counter() - t0)
    base, down, seq, n_journal = got.base, got.down, got.seq, got.journal_events
    assert base is not None
    ep, validation = _newest(store, bases, core)
    # an RPC's settings survive a restart unless the config's changed meanwhile
    cfg = (meta.get("config_algorithm"), meta.get("config_lmc"))
    if cfg == (d.settings[0], lmc_text(d.settings[1])) and meta.get("algorithm") in ALGORITHMS:
        try:
            core.algorithm, core.lmc = meta["algorithm"], lmc_value(meta.get("lmc", ""))
        except ValueError:
            core.log("warning", "state_settings_unreadable", lmc=meta.get("lmc", "")[:20])
    core.base, core.base_source, core.down = base, meta.get("base_source", ""), down
    d.journal_seq = seq
    if base.content_hash not in bases.from_file:  # else stored again at the next commit
        d._base = base.content_hash
    last = got.last_epoch_id
    if got.high_water is None:  # a database of an older smroute: its first mark
        d.mark(base.content_hash, *got.commit)
    if ep is not None:
        core.store.resume(ep, validation, last + 1)
        if ep.base_hash == base.content_hash:
            core._epoch_base = base  # the next reroute may be incremental
        if validation == "pending":
            core.validator.later(ep)
    # no stored epoch (all lost, or none committed): the state in force is routed
    behind = (last > 0 or d.configured is not None) if ep is None else (
        n_journal > 0 or last > ep.id)
    out = Resumed(ep, behind, n_journal, time.perf_counter() - t0)
    core.log("info", "resumed", epoch=ep.id if ep else None, instance=d.instance,
             down=down.summary(), journal_events=n_journal, last_committed=last,
             algorithm=core.algorithm, lmc=lmc_text(core.lmc), seconds=round(out.seconds, 4),
             moved_aside=str(store.moved_aside) if store.moved_aside else None,
             damage="; ".join(store.damage) or None)
    return out


def _degraded(core: RoutingCore, got: InForce, meta: dict[str, str], seconds: float
              ) -> Resumed:
    """Start degraded: the rebuilt base and down set kept (a confirmed Route
    routes them), no epoch installed, what was lost named."""
    core.base, core.base_source, core.down = got.base, meta.get("base_source", ""), got.down
    core.durable.journal_seq = got.seq
    store = core.durable.store
    assert store is not None
    lost = tuple(got.lost)
    core.enter_degraded("; ".join(lost))
    core.log("error", "resumed", epoch=None, instance=core.durable.instance,
             seconds=round(seconds, 4), **describe(got),
             moved_aside=str(store.moved_aside) if store.moved_aside else None,
             damage="; ".join(store.damage) or None)
    return Resumed(None, False, got.journal_events, seconds, lost)


def catch_up(core: RoutingCore, r: Resumed) -> None:
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
        last, served = core.durable.last_epoch_id, core.store.current
        if last > (served.id if served is not None else 0):
            core.enter_degraded(f"the state committed last (epoch {last}) could not be "
                                f"routed again: {err.message}")


def reconcile_live(core: RoutingCore) -> None:
    """Once serving: for a fabric from live discovery, load and route what
    discovery finds now when its hash differs from the resumed base."""
    src = core.base_source
    if core.base is not None and src.startswith("live") and not core.shutting_down.is_set() \
            and not core.degraded:
        try:
            seen = core.discover_fabric(src.partition(":")[2], 0, 0.0)
            if seen.content_hash != core.base.content_hash:
                core.load_fabric(seen, src)
                ep = core.route()
                core.log("info", "live_fabric_reconciled", epoch=ep.id,
                         hash=seen.content_hash)
        except ServiceError as err:
            core.log("error", "live_reconcile_failed", error=err.message)
