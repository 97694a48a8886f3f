"""Who may change the daemon's state: the Unix socket by default, mutating
RPCs allowed by the peer's kernel credentials (SO_PEERCRED / SO_PEERGROUPS)
whatever the socket file's mode, plaintext TCP refusing them unless
``allow_insecure_mutations``, metrics on loopback only (or TLS).

The clients that must be refused run as a second uid (``nobody``) in their
own process: a real ``smroute serve`` and real gRPC connections."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from service_daemon import ROOT, start_daemon

from smroute.service.config import ConfigError, default_config, load_config, parse_config
from smroute.service.rpc.client import SmrouteClient, default_target, link_down
from smroute.service.rpc.listen import DEFAULT_LISTEN

FIXTURE = str(ROOT / "fixtures" / "pgft-3-2.2.3-1.2.2-1.2.1.topo")
NOBODY = 65534
OTHER_GID = 4242

#: Run by the second uid: each RPC's outcome as a status code name.  The
#: interpreter lives under /root (mode 0700 here), so the child imports what
#: it needs first, then drops to the uid, gid and groups given, before any
#: connection (the kernel records the credentials at connect()).
CLIENT = r"""
import json, os, sys
import grpc
from smroute.service.rpc.client import SmrouteClient, link_down, pb
target, guid = sys.argv[1], int(sys.argv[2])
topology = open(sys.argv[3]).read()
uid, gid = int(sys.argv[4]), int(sys.argv[5])
os.setgroups([int(g) for g in sys.argv[6].split(",") if g])
os.setgid(gid)
os.setuid(uid)
assert os.getuid() == uid and os.geteuid() == uid
out = {}
with SmrouteClient(target, timeout=30) as c:
    calls = {
        "GetEpoch": lambda: c.get_epoch(),
        "Health": lambda: c.health(),
        "ApplyFaults": lambda: c.apply_faults([link_down(guid, 1)]),
        "Route": lambda: c.route(),
        "LoadFabric": lambda: c.load_fabric_text(topology),
        "RouteSubnet": lambda: c.stub.RouteSubnet(pb.RouteSubnetRequest(), timeout=30),
    }
    for name, call in calls.items():
        try:
            call()
            out[name] = "OK"
        except grpc.RpcError as err:
            out[name] = err.code().name
            if err.code() == grpc.StatusCode.PERMISSION_DENIED:
                out[name + ".details"] = err.details()
