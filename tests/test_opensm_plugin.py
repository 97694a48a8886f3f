"""smroute as a native OpenSM routing engine (``opensm-plugin/``), end to end,
with real components only.

The plugin is built with its Makefile (what ``scripts/setup.sh`` runs; quick
when up to date); the tests are skipped, saying why, only if it cannot be
built.  ibsim runs a 3-level tree with an aggregation node on every switch;
OpenSM runs as in production with ``event_plugin_name smroute`` and
``routing_engine smroute,updn`` (``LD_LIBRARY_PATH`` to the build directory);
the real ``smroute serve`` daemon answers on a Unix socket.  OpenSM's
settings are ``deploy/opensm-plugin.conf``'s (log flags raised for the
dumps; updn gets its roots).  Every switch is read back with ``dump_fts`` and
compared with the daemon's epoch: after OpenSM's first sweep, after a link
cut and after a switch cut (ibsim's ``Unlink``).  Then the daemon is killed:
the next sweep falls back to updn and OpenSM's log says why; the daemon comes
back: the next sweep is smroute's again, and OpenSM's min-hop table as the
plugin filled it equals, byte for byte, the one OpenSM's own minhop engine
computes for the same fabric.  LMC 2 is routed through the
plugin too; so is a degraded tree whose detours need virtual lanes (the
SL-to-VL tables read back from every switch, PathRecord SLs from OpenSM's
SA, and OpenSM falling back when it cannot program the VLs); TLS with a
client certificate, a client the daemon refuses, a passed deadline, a missing
TLS file, a bad plugin configuration and malformed answers (a
fault-injecting proxy, malformed lanes too) are each seen in OpenSM's log.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import grpc
import numpy as np
import pytest
from certs import make_pki

from smroute.analysis.paths import pair_paths
from smroute.analysis.view import routing_view
from smroute.fabric.export.writers import write_ibsim_net
from smroute.fabric.generate.shapes import with_aggregation_nodes
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.ibnetdiscover.parse import parse_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import fabric_roles
from smroute.lab.harness import read_conf_snippet
from smroute.lab.processes import DaemonProcess, OpenSMProcess
from smroute.lab.sim import IbSim, dump_switch_routes, ibnetdiscover, run_opensm
from smroute.lab.simnet import sim_name
from smroute.opensm.console import OpenSMConsole
from smroute.service.rpc._gen import smroute_pb2 as pb
from smroute.service.rpc._gen import smroute_pb2_grpc as pb_grpc
from smroute.service.rpc.client import SmrouteClient
from smroute.tables.diff import diff_tables
from smroute.tables.formats import parse_lft_dump
from smroute.tables.lft import ForwardingTables

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "opensm-plugin"
CONF = ROOT / "deploy" / "opensm-plugin.conf"
TOOLS = ("ibsim", "ibsim-run", "opensm", "dump_fts")

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(not all(shutil.which(t) for t in TOOLS),
                       reason="needs ibsim-utils, opensm and infiniband-diags "
                              "(scripts/setup.sh installs them)"),
]

T = TypeVar("T")


@pytest.fixture(scope="module")
def plugin_dir() -> Path:
    """The built plugin's directory; the tests skip, saying why, if it cannot be built."""
    if shutil.which("make") is None:
        pytest.skip("the OpenSM plugin cannot be built: no make (scripts/setup.sh installs it)")
    r = subprocess.run(["make", "-C", str(ROOT / "opensm-plugin"), f"BUILD={BUILD}"],
                       capture_output=True, text=True, timeout=1800, check=False)
    if r.returncode != 0 or not (BUILD / "libsmroute.so").exists():
        pytest.skip("the OpenSM plugin cannot be built (scripts/setup.sh installs libopensm-dev, "
                    "libibumad-dev, g++, libgrpc++-dev, protobuf-compiler-grpc, ...): "
                    + (r.stderr or r.stdout)[-800:])
    return BUILD


def wait_for(cond: Callable[[], T | None], timeout: float, what: str, step: float = 0.2) -> T:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(step)


