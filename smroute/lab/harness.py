"""The whole OpenSM chain on a simulated fabric (edge module; tests and benchmarks).

:class:`OpenSMChain` starts, with real components only:

* ``ibsim`` on the fabric (:class:`smroute.lab.sim.IbSim`);
* a long-running OpenSM configured from ``deploy/opensm.conf.snippet``
  (``routing_engine file``, ``lfts_file``, loopback console), with the
  VERBOSE log bit added for the ``REROUTE COMPLETE`` line
  (:class:`smroute.lab.processes.OpenSMProcess`);
* ``smroute serve`` under ``ibsim-run`` (:class:`DaemonProcess`), which loads
  the fabric by live discovery when the bridge asks (``--load live``);
* ``smroute opensm-bridge`` under ``ibsim-run`` as its own process.

:meth:`OpenSMChain.change` applies an ibsim console command (``Unlink``,
``ReLink``), waits until the daemon committed a new epoch, the bridge wrote
the daemon's latest epoch and OpenSM finished one reroute per epoch written,
then reads every switch back with ``dump_fts`` and checks that it holds the
epoch.  It measures the time from the command to OpenSM's ``REROUTE
COMPLETE`` (logged once no LFT set MAD is pending), the steps in between
(from OpenSM's and the bridge's logs) and the LFT blocks that changed in the
switches (diff of the read-backs before and after).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from smroute.fabric.export.writers import write_ibsim_net
from smroute.fabric.ibnetdiscover.parse import parse_topology
from smroute.fabric.model.arrays import Fabric
from smroute.lab.processes import DaemonProcess, OpenSMProcess, free_port
from smroute.lab.sim import (
    IbSim,
    ToolError,
    dump_switch_routes,
    ibnetdiscover,
    log_time,
    require_tool,
)
from smroute.tables.diff import diff_tables
from smroute.tables.formats import parse_lft_dump
from smroute.tables.lft import ForwardingTables

__all__ = ["ChangeFigures", "OpenSMChain", "log_unix", "read_conf_snippet", "wait_for"]


def log_unix(line: str, now: dt.datetime | None = None) -> float | None:
    """Wall time (Unix seconds) of an OpenSM log line; its timestamp is local
    time without a year (``now`` decides the year; default: the clock)."""
    t = log_time(line)
    if t is None:
        return None
    now = now or dt.datetime.now()
    t = t.replace(year=now.year)
    if t > now + dt.timedelta(days=1):  # a December line read in January
        t = t.replace(year=now.year - 1)
    return t.timestamp()


def read_conf_snippet(text: str) -> dict[str, str]:
    """``key value`` lines of an opensm.conf snippet (comments and blanks skipped)."""
    conf: dict[str, str] = {}
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            key, _, value = s.partition(" ")
            conf[key] = value.strip()
    return conf


def wait_for(cond: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    """Poll ``cond()`` every ``step`` seconds until it returns something true
    (returned) or ``timeout`` seconds passed (:class:`ToolError` naming ``what``)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise ToolError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(step)


