"""End-to-end tests of the routing daemon: a real ``smroute serve`` process on
loopback, driven by a real gRPC client (smroute.service.rpc.client).

Tables served are compared with the routing engine's own tables for the same
(degraded) fabric, matched by switch GUID; diffs with smroute.tables.diff.
"""

from __future__ import annotations

import signal
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest
from service_daemon import ROOT, DaemonProc, start_daemon

from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing.engine import route
from smroute.service.epochs import table_checksum
from smroute.service.rpc.client import (
    SmrouteClient,
    ca_down,
    ca_up,
    link_down,
    link_up,
    pb,
    switch_down,
    switch_up,
)
from smroute.tables.diff import diff_tables
from smroute.tables.lft import ForwardingTables

FIXTURE = str(ROOT / "fixtures" / "pgft-3-2.2.3-1.2.2-1.2.1.topo")
FIXTURES = str(ROOT / "fixtures")


@pytest.fixture(scope="module")
def fabric() -> Fabric:
    return read_topology(FIXTURE)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> DaemonProc:
    d = start_daemon(tmp_path_factory.mktemp("daemon"), "--coalesce-ms", "30",
                     "--epoch-history", "6", "--fabric-dir", FIXTURES, fabric=FIXTURE)
    yield d
    assert d.stop() == 0


@pytest.fixture()
def client(daemon: DaemonProc) -> SmrouteClient:
    c = SmrouteClient(daemon.address, timeout=60)
    yield c
    c.close()


def engine_tables(f: Fabric) -> ForwardingTables:
    return route(f, workers=1, lmc=0).tables


def same_tables(a: ForwardingTables, b: ForwardingTables) -> bool:
    return diff_tables(a, b).identical and table_checksum(a) == table_checksum(b)


def inter_switch_links(f: Fabric) -> np.ndarray:
    sw = f.node_type == NodeType.SWITCH
    return np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])


def link_end(f: Fabric, li: int) -> tuple[int, int]:
    a = int(f.link_a[li])
    return int(f.node_guid[f.port_node[a]]), int(f.port_num[a])


def reset(client: SmrouteClient, f: Fabric) -> pb.Epoch:
    """Back to the loaded fabric with nothing down (every item brought up)."""
    ep = client.get_epoch()
    if ep.down_links or ep.down_switches or ep.down_cas:
        ev = [link_up(*link_end(f, int(li))) for li in range(f.n_links)]
        ev += [switch_up(int(g)) for g in f.node_guid[f.switches]]
        ev += [ca_up(int(g)) for g in f.node_guid[f.cas]]
        ep = client.apply_faults(ev).epoch
    assert ep.down_links == ep.down_switches == ep.down_cas == 0
    return ep


# ----------------------------------------------------------------- basics


def test_health_and_reflection(daemon: DaemonProc, client: SmrouteClient) -> None:
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )

    assert client.health() == "SERVING"
    assert client.health("smroute.v1.Smroute") == "SERVING"
    db = ProtoReflectionDescriptorDatabase(client.channel)
    services = set(db.get_services())
    assert {"smroute.v1.Smroute", "grpc.health.v1.Health"} <= services
    svc = db.FindFileContainingSymbol("smroute.v1.Smroute")
    assert svc.name == "smroute/v1/smroute.proto"
    assert {m.name for m in svc.service[0].method} >= {
        "LoadFabric", "Route", "GetTables", "ApplyFaults", "Diff", "Watch", "Analyze",
        "SelectLids"}


