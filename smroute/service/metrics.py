"""Prometheus metrics of the routing daemon, on their own registry and port.

:class:`ServiceMetrics` owns a private ``prometheus_client.CollectorRegistry``
(no process-global state, so several daemons or tests can live in one
process).  :func:`start_metrics_server` serves it over HTTP (``GET /metrics``)
on a separate address, loopback by default.

Metric names (all prefixed ``smroute_``):

==================================  =========  ===================================
``route_seconds{kind}``             histogram  route / reroute time, 1 ms .. 60 s
``routes_total{kind}``              counter    completed route / reroute runs
``epochs_committed_total``          counter    committed epochs
``epoch_id``                        gauge      id of the current epoch
``table_bytes``                     gauge      bytes of the current epoch's tables
``epoch_committed_timestamp_seconds`` gauge    Unix time of the last commit
``fault_events_total{kind}``        counter    fault events received, per kind (no dry run)
``requests_total{method,code}``     counter    finished RPCs per method, status code
``request_errors_total{method}``    counter    the same, status code not OK
``streams_open{method}``            gauge      open server streams
``reroute_failures_total{reason}``  counter    reroutes that left the last epoch serving
``route_rejections_total``          counter    Route requests that could not be routed as
                                               asked (not reroute failures)
``state_db_moved_aside_total``      counter    damaged state databases moved aside
``state_degraded``                  gauge      1 while acknowledged state was lost (no tables)
``build_info{version}``             gauge      1
==================================  =========  ===================================

Label values come from the server, but a misbehaving caller could still
create many series; each label keeps at most :data:`MAX_LABEL_VALUES`
distinct values (later ones are counted as ``"other"``) and values are cut
to :data:`MAX_LABEL_LEN` characters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest, start_http_server

from smroute import __version__
from smroute.errors import InputError
from smroute.routing.modes import MODES

__all__ = [
    "ServiceMetrics",
    "MetricsServer",
    "start_metrics_server",
    "ROUTE_BUCKETS",
    "MAX_LABEL_VALUES",
    "MAX_LABEL_LEN",
]

#: Histogram buckets (seconds) for route/reroute time: 1 ms .. 60 s.
ROUTE_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5,
    1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
)
MAX_LABEL_VALUES = 64
MAX_LABEL_LEN = 80
#: The routing modes of :func:`smroute.routing.engine.route`.
ROUTING_MODES = MODES


class _LabelGuard:
    """Bounds the distinct values of one label (thread-safe)."""

    def __init__(self, limit: int = MAX_LABEL_VALUES):
        self._seen: set[str] = set()
        self._limit = limit
        self._lock = threading.Lock()

    def __call__(self, value: object) -> str:
        v = str(value)[:MAX_LABEL_LEN] or "none"
        with self._lock:
            if v in self._seen:
                return v
            if len(self._seen) >= self._limit:
                return "other"
            self._seen.add(v)
            return v


class ServiceMetrics:
    """The daemon's metrics.  ``registry`` is private to this object.

    ``clock`` returns Unix time in seconds (for the commit timestamp); pass
    a fake one in tests.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._clock = clock
        r = self.registry
        self.route_seconds = Histogram(
            "smroute_route_seconds", "Time to route (kind=route) or reroute after fault "
            "events (kind=reroute) up to the committed epoch, in seconds.",
            ["kind"], buckets=ROUTE_BUCKETS, registry=r)
        self.routes_total = Counter(
            "smroute_routes", "Completed route / reroute runs.", ["kind"], registry=r)
        self.epochs_committed = Counter(
            "smroute_epochs_committed", "Committed routing epochs.", registry=r)
        self.epoch_id = Gauge("smroute_epoch_id", "Id of the epoch being served.", registry=r)
        self.table_bytes = Gauge(
            "smroute_table_bytes", "Bytes of the forwarding tables of the current epoch.",
            registry=r)
        self.epoch_timestamp = Gauge(
            "smroute_epoch_committed_timestamp_seconds",
            "Unix time when the current epoch was committed.", registry=r)
        self.fault_events = Counter(
            "smroute_fault_events", "Fault events received, per kind (e.g. link_down).",
            ["kind"], registry=r)
        self.requests = Counter(
            "smroute_requests", "Finished RPCs per method and gRPC status code name.",
            ["method", "code"], registry=r)
        self.request_errors = Counter(
            "smroute_request_errors", "Finished RPCs whose status code is not OK.",
            ["method"], registry=r)
        self.streams_open = Gauge(
            "smroute_streams_open", "Open server streams per method.", ["method"], registry=r)
        self.reroute_failures = Counter(
            "smroute_reroute_failures", "Reroutes that failed (the last good epoch kept "
            "serving), per reason.", ["reason"], registry=r)
        self.route_rejections = Counter(
            "smroute_route_rejections", "Route requests that could not be routed as asked "
            "(e.g. an algorithm the fabric does not suit, LIDs that do not fit): the request "
            "is refused and the epoch served unchanged; not a reroute failure.", registry=r)
        self.routing_mode = Gauge(
            "smroute_routing_mode", "1 for the routing mode of the epoch being served (tree: "
            "Dmodc; tree+cross: Dmodc with routes across one cable within a rank where the "
            "tree has none (Dragonfly+); tree+turns: Dmodc with routes through the turn root; "
            "tree+detours: Dmodc with detours over virtual lanes; tree+orient: Dmodc with the "
            "few destinations it "
            "cannot serve turned on one VL, channel dependencies acyclic; updown: the general "
            "up*/down* routing of a fabric that is no tree, towards every top switch; "
            "updown+detours, updown+orient: as tree+detours, tree+orient there; shortest: "
            "shortest paths in a direct network (torus, hypercube), a higher VL at each "
            "turn), 0 for "
            "the others.", ["mode"], registry=r)
        self.turn_lids = Gauge(
            "smroute_turn_lids", "Destination LIDs of the current epoch routed through the "
            "turn root.", registry=r)
        self.max_vls = Gauge(
            "smroute_max_vls", "Data VLs the current epoch's route was allowed (max_vls, or "
            "what max_vls auto chose from the subnet manager's VL facts; the log's "
            "epoch_committed says why).", registry=r)
        self.state_moved_aside = Counter(
            "smroute_state_db_moved_aside", "State databases found damaged, foreign or of a "
            "newer schema and moved aside.", registry=r)
        self.degraded = Gauge(
            "smroute_state_degraded", "1 while the daemon serves no tables because "
            "acknowledged state could not be rebuilt from the state database.", registry=r)
        info = Gauge("smroute_build_info", "smroute version.", ["version"], registry=r)
        info.labels(version=__version__).set(1)
        self._kind = _LabelGuard(8)
        self._fault_kind = _LabelGuard()
        self._method = _LabelGuard()
        self._code = _LabelGuard(32)
        self._reason = _LabelGuard()

    # ---- the calls the server makes

    def observe_route(self, seconds: float, kind: str) -> None:
        """A route (``kind="route"``) or reroute (``"reroute"``) took ``seconds``."""
        k = self._kind(kind)
        self.route_seconds.labels(kind=k).observe(max(0.0, float(seconds)))
        self.routes_total.labels(kind=k).inc()

    def epoch_committed(self, epoch_id: int, table_bytes: int, mode: str = "tree",
                        turn_lids: int = 0, max_vls: int = 1) -> None:
        """Epoch ``epoch_id`` with ``table_bytes`` of tables, routed in ``mode``
        (``turn_lids`` LIDs through the turn root, ``max_vls`` data VLs
        allowed), is now served."""
        self.epochs_committed.inc()
        self.epoch_id.set(int(epoch_id))
        self.table_bytes.set(int(table_bytes))
        self.epoch_timestamp.set(self._clock())
        for m in ROUTING_MODES:
            self.routing_mode.labels(mode=m).set(1 if m == mode else 0)
        self.turn_lids.set(int(turn_lids))
        self.max_vls.set(int(max_vls))

    def faults_received(self, n: int, kind: str) -> None:
        """``n`` fault events of ``kind`` arrived."""
        if n < 0:
            raise ValueError(f"fault event count must be >= 0, got {n}")
        self.fault_events.labels(kind=self._fault_kind(kind)).inc(n)

    def request(self, method: str, code: str) -> None:
        """An RPC ``method`` finished with status ``code`` (a name such as ``"OK"``)."""
        m, c = self._method(method), self._code(code)
        self.requests.labels(method=m, code=c).inc()
        if c != "OK":
            self.request_errors.labels(method=m).inc()

    def stream_opened(self, method: str) -> None:
        self.streams_open.labels(method=self._method(method)).inc()

    def stream_closed(self, method: str) -> None:
        self.streams_open.labels(method=self._method(method)).dec()

    def reroute_failed(self, reason: str) -> None:
        """A reroute failed for ``reason`` (a short category, e.g. ``"unroutable"``).
        ``"route"``: a Route request that could not be routed as asked (the
        request, not a fault: ``route_rejections_total``, not a reroute failure,
        so the "tables are stale" alert does not fire on a user's bad Route)."""
        if reason == "route":
            self.route_rejections.inc()
            return
        self.reroute_failures.labels(reason=self._reason(reason)).inc()

    def state_db_moved_aside(self) -> None:
        """The state database was moved aside at start."""
        self.state_moved_aside.inc()

    def state_degraded(self, degraded: bool) -> None:
        """The daemon entered (``True``) or left the degraded state."""
        self.degraded.set(1 if degraded else 0)

    # ---- reading

    def exposition(self) -> bytes:
        """The registry in Prometheus text format (what ``/metrics`` serves)."""
        return generate_latest(self.registry)

    def value(self, name: str, **labels: str) -> float | None:
        """Current value of sample ``name`` with exactly ``labels`` (``None`` if absent)."""
        v = self.registry.get_sample_value(name, labels or None)
        return None if v is None else float(v)


