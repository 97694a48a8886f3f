"""``smroute ctl`` against a real ``smroute serve`` process on a Unix socket
(the fixture fabric that ibsim + OpenSM + ibnetdiscover produced, LMC 2),
and the client's methods it rests on."""

from __future__ import annotations

import gzip
import json
import lzma
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_daemon import ROOT, DaemonProc, start_daemon

from smroute.cli.main import main
from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.service.rpc.client import SmrouteClient
from smroute.tables.formats import read_tables

FIXTURE = str(ROOT / "fixtures" / "pgft-3-2.2.3-lmc2.topo")
LEAF = 0x0002C90310000050  # "pgft L1 2.1.0": port 3 goes up, ports 1-2 to hosts
HOST = 0x0002C903000000A0  # "host 2.1.0"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    tmp = tmp_path_factory.mktemp("ctl")
    cfg = tmp / "smroute.yaml"
    packed = tmp / "fabric.topo.xz"  # the configured fabric may be compressed
    packed.write_bytes(lzma.compress(Path(FIXTURE).read_bytes()))
    cfg.write_text(f"fabric: {packed}\nlmc: 2\ncoalesce_ms: 5\nfabric_dirs: [{tmp}]\n"
                   "limits:\n  max_topology_bytes: 100000\n")
    d = start_daemon(tmp / "d", "--config", str(cfg), listen=f"unix:{tmp / 'smroute.sock'}")
    yield d
    assert d.stop() == 0


def ctl(daemon: DaemonProc, capsys: pytest.CaptureFixture[str], *args: str
        ) -> tuple[int, str, str]:
    rc = main(["ctl", *args, "--address", daemon.address])
    out, err = capsys.readouterr()
    return rc, out, err


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "smroute", *args], capture_output=True,
                          text=True, cwd=ROOT, env=e, timeout=120)


def test_status_by_environment_variable(daemon: DaemonProc) -> None:
    r = run_cli("ctl", "status", env={"SMROUTE_DAEMON": daemon.address})
    assert r.returncode == 0, r.stderr
    assert f"daemon {daemon.address}: SERVING" in r.stdout
    assert "epoch 1 " in r.stdout and "valid (" in r.stdout
    r = run_cli("ctl", "status", "--json", env={"SMROUTE_DAEMON": daemon.address})
    doc = json.loads(r.stdout)
    assert doc["health"] == "SERVING" and doc["epoch"]["lmc"] == 2
    assert doc["epoch"]["base_fabric_hash"] == read_topology(FIXTURE).content_hash


def test_address_before_the_subcommand_and_from_the_config(
        daemon: DaemonProc, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ctl", "--address", daemon.address, "epoch", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lmc"] == 2
    cfg = tmp_path / "smroute.yaml"
    cfg.write_text(f"listen: {daemon.address}\n")
    assert main(["ctl", "status", "--config", str(cfg)]) == 0
    assert f"daemon {daemon.address}: SERVING" in capsys.readouterr().out


