"""The OpenSM bridge survives write errors (issue 16): a full disk for the LFT
file (a real 64 KiB tmpfs) is logged and retried with exponential back-off,
counted, and the loop goes on, so a daemon restart meanwhile is still
handled.  Real ibsim, OpenSM (to assign LIDs), ``smroute serve`` processes."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from smroute.fabric.export.writers import write_ibsim_net
from smroute.fabric.generate.trees import pgft
from smroute.lab.harness import wait_for as _wait
from smroute.opensm.bridge import Bridge, BridgeOptions
from smroute.opensm.bridge_state import STATE_FILE
from smroute.service.rpc.client import SmrouteClient
from smroute.tables.diff import diff_tables
from smroute.tables.formats import read_tables

HAVE_TOOLS = all(shutil.which(t) for t in ("ibsim", "opensm", "ibnetdiscover"))


def test_backoff_doubles_up_to_its_bound_and_restarts_after_a_success() -> None:
    from smroute.opensm.backoff import Backoff

    b = Backoff(initial_s=1.0, factor=2.0, max_s=5.0)
    assert b.due(0.0)
    assert [b.failed(10.0) for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert b.total == 5 and b.failures == 5 and not b.due(14.9) and b.due(15.0)
    b.succeeded()
    assert b.due(0.0) and b.failed(20.0) == 1.0 and b.total == 6


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "64k") -> Any:
    """A real tmpfs of ``size`` mounted at ``where`` (skips the test if this
    user cannot mount one)."""
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                        str(where)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte with one file; returns it."""
    filler = disk / "filler"
    with open(filler, "ab", buffering=0) as fh:
        for chunk in (b"\0" * 4096, b"\0"):
            try:
                while fh.write(chunk):
                    pass
            except OSError as err:
                assert err.errno == errno.ENOSPC
    return filler


@pytest.mark.real
@pytest.mark.skipif(not HAVE_TOOLS, reason="ibsim-utils, opensm, infiniband-diags not installed")
def test_a_full_disk_for_the_lft_file_is_retried_and_a_restart_still_handled(
        tmp_path: Path) -> None:
    from smroute.lab.processes import DaemonProcess
    from smroute.lab.sim import IbSim, run_opensm

    fabric = pgft(3, [2, 2, 2], [1, 2, 2], [1, 1, 1])
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    events: list[tuple[str, dict[str, Any]]] = []

    def log(level: str, event: str, **kw: Any) -> None:
        events.append((event, kw))

    def named(event: str) -> list[dict[str, Any]]:
        return [kw for e, kw in events if e == event]

    listen = f"unix:{tempfile.mkdtemp(prefix='smroute-t-')}/smroute.sock"
    with small_tmpfs(tmp_path / "disk") as disk, IbSim(net, tmp_path / "sim") as sim:
        lfts = disk / "smroute.lfts"
        filler = fill(disk)
        run_opensm(sim, tmp_path / "opensm")
        d1 = DaemonProcess(sim, tmp_path / "d1", listen=listen)
        addr = d1.start()
        b = Bridge(BridgeOptions(daemon=addr, lfts_file=lfts, trigger="none", load="discover",
                                 discover_env=sim.client_env(preload=True), poll_interval=0,
                                 state_dir=tmp_path / "state"), log=log)
        (tmp_path / "state").mkdir()
        b.connect()
        b.initialize()
        b.start()
        loop = b.run_in_thread()
        d2 = None
        try:
            # the first epoch cannot be written: logged, retried after 1, 2, 4 s
            _wait(lambda: len(named("lfts_write_failed")) >= 3, 60, "three failed writes")
            fails = named("lfts_write_failed")[:3]
            assert [f["attempt"] for f in fails] == [1, 2, 3]
            assert [f["failures_total"] for f in fails] == [1, 2, 3]
            assert [f["retry_in_s"] for f in fails] == ["1", "2", "4"]
            assert fails[0]["epoch"] == 1 and "No space left" in fails[0]["error"]
            assert loop.is_alive() and b.state.written_epoch == 0
            assert sorted(p.name for p in disk.iterdir()) == ["filler"]  # no temp file left
            filler.unlink()  # space again: the next retry writes the epoch
            _wait(lambda: b.state.written_epoch == 1, 30, "epoch 1 written")
            with SmrouteClient(addr) as c:
                assert diff_tables(read_tables(lfts), c.tables(1).tables).identical
            state = json.loads((tmp_path / "state" / STATE_FILE).read_text())
            assert state["lfts_write_failures"] >= 3
            # full again, and the daemon restarts: the loop still notices and reloads
            filler = fill(disk)
            assert d1.stop() == 0
            n_failed = len(named("lfts_write_failed"))
            d2 = DaemonProcess(sim, tmp_path / "d2", listen=listen)
            d2.start()
            _wait(lambda: any(i["reason"] == "daemon restarted" for i in named("initialized")),
                  60, "the bridge to reload the restarted daemon")
            _wait(lambda: len(named("lfts_write_failed")) > n_failed, 30, "a failed write")
            assert named("lfts_write_failed")[-1]["attempt"] == 1  # back-off restarted
            assert loop.is_alive()
            filler.unlink()
            _wait(lambda: b.state.written_epoch == 1 and b.syncs[-1].written_unix_s
                  > time.time() - 30 and len(b.syncs) == 2, 30, "the new epoch 1 written")
            with SmrouteClient(addr) as c:
                assert diff_tables(read_tables(lfts), c.tables(1).tables).identical
        finally:
            b.close()
            for d in (d1, d2):
                if d is not None:
                    d.stop()
        assert not loop.is_alive()
    assert not os.path.ismount(tmp_path / "disk")
