"""The gRPC servicer of the routing daemon (service ``smroute.v1.Smroute``): a
thin adapter that reads requests, calls the core (:mod:`smroute.service.core`),
builds replies (:mod:`smroute.service.rpc.messages`) and maps every error to a
status code in one place (:func:`status_code`).  An unexpected error becomes
INTERNAL (logged with its traceback) and the daemon keeps serving.
"""

from __future__ import annotations

import contextlib
import functools
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from smroute.errors import InputError, SmrouteError
from smroute.fabric.ibnetdiscover.text import ParseWarning
from smroute.service.core import RoutingCore
from smroute.service.errors import ServiceError, Status, bounded, echo, shown
from smroute.service.rpc._gen import smroute_pb2 as pb
from smroute.service.rpc._gen import smroute_pb2_grpc as pb_grpc
from smroute.service.rpc.messages import (
    changes_msg,
    diff_summary_msg,
    down_items_msgs,
    epoch_msg,
    events_from_msgs,
    fabric_summary_msg,
    table_messages,
)
from smroute.tables.diff import diff_tables

__all__ = ["SERVICE_NAME", "RoutingCore", "ServiceError", "SmrouteServicer", "status_code"]

SERVICE_NAME = "smroute.v1.Smroute"


F = TypeVar("F", bound=Callable[..., Any])


def status_code(err: BaseException) -> tuple[grpc.StatusCode, str]:
    """The gRPC status code and message of an exception: the one place where
    the core's errors become statuses.  :class:`ServiceError` carries its own;
    a user mistake (:class:`~smroute.errors.InputError`) is INVALID_ARGUMENT,
    any other expected error FAILED_PRECONDITION, anything else INTERNAL.
    Every message is :func:`~smroute.service.errors.bounded` (escaped, at most
    2,000 bytes: a long echo must not turn the status into RESOURCE_EXHAUSTED)."""
    if isinstance(err, ServiceError):
        return grpc.StatusCode[err.status.name], bounded(err.message)
    if isinstance(err, InputError):
        return grpc.StatusCode.INVALID_ARGUMENT, bounded(str(err))
    if isinstance(err, SmrouteError):
        return grpc.StatusCode.FAILED_PRECONDITION, bounded(str(err))
    return grpc.StatusCode.INTERNAL, bounded(f"internal error: {type(err).__name__}: {err}")


def _status_name(code: grpc.StatusCode) -> str:
    return str(code.name)


