"""TLS / mutual TLS and the mutation guard with real certificates, a real gRPC
server (a small generic service named smroute.v1.Smroute) and a real client.

Mutating methods record that they ran, so a refused call is also checked not
to have reached the handler."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from certs import Pki, make_ca, make_cert, make_pki

from smroute.service.config import ConfigError, TlsConfig, parse_config
from smroute.service.metrics import ServiceMetrics
from smroute.service.rpc.auth import (
    MUTATING_METHODS,
    SERVICE_NAME,
    MutationGuard,
    client_credentials,
    identities_of,
    identity_of,
    server_credentials,
)

SVC = f"/{SERVICE_NAME}"


class Fake:
    """Handlers of the test service; ``ran`` lists the methods that executed and
    ``who`` the identity each call saw."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.who: list[str | None] = []
        self.lock = threading.Lock()

    def _note(self, name: str, ctx: grpc.ServicerContext) -> None:
        with self.lock:
            self.ran.append(name)
            self.who.append(identity_of(ctx))

    def route(self, req: bytes, ctx: grpc.ServicerContext) -> bytes:
        self._note("Route", ctx)
        return b"routed:" + req

    def apply_faults(self, req: bytes, ctx: grpc.ServicerContext) -> bytes:
        self._note("ApplyFaults", ctx)
        return b"applied"

    def load_fabric(self, chunks: Iterator[bytes], ctx: grpc.ServicerContext) -> bytes:
        self._note("LoadFabric", ctx)
        return b"loaded:%d" % sum(len(c) for c in chunks)

    def get_tables(self, req: bytes, ctx: grpc.ServicerContext) -> Iterator[bytes]:
        self._note("GetTables", ctx)
        for i in range(3):
            yield b"block%d" % i

    def chat(self, reqs: Iterator[bytes], ctx: grpc.ServicerContext) -> Iterator[bytes]:
        self._note("Chat", ctx)
        for r in reqs:
            yield r.upper()

    def whoami(self, req: bytes, ctx: grpc.ServicerContext) -> bytes:
        return "|".join(identities_of(ctx)).encode()


def _handler(fake: Fake) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(SERVICE_NAME, {
        "Route": grpc.unary_unary_rpc_method_handler(fake.route),
        "ApplyFaults": grpc.unary_unary_rpc_method_handler(fake.apply_faults),
        "LoadFabric": grpc.stream_unary_rpc_method_handler(fake.load_fabric),
        "GetTables": grpc.unary_stream_rpc_method_handler(fake.get_tables),
        "Chat": grpc.stream_stream_rpc_method_handler(fake.chat),
        "WhoAmI": grpc.unary_unary_rpc_method_handler(fake.whoami),
    })


@contextlib.contextmanager
def serve(guard: MutationGuard, creds: grpc.ServerCredentials | None = None,
          address: str = "127.0.0.1:0") -> Iterator[tuple[int, Fake]]:
    fake = Fake()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), interceptors=[guard])
    server.add_generic_rpc_handlers((_handler(fake),))
    port = (server.add_secure_port(address, creds) if creds is not None
            else server.add_insecure_port(address))
    assert port > 0
    server.start()
    try:
        yield port, fake
    finally:
        server.stop(grace=None)


class Client:
    """Calls each test method over one channel; returns (value, code, details)."""

    def __init__(self, channel: grpc.Channel):
        self.ch = channel

    def call(self, method: str, req: bytes = b"x") -> tuple[object, grpc.StatusCode, str]:
        try:
            if method == "LoadFabric":
                v: object = self.ch.stream_unary(f"{SVC}/LoadFabric")(iter([b"ab", b"cde"]),
                                                                       timeout=10)
            elif method == "GetTables":
                v = list(self.ch.unary_stream(f"{SVC}/GetTables")(req, timeout=10))
            elif method == "Chat":
                v = list(self.ch.stream_stream(f"{SVC}/Chat")(iter([b"a", b"b"]), timeout=10))
            else:
                v = self.ch.unary_unary(f"{SVC}/{method}")(req, timeout=10)
        except grpc.RpcError as err:
            return None, err.code(), err.details() or ""
        return v, grpc.StatusCode.OK, ""

    def close(self) -> None:
        self.ch.close()


@contextlib.contextmanager
def tls_client(pki: Pki, port: int, who: str | None, host: str = "localhost"
               ) -> Iterator[Client]:
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    c = Client(grpc.secure_channel(target, pki.client_credentials(who)))
    try:
        yield c
    finally:
        c.close()


