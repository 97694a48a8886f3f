"""The daemon's ``RouteSubnet`` (what the OpenSM plugin calls), through a real
``smroute serve`` process, and the pieces it is made of.

* The delta validation a RouteSubnet answer waits for equals the full
  validation walk, count for count, after random link and switch cuts (plain
  trees, trees with aggregation nodes) and on tables broken on purpose (dead
  ends, a loop, a turn up after going down).
* A subnet is routed as the tables of a from-scratch route; the same subnet
  again answers the serving epoch without committing; a cut link is a derived
  LINK_DOWN (rerouted), the link back a LINK_UP with the first tables again;
  another fabric becomes the base; the answer's hop rows are the least
  switch-to-switch hop counts (checked against a plain breadth-first search).
* Bad subnets name what is wrong (INVALID_ARGUMENT), a request over
  ``limits.max_topology_bytes`` is RESOURCE_EXHAUSTED, a subnet that cannot be
  routed FAILED_PRECONDITION.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from service_daemon import start_daemon

from smroute.fabric.generate.shapegen import ring
from smroute.fabric.generate.shapes import with_aggregation_nodes
from smroute.fabric.generate.trees import pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing.engine import RoutingResult, route, validate_result
from smroute.routing.reroute import reroute
from smroute.service.rpc._gen import smroute_pb2 as pb
from smroute.service.rpc._gen import smroute_pb2_grpc as pb_grpc
from smroute.service.rpc.subnet import subnet_request
from smroute.service.subnet import switch_hops
from smroute.service.subnet_check import affected_pairs, delta_validation
from smroute.tables.lft import NO_ROUTE

COUNTS = ("pairs", "delivered", "dead_ends", "loops", "updown_violations", "non_minimal",
          "ca_pairs_unroutable", "switch_pairs_no_updown", "ca_pairs_disconnected")


def _counts(v: object) -> tuple[int, ...]:
    return tuple(int(getattr(v, f)) for f in COUNTS)


def _inter_switch_links(f: Fabric) -> np.ndarray:
    sw = f.node_type == NodeType.SWITCH
    return np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])


# ---------------------------------------------------------------- delta validation
@pytest.mark.parametrize("agg", [False, True], ids=["tree", "aggregation-nodes"])
def test_delta_validation_equals_the_full_walk(agg: bool) -> None:
    f = pgft(3, [4, 4, 8], [1, 4, 4], [1, 1, 1])
    if agg:
        f = with_aggregation_nodes(f)
    r0 = route(f, workers=1)
    v0 = validate_result(r0)
    assert v0.ok
    rng = np.random.default_rng(5)
    links = _inter_switch_links(f)
    applied = 0
    for trial in range(8):
        cut = rng.choice(links, size=1 + trial % 3, replace=False)
        nodes = rng.choice(f.switches, size=1, replace=False) if trial % 4 == 3 else []
        f1 = f.with_removed(nodes=nodes, links=cut)
        r1 = reroute(r0, f1, lmc=None).result
        d = delta_validation(r0, v0, r1)
        full = validate_result(r1)
        if d is not None:
            applied += 1
            assert _counts(d) == _counts(full), trial
    assert applied >= 4  # the delta is what answers most changes


def _broken(r: RoutingResult, how: str) -> RoutingResult:
    """``r`` with a few entries spoiled (its graph and destinations kept)."""
    g, dest = r.walk_graph, r.dest
    ports = np.array(r.tables.ports, copy=True)
    leaf = int(g.leaves[0])
    ca = np.flatnonzero(~dest.is_switch & (dest.target != leaf))
    lid = int(dest.lid[ca[0]])
    if how == "dead_end":
        ports[leaf, dest.lid[ca[:5]]] = NO_ROUTE
    else:
        up = int(ports[leaf, lid])  # the leaf's up port for that LID
        grp = np.flatnonzero(g.grp_switch == leaf)  # the leaf's port groups
        above = next(int(g.grp_remote[i]) for i in grp
                     if up in g.grp_ports[g.grp_port_first[i]:g.grp_port_first[i]
                                          + g.grp_port_count[i]].tolist())
        back = next(int(g.grp_ports[g.grp_port_first[i]]) for i in np.flatnonzero(
            g.grp_switch == above) if int(g.grp_remote[i]) == leaf)
        if how == "loop":  # the switch above sends the LID back down to the leaf
            ports[above, lid] = back
        else:  # down to the leaf, which sends it up again
            other = next(int(g.grp_ports[g.grp_port_first[i]]) for i in grp
                         if int(g.grp_remote[i]) != above)
            ports[above, lid] = back
            ports[leaf, lid] = other
    return dataclasses.replace(r, tables=dataclasses.replace(r.tables, ports=ports, _index={}))


@pytest.mark.parametrize("how", ["dead_end", "loop", "down_then_up"])
def test_delta_validation_sees_broken_tables(how: str) -> None:
    f = pgft(3, [4, 4, 8], [1, 4, 4], [1, 1, 1])
    r0 = route(f, workers=1)
    v0 = validate_result(r0)
    bad = _broken(r0, how)
    full = validate_result(bad)
    d = delta_validation(r0, v0, bad)
    assert d is not None and not full.ok
    assert _counts(d) == _counts(full)
    assert not d.ok and d.failures
    pairs = affected_pairs(r0, bad)
    assert pairs is not None and 0 < len(pairs) < bad.tables.n_switches * len(bad.dest.lid) // 4


def test_switch_hops_are_least_hops() -> None:
    f = pgft(3, [4, 4, 8], [1, 4, 4], [1, 1, 1])
    f = f.with_removed(links=_inter_switch_links(f)[:12])
    guids = np.sort(f.node_guid[f.switches])
    hops = switch_hops(f, guids)
    sw = f.nodes_by_guid(guids)
    at = {int(n): i for i, n in enumerate(sw.tolist())}
    nbr: dict[int, set[int]] = {i: set() for i in range(len(sw))}
    for a, b in zip(f.port_node[f.link_a].tolist(), f.port_node[f.link_b].tolist(),
                    strict=True):
        if a in at and b in at and a != b:
            nbr[at[a]].add(at[b])
            nbr[at[b]].add(at[a])
    for s in range(len(sw)):
        want = np.full(len(sw), 255)
        want[s] = 0
        q = deque([s])
        while q:
            x = q.popleft()
            for y in nbr[x]:
                if want[y] == 255:
                    want[y] = want[x] + 1
                    q.append(y)
        assert np.array_equal(hops[s], want), s


# ---------------------------------------------------------------- through a daemon
@pytest.fixture
def stub(tmp_path: Path) -> Iterator[pb_grpc.SmrouteStub]:
    d = start_daemon(tmp_path / "d")
    ch = grpc.insecure_channel(d.address)
    try:
        yield pb_grpc.SmrouteStub(ch)
    finally:
        ch.close()
        assert d.stop() == 0


def _lft(resp: pb.RouteSubnetResponse) -> dict[int, bytes]:
    return {sw.guid: sw.lft for sw in resp.switches}


def test_route_subnet_routes_diffs_and_answers(stub: pb_grpc.SmrouteStub) -> None:
    f = with_aggregation_nodes(pgft(3, [4, 4, 8], [1, 4, 4], [1, 1, 1]))
    r1 = stub.RouteSubnet(subnet_request(f, 0, sm="test"), timeout=60)
    assert (r1.epoch.id, r1.epoch.cause, r1.committed) == (1, "sm", True)
    assert r1.epoch.validation.state == pb.Validation.DONE and r1.epoch.validation.ok
    ref = route(f, workers=1).tables
    assert r1.max_lid == ref.max_lid and len(r1.switches) == ref.n_switches
    guids = [sw.guid for sw in r1.switches]
    assert guids == sorted(guids)
    for sw in r1.switches:
        assert sw.lft == bytes(ref.ports[ref.row_of(sw.guid)])
    hops = switch_hops(f, np.array(guids, dtype=np.uint64))
    assert [sw.hops for sw in r1.switches] == [bytes(h) for h in hops]

    again = stub.RouteSubnet(subnet_request(f, 0), timeout=60)
    assert (again.epoch.id, again.committed) == (1, False) and _lft(again) == _lft(r1)

    li = int(_inter_switch_links(f)[3])
    end = int(f.link_a[li])
    f2 = f.with_removed(links=[li])
    r2 = stub.RouteSubnet(subnet_request(f2, 0), timeout=60)
    assert (r2.epoch.id, r2.epoch.cause, r2.epoch.down_links) == (2, "sm", 1)
    assert [(e.kind, e.node_guid, e.port) for e in r2.epoch.faults] == [
        (pb.FaultEvent.LINK_DOWN, int(f.node_guid[f.port_node[end]]), int(f.port_num[end]))]
    assert r2.epoch.validation.ok and r2.epoch.diff_from_parent.entries_changed > 0
    ref2 = route(f2, workers=1).tables
    assert all(sw.lft == bytes(ref2.ports[ref2.row_of(sw.guid)]) for sw in r2.switches)

    r3 = stub.RouteSubnet(subnet_request(f, 0), timeout=60)
    assert r3.epoch.id == 3 and [e.kind for e in r3.epoch.faults] == [pb.FaultEvent.LINK_UP]
    assert _lft(r3) == _lft(r1)

    other = pgft(2, [4, 4], [1, 2], [1, 1])  # another fabric: the new base
    r4 = stub.RouteSubnet(subnet_request(other, 0), timeout=60)
    assert (r4.epoch.id, r4.committed, r4.epoch.down_links, len(r4.epoch.faults)) == (
        4, True, 0, 0)
    assert len(r4.switches) == len(other.switches)
    assert stub.GetEpoch(pb.GetEpochRequest(), timeout=10).cause == "sm"


def test_route_subnet_bad_subnets(stub: pb_grpc.SmrouteStub) -> None:
    f = pgft(2, [4, 4], [1, 2], [1, 1])

    def refused(req: pb.RouteSubnetRequest) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(grpc.RpcError) as err:
            stub.RouteSubnet(req, timeout=30)
        return err.value.code(), err.value.details()

    req = subnet_request(f, 0)
    req.nodes[2].description = "x" * 65
    code, msg = refused(req)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "nodes[2]" in msg and "64" in msg
    req = subnet_request(f, 0)
    req.nodes[1].type = 7
    code, msg = refused(req)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "nodes[1]" in msg and "type 7" in msg
    req = subnet_request(f, 0)
    req.links[0].guid_b = 0x1234
    code, msg = refused(req)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "links[0].guid_b" in msg
    req = subnet_request(f, 0)
    lids = [n.ports[0] for n in req.nodes if n.ports]
    lids[1].lid = lids[0].lid
    code, msg = refused(req)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and f"LID {lids[0].lid} is used by" in msg
    req = subnet_request(f, 9)
    code, msg = refused(req)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "lmc 9" in msg


def test_route_subnet_limits_and_unroutable(tmp_path: Path) -> None:
    cfg = tmp_path / "small.yaml"
    cfg.write_text("algorithm: nmodc\nlimits:\n  max_topology_bytes: 4096\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg))
    ch = grpc.insecure_channel(d.address)
    try:
        stub = pb_grpc.SmrouteStub(ch)
        with pytest.raises(grpc.RpcError) as err:
            stub.RouteSubnet(subnet_request(pgft(3, [4, 4, 8], [1, 4, 4], [1, 1, 1]), 0),
                             timeout=30)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "limits.max_topology_bytes" in (err.value.details() or "")
        with pytest.raises(grpc.RpcError) as err:  # no switch has an end-port
            stub.RouteSubnet(subnet_request(ring(4, 0), 0), timeout=30)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        ch.close()
        assert d.stop() == 0
