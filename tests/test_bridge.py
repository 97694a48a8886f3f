"""The OpenSM bridge: fabric changes as fault events (pure), the console and
log plumbing, the GetTables assembly, and on a real ibsim + OpenSM + smroute
daemon: the SIGHUP trigger, detection by polling, and the operator dry run
(which must write nothing)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from smroute.discovery.changes import down_set, fault_events, unexpected
from smroute.errors import InputError
from smroute.fabric.export.writers import format_topology, write_ibsim_net
from smroute.fabric.faults import DownSet, FaultEvent, FaultKind, link_key
from smroute.fabric.generate.trees import pgft
from smroute.fabric.ibnetdiscover.parse import parse_topology
from smroute.fabric.model.arrays import Fabric
from smroute.lab.harness import wait_for as _wait
from smroute.opensm.bridge import TRIGGER_RE, Bridge, BridgeError, BridgeOptions
from smroute.opensm.console import ConsoleError, LogFollower, OpenSMConsole, parse_console_address
from smroute.service.rpc.client import SmrouteClient
from smroute.tables.diff import diff_tables
from smroute.tables.formats import parse_lft_dump
from smroute.tables.lft import ForwardingTables

HAVE_TOOLS = all(shutil.which(t) for t in ("ibsim", "opensm", "ibnetdiscover", "dump_fts"))


def _small() -> Fabric:
    return pgft(3, [2, 2, 2], [1, 2, 2], [1, 1, 1])


def _link_index(f: Fabric, guid: int, port: int) -> int:
    node = f.node_by_guid(guid)
    row = f.port_row(node, port)
    return int(np.flatnonzero((f.link_a == row) | (f.link_b == row))[0])


# ----------------------------------------------------------------- changes (pure)
def test_down_set_link_switch_ca_and_back() -> None:
    f = _small()
    spine = int(f.switches[-1])  # top level
    leaf = int(f.switches[0])
    ca = int(f.cas[0])
    # a leaf's up-link (port numbers from the generator: hosts first, then up)
    up_port = int(f.num_ports[leaf])
    li = _link_index(f, int(f.node_guid[leaf]), up_port)
    cut = f.with_removed(links=[li])
    d = down_set(f, cut)
    # the link is keyed by the base fabric's first end, as the daemon keys it
    first = (int(f.node_guid[f.port_node[f.link_a[li]]]), int(f.port_num[f.link_a[li]]))
    assert link_key(f, li) == first
    assert d == DownSet(links=frozenset({first}))
    ev = fault_events(DownSet(), d)
    assert ev == [FaultEvent(FaultKind.LINK_DOWN, *first)]
    # a whole switch: one SWITCH_DOWN, its links are implied (not listed)
    gone = f.with_removed(nodes=[spine])
    d2 = down_set(f, gone)
    assert d2 == DownSet(switches=frozenset({int(f.node_guid[spine])}))
    # a CA (and the cut link still cut): the step from d to d3 only adds the CA
    d3 = down_set(f, cut.with_removed(nodes=[cut.node_by_guid(int(f.node_guid[ca]))]))
    assert fault_events(d, d3) == [FaultEvent(FaultKind.CA_DOWN, int(f.node_guid[ca]))]
    # everything back: UP events for what was down, nothing else
    back = fault_events(d3, down_set(f, f))
    assert sorted(FaultKind(e.kind).name for e in back) == ["CA_UP", "LINK_UP"]
    # switch back while a link goes down: UP first, then DOWN
    step = fault_events(d2, d)
    assert [e.kind for e in step] == [FaultKind.SWITCH_UP, FaultKind.LINK_DOWN]


def test_down_set_through_ibnetdiscover_text_and_unexpected() -> None:
    """The comparison works across a text round trip (node order may differ)."""
    f = _small()
    leaf = int(f.switches[1])
    li = _link_index(f, int(f.node_guid[leaf]), int(f.num_ports[leaf]))
    seen = parse_topology(format_topology(f.with_removed(links=[li])), "seen")
    assert len(down_set(f, seen).links) == 1 and not down_set(f, seen).switches
    assert unexpected(f, seen) == []
    # a node the base does not know and a moved LID are not faults
    assert unexpected(seen, f)[0].startswith("new link")
    g = pgft(3, [2, 2, 3], [1, 2, 2], [1, 1, 1])  # one more host per leaf
    assert any(w.startswith("new node") for w in unexpected(f, g))


# ----------------------------------------------------------------- console / log
def test_parse_console_address() -> None:
    assert parse_console_address("127.0.0.1:10000") == ("127.0.0.1", 10000)
    assert parse_console_address("10001") == ("127.0.0.1", 10001)
    assert parse_console_address("[::1]:10002") == ("::1", 10002)
    for bad in ("host:x", "1:0", "70000"):
        with pytest.raises(InputError):
            parse_console_address(bad)


def test_console_unreachable_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        with pytest.raises(ConsoleError, match=f"cannot connect to the OpenSM console at "
                           f"127.0.0.1:{port}"):
            OpenSMConsole("127.0.0.1", port, timeout=2).reroute()


class FakeConsole:
    """A TCP peer that behaves like OpenSM's loopback console (banner, prompt,
    one command per line, 'quit'); records what each connection sent."""

    def __init__(self, port: int = 0) -> None:
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", port))
        self.srv.listen(4)
        self.port = int(self.srv.getsockname()[1])
        self.got: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"OpenSM 3.3.23\nOpenSM $ ")
                buf = b""
                while b"quit\n" not in buf:
                    chunk = conn.recv(100)
                    if not chunk:
                        break
                    buf += chunk
                    if buf.endswith(b"reroute\n"):
                        conn.sendall(b"OpenSM $ ")
                self.got.append(buf)

    def close(self) -> None:
        self.srv.close()


def test_console_speaks_the_prompt_protocol() -> None:
    fake = FakeConsole()
    try:
        reply = OpenSMConsole("127.0.0.1", fake.port, timeout=5).reroute()
        _wait(lambda: fake.got, 5, "the console exchange")
    finally:
        fake.close()
    assert reply == "" and fake.got == [b"reroute\nquit\n"]


def test_log_follower_appends_partial_lines_and_rotation(tmp_path: Path) -> None:
    log = tmp_path / "opensm.log"
    log.write_text("old line\n")
    f = LogFollower(log)
    assert f.read() == []
    with open(log, "a") as fh:
        fh.write("Nov 22 00:33:07 659376 [5] 0x01 -> log_trap_info: Received Generic Notice "
                 "type:1 num:128\npart")
    lines = f.read()
    assert len(lines) == 1 and TRIGGER_RE.search(lines[0])
    with open(log, "a") as fh:
        fh.write("ial SUBNET UP\n")
    assert f.read() == ["partial SUBNET UP"]
    log.unlink()
    log.write_text("rotated\n")  # a new file (new inode): read from its start
    assert f.read() == ["rotated"]
    assert not TRIGGER_RE.search("REROUTE COMPLETE")  # our own reroute does not wake us


def test_options_are_checked(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="sighup needs the OpenSM PID"):
        BridgeOptions(daemon="x", lfts_file=tmp_path / "f", trigger="sighup")
    for pid in (0, -5):  # kill(0 / -N) would signal a whole process group
        with pytest.raises(InputError, match=f"needs the OpenSM PID .*not {pid}"):
            BridgeOptions(daemon="x", lfts_file=tmp_path / "f", trigger="sighup",
                          opensm_pid=pid)
    with pytest.raises(InputError, match="load must be"):
        BridgeOptions(daemon="x", lfts_file=tmp_path / "f", load="maybe")


# ----------------------------------------------------------------- real components
def _dump(sim: Any) -> ForwardingTables:
    from smroute.lab.sim import dump_switch_routes

    return parse_lft_dump(dump_switch_routes(sim).splitlines(), "dump_fts")


def _run_until_settled(bridge: Bridge, down: DownSet, after: int, timeout: float,
                       what: str) -> None:
    """Run the bridge's loop until it reports exactly ``down`` and has written
    an epoch after ``after`` that includes its last report, then stop it
    there (no poll after that).  A poll that caught the fabric mid-sweep and
    reported a spurious change is undone by the next ones before this returns."""
    def settled() -> bool:
        applied = [c.epoch for c in bridge.checks if c.epoch is not None]
        return bridge.state.down == down and bridge.state.written_epoch >= max(
            [after, *applied])

    t = threading.Thread(target=bridge.run, kwargs={"until": settled, "tick": 0.05},
                         daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        bridge.close()
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


@pytest.mark.real
@pytest.mark.skipif(not HAVE_TOOLS, reason="ibsim-utils, opensm, infiniband-diags not installed")
def test_sighup_polling_and_dry_run(tmp_path: Path) -> None:
    """OpenSM with the file engine, the real daemon under ibsim-run, the bridge
    with SIGHUP as trigger and polling (no log) as detector; then the dry-run
    CLI on a pending cut: it shows the change and writes nothing.

    The bridge's loop runs in steps that end once its state has settled
    (:func:`_run_until_settled`): a poll during one of OpenSM's heavy sweeps
    may report a spurious change (undone by the next poll), so the baseline is
    the first epoch's tables (not whatever the bridge wrote last), and the
    dry run waits for the sweep that follows the relink."""
    from smroute.lab.processes import DaemonProcess, OpenSMProcess
    from smroute.lab.sim import IbSim

    fabric = _small()
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    lfts = tmp_path / "smroute.lfts"
    leaf = int(fabric.switches[0])
    leaf_name = f"S-{int(fabric.node_guid[leaf]):016x}"
    up_port = int(fabric.num_ports[leaf])
    with IbSim(net, tmp_path / "sim") as sim, \
            OpenSMProcess(sim, tmp_path / "opensm", lfts_file=lfts, sweep_interval=2) as osm, \
            contextlib.ExitStack() as cleanup:
        daemon = DaemonProcess(sim, tmp_path / "daemon")
        cleanup.callback(daemon.stop)  # also when the test fails (it runs in its own session)
        addr = daemon.start()
        env = sim.client_env(preload=True)
        bridge = Bridge(BridgeOptions(
            daemon=addr, lfts_file=lfts, trigger="sighup", opensm_pid=osm.pid,
            poll_interval=0.5, load="live", discover_env=env, port_guids=False))
        try:
            bridge.connect()
            first = bridge.initialize()
            base = bridge.base  # links keyed by the discovered base's first end
            assert base is not None
            cut = DownSet(links=frozenset({link_key(base, _link_index(
                base, int(fabric.node_guid[leaf]), up_port))}))
            bridge.start()
            _run_until_settled(bridge, DownSet(), first, 30, "the first epoch written")
            with SmrouteClient(addr) as client:
                want = client.tables(first).tables  # the baseline, whatever came since
            written = bridge.last_tables
            assert written is not None and written.lid_guid is None
            assert diff_tables(want, written).identical  # nothing down: epoch 1's tables
            assert b"portguid" not in lfts.read_bytes()  # the bare file (the e2e test
            # covers the one with port GUIDs): OpenSM loads it just as well
            # SIGHUP -> heavy sweep -> the file engine reads the file: switches hold it
            _wait(lambda: diff_tables(want, _dump(sim)).identical, 30, "switches = epoch")
            n_checks = len(bridge.checks)
            sim.console(f'Unlink "{leaf_name}"[{up_port}]')
            _run_until_settled(bridge, cut, first + 1, 30, "the rerouted epoch")
            found = [c for c in bridge.checks[n_checks:] if c.events]
            assert FaultEvent(FaultKind.LINK_DOWN, *next(iter(cut.links))) in found[0].events
            want2 = bridge.last_tables
            assert want2 is not None and not diff_tables(want, want2).identical
            _wait(lambda: diff_tables(want2, _dump(sim)).identical, 30, "switches = new epoch")
            assert bridge.errors == []
        finally:
            bridge.close()
        # dry run with the bridge stopped: relink, so the fabric has a pending change;
        # discover once OpenSM's heavy sweep for the relink is over
        sweeps = osm.log.read_text(errors="replace").count("SUBNET UP")
        sim.console(f'ReLink "{leaf_name}"[{up_port}]')
        _wait(lambda: osm.log.read_text(errors="replace").count("SUBNET UP") > sweeps, 30,
              "OpenSM's sweep after the relink")
        before = lfts.read_bytes()
        state_before = (tmp_path / "bridge-state.json").read_text()
        cmd = [sys.executable, "-m", "smroute", "opensm-bridge", "--daemon", addr,
               "--lfts-file", str(lfts), "--dry-run", "--max-entries", "5"]
        res = sim.run(cmd, check=False, cwd=tmp_path)
        out = res.stdout
        print(out)
        assert res.returncode == 1, out + res.stderr
        assert "fabric: 1 pending fault events" in out
        assert "  LINK_UP 0x" in out
        assert "daemon dry run:" in out and "64-LID blocks" in out
        assert "LIDs changed in" in out and "blocks [" in out
        assert "vs daemon epoch" in out and "identical" in out  # file == latest epoch
        # nothing written: file, state, daemon epoch
        assert lfts.read_bytes() == before
        assert (tmp_path / "bridge-state.json").read_text() == state_before
        with SmrouteClient(addr) as client:
            assert client.get_epoch(0).id == bridge.state.written_epoch
        assert daemon.stop() == 0
        log = osm.log.read_text(errors="replace")
    assert "file tables configured on all switches" in log
    assert json.loads(state_before)["down"]["links"]
    assert os.path.exists(lfts)


@pytest.mark.real
@pytest.mark.skipif(not HAVE_TOOLS, reason="ibsim-utils, opensm, infiniband-diags not installed")
def test_bridge_over_mutual_tls(tmp_path: Path) -> None:
    """With mutual TLS on the daemon, the bridge's client certificate must be
    listed in mutating_identities to load the fabric and send faults."""
    sys.path.insert(0, str(Path(__file__).parent))
    from certs import make_pki

    from smroute.lab.processes import DaemonProcess
    from smroute.lab.sim import IbSim, run_opensm
    from smroute.opensm.bridge import BridgeError

    pki = make_pki(tmp_path / "pki", clients=("opensm-bridge", "intruder"))
    conf = tmp_path / "smroute.yaml"
    conf.write_text("mutating_identities: [opensm-bridge]\n" + pki.tls_yaml(mutual=True))
    fabric = _small()
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    with IbSim(net, tmp_path / "sim") as sim:
        run_opensm(sim, tmp_path / "opensm")  # assigns LIDs
        daemon = DaemonProcess(sim, tmp_path / "daemon", extra_args=("--config", str(conf)),
                               listen="127.0.0.1:0")  # mutual TLS: over TCP
        addr = daemon.start()
        env = sim.client_env(preload=True)

        def bridge(cn: str) -> Bridge:
            c = pki.client(cn)
            return Bridge(BridgeOptions(
                daemon=addr, lfts_file=tmp_path / "smroute.lfts", trigger="none",
                load="discover", discover_env=env, tls_ca=pki.ca.cert_path,
                tls_cert=c.cert_path, tls_key=c.key_path), log=lambda *a, **k: None)

        bad = bridge("intruder")
        bad.connect()
        with pytest.raises(BridgeError, match="LoadFabric: PERMISSION_DENIED"):
            bad.initialize()
        bad.close()
        good = bridge("opensm-bridge")
        good.connect()
        epoch = good.initialize()
        assert good.sync_epoch(epoch) is not None
        good.close()
        assert daemon.stop() == 0
    written = parse_lft_dump((tmp_path / "smroute.lfts").read_text().splitlines(), "lfts")
    assert written.n_switches == len(fabric.switches)


@pytest.mark.real
@pytest.mark.skipif(not HAVE_TOOLS, reason="ibsim-utils, opensm, infiniband-diags not installed")
def test_a_link_the_base_never_had_reloads_the_fabric(tmp_path: Path) -> None:
    """The bridge started while a link was down (so its base lacks it); when the
    link appears it is not a fault to undo: the bridge reloads the fabric."""
    from smroute.lab.processes import DaemonProcess
    from smroute.lab.sim import IbSim, run_opensm

    fabric = _small()
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    leaf = int(fabric.switches[2])
    ref = f'"S-{int(fabric.node_guid[leaf]):016x}"[{int(fabric.num_ports[leaf])}]'
    with IbSim(net, tmp_path / "sim") as sim:
        run_opensm(sim, tmp_path / "opensm")
        sim.console(f"Unlink {ref}")
        daemon = DaemonProcess(sim, tmp_path / "daemon")
        addr = daemon.start()
        env = sim.client_env(preload=True)
        b = Bridge(BridgeOptions(daemon=addr, lfts_file=tmp_path / "smroute.lfts",
                                 trigger="none", load="discover", discover_env=env),
                   log=lambda *a, **k: None)
        b.connect()
        first = b.initialize()
        assert b.base is not None and b.base.n_links == fabric.n_links - 1
        assert b.check_changes().events == ()  # nothing changed
        sim.console(f"ReLink {ref}")
        res = b.check_changes()
        assert res.events == () and res.warnings[0].startswith("new link")
        assert res.epoch is not None and res.epoch > first
        assert b.base.link_set() == fabric.link_set()
        with SmrouteClient(addr) as c:
            ep = c.get_epoch(0)
        assert ep.cause == "route" and (ep.down_links, ep.down_switches) == (0, 0)
        assert b.check_changes().events == () and b.checks[-1].warnings == ()
        b.close()
        assert daemon.stop() == 0


def test_bridge_unit_verifies_and_runs_the_cli(tmp_path: Path) -> None:
    """deploy/smroute-opensm-bridge.service passes systemd-analyze verify, its
    exposure stays moderate, and its ExecStart is a valid command line."""
    import re
    import shlex
    import subprocess

    unit_src = Path(__file__).resolve().parents[1] / "deploy" / "smroute-opensm-bridge.service"
    text = unit_src.read_text()
    exec_start = re.search(r"^ExecStart=(.*?[^\\])$", text, re.M | re.S)
    assert exec_start
    argv = shlex.split(exec_start.group(1).replace("\\\n", " "))
    assert argv[1] == "opensm-bridge"
    from smroute.cli.main import build_parser

    args = build_parser().parse_args(argv[1:])
    assert args.load == "discover" and args.console == "127.0.0.1:10000"
    assert args.lfts_file.startswith("/var/lib/smroute-bridge/")  # its StateDirectory
    tool = shutil.which("systemd-analyze")
    exe = Path(sys.executable).with_name("smroute")
    if tool is None or not exe.exists():
        pytest.skip("systemd-analyze or the smroute executable is missing")
    unit = tmp_path / "smroute-opensm-bridge.service"
    unit.write_text(text.replace("/opt/smroute/.venv/bin/smroute", str(exe)))
    r = subprocess.run([tool, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    r = subprocess.run([tool, "security", "--offline=yes", str(unit)],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
    if m is None:
        pytest.skip(f"systemd-analyze security --offline unsupported: {r.stderr[-200:]}")
    assert float(m.group(1)) <= 3.0, r.stdout


@pytest.mark.real
@pytest.mark.skipif(not HAVE_TOOLS, reason="ibsim-utils, opensm, infiniband-diags not installed")
def test_daemon_restart_is_noticed_and_the_fabric_reloaded(tmp_path: Path) -> None:
    """The daemon restarts empty (epoch ids start again): the bridge notices when
    its Watch stream comes back, loads and routes the fabric again, re-sends
    what is down, and writes the new epoch."""
    from smroute.lab.processes import DaemonProcess
    from smroute.lab.sim import IbSim, run_opensm

    fabric = _small()
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    lfts = tmp_path / "smroute.lfts"
    leaf = int(fabric.switches[1])
    ref = f'"S-{int(fabric.node_guid[leaf]):016x}"[{int(fabric.num_ports[leaf])}]'
    listen = f"unix:{tempfile.mkdtemp(prefix='smroute-t-')}/smroute.sock"
    with IbSim(net, tmp_path / "sim") as sim:
        run_opensm(sim, tmp_path / "opensm")
        d1 = DaemonProcess(sim, tmp_path / "d1", listen=listen)
        addr = d1.start()
        env = sim.client_env(preload=True)
        b = Bridge(BridgeOptions(daemon=addr, lfts_file=lfts, trigger="none", load="discover",
                                 discover_env=env, poll_interval=0.5),
                   log=lambda *a, **k: None)
        b.connect()
        b.initialize()
        b.start()
        b.run_in_thread()
        try:
            _wait(lambda: b.state.written_epoch == 1, 30, "epoch 1 written")
            sim.console(f"Unlink {ref}")
            _wait(lambda: b.state.written_epoch == 2, 30, "epoch 2 (link down) written")
            degraded = lfts.read_bytes()
            assert d1.stop() == 0
            d2 = DaemonProcess(sim, tmp_path / "d2", listen=listen)
            d2.start()
            # reloaded from the current (degraded) fabric: epoch 1 of the new daemon
            # holds the same tables as epoch 2 of the old one
            _wait(lambda: b.state.written_epoch == 1 and b.base is not None
                  and b.base.n_links == fabric.n_links - 1, 60, "the bridge to reload")
            _wait(lambda: lfts.read_bytes() == degraded, 10, "the same degraded tables")
            with SmrouteClient(addr) as c:
                assert c.get_epoch(0).id == 1
        finally:
            b.close()
        assert d2.stop() == 0


@pytest.mark.real
@pytest.mark.skipif(not HAVE_TOOLS, reason="ibsim-utils, opensm, infiniband-diags not installed")
def test_a_failed_trigger_is_retried(tmp_path: Path) -> None:
    """The console is down when the epoch is written: the file is in place, the
    error is reported, and the bridge retries the reroute until it gets through
    (to a real OpenSM started afterwards on that console port, which logs the
    reroute)."""
    from smroute.lab.processes import DaemonProcess, OpenSMProcess, free_port
    from smroute.lab.sim import IbSim, run_opensm

    fabric = _small()
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    lfts = tmp_path / "smroute.lfts"
    port = free_port()
    with IbSim(net, tmp_path / "sim") as sim:
        run_opensm(sim, tmp_path / "opensm")
        daemon = DaemonProcess(sim, tmp_path / "daemon")
        addr = daemon.start()
        env = sim.client_env(preload=True)
        b = Bridge(BridgeOptions(daemon=addr, lfts_file=lfts, console=("127.0.0.1", port),
                                 load="discover", discover_env=env, poll_interval=0),
                   log=lambda *a, **k: None)
        b.connect()
        b.initialize()
        b.start()
        b.run_in_thread()
        try:
            _wait(lambda: b.errors, 30, "the console error")
            assert "cannot connect to the OpenSM console" in b.errors[0]
            assert b.state.written_epoch == 1 and lfts.exists() and b.trigger_pending
            # VERBOSE (0x04) for the REROUTE COMPLETE line
            with OpenSMProcess(sim, tmp_path / "osm-live", lfts_file=lfts, console_port=port,
                               sweep_interval=0, log_flags=0x07) as osm:
                _wait(lambda: not b.trigger_pending, 30, "the retried reroute")
                _wait(lambda: "REROUTE COMPLETE" in osm.log.read_text(errors="replace"), 30,
                      "OpenSM to log the reroute")
                want = b.last_tables
                assert want is not None and diff_tables(want, _dump(sim)).identical
        finally:
            b.close()
        assert daemon.stop() == 0


@pytest.mark.real
@pytest.mark.skipif(not HAVE_TOOLS, reason="ibsim-utils, opensm, infiniband-diags not installed")
def test_a_restarted_bridge_resumes_from_its_state(tmp_path: Path) -> None:
    """Bridge A loads the fabric and reports a cut link, then stops.  Bridge B
    (load none, same state directory) resumes: it knows the link is down (no
    duplicate event) and reports LINK_UP when the link comes back."""
    from smroute.lab.processes import DaemonProcess
    from smroute.lab.sim import IbSim, run_opensm

    fabric = _small()
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    leaf = int(fabric.switches[3])
    ref = f'"S-{int(fabric.node_guid[leaf]):016x}"[{int(fabric.num_ports[leaf])}]'
    with IbSim(net, tmp_path / "sim") as sim:
        run_opensm(sim, tmp_path / "opensm")
        daemon = DaemonProcess(sim, tmp_path / "daemon")
        addr = daemon.start()
        env = sim.client_env(preload=True)

        def bridge(load: str) -> Bridge:
            b = Bridge(BridgeOptions(daemon=addr, lfts_file=tmp_path / "smroute.lfts",
                                     trigger="none", load=load, discover_env=env),
                       log=lambda *a, **k: None)
            b.connect()
            return b

        a = bridge("discover")
        a.initialize()
        sim.console(f"Unlink {ref}")
        assert [e.kind for e in a.check_changes().events] == [FaultKind.LINK_DOWN]
        a.close()
        b = bridge("none")
        b.initialize()
        assert b.state.down == a.state.down and len(b.state.down.links) == 1
        assert b.check_changes().events == ()
        sim.console(f"ReLink {ref}")
        res = b.check_changes()
        assert [e.kind for e in res.events] == [FaultKind.LINK_UP]
        with SmrouteClient(addr) as c:
            ep = c.get_epoch(0)
        assert ep.id == res.epoch == 3 and ep.down_links == 0
        b.close()
        # a bridge with load none against a daemon whose fabric it has no state for
        (tmp_path / "bridge-state.json").unlink()
        sim.console(f"Unlink {ref}")
        c3 = bridge("none")
        with pytest.raises(BridgeError, match="is not the one discovered here"):
            c3.initialize()
        c3.close()
        assert daemon.stop() == 0


def test_an_epoch_that_failed_validation_is_never_written(tmp_path: Path) -> None:
    """The daemon refuses tables that leave connected pairs unrouted; should an
    epoch's background validation fail anyway, the bridge does not write it."""
    from smroute.service.rpc.client import pb

    class Daemon:
        def __init__(self, ok: bool) -> None:
            self.ok = ok
            self.fetched = 0

        def get_epoch(self, epoch: int) -> pb.Epoch:
            return pb.Epoch(id=epoch, validation=pb.Validation(
                state=pb.Validation.DONE, ok=self.ok, summary="INVALID: 2 dead ends"))

        def tables(self, epoch: int) -> object:
            self.fetched += 1
            raise AssertionError("the tables of an invalid epoch were fetched")

    lfts = tmp_path / "lfts"
    b = Bridge(BridgeOptions(daemon="x", lfts_file=lfts, trigger="none",
                             state_dir=tmp_path))
    fake = Daemon(ok=False)
    b._client = fake
    assert b.sync_epoch(3) is None
    assert not lfts.exists() and fake.fetched == 0 and b.state.written_epoch == 0