def test_initial_epoch_tables_equal_engine(client: SmrouteClient, fabric: Fabric) -> None:
    ep = reset(client, fabric)
    assert ep.fabric_hash == fabric.content_hash
    snap = client.tables()  # verifies the header checksum
    assert snap.epoch == ep.id
    assert snap.header.tables_sha256 == ep.tables_sha256
    assert len(snap.switches) == len(fabric.switches)
    assert same_tables(snap.tables, engine_tables(fabric))
    # every block is 64 bytes and covers 0..max_lid
    nb = -(-(snap.header.max_lid + 1) // 64)
    assert all(len(s.blocks) == nb and all(len(b.ports) == 64 for b in s.blocks)
               for s in snap.switches)


def test_served_tables_equal_smroute_route_output(client: SmrouteClient, fabric: Fabric,
                                                  tmp_path: Path) -> None:
    import subprocess
    import sys

    from smroute.tables.formats import read_tables

    reset(client, fabric)
    out = tmp_path / "lfts.dump"
    subprocess.run([sys.executable, "-m", "smroute", "route", FIXTURE, "--out", str(out),
                    "--workers", "1", "--quiet", "--no-validate"], check=True, cwd=ROOT,
                   capture_output=True, timeout=120)
    assert diff_tables(read_tables(out), client.tables().tables).identical


def test_route_commits_new_epoch_and_validates(client: SmrouteClient,
                                               fabric: Fabric) -> None:
    before = client.get_epoch()
    ep = client.route(wait_validation=True)
    assert ep.id > before.id and ep.cause == "route"
    assert ep.validation.state == pb.Validation.DONE and ep.validation.ok
    assert ep.validation.pairs > 0
    assert ep.tables_sha256 == table_checksum(engine_tables(
        client_fabric_minus_down(client, fabric)))
    assert ep.timings["routes"] > 0.0


def client_fabric_minus_down(client: SmrouteClient, f: Fabric) -> Fabric:
    assert client.get_epoch().down_links == 0
    return f


def test_switch_filter(client: SmrouteClient, fabric: Fabric) -> None:
    full = client.tables().tables
    guids = [int(g) for g in fabric.node_guid[fabric.switches][:3]]
    part = client.tables(switch_guids=guids)
    assert sorted(s.guid for s in part.switches) == sorted(guids)
    for s in part.switches:
        row = full.row_of(s.guid)
        got = part.tables.ports[part.tables.row_of(s.guid)]
        assert np.array_equal(got, full.ports[row])


# ----------------------------------------------------------------- faults


def test_link_down_reroutes_like_engine_and_up_restores(client: SmrouteClient,
                                                        fabric: Fabric) -> None:
    e0 = reset(client, fabric)
    t0 = client.tables()
    li = int(inter_switch_links(fabric)[0])
    guid, port = link_end(fabric, li)
    out = client.apply_faults([link_down(guid, port)])
    assert out.committed and out.epoch.id > e0.id and out.epoch.cause == "faults"
    assert out.epoch.parent_id == e0.id and out.epoch.down_links == 1
    assert [(f.kind, f.node_guid, f.port) for f in out.epoch.faults] == [
        (pb.FaultEvent.LINK_DOWN, guid, port)]
    expect = engine_tables(fabric.with_removed(links=[li]))
    t1 = client.tables(out.epoch.id)
    assert same_tables(t1.tables, expect)
    # the dead port is no longer used by its switch
    row = t1.tables.row_of(guid)
    assert not (t1.tables.ports[row, 1:] == port).any()
    # the diff reported equals the diff of the tables
    d = diff_tables(t0.tables, t1.tables)
    assert not d.identical
    assert out.diff.entries_changed == d.entries_changed
    assert out.diff.blocks_changed == d.blocks_changed
    # since_epoch: only the changed blocks, and they patch old into new
    delta = client.tables(out.epoch.id, since_epoch=e0.id)
    assert delta.blocks == d.blocks_changed
    assert len(delta.switches) == d.switches_changed
    assert same_tables(delta.patch(t0.tables), t1.tables)
    # link up: back to the original tables
    back = client.apply_faults([link_up(guid, port)])
    assert back.committed and back.epoch.down_links == 0
    assert back.epoch.tables_sha256 == e0.tables_sha256
    # the other end of the link names the same link
    peer = int(fabric.link_b[li])
    pg, pp = int(fabric.node_guid[fabric.port_node[peer]]), int(fabric.port_num[peer])
    o2 = client.apply_faults([link_down(pg, pp)])
    assert o2.epoch.tables_sha256 == out.epoch.tables_sha256
    client.apply_faults([link_up(pg, pp)])


def test_switch_and_ca_down_up(client: SmrouteClient, fabric: Fabric) -> None:
    e0 = reset(client, fabric)
    top = fabric.switches[-1]  # a spine (highest GUIDs are the top level in the fixture)
    g = int(fabric.node_guid[top])
    ca = int(fabric.cas[0])
    cg = int(fabric.node_guid[ca])
    out = client.apply_faults([switch_down(g), ca_down(cg)])
    assert out.committed and out.epoch.down_switches == 1 and out.epoch.down_cas == 1
    snap = client.tables(out.epoch.id)
    assert g not in {s.guid for s in snap.switches}
    expect = engine_tables(fabric.with_removed(nodes=[top, ca]))
    assert same_tables(snap.tables, expect)
    # since_epoch reports the switch as removed
    delta = client.tables(out.epoch.id, since_epoch=e0.id)
    assert [s.guid for s in delta.switches if s.removed] == [g]
    back = client.apply_faults([switch_up(g), ca_up(cg)])
    assert back.epoch.tables_sha256 == e0.tables_sha256
    # an up event for something that is not down changes nothing: no new epoch
    again = client.apply_faults([switch_up(g)])
    assert not again.committed and again.epoch.id == back.epoch.id


def test_dry_run_does_not_commit(client: SmrouteClient, fabric: Fabric) -> None:
    e0 = reset(client, fabric)
    guid, port = link_end(fabric, int(inter_switch_links(fabric)[1]))
    dry = client.apply_faults([link_down(guid, port)], dry_run=True, max_entries=10_000)
    assert not dry.committed and dry.epoch.id == 0
    assert client.get_epoch().id == e0.id
    assert client.get_epoch().down_links == 0
    listed = sum(len(s.changes) for s in dry.changes)
    assert listed == dry.diff.entries_changed > 0 and not dry.truncated
    real = client.apply_faults([link_down(guid, port)])
    assert real.diff.entries_changed == dry.diff.entries_changed
    assert real.epoch.tables_sha256 == dry.epoch.tables_sha256
    # the listed changes are the real ones
    t0, t1 = client.tables(e0.id).tables, client.tables(real.epoch.id).tables
    for sc in dry.changes:
        r0, r1 = t0.row_of(sc.guid), t1.row_of(sc.guid)
        for c in sc.changes:
            assert t0.ports[r0, c.lid] == c.old_port and t1.ports[r1, c.lid] == c.new_port
    client.apply_faults([link_up(guid, port)])


def test_burst_is_coalesced(client: SmrouteClient, fabric: Fabric) -> None:
    e0 = reset(client, fabric)
    links = inter_switch_links(fabric)[:6]
    results: list[pb.ApplyFaultsResponse] = []
    lock = threading.Lock()

    def send(li: int) -> None:
        r = client.apply_faults([link_down(*link_end(fabric, int(li)))])
        with lock:
            results.append(r)

    threads = [threading.Thread(target=send, args=(li,)) for li in links]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = {r.epoch.id for r in results}
    # 6 calls within the 30 ms window: fewer epochs than calls, none lost
    assert len(ids) < len(links)
    final = client.get_epoch()
    assert final.down_links == len(links)
    assert max(ids) == final.id
    assert sum(r.coalesced_events for r in results if r.epoch.id == final.id) >= 1
    expect = engine_tables(fabric.with_removed(links=links))
    assert same_tables(client.tables().tables, expect)
    assert final.id > e0.id


def test_failed_reroute_keeps_last_good_epoch(client: SmrouteClient, fabric: Fabric) -> None:
    e0 = reset(client, fabric)
    every = [switch_down(int(g)) for g in fabric.node_guid[fabric.switches]]
    with pytest.raises(grpc.RpcError) as ei:
        client.apply_faults(every)
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"epoch {e0.id} keeps serving" in ei.value.details()
    assert "no switch" in ei.value.details()
    assert client.get_epoch().id == e0.id
    assert client.tables().header.tables_sha256 == e0.tables_sha256
    # a fault that does not touch the switches still cannot be routed: they are down
    li = int(inter_switch_links(fabric)[0])
    c, m = _code(client.apply_faults, [link_down(*link_end(fabric, li))])
    assert c == grpc.StatusCode.FAILED_PRECONDITION and "no switch" in m
    # bringing everything back: the serving epoch already is that state, nothing to commit
    back = client.apply_faults([switch_up(int(g)) for g in fabric.node_guid[fabric.switches]]
                               + [link_up(*link_end(fabric, li))])
    assert not back.committed and back.epoch.id == e0.id
    assert back.epoch.tables_sha256 == e0.tables_sha256


# ----------------------------------------------------------------- diff, watch, analyze


def test_diff_between_epochs(client: SmrouteClient, fabric: Fabric) -> None:
    e0 = reset(client, fabric)
    guid, port = link_end(fabric, int(inter_switch_links(fabric)[2]))
    e1 = client.apply_faults([link_down(guid, port)]).epoch
    d = client.diff(e0.id, e1.id, max_entries=2)
    local = diff_tables(client.tables(e0.id).tables, client.tables(e1.id).tables)
    assert d.summary.entries_changed == local.entries_changed
    assert d.summary.switches_changed == local.switches_changed
    assert local.entries_changed > 2
    assert sum(len(s.changes) for s in d.switches) == 2 and d.truncated
    assert sorted(b for s in d.switches for b in s.blocks) == sorted(local.block.tolist())
    rev = client.diff(e1.id, e0.id)
    assert rev.summary.entries_changed == local.entries_changed
    assert client.diff(e0.id, e0.id).summary.identical
    client.apply_faults([link_up(guid, port)])


def test_watch_streams_committed_epochs(client: SmrouteClient, fabric: Fabric) -> None:
    e0 = reset(client, fabric)
    stream = client.watch(timeout=60)
    first = next(stream)
    assert first.id == e0.id
    guid, port = link_end(fabric, int(inter_switch_links(fabric)[3]))
    e1 = client.apply_faults([link_down(guid, port)]).epoch
    e2 = client.apply_faults([link_up(guid, port)]).epoch
    got = [next(stream).id, next(stream).id]
    stream.cancel()
    assert got == [e1.id, e2.id]


def test_analyze(client: SmrouteClient, fabric: Fabric) -> None:
    reset(client, fabric)
    a = client.analyze(rp_samples=20, seed=1)
    assert a.end_ports == len(fabric.cas)
    assert a.order == "topological"
    # the same numbers as the analysis library on the engine's own routing
    from smroute.analysis.congestion import congestion_risk
    from smroute.analysis.paths import pair_paths, routing_view
    from smroute.analysis.patterns import topological_order

    res = route(fabric, workers=1, lmc=0)
    view = routing_view(fabric, res.tables)
    risk = congestion_risk(view, pair_paths(view), topological_order(view, res),
                           np.random.default_rng(1), samples=20)
    assert (a.a2a_risk, a.rp_risk_median, a.sp_risk_max) == (
        risk.a2a.value, risk.rp.risk_median, risk.sp.risk_max)
    assert a.sp_hsd_max == risk.sp.hsd_max and a.unroutable_sp == 0
    with pytest.raises(grpc.RpcError) as ei:
        client.analyze(order="sideways")
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# ----------------------------------------------------------------- errors


def _code(fn: object, *args: object, **kw: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as ei:
        fn(*args, **kw)  # type: ignore[operator]
    return ei.value.code(), ei.value.details()


def test_bad_requests(daemon: DaemonProc, client: SmrouteClient, fabric: Fabric) -> None:
    reset(client, fabric)
    c, m = _code(client.apply_faults, [link_down(0xDEAD, 1)])
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "0x000000000000dead" in m
    sw = int(fabric.node_guid[fabric.switches[0]])
    c, m = _code(client.apply_faults, [link_down(sw, 0)])
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "port is 0" in m
    c, m = _code(client.apply_faults, [link_down(sw, 250)])
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "port must be" in m
    c, m = _code(client.apply_faults, [ca_down(sw)])
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "not a CA" in m
    c, m = _code(client.apply_faults, [pb.FaultEvent(node_guid=sw)])
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "kind" in m
    c, m = _code(client.apply_faults, [])
    assert c == grpc.StatusCode.INVALID_ARGUMENT
    c, m = _code(client.get_epoch, 10_000)
    assert c == grpc.StatusCode.NOT_FOUND and "not in the history" in m
    for _ in range(6):  # push epoch 1 out of the history (6 kept)
        client.route()
    full = client.tables(since_epoch=1)  # no longer kept: the full tables, never a delta
    assert full.header.since_epoch == 0 and len(full.switches) == full.header.switches
    c, m = _code(client.tables, switch_guids=[0xBEEF])
    assert c == grpc.StatusCode.NOT_FOUND and "0x000000000000beef" in m
    c, m = _code(client.diff, 10_000, 0)
    assert c == grpc.StatusCode.NOT_FOUND
    c, m = _code(client.load_fabric_text, "Switch 36 \"S-1\" nonsense\n", "bad.topo")
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "bad.topo" in m
    c, m = _code(client.load_fabric_text, "")
    assert c == grpc.StatusCode.INVALID_ARGUMENT
    c, m = _code(client.load_fabric_path, "/nonexistent/x.topo")
    assert c == grpc.StatusCode.PERMISSION_DENIED and "outside fabric_dirs" in m
    c, m = _code(client.load_fabric_path, FIXTURES + "/nonexistent.topo")
    assert c == grpc.StatusCode.NOT_FOUND and "nonexistent.topo" in m
    c, m = _code(client.route, "ftree")
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "ftree" in m
    c, m = _code(client.stub.LoadFabric, pb.LoadFabricRequest())
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "no source" in m
    for bad in (-1.0, 1e9, float("nan")):  # checked before any discovery runs
        c, m = _code(client.load_fabric_live, "", 0, bad)
        assert c == grpc.StatusCode.INVALID_ARGUMENT and "timeout_s" in m, (bad, m)
    c, m = _code(client.stub.SelectLids, pb.SelectLidsRequest(hosts=["a"]))
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "no CA with node description 'a'" in m
    # still serving after all of this
    assert client.health() == "SERVING"
    assert daemon.proc.poll() is None


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.split(" ")[0] == name:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in metrics")


def test_metrics_endpoint_counts_requests(daemon: DaemonProc, client: SmrouteClient,
                                          fabric: Fabric) -> None:
    reset(client, fabric)
    guid, port = link_end(fabric, int(inter_switch_links(fabric)[0]))
    client.apply_faults([link_down(guid, port)])
    client.apply_faults([link_up(guid, port)])
    _code(client.apply_faults, [link_down(guid, 0)])
    every = [int(g) for g in fabric.node_guid[fabric.switches]]
    _code(client.apply_faults, [switch_down(g) for g in every])
    client.apply_faults([switch_up(g) for g in every])
    ep = client.get_epoch()
    assert daemon.metrics
    text = urllib.request.urlopen(daemon.metrics, timeout=10).read().decode()
    assert _metric(text, "smroute_epoch_id") == ep.id
    assert _metric(text, "smroute_epochs_committed_total") == ep.id
    assert _metric(text, 'smroute_route_seconds_count{kind="reroute"}') >= 1
    assert _metric(text, 'smroute_route_seconds_count{kind="route"}') >= 1
    assert _metric(text, 'smroute_requests_total{code="OK",method="GetEpoch"}') >= 1
    assert _metric(text, 'smroute_requests_total{code="INVALID_ARGUMENT",method="ApplyFaults"}'
                   ) >= 1
    assert _metric(text, 'smroute_reroute_failures_total{reason="routing_error"}') >= 1
    assert _metric(text, 'smroute_fault_events_total{kind="link_down"}') >= 1


def test_load_fabric_text_then_route(client: SmrouteClient, fabric: Fabric) -> None:
    reset(client, fabric)
    other = ROOT / "fixtures" / "pgft-3-2.2.3-lmc2.topo"
    s = client.load_fabric_text(other.read_text(), "lmc2.topo")
    f2 = read_topology(other)
    assert s.content_hash == f2.content_hash and s.switches == len(f2.switches)
    ep = client.route(lmc=2)
    assert ep.lmc == 2 and ep.fabric_hash == f2.content_hash
    assert same_tables(client.tables().tables, route(f2, workers=1, lmc=2).tables)
    # back to the module's fabric, by path on the server
    s = client.load_fabric_path(FIXTURE)
    assert s.content_hash == fabric.content_hash
    client.route(lmc=0)
    assert same_tables(client.tables().tables, engine_tables(fabric))


# ----------------------------------------------------------------- process lifecycle


def test_unix_socket_sigterm_drains_watch_and_sighup(tmp_path: Path) -> None:
    sock = tmp_path / "s" / "smroute.sock"
    cfg = tmp_path / "smroute.yaml"
    cfg.write_text(f"fabric: {FIXTURE}\nlog_level: info\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg), listen=f"unix:{sock}")
    try:
        assert d.address == f"unix:{sock}" and sock.exists()
        assert sock.stat().st_mode & 0o777 == 0o660
        with SmrouteClient(d.address) as c:
            assert c.get_epoch().id == 1
            # SIGHUP with a broken config: logged, last good config kept, still serving
            cfg.write_text("workers: many\n")
            d.signal(signal.SIGHUP)
            _wait_for(lambda: any(e.get("event") == "reload_failed" for e in d.log_events()))
            assert c.health() == "SERVING"
            cfg.write_text(f"fabric: {FIXTURE}\ncoalesce_ms: 5\n")
            d.signal(signal.SIGHUP)
            _wait_for(lambda: any(e.get("event") == "reloaded" for e in d.log_events()))
            stream = c.watch(timeout=60)
            assert next(stream).id == 1
            t = time.monotonic()
            d.signal(signal.SIGTERM)
            rest = list(stream)  # ends cleanly when the daemon drains
            assert rest == []
            assert d.proc.wait(30) == 0
            assert time.monotonic() - t < 15
    finally:
        d.stop()
    assert not sock.exists()
    events = [e.get("event") for e in d.log_events()]
    assert "shutting_down" in events and events[-1] == "stopped"


def _wait_for(cond: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_bad_config_exits_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    cfg = tmp_path / "bad.yaml"
    cfg.write_text("listen: 127.0.0.1:0\nwokers: 2\n")
    r = subprocess.run([sys.executable, "-m", "smroute", "serve", "--state", "none",
                        "--config", str(cfg)],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2
    assert "wokers" in r.stderr and "Traceback" not in r.stderr


def test_limits_give_resource_exhausted(tmp_path: Path) -> None:
    cfg = tmp_path / "limits.yaml"
    cfg.write_text(f"fabric: {FIXTURE}\nlimits:\n  max_topology_bytes: 2KiB\n"
                   "  max_fault_events: 2\n  max_watchers: 1\n  analyze_max_hosts: 5\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg), "--fabric-dir", FIXTURES)
    try:
        with SmrouteClient(d.address, timeout=30) as c:
            c_, m = _code(c.load_fabric_text, Path(FIXTURE).read_text(), "big.topo")
            assert c_ == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_topology_bytes" in m
            c_, m = _code(c.load_fabric_path, FIXTURE)
            assert c_ == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_topology_bytes" in m
            f = read_topology(FIXTURE)
            g = [int(x) for x in f.node_guid[f.switches[:3]]]
            c_, m = _code(c.apply_faults, [switch_down(x) for x in g])
            assert c_ == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_fault_events" in m
            c_, m = _code(c.analyze)
            assert c_ == grpc.StatusCode.RESOURCE_EXHAUSTED and "analyze_max_hosts" in m
            w1 = c.watch(timeout=30)
            assert next(w1).id == 1
            w2 = c.watch(timeout=30)
            with pytest.raises(grpc.RpcError) as ei:
                next(w2)
            assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_watchers" in ei.value.details()
            w1.cancel()
            time.sleep(1.0)  # the cancelled watcher is released within its poll interval
            w3 = c.watch(timeout=30)
            assert next(w3).id == 1
            w3.cancel()
            assert c.get_epoch().id == 1
    finally:
        assert d.stop() == 0


def test_unroutable_or_bad_configured_fabric_exit_codes(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "bad.topo"
    bad.write_text("switchguid=0x10\nSwitch\t300 \"S-0001\"\n")
    r = subprocess.run([sys.executable, "-m", "smroute", "serve", "--state", "none",
                        "--listen", "127.0.0.1:0",
                        "--metrics-listen", "off", "--fabric", str(bad)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "bad.topo:2:" in r.stderr and "Traceback" not in r.stderr
    # only CAs and no switch: a partial discovery, bad input as in `smroute route`
    # (exit 2: systemd's RestartPreventExitStatus=2 does not restart into it)
    f = read_topology(FIXTURE)
    from smroute.fabric.export.writers import write_topology

    lonely = tmp_path / "noswitch.topo"
    write_topology(f.with_removed(nodes=f.switches), lonely)
    r = subprocess.run([sys.executable, "-m", "smroute", "serve", "--state", "none",
                        "--listen", "127.0.0.1:0",
                        "--metrics-listen", "off", "--fabric", str(lonely)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "a partial discovery" in r.stderr, r.stderr[-2000:]


# ----------------------------------------------------------------- LoadFabric(path) and fabric_dirs

SECRET = "top-secret-line-of-a-private-file"


def _fabric_dir_layout(tmp_path: Path) -> tuple[Path, Path]:
    """``fab/`` (allowed): ok.topo, an in-dir symlink, a symlink escaping to
    ``outside/``, a subdirectory and a FIFO; ``outside/secret.topo`` holds a
    line that must never reach a client."""
    import os

    fab, outside = tmp_path / "fab", tmp_path / "outside"
    fab.mkdir()
    outside.mkdir()
    (fab / "ok.topo").write_text(Path(FIXTURE).read_text())
    (fab / "alias.topo").symlink_to(fab / "ok.topo")
    (outside / "secret.topo").write_text(SECRET + "\n")
    (fab / "escape.topo").symlink_to(outside / "secret.topo")
    (fab / "escape-dir").symlink_to(outside)
    (fab / "sub").mkdir()
    os.mkfifo(fab / "pipe.topo")
    return fab, outside


def test_load_fabric_path_only_inside_fabric_dirs(tmp_path: Path, fabric: Fabric) -> None:
    fab, outside = _fabric_dir_layout(tmp_path)
    d = start_daemon(tmp_path / "d", "--fabric-dir", str(fab))
    denied = grpc.StatusCode.PERMISSION_DENIED
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            s = c.load_fabric_path(str(fab / "ok.topo"))
            assert s.content_hash == fabric.content_hash
            assert c.route().fabric_hash == fabric.content_hash
            # a symlink that stays inside the directory is fine
            assert c.load_fabric_path(str(fab / "alias.topo")).content_hash == s.content_hash
            # outside, directly
            code, m = _code(c.load_fabric_path, str(outside / "secret.topo"))
            assert code == denied
            assert m == (f"LoadFabric path {outside / 'secret.topo'} is outside fabric_dirs "
                         f"({fab}); put the file in one of them (or add its directory to "
                         "fabric_dirs), or send the topology as topology_text")
            code, m = _code(c.load_fabric_path, "/etc/passwd")
            assert code == denied and "outside fabric_dirs" in m
            # outside, nonexistent: same answer (existence is not revealed)
            code, m = _code(c.load_fabric_path, str(outside / "nothing.topo"))
            assert code == denied and "outside fabric_dirs" in m
            # '..' out of the directory
            dotdot = f"{fab}/../outside/secret.topo"
            code, m = _code(c.load_fabric_path, dotdot)
            assert code == denied and m.startswith(f"LoadFabric path {dotdot} is outside")
            # symlinks in the directory that lead out of it
            for link in (fab / "escape.topo", fab / "escape-dir" / "secret.topo"):
                code, m = _code(c.load_fabric_path, str(link))
                assert code == denied, (link, m)
                assert f"resolves to {outside / 'secret.topo'}, which is outside" in m
            # not regular files (the FIFO must not block the daemon)
            for p in (fab / "sub", fab / "pipe.topo"):
                code, m = _code(c.load_fabric_path, str(p))
                assert code == denied and "is not a regular file" in m, m
            code, m = _code(c.load_fabric_path, str(fab / "missing.topo"))
            assert code == grpc.StatusCode.NOT_FOUND
            code, m = _code(c.load_fabric_path, "fab/ok.topo")
            assert code == grpc.StatusCode.INVALID_ARGUMENT and "absolute path" in m
            # nothing was loaded by the refused calls; the secret never left the server
            assert c.get_epoch().fabric_hash == fabric.content_hash
            assert SECRET not in d.log_path.read_text()
            assert c.health() == "SERVING"
    finally:
        assert d.stop() == 0


def test_load_fabric_path_disabled_by_default_and_reload_changes_dirs(
        tmp_path: Path, fabric: Fabric) -> None:
    fab, outside = _fabric_dir_layout(tmp_path)
    ok = str(fab / "ok.topo")
    cfg = tmp_path / "smroute.yaml"
    cfg.write_text("log_level: info\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg))
    denied = grpc.StatusCode.PERMISSION_DENIED

    def reloads() -> int:
        return sum(e.get("event") == "reloaded" for e in d.log_events())

    try:
        with SmrouteClient(d.address, timeout=60) as c:
            code, m = _code(c.load_fabric_path, ok)
            assert code == denied
            assert m == (f"LoadFabric path {ok}: server-side paths are disabled; set "
                         "fabric_dirs in the config (or smroute serve --fabric-dir DIR), or "
                         "send the topology as topology_text")
            # inline text is still accepted
            assert c.load_fabric_text(Path(ok).read_text(), "x").content_hash == \
                fabric.content_hash
            cfg.write_text(f"log_level: info\nfabric_dirs: [{fab}]\n")
            d.signal(signal.SIGHUP)
            _wait_for(lambda: reloads() == 1)
            assert c.load_fabric_path(ok).content_hash == fabric.content_hash
            # a directory that does not exist: reload rejected, the last good dirs stay
            cfg.write_text(f"fabric_dirs: [{tmp_path / 'nope'}]\n")
            d.signal(signal.SIGHUP)
            _wait_for(lambda: any(e.get("event") == "reload_failed" for e in d.log_events()))
            assert c.load_fabric_path(ok).content_hash == fabric.content_hash
            # now only outside/ is allowed: fab/ is refused, outside/ read (and parsed)
            cfg.write_text(f"fabric_dirs: [{outside}]\n")
            d.signal(signal.SIGHUP)
            _wait_for(lambda: reloads() == 2)
            code, m = _code(c.load_fabric_path, ok)
            assert code == denied and f"outside fabric_dirs ({outside})" in m
            code, m = _code(c.load_fabric_path, str(outside / "secret.topo"))
            assert code == grpc.StatusCode.INVALID_ARGUMENT, m  # allowed now: a parse error
            # back to the default: disabled again
            cfg.write_text("log_level: info\n")
            d.signal(signal.SIGHUP)
            _wait_for(lambda: reloads() == 3)
            code, m = _code(c.load_fabric_path, ok)
            assert code == denied and "server-side paths are disabled" in m
        changes = [e["fabric_dirs"] for e in d.log_events()
                   if e.get("event") == "fabric_dirs_changed"]
        assert changes == [[str(fab)], [str(outside)], []]
    finally:
        assert d.stop() == 0


def test_load_fabric_path_swapped_directory_between_check_and_open(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race the open-time check exists for: after the path was checked, a
    directory on it is replaced by a symlink leading out of fabric_dirs.  The
    descriptor actually opened is checked again (/proc/self/fd) and refused."""
    import smroute.service.sources as sv
    from smroute.service.core import RoutingCore
    from smroute.service.errors import ServiceError
    from smroute.service.rpc.servicer import status_code

    fab, outside = tmp_path / "fab", tmp_path / "outside"
    (fab / "sub").mkdir(parents=True)
    (fab / "sub" / "f.topo").write_text(Path(FIXTURE).read_text())
    outside.mkdir()
    (outside / "f.topo").write_text(SECRET + "\n")
    real_check = sv.check_fabric_path

    def check_then_swap(path: str, dirs: object) -> str:
        out = real_check(path, dirs)  # type: ignore[arg-type]
        (fab / "sub").rename(fab / "sub.old")
        (fab / "sub").symlink_to(outside)
        return out

    core = RoutingCore(workers=1, fabric_dirs=[fab], validate_epochs=False)
    try:
        assert core.read_request_path(str(fab / "sub" / "f.topo")).content_hash == \
            read_topology(FIXTURE).content_hash
        monkeypatch.setattr(sv, "check_fabric_path", check_then_swap)
        with pytest.raises(ServiceError) as ei:
            core.read_request_path(str(fab / "sub" / "f.topo"))
        assert status_code(ei.value)[0] == grpc.StatusCode.PERMISSION_DENIED
        assert "changed while it was opened" in ei.value.message
        assert SECRET not in ei.value.message
    finally:
        core.close()
