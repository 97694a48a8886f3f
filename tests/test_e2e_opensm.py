"""smroute with OpenSM, end to end, with only real components.

ibsim runs a 3-level PGFT with 256 hosts; OpenSM runs as in production
(long-running, ``routing_engine file``, ``lfts_file``, console on loopback);
the real ``smroute serve`` daemon discovers the fabric live through
``ibsim-run``; the real ``smroute opensm-bridge`` process writes the LFT file
and makes OpenSM load it.  Every switch is read back with ``dump_fts``
through ibsim-run and compared with the daemon's epoch.  Then a link and a
whole spine switch are cut with ibsim's console (``Unlink``): the chain
notices (OpenSM trap -> bridge re-discovery -> ApplyFaults), the daemon
reroutes, the bridge writes the new epoch, OpenSM programs it; the switches
are read back again (equal to the new epoch) and the read-back tables are
walked for every host pair on the degraded fabric.  ``ReLink`` restores both
and the switches return to the original epoch's tables.  The time from each
cut to the new tables being in the switches (OpenSM's ``REROUTE COMPLETE``
after the bridge's console ``reroute``, logged at the VERBOSE level 0x04 once
OpenSM has no LFT set MAD pending) and the LFT blocks rewritten (diff of the read-backs) are
printed and written to ``e2e-figures.json``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from smroute.analysis.paths import pair_paths, routing_view
from smroute.fabric.generate import pgft
from smroute.fabric.ibnetdiscover import parse_topology
from smroute.fabric.model import Fabric
from smroute.fabric.summary import switch_ranks
from smroute.fabric.writers import write_ibsim_net
from smroute.tables.diff import diff_tables
from smroute.tables.formats import parse_lft_dump
from smroute.tables.lft import ForwardingTables

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(
        not all(shutil.which(t) for t in ("ibsim", "ibsim-run", "opensm", "ibnetdiscover",
                                          "dump_fts")),
        reason="needs ibsim-utils, opensm and infiniband-diags (scripts/setup.sh installs them)"),
]

_TS = re.compile(r"^(\w{3})\s+(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{6}) ")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _log_unix(line: str) -> float | None:
    """Wall time of an OpenSM log line (local time, no year in the log)."""
    m = _TS.match(line)
    if not m:
        return None
    now = dt.datetime.now()
    t = dt.datetime(now.year, _MONTHS.index(m.group(1)) + 1, int(m.group(2)), int(m.group(3)),
                    int(m.group(4)), int(m.group(5)), int(m.group(6)))
    if t > now + dt.timedelta(days=1):  # across New Year
        t = t.replace(year=now.year - 1)
    return t.timestamp()


def _wait(cond: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(step)


class Chain:
    """Handles on the running pieces, and the checks the test repeats."""

    def __init__(self, sim: Any, osm: Any, client: Any, state: Path, bridge_out: Path) -> None:
        self.sim, self.osm, self.client = sim, osm, client
        self.state, self.bridge_out = state, bridge_out

    def written_epoch(self) -> int:
        try:
            return int(json.loads(self.state.read_text())["written_epoch"])
        except (OSError, ValueError, KeyError):
            return 0

    def held(self) -> ForwardingTables:
        from smroute.opensm.sim import dump_switch_routes

        return parse_lft_dump(dump_switch_routes(self.sim, timeout=120).splitlines(), "dump_fts")

    def fabric_now(self) -> Fabric:
        from smroute.opensm.sim import ibnetdiscover

        return parse_topology(ibnetdiscover(self.sim, timeout=120), "ibnetdiscover")

    def epoch_tables(self, epoch: int) -> ForwardingTables:
        return self.client.tables(epoch).tables  # checksum-verified full stream

    def reroutes_since(self, pos: int) -> list[float]:
        """Wall times of OpenSM's REROUTE COMPLETE lines after byte ``pos`` of its log."""
        with open(self.osm.log, "rb") as fh:
            fh.seek(pos)
            text = fh.read().decode("utf-8", "replace")
        out = []
        last_ts: float | None = None
        for line in text.splitlines():
            ts = _log_unix(line)
            if ts is not None:
                last_ts = ts
            if "REROUTE COMPLETE" in line and last_ts is not None:
                out.append(last_ts)  # the banner's own lines carry no timestamp
        return out

    def bridge_line(self, event: str, epoch: int) -> dict[str, str]:
        """Fields of the bridge's ``event=<event> ... epoch=<epoch>`` log line."""
        for line in self.bridge_out.read_text(errors="replace").splitlines():
            fields = dict(re.findall(r"(\w+)=(\S+)", line))
            if fields.get("event") == event and fields.get("epoch") == str(epoch):
                return fields
        return {}

    def first_trap_since(self, pos: int) -> float | None:
        with open(self.osm.log, "rb") as fh:
            fh.seek(pos)
            for raw in fh:
                line = raw.decode("utf-8", "replace")
                if "Received Generic Notice" in line:
                    return _log_unix(line)
        return None

    def change(self, console_cmd: str, before: ForwardingTables, label: str,
               figures: dict[str, Any]) -> tuple[int, ForwardingTables, Fabric]:
        """Apply an ibsim console change and wait for the whole chain; returns the
        new epoch, what the switches hold and the fabric as discovered."""
        start_epoch = self.client.get_epoch(0).id
        log_pos = self.osm.log.stat().st_size
        t_cut = time.time()
        reply = self.sim.console(console_cmd)
        assert "not found" not in reply and "can't" not in reply, reply
        epoch = _wait(lambda: (e := self.client.get_epoch(0).id) > start_epoch and e, 60,
                      f"a new epoch after {console_cmd}")
        # the chain settles: the bridge wrote the daemon's latest epoch and OpenSM
        # finished a reroute for each epoch written since the cut
        def settled() -> bool:
            latest = self.client.get_epoch(0).id
            n_new = latest - start_epoch
            return (self.written_epoch() == latest
                    and len(self.reroutes_since(log_pos)) >= n_new)
        _wait(settled, 60, f"bridge + OpenSM reroute after {console_cmd}")
        epoch = self.client.get_epoch(0).id
        t_done = self.reroutes_since(log_pos)[-1]
        want = self.epoch_tables(epoch)
        held = self.held()
        d = diff_tables(want, held)
        assert d.identical, f"{label}: switches differ from epoch {epoch}: {d.summary()}"
        fab = self.fabric_now()
        moved = diff_tables(before, held)
        written = self.bridge_line("epoch_written", int(epoch))
        applied = self.bridge_line("faults_applied", int(epoch))
        trap = self.first_trap_since(log_pos)

        def since_cut(ts: str | float | None) -> float | None:
            return None if ts is None else round(float(ts) - t_cut, 3)

        figures[label] = {
            "epoch": int(epoch), "epochs_since_change": int(epoch - start_epoch),
            "seconds_change_to_tables_in_switches": round(t_done - t_cut, 3),
            "steps_s": {"trap_logged_by_opensm": since_cut(trap),
                        "faults_applied_by_daemon": since_cut(applied.get("ts")),
                        "bridge_discovery": float(applied.get("discover_s", "nan")),
                        "file_written_and_reroute_sent": since_cut(written.get("ts")),
                        "reroute_complete": round(t_done - t_cut, 3)},
            "lft_blocks_rewritten": int(moved.blocks_changed),
            "lft_entries_changed": int(moved.entries_changed),
            "switches_changed": int(moved.switches_changed),
            "bridge_reported_blocks": int(written.get("blocks_changed", -1)),
            "switches_held": int(held.n_switches),
        }
        return int(epoch), held, fab