class Rig:
    """ibsim + ``smroute serve`` on a Unix socket + OpenSM with the plugin."""

    def __init__(self, fabric: Fabric, workdir: Path, plugin: Path, *, lmc: int = 0,
                 plugin_env: Mapping[str, str] | None = None,
                 daemon_args: tuple[str, ...] = (), listen: str | None = None,
                 opensm: bool = True, conf: Mapping[str, object] | None = None) -> None:
        self.fabric, self.wd, self.plugin, self.lmc = fabric, workdir, plugin, lmc
        self.sock_dir = Path(tempfile.mkdtemp(prefix="smr-", dir="/tmp"))  # short socket path
        self.address = listen or f"unix:{self.sock_dir}/smroute.sock"
        self.with_opensm = opensm
        self.plugin_env = dict(plugin_env or {"SMROUTE_DAEMON": self.address})
        self.daemon_args = daemon_args
        self.conf = dict(conf or {})  # opensm.conf settings over deploy/opensm-plugin.conf's
        self.sim: IbSim | None = None
        self.daemon: DaemonProcess | None = None
        self.osm: OpenSMProcess | None = None
        self.client: SmrouteClient | None = None
        self.runs = 0

    def start(self) -> None:
        write_ibsim_net(self.fabric, self.wd / "fabric.net")
        self.sim = IbSim(self.wd / "fabric.net", self.wd / "sim")
        self.sim.start()
        self.start_daemon()
        if self.with_opensm:
            self.start_opensm()

    def start_daemon(self) -> None:
        self.runs += 1
        self.daemon = DaemonProcess(None, self.wd / f"daemon{self.runs}", listen=self.address,
                                    log_format="json", extra_args=self.daemon_args)
        self.daemon.start()
        self.client = SmrouteClient(self.daemon.address)

    def start_opensm(self, env: Mapping[str, str] | None = None, name: str = "opensm",
                     conf: Mapping[str, object] | None = None) -> None:
        """OpenSM with the plugin; updn (the fallback) gets the tree's top
        switches as roots (OpenSM's root_guid_file: aggregation nodes defeat its
        own root detection); ``conf``: settings instead of the rig's own."""
        assert self.sim is not None
        roots = self.wd / "roots.guids"
        rank = fabric_roles(self.fabric).rank
        top = self.fabric.switches[rank[self.fabric.switches] == rank.max()]
        roots.write_text("".join(f"{int(g):#018x}\n" for g in self.fabric.node_guid[top]))
        settings: dict[str, object] = dict(read_conf_snippet(CONF.read_text()))
        settings.update(lmc=self.lmc, root_guid_file=roots, log_flags="0x47",
                        log_file=self.wd / name / "opensm.log")
        settings.update(self.conf if conf is None else conf)
        self.osm = OpenSMProcess(
            self.sim, self.wd / name, lfts_file=self.wd / "unused.lfts", log_flags=0x47,
            extra_conf=settings,
            env={"LD_LIBRARY_PATH": str(self.plugin), **(env or self.plugin_env)})
        self.osm.start(120)

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        for p in (self.osm, self.daemon, self.sim):
            if p is not None:
                p.stop()
        shutil.rmtree(self.sock_dir, ignore_errors=True)

    # ------------------------------------------------------------ observation
    def log_size(self) -> int:
        assert self.osm is not None
        return self.osm.log.stat().st_size

    def log_since(self, pos: int) -> str:
        assert self.osm is not None
        with open(self.osm.log, "rb") as fh:
            fh.seek(pos)
            return fh.read().decode("utf-8", "replace")

    def sweep_done(self, pos: int, engine: str) -> bool:
        """A sweep after ``pos`` routed with ``engine`` and finished (SUBNET UP)."""
        text = self.log_since(pos)
        at = text.find(f"{engine} tables configured on all switches")
        return at >= 0 and "SUBNET UP" in text[at:]

    def resweep(self) -> int:
        """Console ``resweep heavy``; the log position before it."""
        assert self.osm is not None
        pos = self.log_size()
        OpenSMConsole("127.0.0.1", self.osm.console_port).command("resweep heavy")
        return pos

    def held(self) -> ForwardingTables:
        assert self.sim is not None
        return parse_lft_dump(dump_switch_routes(self.sim, timeout=120).splitlines(), "dump_fts")

    def epoch_tables(self, epoch: int = 0) -> tuple[Any, ForwardingTables]:
        assert self.client is not None
        ep = self.client.get_epoch(epoch)
        return ep, self.client.tables(ep.id).tables

    def settle(self, want: ForwardingTables, timeout: float = 60.0) -> ForwardingTables:
        """What the switches hold, once it is ``want`` (``dump_fts``)."""
        assert want.max_lid % 64, "dump_fts cannot read back a top LID on a 64-LID boundary"
        last: list[str] = []

        def same() -> ForwardingTables | None:
            held = self.held()
            d = diff_tables(want, held)
            last[:] = [d.summary()]
            return held if d.identical else None

        try:
            return wait_for(same, timeout, "the switches to hold the epoch", 1.0)
        except AssertionError as err:
            raise AssertionError(f"{err}: {last}") from None

    def lid_matrix(self) -> str:
        assert self.osm is not None
        return (self.osm.workdir / "dump" / "opensm-lid-matrix.dump").read_text()


