"""Slurm topology from the fabric's roles (:mod:`smroute.fabric.export.slurm`,
``smroute slurm topology``), checked by the real Slurm.

* host lists: our compression and expansion agree with each other on random
  name sets, and with Slurm's parser (every file below is read by slurmctld);
* naming: first word of the description, vendor defaults, ``--name-regex``,
  host map (GUID, port GUID, description, derived name), generated names,
  ``--unnamed error``; switch names (``MF0;NAME:...``, Voltaire ``# NAME``,
  vendor text, sanitizing, uniqueness, the 64-character limit);
* a generated tree with SHARP aggregation nodes, hosts on two spines, a host
  whose HCAs hang off two leaves and an HCA without a host name, and every
  real capture that routes (``../shared/fabrics/real``, skipped when absent):
  ``slurmctld -D`` (``TopologyPlugin=topology/tree``, ``auth/none``, state in
  a temporary directory, an unprivileged loopback port) loads our
  ``topology.conf`` and ``scontrol show topology`` lists exactly our switches,
  their child switches and nodes, every compute host under the leaf its HCAs
  hang off and no aggregation node;
* ``topology.yaml`` validated against a JSON schema written from Slurm's
  ``topology.yaml(5)`` (:data:`~smroute.fabric.export.slurm.TOPOLOGY_YAML_SCHEMA`);
  the installed Slurm also loads it when it is 24.11 or newer (Debian 12 has
  22.05, which predates topology.yaml: schema only, the test says so);
* the CLI: formats, ``--out``, warnings, exit status 2 on bad input;
* scale: the 11,664-host PGFT in well under the time budget.

slurmctld tests skip only when slurmctld/scontrol are not installed
(``scripts/setup.sh`` installs ``slurmctld``).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from smroute.cli.main import main
from smroute.errors import InputError
from smroute.fabric.export.slurm import (
    HOST_ROLES,
    MAX_NAME,
    TOPOLOGY_YAML_SCHEMA,
    HostMap,
    SlurmTopology,
    check_block_sizes,
    expand_hostlist,
    hostlist,
    natural_key,
    parse_host_map,
    slurm_topology,
)
from smroute.fabric.export.slurm_files import hostlist_of
from smroute.fabric.export.writers import write_topology
from smroute.fabric.generate.shapes import attach_cas, with_aggregation_nodes
from smroute.fabric.generate.trees import pgft
from smroute.fabric.ibnetdiscover.parse import read_fabric
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import EndportRole, fabric_roles

REAL = Path(__file__).resolve().parents[2] / "shared" / "fabrics" / "real"
#: Real captures that do not route (README of the real folder): bad input.
NOT_ROUTING = {"NVIDIA-topograph-example-bad.out",
               "HyungKwang-My-Programing-Topo.8_-invalid_lid_Null.txt"}
SLURMCTLD = shutil.which("slurmctld") or (
    "/usr/sbin/slurmctld" if os.access("/usr/sbin/slurmctld", os.X_OK) else None)
SCONTROL = shutil.which("scontrol")
_PLUGIN_DIRS = ("/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib/aarch64-linux-gnu/slurm-wlm",
                "/usr/lib64/slurm", "/usr/lib/slurm", "/usr/local/lib/slurm")

needs_slurm = pytest.mark.skipif(
    SLURMCTLD is None or SCONTROL is None,
    reason="slurmctld/scontrol not installed (Debian: apt-get install slurmctld; "
    "scripts/setup.sh installs it)")


def _real_files() -> list[Path]:
    if not REAL.is_dir():
        return []
    return sorted(p for p in REAL.iterdir() if p.name != "README.md" and p.name not in NOT_ROUTING)


def _real_ids() -> list[object]:
    files = _real_files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(
            reason=f"real captures not found at {REAL} (the shared fabrics folder)"))]
    return files


# --------------------------------------------------------------------- helpers
def parse_conf(text: str) -> dict[str, dict[str, str]]:
    """topology.conf lines -> {switch: {key: value}} (comments dropped)."""
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        kv = dict(tok.split("=", 1) for tok in line.split())
        name = kv.pop("SwitchName")
        assert name not in out, f"switch {name} twice"
        out[name] = kv
    return out


def generated_tree() -> tuple[Fabric, HostMap]:
    """PGFT(2;4,4;1,4) with an aggregation node on every switch, 'ufm01' (two
    HCAs) on spine 0, 'gw01' on spine 1, 'dgx01' with mlx5_0 on leaf 1 and
    mlx5_1 on leaf 0, and an HCA with a vendor-default description on leaf 2;
    the 16 generated hosts ('host a.b') named node01..node16 by GUID."""
    f = pgft(2, [4, 4], [1, 4], [1, 1], speed="NDR")
    hm = HostMap(by_guid={int(f.node_guid[c]): f"node{i + 1:02d}" for i, c in enumerate(f.cas)})
    r = fabric_roles(f)
    leaves = np.flatnonzero(r.rank == 0)
    spines = np.flatnonzero(r.rank == 1)
    f = with_aggregation_nodes(f)
    f = attach_cas(
        f, [spines[0], spines[0], spines[1], leaves[1], leaves[0], leaves[2]],
        ["ufm01 HCA-1", "ufm01 HCA-2", "gw01 HCA-1", "dgx01 mlx5_0", "dgx01 mlx5_1",
         "MT4129 ConnectX7   Mellanox Technologies"])
    return f, hm


def check_structure(f: Fabric, topo: SlurmTopology) -> None:
    """What every topology must satisfy: unique names within Slurm's limits,
    each switch lists child switches or nodes (not both, not neither), every
    child is defined, every host under exactly one switch, the switch it is
    listed under carries one of its HCAs (or stands for its upper switch's
    host ports), compute hosts on a leaf, no aggregation node listed."""
    r = fabric_roles(f)
    names = [s.name for s in topo.switches]
    assert len(set(names)) == len(names)
    defined = set(names)
    placed: dict[str, str] = {}
    for s in topo.switches:
        assert 0 < len(s.name) <= MAX_NAME and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", s.name)
        assert bool(s.switches) != bool(s.nodes), s
        assert set(s.switches) <= defined
        for h in s.nodes:
            assert h not in placed, f"{h} under {placed[h]} and {s.name}"
            placed[h] = s.name
    assert set(placed) == set(topo.hosts)
    assert dict(zip(topo.hosts, topo.host_switch, strict=True)) == placed
    by_name = {s.name: s for s in topo.switches}
    hca = np.flatnonzero(topo.hca_host >= 0)
    assert not np.isin(hca, np.flatnonzero(r.endport_role == EndportRole.AGGREGATION)).any()
    assert not any("Aggregation" in f.node_desc[i] for i in hca.tolist())
    for h_idx, host in enumerate(topo.hosts):
        mine = hca[topo.hca_host[hca] == h_idx]
        holder = by_name[placed[host]]
        assert holder.node in set(r.attach[mine].tolist()), (host, holder)
        roles = set(r.endport_role[mine].tolist())
        if roles == {int(EndportRole.COMPUTE)}:
            assert r.rank[holder.node] == 0 and holder.kind == "switch", (host, holder)
            if len(set(r.attach[mine].tolist())) == 1:
                assert holder.node == int(r.attach[mine[0]])


# ------------------------------------------------------------ real slurmctld
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _plugin(name: str) -> bool:
    return any(Path(d, f"{name}.so").exists() for d in _PLUGIN_DIRS)


def slurm_version() -> tuple[int, int]:
    out = subprocess.run([SLURMCTLD or "slurmctld", "-V"], capture_output=True, text=True,
                         timeout=10).stdout
    m = re.search(r"(\d+)\.(\d+)", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


@contextlib.contextmanager
def _munged(tmp: Path) -> Iterator[str]:
    """A private munged (its own key and socket) for Slurm builds without
    auth/none; yields the socket path."""
    key, sock = tmp / "munge.key", tmp / "munge.sock"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    proc = subprocess.Popen(
        ["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={sock}",
         f"--pid-file={tmp / 'munged.pid'}", f"--log-file={tmp / 'munged.log'}",
         f"--seed-file={tmp / 'munged.seed'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while not sock.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert sock.exists(), "munged did not start"
        yield str(sock)
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def slurmctld(tmp: Path, hosts: list[str], files: dict[str, str], *,
              tree: bool = True) -> Iterator[tuple[dict[str, str], Path]]:
    """slurmctld in the foreground on loopback with a minimal slurm.conf beside
    ``files`` (topology.conf / topology.yaml); yields the environment for
    scontrol and the log.  Every host is a node with CPUs=1 State=UNKNOWN and
    NodeAddr=127.0.0.1 (slurmctld resolves every node's address at start: a
    name it cannot resolve costs ten seconds of retries)."""
    tmp.mkdir(parents=True, exist_ok=True)
    for d in ("state", "spool"):
        (tmp / d).mkdir(exist_ok=True)
    auth: list[str]
    stack = contextlib.ExitStack()
    if _plugin("auth_none") and os.environ.get("SMROUTE_SLURM_AUTH") != "munge":
        auth = ["AuthType=auth/none", "CredType=cred/none"]
    else:
        sock = stack.enter_context(_munged(tmp))
        auth = ["AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={sock}"]
    conf = [
        "ClusterName=smroute", "SlurmctldHost=localhost",
        f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}", "SlurmUser=root",
        *auth,
        f"StateSaveLocation={tmp / 'state'}", f"SlurmdSpoolDir={tmp / 'spool'}",
        f"SlurmctldPidFile={tmp / 'slurmctld.pid'}", f"SlurmctldLogFile={tmp / 'slurmctld.log'}",
        "SlurmctldDebug=info", "MailProg=/bin/true", "MpiDefault=none",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "ReturnToService=2",
    ]
    if tree:
        conf.append("TopologyPlugin=topology/tree")
    conf += [f"NodeName={h} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN" for h in hosts]
    conf.append("PartitionName=all Nodes=ALL Default=YES State=UP")
    (tmp / "slurm.conf").write_text("\n".join(conf) + "\n")
    for name, text in files.items():
        (tmp / name).write_text(text)
    env = dict(os.environ, SLURM_CONF=str(tmp / "slurm.conf"))
    log = tmp / "slurmctld.log"
    with stack, open(tmp / "slurmctld.out", "wb") as out:
        proc = subprocess.Popen([SLURMCTLD or "slurmctld", "-D", "-i"], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 20
            while True:
                if proc.poll() is not None:
                    pytest.fail("slurmctld exited:\n" + (tmp / "slurmctld.out").read_text()[-3000:])
                ping = subprocess.run([SCONTROL or "scontrol", "ping"], env=env,
                                      capture_output=True, text=True, timeout=10)
                if "UP" in ping.stdout:
                    break
                if time.monotonic() > deadline:
                    pytest.fail("slurmctld did not answer within 20 s:\n"
                                + (tmp / "slurmctld.out").read_text()[-3000:])
                time.sleep(0.05)
            yield env, log
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def show_topology(env: dict[str, str]) -> dict[str, dict[str, str]]:
    """``scontrol show topology`` -> {switch: {key: value}}."""
    res = subprocess.run([SCONTROL or "scontrol", "show", "topology"], env=env,
                         capture_output=True, text=True, timeout=20)
    assert res.returncode == 0, res.stderr
    out: dict[str, dict[str, str]] = {}
    for line in res.stdout.splitlines():
        kv = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        if "SwitchName" in kv:
            out[kv.pop("SwitchName")] = kv
    return out


def below(topo: SlurmTopology, name: str) -> set[str]:
    """Every node under switch ``name`` (Slurm lists them for upper switches)."""
    s = topo.switch(name)
    out = set(s.nodes)
    for c in s.switches:
        out |= below(topo, c)
    return out


def check_against_slurm(topo: SlurmTopology, shown: dict[str, dict[str, str]]) -> None:
    """scontrol's topology is exactly ours: the same switches, child switches,
    nodes (all below an upper switch) and link speeds."""
    assert set(shown) == {s.name for s in topo.switches}
    for s in topo.switches:
        got = shown[s.name]
        assert set(expand_hostlist(got.get("Switches", ""))) == set(s.switches), s.name
        assert set(expand_hostlist(got.get("Nodes", ""))) == below(topo, s.name), s.name
        if s.link_speed:
            assert int(got["LinkSpeed"]) == s.link_speed
        if not s.switches:
            assert int(got["Level"]) == 0


_BAD_LOG = re.compile(r"Multiple leaf switches|lack access|Invalid node name|Invalid hostnames|"
                      r"not a tree|has both child|has neither|fatal", re.IGNORECASE)


def check_log(log: Path, topo: SlurmTopology) -> None:
    """No complaint about the topology in slurmctld's log; "no switch can
    reach all nodes" exactly when no switch of ours has every host below it
    (fabrics no cable joins)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    bad = [line for line in text.splitlines() if _BAD_LOG.search(line)]
    assert not bad, bad
    joined = any(below(topo, s.name) == set(topo.hosts) for s in topo.switches)
    assert ("no switch can reach all nodes" in text) == (not joined)