SNIPPET = Path(__file__).resolve().parents[1] / "deploy" / "opensm.conf.snippet"


def snippet_conf(**override: object) -> dict[str, object]:
    """OpenSM settings from deploy/opensm.conf.snippet, with ``override``."""
    conf: dict[str, object] = {}
    for line in SNIPPET.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.strip().partition(" ")
            conf[key] = value.strip()
    assert {"routing_engine", "lfts_file", "console", "console_port"} <= conf.keys()
    conf.update(override)
    return conf


def _all_pairs_reach(fab: Fabric, held: ForwardingTables) -> tuple[int, int]:
    """Walk the read-back tables for every (leaf, host) pair on fabric ``fab``."""
    pp = pair_paths(routing_view(fab, held))
    return int(pp.status.size), pp.unroutable_pairs


def test_opensm_end_to_end(tmp_path: Path) -> None:
    from smroute.live.opensm_proc import DaemonProcess, OpenSMProcess, free_port
    from smroute.opensm.sim import IbSim
    from smroute.service.client import SmrouteClient

    fabric = pgft(3, [8, 4, 8], [1, 4, 4], [1, 1, 1])
    assert len(fabric.cas) == 256 and len(fabric.switches) == 80
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    lfts = tmp_path / "opensm" / "smroute.lfts"
    state = tmp_path / "bridge"
    state.mkdir()
    lfts.parent.mkdir()
    rank, _ = switch_ranks(fabric)
    leaf = int(fabric.switches[0])
    spine = int(fabric.switches[int(rank[fabric.switches].argmax())])
    assert rank[spine] == 2
    leaf_name = f"S-{int(fabric.node_guid[leaf]):016x}"
    spine_name = f"S-{int(fabric.node_guid[spine]):016x}"
    up_port = int(fabric.num_ports[leaf])  # generator: hosts first, up-links last
    figures: dict[str, Any] = {"fabric": "PGFT(3;8,4,8;1,4,4;1,1,1)", "hosts": 256,
                               "switches": 80}
    bridge: subprocess.Popen[bytes] | None = None
    bridge_out = tmp_path / "bridge.out"
    t0 = time.monotonic()
    # OpenSM is configured with deploy/opensm.conf.snippet (paths and port made
    # local; log flags plus VERBOSE for the REROUTE COMPLETE timing line)
    port = free_port()
    conf = snippet_conf(lfts_file=lfts, console_port=port, log_flags="0x07",
                        log_file=tmp_path / "opensm" / "opensm.log")
    with IbSim(net, tmp_path / "sim") as sim, \
            OpenSMProcess(sim, tmp_path / "opensm", lfts_file=lfts, console_port=port,
                          extra_conf=conf) as osm:
        # OpenSM came up with the file engine and no file yet: it routed with its
        # default engine and assigned LIDs; now the daemon discovers live.
        figures["opensm_up_s"] = round(time.monotonic() - t0, 2)
        daemon = DaemonProcess(sim, tmp_path / "daemon", workers=1)
        addr = daemon.start()
        client = SmrouteClient(addr)
        try:
            with open(bridge_out, "wb") as out:
                bridge = subprocess.Popen(
                    ["ibsim-run", sys.executable, "-m", "smroute", "opensm-bridge",
                     "--daemon", addr, "--lfts-file", str(lfts),
                     "--console", f"127.0.0.1:{osm.console_port}",
                     "--opensm-log", str(osm.log), "--load", "live", "--poll-interval", "0",
                     "--debounce", "0.3", "--state-dir", str(state)],
                    env=sim.client_env(), cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True)
            chain = Chain(sim, osm, client, state / "bridge-state.json", bridge_out)
            # 1. the daemon's first epoch (live discovery) is in the switches
            _wait(lambda: chain.written_epoch() >= 1, 90, "the bridge to write epoch 1",
                  step=0.1)
            first = chain.written_epoch()
            assert client.get_epoch(first).cause == "route"
            want0 = chain.epoch_tables(first)
            _wait(lambda: chain.reroutes_since(0), 30, "OpenSM to reroute")
            held0 = _wait(lambda: next((h for h in [chain.held()]
                                        if diff_tables(want0, h).identical), None),
                          30, "switches = epoch 1", step=0.5)
            figures["startup_s"] = round(time.monotonic() - t0, 2)
            assert held0.n_switches == 80
            pairs, bad = _all_pairs_reach(chain.fabric_now(), held0)
            assert bad == 0 and pairs == 32 * 256
            log = osm.log.read_text(errors="replace")
            assert "file tables configured on all switches" in log
            assert f"console_port = {port}" in osm.out.read_text(errors="replace")

            # 2. cut one link (a leaf up-link)
            ep1, held1, fab1 = chain.change(f'Unlink "{leaf_name}"[{up_port}]', held0,
                                            "link_cut", figures)
            faults = list(client.get_epoch(ep1).faults)
            assert [f.kind for f in faults] == [1] and faults[0].node_guid in (
                int(fabric.node_guid[leaf]), *fabric.node_guid.tolist())
            assert fab1.n_links == fabric.n_links - 1
            pairs, bad = _all_pairs_reach(fab1, held1)
            assert bad == 0, f"{bad} of {pairs} pairs do not reach their destination"

            # 3. cut a whole spine switch
            ep2, held2, fab2 = chain.change(f'Unlink "{spine_name}"', held1, "spine_cut",
                                            figures)
            e2 = client.get_epoch(ep2)
            assert e2.down_switches == 1 and e2.down_links == 1
            assert held2.n_switches == 79 and fab2.n_nodes == fabric.n_nodes - 1
            pairs, bad = _all_pairs_reach(fab2, held2)
            assert bad == 0, f"{bad} of {pairs} pairs do not reach their destination"

            # 4. restore both: the switches return to the original epoch's tables
            ep3, held3, fab3 = chain.change(f'ReLink "{spine_name}"', held2, "spine_back",
                                            figures)
            assert client.get_epoch(ep3).down_switches == 0 and held3.n_switches == 80
            assert diff_tables(held1, held3).identical  # the state with only the link cut
            ep4, held4, fab4 = chain.change(f'ReLink "{leaf_name}"[{up_port}]', held3,
                                            "link_back", figures)
            e4 = client.get_epoch(ep4)
            assert (e4.down_switches, e4.down_links, e4.down_cas) == (0, 0, 0)
            assert diff_tables(want0, held4).identical
            assert diff_tables(want0, chain.epoch_tables(ep4)).identical
            assert fab4.link_set() == fabric.link_set()
            assert bridge.poll() is None, "the bridge died"
        finally:
            if bridge is not None and bridge.poll() is None:
                bridge.terminate()
                try:
                    bridge.wait(15)
                except subprocess.TimeoutExpired:
                    bridge.kill()
                    bridge.wait()
            client.close()
            rc = daemon.stop()
    assert bridge is not None and bridge.returncode == 0, bridge_out.read_text()[-2000:]
    assert rc == 0
    assert "bridge_error" not in bridge_out.read_text()
    figures["total_s"] = round(time.monotonic() - t0, 2)
    (tmp_path / "e2e-figures.json").write_text(json.dumps(figures, indent=1))
    print("\nsmroute + OpenSM end to end:", json.dumps(figures, indent=1))
    for k in ("link_cut", "spine_cut", "spine_back", "link_back"):
        f = figures[k]
        print(f"{k}: {f['seconds_change_to_tables_in_switches']:.2f} s from the change to the "
              f"new tables in the switches; {f['lft_blocks_rewritten']} LFT blocks rewritten "
              f"({f['lft_entries_changed']} entries on {f['switches_changed']} switches; "
              f"bridge file diff: {f['bridge_reported_blocks']} blocks); steps {f['steps_s']}")
        assert f["bridge_reported_blocks"] == f["lft_blocks_rewritten"]
