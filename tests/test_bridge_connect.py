"""The bridge and its daemon: a dry run tells at once that the daemon cannot
be reached (exit 4, not 1 "changes pending"), a bridge started while the
daemon is down retries with back-off and logs it instead of exiting, and the
first epoch written counts every LFT block it writes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from smroute.cli import bridge_cmd
from smroute.cli.main import main as cli_main
from smroute.fabric.export.writers import format_topology
from smroute.fabric.generate.trees import pgft
from smroute.lab.harness import wait_for
from smroute.lab.processes import free_port
from smroute.opensm.backoff import Backoff
from smroute.opensm.bridge import Bridge, BridgeOptions
from smroute.opensm.connect import connect_with_retry
from smroute.tables.formats import read_tables
from smroute.tables.lft import BLOCK, NO_ROUTE
from tests.service_daemon import ROOT, start_daemon

SMROUTE = [sys.executable, "-m", "smroute"]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def test_dry_run_with_no_daemon_says_so_at_once_with_its_own_exit_code(tmp_path: Path) -> None:
    t0 = time.monotonic()
    r = subprocess.run([*SMROUTE, "opensm-bridge", "--daemon", f"127.0.0.1:{free_port()}",
                        "--lfts-file", str(tmp_path / "smroute.lfts"), "--dry-run"],
                       capture_output=True, text=True, timeout=60, env=ENV)
    assert time.monotonic() - t0 < 15
    assert r.returncode == 4, r.stderr
    assert "cannot reach the daemon at 127.0.0.1:" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    r = subprocess.run([*SMROUTE, "opensm-bridge", "--daemon", f"unix:{tmp_path}/none.sock",
                        "--lfts-file", str(tmp_path / "smroute.lfts"), "--dry-run"],
                       capture_output=True, text=True, timeout=60, env=ENV)
    assert r.returncode == 4 and "no such socket" in r.stderr, r.stderr


def test_dry_run_with_a_silent_daemon_says_it_waits(tmp_path: Path, capsys: Any,
                                                    monkeypatch: Any) -> None:
    """Something accepts the connection but never answers: a message on
    stderr while waiting, then exit 4."""
    monkeypatch.setattr(bridge_cmd, "DRY_RUN_CONNECT_S", 1.0)
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        port = srv.getsockname()[1]
        rc = cli_main(["opensm-bridge", "--daemon", f"127.0.0.1:{port}",
                       "--lfts-file", str(tmp_path / "smroute.lfts"), "--dry-run"])
    err = capsys.readouterr().err
    assert rc == 4
    assert f"the daemon at 127.0.0.1:{port} does not answer yet; waiting up to 1 s" in err
    assert f"cannot reach the daemon at 127.0.0.1:{port} within 1 s" in err


def test_a_bridge_started_before_its_daemon_retries_and_logs(tmp_path: Path) -> None:
    """The CLI keeps running (it used to exit) and logs each failed attempt
    with a growing delay; SIGTERM stops it with 0."""
    p = subprocess.Popen([*SMROUTE, "opensm-bridge", "--daemon", f"127.0.0.1:{free_port()}",
                          "--lfts-file", str(tmp_path / "smroute.lfts"), "--no-trigger"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    lines: list[str] = []

    def read() -> None:
        assert p.stdout is not None
        lines.extend(iter(p.stdout.readline, ""))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(lambda: sum("daemon_unreachable" in x for x in lines) >= 2, 60,
                 "two failed attempts logged")
        assert p.poll() is None
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(30)
    reader.join(10)
    failed = [x for x in lines if "daemon_unreachable" in x]
    assert "attempt=1" in failed[0] and "retry_in_s=1" in failed[0]
    assert "attempt=2" in failed[1] and "retry_in_s=2" in failed[1]
    assert rc == 0, p.stderr.read() if p.stderr else ""


def test_retry_reaches_a_daemon_started_later_and_the_first_write_counts_its_blocks(
        tmp_path: Path) -> None:
    fabric = pgft(2, [4, 4], [1, 2], [1, 2])
    lines = format_topology(fabric)
    topo = tmp_path / "fabric.topo"
    topo.write_text("\n".join(lines) + "\n")
    events: list[tuple[str, dict[str, Any]]] = []
    address = f"unix:{tmp_path}/d.sock"  # mutations need the Unix socket (or mutual TLS)
    bridge = Bridge(BridgeOptions(daemon=address, lfts_file=tmp_path / "s.lfts",
                                  trigger="none", load="discover", state_dir=tmp_path),
                    discover=lambda: lines, log=lambda lvl, ev, **kw: events.append((ev, kw)))
    stop = threading.Event()
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(connect_with_retry(
        bridge, stop=stop, attempt_s=0.5, backoff=Backoff(initial_s=0.2, max_s=1.0))))
    t.start()
    daemon = None
    try:
        wait_for(lambda: sum(e == "daemon_unreachable" for e, _ in events) >= 2, 30,
                 "failed attempts")
        daemon = start_daemon(tmp_path / "d", fabric=str(topo), listen=address)
        t.join(60)
        assert result == [True]
        assert [kw["attempts"] for e, kw in events if e == "daemon_reached"] == [
            sum(e == "daemon_unreachable" for e, _ in events) + 1]
        epoch = bridge.initialize()
        res = bridge.sync_epoch(epoch)
        assert res is not None
        written = read_tables(tmp_path / "s.lfts")
        routed = written.ports != NO_ROUTE
        routed[:, 0] = False
        blocks = sum(len({lid // BLOCK for lid in row.nonzero()[0].tolist()}) for row in routed)
        assert blocks > 0 and res.blocks_changed == blocks
        assert res.entries_changed == int(routed.sum())
    finally:
        stop.set()
        t.join(30)
        bridge.close()
        if daemon is not None:
            assert daemon.stop() == 0


def test_retry_stops_when_asked() -> None:
    bridge = Bridge(BridgeOptions(daemon=f"127.0.0.1:{free_port()}",
                                  lfts_file=Path("/nonexistent/s.lfts")),
                    log=lambda *a, **k: None)
    stop = threading.Event()
    stop.set()
    assert connect_with_retry(bridge, stop=stop) is False