@contextlib.contextmanager
def plain_client(port: int) -> Iterator[Client]:
    c = Client(grpc.insecure_channel(f"127.0.0.1:{port}"))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    p = make_pki(tmp_path_factory.mktemp("pki"), clients=("operator", "intruder"))
    p.client("bridge", dns=("bridge.fabric",), uris=("spiffe://fabric/bridge",))
    return p


OK = grpc.StatusCode.OK
DENIED = grpc.StatusCode.PERMISSION_DENIED
UNAUTH = grpc.StatusCode.UNAUTHENTICATED


def test_mutating_methods():
    assert {
        "/smroute.v1.Smroute/LoadFabric", "/smroute.v1.Smroute/Route",
        "/smroute.v1.Smroute/ApplyFaults", "/smroute.v1.Smroute/RouteSubnet",
    } == MUTATING_METHODS


def test_mutual_tls_allowed_and_denied_identities(pki):
    denials: list[tuple[str, str, str]] = []
    metrics = ServiceMetrics()

    def on_deny(method: str, code: grpc.StatusCode, msg: str) -> None:
        denials.append((method, code.name, msg))
        metrics.request(method.rsplit("/", 1)[-1], code.name)

    guard = MutationGuard(["operator"], tls=True, loopback_only=True, allow_insecure=False,
                          on_deny=on_deny)
    with serve(guard, server_credentials(pki.tls_config(mutual=True))) as (port, fake):
        with tls_client(pki, port, "operator") as op:
            assert op.call("Route", b"1") == (b"routed:1", OK, "")
            assert op.call("ApplyFaults")[1] == OK
            assert op.call("LoadFabric") == (b"loaded:5", OK, "")
            assert op.call("GetTables")[1] == OK
            assert op.call("WhoAmI")[0] == b"operator"
        assert fake.ran == ["Route", "ApplyFaults", "LoadFabric", "GetTables"]
        assert fake.who == ["operator"] * 4
        fake.ran.clear()

        with tls_client(pki, port, "intruder") as bad:
            for method in ("Route", "ApplyFaults", "LoadFabric"):
                v, code, details = bad.call(method)
                assert (v, code) == (None, DENIED), method
                assert "'intruder' may not call " + method in details
            # read-only methods stay open to any authenticated client
            assert bad.call("GetTables") == ([b"block0", b"block1", b"block2"], OK, "")
            assert bad.call("WhoAmI")[0] == b"intruder"
        assert fake.ran == ["GetTables"]  # no refused call reached its handler
        assert [(m.rsplit("/", 1)[1], c) for m, c, _ in denials] == [
            ("Route", "PERMISSION_DENIED"), ("ApplyFaults", "PERMISSION_DENIED"),
            ("LoadFabric", "PERMISSION_DENIED")]
        assert metrics.value("smroute_requests_total", method="Route",
                             code="PERMISSION_DENIED") == 1.0


def test_mutual_tls_without_or_with_foreign_certificate_fails_handshake(pki, tmp_path):
    guard = MutationGuard(["operator"], tls=True, loopback_only=True, allow_insecure=False)
    rogue_ca = make_ca(tmp_path, "rogue-ca")
    rogue = make_cert(rogue_ca, tmp_path, "operator")  # right name, wrong CA
    expired = make_cert(pki.ca, tmp_path, "operator", file_name="expired", expired=True)
    with serve(guard, server_credentials(pki.tls_config(mutual=True))) as (port, fake):
        with tls_client(pki, port, None) as anon:
            for method in ("Route", "GetTables", "WhoAmI"):
                v, code, _ = anon.call(method)
                assert v is None and code in (grpc.StatusCode.UNAVAILABLE, UNAUTH), code
        for ck in (rogue, expired):
            creds = grpc.ssl_channel_credentials(pki.ca.cert_pem, ck.key_pem, ck.cert_pem)
            c = Client(grpc.secure_channel(f"localhost:{port}", creds))
            v, code, _ = c.call("Route")
            c.close()
            assert v is None and code in (grpc.StatusCode.UNAVAILABLE, UNAUTH), ck.name
        # a plaintext client cannot talk to the TLS port at all
        with plain_client(port) as p:
            assert p.call("GetTables")[1] == grpc.StatusCode.UNAVAILABLE
        assert fake.ran == []