@dataclass
class MetricsServer:
    """A running ``/metrics`` HTTP server; ``close()`` stops it (idempotent)."""

    host: str
    port: int
    _httpd: Any
    _thread: threading.Thread
    _closed: bool = False
    scheme: str = "http"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}/metrics"

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_metrics_server(listen: str, metrics: ServiceMetrics, tls: Any = None
                         ) -> MetricsServer:
    """Serve ``metrics`` over HTTP at ``listen`` (``host:port`` or
    ``[v6]:port``; port 0 picks a free port, see ``.port``); over HTTPS with
    ``tls`` (a :class:`~smroute.service.settings.TlsConfig`: certificate,
    key, and client certificates signed by its ``client_ca`` when it
    requires them).

    Raises :class:`InputError` for a bad address, :class:`smroute.errors.SmrouteError`
    if the address cannot be bound (e.g. in use).
    """
    from smroute.errors import SmrouteError
    from smroute.service.config import parse_listen

    try:
        addr = parse_listen(listen, allow_unix=False)
    except ValueError as err:
        raise InputError(f"metrics_listen: {err}") from None
    try:
        kw: dict[str, Any] = {}
        if tls is not None:
            kw = {"certfile": str(tls.cert), "keyfile": str(tls.key),
                  "client_cafile": str(tls.client_ca) if tls.client_ca else None,
                  "client_auth_required": bool(tls.require_client_cert)}
        httpd, thread = start_http_server(addr.port, addr=addr.host, registry=metrics.registry,
                                          **kw)
    except OSError as err:
        raise SmrouteError(f"metrics_listen {listen}: cannot listen: "
                           f"{err.strerror or err}") from None
    return MetricsServer(addr.host, int(httpd.server_port), httpd, thread,
                         scheme="https" if tls is not None else "http")