def test_fault_dry_run_json_commits_nothing(daemon: DaemonProc,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    before = SmrouteClient(daemon.address).get_epoch().id
    rc, out, _ = ctl(daemon, capsys, "fault", "down", "link", f"{LEAF:#x}", "3", "--dry-run",
                     "--json", "--max-entries", "5")
    assert rc == 0
    doc = json.loads(out)
    assert doc["dry_run"] is True and doc["committed"] is False
    assert doc["event"] == {"kind": "LINK_DOWN", "node_guid": f"{LEAF:#018x}", "port": 3}
    assert doc["diff"]["entries_changed"] > 0 and 0 < len(doc["changes"]) <= 5 + 5
    assert doc["epoch"]["id"] == 0  # what it would be
    with SmrouteClient(daemon.address) as c:
        assert c.get_epoch().id == before


def test_fault_down_up_epochs_diff_and_tables(daemon: DaemonProc, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = ctl(daemon, capsys, "fault", "down", "link", f"{LEAF:x}", "3")
    assert rc == 0 and "link down 0x0002c90310000050[3]: committed epoch" in out
    down = SmrouteClient(daemon.address).get_epoch()
    assert down.down_links == 1
    rc, out, _ = ctl(daemon, capsys, "epoch", "--down-items")
    assert rc == 0 and "down item: link down" in out
    rc, out, _ = ctl(daemon, capsys, "diff", str(down.parent_id), str(down.id))
    assert rc == 1 and f"epoch {down.parent_id} -> epoch {down.id}" in out
    rc, out, _ = ctl(daemon, capsys, "diff", str(down.id), str(down.id))
    assert rc == 0 and "identical" in out
    rc, out, _ = ctl(daemon, capsys, "fault", "up", "link", f"{LEAF:#x}", "3", "--json")
    assert rc == 0 and json.loads(out)["epoch"]["down_links"] == 0
    rc, out, _ = ctl(daemon, capsys, "epochs", "--json")
    ids = [e["id"] for e in json.loads(out)]
    assert ids == sorted(ids, reverse=True) and down.id in ids and len(ids) >= 3
    for fmt in ("opensm", "fdbs", "json"):
        path = tmp_path / f"t.{fmt}"
        rc, out, _ = ctl(daemon, capsys, "tables", "--format", fmt, "--out", str(path))
        assert rc == 0
        t = read_tables(path)
        assert t.n_switches == SmrouteClient(daemon.address).get_epoch().switches
    rc, out, _ = ctl(daemon, capsys, "watch", "--count", "1", "--json")
    assert rc == 0 and json.loads(out)["id"] == ids[0]


def test_route_load_analyze_lids_lanes(daemon: DaemonProc, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    packed = tmp_path / "fabric.topo.gz"
    packed.write_bytes(gzip.compress(Path(FIXTURE).read_bytes()))
    rc, out, _ = ctl(daemon, capsys, "load", str(packed), "--route", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["fabric"]["content_hash"] == read_topology(FIXTURE).content_hash
    assert doc["epoch"]["validation"]["ok"] is True
    rc, out, _ = ctl(daemon, capsys, "load", FIXTURE)
    assert rc == 0 and "not served yet" in out
    # a compressed file on the daemon's host, bounded once decompressed too
    fabric_dir = Path(daemon.workdir).parent
    rc, out, _ = ctl(daemon, capsys, "load", "--server-path", str(fabric_dir / "fabric.topo.xz"),
                     "--json")
    assert rc == 0 and json.loads(out)["fabric"]["switches"] == 16
    bomb = fabric_dir / "bomb.topo.gz"
    bomb.write_bytes(gzip.compress(b"\n" * 1_000_000))
    assert bomb.stat().st_size < 10_000
    rc, _, err = ctl(daemon, capsys, "load", "--server-path", str(bomb))
    assert rc == 1 and "RESOURCE_EXHAUSTED" in err and "max_topology_bytes" in err
    rc, out, _ = ctl(daemon, capsys, "route", "--wait")
    assert rc == 0 and "validation: valid" in out
    # max_vls auto (the default): a loaded file cannot have its VLs programmed
    assert "  VLs allowed: 1 (max_vls auto: the fabric's source cannot program VLs" in out
    rc, out, _ = ctl(daemon, capsys, "analyze", "--rp-samples", "5", "--json")
    assert rc == 0 and json.loads(out)["end_ports"] > 0
    rc, out, _ = ctl(daemon, capsys, "lids", "host 2.0.0", f"{HOST:#x}", "host 1.0.0",
                     "--pattern", "ring", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["n_ranks"] == 3 and len(doc["dlids"]) == 3 and doc["dlids"][0][0] == 0
    rc, out, _ = ctl(daemon, capsys, "lanes")
    assert rc == 0 and out.startswith("smroute-lanes 1\n") and "\nvls 1\n" in out


def test_bad_input_and_unknown_items(daemon: DaemonProc,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = ctl(daemon, capsys, "fault", "down", "link", "0x1234", "3", "--dry-run")
    assert rc == 2 and "error:" in err and "Traceback" not in err
    rc, _, err = ctl(daemon, capsys, "fault", "down", "link", f"{LEAF:#x}")
    assert rc == 2 and "port" in err
    rc, _, err = ctl(daemon, capsys, "epoch", "999999")
    assert rc == 2 and "NOT_FOUND" in err
    rc, _, err = ctl(daemon, capsys, "lids", "no-such-host", "host 2.1.0")
    assert rc == 2


def test_reload_by_socket_peer(daemon: DaemonProc, capsys: pytest.CaptureFixture[str]) -> None:
    import time

    rc, out, _ = ctl(daemon, capsys, "reload", "--json")
    assert rc == 0 and json.loads(out)["pid"] == daemon.proc.pid
    deadline = time.monotonic() + 20
    while not any(e.get("event") == "reloaded" for e in daemon.log_events()):
        assert time.monotonic() < deadline, "no reload logged"
        time.sleep(0.05)


def test_unreachable_daemon_is_one_line_exit_4(tmp_path: Path) -> None:
    r = run_cli("ctl", "status", env={"SMROUTE_DAEMON": f"unix:{tmp_path}/none.sock"})
    assert r.returncode == 4
    assert r.stderr.count("\n") == 1 and "cannot reach the daemon" in r.stderr
    from smroute.lab.processes import free_port

    r = run_cli("ctl", "fault", "down", "switch", "0x1", "--address",
                f"127.0.0.1:{free_port()}", "--connect-timeout", "0.5")
    assert r.returncode == 4 and "Traceback" not in r.stderr
    assert "cannot reach the daemon at 127.0.0.1:" in r.stderr and "refused" in r.stderr
    stale = tmp_path / "stale.sock"  # left by a daemon that was killed
    stale.touch()
    r = run_cli("ctl", "epochs", "--json", "--address", f"unix:{stale}")
    assert r.returncode == 4 and r.stderr.count("\n") == 1 and "refused" in r.stderr


def test_daemon_without_a_fabric(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = start_daemon(tmp_path / "d", "--state", "none")
    try:
        rc, out, _ = ctl(d, capsys, "status")
        assert rc == 1 and "no epoch served: " in out
        rc, _, err = ctl(d, capsys, "route")
        assert rc == 3 and "FAILED_PRECONDITION: no fabric loaded" in err
        rc, _, err = ctl(d, capsys, "fault", "down", "switch", "0x1", "--dry-run")
        assert rc == 3 and "Traceback" not in err
    finally:
        assert d.stop() == 0


def test_mutual_tls_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from certs import make_pki

    pki = make_pki(tmp_path / "pki", clients=("operator", "viewer"))
    cfg = tmp_path / "smroute.yaml"
    cfg.write_text(f"fabric: {FIXTURE}\n" + pki.tls_yaml(mutual=True)
                   + "mutating_identities: [operator]\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg), listen="127.0.0.1:0")
    try:
        target = f"localhost:{d.address.rsplit(':', 1)[1]}"

        def run(who: str, *args: str) -> tuple[int, str, str]:
            c = pki.client(who)
            rc = main(["ctl", *args, "--address", target, "--tls-ca", str(pki.ca.cert_path),
                       "--tls-cert", str(c.cert_path), "--tls-key", str(c.key_path)])
            out, err = capsys.readouterr()
            return rc, out, err

        assert run("viewer", "status")[0] == 0
        rc, _, err = run("viewer", "fault", "down", "switch", "0x2c90310000050")
        assert rc == 2 and "PERMISSION_DENIED" in err and "viewer" in err
        rc, out, _ = run("operator", "fault", "down", "switch", "0x0002c90310000050", "--json")
        assert rc == 0 and json.loads(out)["committed"] is True
        # plaintext to a TLS daemon: the connection never becomes ready
        rc = main(["ctl", "status", "--address", target, "--connect-timeout", "1"])
        assert rc == 4 and "cannot reach the daemon" in capsys.readouterr().err
        rc = main(["ctl", "status", "--address", target, "--tls-ca", str(tmp_path / "none.pem")])
        assert rc == 2 and "none.pem" in capsys.readouterr().err
    finally:
        assert d.stop() == 0


def test_client_route_subnet_answers_the_served_epoch(daemon: DaemonProc) -> None:
    """SmrouteClient.route_subnet: the subnet of the serving epoch answers it."""
    from smroute.service.rpc.subnet import subnet_request

    with SmrouteClient(daemon.address) as c:
        ep = c.get_epoch()
        f = read_topology(FIXTURE)
        r = c.route_subnet(subnet_request(f, ep.lmc, sm="test_ctl"))
        assert r.epoch.validation.ok and len(r.switches) == ep.switches
        assert r.max_lid == ep.max_lid
