"""How much of the daemon's RPC workers a client may hold (:class:`CapacityGuard`).

gRPC's synchronous server runs each call on a worker thread for as long as
the call lasts: a Watch or GetTables stream holds one for its whole life.
The guard, a server interceptor, keeps read-only calls from taking them all:

* **Reserved capacity.**  Read-only calls (every method but
  :data:`~smroute.service.rpc.auth.MUTATING_METHODS` and health) run at most
  :attr:`~smroute.service.settings.LimitsConfig.read_slots` at a time; the
  RPC thread pool has ``limits.reserved_workers`` threads more, which only
  LoadFabric, Route, ApplyFaults and health can get.  A read-only call
  beyond that ends at once with RESOURCE_EXHAUSTED.
* **Per-client streams.**  One client holds at most
  ``limits.max_streams_per_client`` streams (server-streaming and
  bidirectional read-only calls: GetTables, Watch, reflection).

Health is exempt: ``Check`` is cheap and what supervisors poll, and
grpc-health's ``Watch`` is non-blocking (it holds no worker while it waits;
wrapping it would make it hold one).

Who is one client (:func:`client_key`): the identity of the TLS client
certificate (CN, else the first SAN) when one was presented; else, for a TCP
peer on another host, its IP address; for a loopback TCP peer, its
connection (``127.0.0.1:PORT``: local users share the address, and gRPC
clients in one process share one connection per target).  On the daemon's
Unix socket, its connection too: the credential relay
(:mod:`smroute.service.rpc.peercred`) gives each one its own peer name.  A bare
``"unix:"`` peer (a Unix socket without the relay) is not told apart and
the per-client limit does not apply to it; the reserved capacity and the
global limits still do.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable, Collection, Iterator
from typing import Any

import grpc

from smroute.service.rpc.auth import MUTATING_METHODS, DenyHook, identity_of, rewrapped
from smroute.service.settings import LimitsConfig

__all__ = ["HEALTH", "CapacityGuard", "client_key"]

#: The health methods: never counted nor refused for capacity (module doc).
HEALTH = ("/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch")


def client_key(context: grpc.ServicerContext) -> str | None:
    """Who the peer counts as for the per-client limit (module doc), e.g.
    ``"client web1.example"``, ``"client 10.0.0.7"``,
    ``"connection 127.0.0.1:53412"``; ``None`` when gRPC cannot tell (Unix socket)."""
    ident = identity_of(context)
    if ident:
        return f"client {ident}"
    kind, _, rest = context.peer().partition(":")
    if kind == "unix" and rest:
        return f"connection {rest}"
    if kind not in ("ipv4", "ipv6"):
        return None
    host = rest.rpartition(":")[0].strip("[]")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        return f"client {host}"
    return f"connection {rest}" if loopback else f"client {host}"


class CapacityGuard(grpc.ServerInterceptor):
    """Reserved capacity and per-client stream limits (module doc).

    ``limits``: read at each call (the daemon replaces it on reload), but for
    the read-only slots, fixed at start like the thread pool they divide.
    ``on_deny(method, code, message)`` is called for each refused call.
    """

    def __init__(self, limits: LimitsConfig, *, on_deny: DenyHook | None = None,
                 exempt: Collection[str] = (*MUTATING_METHODS, *HEALTH)) -> None:
        self.limits = limits
        self.read_slots = limits.read_slots
        self.exempt = frozenset(exempt)
        self.on_deny = on_deny
        self._lock = threading.Lock()
        self.reads = 0  # read-only calls running
        self.streams: dict[str, int] = {}  # streams open per client key

    @property
    def threads(self) -> int:
        """Size of the RPC thread pool this guard divides."""
        return self.read_slots + self.limits.reserved_workers

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Any],
                          handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(handler_call_details)
        method = handler_call_details.method  # type: ignore[attr-defined]
        if handler is None or method in self.exempt:
            return handler
        return _limited(handler, method, self)

    def enter(self, method: str, context: grpc.ServicerContext, stream: bool) -> list[str]:
        """Count a read-only call starting (and its client's stream); aborts the
        call with RESOURCE_EXHAUSTED if there is no room.  Returns the client
        key counted (an empty list: none) for :meth:`leave`; the client's count
        drops as soon as the call ends (a cancelled stream's thread may still
        wait up to its poll interval; its read slot is kept until then)."""
        key = client_key(context) if stream else None
        refused = ""
        with self._lock:
            per_client = self.limits.max_streams_per_client
            if self.reads >= self.read_slots:
                refused = (f"{self.reads} read-only calls and streams are running, the most "
                           f"the daemon serves at once (limits.max_streams + max_watchers + 16)"
                           f"; {self.limits.reserved_workers} more workers are kept for "
                           "LoadFabric, Route, ApplyFaults and health checks "
                           "(limits.reserved_workers); retry later")
            elif key is not None and self.streams.get(key, 0) >= per_client:
                refused = (f"{key} has {self.streams[key]} streams open; the per-client limit "
                           f"(limits.max_streams_per_client) is {per_client}; close some "
                           "(or cancel idle Watch streams) first")
            else:
                self.reads += 1
                if key is not None:
                    self.streams[key] = self.streams.get(key, 0) + 1
        if refused:
            code = grpc.StatusCode.RESOURCE_EXHAUSTED
            if self.on_deny is not None:
                self.on_deny(method, code, refused)
            context.abort(code, refused)
        held = [key] if key is not None else []
        if held and not context.add_callback(lambda: self._leave_client(held)):
            self._leave_client(held)  # the call has ended already
        return held

    def _leave_client(self, held: list[str]) -> None:
        """Drop the client's stream count of ``held`` (once: it is emptied)."""
        with self._lock:
            if held:
                key = held.pop()
                n = self.streams.pop(key) - 1
                if n:
                    self.streams[key] = n

    def leave(self, held: list[str]) -> None:
        """Undo :meth:`enter`."""
        self._leave_client(held)
        with self._lock:
            self.reads -= 1


def _limited(handler: grpc.RpcMethodHandler, method: str, guard: CapacityGuard
             ) -> grpc.RpcMethodHandler:
    """``handler`` counted by ``guard`` while it runs."""

    def wrap(behaviour: Callable[..., Any]) -> Callable[..., Any]:
        def run(request_or_iterator: Any, context: grpc.ServicerContext) -> Any:
            key = guard.enter(method, context, False)
            try:
                return behaviour(request_or_iterator, context)
            finally:
                guard.leave(key)
        return run

    def wrap_stream(behaviour: Callable[..., Any]) -> Callable[..., Any]:
        def run(request_or_iterator: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            # counted from the first step of the generator to its end or close
            # (a cancelled stream's generator is closed when gRPC drops it)
            key = guard.enter(method, context, True)
            try:
                yield from behaviour(request_or_iterator, context)
            finally:
                guard.leave(key)
        return run

    return rewrapped(handler, wrap, wrap_stream)