# ----------------------------------------------------------------- host lists
def test_hostlist_compresses_as_slurm_expands() -> None:
    assert hostlist([f"node{i:03d}" for i in range(1, 65)]) == "node[001-064]"
    assert hostlist(["stage1", "stage2", "stage10", "stage11"]) == "stage[1-2,10-11]"
    assert hostlist(["n07", "n08", "n9", "x", "a08-p1-dgx-04-c01"]) == \
        "a08-p1-dgx-04-c01,n[07-08],n9,x"
    assert hostlist([]) == ""
    assert expand_hostlist("n[8-10],a[01-02,7],b") == [
        "n8", "n9", "n10", "a01", "a02", "a7", "b"]
    for bad in ("n[1-2", "n]", "n[[1]]", "n[a-b]", "n[3-1]"):
        with pytest.raises(ValueError):
            expand_hostlist(bad)
    rnd = random.Random(7)
    for _ in range(500):
        names = {rnd.choice(["a", "b-", "c1x", "ib-e09d7303007a5a"])
                 + str(rnd.randint(0, 150)).zfill(rnd.randint(1, 4))
                 for _ in range(rnd.randint(1, 40))}
        names |= {rnd.choice(["plain", "x-y"]) for _ in range(rnd.randint(0, 2))}
        assert sorted(expand_hostlist(hostlist(names))) == sorted(names)
    assert sorted(["n10", "n9", "n1"], key=natural_key) == ["n1", "n9", "n10"]