def test_identities_include_san_dns_and_uri(pki):
    guard = MutationGuard(["spiffe://fabric/bridge"], tls=True, loopback_only=False,
                          allow_insecure=False)
    with serve(guard, server_credentials(pki.tls_config(mutual=True))) as (port, fake):
        with tls_client(pki, port, "bridge") as c:
            assert c.call("WhoAmI")[0] == b"bridge|bridge.fabric|spiffe://fabric/bridge"
            assert c.call("Route")[1] == OK
        with tls_client(pki, port, "operator") as c:
            v, code, details = c.call("Route")
            assert code == DENIED and "names operator" in details
    guard2 = MutationGuard(["bridge.fabric"], tls=True, loopback_only=False, allow_insecure=False)
    with serve(guard2, server_credentials(pki.tls_config(mutual=True))) as (port, fake), \
            tls_client(pki, port, "bridge") as c:
        assert c.call("ApplyFaults")[1] == OK
        assert fake.who == ["bridge"]


def test_server_cert_covers_localhost_and_loopback_ips(pki):
    guard = MutationGuard([], tls=True, loopback_only=True, allow_insecure=False)
    with serve(guard, server_credentials(pki.tls_config(mutual=True))) as (port, _):
        for host in ("localhost", "127.0.0.1"):
            with tls_client(pki, port, "operator", host=host) as c:
                assert c.call("WhoAmI")[1] == OK, host
    import socket

    if socket.has_ipv6:
        try:
            ctx = serve(guard, server_credentials(pki.tls_config(mutual=True)), "[::1]:0")
            port, _ = ctx.__enter__()
        except RuntimeError as err:  # grpc could not bind ::1
            pytest.skip(f"no IPv6 loopback: {err}")
        try:
            with tls_client(pki, port, "operator", host="::1") as c:
                assert c.call("WhoAmI")[1] == OK
        finally:
            ctx.__exit__(None, None, None)


def test_stream_stream_mutating_method_is_guarded(pki):
    methods = MUTATING_METHODS | {f"{SVC}/Chat"}
    guard = MutationGuard(["operator"], tls=True, loopback_only=True, allow_insecure=False,
                          mutating_methods=methods)
    with serve(guard, server_credentials(pki.tls_config(mutual=True))) as (port, fake):
        with tls_client(pki, port, "operator") as c:
            assert c.call("Chat") == ([b"A", b"B"], OK, "")
        with tls_client(pki, port, "intruder") as c:
            assert c.call("Chat")[1] == DENIED
        assert fake.ran == ["Chat"]


def test_tls_without_client_certs(pki):
    # guard with identities on a server-only TLS listener: no certificate -> UNAUTHENTICATED
    # (the config refuses this combination; the guard is still safe if built by hand)
    guard = MutationGuard(["operator"], tls=True, loopback_only=False, allow_insecure=False)
    with serve(guard, server_credentials(pki.tls_config(mutual=False))) as (port, fake):
        with tls_client(pki, port, "operator") as c:  # certificate not asked for
            v, code, details = c.call("Route")
            assert code == UNAUTH and "needs a client certificate" in details
            assert c.call("GetTables")[1] == OK
        assert fake.ran == ["GetTables"]
    # empty identity list: any client that completed the TLS handshake may mutate
    # TLS without client certificates is not enough to mutate over TCP
    guard = MutationGuard([], tls=True, loopback_only=False, allow_insecure=False)
    with serve(guard, server_credentials(pki.tls_config(mutual=False))) as (port, fake), \
            tls_client(pki, port, None) as c:
        assert c.call("Route")[1] == UNAUTH
        assert c.call("GetTables")[1] == OK
        assert fake.ran == ["GetTables"]


def test_plaintext_loopback_and_network_listeners():
    # plaintext TCP, loopback or not: mutations refused (any local user could
    # connect); the Unix socket is where local clients mutate
    for loopback in (True, False):
        guard = MutationGuard([], tls=False, loopback_only=loopback, allow_insecure=False)
        with serve(guard) as (port, fake), plain_client(port) as c:
            for method in ("Route", "ApplyFaults", "LoadFabric"):
                v, code, details = c.call(method)
                assert code == DENIED and "refused over plaintext TCP" in details
            assert c.call("GetTables")[1] == OK
            assert fake.ran == ["GetTables"]
    # ... unless the operator explicitly allowed insecure mutations
    guard = MutationGuard([], tls=False, loopback_only=False, allow_insecure=True)
    with serve(guard) as (port, fake), plain_client(port) as c:
        assert c.call("ApplyFaults")[1] == OK


