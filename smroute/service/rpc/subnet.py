"""The body of the ``RouteSubnet`` RPC (protobuf translation; no gRPC here).

Request -> :class:`~smroute.service.subnet.SubnetArrays` (bounded: the
serialized request by ``limits.max_topology_bytes``, descriptions by 64
bytes, ports and LIDs by :func:`~smroute.service.subnet.fabric_from_subnet`)
and its VL facts (:func:`vl_facts`, for ``max_vls: auto``)
-> :meth:`RoutingCore.route_subnet` -> the epoch's validation
(:func:`~smroute.service.subnet_check.answer_validation`) -> the response:
the epoch, and per switch in ascending GUID order its LFT (``max_lid + 1``
bytes) and, if asked, its row of least switch-to-switch hop counts
(:func:`~smroute.service.subnet.switch_hops`).  An epoch whose validation
failed, or did not finish in time, is no answer: FAILED_PRECONDITION /
UNAVAILABLE, and the subnet manager falls back to its next routing engine.

:func:`subnet_request` builds the request for a fabric (what the OpenSM
plugin sends, for tests, benchmarks and Python clients).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing.validate import Validation
from smroute.service.errors import ServiceError, Status, shown
from smroute.service.rpc._gen import smroute_pb2 as pb
from smroute.service.rpc.messages import epoch_msg
from smroute.service.subnet import SubnetArrays, fabric_from_subnet, switch_hops
from smroute.service.subnet_check import answer_validation
from smroute.service.vlchoice import VlFacts

if TYPE_CHECKING:
    from smroute.service.core import RoutingCore

__all__ = ["route_subnet_response", "subnet_arrays", "subnet_request", "vl_facts"]

#: Seconds a RouteSubnet waits for its epoch's validation without a deadline.
DEFAULT_WAIT_S = 600.0


def subnet_arrays(req: pb.RouteSubnetRequest, max_bytes: int) -> SubnetArrays:
    """The request's subnet as arrays; RESOURCE_EXHAUSTED beyond ``max_bytes``."""
    size = req.ByteSize()
    if size > max_bytes:
        raise ServiceError(Status.RESOURCE_EXHAUSTED,
                           f"RouteSubnet request of {size} bytes; the limit "
                           f"(limits.max_topology_bytes) is {max_bytes}")
    nodes, links = req.nodes, req.links
    n, nl = len(nodes), len(links)
    pn: list[int] = []
    pnum: list[int] = []
    pguid: list[int] = []
    plid: list[int] = []
    plmc: list[int] = []
    for i, node in enumerate(nodes):
        for p in node.ports:
            pn.append(i)
            pnum.append(p.num)
            pguid.append(p.guid)
            plid.append(p.lid)
            plmc.append(p.lmc)
    return SubnetArrays(
        guid=np.fromiter((x.guid for x in nodes), np.uint64, n),
        type=np.fromiter((x.type for x in nodes), np.int64, n),
        num_ports=np.fromiter((x.num_ports for x in nodes), np.int64, n),
        sysimg=np.fromiter((x.sysimg_guid for x in nodes), np.uint64, n),
        desc=[x.description for x in nodes],
        port_node=np.array(pn, dtype=np.int64), port_num=np.array(pnum, dtype=np.int64),
        port_guid=np.array(pguid, dtype=np.uint64), port_lid=np.array(plid, dtype=np.int64),
        port_lmc=np.array(plmc, dtype=np.int64),
        guid_a=np.fromiter((x.guid_a for x in links), np.uint64, nl),
        port_a=np.fromiter((x.port_a for x in links), np.int64, nl),
        guid_b=np.fromiter((x.guid_b for x in links), np.uint64, nl),
        port_b=np.fromiter((x.port_b for x in links), np.int64, nl),
        lmc=int(req.lmc), source=f"RouteSubnet from {shown(req.sm) or 'an unnamed SM'}")


def vl_facts(req: pb.RouteSubnetRequest, s: SubnetArrays | None = None) -> VlFacts:
    """The request's VL facts as arrays (:class:`~smroute.service.vlchoice.VlFacts`);
    ``s``: its :func:`subnet_arrays`, if already read (nodes and cables)."""
    s = s if s is not None else subnet_arrays(req, req.ByteSize())
    links = req.links
    codes = np.array([(x.vl_cap_a, x.op_vls_a, x.vl_cap_b, x.op_vls_b) for x in links],
                     dtype=np.int64).reshape(len(links), 4)
    return VlFacts(
        programs_lanes=bool(req.programs_lanes), qos=bool(req.qos),
        max_op_vls=int(req.max_op_vls), guid=s.guid, type=s.type,
        sl2vl=np.fromiter((x.sl2vl for x in req.nodes), bool, len(req.nodes)),
        guid_a=s.guid_a, port_a=s.port_a, guid_b=s.guid_b, port_b=s.port_b,
        vl_cap_a=codes[:, 0], op_vls_a=codes[:, 1], vl_cap_b=codes[:, 2], op_vls_b=codes[:, 3])


