"""SelectLids on a real ``smroute serve`` process (loopback gRPC), on the
committed fixture that real ibsim + OpenSM + ibnetdiscover produced with LMC 2.

The DLIDs served are checked by tracing them through the tables the same
daemon serves (GetTables), stage by stage."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from lids_trace import recount
from service_daemon import ROOT, DaemonProc, start_daemon

from smroute.analysis.paths import RoutingView, routing_view
from smroute.analysis.patterns import Pattern, cps, shifts
from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.service.rpc.client import SmrouteClient, link_down, link_up, pb

FIXTURE = str(ROOT / "fixtures" / "pgft-3-2.2.3-lmc2.topo")


@pytest.fixture(scope="module")
def fabric() -> Fabric:
    return read_topology(FIXTURE)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    d = start_daemon(tmp_path_factory.mktemp("lids-daemon"), "--lmc", "2",
                     "--coalesce-ms", "20", fabric=FIXTURE)
    yield d
    assert d.stop() == 0


@pytest.fixture()
def client(daemon: DaemonProc) -> Iterator[SmrouteClient]:
    c = SmrouteClient(daemon.address, timeout=60)
    yield c
    c.close()


def served_view(client: SmrouteClient, fabric: Fabric, epoch: int) -> RoutingView:
    return routing_view(fabric, client.tables(epoch).tables)


def check(resp: pb.SelectLidsResponse, view: RoutingView, ranks: np.ndarray,
          pattern: Pattern) -> np.ndarray:
    """Trace every flow with the served DLIDs; returns the per-stage HSD."""
    n = len(ranks)
    assert resp.n_ranks == n and len(resp.dlids) == n * n
    dl = np.array(resp.dlids, dtype=np.int64).reshape(n, n)
    assert (np.diag(dl) == 0).all()
    off = dl - view.ep_lid[ranks][None, :]
    np.fill_diagonal(off, 0)
    assert ((off >= 0) & (off < (1 << resp.lmc))).all()
    hsd, bad = recount(view, ranks, pattern, dl)
    assert not bad.any()
    return hsd


def test_select_lids_by_guid_and_description(client: SmrouteClient, fabric: Fabric) -> None:
    ep = client.get_epoch()
    assert ep.lmc == 2
    view = served_view(client, fabric, ep.id)
    rng = np.random.default_rng(4)
    ranks = rng.permutation(view.n_endports)
    hosts = [f"{int(g):#018x}" for g in view.ep_guid[ranks].tolist()]
    resp = client.stub.SelectLids(pb.SelectLidsRequest(hosts=hosts, per_stage=True),
                                  timeout=60)
    assert resp.epoch == ep.id and resp.lmc == 2
    hsd = check(resp, view, ranks, shifts(len(ranks)))
    assert [s.index for s in resp.stages] == list(range(len(ranks) - 1))
    assert [s.max_flows for s in resp.stages] == hsd.tolist()
    assert resp.hsd_max == hsd.max() and resp.hsd_avg == pytest.approx(hsd.mean())
    assert resp.hsd_avg <= resp.hsd_base_avg and resp.hsd_base_max >= 1
    # node descriptions name the same hosts (the fixture's are unique)
    descs = [fabric.node_desc[int(n)] for n in view.ep_node[ranks].tolist()]
    r2 = client.stub.SelectLids(pb.SelectLidsRequest(hosts=descs), timeout=60)
    assert list(r2.dlids) == list(resp.dlids)
    assert len(r2.stages) == 0


@pytest.mark.parametrize("name", ["recursive_doubling", "ring", "binomial"])
def test_collectives(client: SmrouteClient, fabric: Fabric, name: str) -> None:
    ep = client.get_epoch()
    view = served_view(client, fabric, ep.id)
    ranks = np.arange(view.n_endports)[::-1].copy()
    hosts = [f"{int(g):#x}" for g in view.ep_guid[ranks].tolist()]
    resp = client.stub.SelectLids(
        pb.SelectLidsRequest(hosts=hosts, pattern=name, per_stage=True), timeout=60)
    hsd = check(resp, view, ranks, cps(name.replace("_", "-"), len(ranks)))
    assert [s.max_flows for s in resp.stages] == hsd.tolist()


def test_after_a_link_fault(client: SmrouteClient, fabric: Fabric) -> None:
    """On the rerouted (degraded) epoch every flow still has a delivered DLID."""
    sw = fabric.node_type == NodeType.SWITCH
    li = int(np.flatnonzero(sw[fabric.port_node[fabric.link_a]]
                            & sw[fabric.port_node[fabric.link_b]])[0])
    a = int(fabric.link_a[li])
    guid, port = int(fabric.node_guid[fabric.port_node[a]]), int(fabric.port_num[a])
    out = client.apply_faults([link_down(guid, port)])
    try:
        assert out.committed
        view = served_view(client, fabric, out.epoch.id)
        ranks = np.arange(view.n_endports)
        hosts = [f"{int(g):#x}" for g in view.ep_guid.tolist()]
        resp = client.stub.SelectLids(pb.SelectLidsRequest(hosts=hosts, epoch=out.epoch.id),
                                      timeout=60)
        assert resp.epoch == out.epoch.id
        hsd = check(resp, view, ranks, shifts(len(ranks)))
        assert resp.hsd_max == hsd.max()
    finally:
        client.apply_faults([link_up(guid, port)])


def test_bad_requests(client: SmrouteClient, fabric: Fabric, daemon: DaemonProc) -> None:
    view = served_view(client, fabric, client.get_epoch().id)
    g = [f"{int(x):#x}" for x in view.ep_guid[:3].tolist()]

    def code(req: pb.SelectLidsRequest) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(grpc.RpcError) as ei:
            client.stub.SelectLids(req, timeout=60)
        return ei.value.code(), ei.value.details()

    c, m = code(pb.SelectLidsRequest(hosts=[g[0], "nobody"]))
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "request.hosts:2:" in m
    c, m = code(pb.SelectLidsRequest(hosts=[g[0], g[1], g[0]]))
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "listed twice (first on line 1)" in m
    c, m = code(pb.SelectLidsRequest(hosts=g, pattern="zigzag"))
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "zigzag" in m
    c, m = code(pb.SelectLidsRequest())
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "no host" in m
    c, m = code(pb.SelectLidsRequest(hosts=g, epoch=99999))
    assert c == grpc.StatusCode.NOT_FOUND
    c, m = code(pb.SelectLidsRequest(hosts=["0x1"] * 2049))
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "at most 2048" in m
    assert client.health() == "SERVING"


def test_lmc_0_epoch_gives_base_lids(client: SmrouteClient, fabric: Fabric,
                                     tmp_path: Path) -> None:
    client.route(lmc=0)
    try:
        ep = client.get_epoch()
        view = served_view(client, fabric, ep.id)
        hosts = [f"{int(x):#x}" for x in view.ep_guid.tolist()]
        resp = client.stub.SelectLids(pb.SelectLidsRequest(hosts=hosts), timeout=60)
        assert resp.lmc == 0
        n = len(hosts)
        dl = np.array(resp.dlids).reshape(n, n)
        base = np.broadcast_to(view.ep_lid[None, :], (n, n)).copy()
        np.fill_diagonal(base, 0)
        assert np.array_equal(dl, base)
        assert resp.hsd_avg == resp.hsd_base_avg
    finally:
        client.route(lmc=2)
