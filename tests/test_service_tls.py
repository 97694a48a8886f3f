"""A real daemon with mutual TLS: only allowed client certificates may call
mutating RPCs; read-only RPCs work for any client the CA vouches for; a client
without a certificate or from another CA cannot even connect; SIGHUP rotates
the server's certificates (new CA) without a restart."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import grpc
import pytest
from certs import make_ca, make_cert, make_pki
from service_daemon import ROOT, start_daemon

from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.fabric.model.base import NodeType
from smroute.service.rpc.client import SmrouteClient, link_down, link_up

FIXTURE = str(ROOT / "fixtures" / "pgft-3-2.2.3-1.2.2-1.2.1.topo")


def test_mutual_tls_restricts_mutations(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki", clients=("operator", "viewer"))
    cfg = tmp_path / "smroute.yaml"
    cfg.write_text(f"fabric: {FIXTURE}\n" + pki.tls_yaml(mutual=True)
                   + "mutating_identities: [operator]\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg), listen="127.0.0.1:0")
    try:
        port = d.address.rsplit(":", 1)[1]
        target = f"localhost:{port}"
        f = read_topology(FIXTURE)
        sw = f.node_type == NodeType.SWITCH
        li = int([i for i in range(f.n_links)
                  if sw[f.port_node[f.link_a[i]]] and sw[f.port_node[f.link_b[i]]]][0])
        a = int(f.link_a[li])
        ev = link_down(int(f.node_guid[f.port_node[a]]), int(f.port_num[a]))

        with SmrouteClient(target, credentials=pki.client_credentials("viewer")) as viewer:
            assert viewer.get_epoch().id == 1
            assert viewer.tables().epoch == 1  # reading is allowed
            with pytest.raises(grpc.RpcError) as ei:
                viewer.apply_faults([ev])
            assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "viewer" in ei.value.details()
            with pytest.raises(grpc.RpcError) as ei:
                viewer.route()
            assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert viewer.get_epoch().id == 1  # nothing was committed

        with SmrouteClient(target, credentials=pki.client_credentials("operator")) as op:
            out = op.apply_faults([ev])
            assert out.committed and out.epoch.id == 2
            op.apply_faults([link_up(ev.node_guid, ev.port)])

        # no client certificate: the handshake itself fails (require_client_cert)
        with SmrouteClient(target, credentials=pki.client_credentials(None), timeout=10) as anon:
            with pytest.raises(grpc.RpcError) as ei:
                anon.get_epoch()
            assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
        # a certificate named "operator" but from another CA is rejected too
        rogue_ca = make_ca(tmp_path / "rogue", "rogue-ca")
        rogue = make_cert(rogue_ca, tmp_path / "rogue", "operator")
        creds = grpc.ssl_channel_credentials(root_certificates=pki.ca.cert_pem,
                                             private_key=rogue.key_pem,
                                             certificate_chain=rogue.cert_pem)
        with SmrouteClient(target, credentials=creds, timeout=10) as bad:
            with pytest.raises(grpc.RpcError) as ei:
                bad.apply_faults([ev])
            assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
        assert d.proc.poll() is None

        # certificate rotation on SIGHUP: a new CA, server and client certificates
        pki2 = make_pki(tmp_path / "pki2", clients=("operator",))
        cfg.write_text(f"fabric: {FIXTURE}\n" + pki2.tls_yaml(mutual=True)
                       + "mutating_identities: [operator]\n")
        d.signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while not any(e.get("event") == "tls_reloaded" for e in d.log_events()):
            assert time.monotonic() < deadline, d.log_path.read_text()[-2000:]
            time.sleep(0.05)
        with SmrouteClient(target, credentials=pki2.client_credentials("operator")) as op2:
            assert op2.apply_faults([ev]).committed
            op2.apply_faults([link_up(ev.node_guid, ev.port)])
        with SmrouteClient(target, credentials=pki.client_credentials("operator"),
                           timeout=10) as old:
            with pytest.raises(grpc.RpcError) as ei:
                old.get_epoch()  # trusts only the old CA: the new server cert fails
            assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        assert d.stop() == 0
