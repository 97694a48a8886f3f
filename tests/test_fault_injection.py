"""Fault injection (issue 16, part 6): real ``smroute serve`` and
``smroute opensm-bridge`` processes, real signals, real full disks.

What the other suites already cover is not repeated here (one kill -9 during
reroutes and a full state disk refusing ApplyFaults: ``test_service_state.py``;
a full disk for the LFT file under an in-process bridge:
``test_bridge_errors.py``).  This suite adds:

* kill -9 at random moments (seeded) while two clients apply batches of link
  events, four times over: every acknowledged event is in the state the
  restarted daemon serves once caught up, an unanswered batch is in force
  whole or not at all, the tables equal a from-scratch ``smroute route`` of
  the base fabric minus that fault set, and epoch ids never go backwards nor
  name two different table sets;
* kill -9 during state database writes (as soon as ApplyFaults answers a
  batch of thousands of events, while the writer stores its epoch, or while
  the batch is journaled): the database opens (WAL recovery, integrity
  check), no acknowledged event is lost;
* a restart on a full state disk: the daemon serves every acknowledged event
  (the catch-up needs no write), acknowledges nothing it cannot record, logs
  why, and recovers when space is freed;
* the bridge started on a full disk: no traceback, retried until space;
* 50 SIGHUPs (config changes included) under load: no event lost, no epoch
  from a reload, every table stream checksum-correct;
* kill -9 of the daemon under a running bridge CLI, OpenSM and ibsim: the
  bridge resyncs with the new instance and OpenSM's switches hold the tables
  of the epoch the daemon serves.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from service_daemon import ROOT, start_daemon
from test_bridge_errors import fill, small_tmpfs

from smroute.fabric.export.writers import format_topology, write_ibsim_net
from smroute.fabric.faults import DownSet, FaultEvent, apply_events, degraded_fabric
from smroute.fabric.generate.trees import pgft
from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.lab.harness import wait_for as _wait
from smroute.service.rpc.client import SmrouteClient, TablesChecksumError, link_down, link_up, pb
from smroute.service.state.store import StateStore
from smroute.tables.diff import diff_tables
from smroute.tables.formats import parse_lft_dump, read_tables
from smroute.tables.lft import ForwardingTables

SEED = 16
Link = tuple[int, int]  # a link by its first end: node GUID, port
HAVE_TOOLS = all(shutil.which(t) for t in ("ibsim", "opensm", "ibnetdiscover", "dump_fts"))


# ----------------------------------------------------------------- helpers
def _fabric(tmp: Path) -> tuple[Fabric, str]:
    """A small generated PGFT (512 hosts, 192 switches, 8 up-links per leaf)
    written as ibnetdiscover text, and that file read back."""
    path = tmp / "pgft.topo"
    path.write_text("\n".join(format_topology(pgft(3, [8, 8, 8], [1, 8, 8], [1, 1, 1]))) + "\n")
    return read_topology(str(path)), str(path)


def _links(f: Fabric, n: int, rng: np.random.Generator) -> list[Link]:
    """``n`` random switch-to-switch links, at most 2 at any switch (of its 8
    up- and 8 down-links): no set of them can cut the fabric."""
    sw = f.node_type == NodeType.SWITCH
    na, nb = f.port_node[f.link_a], f.port_node[f.link_b]
    used: dict[int, int] = {}
    out: list[Link] = []
    for li in rng.permutation(np.flatnonzero(sw[na] & sw[nb])).tolist():
        a, b = int(na[li]), int(nb[li])
        if used.get(a, 0) < 2 and used.get(b, 0) < 2:
            used[a], used[b] = used.get(a, 0) + 1, used.get(b, 0) + 1
            out.append((int(f.node_guid[a]), int(f.port_num[f.link_a[li]])))
            if len(out) == n:
                return out
    raise AssertionError("not enough links")


def _toggle(links: set[Link], pick: list[Link]) -> tuple[list[pb.FaultEvent], set[Link]]:
    """Events bringing each picked link up if it is in ``links``, else down; the new set."""
    after = set(links)
    events = []
    for lk in pick:
        events.append(link_up(*lk) if lk in after else link_down(*lk))
        after ^= {lk}
    return events, after


def _down_links(ep: pb.Epoch) -> set[Link]:
    assert all(e.kind == pb.FaultEvent.LINK_DOWN for e in ep.down_items)
    return {(int(e.node_guid), int(e.port)) for e in ep.down_items}


def _event(d: Any, name: str) -> dict[str, Any] | None:
    """The last JSON log line of this daemon start named ``name``."""
    found = [e for e in d.log_events() if e.get("event") == name]
    return found[-1] if found else None


def _caught_up(d: Any, c: SmrouteClient, timeout: float = 60.0) -> pb.Epoch:
    """The epoch a restarted daemon serves once it caught up with the state in
    force (its ``resumed`` line says whether it was behind)."""
    r = _event(d, "resumed")
    assert r is not None, d.out.read_text()[-2000:]
    if r["journal_events"] or r["last_committed"] > (r["epoch"] or 0):
        _wait(lambda: _event(d, "caught_up") or _event(d, "catch_up_failed"), timeout,
              "the catch-up")
        failed = _event(d, "catch_up_failed")
        assert failed is None, failed
    return c.get_epoch(include_down_items=True)


def _route_cli(base: Fabric, down: set[Link], work: Path) -> ForwardingTables:
    """``smroute route`` (a real process, from scratch) of ``base`` minus ``down``."""
    events = [FaultEvent("link_down", g, p) for g, p in sorted(down)]
    src, out = work / "degraded.topo", work / "degraded.lfts"
    fab = degraded_fabric(base, apply_events(base, DownSet(), events))
    src.write_text("\n".join(format_topology(fab)) + "\n")
    r = subprocess.run([sys.executable, "-m", "smroute", "route", str(src), "--out", str(out),
                        "--workers", "1", "--quiet"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return read_tables(out)


def _same_ids(seen: dict[int, str], epochs: list[tuple[int, str]]) -> None:
    """Record (epoch id, tables checksum) pairs; an id never names two table sets."""
    for eid, sha in epochs:
        assert seen.setdefault(eid, sha) == sha, f"epoch id {eid} reused for other tables"


class Applier(threading.Thread):
    """A client applying batches of 1-3 link events on its own ``links``, back
    to back, until a call fails (the kill).  ``down``: the state acknowledged;
    ``pending``: the state of the call that got no answer."""

    def __init__(self, address: str, links: list[Link], down: set[Link], seed: int) -> None:
        super().__init__(daemon=True)
        self.address, self.links, self.seed = address, links, seed
        self.down, self.pending = set(down), set(down)
        self.acks: list[tuple[int, str]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        rng = np.random.default_rng(self.seed)
        with SmrouteClient(self.address, timeout=30) as c:
            while not self.stop.is_set():
                k = int(rng.integers(1, 4))
                pick = [self.links[i] for i in rng.choice(len(self.links), k, replace=False)]
                events, self.pending = _toggle(self.down, pick)
                try:
                    out = c.apply_faults(events)
                except grpc.RpcError as err:
                    self.errors.append(err.code().name)
                    return
                self.acks.append((int(out.epoch.id), out.epoch.tables_sha256))
                self.down = self.pending


# ----------------------------------------------------------------- kill -9
def test_kill_9_at_random_moments_keeps_every_acknowledged_event(tmp_path: Path) -> None:
    base, path = _fabric(tmp_path)
    rng = np.random.default_rng(SEED)
    links = _links(base, 24, rng)
    halves = [links[0::2], links[1::2]]  # one per client
    down: list[set[Link]] = [set(), set()]
    seen: dict[int, str] = {}
    report = []
    d = start_daemon(tmp_path / "d", fabric=path)
    try:
        for cycle in range(4):
            apps = [Applier(d.address, halves[k], down[k], SEED * 100 + 2 * cycle + k)
                    for k in (0, 1)]
            for a in apps:
                a.start()
            _wait(lambda apps=apps: all(a.acks for a in apps), 30, "both clients answered")
            time.sleep(float(rng.uniform(0.1, 1.0)))
            assert d.kill() == -9
            for a in apps:
                a.join(60)
                assert not a.is_alive() and a.errors == ["UNAVAILABLE"], a.errors
                ids = [eid for eid, _ in a.acks]
                assert ids == sorted(ids)  # one client never sees ids go back
                _same_ids(seen, a.acks)
            top = max(seen)
            assert "Traceback" not in d.out.read_text()
            d.start()
            with SmrouteClient(d.address, timeout=60) as c:
                ep = _caught_up(d, c)
                got = _down_links(ep)
                for k, a in enumerate(apps):  # acknowledged: in force; unanswered: whole or not
                    mine = got & set(halves[k])
                    assert mine in (a.down, a.pending), (cycle, k)
                    down[k] = mine
                assert got == down[0] | down[1]
                resumed = _event(d, "resumed")
                assert resumed is not None and resumed["last_committed"] >= top
                assert ep.id >= top  # never behind what a client was answered
                _same_ids(seen, [(int(ep.id), ep.tables_sha256)])
                rid = resumed["epoch"]
                _same_ids(seen, [(rid, c.get_epoch(rid).tables_sha256)])
                assert ep.id == rid or ep.id > resumed["last_committed"]  # new ids are new
                want = _route_cli(base, got, tmp_path)
                assert diff_tables(want, c.tables(ep.id).tables).identical, cycle
                report.append(f"acked {sum(len(a.acks) for a in apps)} calls up to epoch {top}, "
                              f"resumed {rid}, served {ep.id}, {len(got)} links down")
    finally:
        d.stop()
    assert "Traceback" not in d.out.read_text()
    print("kill -9 cycles:", *report, sep="\n  ")


def _wal_torn(wal: Path) -> int:
    """Frames of the current WAL generation after its last commit frame: > 0
    when the process died while writing a transaction."""
    data = wal.read_bytes() if wal.exists() else b""
    if len(data) < 32:
        return 0
    page, salts = struct.unpack(">I", data[8:12])[0], data[16:24]
    off, tail = 32, 0
    while off + 24 + page <= len(data) and data[off + 8:off + 16] == salts:
        tail = 0 if struct.unpack(">I", data[off + 4:off + 8])[0] else tail + 1
        off += 24 + page
    return tail


def test_kill_9_during_state_database_writes(tmp_path: Path) -> None:
    """Each batch holds thousands of events (a journal transaction of ~1 MB,
    and an epoch write that deletes those rows, then a checkpoint): the kill
    lands as soon as the answer arrives (the writer is storing the epoch) or
    while the call is in flight (the journal is being written)."""
    base, path = _fabric(tmp_path)
    rng = np.random.default_rng(SEED + 1)
    links = _links(base, 12, rng)
    d = start_daemon(tmp_path / "d", fabric=path)
    db = Path(d.state)
    down: set[Link] = set()
    stats = {"acked": 0, "acked, epoch not stored yet": 0, "in flight": 0,
             "in flight, in force after": 0, "torn writes": 0}
    try:
        for cycle in range(10):
            noise = [link_down(*links[0]), link_up(*links[0])] * int(rng.integers(500, 1500))
            events, after = _toggle(down, [links[1 + int(rng.integers(len(links) - 1))]])
            res: dict[str, Any] = {}

            def call(batch: list[pb.FaultEvent] = noise + events,
                     res: dict[str, Any] = res) -> None:
                try:
                    with SmrouteClient(d.address, timeout=60) as c:
                        res["epoch"] = int(c.apply_faults(batch).epoch.id)
                except grpc.RpcError as err:
                    res["error"] = err.code().name

            t = threading.Thread(target=call)
            in_flight = rng.random() < 0.4
            t.start()
            if in_flight:  # the call takes some 50-150 ms
                time.sleep(float(rng.uniform(0.01, 0.07)))
            else:
                while t.is_alive() and not res:
                    time.sleep(0.0002)
            d.kill()
            t.join(30)
            assert res.get("error", "UNAVAILABLE") == "UNAVAILABLE", res
            stats["torn writes"] += _wal_torn(Path(f"{db}-wal")) > 0
            copy = tmp_path / f"copy{cycle}"
            copy.mkdir()
            for suffix in ("", "-wal"):
                if Path(f"{db}{suffix}").exists():
                    shutil.copy(f"{db}{suffix}", copy / f"state.db{suffix}")
            con = sqlite3.connect(copy / "state.db")  # WAL recovery, as the daemon does
            assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            stored = {r[0] for r in con.execute("SELECT id FROM epochs")}
            con.close()
            stats["in flight" if "epoch" not in res else "acked"] += 1
            stats["acked, epoch not stored yet"] += "epoch" in res and res["epoch"] not in stored
            assert "Traceback" not in d.out.read_text()
            d.start()
            assert _event(d, "state_db_moved_aside") is None
            with SmrouteClient(d.address, timeout=60) as c:
                got = _down_links(_caught_up(d, c))
            assert got == after if "epoch" in res else got in (down, after), cycle
            stats["in flight, in force after"] += "epoch" not in res and got == after != down
            down = got
    finally:
        d.stop()
    print("kills:", stats)


# ----------------------------------------------------------------- full disks
def test_a_restart_on_a_full_state_disk_serves_every_acknowledged_event(
        tmp_path: Path) -> None:
    """The daemon restarts with an answered event not in a stored epoch and no
    byte free on the state disk: it resumes (nothing to write), catches up (the
    events are on disk already), refuses new events it cannot record (the
    served epoch stays), logs why, and records again once space is freed."""
    base, path = _fabric(tmp_path)
    links = _links(base, 3, np.random.default_rng(SEED + 2))
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        d = start_daemon(tmp_path / "d", "--state", str(disk / "state.db"), fabric=path)
        try:
            with SmrouteClient(d.address, timeout=60) as c:
                c.apply_faults([link_down(*links[0])])
            assert d.stop() == 0
            st = StateStore(disk / "state.db")  # answered, epoch never stored (kill -9)
            st.append_journal(base.content_hash, [("link_down", *links[1])])
            st.close()
            filler = fill(disk)
            os.truncate(filler, filler.stat().st_size - 32768)  # SQLite's -shm index only
            d.start()  # before: resume failed on a write, "starting empty", exit 1
            with SmrouteClient(d.address, timeout=60) as c:
                ep = _caught_up(d, c)
                assert _down_links(ep) == {links[0], links[1]}  # before: links[0] only
                assert ep.cause == "faults"
                why = [e for e in d.log_events() if e.get("event") == "state_write_failed"]
                assert why and all("disk is full" in str(e["error"]) for e in why)
                with pytest.raises(grpc.RpcError) as err:
                    c.apply_faults([link_down(*links[2])])
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE
                assert "not recorded" in (err.value.details() or "")
                assert c.get_epoch().id == ep.id  # the last good epoch keeps serving
                filler.unlink()
                out = c.apply_faults([link_down(*links[2])])
                assert out.committed and out.epoch.id > ep.id
            d.kill()
            d.start()
            with SmrouteClient(d.address, timeout=60) as c:
                again = _caught_up(d, c)
                assert _down_links(again) == set(links) and again.id >= out.epoch.id
            assert d.stop() == 0
        finally:
            d.stop()


def _bridge_cli(sim: Any, addr: str, lfts: Path, out: Path, *args: str) -> Any:
    """``smroute opensm-bridge`` as a real process on ``sim`` (its log in ``out``)."""
    cmd = [sys.executable, "-m", "smroute", "opensm-bridge", "--daemon", addr,
           "--lfts-file", str(lfts), "--load", "discover", *args]
    with open(out, "wb") as fh:
        return subprocess.Popen(cmd, cwd=ROOT, env=sim.client_env(preload=True),
                                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _stop_bridge(p: Any) -> int:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
    return int(p.returncode)


@pytest.mark.real
@pytest.mark.skipif(not HAVE_TOOLS, reason="ibsim-utils, opensm, infiniband-diags not installed")
def test_a_bridge_started_on_a_full_disk_retries_without_a_traceback(tmp_path: Path) -> None:
    from smroute.lab.processes import DaemonProcess
    from smroute.lab.sim import IbSim, run_opensm
    from smroute.opensm.bridge_state import BASE_FILE, STATE_FILE

    net = tmp_path / "fabric.net"
    write_ibsim_net(pgft(3, [2, 2, 2], [1, 2, 2], [1, 1, 1]), net)
    log = tmp_path / "bridge.out"
    with small_tmpfs(tmp_path / "disk") as disk, IbSim(net, tmp_path / "sim") as sim:
        lfts = disk / "smroute.lfts"  # its state (the default) on the same full disk
        filler = fill(disk)
        run_opensm(sim, tmp_path / "opensm")
        d = DaemonProcess(sim, tmp_path / "d")
        addr = d.start()
        p = _bridge_cli(sim, addr, lfts, log, "--no-trigger", "--poll-interval", "0")
        try:
            _wait(lambda: log.read_text().count("event=lfts_write_failed") >= 2
                  or p.poll() is not None, 30, "two failed writes")
            text = log.read_text()
            assert p.poll() is None, text  # before: OSError traceback from initialize(), exit 1
            assert "event=state_write_failed" in text and "No space left" in text
            filler.unlink()
            _wait(lambda: "event=epoch_written epoch=1" in log.read_text(), 30, "epoch 1")
            with SmrouteClient(addr) as c:
                assert diff_tables(read_tables(lfts), c.tables(1).tables).identical
            assert (disk / BASE_FILE).exists() and (disk / STATE_FILE).exists()
            assert _stop_bridge(p) == 0
            assert "Traceback" not in log.read_text()
        finally:
            _stop_bridge(p)
            d.stop()


def test_a_bridge_state_dir_that_does_not_exist_is_exit_2(tmp_path: Path) -> None:
    """Not a disk to wait for but a mistake: said at once (a traceback before)."""
    r = subprocess.run([sys.executable, "-m", "smroute", "opensm-bridge", "--daemon",
                        "127.0.0.1:1", "--lfts-file", str(tmp_path / "x.lfts"), "--state-dir",
                        str(tmp_path / "missing"), "--no-trigger"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"--state-dir: {tmp_path / 'missing'}: not an existing directory" in r.stderr


# ----------------------------------------------------------------- SIGHUP storm
def test_50_sighups_under_load_lose_nothing_and_commit_nothing(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    base, path = _fabric(tmp_path)
    links = _links(base, 16, np.random.default_rng(SEED + 3))
    halves = [links[0::2], links[1::2]]
    conf = tmp_path / "smroute.yaml"
    variants = ["coalesce_ms: 10\nepoch_history: 8\n", "coalesce_ms: 30\nepoch_history: 16\n"]
    conf.write_text(variants[0])
    d = start_daemon(tmp_path / "d", "--config", str(conf), fabric=path)
    request.addfinalizer(d.stop)  # also when an assertion fails
    stop = threading.Event()
    streams = {"full": 0, "delta": 0}
    errors: list[str] = []
    watched: list[tuple[int, str]] = []

    def stream() -> None:
        """Full streams (checksum verified by the client) and the delta from the
        previous one patched onto its tables (verified too), in a loop."""
        prev = None
        with SmrouteClient(d.address, timeout=30) as c:
            while not stop.is_set():
                try:
                    full = c.tables()
                    streams["full"] += 1
                    if prev is not None:
                        delta = c.tables(full.epoch, since_epoch=prev.epoch,
                                         since_instance=prev.header.instance_id)
                        if not diff_tables(delta.patch(prev.tables), full.tables).identical:
                            errors.append(f"delta {prev.epoch}->{full.epoch} differs")
                        streams["delta"] += 1
                    prev = full
                except TablesChecksumError as err:
                    errors.append(str(err))
                except grpc.RpcError as err:  # an epoch trimmed meanwhile: next round
                    if err.code() != grpc.StatusCode.NOT_FOUND:
                        errors.append(f"{err.code().name}: {err.details()}")

    def watch(call: Any) -> None:
        try:
            for ep in call:
                watched.append((int(ep.id), ep.cause))
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.CANCELLED:
                errors.append(f"watch: {err.code().name}")

    with SmrouteClient(d.address, timeout=30) as c:
        first = c.get_epoch()
        call = c.watch()
        threads = [threading.Thread(target=watch, args=(call,)),
                   *(threading.Thread(target=stream) for _ in range(2))]
        apps = [Applier(d.address, halves[k], set(), SEED * 10 + k) for k in (0, 1)]
        threads[0].start()
        _wait(lambda: watched, 10, "the watch's first epoch")
        for t in [*threads[1:], *apps]:
            t.start()
        try:
            for i in range(50):
                if i % 5 == 4:  # a changed file too (keys that apply live)
                    conf.with_suffix(".tmp").write_text(variants[(i // 5) % 2])
                    conf.with_suffix(".tmp").replace(conf)
                d.signal(signal.SIGHUP)
                time.sleep(0.05)
            time.sleep(0.3)
        finally:
            for a in apps:
                a.stop.set()
                a.join(30)
            stop.set()
            for t in threads[1:]:
                t.join(30)
            last = c.get_epoch(include_down_items=True)
            _wait(lambda: watched and watched[-1][0] == last.id, 10, "the watch to catch up")
            call.cancel()
            threads[0].join(10)
        assert d.proc.poll() is None
        assert all(not a.errors for a in apps) and all(a.acks for a in apps)
        assert _down_links(last) == apps[0].down | apps[1].down  # no event lost
        acked = {eid for a in apps for eid, _ in a.acks}
        ids = [eid for eid, _ in watched]
        assert ids == sorted(set(ids)) and ids[0] == first.id
        assert set(ids[1:]) == acked and len(acked) == last.id - first.id  # no extra epoch
        assert all(cause == "faults" for _, cause in watched[1:])
    events = [e["event"] for e in d.log_events()]
    assert d.stop() == 0
    assert events.count("reloaded") >= 5 and "reload_failed" not in events
    assert "routing_settings_changed" not in events
    assert errors == [] and streams["delta"] >= 10, (errors, streams)
    assert "Traceback" not in d.out.read_text()
    print("SIGHUP storm:", events.count("reloaded"), "reloads,", len(acked), "epochs,", streams)


# ----------------------------------------------------------------- bridge
def _dump(sim: Any) -> ForwardingTables:
    from smroute.lab.sim import dump_switch_routes

    return parse_lft_dump(dump_switch_routes(sim).splitlines(), "dump_fts")


def _bridge_serves(c: SmrouteClient, sim: Any, lfts: Path, links: int) -> pb.Epoch:
    """Wait until the daemon serves an epoch with ``links`` links down, the
    bridge's file holds its tables and OpenSM's switches too; that epoch."""
    def file_is_current() -> Any:
        cur = c.get_epoch()
        return cur.down_links == links and lfts.exists() and diff_tables(
            read_tables(lfts), c.tables(cur.id).tables).identical and cur

    cur = _wait(file_is_current, 60, f"the file to hold an epoch with {links} links down")
    want = c.tables(cur.id).tables
    _wait(lambda: diff_tables(want, _dump(sim)).identical, 60, "switches = the epoch")
    return cur  # type: ignore[no-any-return]


@pytest.mark.real
@pytest.mark.skipif(not HAVE_TOOLS, reason="ibsim-utils, opensm, infiniband-diags not installed")
def test_daemon_kill_9_under_a_running_bridge_and_opensm(tmp_path: Path) -> None:
    """The bridge CLI beside a real OpenSM (file engine, console, its log as
    trigger) reports two cut links; the daemon is killed as soon as the second
    is answered, and restarted: the bridge takes the new instance's state and
    writes the resumed epoch (OpenSM's switches hold it).  Killed again, with
    a link relinked while it is down: the restarted daemon gets the change."""
    from smroute.lab.processes import DaemonProcess, OpenSMProcess
    from smroute.lab.sim import IbSim

    fabric = pgft(3, [2, 2, 2], [1, 2, 2], [1, 1, 1])
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    refs = [f'"S-{int(fabric.node_guid[s]):016x}"[{int(fabric.num_ports[s])}]'
            for s in fabric.switches[:2].tolist()]
    lfts, log = tmp_path / "smroute.lfts", tmp_path / "bridge.out"
    with IbSim(net, tmp_path / "sim") as sim, \
            OpenSMProcess(sim, tmp_path / "opensm", lfts_file=lfts) as osm:
        d = DaemonProcess(sim, tmp_path / "d", log_format="json")
        addr = d.start()
        p = _bridge_cli(sim, addr, lfts, log, "--console", f"127.0.0.1:{osm.console_port}",
                        "--opensm-log", str(osm.log), "--poll-interval", "5",
                        "--debounce", "0.2")
        try:
            _wait(lambda: "event=epoch_written epoch=1 " in log.read_text(), 60, "epoch 1")
            with SmrouteClient(addr) as c:
                before = c.get_epoch().instance_id
            sim.console(f"Unlink {refs[0]}")
            _wait(lambda: "event=faults_applied" in log.read_text(), 30, "cut 1 applied")
            sim.console(f"Unlink {refs[1]}")
            deadline = time.monotonic() + 30
            while log.read_text().count("event=faults_applied") < 2:  # kill at once
                assert time.monotonic() < deadline and p.poll() is None, log.read_text()
                time.sleep(0.001)
            assert d.kill() == -9  # its epoch may not be stored yet
            d.start()
            line = _wait(lambda: next((ln for ln in log.read_text().splitlines()
                                       if "event=daemon_restarted" in ln), None), 60,
                         "the bridge to resync")
            with SmrouteClient(addr, timeout=60) as c:
                ep = _caught_up(d, c)
                assert ep.instance_id != before and f"instance={ep.instance_id}" in line
                assert ep.down_links == 2 and ep.id >= 3
                assert _bridge_serves(c, sim, lfts, 2).id >= ep.id
            # down again; meanwhile the first link comes back
            assert d.kill() == -9
            sim.console(f"ReLink {refs[0]}")
            d.start()
            with SmrouteClient(addr, timeout=60) as c:
                third = c.get_epoch().instance_id
                cur = _bridge_serves(c, sim, lfts, 1)
                assert cur.id > ep.id and cur.instance_id == third
            assert log.read_text().count("event=daemon_restarted") == 2
            assert p.poll() is None and _stop_bridge(p) == 0
            assert "Traceback" not in log.read_text()
        finally:
            _stop_bridge(p)
            d.stop()