@pytest.fixture
def rig_factory(tmp_path: Path, plugin_dir: Path) -> Iterator[Callable[..., Rig]]:
    rigs: list[Rig] = []

    def make(fabric: Fabric, **kw: Any) -> Rig:
        r = Rig(fabric, tmp_path / f"rig{len(rigs)}", plugin_dir, **kw)
        rigs.append(r)
        r.wd.mkdir(parents=True)
        r.start()
        return r

    yield make
    for r in rigs:
        r.stop()


def tree() -> Fabric:
    """3-level tree, 128 hosts, an aggregation node on each of its 80 switches."""
    return with_aggregation_nodes(pgft(3, [4, 4, 8], [1, 4, 4], [1, 1, 1]))


def test_plugin_routes_reroutes_falls_back_and_returns(rig_factory: Callable[..., Rig]
                                                      ) -> None:
    fabric = tree()
    rig = rig_factory(fabric)
    assert rig.osm is not None and rig.daemon is not None and rig.sim is not None
    # 1. OpenSM's first sweep routed with smroute: the switches hold epoch 1
    wait_for(lambda: rig.sweep_done(0, "smroute"), 60, "smroute's first sweep")
    log = rig.log_since(0)
    assert "building routing with 'smroute' routing algorithm" in log
    assert "ERR SMR" not in log and "updn tables configured" not in log
    ep1, want1 = rig.epoch_tables()
    assert (ep1.id, ep1.cause, ep1.lmc, ep1.validation.ok) == (1, "sm", 0, True)
    assert want1.n_switches == 80
    held1 = rig.settle(want1)

    roles = fabric_roles(fabric)
    rank = roles.rank
    leaf = int(fabric.switches[rank[fabric.switches] == 0][0])
    spine = int(fabric.switches[rank[fabric.switches] == 2][0])
    rows = fabric.port_start[leaf] + np.arange(1, int(fabric.num_ports[leaf]) + 1)
    peers = fabric.port_node[np.maximum(fabric.port_peer[rows], 0)]
    up_port = int(np.flatnonzero((fabric.port_peer[rows] >= 0) & (rank[peers] == 1))[0]) + 1

    # 2. a link cut: a new epoch (a derived LINK_DOWN), in every switch
    pos = rig.log_size()
    rig.sim.unlink(sim_name(fabric, leaf), up_port)
    wait_for(lambda: rig.epoch_tables()[0].id >= 2, 60, "an epoch after the link cut")
    wait_for(lambda: rig.sweep_done(pos, "smroute"), 60, "smroute's sweep after the cut")
    ep2, want2 = rig.epoch_tables()
    assert ep2.cause == "sm" and [(f.kind, f.port) for f in ep2.faults] == [(1, up_port)]
    assert ep2.down_links == 1 and ep2.diff_from_parent.entries_changed > 0
    held2 = rig.settle(want2)
    assert not diff_tables(held1, held2).identical

    # 3. a switch cut (a spine and its aggregation node go)
    pos = rig.log_size()
    rig.sim.unlink(sim_name(fabric, spine))
    wait_for(lambda: rig.epoch_tables()[0].down_switches == 1, 60, "an epoch without the spine")
    wait_for(lambda: rig.sweep_done(pos, "smroute"), 60, "smroute's sweep after the spine cut")
    ep3, want3 = rig.epoch_tables()
    assert (ep3.cause, ep3.down_links, ep3.down_switches, ep3.down_cas) == ("sm", 1, 1, 1)
    held3 = rig.settle(want3)
    assert held3.n_switches == 79

    # 4. the daemon dies: the next sweep falls back to updn, and the log says why
    rig.client.close()  # type: ignore[union-attr]
    rig.daemon.proc.kill()
    rig.daemon.proc.wait(10)
    rig.daemon.stop()
    pos = rig.resweep()
    wait_for(lambda: rig.sweep_done(pos, "updn"), 60, "updn's sweep without the daemon")
    text = rig.log_since(pos)
    assert "ERR SMR03: smroute: daemon" in text and "unreachable" in text
    assert "falling back to the next routing engine" in text
    assert "smroute tables configured" not in text
    updn_hops = rig.lid_matrix()

    # 5. the daemon is back: the next sweep is smroute's again (a fresh daemon:
    #    the subnet is its new base, routed in full: the same tables as the
    #    incremental epoch 3)
    rig.start_daemon()
    pos = rig.resweep()
    wait_for(lambda: rig.sweep_done(pos, "smroute"), 60, "smroute's sweep with the daemon back")
    assert "ERR SMR" not in rig.log_since(pos)
    ep4, want4 = rig.epoch_tables()
    assert (ep4.id, ep4.cause) == (1, "sm")
    assert diff_tables(want3, want4).identical
    rig.settle(want4)

    # 6. OpenSM's min-hop table as the plugin filled it is the one OpenSM
    #    computes itself (its minhop engine, run once on the same fabric)
    ours = rig.lid_matrix()
    assert ours != updn_hops  # updn's is restricted to up*/down* paths
    rig.osm.stop()
    ref = run_opensm(rig.sim, rig.wd / "minhop", engine="minhop", timeout=120)
    assert (ref.dump_dir / "opensm-lid-matrix.dump").read_text() == ours