def test_guid_names_are_listed_whole_as_slurm_reads_them(tmp_path: Path) -> None:
    """``ib-<GUID>`` / ``sw-<GUID>`` names end in the digits of a hex GUID, no
    number of a series: never bracketed (``ib-e09d[7303...,7303...]``); other
    names are compressed as before, and Slurm's own parser gives them back."""
    names = ["ib-e09d730300346128", "ib-e09d730300373158", "sw-0002c90310000000",
             "sw-0002c90310000010", "node01", "node02", "node03"]
    text = hostlist_of(names)
    assert text == ("ib-e09d730300346128,ib-e09d730300373158,node[01-03],"
                    "sw-0002c90310000000,sw-0002c90310000010")
    assert "[" not in hostlist_of(names[:4])
    assert sorted(expand_hostlist(text)) == sorted(names)
    if SCONTROL is None:
        pytest.skip("scontrol not installed: Slurm's own parser not tried")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=t\nSlurmctldHost=localhost\nAuthType=auth/none\n"
                    "CredType=cred/none\n")
    r = subprocess.run([SCONTROL, "show", "hostnames", text], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, SLURM_CONF=str(conf)))
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == sorted(names)


def test_block_sizes() -> None:
    check_block_sizes([4, 16, 64])
    for bad in ([0], [4, 12], [4, 4], [8, 4]):
        with pytest.raises(ValueError):
            check_block_sizes(bad)