def test_guard_from_config(pki, tmp_path):
    """The path the daemon takes: config text -> TlsConfig + guard -> server."""
    text = "listen: '127.0.0.1:0'\nmutating_identities: [operator]\n" + pki.tls_yaml()
    cfg = parse_config(text, "cfg.yaml")
    assert cfg.tls is not None and cfg.tls.mutual and cfg.warnings() == ()
    guard = MutationGuard(cfg.mutating_identities, tls=cfg.tls is not None,
                          loopback_only=cfg.loopback_only,
                          allow_insecure=cfg.allow_insecure_mutations)
    with serve(guard, server_credentials(cfg.tls), cfg.listen_address.grpc_address) as (p, _):
        with tls_client(pki, p, "operator") as c:
            assert c.call("Route")[1] == OK
        with tls_client(pki, p, "intruder") as c:
            assert c.call("Route")[1] == DENIED
        # auth.client_credentials builds the same client from PEM files
        op = pki.client("operator")
        creds = client_credentials(pki.ca.cert_path, op.cert_path, op.key_path)
        c = Client(grpc.secure_channel(f"localhost:{p}", creds))
        assert c.call("WhoAmI")[0] == b"operator"
        c.close()


def test_server_credentials_errors(pki, tmp_path: Path):
    good = pki.tls_config(mutual=True)
    with pytest.raises(ConfigError, match=r"tls.cert: cannot read .*No such file"):
        server_credentials(TlsConfig(tmp_path / "none.crt", good.key))
    junk = tmp_path / "junk.pem"
    junk.write_text("hello\n")
    with pytest.raises(ConfigError, match=r"tls.key: .*junk.pem holds no PEM PRIVATE KEY"):
        server_credentials(TlsConfig(good.cert, junk))
    # key and certificate swapped
    with pytest.raises(ConfigError, match="tls.cert: .* holds no PEM CERTIFICATE"):
        server_credentials(TlsConfig(good.key, good.cert))
    with pytest.raises(ConfigError, match="tls.client_ca: .*holds no PEM CERTIFICATE"):
        server_credentials(TlsConfig(good.cert, good.key, junk, True))
    enc = tmp_path / "enc.key"
    enc.write_text("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n"
                   "-----END ENCRYPTED PRIVATE KEY-----\n")
    with pytest.raises(ConfigError, match="encrypted private key"):
        server_credentials(TlsConfig(good.cert, enc))
    with pytest.raises(ConfigError, match="both a client certificate and its key"):
        client_credentials(pki.ca.cert_path, pki.client("operator").cert_path, None)


def test_check_tls_catches_unusable_files(pki, tmp_path: Path):
    import datetime as dt

    from smroute.service.config import load_config
    from smroute.service.rpc.auth import check_tls

    good = pki.tls_config(mutual=True)
    assert check_tls(good) == ()
    # a key that belongs to another certificate: gRPC would only say "Failed to bind"
    wrong = TlsConfig(good.cert, pki.client("operator").key_path, good.client_ca, True)
    with pytest.raises(ConfigError, match="tls.key: .*does not belong to tls.cert"):
        check_tls(wrong)
    with pytest.raises(ConfigError, match="tls.key: .*does not belong to tls.cert"):
        server_credentials(wrong)
    # dates, with the clock passed in
    end = pki.server.cert.not_valid_after_utc
    start = pki.server.cert.not_valid_before_utc
    (w,) = check_tls(good, now=end - dt.timedelta(days=3))
    assert w.startswith("tls.cert: certificate CN=localhost expires in 3.0 days")
    with pytest.raises(ConfigError, match="tls.cert: certificate CN=localhost expired on"):
        check_tls(good, now=end + dt.timedelta(seconds=1))
    with pytest.raises(ConfigError, match="is not valid before"):
        check_tls(good, now=start - dt.timedelta(minutes=1))
    expired = make_cert(pki.ca, tmp_path, "localhost", server=True, dns=("localhost",),
                        file_name="old-server", expired=True)
    with pytest.raises(ConfigError, match="expired on"):
        server_credentials(TlsConfig(expired.cert_path, expired.key_path))
    # a CA file whose PEM block is garbage
    bad_ca = tmp_path / "bad-ca.crt"
    bad_ca.write_text("-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n")
    with pytest.raises(ConfigError, match="tls.client_ca: .*not a usable CA bundle"):
        check_tls(TlsConfig(good.cert, good.key, bad_ca, True))
    # load_config runs the same checks and names the line
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"workers: 1\ntls:\n  cert: {good.cert}\n"
                   f"  key: {pki.client('operator').key_path}\n")
    with pytest.raises(ConfigError) as ei:
        load_config(cfg)
    assert ei.value.key == "tls.key" and ei.value.line == 4
    assert str(ei.value).startswith(f"{cfg}:4: tls.key: ")
    assert load_config(cfg, check_files=False).tls is not None
    cfg.write_text(pki.tls_yaml(mutual=True))
    assert load_config(cfg).tls == good


