"""The ``Lanes`` message of an epoch (``GetLanes``, ``RouteSubnetResponse.lanes``).

An epoch routed with detours over virtual lanes (routing mode
``tree+detours``, :class:`~smroute.routing.vlassign.VirtualLanes`) is free of
credit loops only if the subnet manager gives every path its SL and programs
the SL-to-VL tables.  The message is what the OpenSM plugin needs for its
``path_sl`` and ``update_sl2vl`` hooks: per detour target the SL, its
destination LIDs and source LIDs as ranges (``path_sl(slid, dlid)``), and the
non-zero SL-to-VL tables per (switch, output port[, input port]).  Protobuf
translation only (no gRPC).
"""

from __future__ import annotations

import numpy as np

from smroute.routing.engine import RoutingResult
from smroute.service.epochs import Epoch
from smroute.service.rpc._gen import smroute_pb2 as pb

__all__ = ["lanes_msg", "ranges"]


def ranges(values: np.ndarray) -> list[int]:
    """Ascending distinct ``values`` as flat ``[first, last, first, last, ...]``
    runs of consecutive integers."""
    v = np.unique(np.asarray(values, dtype=np.int64))
    if not len(v):
        return []
    brk = np.flatnonzero(np.diff(v) != 1) + 1
    starts, ends = v[np.r_[0, brk]], v[np.r_[brk - 1, len(v) - 1]]
    return np.stack([starts, ends], axis=1).ravel().tolist()


def lanes_msg(ep: Epoch) -> pb.Lanes:
    """The ``Lanes`` of ``ep`` (vls 1, sls 1 and nothing else without detours)."""
    r: RoutingResult = ep.result
    lanes = r.lanes
    if lanes is None:
        return pb.Lanes(epoch=ep.id, vls=1, sls=1)
    g, dest = r.graph, r.dest
    out = pb.Lanes(epoch=ep.id, vls=lanes.n_vls, sls=lanes.n_sls, escape_sl=lanes.escape_sl)
    for j in np.flatnonzero(lanes.target_sl).tolist():
        tgt = int(lanes.targets[j])
        src = np.flatnonzero(lanes.from_switch[:, j])
        everyone = bool(np.array_equal(src, np.flatnonzero(g.component == g.component[tgt])))
        msg = out.paths.add(sl=int(lanes.target_sl[j]), target_guid=int(g.sw_guid[tgt]),
                            dlid_ranges=ranges(np.flatnonzero(lanes.lid_target == j)),
                            from_all=everyone)
        if not everyone:  # the source LIDs: the CAs on those switches, the switches
            msg.from_lid_ranges.extend(ranges(dest.lid[np.isin(dest.target, src)]))
            msg.from_switches.extend(int(x) for x in g.sw_guid[src].tolist())
    sw, port = np.nonzero(lanes.port_vl.any(axis=2))
    for s, o in zip(sw.tolist(), port.tolist(), strict=True):
        out.tables.add(guid=int(g.sw_guid[s]), out_port=o, any_in_port=True,
                       vl=lanes.port_vl[s, o].tobytes())
    n_p = lanes.n_ports
    for k, v in zip(lanes.exc_key.tolist(), lanes.exc_vl, strict=True):
        s, rest = divmod(k, n_p * n_p)
        inp, o = divmod(rest, n_p)
        out.tables.add(guid=int(g.sw_guid[s]), out_port=o, in_port=inp, vl=v.tobytes())
    return out
