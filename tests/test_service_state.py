"""Durable daemon state (issue 16): the SQLite state database (round trip,
migration from schema 1, corrupt or foreign files moved aside, one daemon per
file), and on real ``smroute serve`` processes killed with SIGKILL: the same
epoch (id, checksum, down set, validation) served after a restart, every
acknowledged fault event kept, epoch ids continuing, instance ids telling
restarts apart (full GetTables streams, the client's checked patch), and the
OpenSM bridge resynchronizing with a restarted daemon."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from service_daemon import ROOT, start_daemon

from smroute.fabric.faults import DownSet, FaultEvent, apply_events, degraded_fabric
from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.fabric.model.arrays import Fabric
from smroute.lab.harness import wait_for as _wait
from smroute.routing.engine import route
from smroute.routing.validate import Failure, Validation
from smroute.service.epochs import table_checksum
from smroute.service.rpc.client import (
    SmrouteClient,
    TablesChecksumError,
    link_down,
    link_up,
    pb,
    switch_down,
    switch_up,
)
from smroute.service.state import codec
from smroute.service.state.store import (
    APPLICATION_ID,
    SCHEMA_V1,
    SCHEMA_VERSION,
    EpochRow,
    FabricRow,
    StateError,
    StateStore,
)

FIXTURE = str(ROOT / "fixtures" / "pgft-3-2.2.3-1.2.2-1.2.1.topo")
BIG = str(ROOT / "fixtures" / "pgft-2level-648.topo")


class Events:
    """A log function collecting ``(level, event, fields)``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, level: str, event: str, **fields: Any) -> None:
        self.seen.append((level, event, fields))

    def names(self) -> list[str]:
        return [e for _, e, _ in self.seen]


def _switch_links(f: Fabric) -> list[tuple[int, int]]:
    """Switch-to-switch links of ``f`` by their first end (GUID, port)."""
    sw = f.node_type[f.port_node[f.link_a]] == f.node_type[f.port_node[f.link_b]]
    a = f.link_a[sw & (f.node_type[f.port_node[f.link_a]] == 2)]
    return [(int(f.node_guid[f.port_node[r]]), int(f.port_num[r])) for r in a.tolist()]


def _row(eid: int, f: Fabric, ports: np.ndarray, seq: int) -> EpochRow:
    guid = np.arange(1, ports.shape[0] + 1, dtype=np.uint64)
    lid = np.arange(ports.shape[0], dtype=np.int64)
    desc = tuple(f"sw{i}" for i in range(ports.shape[0]))
    t = codec.encode_tables(guid, lid, desc, ports)
    return EpochRow(eid, eid - 1, "abc", f.content_hash, {"cause": "route"},
                    codec.down_to_json(DownSet()), seq, t, f"sha{eid}",
                    codec.validation_to_json("pending"), 1000.0 + eid)