def test_certificate_rotation_without_restart(pki, tmp_path: Path):
    """ReloadableServerCredentials: after reload() new handshakes use the new
    server certificate and client CA; the old CA's clients are refused."""
    from smroute.service.rpc.auth import ReloadableServerCredentials

    pki2 = make_pki(tmp_path / "pki2", clients=("operator",))
    creds = ReloadableServerCredentials(pki.tls_config(mutual=True))
    guard = MutationGuard(["operator"], tls=True, loopback_only=True, allow_insecure=False)
    with serve(guard, creds.credentials) as (port, fake):
        with tls_client(pki, port, "operator") as c:
            assert c.call("Route")[1] == OK
        with tls_client(pki2, port, "operator") as c:  # new CA not trusted yet
            assert c.call("WhoAmI")[1] in (grpc.StatusCode.UNAVAILABLE, UNAUTH)
        assert creds.reload(pki2.tls_config(mutual=True)) == ()
        with tls_client(pki2, port, "operator") as c:
            assert c.call("Route")[1] == OK
        with tls_client(pki, port, "operator") as c:  # old CA's client: refused now
            assert c.call("WhoAmI")[1] in (grpc.StatusCode.UNAVAILABLE, UNAUTH)
        # bad reloads change nothing
        with pytest.raises(ConfigError, match="needs a restart"):
            creds.reload(pki2.tls_config(mutual=False))
        wrong = TlsConfig(pki2.server.cert_path, pki.server.key_path, pki2.ca.cert_path, True)
        with pytest.raises(ConfigError, match="does not belong"):
            creds.reload(wrong)
        with tls_client(pki2, port, "operator") as c:
            assert c.call("ApplyFaults")[1] == OK
        assert creds.tls == pki2.tls_config(mutual=True)
        assert fake.ran == ["Route", "Route", "ApplyFaults"]


def _doc_block(marker: str) -> str:
    """The first ```sh block after ``marker`` in deploy/OPERATORS.md."""
    import re

    text = (Path(__file__).resolve().parent.parent / "deploy" / "OPERATORS.md").read_text()
    m = re.search(r"```sh\n(.*?)```", text[text.index(marker):], re.S)
    assert m, marker
    return m.group(1)