# --------------------------------------------------------------------- naming
def test_host_map_parsing() -> None:
    hm = parse_host_map(
        "# comment\n\n0xE09D7303007A5A68 gpu001\n"
        "a08-p1-dgx-04-c17 mlx5_5   gpu002  # trailing comment\n"
        '"odd # desc" gpu003\n'
        "b05-p1-dgx-05-c02 gpu004\n", "map")
    assert hm.by_guid == {0xE09D7303007A5A68: "gpu001"}
    assert hm.by_desc == {"a08-p1-dgx-04-c17 mlx5_5": "gpu002", "odd # desc": "gpu003",
                          "b05-p1-dgx-05-c02": "gpu004"}
    for text, where in (("lonely\n", "map:1"), ("0x1 bad[name]\n", "map:1"),
                        ("0x1 a\n0x1 b\n", "map:2"), ('"open 1\n', "map:1"),
                        (f"0x1 {'n' * (MAX_NAME + 1)}\n", "map:1")):
        with pytest.raises(InputError) as ei:
            parse_host_map(text, "map")
        assert str(ei.value).startswith(where), ei.value


def test_names_from_descriptions_map_and_regex() -> None:
    f, hm = generated_tree()
    topo = slurm_topology(f, host_map=hm, include=HOST_ROLES)
    assert [h for h in topo.hosts if not h.startswith("node")] == [
        "dgx01", "gw01", topo.generated[0], "ufm01"]
    assert len(topo.generated) == 1 and re.fullmatch(r"ib-[0-9a-f]{16}", topo.generated[0])
    assert any("no usable host name" in w for w in topo.warnings)
    assert topo.split_hosts == ("dgx01",)
    assert topo.left_out["aggregation"] == 8
    # dgx01: one HCA per leaf -> the leaf of its first HCA (mlx5_0, leaf 1)
    r = fabric_roles(f)
    mlx0 = f.node_desc.index("dgx01 mlx5_0")
    assert topo.switch(topo.host_switch[topo.hosts.index("dgx01")]).node == r.attach[mlx0]
    # --unnamed error names the HCA
    with pytest.raises(InputError, match=r"1 host\(s\) have no usable host name.*MT4129"):
        slurm_topology(f, host_map=hm, unnamed="error", include=HOST_ROLES)
    # map by port GUID and by the derived name; a regex
    port_guid = int(f.port_guid[f.port_start[mlx0] + 1])
    hm2 = HostMap(by_guid={**hm.by_guid, port_guid: "dgxA"}, by_desc={"ufm01": "ufm-a"})
    topo2 = slurm_topology(f, host_map=hm2, include=HOST_ROLES)
    assert {"dgxA", "dgx01", "ufm-a"} <= set(topo2.hosts) and "ufm01" not in topo2.hosts
    topo3 = slurm_topology(f, host_map=hm, name_regex=r"^(?P<host>[a-z]+)\d+ ",
                           include=HOST_ROLES)
    assert {"dgx", "gw", "ufm"} <= set(topo3.hosts)
    # roles: only compute nodes, by default (no storage gateway, no UFM server)
    topo4 = slurm_topology(f, host_map=hm)
    assert topo4.hosts == slurm_topology(f, host_map=hm, include=[EndportRole.COMPUTE]).hosts
    assert "ufm01" not in topo4.hosts and "gw01" not in topo4.hosts
    assert topo4.left_out["role"] == 3
    assert all(s.kind != "hosts" for s in topo4.switches)


