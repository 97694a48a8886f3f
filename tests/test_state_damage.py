"""The state database under damage: bit flips, truncation, a zeroed header,
every table and column garbled, rows of wrong types and out-of-range
values, a newer schema.  Each case: a state with acknowledged faults (three
committed, one journaled and answered but never committed, as kill -9
leaves it) is damaged, then the daemon's core starts on it, takes one more
acknowledged fault, and starts again.  Every time it starts; it never serves
two different table sets under one epoch id; it never serves tables whose
down set lacks an acknowledged fault (or serves none, degraded, and says
what was lost); and a damaged file is moved aside and logged.

Most cases drive :class:`~smroute.service.core.RoutingCore` and its state
database in-process (what ``smroute serve`` runs before it listens); a few
run real ``smroute serve`` processes."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from service_daemon import ROOT, start_daemon

from smroute.errors import RoutingError
from smroute.fabric.faults import FaultEvent
from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.fabric.model.arrays import Fabric
from smroute.service.core import RoutingCore
from smroute.service.errors import ServiceError, Status
from smroute.service.metrics import ServiceMetrics
from smroute.service.rpc.client import SmrouteClient, link_down
from smroute.service.rpc.subnet import subnet_request
from smroute.service.state.durable import Durable
from smroute.service.state.resume import catch_up
from smroute.service.state.salvage import (
    COLUMNS,
    mark_paths,
    read_high_water,
    row_check,
    write_high_water,
)
from smroute.service.state.store import SCHEMA_VERSION, StateStore

FIXTURE = str(ROOT / "fixtures" / "pgft-3-2.2.3-1.2.2-1.2.1.topo")
FAB = read_topology(FIXTURE)


def _switch_links(f: Fabric) -> list[tuple[int, int]]:
    sw = f.node_type[f.port_node[f.link_a]] == f.node_type[f.port_node[f.link_b]]
    a = f.link_a[sw & (f.node_type[f.port_node[f.link_a]] == 2)]
    return [(int(f.node_guid[f.port_node[r]]), int(f.port_num[r])) for r in a.tolist()]


LINKS = _switch_links(FAB)
#: committed (A, A2), journaled only (C), taken after the damage (B)
A, A2, C, B = LINKS[0], LINKS[3], LINKS[5], LINKS[7]


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, level: str, event: str, **fields: Any) -> None:
        self.seen.append((level, event, fields))

    def errors(self) -> list[str]:
        return [e for lv, e, _ in self.seen if lv == "error"]


def _core(path: Path, log: Events, metrics: ServiceMetrics | None = None,
          configured: str | None = None) -> RoutingCore:
    store = StateStore(path, log=log, lock_timeout=5.0)
    return RoutingCore(workers=1, coalesce_s=0.0, validate_epochs=False, log=log,
                       metrics=metrics, durable=Durable(store, log=log, configured=configured))


def _start(path: Path, metrics: ServiceMetrics | None = None, configured: str | None = None
           ) -> tuple[RoutingCore, Events]:
    """What ``smroute serve`` does before it listens: resume, catch up
    (``configured``: the config's ``fabric:`` file, when it is the base)."""
    log = Events()
    core = _core(path, log, metrics, configured)
    r = core.resume()
    if r is not None:
        catch_up(core, r)
    return core, log


def _stop(core: RoutingCore) -> None:
    core.durable.flush()
    core.close()


def _links_down(core: RoutingCore) -> set[tuple[int, int]]:
    ep = core.store.current
    assert ep is not None
    return {(g, p) for k, g, p in ep.down_items if k == "link"}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state directory: epochs 1..3 (route, A, A2) and C journaled after them."""
    d = tmp_path_factory.mktemp("template")
    log = Events()
    core = _core(d / "state.db", log)
    core.load_fabric(FAB, FIXTURE)
    core.route()
    core.apply_faults([FaultEvent("link_down", *A)])
    core.apply_faults([FaultEvent("link_down", *A2)])
    # journaled as ApplyFaults does before it reroutes and answers; then kill -9
    core.durable.journal(FAB.content_hash, [FaultEvent("link_down", *C)])
    _stop(core)
    assert not log.errors()
    return d


@dataclass
class Run:
    """What one damage case saw."""

    ids: dict[int, str] = field(default_factory=dict)  # epoch id -> tables SHA-256
    said: list[str] = field(default_factory=list)


def _served(core: RoutingCore, acked: set[tuple[int, int]], run: Run, what: str) -> None:
    ep = core.store.current
    assert ep is not None, what
    assert 0 < ep.id < 2**63, f"{what}: epoch id {ep.id}"  # the wire's uint64, SQLite's int64
    assert run.ids.setdefault(ep.id, ep.tables_sha256) == ep.tables_sha256, \
        f"{what}: epoch id {ep.id} reused for other tables"
    assert acked <= _links_down(core), f"{what}: serves tables without {acked - _links_down(core)}"


def _cycle(work: Path, damage: Any, run: Run | None = None, configured: str | None = None
           ) -> tuple[Run, Events]:
    """Damage the template copy in ``work``, start, one fault, restart."""
    run = run or Run()
    damage(work / "state.db")
    metrics = ServiceMetrics()
    core, log = _start(work / "state.db", metrics, configured)
    acked = {A, A2, C}
    try:
        run.said = [f"{e}: {f}" for lv, e, f in log.seen if lv == "error"]
        if core.degraded:  # serves nothing, says what was lost
            assert core.store.current is None
            for call in (lambda: core.epoch(0), lambda: core.route(),
                         lambda: core.apply_faults([FaultEvent("link_down", *B)])):
                with pytest.raises(ServiceError) as ei:
                    call()
                assert ei.value.status == Status.FAILED_PRECONDITION
                assert core.degraded in ei.value.message
            assert "state_degraded" in log.errors()
            gauge = lambda: metrics.registry.get_sample_value("smroute_state_degraded")  # noqa: E731
            assert gauge() == 1
            if core.base is None:  # the operator loads a fabric
                core.load_fabric(FAB, FIXTURE)
                core.route()
            else:  # or confirms the loss: what was rebuilt is routed
                core.route(confirm_state_loss=True)
            assert not core.degraded and gauge() == 0
            acked = _links_down(core)
        _served(core, acked, run, "after the damage")
        ep = core.apply_faults([FaultEvent("link_down", *B)]).epoch
        acked |= {B}
        _served(core, acked, run, "after one more fault")
        assert ep.id > max(k for k in run.ids if k != ep.id)
    finally:
        _stop(core)
    again, log2 = _start(work / "state.db", configured=configured)
    try:
        assert not again.degraded, again.degraded
        _served(again, acked, run, "after the restart")
        assert again.store.current is not None and again.store.current.id >= ep.id
        assert not log2.errors(), log2.errors()
    finally:
        _stop(again)
    return run, log


def _copy(template: Path, tmp_path: Path) -> Path:
    work = tmp_path / "w"
    shutil.copytree(template, work)
    return work


def _template_ids(template: Path) -> dict[int, str]:
    st = StateStore(template / "state.db")
    try:
        return {i: r.tables_sha256 for i in st.epoch_ids() if (r := st.epoch(i)) is not None}
    finally:
        st.close()


def _said_something(work: Path, log: Events) -> bool:
    return bool(log.errors()) or bool(list(work.glob("state.db.corrupt-*")))


# ----------------------------------------------------------------- bit flips
@pytest.mark.parametrize("seed", range(60))
def test_bit_flips(template: Path, tmp_path: Path, seed: int) -> None:
    work = _copy(template, tmp_path)
    before = (template / "state.db").read_bytes()

    def flip(path: Path) -> None:
        data = bytearray(path.read_bytes())
        rng = random.Random(seed)
        for _ in range(8):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))

    # odd seeds: the base fabric is the configured file too (a lost one comes back)
    run, log = _cycle(work, flip, Run(_template_ids(template)), FIXTURE if seed % 2 else None)
    if log.errors():  # said what happened; a damaged file was kept for a post-mortem
        for moved in work.glob("state.db.corrupt-*"):
            assert len(moved.read_bytes()) == len(before)


@pytest.mark.parametrize("keep", [0, 100, 4096, 8192, 0.5, -4096, -1])
def test_truncation(template: Path, tmp_path: Path, keep: float) -> None:
    work = _copy(template, tmp_path)

    def cut(path: Path) -> None:
        data = path.read_bytes()
        n = int(len(data) * keep) if isinstance(keep, float) else keep % len(data)
        path.write_bytes(data[:n])

    run, log = _cycle(work, cut, Run(_template_ids(template)))
    assert _said_something(work, log) or keep == -1  # (the last byte may be unused)


def test_a_zeroed_header(template: Path, tmp_path: Path) -> None:
    work = _copy(template, tmp_path)

    def zero(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(b"\0" * 100 + data[100:])

    run, log = _cycle(work, zero, Run(_template_ids(template)))
    assert list(work.glob("state.db.corrupt-*")) and "state_db_moved_aside" in log.errors()
    assert any("lost" in s or "degraded" in s for s in run.said)


# ----------------------------------------------------------------- rows
def _sql(*stmts: str, args: tuple[Any, ...] = ()) -> Any:
    def do(path: Path) -> None:
        db = sqlite3.connect(path, isolation_level=None)
        for s in stmts:
            db.execute(s, args if "?" in s else ())
        db.close()
    return do


#: Values of the wrong type or out of range, per column kind.
GARBLE: dict[str, list[object]] = {
    "text": ["abc", b"\x00\xff", -1, 2**63 - 1],
    "int": ["abc", 2**63 - 1, -1, b"zz"],
    "real": ["abc", -1e308],
    "blob": [b"\x78\x9c garbage", "text", 7],
}
KIND = {"port": "int", "id": "int", "parent_id": "int", "journal_seq": "int", "seq": "int",
        "stored_at": "real", "received_at": "real", "committed_at": "real", "data": "blob",
        "tables": "blob"}
CASES = [(t, c, v) for t, cols in COLUMNS.items() for c in cols
         for v in GARBLE[KIND.get(c, "text")]
         if c not in ("id", "seq") or isinstance(v, int)]  # (SQLite's rowids hold integers)
CASES += [(t, "crc", "0" * 16) for t in COLUMNS]


@pytest.mark.parametrize("table,column,value", CASES,
                         ids=[f"{t}.{c}={str(v)[:12]}" for t, c, v in CASES])
def test_every_column_garbled(template: Path, tmp_path: Path, table: str, column: str,
                              value: object) -> None:
    work = _copy(template, tmp_path)
    run, log = _cycle(work, _sql(f"UPDATE OR IGNORE {table} SET {column} = ?", args=(value,)),
                      Run(_template_ids(template)))
    assert "state_db_moved_aside" in log.errors()  # the checksums saw it
    assert any("fail their checksum" in s for s in run.said)


@pytest.mark.parametrize("key,value", [("last_epoch_id", "abc"),
                                       ("last_epoch_id", str(2**64 - 1)),
                                       ("last_epoch_id", "-5"), ("down_seq", "zz"),
                                       ("down", "[1, 2"), ("lmc", "9x"),
                                       ("algorithm", "explode"), ("base_hash", "0" * 64)])
@pytest.mark.parametrize("checksummed", [False, True])
def test_bad_meta_values(template: Path, tmp_path: Path, key: str, value: str,
                         checksummed: bool) -> None:
    """A bad value with a wrong checksum (damage) or a right one (a bug, a
    hand edit): never a crash, never a lower epoch id."""
    work = _copy(template, tmp_path)
    crc = row_check("meta", (key, value)) if checksummed else "x"
    run, log = _cycle(work, _sql("INSERT OR REPLACE INTO meta VALUES (?, ?, ?)",
                                 args=(key, value, crc)), Run(_template_ids(template)))


@pytest.mark.parametrize("checksummed", [False, True])
def test_a_journal_row_that_explodes(template: Path, tmp_path: Path, checksummed: bool) -> None:
    """A journal row ('explode', 'zz', -1) stopped the start for good (a
    ValueError traceback, restarted by systemd into the same crash)."""
    work = _copy(template, tmp_path)
    vals = (99, FAB.content_hash, "explode", "zz", -1, 0.0)
    crc = row_check("journal", vals) if checksummed else ""
    run, log = _cycle(work, _sql("INSERT INTO journal VALUES (?, ?, ?, ?, ?, ?, ?)",
                                 args=(*vals, crc)), Run(_template_ids(template)))
    assert any("journal" in s for s in run.said)  # degraded, naming the journal


def test_a_newer_schema(template: Path, tmp_path: Path) -> None:
    work = _copy(template, tmp_path)
    run, log = _cycle(work, _sql(f"PRAGMA user_version = {SCHEMA_VERSION + 1}"),
                      Run(_template_ids(template)))
    assert "state_db_moved_aside" in log.errors()
    assert any("schema version" in s for s in run.said)


def test_every_stored_epoch_unreadable_keeps_the_down_set(template: Path,
                                                          tmp_path: Path) -> None:
    """Every kept epoch unreadable, the rest intact: the acknowledged down set
    (meta and journal) is routed again, not dropped, under a new id."""
    work = _copy(template, tmp_path)
    run, log = _cycle(work, _sql("UPDATE epochs SET tables = x'00'"),
                      Run(_template_ids(template)))
    assert max(run.ids) > 3


def test_the_database_and_its_mark_both_lost(template: Path, tmp_path: Path) -> None:
    """The database replaced by garbage and the high-water mark damaged:
    nothing can be rebuilt, and the daemon says so (degraded) instead of
    starting empty at epoch 1."""
    work = _copy(template, tmp_path)

    def wreck(path: Path) -> None:
        path.write_bytes(b"\0garbage" * 500)
        for mark in mark_paths(path):  # both files of the mark
            mark.write_text(mark.read_text().replace('"epoch_id": 3', '"epoch_id": 2'))

    wreck(work / "state.db")
    core, log = _start(work / "state.db")
    try:
        assert core.degraded and core.base is None
        assert "state_high_water_unreadable" in log.errors()
    finally:
        _stop(core)


def test_ids_stay_above_the_mark_when_the_database_is_lost(template: Path,
                                                           tmp_path: Path) -> None:
    work = _copy(template, tmp_path)
    (work / "state.db").write_bytes(b"")
    core, log = _start(work / "state.db")
    try:
        assert core.degraded and "base fabric" in core.degraded
        core.load_fabric(FAB, FIXTURE)
        assert core.route().id == 4  # above the 3 committed before
    finally:
        _stop(core)


def test_an_older_database_gets_checksums_and_a_mark(template: Path, tmp_path: Path) -> None:
    """A schema-2 database (no checksums, no mark) resumes as it was."""
    work = _copy(template, tmp_path)
    db = sqlite3.connect(work / "state.db", isolation_level=None)
    for t in COLUMNS:  # schema 2 had no crc column
        db.execute(f"ALTER TABLE {t} DROP COLUMN crc")
    db.execute("PRAGMA user_version = 2")
    db.close()
    for mark in mark_paths(work / "state.db"):
        mark.unlink()
    core, log = _start(work / "state.db")
    try:
        assert not core.degraded and not log.errors()
        assert {A, A2, C} <= _links_down(core)
        assert (work / "state.db.hwm").exists()
    finally:
        _stop(core)


# ----------------------------------------------------------------- real daemons
def _status(fn: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as ei:
        fn()
    return ei.value.code(), ei.value.details()


def test_a_daemon_whose_stored_epochs_are_all_damaged_keeps_the_down_set(tmp_path: Path
                                                                         ) -> None:
    """Bits flipped in every stored epoch's tables (the daemon used to route
    the configured file again and serve tables through acknowledged-down
    links): the file is moved aside, and the acknowledged down set (meta,
    journal) is routed under a new epoch id."""
    d = start_daemon(tmp_path / "d", fabric=FIXTURE)
    with SmrouteClient(d.address, timeout=60) as c:
        c.apply_faults([link_down(*A)])
        ep = c.get_epoch(include_down_items=True)
    assert d.stop() == 0
    db = sqlite3.connect(tmp_path / "d" / "state.db", isolation_level=None)
    rows = db.execute("SELECT rowid, tables FROM epochs").fetchall()
    for rowid, t in rows:  # every stored epoch's tables damaged
        db.execute("UPDATE epochs SET tables = ? WHERE rowid = ?",
                   (bytes(t[:40]) + bytes(b ^ 0xFF for b in t[40:48]) + bytes(t[48:]), rowid))
    db.close()
    d.start()
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            now = c.get_epoch(include_down_items=True)
            assert now.id > ep.id and not now.resumed
            assert {(e.node_guid, e.port) for e in now.down_items} == {A}
        events = [e.get("event") for e in d.log_events()]
        assert "state_db_moved_aside" in events and "Traceback" not in d.out.read_text()
        assert list((tmp_path / "d").glob("state.db.corrupt-*"))
    finally:
        assert d.stop() == 0


def test_a_degraded_daemon_serves_nothing_until_confirmed(tmp_path: Path) -> None:
    """A journal row that does not decode (the daemon used to exit 1 with a
    traceback, again at every restart): the daemon starts, serves no tables,
    answers FAILED_PRECONDITION naming the loss, and a confirmed Route ends
    that; the restart after it is clean."""
    d = start_daemon(tmp_path / "d", fabric=FIXTURE)
    with SmrouteClient(d.address, timeout=60) as c:
        c.apply_faults([link_down(*A)])
        first = c.get_epoch().id
    assert d.stop() == 0
    db = sqlite3.connect(tmp_path / "d" / "state.db", isolation_level=None)
    db.execute("INSERT INTO journal VALUES (99, ?, 'explode', 'zz', -1, 0.0, '')",
               (FAB.content_hash,))
    db.execute("UPDATE meta SET value = 'abc' WHERE key = 'last_epoch_id'")
    db.close()
    d.start()
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            code, msg = _status(lambda: c.get_epoch())
            assert code == grpc.StatusCode.FAILED_PRECONDITION and "journal" in msg
            code, msg = _status(lambda: c.tables())
            assert code == grpc.StatusCode.FAILED_PRECONDITION and "degraded" in msg
            code, _ = _status(lambda: c.apply_faults([link_down(*B)]))
            assert code == grpc.StatusCode.FAILED_PRECONDITION
            code, msg = _status(lambda: c.route())
            assert "confirm_state_loss" in msg and "ctl route --confirm-state-loss" in msg
            # the operator's way out: smroute ctl
            r = subprocess.run([sys.executable, "-m", "smroute", "ctl", "route",
                                "--confirm-state-loss", "--json", "--address", d.address],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            ep = c.get_epoch()
            assert ep.id > first and ep.down_links == 1
            assert json.loads(r.stdout)["id"] == ep.id
            assert c.apply_faults([link_down(*B)]).epoch.id == ep.id + 1
        events = d.log_events()
        assert any(e.get("event") == "state_degraded" for e in events)
        assert "Traceback" not in d.out.read_text()
    finally:
        assert d.stop() == 0
    d.start()
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            assert c.get_epoch().down_links == 2
    finally:
        assert d.stop() == 0


def test_a_zeroed_header_under_a_configured_fabric_loses_nothing(tmp_path: Path) -> None:
    """The database's first 4 KiB zeroed: nothing of it can be read, but the
    base fabric is the configured file and the last commit's down set is in
    the high-water mark: served again under a new id."""
    d = start_daemon(tmp_path / "d", fabric=FIXTURE)
    with SmrouteClient(d.address, timeout=60) as c:
        c.apply_faults([link_down(*A)])
        first = c.get_epoch().id
    assert d.stop() == 0
    db = tmp_path / "d" / "state.db"
    db.write_bytes(b"\0" * 4096 + db.read_bytes()[4096:])
    d.start()
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            ep = c.get_epoch(include_down_items=True)
            assert ep.id > first and {(e.node_guid, e.port) for e in ep.down_items} == {A}
        assert "state_db_moved_aside" in [e.get("event") for e in d.log_events()]
    finally:
        assert d.stop() == 0


def test_a_subnet_managers_view_ends_the_degraded_state(tmp_path: Path) -> None:
    """The database lost (zeroed) after a commit, and no fabric file
    configured: degraded; RouteSubnet brings the subnet manager's view and
    the daemon serves it."""
    d = start_daemon(tmp_path / "d")
    with SmrouteClient(d.address, timeout=60) as c:
        c.load_fabric_text(Path(FIXTURE).read_text(), "fab.topo")
        c.route()
        c.apply_faults([link_down(*A)])
        first = c.get_epoch().id
    assert d.stop() == 0
    (tmp_path / "d" / "state.db").write_bytes(b"\0" * 4096)
    d.start()
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            code, msg = _status(lambda: c.get_epoch())
            assert code == grpc.StatusCode.FAILED_PRECONDITION and "base fabric" in msg
            r = c.stub.RouteSubnet(subnet_request(FAB, 0), timeout=60)
            assert r.epoch.id > first
            assert c.get_epoch().id == r.epoch.id
        assert d.metrics is not None
        with urllib.request.urlopen(f"{d.metrics}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        assert "smroute_state_db_moved_aside_total 1.0" in text
        assert "smroute_state_degraded 0.0" in text
    finally:
        assert d.stop() == 0



def test_a_catch_up_that_fails_behind_the_last_commit_is_degraded(
        template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The newest stored epoch unreadable, an older one resumed, and the
    reroute to the last commit's down set fails: serving the older epoch
    would serve tables without acknowledged faults, so nothing is served."""
    work = _copy(template, tmp_path)
    _sql("UPDATE epochs SET tables = x'00' WHERE id = 3")(work / "state.db")

    def fail(*args: Any, **kw: Any) -> Any:
        raise RoutingError("no route today")

    monkeypatch.setattr(RoutingCore, "_reroute", fail)
    core, log = _start(work / "state.db")
    try:
        assert core.degraded and "epoch 3" in core.degraded and "no route today" in core.degraded
        ep = core.store.current
        # (epoch 2 is stored unless epoch 3 superseded it before the writer got to it)
        assert ep is not None and ep.id in (1, 2)  # resumed, but not served:
        with pytest.raises(ServiceError) as ei:
            core.epoch(0)
        assert ei.value.status == Status.FAILED_PRECONDITION
        assert "catch_up_failed" in log.errors()
    finally:
        _stop(core)


