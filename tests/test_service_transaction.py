"""The daemon core's one state transaction (RoutingCore.change): Route, fault
batches, RouteSubnet, dry runs and resume all go through its gate; a dry run
commits nothing; a refused change keeps the last good epoch and says why;
routing settings change only on the sequencer thread (configure, SIGHUP)."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from smroute.fabric.faults import DownSet, FaultEvent, apply_events
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.routing.engine import route, validate_result
from smroute.service.config import load_config
from smroute.service.core import Change, RoutingCore
from smroute.service.epochs import table_checksum
from smroute.service.errors import ServiceError, Status
from smroute.service.log import Logger
from smroute.service.rpc.server import Daemon
from smroute.service.state.durable import Durable
from smroute.service.state.store import StateStore


class Sink:
    """Records what the core reports (the Metrics protocol)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.calls.append((name, args))

    def failures(self) -> list[str]:
        return [a[0] for n, a in self.calls if n == "reroute_failed"]


@pytest.fixture()
def complete() -> Fabric:
    return pgft(3, [2, 2, 2], [1, 2, 2], [1, 1, 1])


def cut_links(f: Fabric) -> tuple[Fabric, list[FaultEvent]]:
    """Six switch-to-switch links down: D-mod-K (complete trees only) then
    leaves CA pairs unrouted; Dmodc does not."""
    g, removed = degrade(f, np.random.default_rng(0), links=6)
    assert validate_result(route(g, workers=1, algorithm="dmodk")).ca_pairs_unroutable > 0
    events = [FaultEvent("link_down", int(r[0]), int(r[1])) for r in removed.link_ends]
    return g, events


@pytest.fixture()
def core() -> Iterator[RoutingCore]:
    c = RoutingCore(workers=1, coalesce_s=0.0, validate_epochs=False, metrics=Sink())
    yield c
    c.close()


@pytest.mark.usefixtures("offer_dmodk")
def test_every_path_is_gated_and_a_refusal_keeps_the_last_good_epoch(
        core: RoutingCore, complete: Fabric) -> None:
    sink = core.metrics
    assert isinstance(sink, Sink)
    core.load_fabric(complete, "complete")
    good = core.route("dmodk")  # fine on the complete tree
    sm, events = cut_links(complete)

    def refused(fn: Any, *args: Any, **kw: Any) -> str:
        with pytest.raises(ServiceError) as ei:
            fn(*args, **kw)
        assert ei.value.status == Status.FAILED_PRECONDITION
        assert core.store.current is not None and core.store.current.id == good.id
        assert core.store.ids() == [good.id]
        return ei.value.message

    # a dry run answers what the commit would: refused, and says so
    msg = refused(core.apply_faults, events, dry_run=True)
    assert msg.startswith("dry run: would be refused to commit") and "CA pairs" in msg
    assert core.down.empty and sink.failures() == []  # a dry run changes nothing
    # a fault batch: refused, the desired down set kept for the next change
    msg = refused(core.apply_faults, events)
    assert "refused to commit: the dmodk tables leave" in msg
    assert f"epoch {good.id} keeps serving" in msg
    assert core.down == apply_events(complete, DownSet(), events)
    # the subnet manager's view of the same fabric
    msg = refused(core.route_subnet, sm, 0, "sm")
    assert "refused to commit" in msg and f"epoch {good.id} keeps serving" in msg
    # Route with the algorithm that cannot: the setting stays what served
    msg = refused(core.route, "dmodk")
    assert "refused to commit" in msg
    # (the fault batch and the view are reroute failures; the Route a rejection)
    assert sink.failures() == ["unrouted_pairs", "unrouted_pairs", "route"]
    # the same state with Dmodc passes the gate; the settings come with the commit
    ep = core.route("dmodc")
    assert ep.id == good.id + 1 and core.settings.algorithm == "dmodc"
    assert ep.down == (6, 0, 0)


def test_a_dry_run_commits_nothing(core: RoutingCore, complete: Fabric) -> None:
    core.load_fabric(complete, "complete")
    e1 = core.route()
    _, events = cut_links(complete)
    out = core.apply_faults(events[:2], dry_run=True)
    assert not out.committed and out.epoch.id == 0 and out.epoch.parent_id == e1.id
    assert out.epoch.cause == "dry_run" and out.epoch.down == (2, 0, 0)
    assert out.diff is not None and out.diff.entries_changed > 0
    assert core.store.ids() == [e1.id] and core.down.empty
    real = core.apply_faults(events[:2])
    assert real.committed and real.epoch.id == e1.id + 1  # no id was taken
    assert real.epoch.tables_sha256 == out.epoch.tables_sha256


def test_a_route_that_fails_says_why_and_changes_nothing_served(
        core: RoutingCore, complete: Fabric) -> None:
    sink = core.metrics
    assert isinstance(sink, Sink)
    core.load_fabric(complete, "complete")
    e1 = core.route()
    every = [FaultEvent("switch_down", int(g), 0) for g in complete.node_guid[complete.switches]]
    with pytest.raises(ServiceError) as ei:
        core.apply_faults(every, dry_run=True)
    assert ei.value.status == Status.FAILED_PRECONDITION
    assert ei.value.message.startswith("dry run failed (nothing is committed): cannot route")
    assert sink.failures() == [] and core.down.empty
    with pytest.raises(ServiceError) as ei:
        core.apply_faults(every)
    assert ei.value.message.startswith(
        f"reroute after {len(every)} fault events failed (epoch {e1.id} keeps serving)")
    assert sink.failures() == ["routing_error"]
    assert core.store.current is not None and core.store.current.id == e1.id
    assert core.down.counts == (0, len(every), 0)  # the desired state, for the next change


