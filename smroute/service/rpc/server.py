"""The daemon process: gRPC server, health, reflection, auth, metrics, logs, signals.

:class:`Daemon` wires a :class:`~smroute.service.config.ServiceConfig` to a
:class:`~smroute.service.core.RoutingCore` and a ``grpc.Server``:

* listens on the configured address (``host:port`` or ``unix:/path``; port 0
  picks a free port), with TLS / mutual TLS when configured, message sizes
  bounded by ``limits``, and the :class:`~smroute.service.rpc.auth.MutationGuard`
  interceptor in front of the mutating RPCs;
* serves ``grpc.health.v1`` (NOT_SERVING until the configured fabric is
  routed, and again while shutting down) and server reflection;
* Prometheus metrics on ``metrics_listen`` (separate HTTP port);
* structured logs on stderr, one JSON object (or ``key=value`` text) per line;
* SIGTERM / SIGINT: stop accepting calls, let running calls and streams
  finish within ``shutdown_grace_s`` (Watch streams end at once), then stop
  the sequencer and close the worker pool;
* SIGHUP: reload the config file; settings that can change live (log level
  and format, coalescing window, epoch history, mutating identities, limits,
  ``fabric_dirs``, guid files, TLS certificate/key/client CA files) are
  applied, the others are reported as needing a restart; a bad file is
  logged and the last good config kept.  Precedence: the file's algorithm
  and LMC are defaults that a ``Route`` RPC overrides until the file changes
  that key; a reload of an unchanged file changes nothing about routing;
* one daemon per listen address (:func:`~smroute.service.rpc.listen.claim_listen`,
  before anything else starts); read-only calls cannot take the workers kept
  for mutations and health (:mod:`smroute.service.rpc.capacity`).

A ``ready_file`` (JSON: address, metrics URL, pid) is written atomically once
the daemon serves, for supervisors and tests.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import stat
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from smroute.errors import InputError, RoutingError, SmrouteError
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import GuidOverrides, read_guid_file
from smroute.fileio import atomic_write_text
from smroute.service.config import GUID_FILE_KEYS, ConfigError, ServiceConfig, load_config
from smroute.service.core import RoutingCore
from smroute.service.errors import ServiceError, Status
from smroute.service.log import Logger
from smroute.service.rpc._gen import smroute_pb2_grpc as pb_grpc
from smroute.service.rpc.capacity import CapacityGuard
from smroute.service.rpc.listen import ListenClaim, claim_listen
from smroute.service.rpc.peercred import CredentialRelay, peer_allow
from smroute.service.rpc.servicer import SERVICE_NAME, SmrouteServicer
from smroute.service.state.durable import Durable, new_instance_id
from smroute.service.state.resume import catch_up, reconcile_live

__all__ = ["Daemon", "Logger", "unix_relay"]


def unix_relay(cfg: ServiceConfig, path: str, log: Logger) -> CredentialRelay:
    """The credential relay of the Unix socket ``path``: mode 0660, group
    ``socket_group`` (a name or number; default: the daemon's group)."""
    from smroute.service.rpc.peercred import resolve_ids

    gid = None
    if cfg.socket_group is not None:
        try:
            gid = next(iter(resolve_ids([cfg.socket_group], "group")))
        except ValueError as err:
            raise ConfigError(str(err), key="socket_group") from None
    return CredentialRelay(path, group=gid, on_error=lambda m: log("warning", "relay_error",
                                                                     message=m))



def guid_overrides(cfg: ServiceConfig) -> GuidOverrides | None:
    """The roles overrides the config's guid files name (``None`` if none);
    a bad file is a :class:`ConfigError` naming its key."""
    files = {k: getattr(cfg, k) for k in GUID_FILE_KEYS}
    if not any(files.values()):
        return None
    sets: dict[str, frozenset[int]] = {}
    for key, path in files.items():
        try:
            sets[key] = read_guid_file(path) if path is not None else frozenset()
        except OSError as err:
            raise ConfigError(f"cannot read {path}: {err.strerror or err}", key=key) from None
        except InputError as err:
            raise ConfigError(str(err), key=key) from None
    return GuidOverrides(roots=sets["root_guid_file"], compute=sets["cn_guid_file"],
                         io=sets["io_guid_file"])

#: Limits that size the RPC thread pool at start (a reload reports them as
#: needing a restart and keeps the running values).
_POOL_LIMITS = ("max_streams", "max_watchers", "reserved_workers")


class Daemon:
    """One daemon (see module doc).  ``start()`` then ``wait()``; or ``stop()``."""

    def __init__(self, cfg: ServiceConfig, *, config_path: str | os.PathLike[str] | None = None,
                 overrides: dict[str, Any] | None = None, ready_file: str | None = None,
                 log: Logger | None = None,
                 instance_id: Callable[[], str] = new_instance_id) -> None:
        self.cfg = cfg
        #: where this start's instance id comes from (random; injected in tests)
        self.instance_id = instance_id
        self.config_path = Path(config_path) if config_path is not None else None
        self.overrides = dict(overrides or {})
        self.ready_file = ready_file
        self.log = log or Logger(fmt=cfg.log_format, level=cfg.log_level)
        self.core: RoutingCore | None = None
        self.server: grpc.Server | None = None
        self.health = health.HealthServicer()
        self.guard: Any = None
        self.metrics: Any = None
        self.metrics_server: Any = None
        self.tls_creds: Any = None
        self.address = ""
        self._stop = threading.Event()
        self._reload = threading.Event()
        self._unix_path: str | None = None
        self._claim: ListenClaim | None = None
        self.capacity: CapacityGuard | None = None
        self.relay: CredentialRelay | None = None

    # ------------------------------------------------------------ start
    def start(self) -> None:
        """Start the metrics and gRPC listeners, load and route the configured
        fabric (health NOT_SERVING meanwhile), then write the ready file."""
        cfg = self.cfg
        # one daemon per address: a second stops here, before it touches the
        # first one's socket or starts anything (exit 2)
        self._claim = claim_listen(cfg.listen_address)
        for w in cfg.warnings():
            self.log("warning", "config_warning", message=w)
        self._start_metrics()
        self.core = RoutingCore(
            workers=cfg.workers, algorithm=cfg.algorithm, lmc=cfg.lmc, max_vls=cfg.max_vls,
            all_ca_pairs=cfg.route_all_ca_pairs,
            epoch_history=cfg.epoch_history, coalesce_s=cfg.coalesce_ms / 1000.0,
            limits=cfg.limits, fabric_dirs=cfg.fabric_dirs, log=self.log,
            metrics=self.metrics, overrides=guid_overrides(cfg), durable=self._durable(),
        )
        # the last committed epoch, its down set and settings, and the events
        # acknowledged after it, before serving
        resumed = self.core.resume()
        # (degraded: the configured fabric waits for the operator, see resume)
        replaced = (cfg.fabric is not None and not self.core.degraded
                    and not self.core.durable.configured_unchanged(self.core.base,
                                                                   self.core.base_source))
        if resumed is not None and not replaced:
            catch_up(self.core, resumed)
        self._start_grpc()
        self._set_health(False)
        if replaced and cfg.fabric is not None:
            self._initial_route(cfg.fabric)
            resumed = None  # the configured fabric replaced the resumed state
        self._set_health(True)
        self.log("info", "serving", address=self.address, pid=os.getpid(),
                 metrics=self.metrics_server.url if self.metrics_server else None,
                 workers=cfg.workers, tls=cfg.tls is not None,
                 fabric_dirs=[str(d) for d in cfg.fabric_dirs])
        if self.ready_file:
            atomic_write_text(self.ready_file, json.dumps({
                "address": self.address, "pid": os.getpid(),
                "metrics": self.metrics_server.url if self.metrics_server else None,
            }) + "\n")
        if resumed is not None:  # a fabric from live discovery: what it finds now
            threading.Thread(target=reconcile_live, args=(self.core,), daemon=True,
                             name="smroute-reconcile").start()

    def _durable(self) -> Durable:
        """The state database of ``cfg.state`` (none if off); a second daemon on
        the same file, or a file that cannot be opened, stops the start."""
        from smroute.service.state.store import StateStore

        cfg = self.cfg
        store = (StateStore(cfg.state.path, keep_epochs=cfg.state.keep_epochs, log=self.log)
                 if cfg.state.path is not None else None)
        return Durable(store, instance=self.instance_id(), log=self.log, configured=cfg.fabric,
                       settings=(cfg.algorithm, cfg.lmc))

    def _start_metrics(self) -> None:
        try:
            from smroute.service.metrics import ServiceMetrics, start_metrics_server
        except ImportError:
            self.log("warning", "metrics_unavailable", message="smroute.service.metrics missing")
            return
        self.metrics = ServiceMetrics()
        if self.cfg.metrics_listen is not None:
            self.metrics_server = start_metrics_server(self.cfg.metrics_listen, self.metrics,
                                                       self.cfg.metrics_tls)

    def _start_grpc(self) -> None:
        cfg = self.cfg
        lim = cfg.limits
        addr = cfg.listen_address
        capacity = self.capacity = CapacityGuard(lim, on_deny=self._on_deny)
        interceptors: list[grpc.ServerInterceptor] = [capacity]
        try:
            from smroute.service.rpc.auth import MutationGuard
        except ImportError:
            MutationGuard = None  # type: ignore[assignment,misc]  # noqa: N806
        if addr.kind == "unix":
            self._prepare_unix(addr.path)
            self.relay = unix_relay(cfg, addr.path, self.log)
        if MutationGuard is not None:
            self.guard = MutationGuard(
                cfg.mutating_identities, tls=cfg.tls is not None,
                loopback_only=addr.is_loopback, allow_insecure=cfg.allow_insecure_mutations,
                on_deny=self._on_deny, relay=self.relay,
            )
            interceptors.append(self.guard)
        # read-only calls get at most capacity.read_slots of these threads;
        # the reserved rest serve mutating calls and health checks
        threads = capacity.threads
        options = [
            ("grpc.max_send_message_length", lim.max_message_bytes),
            ("grpc.max_receive_message_length", lim.max_receive_bytes),
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.server(ThreadPoolExecutor(threads, thread_name_prefix="smroute-rpc"),
                             interceptors=interceptors, options=options,
                             maximum_concurrent_rpcs=threads + lim.reserved_workers)
        assert self.core is not None
        pb_grpc.add_SmrouteServicer_to_server(SmrouteServicer(self.core), server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
             reflection.SERVICE_NAME), server)
        # on a Unix socket gRPC listens privately behind the relay, which
        # learns each client's credentials (smroute.service.rpc.peercred)
        target = self.relay.grpc_target if self.relay is not None else addr.grpc_address
        port = self._bind(server, target, cfg)
        if addr.kind == "tcp" and port == 0:
            raise InputError(f"listen {cfg.listen}: cannot bind (address in use, or not "
                             "an address of this host)")
        server.start()
        self.server = server
        if self.relay is not None:
            try:  # mode 0660 from birth, group socket_group (default: the daemon's)
                self.relay.start()
            except OSError as err:
                raise SmrouteError(f"listen {cfg.listen}: cannot bind: "
                                   f"{err.strerror or err}") from None
            if self.guard is not None:  # the default group is the socket's
                self.guard.unix_allow = self._unix_allow(cfg)
            self.address = f"unix:{addr.path}"
        else:
            host = f"[{addr.host}]" if ":" in addr.host else addr.host
            self.address = f"{host}:{port}"

    def _bind(self, server: grpc.Server, target: str, cfg: ServiceConfig) -> int:
        """Add the listening port (TLS if configured); returns the bound port."""
        try:
            if cfg.tls is not None:
                from smroute.service.rpc.auth import ReloadableServerCredentials, check_tls

                for w in check_tls(cfg.tls):
                    self.log("warning", "tls_warning", message=w)
                self.tls_creds = ReloadableServerCredentials(cfg.tls)
                return int(server.add_secure_port(target, self.tls_creds.credentials))
            return int(server.add_insecure_port(target))
        except RuntimeError as err:  # a bad address for this host: exit 2
            raise InputError(f"listen {cfg.listen}: cannot bind: {err}") from None

    def _unix_allow(self, cfg: ServiceConfig) -> Any:
        """Who may mutate over the Unix socket: ``mutating_users`` and
        ``mutating_groups`` (default: the socket's group)."""
        assert self.relay is not None
        try:
            return peer_allow(cfg.mutating_users, cfg.mutating_groups, self.relay.socket_gid())
        except ValueError as err:
            raise ConfigError(str(err), key="mutating_users/mutating_groups") from None

    def _prepare_unix(self, path: str) -> None:
        """Remove a stale socket file at ``path`` (never a regular file): the
        lock taken in :meth:`start` says no live daemon serves it."""
        with contextlib.suppress(FileNotFoundError):
            st = os.lstat(path)
            if not stat.S_ISSOCK(st.st_mode):
                raise SmrouteError(f"listen unix:{path}: exists and is not a socket")
            os.unlink(path)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._unix_path = path

    def _on_deny(self, method: str, code: grpc.StatusCode, message: str) -> None:
        self.log("warning", "request_denied", method=method, code=code.name, message=message)
        if self.metrics is not None:
            self.metrics.request(method.rsplit("/", 1)[-1], code.name)

    def _initial_route(self, path: Path) -> None:
        core = self.core
        assert core is not None
        try:
            fabric: Fabric = core.read_fabric_path(str(path))
            core.load_fabric(fabric, str(path))
            ep = core.route()
        except ServiceError as err:
            msg = err.message if str(path) in err.message else f"{path}: {err.message}"
            if err.status == Status.FAILED_PRECONDITION:
                raise RoutingError(f"fabric: {msg}") from None  # exit 3
            if err.status == Status.INVALID_ARGUMENT:
                raise InputError(f"fabric: {msg}") from None  # exit 2
            raise SmrouteError(f"fabric: {msg}") from None
        self.log("info", "initial_route", epoch=ep.id, fabric=str(path),
                 seconds=round(sum(ep.timings.values()), 4))

    def _set_health(self, serving: bool) -> None:
        st = (health_pb2.HealthCheckResponse.SERVING if serving
              else health_pb2.HealthCheckResponse.NOT_SERVING)
        self.health.set("", st)
        self.health.set(SERVICE_NAME, st)

    # ------------------------------------------------------------ run
    def install_signals(self) -> None:
        """SIGTERM/SIGINT stop gracefully, SIGHUP reloads the config."""
        signal.signal(signal.SIGTERM, lambda *_: self._stop.set())
        signal.signal(signal.SIGINT, lambda *_: self._stop.set())
        signal.signal(signal.SIGHUP, lambda *_: self._reload.set())

    def wait(self) -> None:
        """Serve until SIGTERM/SIGINT (or :meth:`request_stop`); handles SIGHUP."""
        while not self._stop.is_set():
            self._stop.wait(0.2)
            if self._reload.is_set():
                self._reload.clear()
                self.reload()
        self.stop()

    def request_stop(self) -> None:
        """Ask :meth:`wait` to return and the daemon to stop (signal-safe)."""
        self._stop.set()

    def stop(self) -> None:
        """Graceful shutdown (module doc)."""
        grace = self.cfg.shutdown_grace_s
        self.log("info", "shutting_down", grace_s=grace)
        self._set_health(False)
        if self.core is not None:
            self.core.shutting_down.set()
            self.core.store.close()
        if self.server is not None:
            self.server.stop(grace).wait(grace + 5)
        if self.core is not None:
            self.core.close()
        if self.metrics_server is not None:
            self.metrics_server.close()
        if self.relay is not None:
            self.relay.close()
        if self._unix_path:
            with contextlib.suppress(OSError):
                os.unlink(self._unix_path)
        if self._claim is not None:
            self._claim.release()
        self.log("info", "stopped")

    # ------------------------------------------------------------ reload
    def reload(self) -> bool:
        """Reload the config file (SIGHUP); keep the last good one on error."""
        if self.config_path is None:
            self.log("warning", "reload_ignored", message="no config file (started without "
                     "--config)")
            return False
        try:
            new = load_config(self.config_path)
            if self.overrides:
                new = dataclasses.replace(new, **self.overrides)
            overrides = guid_overrides(new)
        except (ConfigError, SmrouteError) as err:
            self.log("error", "reload_failed", message=str(err), keeping="last good config")
            return False
        old = self.cfg
        keep_tls = old.tls
        if new.tls != old.tls and new.tls is not None and self.tls_creds is not None:
            try:  # certificate rotation: the next handshakes use the new files
                for w in self.tls_creds.reload(new.tls):
                    self.log("warning", "tls_warning", message=w)
                keep_tls = new.tls
                self.log("info", "tls_reloaded", cert=str(new.tls.cert))
            except (ConfigError, SmrouteError) as err:
                self.log("error", "tls_reload_failed", message=str(err),
                         keeping="current certificates")
        restart = [k for k in ("listen", "workers", "metrics_listen", "metrics_tls", "fabric",
                               "state", "socket_group") if getattr(old, k) != getattr(new, k)]
        if new.tls != keep_tls:
            restart.append("tls")
        if old.limits.max_message_bytes != new.limits.max_message_bytes or \
                old.limits.max_receive_bytes != new.limits.max_receive_bytes:
            restart.append("limits.max_message_bytes/max_receive_bytes")
        # the RPC thread pool and its read-only share are sized at start
        pool_keys = [k for k in _POOL_LIMITS if getattr(old.limits, k) != getattr(new.limits, k)]
        restart += [f"limits.{k}" for k in pool_keys]
        new = dataclasses.replace(new, limits=dataclasses.replace(
            new.limits, **{k: getattr(old.limits, k) for k in pool_keys}))
        core = self.core
        assert core is not None
        self.log.configure(new.log_format, new.log_level)
        core.seq.coalesce_s = new.coalesce_ms / 1000.0
        core.store.set_history(new.epoch_history)
        # Precedence: the file's algorithm and lmc are defaults; a Route RPC's
        # choice stands until the file changes that key (an unchanged file
        # changes nothing about routing: no epoch, no setting)
        routing = {k: getattr(new, k)
                   for k in ("algorithm", "lmc", "max_vls", "route_all_ca_pairs")
                   if getattr(new, k) != getattr(old, k)}
        changes: dict[str, Any] = {"all_ca_pairs" if k == "route_all_ca_pairs" else k: v
                                   for k, v in routing.items()}
        if overrides != core.settings.overrides:
            changes["overrides"] = overrides
            routing["guid_files"] = "changed"
        if changes:  # on the core's sequencer, in order with routes and fault batches
            try:
                core.configure(**changes)
                self.log("info", "routing_settings_changed", applies="at the next routing",
                         **routing)
            except ServiceError as err:
                self.log("error", "routing_settings_not_changed", error=err.message)
        core.limits = new.limits
        if self.capacity is not None:
            self.capacity.limits = new.limits
        if tuple(map(str, new.fabric_dirs)) != core.fabric_dirs:
            core.fabric_dirs = tuple(str(d) for d in new.fabric_dirs)
            self.log("info", "fabric_dirs_changed", fabric_dirs=list(core.fabric_dirs))
        # Who may mutate belongs to the listener that runs: while a TLS change
        # waits for a restart, the running listener keeps its identity check
        # (a file turning TLS off must not open mutations to every CA client).
        kept = ["listen", "workers", "metrics_listen", "metrics_tls", "fabric", "state",
                "socket_group"]
        if "tls" in restart:
            kept += ["mutating_identities", "allow_insecure_mutations"]
        elif self.guard is not None:
            self.guard.allowed = frozenset(new.mutating_identities)
            self.guard.allow_insecure = new.allow_insecure_mutations
            if self.relay is not None:
                try:
                    self.guard.unix_allow = self._unix_allow(new)
                except ConfigError as err:
                    self.log("error", "reload_failed", message=str(err),
                             keeping="the running mutating_users / mutating_groups")
        try:
            self.cfg = dataclasses.replace(
                new, tls=keep_tls, **{k: getattr(old, k) for k in kept})
        except (ConfigError, SmrouteError):
            self.cfg = new  # the mix is inconsistent; the restart-only keys still run as before
        for w in new.warnings():
            self.log("warning", "config_warning", message=w)
        self.log("info", "reloaded", config=str(self.config_path),
                 needs_restart=restart or None)
        return True