@pytest.mark.parametrize("route_after", [False, True])
def test_a_fabric_loaded_again_restarts_clean(tmp_path: Path, route_after: bool) -> None:
    """No damage, no loss: a second LoadFabric (the journal cleared, its
    positions going on) and a restart, routed since or not (if not, the
    epoch served before the restart is served after it)."""
    log = Events()
    core = _core(tmp_path / "state.db", log)
    core.load_fabric(FAB, FIXTURE)
    core.route()
    core.apply_faults([FaultEvent("link_down", *A)])
    core.load_fabric(FAB, FIXTURE)
    if route_after:
        core.route()
        core.apply_faults([FaultEvent("link_down", *B)])
    _stop(core)
    again, log2 = _start(tmp_path / "state.db")
    try:
        assert not again.degraded and not log2.errors(), (again.degraded, log2.errors())
        assert again.store.current is not None
        assert _links_down(again) == ({B} if route_after else {A})
    finally:
        _stop(again)


@pytest.mark.parametrize("mark", ["garbled", "torn", "missing", "higher"])
def test_a_damaged_mark_beside_an_intact_database(template: Path, tmp_path: Path,
                                                  mark: str) -> None:
    """The database intact, its high-water mark damaged or gone: nothing is
    lost (the database has it all), the mark is written again; a mark above
    the database's last id (the database lost its newest commit) keeps ids
    above it."""
    work = _copy(template, tmp_path)
    if mark == "garbled":  # both files (one alone is a write cut short: the other is used)
        for path in mark_paths(work / "state.db"):
            path.write_bytes(path.read_bytes()[:-9] + b"xx}\n")
    elif mark == "torn":  # the newer file cut short: the older one is whole
        hw, _ = read_high_water(work / "state.db")
        assert hw is not None
        newer = mark_paths(work / "state.db")[hw.n % 2]
        newer.write_bytes(newer.read_bytes()[:50])
        older, _ = read_high_water(work / "state.db")
        assert older is not None and older.n == hw.n - 1
    elif mark == "missing":
        for path in mark_paths(work / "state.db"):
            path.unlink()
    else:
        st = StateStore(work / "state.db")
        st.close()
        hw, _ = read_high_water(work / "state.db")
        assert hw is not None
        write_high_water(work / "state.db", replace(hw, epoch_id=9, n=hw.n + 1))
    core, log = _start(work / "state.db")
    try:
        assert not core.degraded and {A, A2, C} <= _links_down(core)
        ep = core.store.current
        assert ep is not None and ep.id == (10 if mark == "higher" else 4)
        assert read_high_water(work / "state.db")[0] is not None
        assert ("state_high_water_unreadable" in log.errors()) == (mark == "garbled")
    finally:
        _stop(core)