def test_plugin_routes_lmc_2(rig_factory: Callable[..., Rig]) -> None:
    rig = rig_factory(tree(), lmc=2)
    wait_for(lambda: rig.sweep_done(0, "smroute"), 60, "smroute's first sweep with LMC 2")
    ep, want = rig.epoch_tables()
    assert (ep.cause, ep.lmc) == ("sm", 2)
    assert want.max_lid >= 4 * (128 + 80)  # 4 LIDs per CA port
    rig.settle(want)
    log = rig.log_since(0)
    assert "ERR SMR" not in log and "updn tables configured" not in log


def test_plugin_tls_refusals_deadline_and_bad_config(rig_factory: Callable[..., Rig],
                                                     tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki", clients=("opensm", "viewer"))
    cfg = tmp_path / "smroute.yaml"
    cfg.write_text(pki.tls_yaml(mutual=True) + "mutating_identities: [opensm]\n")
    fabric = pgft(2, [4, 4], [1, 2], [1, 1])
    rig = rig_factory(fabric, daemon_args=("--config", str(cfg)), listen="127.0.0.1:0",
                      opensm=False)
    assert rig.daemon is not None
    port = rig.daemon.address.rsplit(":", 1)[1]

    def plugin_conf(name: str, *lines: str) -> dict[str, str]:
        path = tmp_path / f"{name}.conf"
        path.write_text("# smroute plugin\n" + "".join(f"{ln}\n" for ln in lines))
        return {"SMROUTE_PLUGIN_CONFIG": str(path)}

    def run(name: str, env: dict[str, str], engine: str) -> str:
        rig.start_opensm(env, name)
        wait_for(lambda: rig.sweep_done(0, engine), 60, f"{name}: a sweep by {engine}")
        text = rig.log_since(0)
        assert rig.osm is not None
        rig.osm.stop()
        return text

    tls = (f"tls_ca = {pki.ca.cert_path}",)
    plain = run("plain", {"SMROUTE_DAEMON": f"localhost:{port}"}, "updn")
    assert "ERR SMR03: smroute: daemon" in plain and "unreachable" in plain
    ok = run("allowed", plugin_conf("allowed", f"address = localhost:{port}", *tls,
                                    f"tls_cert = {pki.client('opensm').cert_path}",
                                    f"tls_key = {pki.client('opensm').key_path}",
                                    "deadline_ms = 30000"), "smroute")
    assert "ERR SMR" not in ok and "TLS with a client certificate" in ok
    refused = run("viewer", plugin_conf("viewer", f"address = localhost:{port}", *tls,
                                        f"tls_cert = {pki.client('viewer').cert_path}",
                                        f"tls_key = {pki.client('viewer').key_path}"), "updn")
    assert "ERR SMR03" in refused and "refused" in refused and "PERMISSION_DENIED" in refused
    late = run("late", plugin_conf("late", f"address = localhost:{port}", *tls,
                                   f"tls_cert = {pki.client('opensm').cert_path}",
                                   f"tls_key = {pki.client('opensm').key_path}",
                                   "deadline_ms = 1"), "updn")
    assert "ERR SMR03" in late and "deadline passed" in late
    gone = run("gone", plugin_conf("gone", f"address = localhost:{port}",
                                   f"tls_ca = {tmp_path / 'no-such-ca.pem'}"), "updn")
    assert "ERR SMR03: smroute: cannot read TLS file" in gone and "no-such-ca.pem" in gone
    bad = run("bad", plugin_conf("bad", "adress = localhost:1"), "updn")
    assert "ERR SMR00: smroute: bad configuration" in bad and "bad.conf:2: unknown key" in bad


class Corrupting(pb_grpc.SmrouteServicer):
    """Between the plugin and the real daemon: forwards RouteSubnet and spoils
    the answer with ``corrupt`` (a faulty network or a daemon of another
    version, as the plugin must expect)."""

    def __init__(self, daemon: str) -> None:
        self.channel = grpc.insecure_channel(daemon)
        self.stub = pb_grpc.SmrouteStub(self.channel)
        self.corrupt: Callable[[pb.RouteSubnetResponse], None] = lambda r: None

    def RouteSubnet(self, request: pb.RouteSubnetRequest, context: grpc.ServicerContext
                    ) -> pb.RouteSubnetResponse:
        resp = self.stub.RouteSubnet(request, timeout=30)
        self.corrupt(resp)
        return resp


def _drop_switch(r: pb.RouteSubnetResponse) -> None:
    del r.switches[-1]  # and its column of the hop rows: a consistent but short answer
    for sw in r.switches:
        sw.hops = sw.hops[:-1]


def _port_out_of_range(r: pb.RouteSubnetResponse) -> None:
    lft = bytearray(r.switches[0].lft)
    lft[-1] = 200
    r.switches[0].lft = bytes(lft)


def _lid_beyond_range(r: pb.RouteSubnetResponse) -> None:
    r.max_lid += 1
    for sw in r.switches:
        sw.lft += b"\xff"


def _vl_beyond_lanes(r: pb.RouteSubnetResponse) -> None:
    r.lanes.epoch, r.lanes.vls, r.lanes.sls = r.epoch.id, 2, 2
    r.lanes.tables.add(guid=r.switches[0].guid, out_port=1, any_in_port=True,
                       vl=bytes([0, 2] + [0] * 14))


def test_plugin_refuses_malformed_answers(rig_factory: Callable[..., Rig]) -> None:
    fabric = pgft(2, [4, 4], [1, 2], [1, 1])
    rig = rig_factory(fabric, opensm=False)
    proxy = Corrupting(rig.address)
    server = grpc.server(ThreadPoolExecutor(2))
    pb_grpc.add_SmrouteServicer_to_server(proxy, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        for name, corrupt, says in (
                ("switch", _drop_switch, "the answer has 5 switches, OpenSM's subnet 6"),
                ("port", _port_out_of_range, "to port 200, out of range"),
                ("lid", _lid_beyond_range, "beyond OpenSM's top LID"),
                ("lanes", _vl_beyond_lanes, "malformed lanes: switch 0x")):
            proxy.corrupt = corrupt
            rig.start_opensm({"SMROUTE_DAEMON": f"127.0.0.1:{port}"}, name)
            wait_for(lambda: rig.sweep_done(0, "updn"), 60, f"{name}: updn's sweep")
            text = rig.log_since(0)
            assert "ERR SMR03: smroute: " in text and says in text, name
            assert "nothing filled" in text and "smroute tables configured" not in text
            assert rig.osm is not None
            rig.osm.stop()
        proxy.corrupt = lambda r: None  # the same path, unspoiled: smroute routes
        rig.start_opensm({"SMROUTE_DAEMON": f"127.0.0.1:{port}"}, "clean")
        wait_for(lambda: rig.sweep_done(0, "smroute"), 60, "smroute's sweep through the proxy")
        rig.settle(rig.epoch_tables()[1])
    finally:
        server.stop(None)
        proxy.channel.close()


# ---------------------------------------------------------------- virtual lanes

def detour_tree() -> Fabric:
    """PGFT(2;4,6;1,4;1,1) (24 hosts, 6 leaves, 4 spines) without 10 of its 24
    leaf-spine cables (seed 1): some leaves share no spine, so some pairs
    have no up*/down* path; with 2 VLs the daemon routes them with detours
    (mode tree+detours: 3 detour targets on SL 1, VL 1 after each turn)."""
    return degrade(pgft(2, [4, 6], [1, 4], [1, 1]), np.random.default_rng(1), links=10)[0]


def lanes_of(address: str, epoch: int) -> pb.Lanes:
    with grpc.insecure_channel(address) as ch:
        return pb_grpc.SmrouteStub(ch).GetLanes(pb.GetLanesRequest(epoch=epoch), timeout=30)


def lanes_sl(lanes: pb.Lanes, slid: int, dlid: int) -> int:
    """The proto's rule: the SL of the PathSl listing dlid whose sources hold slid, else 0."""
    def within(lid: int, flat: Any) -> bool:
        return any(a <= lid <= b for a, b in zip(flat[::2], flat[1::2], strict=True))

    for p in lanes.paths:
        if within(dlid, p.dlid_ranges) and (p.from_all or within(slid, p.from_lid_ranges)):
            return int(p.sl)
    return 0


def lanes_vl(lanes: pb.Lanes, guid: int, in_port: int, out_port: int) -> list[int]:
    """The proto's rule: the (in, out) table, else the any-input one, else VL 0."""
    tables = {(t.guid, t.out_port, None if t.any_in_port else t.in_port): list(t.vl)
              for t in lanes.tables}
    return tables.get((guid, out_port, in_port),
                      tables.get((guid, out_port, None), [0] * 16))


def dr_paths(f: Fabric, start: int) -> dict[int, str]:
    """Directed-route paths ("0,p1,p2,...") from node ``start`` to every node."""
    paths, todo = {start: "0"}, [start]
    while todo:
        node = todo.pop(0)
        for port in range(1, int(f.num_ports[node]) + 1):
            peer = int(f.port_peer[f.port_start[node] + port])
            if peer >= 0 and int(f.port_node[peer]) not in paths:
                paths[int(f.port_node[peer])] = f"{paths[node]},{port}"
                todo.append(int(f.port_node[peer]))
    return paths


def read_sl2vl(sim: IbSim, host: str, dr: str, out_port: int) -> dict[int, list[int]]:
    """``smpquery sl2vl`` by directed route: the VL of SL 0..15 per input port."""
    text = sim.run(["smpquery", "-D", "sl2vl", dr, str(out_port)], sim_host=host,
                   timeout=30).stdout
    rows = {}
    for line in text.splitlines():
        if line.startswith("ports: in"):
            head, _, vls = line.partition(":")[2].partition(":")
            rows[int(head.split(",")[0].split()[-1])] = [int(v) for v in vls.split("|")[1:-1]]
    return rows


def path_sl(sim: IbSim, host: str, slid: int, dlid: int) -> int:
    """The SL of the PathRecord OpenSM's SA answers for slid -> dlid (``saquery -p``)."""
    text = sim.run(["saquery", "-p", "--slid", str(slid), "--dlid", str(dlid)],
                   sim_host=host, timeout=30).stdout
    sls = [int(ln.split(".")[-1], 16) for ln in text.splitlines() if ln.strip().startswith("sl.")]
    assert len(sls) == 1, text
    return sls[0]


def test_plugin_serves_detours_over_virtual_lanes(rig_factory: Callable[..., Rig]) -> None:
    fabric = detour_tree()
    rig = rig_factory(fabric, daemon_args=("--max-vls", "2"), conf={"qos": True})
    assert rig.sim is not None and rig.osm is not None and rig.daemon is not None
    # 1. smroute routed the pass, with its lanes; every pair is routed
    wait_for(lambda: rig.sweep_done(0, "smroute"), 60, "smroute's first sweep")
    log = rig.log_since(0)
    assert "ERR SMR" not in log and "updn tables configured" not in log
    assert "smroute: epoch 1 routes detours over 2 VLs" in log
    ep, want = rig.epoch_tables()
    assert (ep.routing_mode, ep.vls, ep.validation.ok) == ("tree+detours", 2, True)
    assert ep.validation.ca_pairs_unroutable == 0
    held = rig.settle(want)
    seen = parse_topology(ibnetdiscover(rig.sim), "ibnetdiscover")
    walked = pair_paths(routing_view(seen, held))
    assert walked.all_ok and walked.n_endports == len(seen.cas)  # the switches' own tables
    lanes = lanes_of(rig.daemon.address, ep.id)
    assert lanes.vls == 2 and lanes.paths and any(any(t.vl) for t in lanes.tables)

    # 2. every switch's SL-to-VL tables (each output port with a cable, each
    #    input port) read back equal the daemon's, VL 0 where it has none;
    #    the host's own table maps every SL to VL 0 (ibsim's default: SL i -> VL i)
    host = int(fabric.cas[0])
    host_name = sim_name(fabric, host)
    dr = dr_paths(fabric, host)
    assert read_sl2vl(rig.sim, host_name, "0", 0) == {0: [0] * 16}
    compared = on_vl1 = 0
    for sw in fabric.switches.tolist():
        guid = int(fabric.node_guid[sw])
        for out in range(1, int(fabric.num_ports[sw]) + 1):
            if fabric.port_peer[fabric.port_start[sw] + out] < 0:
                continue  # OpenSM programs ports that are up
            got = read_sl2vl(rig.sim, host_name, dr[sw], out)
            assert sorted(got) == list(range(int(fabric.num_ports[sw]) + 1))
            for inp, vls in got.items():
                assert vls == lanes_vl(lanes, guid, inp, out), (hex(guid), inp, out)
                compared += 1
                on_vl1 += 1 in vls
    assert compared > 300 and on_vl1 > 10

    # 3. the SA's PathRecords carry the daemon's SL: every host to the first
    #    LID of each detour target, and to a LID with no detour
    ca_lids = sorted(int(seen.port_lid[seen.port_start[c] + 1]) for c in seen.cas.tolist())
    detoured = [int(p.dlid_ranges[0]) for p in lanes.paths]
    plain = next(lid for lid in ca_lids if all(lanes_sl(lanes, s, lid) == 0 for s in ca_lids))
    sls = {}
    for dlid in (*detoured, plain):
        for slid in ca_lids:
            if slid != dlid:
                sls[slid, dlid] = path_sl(rig.sim, host_name, slid, dlid)
                assert sls[slid, dlid] == lanes_sl(lanes, slid, dlid), (slid, dlid)
    assert set(sls.values()) == {0, 1}

    # 4. OpenSM cannot program the VLs: qos off, or max_op_vls 1 (VL 0 only):
    #    the pass falls back to updn (or its fallback, minhop), and the log says why
    rig.osm.stop()
    for name, conf, says in (
            ("noqos", {"qos": False}, "qos is FALSE, so OpenSM programs no SL-to-VL tables"),
            ("onevl", {"qos": True, "max_op_vls": 1}, "OpenSM's max_op_vls 1 allows 1 data VLs")):
        rig.start_opensm(name=name, conf=conf)
        wait_for(lambda: rig.sweep_done(0, "updn") or rig.sweep_done(0, "minhop"), 60,
                 f"{name}: the fallback's sweep")
        text = rig.log_since(0)
        assert "ERR SMR06: smroute: epoch" in text and says in text, name
        assert "OpenSM cannot program these virtual lanes" in text
        assert "smroute tables configured" not in text
        rig.osm.stop()
