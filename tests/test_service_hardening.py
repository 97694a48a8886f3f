"""Daemon hardening (issue 16): configuration precedence on SIGHUP, one daemon
per socket or port, bounded and escaped error echoes, per-client stream
limits, reserved capacity for mutations and health, idle Watch streams, a
config that is not a regular file, and the fabric's own LMC.

Every test runs real ``smroute serve`` processes (tests/service_daemon.py)
with real signals and a real gRPC client; a flooding client is a separate
Python process (its own connection)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import grpc
import pytest
from service_daemon import ROOT, start_daemon

from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.lab.processes import free_port
from smroute.routing.engine import route
from smroute.service.config import ConfigError, parse_config
from smroute.service.rpc.client import SmrouteClient, link_down, link_up
from smroute.tables.diff import diff_tables

FIXTURE = str(ROOT / "fixtures" / "pgft-3-2.2.3-1.2.2-1.2.1.topo")
LMC2 = str(ROOT / "fixtures" / "pgft-3-2.2.3-lmc2.topo")
FIXTURES = str(ROOT / "fixtures")
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def _code(fn: object, *args: object, **kw: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as ei:
        fn(*args, **kw)  # type: ignore[operator]
    return ei.value.code(), ei.value.details()


def _wait_for(cond: object, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"{what}: not met within {timeout} s")


def _events(d: object, name: str) -> list[dict[str, object]]:
    return [e for e in d.log_events() if e.get("event") == name]  # type: ignore[attr-defined]


def _serve(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """``smroute serve ARGS`` to completion; a daemon that does not exit within
    ``timeout`` is killed and fails the test."""
    cmd = [sys.executable, "-m", "smroute", "serve", "--metrics-listen", "off", *args]
    p = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise AssertionError(f"smroute serve {' '.join(args)} still running after "
                             f"{timeout} s") from None
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


# ----------------------------------------------------------------- 1. precedence


def test_sighup_keeps_route_rpc_settings_until_the_file_changes_them(tmp_path: Path) -> None:
    cfg = tmp_path / "smroute.yaml"
    cfg.write_text(f"fabric: {LMC2}\nalgorithm: dmodc\nlmc: 0\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg))
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            assert (c.get_epoch().algorithm, c.get_epoch().lmc) == ("dmodc", 0)
            ep = c.route(algorithm="nmodc", lmc=2)  # the operator's choice
            assert (ep.id, ep.algorithm, ep.lmc) == (2, "nmodc", 2)
            # a reload of the unchanged file (certificate rotation, say)
            d.signal(signal.SIGHUP)
            _wait_for(lambda: _events(d, "reloaded"), what="reload")
            assert c.get_epoch().id == 2  # no new epoch
            assert not _events(d, "routing_settings_changed")
            ep = c.route()  # the next routing keeps the operator's settings
            assert (ep.id, ep.algorithm, ep.lmc) == (3, "nmodc", 2)
            f = read_topology(LMC2)
            sw = [int(g) for g in f.node_guid[f.switches]]
            out = c.apply_faults([link_down(sw[0], 1)])  # a reroute, too
            assert (out.epoch.algorithm, out.epoch.lmc) == ("nmodc", 2)
            c.apply_faults([link_up(sw[0], 1)])
            # the file changes lmc: that key takes over; algorithm stays the RPC's
            cfg.write_text(f"fabric: {LMC2}\nalgorithm: dmodc\nlmc: 1\n")
            d.signal(signal.SIGHUP)
            _wait_for(lambda: len(_events(d, "reloaded")) == 2, what="second reload")
            [changed] = _events(d, "routing_settings_changed")
            assert changed["lmc"] == 1 and "algorithm" not in changed
            ep = c.route()
            assert (ep.algorithm, ep.lmc) == ("nmodc", 1)
    finally:
        assert d.stop() == 0


# ----------------------------------------------------------------- 2. one daemon per address


def test_second_daemon_on_the_same_unix_socket_exits_2(tmp_path: Path) -> None:
    sock = tmp_path / "run" / "smroute.sock"
    d = start_daemon(tmp_path / "d1", fabric=FIXTURE, listen=f"unix:{sock}")
    try:
        inode = sock.stat().st_ino
        r = _serve("--listen", f"unix:{sock}", "--fabric", FIXTURE)
        assert r.returncode == 2, r.stderr[-2000:]
        assert f"another smroute daemon (pid {d.proc.pid}) serves this socket" in r.stderr
        assert "Traceback" not in r.stderr
        assert sock.stat().st_ino == inode  # the first one's socket is untouched
        with SmrouteClient(d.address, timeout=30) as c:
            assert c.get_epoch().id == 1 and c.health() == "SERVING"
    finally:
        assert d.stop() == 0
    assert not sock.exists()


def test_a_killed_daemons_socket_does_not_block_the_next(tmp_path: Path) -> None:
    sock = tmp_path / "smroute.sock"
    d1 = start_daemon(tmp_path / "d1", fabric=FIXTURE, listen=f"unix:{sock}")
    d1.signal(signal.SIGKILL)
    d1.proc.wait(30)
    d1.stop()
    assert sock.exists()  # stale: nobody holds the lock any more
    d2 = start_daemon(tmp_path / "d2", fabric=FIXTURE, listen=f"unix:{sock}")
    try:
        with SmrouteClient(d2.address, timeout=30) as c:
            assert c.get_epoch().id == 1
    finally:
        assert d2.stop() == 0


def test_second_daemon_on_the_same_tcp_port_exits_2(tmp_path: Path) -> None:
    listen = f"127.0.0.1:{free_port()}"
    d = start_daemon(tmp_path / "d1", fabric=FIXTURE, listen=listen)
    try:
        r = _serve("--listen", listen, "--fabric", FIXTURE)
        assert r.returncode == 2, r.stderr[-2000:]
        assert f"listen {listen}: the address is in use" in r.stderr
        assert "Traceback" not in r.stderr
        with SmrouteClient(d.address, timeout=30) as c:
            assert c.health() == "SERVING"
    finally:
        assert d.stop() == 0


# ----------------------------------------------------------------- 3. echoed request text


def test_long_or_binary_request_text_gives_a_short_escaped_status(tmp_path: Path) -> None:
    d = start_daemon(tmp_path / "d", "--fabric-dir", FIXTURES, fabric=FIXTURE)
    big = "x" * (100 * 1024)
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            code, msg = _code(c.load_fabric_path, big)  # relative: INVALID_ARGUMENT
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, msg[:300])
            assert len(msg) < 600 and f"…({len(big)} bytes)" in msg
            code, msg = _code(c.load_fabric_path, "/" + big)  # outside fabric_dirs
            assert code == grpc.StatusCode.PERMISSION_DENIED and len(msg) < 1500, msg[:300]
            code, msg = _code(c.route, algorithm=big)
            assert code == grpc.StatusCode.INVALID_ARGUMENT and len(msg) < 600
            assert "unknown algorithm 'xxx" in msg and f"…({len(big)} bytes)" in msg
            code, msg = _code(c.route, algorithm="bad\x00\x1b[2Jé")
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert "'bad\\x00\\x1b[2Jé'" in msg and "\x00" not in msg and "\x1b" not in msg
            code, msg = _code(c.load_fabric_text, "garbage line\n" * 3, big)
            assert code == grpc.StatusCode.INVALID_ARGUMENT and len(msg) < 1000, msg[:300]
            code, msg = _code(c.load_fabric_text, "Switch 4 " + "y" * 200_000 + "\n", "t")
            assert code == grpc.StatusCode.INVALID_ARGUMENT and len(msg.encode()) <= 2000
            code, msg = _code(c.analyze, order=big)
            assert code == grpc.StatusCode.INVALID_ARGUMENT and len(msg) < 600
            assert c.get_epoch().id == 1
    finally:
        assert d.stop() == 0


# ----------------------------------------------------------------- 4. streams and capacity

FLOOD = textwrap.dedent("""
    import json, sys, threading
    import grpc
    from grpc_reflection.v1alpha import reflection_pb2 as rpb, reflection_pb2_grpc as rgrpc
    from smroute.service.rpc.client import SmrouteClient
    address, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    c = SmrouteClient(address)
    done = threading.Event()

    def one_request():  # a reflection stream that asks once, then idles
        yield rpb.ServerReflectionRequest(list_services="")
        done.wait()

    calls, opened, refused = [], 0, []
    for _ in range(n):
        if kind == "watch":
            call = c.watch()
        else:
            call = rgrpc.ServerReflectionStub(c.channel).ServerReflectionInfo(one_request())
        calls.append(call)
        try:
            next(call)
            opened += 1
        except grpc.RpcError as e:
            refused.append([e.code().name, e.details()])
    print(json.dumps({"opened": opened, "refused": refused}), flush=True)
    sys.stdin.read()  # hold the streams until the test closes stdin