def test_operator_guide_openssl_commands_work(tmp_path):
    """Run the guide's openssl commands, serve with their files (config as in the
    guide), and check the bridge may mutate, the operator may only read, and the
    guide's s_client check passes."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl command not installed")
    r = subprocess.run(["bash", "-euc", _doc_block("<!-- tested:")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "operator.crt: OK" in r.stdout
    cfg = parse_config(
        "tls:\n  cert: server.crt\n  key: server.key\n  client_ca: ca.crt\n"
        "  require_client_cert: true\nmutating_identities: [opensm-bridge]\n",
        "guide.yaml", base_dir=tmp_path)
    assert cfg.tls is not None
    guard = MutationGuard(cfg.mutating_identities, tls=True, loopback_only=cfg.loopback_only,
                          allow_insecure=False)

    def client(name: str) -> Client:
        creds = client_credentials(tmp_path / "ca.crt", tmp_path / f"{name}.crt",
                                   tmp_path / f"{name}.key")
        return Client(grpc.secure_channel(f"localhost:{port}", creds))

    with serve(guard, server_credentials(cfg.tls)) as (port, fake):
        c = client("opensm-bridge")
        assert c.call("ApplyFaults")[1] == OK
        assert c.call("WhoAmI")[0] == b"opensm-bridge"  # CN and SAN DNS, deduplicated
        c.close()
        c = client("operator")
        assert c.call("GetTables")[1] == OK
        v, code, details = c.call("Route")
        assert code == DENIED and "'operator' may not call Route" in details
        c.close()
        assert fake.ran == ["ApplyFaults", "GetTables"]
        check = _doc_block("Check a handshake by hand").replace("50051", str(port))
        r = subprocess.run(["bash", "-c", check], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
        assert "Verify return code: 0 (ok)" in r.stdout, r.stdout + r.stderr
        assert "ALPN protocol: h2" in r.stdout


# --------------------------------------------------------------------------- the real daemon


def _scrape(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


def test_real_daemon_with_mutual_tls(pki, tmp_path):
    """``smroute serve`` with the config's mutual TLS: the allowed client routes
    and applies faults, another certificate only reads, no certificate fails the
    handshake; denials are logged and counted; SIGHUP adds an identity."""
    import signal
    import time

    from service_daemon import ROOT, start_daemon

    from smroute.service.rpc.client import SmrouteClient, link_down

    fixture = ROOT / "fixtures" / "pgft-3-2.2.3-1.2.2-1.2.1.topo"
    cfg_path = tmp_path / "smroute.yaml"
    cfg_text = (f"fabric: {fixture}\nmutating_identities: [operator]\n"
                f"fabric_dirs: [{fixture.parent}]\n" + pki.tls_yaml(mutual=True))
    cfg_path.write_text(cfg_text)
    d = start_daemon(tmp_path / "d", "--config", str(cfg_path), listen="127.0.0.1:0")
    port = d.address.rsplit(":", 1)[1]
    target = f"localhost:{port}"
    try:
        with SmrouteClient(target, credentials=pki.client_credentials("operator"),
                           timeout=60) as op:
            assert op.load_fabric_path(str(fixture)).switches > 0  # inside fabric_dirs
            ep = op.route()
            assert ep.id >= 2
            snap = op.tables()
            assert snap.epoch == ep.id
            from smroute.fabric.ibnetdiscover.parse import read_topology

            f = read_topology(str(fixture))
            a = int(f.link_a[0])
            guid, pnum = int(f.node_guid[f.port_node[a]]), int(f.port_num[a])
            res = op.apply_faults([link_down(guid, pnum)])
            assert res.committed and res.epoch.id > ep.id and res.epoch.down_links == 1
            ep = res.epoch
        with SmrouteClient(target, credentials=pki.client_credentials("intruder"),
                           timeout=60) as bad:
            assert bad.tables().epoch == ep.id  # read-only: allowed
            assert bad.get_epoch().id == ep.id
            for call in (lambda: bad.route(), lambda: bad.load_fabric_path(str(fixture)),
                         lambda: bad.apply_faults([link_down(guid, pnum)], dry_run=True)):
                with pytest.raises(grpc.RpcError) as ei:
                    call()
                assert ei.value.code() == DENIED
                assert "'intruder' may not call" in (ei.value.details() or "")
            assert bad.get_epoch().id == ep.id  # nothing changed
        with SmrouteClient(target, credentials=pki.client_credentials(None), timeout=10) as anon:
            with pytest.raises(grpc.RpcError) as ei:
                anon.get_epoch()
            assert ei.value.code() in (grpc.StatusCode.UNAVAILABLE, UNAUTH)
        with SmrouteClient(d.address, timeout=10) as plain:  # plaintext to a TLS port
            with pytest.raises(grpc.RpcError) as ei:
                plain.get_epoch()
            assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
        assert d.metrics
        metrics = _scrape(d.metrics)
        assert 'smroute_requests_total{code="PERMISSION_DENIED",method="Route"} 1.0' in metrics
        assert 'smroute_requests_total{code="OK",method="Route"} 1.0' in metrics
        assert 'smroute_fault_events_total{kind="link_down"} 1.0' in metrics
        denied = [e for e in d.log_events() if e.get("event") == "request_denied"]
        assert len(denied) == 3 and all("intruder" in str(e.get("message")) for e in denied)

        # SIGHUP with the intruder added: now it may route (same TLS settings)
        cfg_path.write_text(cfg_text.replace("[operator]", "[operator, intruder]"))
        d.signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while not any(e.get("event") == "reloaded" for e in d.log_events()):
            assert time.monotonic() < deadline, "no reload logged"
            time.sleep(0.1)
        with SmrouteClient(target, credentials=pki.client_credentials("intruder"),
                           timeout=60) as now_ok:
            assert now_ok.route().id > ep.id
    finally:
        rc = d.stop()
    assert rc == 0


def test_real_daemon_survives_reload_that_enables_mutual_tls(pki, tmp_path):
    """A valid new config that turns on mutual TLS + mutating_identities cannot
    take effect without a restart (new listener); SIGHUP must keep the daemon
    serving with its old settings, not kill it."""
    import signal
    import time

    from service_daemon import ROOT, start_daemon

    from smroute.service.rpc.client import SmrouteClient

    fixture = ROOT / "fixtures" / "pgft-3-2.2.3-1.2.2-1.2.1.topo"
    cfg_path = tmp_path / "smroute.yaml"
    cfg_path.write_text(f"workers: 1\nfabric: {fixture}\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg_path))
    try:
        new = (f"workers: 1\nfabric: {fixture}\nmutating_identities: [operator]\n"
               + pki.tls_yaml(mutual=True))
        cfg_path.write_text(new)
        parse_config(new)  # valid on its own
        d.signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while not any(e.get("event") in ("reloaded", "reload_failed") for e in d.log_events()):
            assert d.proc.poll() is None, "daemon died on SIGHUP:\n" + d.log_path.read_text()
            assert time.monotonic() < deadline, "no reload logged"
            time.sleep(0.1)
        (ev,) = [e for e in d.log_events() if e.get("event") in ("reloaded", "reload_failed")]
        # valid, applied in part: TLS (a new listener) waits for a restart
        assert ev["event"] == "reloaded" and "tls" in (ev.get("needs_restart") or []), ev
        with SmrouteClient(d.address, timeout=30) as c:  # still plaintext, still serving
            assert c.health() == "SERVING"
            assert c.route().id >= 1  # the Unix socket: root may still mutate
    finally:
        rc = d.stop()
    assert rc == 0


def test_check_config_cli_checks_tls_files(pki, tmp_path, capsys):
    from smroute.cli.main import main as cli_main

    soon = make_cert(pki.ca, tmp_path, "localhost", server=True, dns=("localhost",),
                     file_name="soon", days=10)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"tls:\n  cert: {soon.cert_path}\n  key: {soon.key_path}\n")
    assert cli_main(["check-config", str(cfg)]) == 0
    err = capsys.readouterr().err
    import re

    assert re.search(r"warning: tls.cert: certificate CN=localhost expires in (9\.\d|10\.0) days",
                     err), err
    cfg.write_text(f"tls:\n  cert: {soon.cert_path}\n  key: {pki.server.key_path}\n")
    assert cli_main(["check-config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert f"{cfg}:3: tls.key: " in err and "does not belong to tls.cert" in err
    assert cli_main(["check-config", "--no-file-check", str(cfg)]) == 0


def test_real_daemon_reload_that_drops_tls_keeps_identity_check(pki, tmp_path):
    """Turning TLS off needs a restart; until then the mutual-TLS listener keeps
    running, and so must its identity check: a reload must not widen who may
    mutate (the new file's empty mutating_identities belongs to the plaintext
    listener that does not exist yet)."""
    import signal
    import time

    from service_daemon import ROOT, start_daemon

    from smroute.service.rpc.client import SmrouteClient

    fixture = ROOT / "fixtures" / "pgft-3-2.2.3-1.2.2-1.2.1.topo"
    cfg_path = tmp_path / "smroute.yaml"
    cfg_path.write_text(f"fabric: {fixture}\nmutating_identities: [operator]\n"
                        + pki.tls_yaml(mutual=True))
    d = start_daemon(tmp_path / "d", "--config", str(cfg_path), listen="127.0.0.1:0")
    target = f"localhost:{d.address.rsplit(':', 1)[1]}"
    try:
        cfg_path.write_text(f"fabric: {fixture}\n")  # plaintext loopback, no identities
        d.signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while not any(e.get("event") in ("reloaded", "reload_failed") for e in d.log_events()):
            assert time.monotonic() < deadline, "no reload logged"
            time.sleep(0.1)
        with SmrouteClient(target, credentials=pki.client_credentials("intruder"),
                           timeout=60) as bad:
            assert bad.get_epoch().id >= 1  # still the mutual-TLS listener
            with pytest.raises(grpc.RpcError) as ei:
                bad.route()
            assert ei.value.code() == DENIED
    finally:
        rc = d.stop()
    assert rc == 0