class SmrouteServicer(pb_grpc.SmrouteServicer):
    """gRPC adapter over a :class:`RoutingCore` (see module doc for errors)."""

    def __init__(self, core: RoutingCore) -> None:
        self.core = core

    # -------------------------------------------------------- plumbing
    def _fail(self, method: str, context: grpc.ServicerContext, err: BaseException) -> None:
        core = self.core
        code, msg = status_code(err)
        if code == grpc.StatusCode.INTERNAL and not isinstance(err, ServiceError):
            core.log("error", "internal_error", method=method, error=msg,
                     traceback=traceback.format_exc())
        core.metric("request", method, _status_name(code))
        core.log("info", "request_failed", method=method, code=_status_name(code), message=msg)
        context.abort(code, msg)

    @staticmethod
    def _unary(method: str) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            @functools.wraps(fn)
            def wrapper(self: SmrouteServicer, request: Any, context: grpc.ServicerContext
                        ) -> Any:
                try:
                    out = fn(self, request, context)
                except Exception as err:  # noqa: BLE001 - mapped to a status
                    self._fail(method, context, err)
                    raise AssertionError("unreachable") from None
                self.core.metric("request", method, "OK")
                return out
            return wrapper  # type: ignore[return-value]
        return deco

    @staticmethod
    def _stream(method: str, kind: str) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            @functools.wraps(fn)
            def wrapper(self: SmrouteServicer, request: Any, context: grpc.ServicerContext
                        ) -> Iterator[Any]:
                core = self.core
                try:
                    core.streams.acquire(kind, core.limits)
                except ServiceError as err:
                    self._fail(method, context, err)
                core.metric("stream_opened", method)
                try:
                    yield from fn(self, request, context)
                except GeneratorExit:
                    raise
                except Exception as err:  # noqa: BLE001 - mapped to a status
                    self._fail(method, context, err)
                else:
                    core.metric("request", method, "OK")
                finally:
                    core.streams.release(kind)
                    core.metric("stream_closed", method)
            return wrapper  # type: ignore[return-value]
        return deco

    # -------------------------------------------------------- RPCs
    @_unary("LoadFabric")
    def LoadFabric(self, request: pb.LoadFabricRequest, context: grpc.ServicerContext
                   ) -> pb.LoadFabricResponse:
        core = self.core
        which = request.WhichOneof("source")
        skipped: list[ParseWarning] = []  # noise lines the parser skipped
        if which == "topology_text":
            source = shown(request.source_name) or "<topology_text>"
            fabric = core.parse_fabric_text(request.topology_text, source, skipped)
        elif which == "path":
            source = shown(request.path)
            fabric = core.read_request_path(request.path, skipped)
        elif which == "live":
            source = "live" + (f":{shown(request.live.ca)}" if request.live.ca else "")
            fabric = core.discover_fabric(request.live.ca, request.live.port,
                                          request.live.timeout_s)
        else:
            raise ServiceError(Status.INVALID_ARGUMENT,
                               "no source: expected one of topology_text, path, live")
        core.load_fabric(fabric, source, skipped_lines=sum(w.lines for w in skipped))
        return pb.LoadFabricResponse(fabric=fabric_summary_msg(fabric, source))

    @_unary("Route")
    def Route(self, request: pb.RouteRequest, context: grpc.ServicerContext
              ) -> pb.RouteResponse:
        core = self.core
        lmc = request.lmc if request.HasField("lmc") else None
        ep = core.route(request.algorithm, lmc, confirm_state_loss=request.confirm_state_loss)
        v = (core.store.wait_validation(ep.id, 600.0) if request.wait_validation
             else core.store.validation(ep.id))
        return pb.RouteResponse(epoch=epoch_msg(ep, v))

    @_unary("GetEpoch")
    def GetEpoch(self, request: pb.GetEpochRequest, context: grpc.ServicerContext) -> pb.Epoch:
        ep = self.core.epoch(request.epoch)
        msg = epoch_msg(ep, self.core.store.validation(ep.id))
        if request.include_down_items:
            msg.down_items.extend(down_items_msgs(ep))
        return msg

    @_unary("GetLanes")
    def GetLanes(self, request: pb.GetLanesRequest, context: grpc.ServicerContext) -> pb.Lanes:
        from smroute.service.rpc.lanes import lanes_msg

        return lanes_msg(self.core.epoch(request.epoch))

    @_stream("GetTables", "tables")
    def GetTables(self, request: pb.GetTablesRequest, context: grpc.ServicerContext
                  ) -> Iterator[pb.GetTablesResponse]:
        core = self.core
        ep = core.epoch(request.epoch)
        since = None
        # a since_epoch of another instance (a restart) or no longer kept: the
        # full tables (header.since_epoch 0), never a delta against other tables
        if request.since_epoch and request.since_instance in ("", ep.instance):
            with contextlib.suppress(KeyError):
                since = core.store.get(request.since_epoch)
        header, items = table_messages(ep, list(request.switch_guids), since)
        yield pb.GetTablesResponse(header=header)
        for item in items:
            if not context.is_active():
                return
            yield pb.GetTablesResponse(switch=item)

    @_unary("ApplyFaults")
    def ApplyFaults(self, request: pb.ApplyFaultsRequest, context: grpc.ServicerContext
                    ) -> pb.ApplyFaultsResponse:
        core = self.core
        events = events_from_msgs(request.events)
        out = core.apply_faults(events, dry_run=request.dry_run)
        v = None if request.dry_run else core.store.validation(out.epoch.id)
        resp = pb.ApplyFaultsResponse(
            committed=out.committed, epoch=epoch_msg(out.epoch, v),
            diff=diff_summary_msg(out.diff), coalesced_events=out.coalesced,
        )
        if request.dry_run and request.max_entries and out.diff is not None:
            changes, truncated = changes_msg(out.diff, request.max_entries)
            resp.changes.extend(changes)
            resp.truncated = truncated
        return resp

    @_unary("Diff")
    def Diff(self, request: pb.DiffRequest, context: grpc.ServicerContext) -> pb.DiffResponse:
        core = self.core
        a = core.epoch(request.epoch_a)
        b = core.epoch(request.epoch_b)
        d = b.diff if (b.diff is not None and b.parent_id == a.id) else diff_tables(
            a.tables, b.tables)
        changes, truncated = changes_msg(d, request.max_entries)
        if not request.max_entries:
            for c in changes:
                del c.changes[:]
            truncated = d.entries_changed > 0
        return pb.DiffResponse(epoch_a=a.id, epoch_b=b.id, summary=diff_summary_msg(d),
                               switches=changes, truncated=truncated)

    @_stream("Watch", "watch")
    def Watch(self, request: pb.WatchRequest, context: grpc.ServicerContext
              ) -> Iterator[pb.Epoch]:
        core = self.core
        cur = core.store.current
        last = 0
        if cur is not None:
            yield epoch_msg(cur, core.store.validation(cur.id))
            last = cur.id
        seen = time.monotonic()  # when the stream last had something to say
        while context.is_active() and not core.shutting_down.is_set():
            for ep in core.store.wait_newer(last, 0.5):
                yield epoch_msg(ep, core.store.validation(ep.id))
                last, seen = ep.id, time.monotonic()
            idle = core.limits.stream_idle_s
            if idle and time.monotonic() - seen >= idle:
                raise ServiceError(
                    Status.UNAVAILABLE,
                    f"Watch: no new epoch for {idle:g} s (limits.stream_idle_s); the stream "
                    "is closed to free its slot; open a new Watch (it starts with the "
                    "current epoch)")

    @_unary("Analyze")
    def Analyze(self, request: pb.AnalyzeRequest, context: grpc.ServicerContext
                ) -> pb.AnalyzeResponse:
        core = self.core
        ep = core.epoch(request.epoch)
        order_name = request.order or "topological"
        if order_name not in ("topological", "random"):
            raise ServiceError(Status.INVALID_ARGUMENT,
                               f"order {echo(order_name)}: expected 'topological' or "
                               "'random'")
        samples = request.rp_samples or 100
        if samples > 1000:
            raise ServiceError(Status.INVALID_ARGUMENT,
                               f"rp_samples {samples}: expected at most 1000")
        n_hosts = len(ep.fabric.cas)
        if n_hosts > core.limits.analyze_max_hosts:
            raise ServiceError(Status.RESOURCE_EXHAUSTED,
                               f"epoch {ep.id} has {n_hosts} CAs; Analyze is limited to "
                               f"{core.limits.analyze_max_hosts} (limits.analyze_max_hosts)")
        t0 = time.perf_counter()
        m = core.analyze(ep, order_name, int(request.seed), samples)
        return pb.AnalyzeResponse(epoch=ep.id, seconds=time.perf_counter() - t0,
                                  order=order_name, **m)

    @_unary("SelectLids")
    def SelectLids(self, request: pb.SelectLidsRequest, context: grpc.ServicerContext
                   ) -> pb.SelectLidsResponse:
        from smroute.service.rpc.lids import select_lids_response

        return select_lids_response(self.core.epoch(request.epoch), request)

    @_unary("RouteSubnet")
    def RouteSubnet(self, request: pb.RouteSubnetRequest, context: grpc.ServicerContext
                    ) -> pb.RouteSubnetResponse:
        from smroute.service.rpc.subnet import route_subnet_response

        return route_subnet_response(self.core, request, context.time_remaining())