def test_change_is_public_and_reroutes_incrementally(core: RoutingCore,
                                                     complete: Fabric) -> None:
    core.load_fabric(complete, "complete")
    e1 = core.route()
    _, events = cut_links(complete)
    down = apply_events(complete, DownSet(), events[:1])
    # from this (non-sequencer) thread: queued on the sequencer and waited for
    ch = core.change(Change("faults", complete, down))
    assert ch.committed and ch.incremental and ch.why_full == ""
    assert ch.epoch.id == e1.id + 1 and ch.diff is not None
    for k in ("degrade", "cpu"):
        assert k in ch.epoch.timings
    # nothing changed: nothing routed or committed
    again = core.change(Change("faults", complete, down))
    assert not again.committed and again.epoch.id == ch.epoch.id
    # full: routed from scratch and committed even though nothing changed
    full = core.change(Change("route", complete, down, full=True))
    assert full.committed and not full.incremental and full.why_full == "full route"
    assert full.epoch.tables_sha256 == ch.epoch.tables_sha256


def test_resume_goes_through_the_transaction(tmp_path: Path, complete: Fabric) -> None:
    path = tmp_path / "state.db"
    first = RoutingCore(workers=1, coalesce_s=0.0, validate_epochs=False,
                        durable=Durable(StateStore(path)))
    try:
        assert first.resume() is None  # nothing stored yet; notes the config's settings
        first.load_fabric(complete, "complete")
        e1 = first.route("nmodc", 0)  # an RPC's choice, not the config's (dmodc, 0)
    finally:
        first.close()
    again = RoutingCore(workers=1, coalesce_s=0.0, validate_epochs=False, lmc=0,
                        durable=Durable(StateStore(path)))
    try:
        r = again.resume()
        assert r is not None and r.epoch is not None and r.epoch.id == e1.id
        # the config did not change: the RPC's settings came back with the epoch
        assert (again.settings.algorithm, again.settings.lmc) == ("nmodc", 0)
        assert again.base is not None and again.base.content_hash == complete.content_hash
        assert again.store.current is not None
        assert table_checksum(again.store.current.tables) == table_checksum(e1.tables)
        _, events = cut_links(complete)
        ch = again.change(Change("faults", again.base, apply_events(
            complete, DownSet(), events[:1])))
        # the resumed epoch is the serving one of the same base: incremental
        assert ch.committed and ch.incremental and ch.epoch.id == e1.id + 1
    finally:
        again.close()


def test_settings_change_only_on_the_sequencer(core: RoutingCore) -> None:
    hold = threading.Event()
    started = threading.Event()
    core.seq.call(lambda: (started.set(), hold.wait(30)))
    assert started.wait(10)
    done: list[Any] = []
    t = threading.Thread(target=lambda: done.append(core.configure(algorithm="dmodc", lmc=1)))
    t.start()
    t.join(0.3)
    assert t.is_alive() and core.settings.algorithm == "nmodc"  # queued behind the job
    hold.set()
    t.join(10)
    assert done and done[0].algorithm == "dmodc" and core.settings.lmc == 1
    with pytest.raises(ServiceError) as ei:
        core.configure(algorithm="nope")
    assert ei.value.status == Status.INVALID_ARGUMENT
    with pytest.raises(AttributeError):
        core.settings.algorithm = "dmodc"  # type: ignore[misc]


def test_a_reload_changes_settings_through_the_sequencer(tmp_path: Path) -> None:
    cfg_path = tmp_path / "smroute.yaml"
    cfg_path.write_text("algorithm: dmodc\nlmc: 0\nmax_vls: 1\n")
    cfg = load_config(cfg_path)
    d = Daemon(cfg, config_path=cfg_path, log=Logger(io.StringIO(), fmt="text"))
    d.core = RoutingCore(workers=1, coalesce_s=0.0, validate_epochs=False,
                         algorithm=cfg.algorithm, lmc=cfg.lmc, max_vls=cfg.max_vls)
    try:
        hold = threading.Event()
        started = threading.Event()
        d.core.seq.call(lambda: (started.set(), hold.wait(30)))
        assert started.wait(10)
        cfg_path.write_text("algorithm: nmodc\nlmc: 1\nmax_vls: 2\n")
        ok: list[bool] = []
        t = threading.Thread(target=lambda: ok.append(d.reload()))
        t.start()
        t.join(0.3)
        s = d.core.settings
        assert t.is_alive() and (s.algorithm, s.lmc, s.max_vls) == ("dmodc", 0, 1)
        hold.set()
        t.join(10)
        s = d.core.settings
        assert ok == [True] and (s.algorithm, s.lmc, s.max_vls) == ("nmodc", 1, 2)
    finally:
        d.core.close()