def subnet_request(f: Fabric, lmc: int, *, sm: str = "", want_hops: bool = True,
                   qos: bool | None = None, max_op_vls: int = 5, vl_code: int = 4
                   ) -> pb.RouteSubnetRequest:
    """What a subnet manager that discovered ``f`` sends (its addressed ports:
    those with a LID or a port GUID; every link).  ``qos`` not ``None``: the
    VL facts of the OpenSM plugin (``programs_lanes``, that ``qos`` and
    ``max_op_vls``, SL-to-VL tables on every switch, VLCap and
    OperationalVLs ``vl_code`` on every cable end; ibsim's: VL0-7)."""
    req = pb.RouteSubnetRequest(lmc=lmc, sm=sm, want_hops=want_hops)
    sw = qos is not None
    if sw:
        req.programs_lanes, req.qos, req.max_op_vls = True, bool(qos), max_op_vls
    rows = np.flatnonzero(f.port_exists & ((f.port_lid > 0) | (f.port_guid > 0)))
    at = np.searchsorted(f.port_node[rows], np.arange(f.n_nodes + 1))
    for i in range(f.n_nodes):
        node = req.nodes.add(guid=int(f.node_guid[i]), type=int(f.node_type[i]),
                             num_ports=int(f.num_ports[i]), description=f.node_desc[i],
                             sysimg_guid=int(f.sysimg_guid[i]),
                             sl2vl=sw and int(f.node_type[i]) == int(NodeType.SWITCH))
        for r in rows[at[i]:at[i + 1]].tolist():
            node.ports.add(num=int(f.port_num[r]), guid=int(f.port_guid[r]),
                           lid=int(f.port_lid[r]), lmc=int(f.port_lmc[r]))
    ends = zip(f.node_guid[f.port_node[f.link_a]].tolist(), f.port_num[f.link_a].tolist(),
               f.node_guid[f.port_node[f.link_b]].tolist(), f.port_num[f.link_b].tolist(),
               strict=True)
    code = vl_code if sw else 0
    for ga, pa, gb, pb_ in ends:
        req.links.add(guid_a=ga, port_a=pa, guid_b=gb, port_b=pb_, vl_cap_a=code,
                      op_vls_a=code, vl_cap_b=code, op_vls_b=code)
    return req


def route_subnet_response(core: RoutingCore, req: pb.RouteSubnetRequest,
                          timeout: float | None) -> pb.RouteSubnetResponse:
    """Route the request's subnet and answer (module doc); ``timeout``: the
    seconds left of the caller's deadline (``None``: :data:`DEFAULT_WAIT_S`)."""
    s = subnet_arrays(req, core.limits.max_topology_bytes)
    sm = fabric_from_subnet(s)
    ep, committed = core.route_subnet(sm, s.lmc, s.source, vl_facts(req, s))
    wait = DEFAULT_WAIT_S if timeout is None else max(timeout, 0.0)
    v = answer_validation(core, ep, wait)
    if not isinstance(v, Validation):
        raise ServiceError(Status.UNAVAILABLE,
                           f"epoch {ep.id}: validation not finished within {wait:.1f} s "
                           f"({v}); retry")
    if not v.ok:
        raise ServiceError(Status.FAILED_PRECONDITION,
                           f"epoch {ep.id} failed validation: {v.summary()}; "
                           + "; ".join(str(f) for f in v.failures[:3]))
    t = ep.tables
    order = ep.guid_order
    guids = np.asarray(t.switch_guid, dtype=np.uint64)[order]
    hops = switch_hops(ep.fabric, guids) if req.want_hops else None
    ports = np.ascontiguousarray(t.ports, dtype=np.uint8)
    resp = pb.RouteSubnetResponse(epoch=epoch_msg(ep, v), committed=committed,
                                  max_lid=t.max_lid)
    for i, r in enumerate(order.tolist()):
        resp.switches.add(guid=int(guids[i]), lid=int(t.switch_lid[r]), lft=ports[r].tobytes(),
                          hops=hops[i].tobytes() if hops is not None else b"")
    if ep.result.lanes is not None:  # detours: the SM must set SLs and SL-to-VL tables
        from smroute.service.rpc.lanes import lanes_msg

        resp.lanes.CopyFrom(lanes_msg(ep))
    return resp