# ----------------------------------------------------------------- the store
def test_store_round_trip_keeps_k_epochs_and_trims_the_journal(tmp_path: Path) -> None:
    f = read_topology(FIXTURE)
    log = Events()
    st = StateStore(tmp_path / "s" / "state.db", keep_epochs=2, log=log)
    assert (tmp_path / "s" / "state.db").stat().st_mode & 0o077 == 0  # private
    st.put_fabric(FabricRow(f.content_hash, "fab.topo", "ab" * 32, codec.encode_fabric(f)))
    g, p = _switch_links(f)[0]
    seq = st.append_journal(f.content_hash, [("link_down", g, p), ("link_up", 2**64 - 1, 7)])
    assert [(j.kind, j.guid, j.port) for j in st.journal()] == [
        ("link_down", g, p), ("link_up", 2**64 - 1, 7)]
    ports = np.random.default_rng(1).integers(0, 256, (5, 300), dtype=np.uint8)
    for eid in (1, 2, 3):
        st.put_epoch(_row(eid, f, ports + eid, seq - 1 if eid < 3 else seq))
    assert st.epoch_ids() == [3, 2]  # keep_epochs
    assert st.journal() == []  # epoch 3 includes every journaled event
    st.set_validation(3, codec.validation_to_json(Validation(
        10, 9, 1, 0, 0, 2, 1, failures=[Failure(5, "s", 7, "d", "dead end")])))
    st.set_meta(algorithm="dmodc", lmc="fabric")
    st.close()
    st = StateStore(tmp_path / "s" / "state.db", keep_epochs=2)
    row = st.epoch(3)
    assert row is not None and row.meta == {"cause": "route"} and row.tables_sha256 == "sha3"
    guid, lid, desc, got = codec.decode_tables(row.tables)
    assert np.array_equal(got, ports + 3) and desc[4] == "sw4" and guid.dtype == np.uint64
    v = codec.validation_from_json(row.validation)
    assert isinstance(v, Validation) and not v.ok and str(v.failures[0]).endswith("dead end")
    fr = st.fabric(f.content_hash)
    assert fr is not None and (fr.source, fr.source_sha256) == ("fab.topo", "ab" * 32)
    back = codec.decode_fabric(fr.data, f.content_hash)
    assert back.content_hash == f.content_hash and back.node_desc == f.node_desc
    assert st.meta()["base_hash"] == f.content_hash and st.meta()["lmc"] == "fabric"
    d = apply_events(f, DownSet(), [FaultEvent("link_down", g, p),
                                    FaultEvent("switch_down", int(f.node_guid[f.switches[0]]))])
    assert codec.down_from_json(codec.down_to_json(d)) == d
    with pytest.raises(codec.CodecError):
        codec.decode_fabric(fr.data, "0" * 64)  # not the recorded hash
    with pytest.raises(codec.CodecError):
        codec.decode_tables(b"\x78\x9c garbage")
    st.close()
    assert "state_db_moved_aside" not in log.names()


def test_schema_migration_from_version_1(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path, isolation_level=None)
    for stmt in SCHEMA_V1:
        db.execute(stmt)
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute("PRAGMA user_version = 1")
    t = codec.encode_tables(np.array([9], np.uint64), np.array([1]), ("sw",),
                            np.zeros((1, 70), np.uint8))
    db.execute("INSERT INTO epochs VALUES (7, 6, 'h', '{\"cause\": \"faults\"}', ?, 3, ?, "
               "'sha', 5.0)", (codec.down_to_json(DownSet()), t))
    db.execute("INSERT INTO meta VALUES ('last_epoch_id', '7')")
    db.close()
    log = Events()
    st = StateStore(path, log=log)
    assert ("info", "state_db_migrated") in [(lv, e) for lv, e, _ in log.seen]
    row = st.epoch(7)
    assert row is not None and (row.instance, row.validation, row.journal_seq) == (
        "", '"pending"', 3)
    assert row.meta == {"cause": "faults"} and st.meta() == {"last_epoch_id": "7"}
    st.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()
    assert not list(tmp_path.glob("state.db.corrupt-*"))