def test_switch_names() -> None:
    f = pgft(2, [2, 2], [1, 2], [1, 1])
    sw = f.switches
    descs = list(f.node_desc)
    descs[sw[0]] = "MF0;A09-P1-IBLEAF-01-01:MQM9701/U1"
    descs[sw[1]] = "Voltaire 4036 # hoibp0013"
    descs[sw[2]] = "Quantum Mellanox Technologies"
    descs[sw[3]] = "MF0;" + "x" * 80 + ":MQM8700/U1"
    f = _with_descs(f, descs)
    hm = HostMap(by_guid={int(f.node_guid[c]): f"n{i}" for i, c in enumerate(f.cas)})
    names = {s.node: s.name for s in slurm_topology(f, host_map=hm, include=HOST_ROLES).switches}
    assert names[sw[0]] == "A09-P1-IBLEAF-01-01"
    assert names[sw[1]] == "hoibp0013"
    assert names[sw[2]] == f"sw-{int(f.node_guid[sw[2]]):016x}"
    assert names[sw[3]] == "x" * MAX_NAME
    # duplicates get the GUID; a host map names a switch by GUID
    descs[sw[1]] = descs[sw[0]]
    f2 = _with_descs(f, descs)
    names2 = {s.node: s.name for s in slurm_topology(f2, host_map=hm, include=HOST_ROLES).switches}
    assert names2[sw[0]] == f"A09-P1-IBLEAF-01-01-{int(f.node_guid[sw[0]]):016x}"
    hm3 = HostMap(by_guid={**hm.by_guid, int(f.node_guid[sw[2]]): "core1"})
    topo5 = slurm_topology(f2, host_map=hm3, include=HOST_ROLES)
    assert "core1" in {s.name for s in topo5.switches}