print(json.dumps(out))
"""


def _as_user(target: str, guid: int, *, uid: int, gid: int,
             groups: tuple[int, ...] = ()) -> dict[str, str]:
    r = subprocess.run([sys.executable, "-c", CLIENT, target, str(guid), FIXTURE, str(uid),
                        str(gid), ",".join(map(str, groups))],
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd="/",
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return dict(json.loads(r.stdout))


@pytest.fixture
def sockdir() -> Iterator[Path]:
    """A directory a second uid can reach (pytest's tmp_path is root-only)."""
    if os.geteuid() != 0:
        pytest.skip("running clients as a second uid needs root (setuid in the child)")
    d = Path(tempfile.mkdtemp(prefix="smroute-access-"))
    d.chmod(0o755)
    yield d
    for p in d.iterdir():
        p.unlink()
    d.rmdir()


def _switch_guid(c: SmrouteClient) -> int:
    ep = c.get_epoch(include_down_items=True)
    assert ep.id >= 1
    from smroute.fabric.ibnetdiscover.parse import read_topology

    fab = read_topology(FIXTURE)
    return int(fab.node_guid[int(fab.switches[0])])


def test_second_uid_cannot_mutate_through_the_socket_whatever_its_mode(
        tmp_path: Path, sockdir: Path) -> None:
    sock = sockdir / "smroute.sock"
    d = start_daemon(tmp_path / "d", fabric=FIXTURE, listen=f"unix:{sock}")
    try:
        assert oct(sock.stat().st_mode & 0o777) == "0o660"
        sock.chmod(0o666)  # anyone may connect now; mutations still by credentials
        with SmrouteClient(d.address) as c:
            guid = _switch_guid(c)
            before = c.get_epoch().id
        out = _as_user(d.address, guid, uid=NOBODY, gid=NOBODY)
        assert out["GetEpoch"] == "OK" and out["Health"] == "OK"
        for m in ("ApplyFaults", "Route", "LoadFabric", "RouteSubnet"):
            assert out[m] == "PERMISSION_DENIED", (m, out)
        assert f"uid {NOBODY}" in out["ApplyFaults.details"]
        with SmrouteClient(d.address) as c:  # root: allowed
            assert c.get_epoch().id == before
            assert c.apply_faults([link_down(guid, 1)]).epoch.id > before
        denied = [e for e in d.log_events() if e.get("event") == "request_denied"]
        assert len(denied) == 4
    finally:
        assert d.stop() == 0
    assert not sock.exists()


def test_group_allow_list_primary_and_supplementary(tmp_path: Path, sockdir: Path) -> None:
    sock = sockdir / "smroute.sock"
    cfg = tmp_path / "smroute.yaml"
    cfg.write_text(f"socket_group: {OTHER_GID}\nmutating_users: [root]\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg), fabric=FIXTURE,
                     listen=f"unix:{sock}")
    try:
        assert sock.stat().st_gid == OTHER_GID  # the default allowed group: the socket's
        with SmrouteClient(d.address) as c:
            guid = _switch_guid(c)
        primary = _as_user(d.address, guid, uid=NOBODY, gid=OTHER_GID)
        assert primary["ApplyFaults"] == "OK" and primary["Route"] == "OK", primary
        supplementary = _as_user(d.address, guid, uid=NOBODY, gid=NOBODY, groups=(OTHER_GID,))
        assert supplementary["Route"] == "OK", supplementary
        outside = _as_user(d.address, guid, uid=NOBODY, gid=NOBODY)
        assert outside["GetEpoch"] == "UNAVAILABLE"  # mode 0660: cannot even connect
        sock.chmod(0o666)
        other = _as_user(d.address, guid, uid=NOBODY, gid=NOBODY)
        assert other["GetEpoch"] == "OK" and other["Route"] == "PERMISSION_DENIED", other
    finally:
        d.stop()


def test_plaintext_tcp_refuses_mutations_unless_allowed_insecure(tmp_path: Path) -> None:
    d = start_daemon(tmp_path / "d", fabric=FIXTURE, listen="127.0.0.1:0")
    try:
        with SmrouteClient(d.address) as c:
            assert c.get_epoch().id >= 1
            with pytest.raises(grpc.RpcError) as ei:
                c.route()
            assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "plaintext TCP" in ei.value.details()
    finally:
        d.stop()
    cfg = tmp_path / "insecure.yaml"
    cfg.write_text("allow_insecure_mutations: true\n")
    d = start_daemon(tmp_path / "d2", "--config", str(cfg), fabric=FIXTURE,
                     listen="127.0.0.1:0")
    try:
        with SmrouteClient(d.address) as c:
            assert c.route().id >= 2
        warned = [e for e in d.log_events() if e.get("event") == "config_warning"
                  and "allow_insecure_mutations" in str(e.get("message"))]
        assert warned, "allow_insecure_mutations must warn at every start"
    finally:
        d.stop()


def test_defaults_and_shipped_config_listen_on_the_unix_socket() -> None:
    assert default_config().listen == "unix:/run/smroute/smroute.sock" == DEFAULT_LISTEN
    assert default_config().mutating_users == ("root",)
    assert default_config().mutating_groups is None
    shipped = load_config(ROOT / "deploy" / "smroute.yaml", check_files=False)
    assert shipped.listen == DEFAULT_LISTEN and shipped.allow_insecure_mutations is False
    assert default_target({}) == DEFAULT_LISTEN
    assert default_target({"SMROUTE_DAEMON": "unix:/x.sock"}) == "unix:/x.sock"
    unit = (ROOT / "deploy" / "smroute.service").read_text()
    for line in ("RuntimeDirectory=smroute", "RestartPreventExitStatus=2", "Group=smroute"):
        assert line in unit


def test_metrics_loopback_only_unless_tls() -> None:
    with pytest.raises(ConfigError, match="loopback"):
        parse_config("metrics_listen: '0.0.0.0:9464'\n")
    assert parse_config("metrics_listen: null\n").metrics_listen is None
    cfg = parse_config("metrics_listen: '0.0.0.0:9464'\n"
                       "metrics_tls: {cert: /c.pem, key: /k.pem}\n")
    assert cfg.metrics_tls is not None and str(cfg.metrics_tls.cert) == "/c.pem"
    with pytest.raises(ConfigError, match="mutating_users"):
        parse_config("mutating_users: root\n")


def test_check_config_resolves_user_and_group_names(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("workers: 1\nmutating_users: [root, 0, nosuchuser-x]\n")
    with pytest.raises(ConfigError, match=r"c\.yaml:2: mutating_users: no user named "
                       "'nosuchuser-x'"):
        load_config(cfg)
    cfg.write_text("socket_group: nosuchgroup-x\n")
    with pytest.raises(ConfigError, match="socket_group: no group named 'nosuchgroup-x'"):
        load_config(cfg)
    cfg.write_text("mutating_users: [root]\nmutating_groups: [root, 4242]\nsocket_group: 0\n")
    assert load_config(cfg).mutating_groups == ("root", "4242")


def test_metrics_over_mutual_tls(tmp_path: Path) -> None:
    import ssl
    import urllib.request

    from certs import make_pki

    from smroute.service.metrics import ServiceMetrics, start_metrics_server

    pki = make_pki(tmp_path / "pki", clients=("scraper",))
    tls = pki.tls_config(mutual=True)
    with start_metrics_server("127.0.0.1:0", ServiceMetrics(), tls) as srv:
        assert srv.url.startswith("https://127.0.0.1:")
        ctx = ssl.create_default_context(cafile=str(pki.ca.cert_path))
        ctx.check_hostname = False
        with pytest.raises((ssl.SSLError, OSError)):  # no client certificate: refused
            urllib.request.urlopen(srv.url, context=ctx, timeout=10).read()
        scraper = pki.client("scraper")
        ctx.load_cert_chain(str(scraper.cert_path), str(scraper.key_path))
        body = urllib.request.urlopen(srv.url, context=ctx, timeout=10).read().decode()
        assert "smroute_" in body


def test_relay_knows_each_peer_caps_connections_and_cleans_up(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    from smroute.service.rpc.peercred import CredentialRelay, PeerAllow, PeerCredentials

    errors: list[str] = []
    peers: list[PeerCredentials | None] = []
    relay = CredentialRelay(str(tmp_path / "s.sock"), on_error=errors.append,
                            max_connections=1)

    class Seen(grpc.ServerInterceptor):
        def intercept_service(self, continuation, details):  # type: ignore[no-untyped-def]
            h = continuation(details)

            def run(req, ctx):  # type: ignore[no-untyped-def]
                peers.append(relay.peer_credentials(ctx.peer()))
                return h.unary_unary(req, ctx)
            return grpc.unary_unary_rpc_method_handler(
                run, request_deserializer=h.request_deserializer,
                response_serializer=h.response_serializer) if h and h.unary_unary else h

    server = grpc.server(ThreadPoolExecutor(2), interceptors=[Seen()])
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    server.add_insecure_port(relay.grpc_target)
    server.start()
    relay.start()
    try:
        assert oct((tmp_path / "s.sock").stat().st_mode & 0o777) == "0o660"
        assert oct(os.stat(relay.dir).st_mode & 0o777) == "0o700"  # nobody else reaches gRPC
        req = health_pb2.HealthCheckRequest()
        with grpc.insecure_channel(f"unix:{tmp_path}/s.sock") as ch:
            health_pb2_grpc.HealthStub(ch).Check(req, timeout=10)
            me = peers[-1]
            assert me is not None
            assert me == PeerCredentials(os.getuid(), os.getgid(), os.getpid(), me.groups)
            assert PeerAllow(frozenset({os.getuid()}), frozenset()).allows(me)
            assert not PeerAllow(frozenset({12345}), frozenset({54321})).allows(me)
            assert relay.peer_credentials("unix:") is None
            own = [("grpc.use_local_subchannel_pool", 1)]  # a connection of its own
            with grpc.insecure_channel(f"unix:{tmp_path}/s.sock", options=own) as second, \
                    pytest.raises(grpc.RpcError):  # the one connection allowed is taken
                health_pb2_grpc.HealthStub(second).Check(req, timeout=3)
            assert errors and "1 connections open" in errors[0]
    finally:
        relay.close()
        server.stop(0)
    assert not (tmp_path / "s.sock").exists() and not os.path.exists(relay.dir)