@pytest.mark.parametrize("kind", ["garbage", "truncated", "foreign", "newer"])
def test_corrupt_or_incompatible_database_is_moved_aside(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "state.db"
    if kind == "garbage":
        path.write_bytes(b"this is not SQLite\n" * 300)
    elif kind == "truncated":
        st = StateStore(path)
        ports = np.random.default_rng(2).integers(0, 256, (50, 3000), dtype=np.uint8)
        f = read_topology(FIXTURE)
        for eid in range(1, 6):
            st.put_epoch(_row(eid, f, ports, 0))
        st.close()
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        data = path.read_bytes()
        path.write_bytes(data[:4096] + b"\xff" * 4096 + data[8192:len(data) // 2])
    else:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("CREATE TABLE other(x)")
        if kind == "newer":
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        db.close()
    before = path.read_bytes()
    log = Events()
    st = StateStore(path, log=log, wallclock=lambda: 1.7e9)
    assert st.moved_aside is not None and st.moved_aside.name.startswith(
        "state.db.corrupt-20231114T")
    assert st.moved_aside.read_bytes() == before  # kept for a post-mortem
    assert ("error", "state_db_moved_aside") in [(lv, e) for lv, e, _ in log.seen]
    if kind == "truncated":  # the intact rows are salvaged, each one whole
        assert all((r := st.epoch(i)) is not None and r.tables_sha256 == f"sha{i}"
                   for i in st.epoch_ids())
    else:
        assert st.epoch_ids() == [] and st.meta() == {}
    st.set_meta(algorithm="dmodc")  # the new one works
    st.close()
    assert StateStore(path).moved_aside is None


def test_one_daemon_per_state_database(tmp_path: Path) -> None:
    st = StateStore(tmp_path / "state.db")
    with pytest.raises(StateError, match="in use by another smroute daemon"):
        StateStore(tmp_path / "state.db", lock_timeout=0.3)
    st.close()
    StateStore(tmp_path / "state.db", lock_timeout=0.3).close()


@pytest.mark.parametrize("fixture,algorithm,mode", [
    ("pgft-3-2.2.3-lmc2.topo", "dmodc", "tree"),
    ("pgft-2level-648-degraded.topo", "dmodk", "tree"),
    ("quantum-2level-agg-spine-hosts.topo", "dmodc", "tree+turns"),
    ("two-switch-4-4-p2.topo", "dmodc", "shortest"),
    ("pgft-2level-648-degraded.topo", "nmodc", "tree"),
])
def test_the_resumed_structure_is_the_routing_s(fixture: str, algorithm: str, mode: str) -> None:
    """What a resume recomputes around stored tables (graph, costs, dividers,
    NIDs, destinations, the turn root's orientation) equals what the routing
    had, in every mode; other algorithms than Dmodc/Dmodk are routed again."""
    from smroute.fabric.roles import fabric_roles
    from smroute.service.epochs import own_tables
    from smroute.service.state.resume import rebuild_result

    f = read_topology(str(ROOT / "fixtures" / fixture))
    r = own_tables(route(f, algorithm=algorithm, workers=1))
    assert r.mode == mode
    meta = {"algorithm": algorithm, "lmc_setting": "fabric", "mode": r.mode,
            "mode_reason": r.mode_reason, "turn_lids": r.turn_lids, "timings": {"x": 1.0}}
    b = rebuild_result(f, r.tables, meta, fabric_roles(f), None)
    assert b.tables is r.tables and (b.mode, b.turn_lids) == (r.mode, r.turn_lids)
    for k in ("costs", "dividers", "nids"):
        assert np.array_equal(getattr(b, k), getattr(r, k)), k
    for k in ("lid", "nid", "target", "local_port", "is_switch"):
        assert np.array_equal(getattr(b.dest, k), getattr(r.dest, k)), k
    for g, h in ((b.graph, r.graph), (b.walk_graph, r.walk_graph)):
        assert np.array_equal(g.rank, h.rank) and np.array_equal(g.grp_remote, h.grp_remote)
    other = f.with_removed(nodes=f.switches[:1])
    with pytest.raises(codec.CodecError):  # tables of another fabric do not fit
        rebuild_result(other, r.tables, meta, fabric_roles(other), None)


# ----------------------------------------------------------------- real daemons, SIGKILL
def _epoch(c: SmrouteClient, epoch: int = 0) -> pb.Epoch:
    return c.get_epoch(epoch, include_down_items=True)


def _down(ep: pb.Epoch) -> set[tuple[int, int, int]]:
    return {(int(e.kind), int(e.node_guid), int(e.port)) for e in ep.down_items}


def test_kill_9_restart_serves_the_same_epoch_and_ids_continue(tmp_path: Path) -> None:
    f = read_topology(FIXTURE)
    links = _switch_links(f)
    d = start_daemon(tmp_path / "d", fabric=FIXTURE)
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            c.apply_faults([link_down(*links[0]), link_down(*links[3])])
            c.apply_faults([switch_down(int(f.node_guid[f.switches[-1]]))])
            # same down set, one more epoch; an RPC's algorithm outlives a restart
            v = c.route("nmodc", wait_validation=True)
            before = _epoch(c)
            assert before.id == v.id == 4 and before.validation.state == pb.Validation.DONE
            assert before.algorithm == "nmodc"
            old_snap = c.tables()
        time.sleep(0.3)  # the writer thread stores the epoch and its validation
        assert d.kill() == -9
        t0 = time.monotonic()
        d.start()
        with SmrouteClient(d.address, timeout=60) as c:
            after = _epoch(c)
            took = time.monotonic() - t0
            assert (after.id, after.tables_sha256) == (before.id, before.tables_sha256)
            assert (after.lmc, after.algorithm) == (before.lmc, before.algorithm)
            assert _down(after) == _down(before) and len(after.down_items) == 3
            assert (after.down_links, after.down_switches) == (2, 1)
            assert after.resumed and not before.resumed
            assert after.instance_id != before.instance_id and len(after.instance_id) == 16
            assert after.validation.state == pb.Validation.DONE and after.validation.ok
            assert after.validation.summary == before.validation.summary
            snap = c.tables()  # checksum verified by the client
            assert snap.header.instance_id == after.instance_id
            assert np.array_equal(snap.tables.ports, old_snap.tables.ports)
            # ids continue; the resumed epoch reroutes incrementally like any other
            out = c.apply_faults([link_up(*links[0])])
            assert out.epoch.id == 5 and out.epoch.parent_id == 4 and not out.epoch.resumed
            assert out.epoch.algorithm == "nmodc"
            assert out.epoch.down_links == 1
            # another instance's since_epoch: the full tables, never a delta
            full = c.tables(since_epoch=4, since_instance=before.instance_id)
            n = len(f.switches) - 1  # one switch is down
            assert full.header.since_epoch == 0 and len(full.switches) == n
            delta = c.tables(since_epoch=4, since_instance=after.instance_id)
            assert delta.header.since_epoch == 4 and len(delta.switches) < n
            assert table_checksum(delta.patch(snap.tables)) == out.epoch.tables_sha256
            # a stopped daemon (SIGTERM) resumes too: epoch 5, the next one is 6
        assert d.stop() == 0
        d.start()
        with SmrouteClient(d.address, timeout=60) as c:
            assert _epoch(c).id == 5
            e6 = c.apply_faults([link_up(*links[3])]).epoch
            assert (e6.id, e6.algorithm) == (6, "nmodc")
        events = d.log_events()
        resumed = [e for e in events if e.get("event") == "resumed"]
        assert resumed and resumed[-1]["epoch"] == 5 and "Traceback" not in d.out.read_text()
        assert took < 30
    finally:
        d.stop()


def test_acknowledged_events_survive_kill_9_during_reroutes(tmp_path: Path) -> None:
    """A client applies link and switch events back to back (full reroutes
    of the 648-host tree) and records every answered call; SIGKILL lands
    mid-stream.  After the restart every answered event is in force, and the
    tables equal a from-scratch route of the resumed fault set."""
    f = read_topology(BIG)
    links = _switch_links(f)[:24]
    spines = [int(g) for g in f.node_guid[f.switches].tolist()][-3:]
    d = start_daemon(tmp_path / "d", fabric=BIG, workers=1)
    intended: dict[tuple[str, int, int], bool] = {}  # item -> down, as acknowledged
    inflight: list[tuple[str, int, int]] = []  # the item of the call in progress
    acked = [0]
    stop = threading.Event()
    errors: list[str] = []

    def load() -> None:
        rng = np.random.default_rng(7)
        with SmrouteClient(d.address, timeout=30) as c:
            while not stop.is_set():
                if rng.random() < 0.3:
                    g = spines[int(rng.integers(len(spines)))]
                    item, down = ("switch", g, 0), not intended.get(("switch", g, 0), False)
                    ev = switch_down(g) if down else switch_up(g)
                else:
                    g, p = links[int(rng.integers(len(links)))]
                    item, down = ("link", g, p), not intended.get(("link", g, p), False)
                    ev = link_down(g, p) if down else link_up(g, p)
                inflight[:] = [item]
                try:
                    c.apply_faults([ev])
                except grpc.RpcError as err:
                    errors.append(err.code().name)
                    return
                intended[item] = down  # acknowledged
                acked[0] += 1

    t = threading.Thread(target=load)
    t.start()
    # kill right after an answer: its epoch is likely not written yet (the
    # writer thread stores it after the reply), the next call is in flight
    _wait(lambda: acked[0] >= 15, 60, "15 acknowledged events")
    d.kill()
    stop.set()
    t.join(30)
    assert errors and errors[0] == "UNAVAILABLE"  # the kill cut a call short
    d.start()
    def key(k: str, g: int, p: int) -> tuple[int, int, int]:
        return (pb.FaultEvent.LINK_DOWN if k == "link" else pb.FaultEvent.SWITCH_DOWN, g, p)

    # the killed call was never answered: its item may be either way
    free = {key(*inflight[0])}
    want = {key(*i) for i, down in intended.items() if down} - free
    with SmrouteClient(d.address, timeout=60) as c:
        ep = _wait(lambda: (e := _epoch(c)) and want <= _down(e) and e, 60, "the catch-up")
        assert _down(ep) - want <= free  # nothing acknowledged is lost, nothing invented
        down = apply_events(f, DownSet(), [FaultEvent(
            "link_down" if k == pb.FaultEvent.LINK_DOWN else "switch_down", g, p)
            for k, g, p in _down(ep)])
        res = route(degraded_fabric(f, down), workers=1)
        assert table_checksum(res.tables) == ep.tables_sha256
        assert c.tables(ep.id).header.tables_sha256 == ep.tables_sha256
    assert d.stop() == 0
    assert "Traceback" not in d.out.read_text()


def test_patch_verifies_the_checksum_and_the_client_falls_back(tmp_path: Path) -> None:
    f = read_topology(FIXTURE)
    d = start_daemon(tmp_path / "d", "--state", "none", fabric=FIXTURE)
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            e1 = c.get_epoch()
            snap = c.tables()
            out = c.apply_faults([link_down(*_switch_links(f)[0])])
            delta = c.tables(since_epoch=e1.id, since_instance=e1.instance_id)
            good = delta.patch(snap.tables)
            assert table_checksum(good) == out.epoch.tables_sha256
            ports = np.array(snap.tables.ports, copy=True)
            ports[0, 1] ^= 1  # not epoch 1's tables: the delta cannot make epoch 2's
            bad = type(snap.tables)(snap.tables.switch_guid, snap.tables.switch_lid,
                                    snap.tables.switch_desc, ports)
            with pytest.raises(TablesChecksumError, match="patched from epoch 1"):
                delta.patch(bad)
            header, tables = c.tables_update(bad, e1.id, since_instance=e1.instance_id)
            assert header.since_epoch == 0 and header.epoch == out.epoch.id
            assert table_checksum(tables) == out.epoch.tables_sha256
            header, tables = c.tables_update(snap.tables, e1.id, since_instance=e1.instance_id)
            assert header.since_epoch == e1.id and np.array_equal(tables.ports, good.ports)
    finally:
        assert d.stop() == 0


def test_a_corrupt_state_database_is_moved_aside_by_the_daemon(tmp_path: Path) -> None:
    work = tmp_path / "d"
    work.mkdir()
    (work / "state.db").write_bytes(b"\x00garbage" * 1000)
    d = start_daemon(work, fabric=FIXTURE)
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            assert c.get_epoch().id == 1
        moved = [e for e in d.log_events() if e.get("event") == "state_db_moved_aside"]
        assert moved and moved[0]["level"] == "error"
        assert Path(str(moved[0]["moved_to"])).read_bytes() == b"\x00garbage" * 1000
    finally:
        assert d.stop() == 0


def test_journaled_events_beyond_the_stored_epoch_are_replayed(tmp_path: Path) -> None:
    """Events journaled (answered) after the last stored epoch, and a commit
    that was not stored, as a kill -9 leaves them: the restarted daemon serves
    the stored epoch, then reroutes to the state in force (ids after the
    highest committed)."""
    f = read_topology(FIXTURE)
    links = _switch_links(f)
    d = start_daemon(tmp_path / "d", fabric=FIXTURE)
    with SmrouteClient(d.address, timeout=60) as c:
        c.apply_faults([link_down(*links[0])])
        stored = _epoch(c)
    assert d.stop() == 0
    st = StateStore(tmp_path / "d" / "state.db")
    st.append_journal(f.content_hash, [("link_down", *links[1]), ("link_down", *links[2]),
                                       ("link_up", *links[0])])
    st.set_meta(last_epoch_id=7)  # epochs 3..7 were committed but never stored
    st.close()
    d.start()
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            want = {(pb.FaultEvent.LINK_DOWN, *links[1]), (pb.FaultEvent.LINK_DOWN, *links[2])}
            ep = _wait(lambda: (e := _epoch(c)) and e.id > 2 and e, 30, "the replay")
            assert (ep.id, ep.parent_id, _down(ep)) == (8, stored.id, want)
            assert ep.cause == "faults" and not ep.resumed
        resumed = next(e for e in d.log_events() if e.get("event") == "resumed")
        assert (resumed["epoch"], resumed["journal_events"]) == (2, 3)
    finally:
        assert d.stop() == 0
    # the replayed epoch is stored; the journal is empty again
    st = StateStore(tmp_path / "d" / "state.db")
    assert st.epoch_ids()[0] == 8 and st.journal() == []
    st.close()


def test_apply_faults_is_refused_when_its_events_cannot_be_recorded(tmp_path: Path) -> None:
    """The state database's disk is full: ApplyFaults fails with UNAVAILABLE
    and changes nothing (an event is never answered unless it is on disk);
    with space again it works, and what it answered survives kill -9."""
    from test_bridge_errors import fill, small_tmpfs

    f = read_topology(FIXTURE)
    links = _switch_links(f)
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        d = start_daemon(tmp_path / "d", "--state", str(disk / "state.db"), fabric=FIXTURE)
        try:
            with SmrouteClient(d.address, timeout=60) as c:
                e1 = c.get_epoch()
                filler = fill(disk)
                # a batch whose journal needs more room than the WAL already has
                burst = [link_down(*links[0]), link_up(*links[0])] * 4999
                with pytest.raises(grpc.RpcError) as err:
                    c.apply_faults(burst + [link_down(*links[1])])
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE
                assert "not recorded" in err.value.details()
                assert _epoch(c).id == e1.id and not _epoch(c).down_items
                filler.unlink()
                out = c.apply_faults([link_down(*links[2])])
                assert out.committed and out.epoch.down_links == 1
            d.kill()
            d.start()
            with SmrouteClient(d.address, timeout=60) as c:
                assert _down(_epoch(c)) == {(pb.FaultEvent.LINK_DOWN, *links[2])}
        finally:
            d.stop()


# ----------------------------------------------------------------- the bridge
HAVE_TOOLS = all(shutil.which(t) for t in ("ibsim", "opensm", "ibnetdiscover"))


@pytest.mark.real
@pytest.mark.skipif(not HAVE_TOOLS, reason="ibsim-utils, opensm, infiniband-diags not installed")
def test_bridge_resyncs_with_a_restarted_daemon_by_its_instance_id(tmp_path: Path) -> None:
    """The daemon is killed and resumes the same epoch id (ids do not go
    backwards): the bridge still notices the new instance, takes the daemon's
    down set, writes the resumed epoch again, and keeps sending changes."""
    from smroute.fabric.export.writers import write_ibsim_net
    from smroute.fabric.generate.trees import pgft
    from smroute.lab.processes import DaemonProcess
    from smroute.lab.sim import IbSim, run_opensm
    from smroute.opensm.bridge import Bridge, BridgeOptions

    fabric = pgft(3, [2, 2, 2], [1, 2, 2], [1, 1, 1])
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    lfts = tmp_path / "smroute.lfts"
    refs = [f'"S-{int(fabric.node_guid[s]):016x}"[{int(fabric.num_ports[s])}]'
            for s in fabric.switches[:2].tolist()]
    logged = Events()
    with IbSim(net, tmp_path / "sim") as sim:
        run_opensm(sim, tmp_path / "opensm")
        d = DaemonProcess(sim, tmp_path / "daemon")
        addr = d.start()
        b = Bridge(BridgeOptions(daemon=addr, lfts_file=lfts, trigger="none", load="discover",
                                 discover_env=sim.client_env(preload=True), poll_interval=0.5),
                   log=logged)
        b.connect()
        b.initialize()
        b.start()
        b.run_in_thread()
        try:
            _wait(lambda: b.state.written_epoch == 1, 30, "epoch 1 written")
            sim.console(f"Unlink {refs[0]}")
            _wait(lambda: b.state.written_epoch == 2, 30, "epoch 2 (link down) written")
            first = b.daemon_instance
            writes = len(b.syncs)
            time.sleep(0.5)  # the daemon's writer stores epoch 2
            d.kill()
            d.start()
            _wait(lambda: "daemon_restarted" in logged.names(), 30, "the bridge to resync")
            assert b.daemon_instance not in ("", first)
            _wait(lambda: len(b.syncs) > writes and b.syncs[-1].epoch == 2, 30,
                  "the resumed epoch 2 written again")
            assert len(b.state.down.links) == 1
            sim.console(f"Unlink {refs[1]}")
            _wait(lambda: b.state.written_epoch == 3, 30, "epoch 3 (second link) written")
            with SmrouteClient(addr) as c:
                ep = c.get_epoch(0)
                assert (ep.id, ep.down_links, ep.instance_id) == (3, 2, b.daemon_instance)
        finally:
            b.close()
            d.stop()


@pytest.mark.real
@pytest.mark.skipif(not HAVE_TOOLS, reason="ibsim-utils, opensm, infiniband-diags not installed")
def test_a_live_fabric_is_reconciled_after_the_resume(tmp_path: Path) -> None:
    """A daemon that loaded its fabric by live discovery is killed; a link goes
    down meanwhile.  The restarted daemon serves the resumed epoch first, then
    discovers the fabric again, and loads and routes it (its hash differs)."""
    from smroute.fabric.export.writers import write_ibsim_net
    from smroute.fabric.generate.trees import pgft
    from smroute.lab.processes import DaemonProcess
    from smroute.lab.sim import IbSim, run_opensm

    fabric = pgft(3, [2, 2, 2], [1, 2, 2], [1, 1, 1])
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    leaf = int(fabric.switches[0])
    ref = f'"S-{int(fabric.node_guid[leaf]):016x}"[{int(fabric.num_ports[leaf])}]'
    with IbSim(net, tmp_path / "sim") as sim:
        run_opensm(sim, tmp_path / "opensm")
        d = DaemonProcess(sim, tmp_path / "daemon", log_format="json")
        d.start()
        try:
            with SmrouteClient(d.address, timeout=120) as c:
                first = c.load_fabric_live()
                e1 = c.route()
            time.sleep(0.5)  # the writer thread stores epoch 1
            d.kill()
            sim.console(f"Unlink {ref}")
            d.start()
            with SmrouteClient(d.address, timeout=120) as c:
                again = c.get_epoch()
                assert (again.id, again.tables_sha256, again.resumed) == (
                    e1.id, e1.tables_sha256, True)
                ep = _wait(lambda: (e := c.get_epoch()) and e.id > e1.id and e, 60,
                           "the live fabric to be routed again")
                assert ep.base_fabric_hash != first.content_hash and ep.cause == "route"
                assert ep.parent_id == e1.id
            # (logged just after the epoch it commits: wait for the line)
            names = _wait(lambda: (n := [e.get("event") for e in d.log_events()])
                          and "live_fabric_reconciled" in n and n, 30, "the reconcile's log line")
            assert names.index("resumed") < names.index("live_fabric_reconciled")
        finally:
            d.stop()