def _with_descs(f: Fabric, descs: list[str]) -> Fabric:
    import dataclasses

    return dataclasses.replace(f, node_desc=tuple(descs), _cache={})


# ---------------------------------------------------- generated tree + Slurm
def test_generated_tree_structure() -> None:
    f, hm = generated_tree()
    topo = slurm_topology(f, host_map=hm, include=HOST_ROLES)
    check_structure(f, topo)
    kinds = [s.kind for s in topo.switches]
    assert kinds.count("hosts") == 2 and kinds.count("fabric") == 1
    ufm = topo.switch(topo.host_switch[topo.hosts.index("ufm01")])
    assert ufm.kind == "hosts" and ufm.nodes == ("ufm01",)
    spine = next(s for s in topo.switches if ufm.name in s.switches)
    assert spine.node == ufm.node and len(spine.switches) == 5  # 4 leaves + its hosts
    assert all(s.link_speed == 400 for s in topo.switches if s.kind != "fabric")
    conf = parse_conf(topo.to_conf("gen"))
    assert conf[spine.name]["Switches"] == hostlist_of(spine.switches)
    assert "Nodes" not in conf[spine.name]


@needs_slurm
def test_generated_tree_in_slurmctld(tmp_path: Path) -> None:
    f, hm = generated_tree()
    topo = slurm_topology(f, host_map=hm, include=HOST_ROLES)
    t0 = time.monotonic()
    with slurmctld(tmp_path, list(topo.hosts), {"topology.conf": topo.to_conf()}) as (env, log):
        shown = show_topology(env)
    check_against_slurm(topo, shown)
    check_log(log, topo)
    assert time.monotonic() - t0 < 15