@pytest.mark.parametrize("mark_copy", [True, False])
def test_a_journal_row_deleted(template: Path, tmp_path: Path, mark_copy: bool) -> None:
    """A journaled event's row gone (no checksum can see a missing row): the
    positions given say so; the high-water mark's copy of the event brings
    it back, and without that copy the daemon is degraded, naming it."""
    work = _copy(template, tmp_path)
    _sql("DELETE FROM journal")(work / "state.db")
    if not mark_copy:
        hw, _ = read_high_water(work / "state.db")
        assert hw is not None and hw.pending and hw.journal_high == hw.journal_seq + 1
        write_high_water(work / "state.db", replace(hw, pending=(), n=hw.n + 1))
    core, log = _start(work / "state.db")
    try:
        if mark_copy:
            assert not core.degraded and {A, A2, C} <= _links_down(core)
        else:
            assert core.store.current is None and "journaled fault events" in core.degraded
    finally:
        _stop(core)


def test_the_degraded_state_ends_only_with_a_commit(template: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A confirmed Route or a RouteSubnet whose route fails changes nothing:
    still degraded, nothing served; the same RouteSubnet routed ends it."""
    work = _copy(template, tmp_path)
    _sql("DELETE FROM journal")(work / "state.db")
    hw, _ = read_high_water(work / "state.db")
    assert hw is not None
    write_high_water(work / "state.db", replace(hw, pending=(), n=hw.n + 1))
    metrics = ServiceMetrics()
    core, log = _start(work / "state.db", metrics)
    gauge = lambda: metrics.registry.get_sample_value("smroute_state_degraded")  # noqa: E731
    try:
        lost = core.degraded
        assert "journaled fault events" in lost and core.base is not None and gauge() == 1

        def fail(*args: Any, **kw: Any) -> Any:
            raise RoutingError("no route today")

        monkeypatch.setattr("smroute.service.core.route", fail)
        for call in (lambda: core.route(confirm_state_loss=True),
                     lambda: core.route_subnet(FAB, 0, "sm")):
            with pytest.raises(ServiceError) as ei:
                call()
            assert "no route today" in ei.value.message
            assert core.degraded == lost and gauge() == 1 and core.store.current is None
        assert "state_degraded_cleared" not in [e for _, e, _ in log.seen]
        monkeypatch.undo()
        ep, committed = core.route_subnet(FAB, 0, "sm")
        assert committed and not core.degraded and gauge() == 0
        assert core.epoch(0).id == ep.id > 3
        cleared = [f for _, e, f in log.seen if e == "state_degraded_cleared"]
        assert cleared == [{"by": "RouteSubnet", "lost": lost}]
    finally:
        _stop(core)