""")


class Flood:
    """A separate client process holding ``n`` streams of ``kind`` (watch|reflection)."""

    def __init__(self, address: str, kind: str, n: int) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", FLOOD, address, kind, str(n)],
                                     cwd=ROOT, env=ENV, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the flooding client died"
        self.result = json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def test_watch_flood_from_one_client_leaves_room_for_others(tmp_path: Path) -> None:
    d = start_daemon(tmp_path / "d", fabric=FIXTURE)
    try:
        flood = Flood(d.address, "watch", 64)
        try:
            r = flood.result
            assert r["opened"] == 16 and len(r["refused"]) == 48, r
            code, detail = r["refused"][0]
            assert code == "RESOURCE_EXHAUSTED" and "max_streams_per_client" in detail
            with SmrouteClient(d.address, timeout=30) as c:
                w = c.watch(timeout=30)
                assert next(w).id == 1  # another client's Watch
                f = read_topology(FIXTURE)
                g = int(f.node_guid[f.switches[0]])
                assert c.apply_faults([link_down(g, 1)]).committed
                assert next(w).id == 2
                assert c.health() == "SERVING"
                c.apply_faults([link_up(g, 1)])
                w.cancel()
        finally:
            flood.close()
    finally:
        assert d.stop() == 0


def test_read_only_floods_cannot_take_the_workers_of_mutations_and_health(
        tmp_path: Path) -> None:
    cfg = tmp_path / "smroute.yaml"
    # read-only calls: at most 2 + 2 + 16 = 20 at once; 8 more workers reserved
    cfg.write_text(f"fabric: {FIXTURE}\nlimits:\n  max_streams: 2\n  max_watchers: 2\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg))
    floods = []
    try:  # idle reflection streams: each holds a worker
        floods = [Flood(d.address, "reflection", 10), Flood(d.address, "reflection", 10)]
        assert [f.result["opened"] for f in floods] == [10, 10]
        with SmrouteClient(d.address, timeout=30) as c:
            f = read_topology(FIXTURE)
            g = int(f.node_guid[f.switches[0]])
            assert c.apply_faults([link_down(g, 1)]).committed
            assert c.health() == "SERVING"
            assert c.apply_faults([link_up(g, 1)]).committed
            code, msg = _code(lambda: next(c.watch(timeout=30)))  # one read too many
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "reserved_workers" in msg
    finally:
        for fl in floods:
            fl.close()
        assert d.stop() == 0


def test_idle_watch_is_closed_with_unavailable(tmp_path: Path) -> None:
    cfg = tmp_path / "smroute.yaml"
    cfg.write_text(f"fabric: {FIXTURE}\nlimits:\n  stream_idle_s: 1\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg))
    try:
        with SmrouteClient(d.address, timeout=30) as c:
            w = c.watch(timeout=30)
            t = time.monotonic()
            assert next(w).id == 1
            with pytest.raises(grpc.RpcError) as ei:
                next(w)
            assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "stream_idle_s" in ei.value.details()
            assert 0.9 < time.monotonic() - t < 10
            assert next(c.watch(timeout=30)).id == 1  # a new one is fine
    finally:
        assert d.stop() == 0


def test_new_limits_are_validated() -> None:
    cfg = parse_config("lmc: null\nlimits:\n  max_streams_per_client: 4\n  stream_idle_s: 0\n"
                       "  reserved_workers: 3\n")
    assert cfg.lmc is None and cfg.limits.max_streams_per_client == 4
    assert cfg.limits.stream_idle_s == 0 and cfg.limits.reserved_workers == 3
    for text, key in (("limits:\n  stream_idle_s: -1\n", "limits.stream_idle_s"),
                      ("limits:\n  reserved_workers: 0\n", "limits.reserved_workers"),
                      ("limits:\n  max_streams_per_client: many\n",
                       "limits.max_streams_per_client"),
                      ("lmc: 9\n", "lmc")):
        with pytest.raises(ConfigError) as ei:
            parse_config(text)
        assert ei.value.key == key


# ----------------------------------------------------------------- 5. config not a regular file


def test_config_that_is_a_fifo_is_refused_at_start_and_on_reload(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    r = _serve("--listen", "127.0.0.1:0", "--config", str(fifo))
    assert r.returncode == 2 and "expected a regular file, got a FIFO" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    cfg = tmp_path / "smroute.yaml"
    cfg.write_text(f"fabric: {FIXTURE}\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg))
    try:
        cfg.unlink()
        os.mkfifo(cfg)  # nobody ever writes to it
        d.signal(signal.SIGHUP)
        _wait_for(lambda: _events(d, "reload_failed"), 15, "reload_failed")
        assert "a FIFO" in str(_events(d, "reload_failed")[0]["message"])
        with SmrouteClient(d.address, timeout=30) as c:
            assert c.health() == "SERVING" and c.get_epoch().id == 1
        t = time.monotonic()
        d.signal(signal.SIGTERM)
        assert d.proc.wait(20) == 0 and time.monotonic() - t < 20
    finally:
        d.stop()


# ----------------------------------------------------------------- 6. the fabric's LMC


def test_daemon_routes_the_fabrics_lmc_unless_configured(tmp_path: Path) -> None:
    f = read_topology(LMC2)
    want = route(f, workers=1).tables  # what `smroute route` writes (no --lmc)
    d = start_daemon(tmp_path / "d", fabric=LMC2)
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            assert c.get_epoch().lmc == 2
            assert diff_tables(c.tables().tables, want).identical
    finally:
        assert d.stop() == 0
    d = start_daemon(tmp_path / "d0", "--lmc", "0", fabric=LMC2)
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            assert c.get_epoch().lmc == 0
            assert diff_tables(c.tables().tables, route(f, workers=1, lmc=0).tables).identical
    finally:
        assert d.stop() == 0