@needs_slurm
@pytest.mark.parametrize("path", _real_ids(), ids=lambda p: getattr(p, "name", "none"))
def test_real_capture_in_slurmctld(path: Path, tmp_path: Path) -> None:
    f = read_fabric(str(path))
    r = fabric_roles(f)
    topo = slurm_topology(f, r, include=HOST_ROLES)
    check_structure(f, topo)
    t0 = time.monotonic()
    with slurmctld(tmp_path, list(topo.hosts), {"topology.conf": topo.to_conf(path.name)}) as (
            env, log):
        shown = show_topology(env)
    check_against_slurm(topo, shown)
    check_log(log, topo)
    assert time.monotonic() - t0 < 15
    # every compute HCA's host is listed, under a leaf one of its HCAs hangs off
    listed = set().union(*(set(s.nodes) for s in topo.switches))
    comp = np.flatnonzero(r.endport_role == EndportRole.COMPUTE)
    assert {topo.hosts[i] for i in topo.hca_host[comp].tolist()} <= listed
    agg = np.flatnonzero(r.endport_role == EndportRole.AGGREGATION)
    assert (topo.hca_host[agg] == -1).all()
    assert not {f"ib-{int(f.node_guid[a]):016x}" for a in agg.tolist()} & listed


# ------------------------------------------------------------- topology.yaml
def _validate_yaml(text: str) -> list[dict[str, object]]:
    jsonschema = pytest.importorskip("jsonschema")
    doc = yaml.safe_load(text)
    jsonschema.validate(doc, TOPOLOGY_YAML_SCHEMA)
    for topo in doc:
        assert next(iter(topo)) == "topology"  # "must be the first attribute"
    assert len({t["topology"] for t in doc}) == len(doc)
    return list(doc)


def test_schema_rejects_what_slurm_rejects() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    ok = [{"topology": "t", "cluster_default": True,
           "tree": {"switches": [{"switch": "s1", "nodes": "n[1-2]"},
                                 {"switch": "top", "children": "s1"}]}},
          {"topology": "b", "block": {"block_sizes": [2, 4], "blocks": [
              {"block": "b1", "nodes": "n[1-2]"}]}},
          {"topology": "f", "flat": True}]
    jsonschema.validate(ok, TOPOLOGY_YAML_SCHEMA)
    bad = [
        [{"topology": "t", "tree": {"switches": [{"switch": "s", "nodes": "n1",
                                                  "children": "s2"}]}}],
        [{"topology": "t", "tree": {"switches": [{"switch": "s"}]}}],
        [{"topology": "t", "tree": {"switches": [{"switch": "s" * 65, "nodes": "n1"}]}}],
        [{"topology": "t", "tree": {"switches": []}, "flat": True}],
        [{"topology": "t"}],
        [{"topology": "t", "block": {"blocks": [{"nodes": "n1"}]}}],
        [{"topology": "t", "tree": {"switches": [{"switch": "s", "nodes": "n1"}]},
          "extra": 1}],
    ]
    for doc in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, TOPOLOGY_YAML_SCHEMA)


def test_yaml_matches_conf_and_schema() -> None:
    f, hm = generated_tree()
    topo = slurm_topology(f, host_map=hm, include=HOST_ROLES)
    doc = _validate_yaml(topo.to_yaml("gen", block_sizes=[1, 2]))
    tree, block = doc
    assert tree["cluster_default"] is True and block["cluster_default"] is False
    conf = parse_conf(topo.to_conf())
    sw = {s["switch"]: s for s in tree["tree"]["switches"]}  # type: ignore[index]
    assert set(sw) == set(conf)
    for name, kv in conf.items():
        assert sw[name].get("children") == kv.get("Switches")
        assert sw[name].get("nodes") == kv.get("Nodes")
    blocks = block["block"]["blocks"]  # type: ignore[index]
    assert [b["block"] for b in blocks] == [s.name for s in topo.switches if s.nodes]
    assert block["block"]["block_sizes"] == [1, 2]  # type: ignore[index]