def test_state_of_format_1_loads_with_the_one_down_set_key(tmp_path: Path) -> None:
    """A state file written before the one DownSet (links by both ends) loads
    with each link keyed by the base fabric's first end."""
    from smroute.opensm.bridge_state import BASE_FILE, STATE_FILE

    f = _small()
    leaf = int(f.switches[0])
    li = _link_index(f, int(f.node_guid[leaf]), int(f.num_ports[leaf]))
    a, b = int(f.link_a[li]), int(f.link_b[li])
    ends = sorted([(int(f.node_guid[f.port_node[a]]), int(f.port_num[a])),
                   (int(f.node_guid[f.port_node[b]]), int(f.port_num[b]))])
    (tmp_path / BASE_FILE).write_text("\n".join(format_topology(f)) + "\n")
    (tmp_path / STATE_FILE).write_text(json.dumps({
        "format": "smroute-bridge-state/1", "written_epoch": 3,
        "down": {"switches": [], "cas": [], "links": [
            [f"{ends[1][0]:#018x}", ends[1][1], f"{ends[0][0]:#018x}", ends[0][1]]]}}))
    br = Bridge(BridgeOptions(daemon="x", lfts_file=tmp_path / "l", trigger="none",
                              state_dir=tmp_path))
    br.load_state()
    assert br.state.down == DownSet(links=frozenset({link_key(f, li)}))
    assert br.state.written_epoch == 3
