"""Live discovery: local HCA ports (sysfs parsing, pyverbs fallback), the
discovery preflight (no HCA / no permission / no SM) and ``smroute discover``
on a real ibsim fabric through ``ibsim-run`` before and after OpenSM."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from smroute.discovery.discover import (
    DiscoveryError,
    check_port,
    classify_failure,
    discover_topology_lines,
    select_port,
)
from smroute.discovery.hca import (
    LocalPort,
    import_pyverbs,
    parse_guid,
    parse_sysfs_port,
    read_pyverbs,
    read_sysfs,
    read_sysfs_fresh,
)
from smroute.fabric.export.writers import write_ibsim_net
from smroute.fabric.generate.trees import pgft
from smroute.fabric.ibnetdiscover.parse import parse_topology, read_topology
from smroute.fabric.model.base import NodeType
from smroute.lab.sim import IbSim, run_opensm

HAVE_IBSIM = shutil.which("ibsim") is not None and shutil.which("opensm") is not None
SMROUTE = [sys.executable, "-m", "smroute"]


def _port(**kw: object) -> LocalPort:
    base: dict[str, object] = dict(ca="mlx5_0", port=1, node_guid=1, port_guid=2, lid=5, lmc=0,
                                   sm_lid=1, state=4, link_layer="InfiniBand", source="sysfs")
    base.update(kw)
    return LocalPort(**base)  # type: ignore[arg-type]


# ----------------------------------------------------------------- pure parsing
def test_parse_guid_forms() -> None:
    assert parse_guid("0002:c903:0000:0001\n") == 0x0002C90300000001
    assert parse_guid("0x0002c90300000001") == 0x0002C90300000001
    assert parse_guid("fe80:0000:0000:0000:0002:c903:0000:00a1") == 0x0002C903000000A1
    for bad in ("", "zz", "fe80:0000:0000:0000:0002:c903:0000", "0x"):
        with pytest.raises(ValueError):
            parse_guid(bad)


def test_parse_sysfs_port_kernel_and_umad2sim_text() -> None:
    # the kernel's formats (drivers/infiniband/core/sysfs.c) and umad2sim's
    vals = {"node_guid": "0002:c903:0000:0000\n", "lid": "0x1a\n", "lid_mask_count": "2\n",
            "sm_lid": "0x1\n", "state": "4: ACTIVE\n", "link_layer": "InfiniBand\n",
            "gids/0": "fe80:0000:0000:0000:0002:c903:0000:0001\n"}
    p = parse_sysfs_port("mlx5_0", 1, vals)
    assert (p.node_guid, p.port_guid, p.lid, p.lmc, p.sm_lid, p.state) == (
        0x0002C90300000000, 0x0002C90300000001, 26, 2, 1, 4)
    assert p.active and p.state_name == "ACTIVE" and p.link_layer == "InfiniBand"
    init = parse_sysfs_port("ibsim0", 1, {**vals, "state": "2: INIT", "sm_lid": "0x0"})
    assert not init.active and init.state_name == "INIT"
    with pytest.raises(ValueError, match=r"ports/1/lid: unexpected content 'abc'"):
        parse_sysfs_port("mlx5_0", 1, {**vals, "lid": "abc"})


def test_read_sysfs_reads_a_tree(tmp_path: Path) -> None:
    dev = tmp_path / "mlx5_3"
    (dev / "ports" / "1" / "gids").mkdir(parents=True)
    (dev / "ports" / "2" / "gids").mkdir(parents=True)
    (dev / "node_guid").write_text("0002:c903:00ab:cd00\n")
    for p, lid, state in ((1, "0x7", "4: ACTIVE"), (2, "0x0", "1: DOWN")):
        d = dev / "ports" / str(p)
        (d / "lid").write_text(lid + "\n")
        (d / "lid_mask_count").write_text("0\n")
        (d / "sm_lid").write_text("0x1\n")
        (d / "state").write_text(state + "\n")
        (d / "gids" / "0").write_text(f"fe80:0000:0000:0000:0002:c903:00ab:cd0{p}\n")
    ports = read_sysfs(str(tmp_path))
    assert [(p.ca, p.port, p.lid, p.active) for p in ports] == [
        ("mlx5_3", 1, 7, True), ("mlx5_3", 2, 0, False)]
    assert ports[1].port_guid == 0x0002C90300ABCD02
    assert read_sysfs(str(tmp_path / "absent")) == []


def test_fresh_snapshot_child_timeout_is_an_oserror() -> None:
    """local_ports() falls back to this process's snapshot on OSError; a child
    that hangs must raise that too, not subprocess.TimeoutExpired."""
    with pytest.raises(OSError, match="did not finish within"):
        read_sysfs_fresh(timeout=0.001)


def test_pyverbs_is_found_or_explained() -> None:
    ports, note = read_pyverbs()
    if import_pyverbs() is None:
        assert "not installed" in note
    elif not ports:  # installed, but this machine has no verbs device
        assert "no device" in note


# ----------------------------------------------------------------- preflight
def test_select_port_and_check_port_say_which() -> None:
    a = _port(ca="mlx5_0", port=1, state=1, lid=0)
    b = _port(ca="mlx5_1", port=1)
    assert select_port([a, b], None, None) is b  # first ACTIVE
    assert select_port([a, b], "mlx5_0", None) is a
    with pytest.raises(DiscoveryError, match="no InfiniBand port mlx5_9 port any; available") as e:
        select_port([a, b], "mlx5_9", None)
    assert e.value.reason == "no-hca"
    with pytest.raises(DiscoveryError, match="no InfiniBand HCA found") as e:
        select_port([_port(link_layer="Ethernet")], None, None)
    assert e.value.reason == "no-hca"
    with pytest.raises(DiscoveryError, match=r"no subnet manager: mlx5_0 port 1 has state DOWN "
                       r"\(not ACTIVE\), LID 0") as e:
        check_port(a)
    assert e.value.reason == "no-sm"
    check_port(b)


def test_classify_failure_messages() -> None:
    perm = classify_failure("ibwarn: umad_open_port: can't open /dev/infiniband/umad0: "
                            "Permission denied\n", 255, "mlx5_0", 1)
    assert perm.reason == "no-permission" and "mlx5_0:1" in str(perm)
    other = classify_failure("ibnetdiscover: iberror: something odd\n", 3)
    assert other.reason == "tool" and "status 3" in str(other)


@pytest.mark.skipif(os.path.exists("/sys/class/infiniband")
                    or shutil.which("ibnetdiscover") is None,
                    reason="needs a machine without an HCA, with infiniband-diags installed")
def test_no_hca_here_is_reported_as_such() -> None:
    with pytest.raises(DiscoveryError, match="no HCA") as e:
        discover_topology_lines(timeout=30)
    assert e.value.reason == "no-hca"
    # and ibnetdiscover's own failure text (real, from this HCA-less machine) classifies alike
    res = subprocess.run(["ibnetdiscover"], capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert classify_failure(res.stderr, res.returncode).reason == "no-hca"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to check as user nobody")
def test_unreadable_umad_device_is_no_permission() -> None:
    """A umad device the user cannot open is reported as 'no permission' (checked
    as user nobody against a sysfs/dev tree with the real layout).  The check
    runs in a forked child that drops to nobody with smroute already imported,
    so it does not matter where the project is cloned (a 0700 directory is fine)."""
    # pytest's tmp_path lives under a 0700 directory that nobody cannot enter
    tmp_path = Path(tempfile.mkdtemp(prefix="smroute-live-perm-", dir="/tmp"))
    try:
        _check_as_nobody(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _as_nobody(sysfs: Path, dev: Path) -> str:
    """What ``_check_permission`` says of umad0, asked by user nobody: a forked
    child sets the module's paths, drops to nobody and reports on a pipe."""
    import codecs
    import pwd

    import smroute.discovery.discover as d

    nobody = pwd.getpwnam("nobody")
    codecs.lookup("ascii")  # imported now: nobody may not read the interpreter's library
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(r)
            d.UMAD_SYSFS, d.UMAD_DEV = str(sysfs), str(dev)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            try:
                d._check_permission(LocalPort("mlx5_0", 1, 1, 2, 5, 0, 1, 4, "InfiniBand",
                                              "sysfs"))
                out = "allowed"
            except DiscoveryError as e:
                out = f"{e.reason} {e}"
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out = f"child failed: {type(e).__name__}: {e}"
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        text = fh.read().decode()
    os.waitpid(pid, 0)
    return text