@pytest.mark.parametrize("path", _real_ids(), ids=lambda p: getattr(p, "name", "none"))
def test_real_capture_yaml_schema(path: Path) -> None:
    topo = slurm_topology(read_fabric(str(path)), include=HOST_ROLES)
    _validate_yaml(topo.to_yaml(path.name))


@needs_slurm
def test_yaml_in_slurmctld_if_supported(tmp_path: Path) -> None:
    """Slurm reads topology.yaml from 24.11 on; older versions: the schema
    tests above are all there is (skip, naming the version)."""
    version = slurm_version()
    if version < (24, 11):
        pytest.skip(f"installed Slurm {version[0]}.{version[1]:02d} predates topology.yaml "
                    "(24.11): validated against the schema written from topology.yaml(5) only")
    f, hm = generated_tree()
    topo = slurm_topology(f, host_map=hm, include=HOST_ROLES)
    with slurmctld(tmp_path, list(topo.hosts), {"topology.yaml": topo.to_yaml()},
                   tree=False) as (env, log):
        shown = show_topology(env)
    check_against_slurm(topo, shown)
    check_log(log, topo)


# ------------------------------------------------------------------------ CLI
def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f, hm = generated_tree()
    fab = tmp_path / "gen.topo"
    write_topology(f, fab)
    hmap = tmp_path / "hosts.map"
    hmap.write_text("".join(f"{g:#018x} {n}\n" for g, n in hm.by_guid.items()))
    out = tmp_path / "topology.conf"
    assert main(["slurm", "topology", str(fab), "--host-map", str(hmap), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    # compute hosts only by default: the storage gateway and the UFM server left out
    assert "no usable host name" in err and "slurm: 18 nodes under" in err
    assert "left out: 8 aggregation, 3 role" in err
    expected = slurm_topology(read_fabric(str(fab)), host_map=parse_host_map(hmap.read_text()))
    assert parse_conf(out.read_text()) == parse_conf(expected.to_conf())
    assert main(["slurm", "topology", str(fab), "--host-map", str(hmap), "--out", str(out),
                 "--roles", "all"]) == 0
    assert "slurm: 20 nodes under" in capsys.readouterr().err
    assert {"gw01", "ufm01"} <= set(expand_hostlist(",".join(
        v.get("Nodes", "") for v in parse_conf(out.read_text()).values())))
    assert main(["slurm", "topology", str(fab), "--host-map", str(hmap), "--format", "yaml",
                 "--block-sizes", "2,4"]) == 0
    _validate_yaml(capsys.readouterr().out)
    for argv in (["--unnamed", "error"], ["--roles", "compute,bogus"], ["--block-sizes", "3,4"],
                 ["--name-regex", "("], ["--host-map", str(tmp_path / "missing")]):
        assert main(["slurm", "topology", str(fab), *argv]) == 2, argv
        assert "smroute: error:" in capsys.readouterr().err


# ---------------------------------------------------------------------- scale
def test_scale_11664_hosts() -> None:
    f = with_aggregation_nodes(pgft(3, [18, 18, 36], [1, 18, 18], [1, 1, 1]))
    r = fabric_roles(f)
    cas = np.flatnonzero((f.node_type == NodeType.CA) & (r.endport_role == EndportRole.COMPUTE))
    hm = HostMap(by_guid={int(g): f"node{i + 1:05d}" for i, g in enumerate(f.node_guid[cas])})
    t0 = time.perf_counter()
    topo = slurm_topology(f, r, host_map=hm, include=HOST_ROLES)
    conf = topo.to_conf()
    elapsed = time.perf_counter() - t0
    assert len(topo.hosts) == 11664 and topo.left_out["aggregation"] == 1620
    assert sum(1 for s in topo.switches if s.nodes) == 648
    assert len(parse_conf(conf)) == len(topo.switches) == 1620
    assert elapsed < 10, elapsed