@dataclass(frozen=True)
class ChangeFigures:
    """What one fabric change cost.  Times in seconds from the console command."""

    label: str
    epoch: int
    epochs_since_change: int
    seconds_to_tables_in_switches: float
    steps: dict[str, float | None]
    lft_blocks_rewritten: int
    lft_entries_changed: int
    switches_changed: int
    bridge_reported_blocks: int
    switches_held: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class OpenSMChain:
    """ibsim + OpenSM + ``smroute serve`` + ``smroute opensm-bridge`` on ``fabric``.

    ``conf_snippet``: the text of ``deploy/opensm.conf.snippet`` (paths and the
    console port are replaced by local ones).  ``debounce``: the bridge's.
    """

    fabric: Fabric
    workdir: Path
    conf_snippet: str
    debounce: float = 0.3
    port_guids: bool = True
    workers: int = 1
    sweep_interval: int | None = None
    startup: dict[str, float] = field(default_factory=dict)
    #: False: :meth:`start` trusts OpenSM's log and reads no switch back
    #: (``dump_fts`` of a large fabric takes minutes and gigabytes).
    verify: bool = True

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir).resolve()
        self.sim: IbSim | None = None
        self.osm: OpenSMProcess | None = None
        self.daemon: DaemonProcess | None = None
        self.client: Any = None
        self.bridge: subprocess.Popen[bytes] | None = None
        self.lfts = self.workdir / "opensm" / "smroute.lfts"
        self.state_dir = self.workdir / "bridge"
        self.bridge_out = self.workdir / "bridge.out"
        self._out_fh: IO[bytes] | None = None

    # ------------------------------------------------------------ lifecycle
    def conf(self, console_port: int) -> dict[str, object]:
        conf: dict[str, object] = dict(read_conf_snippet(self.conf_snippet))
        for key in ("routing_engine", "lfts_file", "console", "console_port"):
            if key not in conf:
                raise ToolError(f"opensm.conf snippet lacks {key}")
        conf.update(lfts_file=self.lfts, console_port=console_port,
                    log_file=self.workdir / "opensm" / "opensm.log",
                    log_flags=f"{int(str(conf.get('log_flags', '0x03')), 0) | 0x04:#04x}")
        if self.sweep_interval is not None:
            conf["sweep_interval"] = self.sweep_interval
        return conf

    def start(self, timeout: float = 120.0) -> ForwardingTables:
        """Start everything; wait until the switches hold the first epoch (returned)."""
        from smroute.service.rpc.client import SmrouteClient

        t0 = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "opensm").mkdir(exist_ok=True)
        self.state_dir.mkdir(exist_ok=True)
        net = self.workdir / "fabric.net"
        write_ibsim_net(self.fabric, net)
        self.sim = IbSim(net, self.workdir / "sim")
        self.sim.start()
        port = free_port()
        self.osm = OpenSMProcess(self.sim, self.workdir / "opensm", lfts_file=self.lfts,
                                 console_port=port, extra_conf=self.conf(port))
        self.osm.start(timeout)
        self.startup["opensm_up_s"] = round(time.monotonic() - t0, 3)
        self.daemon = DaemonProcess(self.sim, self.workdir / "daemon", workers=self.workers)
        addr = self.daemon.start(timeout)
        self.client = SmrouteClient(addr)
        self._out_fh = open(self.bridge_out, "wb")  # noqa: SIM115 - closed in stop()
        self.bridge = subprocess.Popen(
            [require_tool("ibsim-run"), sys.executable, "-m", "smroute", "opensm-bridge",
             "--daemon", addr, "--lfts-file", str(self.lfts),
             "--console", f"127.0.0.1:{port}", "--opensm-log", str(self.osm.log),
             "--load", "live", "--poll-interval", "0", "--debounce", str(self.debounce),
             "--state-dir", str(self.state_dir),
             *([] if self.port_guids else ["--no-port-guids"])],
            env=self.sim.client_env(), cwd=self.workdir, stdout=self._out_fh,
            stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: self.written_epoch() >= 1, timeout, "the bridge to write epoch 1", 0.1)
        want = self.epoch_tables(self.written_epoch())
        wait_for(lambda: self.reroutes_since(0), timeout, "OpenSM to load the file")
        if not self.verify:
            self.startup["first_epoch_loaded_s"] = round(time.monotonic() - t0, 3)
            return want
        held = wait_for(lambda: next((h for h in [self.held()]
                                   if self.same(want, h).identical), None),
                     timeout, "the switches to hold epoch 1", 0.5)
        blind = self.blind_lid(want)
        if blind is not None:
            self.check_blind_lid(blind, self.fabric_now(), want)
        self.startup["first_epoch_in_switches_s"] = round(time.monotonic() - t0, 3)
        return held

    def stop(self) -> dict[str, int | None]:
        """Stop the bridge, the daemon, OpenSM and ibsim; exit statuses."""
        rc: dict[str, int | None] = {"bridge": None, "daemon": None}
        if self.bridge is not None:
            if self.bridge.poll() is None:
                self.bridge.terminate()
                try:
                    self.bridge.wait(15)
                except subprocess.TimeoutExpired:
                    self.bridge.kill()
                    self.bridge.wait()
            rc["bridge"] = self.bridge.returncode
        if self.client is not None:
            self.client.close()
        if self.daemon is not None:
            rc["daemon"] = self.daemon.stop()
        if self.osm is not None:
            self.osm.stop()
        if self.sim is not None:
            self.sim.stop()
        if self._out_fh is not None:
            with contextlib.suppress(OSError):
                self._out_fh.close()
        return rc

    def __enter__(self) -> OpenSMChain:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # ------------------------------------------------------------ observation
    @property
    def _sim(self) -> IbSim:
        if self.sim is None:
            raise ToolError("chain not started")
        return self.sim

    def written_epoch(self) -> int:
        """The last epoch the bridge wrote (from its state file; 0 before)."""
        try:
            doc = json.loads((self.state_dir / "bridge-state.json").read_text())
            return int(doc["written_epoch"])
        except (OSError, ValueError, KeyError):
            return 0

    def held(self) -> ForwardingTables:
        """What every switch holds (``dump_fts`` through ibsim-run).

        infiniband-diags 44 (``ibroute``/``dump_fts``) reads LFT blocks up to
        ``ALIGN(top, 64) / 64`` exclusive, so when the switch's LinearFdbTop is
        a multiple of 64 the top LID is never read back (it prints as no
        route).  :meth:`blind_lid` names that LID; comparisons skip its column
        and :meth:`check_blind_lid` verifies it with ibsim's ``Route``.
        """
        return parse_lft_dump(dump_switch_routes(self._sim, timeout=300).splitlines(),
                              "dump_fts")

    def blind_lid(self, t: ForwardingTables) -> int | None:
        """The LID ``dump_fts`` cannot read back for tables ``t`` (see :meth:`held`)."""
        top = t.max_lid
        return top if top > 0 and top % 64 == 0 else None

    def check_blind_lid(self, lid: int, fab: Fabric, want: ForwardingTables) -> int:
        """Check the column ``lid`` of ``want`` at every leaf switch of ``fab``
        with ibsim's ``Route`` from one host on that leaf: where ``want`` routes
        ``lid`` the trace must arrive at the port with that LID, where it does
        not (e.g. a switch LID with no up*/down* path) ibsim must find no entry
        at the leaf.  Raises :class:`ToolError` otherwise; returns the traces made.
        """
        import numpy as np

        from smroute.fabric.model.base import NodeType
        from smroute.tables.lft import NO_ROUTE

        rows = np.flatnonzero((fab.node_type[fab.port_node] == NodeType.CA)
                              & (fab.port_peer >= 0) & (fab.port_lid > 0))
        leaf_of = fab.port_node[fab.port_peer[rows]]
        _, first = np.unique(leaf_of, return_index=True)
        n = 0
        for r in rows[first].tolist():
            leaf_guid = int(fab.node_guid[fab.port_node[fab.port_peer[r]]])
            try:
                routed = lid < want.ports.shape[1] and \
                    int(want.ports[want.row_of(leaf_guid), lid]) != NO_ROUTE
            except KeyError:
                continue
            src = int(fab.port_lid[r])
            out = self._sim.console(f"Route {src} {lid}")
            arrived = re.search(rf"^To node .* lid {lid}\s*$", out, re.M) is not None
            empty = re.search(rf"lid entry {lid} is 255", out) is not None and \
                f"{leaf_guid:016x}" in out.splitlines()[-1]
            if (routed and not arrived) or (not routed and not empty):
                raise ToolError(f"ibsim Route {src} {lid}: expected "
                                f"{'arrival' if routed else 'no entry at the leaf'}: "
                                f"{out[-300:]}")
            n += 1
        return n

    def same(self, want: ForwardingTables, held: ForwardingTables) -> Any:
        """:func:`diff_tables` of ``want`` and ``held`` without the blind LID column."""
        lid = self.blind_lid(want)
        if lid is None:
            return diff_tables(want, held)
        return diff_tables(_without_lid(want, lid), _without_lid(held, lid))

    def fabric_now(self) -> Fabric:
        return parse_topology(ibnetdiscover(self._sim, timeout=300), "ibnetdiscover")

    def epoch_tables(self, epoch: int) -> ForwardingTables:
        return self.client.tables(epoch).tables  # checksum-verified full stream

    def _log_from(self, pos: int) -> list[str]:
        assert self.osm is not None
        with open(self.osm.log, "rb") as fh:
            fh.seek(pos)
            return fh.read().decode("utf-8", "replace").splitlines()

    def reroutes_since(self, pos: int) -> list[float]:
        """Wall times of OpenSM's ``REROUTE COMPLETE`` after byte ``pos`` of its log."""
        out: list[float] = []
        last: float | None = None
        for line in self._log_from(pos):
            ts = log_unix(line)
            if ts is not None:
                last = ts
            if "REROUTE COMPLETE" in line and last is not None:
                out.append(last)  # the banner line itself has no timestamp
        return out

    def first_trap_since(self, pos: int) -> float | None:
        return self.first_line_since(pos, "Received Generic Notice")

    def first_line_since(self, pos: int, text: str) -> float | None:
        """Wall time of the first OpenSM log line containing ``text`` after ``pos``."""
        for line in self._log_from(pos):
            if text in line:
                return log_unix(line)
        return None

    def bridge_line(self, event: str, epoch: int) -> dict[str, str]:
        """Fields of the bridge's ``event=<event> ... epoch=<epoch>`` log line."""
        for line in self.bridge_out.read_text(errors="replace").splitlines():
            fields = dict(re.findall(r"(\w+)=(\S+)", line))
            if fields.get("event") == event and fields.get("epoch") == str(epoch):
                return fields
        return {}

    # ------------------------------------------------------------ changes
    def change(self, console_cmd: str, before: ForwardingTables, label: str, *,
               timeout: float = 120.0) -> tuple[ChangeFigures, ForwardingTables, Fabric]:
        """Apply ``console_cmd`` and wait for the chain (see the module docstring).

        Returns the figures, what the switches hold and the fabric as
        discovered.  Raises :class:`ToolError` if the switches do not hold the
        daemon's latest epoch once everything settled.
        """
        assert self.osm is not None
        start_epoch = int(self.client.get_epoch(0).id)
        log_pos = self.osm.log.stat().st_size
        t_cut = time.time()
        reply = self._sim.console(console_cmd)
        if "not found" in reply or "can't" in reply:
            raise ToolError(f"ibsim: {console_cmd}: {reply}")
        wait_for(lambda: int(self.client.get_epoch(0).id) > start_epoch, timeout,
              f"a new epoch after {console_cmd}")

        def settled() -> bool:
            latest = int(self.client.get_epoch(0).id)
            return (self.written_epoch() == latest
                    and len(self.reroutes_since(log_pos)) >= latest - start_epoch)

        wait_for(settled, timeout, f"bridge + OpenSM after {console_cmd}")
        epoch = int(self.client.get_epoch(0).id)
        t_done = self.reroutes_since(log_pos)[-1]
        want = self.epoch_tables(epoch)
        held = self.held()
        d = self.same(want, held)
        if not d.identical:
            raise ToolError(f"{label}: the switches do not hold epoch {epoch}: {d.summary()}")
        fab = self.fabric_now()
        blind = self.blind_lid(want)
        if blind is not None:
            self.check_blind_lid(blind, fab, want)
        moved = self.same(before, held)
        written = self.bridge_line("epoch_written", epoch)
        applied = self.bridge_line("faults_applied", epoch)
        trap = self.first_trap_since(log_pos)

        def since(ts: str | float | None) -> float | None:
            return None if ts is None else round(float(ts) - t_cut, 3)

        figs = ChangeFigures(
            label=label, epoch=epoch, epochs_since_change=epoch - start_epoch,
            seconds_to_tables_in_switches=round(t_done - t_cut, 3),
            steps={"trap_logged_by_opensm": since(trap),
                   "opensm_heavy_sweep_done": since(self.first_line_since(log_pos,
                                                                          "SUBNET UP")),
                   "faults_applied_by_daemon": since(applied.get("ts")),
                   "bridge_discovery": (float(applied["discover_s"])
                                        if "discover_s" in applied else None),
                   "file_written_and_reroute_sent": since(written.get("ts")),
                   "reroute_complete": round(t_done - t_cut, 3)},
            lft_blocks_rewritten=int(moved.blocks_changed),
            lft_entries_changed=int(moved.entries_changed),
            switches_changed=int(moved.switches_changed),
            bridge_reported_blocks=int(written.get("blocks_changed", -1)),
            switches_held=int(held.n_switches))
        return figs, held, fab


def _without_lid(t: ForwardingTables, lid: int) -> ForwardingTables:
    import dataclasses

    import numpy as np

    from smroute.tables.lft import NO_ROUTE

    if lid >= t.ports.shape[1]:
        return t
    ports = np.array(t.ports, copy=True)
    ports[:, lid] = NO_ROUTE
    return dataclasses.replace(t, ports=ports, _index={})


def summarize(figs: list[ChangeFigures]) -> Mapping[str, float]:
    """Median seconds and blocks over several changes (for the benchmark)."""
    import statistics

    return {"median_s": statistics.median(f.seconds_to_tables_in_switches for f in figs),
            "max_s": max(f.seconds_to_tables_in_switches for f in figs),
            "median_blocks": statistics.median(f.lft_blocks_rewritten for f in figs)}