def _check_as_nobody(tmp_path: Path) -> None:
    mad = tmp_path / "infiniband_mad" / "umad0"
    mad.mkdir(parents=True)
    (mad / "ibdev").write_text("mlx5_0\n")
    (mad / "port").write_text("1\n")
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "umad0").write_text("")
    os.chmod(dev / "umad0", 0o600)
    for d in (tmp_path, tmp_path / "infiniband_mad", mad, dev):
        os.chmod(d, 0o755)
    for f in (mad / "ibdev", mad / "port"):
        os.chmod(f, 0o644)
    out = _as_nobody(tmp_path / "infiniband_mad", dev)
    assert out.startswith("no-permission no permission: "), out
    assert "umad0" in out and "uid 65534" in out
    # and with the device open to everyone, nobody may
    os.chmod(dev / "umad0", 0o666)
    assert _as_nobody(tmp_path / "infiniband_mad", dev) == "allowed"


# ----------------------------------------------------------------- real ibsim
@pytest.mark.real
@pytest.mark.skipif(not HAVE_IBSIM, reason="ibsim/opensm not installed (ibsim-utils, opensm)")
def test_discover_on_a_simulated_fabric(tmp_path: Path) -> None:
    fabric = pgft(3, [2, 2, 2], [1, 2, 2], [1, 1, 1])
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    out = tmp_path / "live.topo"
    cmd = [*SMROUTE, "discover", "--out", str(out)]
    with IbSim(net, tmp_path / "sim") as sim:
        # before any SM: the port is INIT and has no SM LID -> "no subnet manager"
        res = sim.run(cmd, check=False, cwd=tmp_path)
        assert res.returncode == 1, res.stdout + res.stderr
        assert "no subnet manager: ibsim0 port 1 has state INIT" in res.stderr
        assert "sysfs (umad2sim)" in res.stdout
        assert not out.exists()
        run_opensm(sim, tmp_path / "opensm")
        res = sim.run([*cmd, "--json"], check=False, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        # in-process, as the daemon calls it (under ibsim-run through env)
        env = sim.client_env(preload=True)
        lines = discover_topology_lines(env=env, timeout=120)
        # the text on standard output, the port listing on standard error
        piped = sim.run([*SMROUTE, "discover", "--out", "-"], check=False, cwd=tmp_path)
        assert piped.returncode == 0 and "local HCA ports" in piped.stderr
        assert parse_topology(piped.lines(), "stdout").link_set() == fabric.link_set()
        # an HCA that does not exist in the simulator
        bad = sim.run([*SMROUTE, "discover", "--ca", "mlx5_7"], check=False, cwd=tmp_path)
    assert bad.returncode == 1 and "no InfiniBand port mlx5_7" in bad.stderr
    got = read_topology(out)
    assert got.content_hash == parse_topology(lines, "x").content_hash
    # the discovered graph is the generated one: same GUIDs, same links by GUID and port
    assert sorted(got.node_guid.tolist()) == sorted(fabric.node_guid.tolist())

    assert got.link_set() == fabric.link_set()
    # the local port reported matches the fabric: OpenSM's LID for that port, SM LID set
    (port,) = doc["ports"]
    assert port["source"] == "sysfs (umad2sim)" and port["active"]
    guid = int(port["port_guid"], 16)
    row = int(next(r for r in range(got.n_ports) if int(got.port_guid[r]) == guid
                   and got.node_type[got.port_node[r]] == NodeType.CA))
    assert int(got.port_lid[row]) == port["lid"] > 0
    assert port["sm_lid"] > 0
    assert doc["summary"]["hosts"] == len(fabric.cas)


@pytest.mark.skipif(os.path.exists("/sys/class/infiniband")
                    or shutil.which("ibnetdiscover") is None,
                    reason="needs a machine without an HCA, with infiniband-diags installed")
def test_daemon_live_source_without_hca_says_so(tmp_path: Path) -> None:
    """The daemon's LoadFabric live source calls discover_topology_lines: on a
    machine without an HCA the real daemon answers FAILED_PRECONDITION (or
    UNAVAILABLE) with the 'no HCA' message, and keeps serving."""
    import grpc
    from service_daemon import start_daemon

    from smroute.service.rpc.client import SmrouteClient

    d = start_daemon(tmp_path / "daemon")
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            with pytest.raises(grpc.RpcError) as e:
                c.load_fabric_live()
            assert e.value.code() in (grpc.StatusCode.FAILED_PRECONDITION,
                                      grpc.StatusCode.UNAVAILABLE)
            assert "no HCA" in (e.value.details() or "")
            assert c.health() == "SERVING"
    finally:
        assert d.stop() == 0


@pytest.mark.real
@pytest.mark.skipif(not HAVE_IBSIM, reason="ibsim/opensm not installed (ibsim-utils, opensm)")
def test_a_long_lived_process_sees_the_port_change(tmp_path: Path) -> None:
    """umad2sim snapshots sysfs once per process: a daemon that looked before
    the SM came up would see INIT forever.  local_ports() takes a fresh
    snapshot in a child process, so the same process sees ACTIVE afterwards
    (while its own snapshot, read_sysfs(), still says INIT)."""
    fabric = pgft(2, [2, 2], [1, 2], [1, 1])
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    go, first, out = tmp_path / "go", tmp_path / "first.json", tmp_path / "out.json"
    script = textwrap.dedent(f"""
        import json, time
        from pathlib import Path
        from smroute.discovery.hca import local_ports, read_sysfs
        Path({str(first)!r}).write_text(json.dumps([p.state for p in local_ports()[0]]))
        while not Path({str(go)!r}).exists():
            time.sleep(0.05)
        fresh = [p.state for p in local_ports()[0]]
        own = [p.state for p in read_sysfs()]
        Path({str(out)!r}).write_text(json.dumps({{"fresh": fresh, "own": own}}))
    """)
    with IbSim(net, tmp_path / "sim") as sim:
        env = sim.client_env(preload=True)
        proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while not first.exists():
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert json.loads(first.read_text()) == [2]  # INIT: no SM yet
            run_opensm(sim, tmp_path / "opensm")
            go.write_text("")
            proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert json.loads(out.read_text()) == {"fresh": [4], "own": [2]}  # ACTIVE vs stale INIT
