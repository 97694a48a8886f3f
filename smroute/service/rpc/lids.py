"""The body of the ``SelectLids`` RPC: LID selection
(:mod:`smroute.lids.select`) for a job on a committed epoch.

Request: ``epoch`` (0 = latest), ``hosts`` in rank order (``0x`` node/port
GUID or node description), ``pattern`` (``shift`` by default, or a
collective: ``ring``, ``binomial``, ``dissemination``, ``tournament``,
``recursive_doubling``, ``recursive_halving``; ``-`` and ``_`` are the same),
``per_stage``.  The epoch's LMC gives the LIDs per port.  Response: the
``n x n`` DLIDs row-major (``dlids[src * n + dst]``, 0 on the diagonal), the
HSD with the chosen LIDs and with base LIDs, and per stage if asked.

The routing view of an epoch (tables aligned with the fabric) is built once
and kept for the two most recent epochs asked about; selections run one at a
time (each holds a few hundred MB at most on the 11,664-host tree).  Bad hosts
name their position: ``request.hosts:3: ...`` is ``hosts[2]``.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

from smroute.errors import InputError

if TYPE_CHECKING:
    from smroute.analysis.paths import RoutingView
    from smroute.service.epochs import Epoch

__all__ = ["RPC_MAX_RANKS", "routing_view_of", "select_lids_response"]

#: Largest job served: the response holds n * n DLIDs, built as Python ints
#: (4.2M at 2,048 ranks, ~150 MB transient in the daemon; 11 MB on the wire).
RPC_MAX_RANKS = 2048
_VIEWS: OrderedDict[int, tuple[weakref.ref[Any], RoutingView]] = OrderedDict()
_VIEWS_LOCK = threading.Lock()
_RUN_LOCK = threading.Lock()
_KEEP = 2


def routing_view_of(ep: Epoch) -> RoutingView:
    """The :class:`~smroute.analysis.paths.RoutingView` of an epoch, cached."""
    from smroute.analysis.paths import routing_view

    with _VIEWS_LOCK:
        hit = _VIEWS.get(id(ep))
        if hit is not None and hit[0]() is ep:
            _VIEWS.move_to_end(id(ep))
            return hit[1]
    view = routing_view(ep.fabric, ep.tables)
    with _VIEWS_LOCK:
        _VIEWS[id(ep)] = (weakref.ref(ep), view)
        while len(_VIEWS) > _KEEP:
            _VIEWS.popitem(last=False)
    return view


def select_lids_response(ep: Epoch, request: Any) -> Any:
    """Answer a ``SelectLidsRequest`` on epoch ``ep`` (a ``SelectLidsResponse``).
    Raises :class:`~smroute.errors.InputError` for bad hosts, pattern or LMC."""
    from smroute.analysis.patterns import cps, resolve_job
    from smroute.lids.select import select_lids
    from smroute.service.rpc._gen import smroute_pb2 as pb

    hosts = list(request.hosts)
    if not hosts:
        raise InputError("hosts: no host given (rank order: 0x-GUID or node description)")
    if len(hosts) > RPC_MAX_RANKS:
        raise InputError(f"hosts: {len(hosts)} given; at most {RPC_MAX_RANKS} per request")
    name = (request.pattern or "shift").replace("_", "-")
    with _RUN_LOCK:
        view = routing_view_of(ep)
        ranks = resolve_job(view, list(enumerate(hosts, 1)), "request.hosts")
        pattern = cps(name, len(ranks))
        sel = select_lids(view, ranks, pattern, rng=np.random.default_rng(0), lmc=int(ep.lmc))
    resp = pb.SelectLidsResponse(
        epoch=ep.id, lmc=sel.lmc, n_ranks=sel.n, dlids=sel.dlids.ravel().tolist(),
        hsd_avg=sel.hsd_avg, hsd_max=float(sel.hsd_max),
        hsd_base_avg=sel.hsd_base_avg, hsd_base_max=float(sel.hsd_base_max),
    )
    if request.per_stage:
        resp.stages.extend(pb.Stage(index=i, max_flows=int(h))
                           for i, h in enumerate(sel.hsd.tolist()))
    return resp
