"""Benchmark: OpenSM's reaction to a link cut, side by side in one run, with
smroute as a native routing engine (the plugin), through the bridge (the
``file`` engine), and with OpenSM's own ftree and updn.

Per fabric size (PGFT, ``--sizes``) and engine: a fresh ibsim and a
long-running OpenSM (log flags 0x07, ``sweep_interval 10``; the bridge:
:class:`smroute.lab.harness.OpenSMChain` from ``deploy/opensm.conf.snippet``);
the plugin: ``event_plugin_name smroute``, ``routing_engine smroute,updn``
and a ``smroute serve`` (2 workers) on a Unix socket.  Then ``--cuts`` times
(the same seeded leaf up-links for every engine): ``Unlink`` one, time it,
``ReLink`` it.  Figures, medians over the cuts:

* ``cut_to_tables_s``: from the ibsim console command to the new tables in
  every switch: OpenSM's ``SWITCHES CONFIGURED FOR UNICAST`` (logged once no
  LFT MAD is pending; the banner has no timestamp: the next timestamped line
  counts) after the sweep that routed the cut; the bridge: its ``REROUTE
  COMPLETE`` after it wrote the daemon's new epoch (what
  :meth:`OpenSMChain.change` measures);
* ``routing_s``: OpenSM's routing phase of that reaction, from its log
  (``building routing with '<engine>'`` to ``<engine> tables configured on all
  switches``; the bridge: the ``file`` engine's reroute).  ftree gets the
  top switches as ``root_guid_file`` (without it, it refuses a tree with a
  missing link and OpenSM falls back to minhop);
* ``first_routing_s``: the routing phase of OpenSM's first sweep (the plugin:
  the daemon's first route of the fabric, including the full validation walk
  it waits for; the bridge: the file engine loading epoch 1);
* ``restart_routing_s`` (not the bridge): OpenSM restarted after the cuts
  (the ports keep their LIDs; the plugin's daemon keeps running, as in
  production): the routing phase of its first sweep.

Up to 4,096 hosts (``--verify``: always) the plugin's tables are read back
with ``dump_fts`` after a cut and compared with the daemon's epoch, and the
bridge's chain reads every switch back after every change (as
``bench/opensm_bench.py``); above, the figures come from the logs only (the
read-backs of 11,664 hosts take minutes and gigabytes each).  Prints the
machine and a table; ``--json FILE`` writes the figures.

    .venv/bin/python bench/plugin_bench.py [--sizes 1024 4096 11664] [--cuts 3]
        [--engines plugin bridge ftree updn] [--seed 1] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from benchinfo import machine

from smroute.fabric.export.writers import write_ibsim_net
from smroute.fabric.generate.trees import pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import fabric_roles
from smroute.fileio import atomic_write_text
from smroute.interrupts import sigterm_interrupts
from smroute.lab.harness import OpenSMChain, log_unix
from smroute.lab.processes import DaemonProcess, OpenSMProcess
from smroute.lab.sim import IbSim, dump_switch_routes
from smroute.lab.simnet import sim_name
from smroute.service.rpc.client import SmrouteClient
from smroute.tables.diff import diff_tables
from smroute.tables.formats import parse_lft_dump
from smroute.tables.lft import NO_ROUTE

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "build" / "opensm-plugin"
SNIPPET = ROOT / "deploy" / "opensm.conf.snippet"
SHAPES = {
    "1024": ("PGFT(3;8,8,16;1,8,8;1,1,1)", (3, (8, 8, 16), (1, 8, 8), (1, 1, 1))),
    "4096": ("PGFT(3;16,16,16;1,16,16;1,1,1)", (3, (16, 16, 16), (1, 16, 16), (1, 1, 1))),
    "11664": ("PGFT(3;18,18,36;1,18,18;1,1,1)", (3, (18, 18, 36), (1, 18, 18), (1, 1, 1))),
}
ENGINES = ("plugin", "bridge", "ftree", "updn")
START = "building routing with '"
DONE = " tables configured on all switches"
UNICAST = "SWITCHES CONFIGURED FOR UNICAST"


def wait_for(cond: Callable[[], Any], timeout: float, what: str, step: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(step)


class LogTail:
    """OpenSM's log followed incrementally (at 11,664 hosts a verbose log grows
    by gigabytes; re-reading it would load the machine being measured).  Keeps
    only the lines the figures need, each with its wall time; a banner line
    (``*** SUBNET UP ***``) has no timestamp and gets the next timestamped
    line's."""

    KEYS = (START, DONE, UNICAST, "SUBNET UP", "REROUTE COMPLETE")

    def __init__(self, path: Path) -> None:
        self.path, self.pos, self.rest = path, 0, b""
        self.events: list[list[Any]] = []  # [wall time or None, line]
        self.waiting: list[list[Any]] = []  # banners without a time yet

    def poll(self) -> list[list[Any]]:
        """Every kept line so far (reads what was appended since the last call)."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.pos)
                data = fh.read()
        except FileNotFoundError:
            return self.events
        self.pos += len(data)
        *lines, self.rest = (self.rest + data).split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            ts = log_unix(line)
            if ts is not None:
                for ev in self.waiting:
                    ev[0] = ts
                self.waiting = []
            if any(k in line for k in self.KEYS):
                ev = [ts, line]
                self.events.append(ev)
                if ts is None:
                    self.waiting.append(ev)
        return self.events

    def since(self, mark: int) -> list[list[Any]]:
        return self.poll()[mark:]


def routings(events: list[list[Any]]) -> list[tuple[str, float, float]]:
    """Routing phases among kept log lines: (engine used, start, end) wall times."""
    out: list[tuple[str, float, float]] = []
    start: float | None = None
    for ts, line in events:
        if START in line:
            if start is None:
                start = ts
        elif DONE in line and start is not None and ts is not None:
            out.append((line.split("-> osm_ucast_mgr_process: ")[-1].split(DONE)[0],
                        start, ts))
            start = None
    return out


def tables_configured(events: list[list[Any]]) -> float | None:
    """Wall time of the first ``SWITCHES CONFIGURED FOR UNICAST`` after a
    routing phase (the next timestamped line's), or ``None`` yet."""
    routed = False
    for ts, line in events:
        if DONE in line:
            routed = True
        elif routed and UNICAST in line:
            return ts  # type: ignore[no-any-return]
    return None


def leaf_uplinks(fabric: Fabric, n: int, seed: int) -> list[tuple[str, int]]:
    """``n`` distinct leaf up-links (ibsim node name, port), seeded."""
    rank = fabric_roles(fabric).rank
    cands = []
    for leaf in fabric.switches[rank[fabric.switches] == 0].tolist():
        rows = fabric.port_start[leaf] + np.arange(1, int(fabric.num_ports[leaf]) + 1)
        peer = fabric.port_peer[rows]
        ups = np.flatnonzero((peer >= 0) & (rank[fabric.port_node[np.maximum(peer, 0)]] == 1))
        cands += [(sim_name(fabric, leaf), int(p) + 1) for p in ups.tolist()]
    pick = np.random.default_rng(seed).choice(len(cands), size=n, replace=False)
    return [cands[int(i)] for i in pick]


class SweepRun:
    """OpenSM routing by itself (ftree, updn) or through the plugin."""

    def __init__(self, fabric: Fabric, wd: Path, engine: str) -> None:
        self.fabric, self.wd, self.engine = fabric, wd, engine
        self.sim: IbSim | None = None
        self.daemon: DaemonProcess | None = None
        self.osm: OpenSMProcess | None = None
        self.sock = Path(tempfile.mkdtemp(prefix="smr-bench-", dir="/tmp")) / "smroute.sock"

    def start(self) -> None:
        write_ibsim_net(self.fabric, self.wd / "fabric.net")
        self.sim = IbSim(self.wd / "fabric.net", self.wd / "sim", start_timeout=600)
        self.sim.start()
        conf: dict[str, object] = {"routing_engine": self.engine}
        env: dict[str, str] = {}
        if self.engine == "ftree":  # its roots, so that it routes the degraded tree too
            rank = fabric_roles(self.fabric).rank
            top = self.fabric.switches[rank[self.fabric.switches] == rank.max()]
            roots = self.wd / "roots.guids"
            roots.write_text("".join(f"{int(g):#018x}\n" for g in self.fabric.node_guid[top]))
            conf["root_guid_file"] = roots
        if self.engine == "plugin":
            self.daemon = DaemonProcess(None, self.wd / "daemon", workers=2,
                                        listen=f"unix:{self.sock}", log_format="json")
            self.daemon.start(120)
            conf = {"routing_engine": "smroute,updn", "event_plugin_name": "smroute"}
            env = {"LD_LIBRARY_PATH": str(PLUGIN), "SMROUTE_DAEMON": f"unix:{self.sock}",
                   "SMROUTE_PLUGIN_CONFIG": str(self.wd / "plugin.conf")}
            (self.wd / "plugin.conf").write_text("deadline_ms = 600000\n")
        self.osm = OpenSMProcess(self.sim, self.wd / "opensm", lfts_file=self.wd / "none.lfts",
                                 sweep_interval=10, log_flags=0x07, extra_conf=conf, env=env)
        self.log = LogTail(self.osm.log)
        self.osm.start(3600)

    def stop(self) -> None:
        for p in (self.osm, self.daemon, self.sim):
            if p is not None:
                p.stop()
        shutil.rmtree(self.sock.parent, ignore_errors=True)

    def first_routing(self) -> tuple[str, float]:
        eng, a, b = wait_for(lambda: routings(self.log.since(0)), 60, "the first routing")[0]
        return eng, b - a

    def restart_opensm(self) -> tuple[str, float]:
        """Restart OpenSM (the ports keep their LIDs; the daemon keeps its
        state): the routing phase of its first sweep."""
        assert self.osm is not None and self.sim is not None
        self.osm.stop()
        self.osm = OpenSMProcess(self.sim, self.wd / "opensm-again",
                                 lfts_file=self.osm.lfts_file, sweep_interval=10,
                                 log_flags=0x07, extra_conf=self.osm.extra_conf,
                                 env=self.osm.env)
        self.log = LogTail(self.osm.log)
        self.osm.start(3600)
        return self.first_routing()

    def change(self, cmd: str, timeout: float = 1800) -> tuple[float, float, str]:
        """(cut to tables, routing phase, engine used) of one console change."""
        assert self.sim is not None and self.osm is not None
        mark = len(self.log.poll())
        t0 = time.time()
        self.sim.console(cmd)
        t_tables = wait_for(lambda: tables_configured(self.log.since(mark)), timeout,
                            f"new tables after {cmd}", 0.1)
        eng, a, b = routings(self.log.since(mark))[0]
        wait_for(lambda: any("SUBNET UP" in e[1] for e in self.log.since(mark)), timeout,
                 f"the sweep after {cmd} to finish")
        return t_tables - t0, b - a, eng

    def verify(self) -> str:
        """The plugin's tables in the switches equal the daemon's epoch."""
        assert self.daemon is not None and self.sim is not None
        with SmrouteClient(self.daemon.address) as c:
            want = c.tables(0).tables
        held = parse_lft_dump(dump_switch_routes(self.sim, timeout=3600).splitlines(),
                              "dump_fts")
        top = want.max_lid
        if top % 64 == 0:  # dump_fts cannot read a top LID on a block boundary (harness.held)
            want, held = (dataclasses.replace(t, ports=np.where(
                np.arange(t.ports.shape[1]) == top, NO_ROUTE, t.ports).astype(np.uint8),
                _index={}) for t in (want, held))
        d = diff_tables(want, held)
        if not d.identical:
            raise AssertionError(f"the switches do not hold the daemon's epoch: {d.summary()}")
        return f"verified {held.n_switches} switches"


def bridge_routing(events: list[list[Any]]) -> float | None:
    """The file engine's routing phase of the last reroute among ``events``
    (the one before the last ``REROUTE COMPLETE``)."""
    done = [i for i, (_, line) in enumerate(events) if "REROUTE COMPLETE" in line]
    phases = routings(events[:done[-1]] if done else events)
    return phases[-1][2] - phases[-1][1] if phases else None


def bridge_change(chain: OpenSMChain, log: LogTail, cmd: str, timeout: float = 3600
                  ) -> tuple[float, float | None]:
    """What :meth:`OpenSMChain.change` measures (the console command to OpenSM's
    ``REROUTE COMPLETE`` for the daemon's new epoch: here the next timestamped
    line's time, as for the other engines' banner), and the file engine's
    routing phase of that reroute; the switches are read back by the caller."""
    assert chain.osm is not None and chain.sim is not None
    start = int(chain.client.get_epoch(0).id)
    mark = len(log.poll())
    t0 = time.time()
    chain.sim.console(cmd)
    wait_for(lambda: int(chain.client.get_epoch(0).id) > start, timeout, f"an epoch after {cmd}")

    def done() -> list[float]:
        return [ts for ts, line in log.since(mark) if "REROUTE COMPLETE" in line and ts]

    def settled() -> bool:
        latest = int(chain.client.get_epoch(0).id)
        return chain.written_epoch() == latest and len(done()) >= latest - start

    wait_for(settled, timeout, f"bridge + OpenSM after {cmd}")
    return done()[-1] - t0, bridge_routing(log.since(mark))


def check_bridge(chain: OpenSMChain) -> None:
    """Every switch holds the daemon's latest epoch (read back with dump_fts)."""
    want = chain.epoch_tables(int(chain.client.get_epoch(0).id))
    d = chain.same(want, chain.held())
    if not d.identical:
        raise AssertionError(f"the switches do not hold the bridge's epoch: {d.summary()}")


def run_engine(size: str, engine: str, cuts: list[tuple[str, int]], wd: Path,
               verify: bool) -> dict[str, Any]:
    label, (h, m, w, p) = SHAPES[size]
    fabric = pgft(h, list(m), list(w), list(p))
    out: dict[str, Any] = {"fabric": label, "hosts": len(fabric.cas), "engine": engine}
    t0 = time.monotonic()
    secs: list[float] = []
    routing: list[float] = []
    if engine == "bridge":
        chain = OpenSMChain(fabric, wd, SNIPPET.read_text(), port_guids=False, workers=2,
                            verify=verify)
        try:
            chain.start(timeout=3600)
            assert chain.osm is not None
            log = LogTail(chain.osm.log)
            first = bridge_routing(log.poll())
            out["first_routing_s"] = None if first is None else round(first, 3)
            for node, port in cuts:
                s, r = bridge_change(chain, log, f'Unlink "{node}"[{port}]')
                secs.append(s)
                if r is not None:
                    routing.append(r)
                if verify:
                    check_bridge(chain)
                bridge_change(chain, log, f'ReLink "{node}"[{port}]')
            out["engine_used"] = "file"
            out["verify"] = "every change read back" if verify else "log only"
        finally:
            chain.stop()
    else:
        run = SweepRun(fabric, wd, "plugin" if engine == "plugin" else engine)
        try:
            run.start()
            used, first = run.first_routing()
            out["first_routing_s"], out["first_engine_used"] = round(first, 3), used
            for node, port in cuts:
                s, r, used = run.change(f'Unlink "{node}"[{port}]')
                secs.append(s)
                routing.append(r)
                out["engine_used"] = used
                run.change(f'ReLink "{node}"[{port}]')
            if engine == "plugin" and verify:
                s, _, _ = run.change(f'Unlink "{cuts[0][0]}"[{cuts[0][1]}]')
                out["verify"] = run.verify()
                run.change(f'ReLink "{cuts[0][0]}"[{cuts[0][1]}]')
            used, again = run.restart_opensm()
            out["restart_routing_s"], out["restart_engine_used"] = round(again, 3), used
        finally:
            run.stop()
    out["cut_to_tables_s"] = [round(x, 3) for x in secs]
    out["routing_s"] = [round(x, 3) for x in routing]
    out["median_cut_to_tables_s"] = round(statistics.median(secs), 3) if secs else None
    out["median_routing_s"] = round(statistics.median(routing), 3) if routing else None
    out["wall_s"] = round(time.monotonic() - t0, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", choices=sorted(SHAPES, key=int), default=["1024"],
                    metavar="HOSTS", help=f"fabrics by host count ({', '.join(SHAPES)})")
    ap.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    ap.add_argument("--cuts", type=int, default=3, help="leaf up-link cuts per engine")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--verify", action="store_true",
                    help="read the plugin's tables back at every size (default: up to 4,096)")
    ap.add_argument("--no-verify", action="store_true",
                    help="read nothing back at any size (figures from the logs only)")
    ap.add_argument("--json", metavar="FILE", help="write the figures here")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop what was started
    if "plugin" in args.engines:
        subprocess.run(["make", "-s", "-C", str(ROOT / "opensm-plugin"), f"BUILD={PLUGIN}"],
                       check=True)
    print(f"Machine: {machine()}", flush=True)
    results = []
    for size in args.sizes:
        label, (h, m, w, p) = SHAPES[size]
        cuts = leaf_uplinks(pgft(h, list(m), list(w), list(p)), args.cuts, args.seed)
        for engine in args.engines:
            with tempfile.TemporaryDirectory(prefix="smroute-plugin-bench-") as tmp:
                r = run_engine(size, engine, cuts, Path(tmp), not args.no_verify
                               and (args.verify or int(size) <= 4096))
            results.append(r)
            print(json.dumps(r), flush=True)
    print(f"\n{'fabric':32s} {'hosts':>6s} {'engine':8s} {'used':8s} {'cut->tables s':>14s} "
          f"{'routing s':>10s} {'1st routing s':>14s} {'restart routing s':>18s}")
    for r in results:
        print(f"{r['fabric']:32s} {r['hosts']:6d} {r['engine']:8s} {r['engine_used']:8s} "
              f"{r['median_cut_to_tables_s']!s:>14s} {r['median_routing_s']!s:>10s} "
              f"{r['first_routing_s']!s:>14s} {r.get('restart_routing_s')!s:>18s}")
    if args.json:
        atomic_write_text(args.json, json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    with sigterm_interrupts():
        main()
