"""Transport security for the daemon: TLS credentials and the mutation guard.

* :func:`server_credentials` turns a :class:`~smroute.service.config.TlsConfig`
  into ``grpc.ServerCredentials`` (TLS, or mutual TLS when a client CA is set
  and client certificates are required).
* :class:`MutationGuard` is a ``grpc.ServerInterceptor`` that lets only
  allowed client identities call the mutating RPCs (:data:`MUTATING_METHODS`);
  read-only RPCs pass untouched.

Identities are read from the peer's verified certificate
(``context.auth_context()``): the subject common name and the subject
alternative names (DNS, URI, ...).  A client is allowed when any of them is
in the allowed set.  On the Unix socket the peer's kernel credentials
(``SO_PEERCRED``, see :mod:`smroute.service.rpc.peercred`) decide instead.
Plaintext TCP allows mutations only when the operator explicitly set
``allow_insecure``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import grpc

from smroute.service.rpc.peercred import CredentialRelay, PeerAllow
from smroute.service.rpc.tls import check_tls, read_pem
from smroute.service.settings import ConfigError, TlsConfig

__all__ = [
    "SERVICE_NAME",
    "MUTATING_METHODS",
    "MutationGuard",
    "rewrapped",
    "server_credentials",
    "check_tls",
    "ReloadableServerCredentials",
    "client_credentials",
    "identities_of",
    "identity_of",
]

SERVICE_NAME = "smroute.v1.Smroute"
#: Full gRPC method names that change the daemon's state.  ApplyFaults with
#: dry_run is treated as mutating too (it costs a reroute).
MUTATING_METHODS: frozenset[str] = frozenset(
    f"/{SERVICE_NAME}/{m}" for m in ("LoadFabric", "Route", "ApplyFaults", "RouteSubnet")
)

def server_credentials(tls: TlsConfig) -> grpc.ServerCredentials:
    """gRPC server credentials for ``tls``.

    Reads ``tls.cert`` / ``tls.key`` (and ``tls.client_ca``); with
    ``require_client_cert`` the handshake fails for clients without a
    certificate signed by ``client_ca`` (mutual TLS); without it no client
    certificate is asked for.  Raises :class:`ConfigError` naming the key for
    a missing, unreadable or non-PEM file, a key that does not match the
    certificate, or an expired certificate (see :func:`check_tls`).
    """
    check_tls(tls)
    cert = read_pem(Path(tls.cert), "tls.cert", "CERTIFICATE")
    key = read_pem(Path(tls.key), "tls.key", "PRIVATE KEY")
    ca = None
    if tls.client_ca is not None:
        ca = read_pem(Path(tls.client_ca), "tls.client_ca", "CERTIFICATE")
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=bool(tls.require_client_cert)
    )


class ReloadableServerCredentials:
    """Server TLS credentials whose certificate, key and client CA can be
    replaced while the server runs (certificate rotation on SIGHUP).

    ``credentials`` goes to ``server.add_secure_port``; :meth:`reload` reads
    the new files (checked with :func:`check_tls`) and the next TLS handshake
    uses them; connections already open keep their session.  Whether client
    certificates are required is fixed for the listener's lifetime: a reload
    that changes ``require_client_cert`` raises :class:`ConfigError` (restart
    instead) and keeps the current files.
    """

    def __init__(self, tls: TlsConfig) -> None:
        self.require_client_cert = bool(tls.require_client_cert)
        self.tls = tls
        self._lock = threading.Lock()
        self._pending: Any = None
        self.credentials = grpc.dynamic_ssl_server_credentials(
            self._configuration(tls), self._fetch,
            require_client_authentication=self.require_client_cert)

    @staticmethod
    def _configuration(tls: TlsConfig) -> Any:
        check_tls(tls)
        cert = read_pem(Path(tls.cert), "tls.cert", "CERTIFICATE")
        key = read_pem(Path(tls.key), "tls.key", "PRIVATE KEY")
        ca = (read_pem(Path(tls.client_ca), "tls.client_ca", "CERTIFICATE")
              if tls.client_ca is not None else None)
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)

    def _fetch(self) -> Any:
        # called by gRPC before every new handshake: hand over a pending
        # configuration once, else None (= keep the current one)
        with self._lock:
            pending, self._pending = self._pending, None
        return pending

    def reload(self, tls: TlsConfig) -> tuple[str, ...]:
        """Use the files of ``tls`` from the next handshake on; returns
        :func:`check_tls` warnings.  Raises :class:`ConfigError` (nothing
        changes) for unusable files or a changed ``require_client_cert``."""
        if bool(tls.require_client_cert) != self.require_client_cert:
            raise ConfigError("changing require_client_cert needs a restart (the listener "
                              "keeps its setting)", key="tls.require_client_cert")
        warnings = check_tls(tls)
        configuration = self._configuration(tls)
        with self._lock:
            self._pending = configuration
            self.tls = tls
        return warnings


def client_credentials(ca: str | Path | None = None, cert: str | Path | None = None,
                       key: str | Path | None = None) -> grpc.ChannelCredentials:
    """gRPC channel credentials: trust ``ca`` (PEM file; ``None`` = system
    roots) and present ``cert`` / ``key`` (PEM files) when both are given."""
    if (cert is None) != (key is None):
        raise ConfigError("expected both a client certificate and its key, or neither",
                          key="tls.cert" if cert is None else "tls.key")
    root = read_pem(Path(ca), "ca", "CERTIFICATE") if ca is not None else None
    chain = read_pem(Path(cert), "cert", "CERTIFICATE") if cert is not None else None
    pkey = read_pem(Path(key), "key", "PRIVATE KEY") if key is not None else None
    return grpc.ssl_channel_credentials(root_certificates=root, private_key=pkey,
                                        certificate_chain=chain)


def _decode(values: Any) -> list[str]:
    out = []
    for v in values or ():
        s = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
        if s:
            out.append(s)
    return out


def identities_of(context: grpc.ServicerContext) -> tuple[str, ...]:
    """Every identity of the peer's verified client certificate: the subject
    CN first, then the subject alternative names, without duplicates.  Empty
    when the peer presented no certificate or the channel is not TLS."""
    try:
        auth = context.auth_context() or {}
    except Exception:  # noqa: BLE001 - a context without auth info
        return ()
    names = _decode(auth.get("x509_common_name"))
    names += _decode(auth.get("x509_subject_alternative_name"))
    seen: dict[str, None] = {}
    for n in names:
        seen.setdefault(n, None)
    return tuple(seen)


def identity_of(context: grpc.ServicerContext) -> str | None:
    """The peer's main identity (certificate CN, else its first SAN), or ``None``."""
    ids = identities_of(context)
    return ids[0] if ids else None


def _is_tls(context: grpc.ServicerContext) -> bool:
    try:
        auth = context.auth_context() or {}
    except Exception:  # noqa: BLE001
        return False
    return b"ssl" in (auth.get("transport_security_type") or [])


#: ``on_deny(method, code, message)``: called for each refused call (metrics, logs).
DenyHook = Callable[[str, grpc.StatusCode, str], None]


class MutationGuard(grpc.ServerInterceptor):
    """Refuse mutating RPCs to clients that may not mutate.

    On a Unix socket (``relay``: the daemon's
    :class:`~smroute.service.rpc.peercred.CredentialRelay`, which knows each
    connection's ``SO_PEERCRED`` credentials) the peer's uid or one of its
    groups must be in ``unix_allow``, whatever the socket file's mode.  Over TCP
    a mutation needs mutual TLS: a verified client certificate, one of
    ``allowed_identities`` when that is not empty; or ``allow_insecure``
    (plaintext mutations, loopback included).  ``tls``: the listener uses TLS.

    A refused call ends with PERMISSION_DENIED (peer or identity not allowed,
    or plaintext) or UNAUTHENTICATED (TLS but no client certificate), with a
    message naming the method and the peer; ``on_deny`` is called with the same.
    """

    def __init__(self, allowed_identities: Collection[str], *, tls: bool,
                 allow_insecure: bool, loopback_only: bool = False,
                 mutating_methods: Collection[str] = MUTATING_METHODS,
                 on_deny: DenyHook | None = None, relay: CredentialRelay | None = None,
                 unix_allow: PeerAllow | None = None) -> None:
        self.allowed = frozenset(allowed_identities)
        self.tls = tls
        self.loopback_only = loopback_only  # informational: loopback grants nothing
        self.allow_insecure = allow_insecure
        self.mutating = frozenset(mutating_methods)
        self.on_deny = on_deny
        self.relay = relay
        self.unix_allow = unix_allow

    def check(self, method: str, context: grpc.ServicerContext
              ) -> tuple[grpc.StatusCode, str] | None:
        """``None`` if ``method`` may run for this peer, else (code, message)."""
        if method not in self.mutating:
            return None
        short = method.rsplit("/", 1)[-1]
        if self.relay is not None:
            cred = self.relay.peer_credentials(context.peer())
            allow = self.unix_allow
            if cred is not None and allow is not None and allow.allows(cred):
                return None
            who = f"the Unix-socket peer ({cred})" if cred is not None else "an unknown peer"
            return (grpc.StatusCode.PERMISSION_DENIED,
                    f"{short} changes the daemon's state: {who} is not allowed "
                    f"(mutating_users / mutating_groups: "
                    f"{allow.describe() if allow is not None else 'none'})")
        if not self.tls or not _is_tls(context):
            if self.allow_insecure:
                return None
            return (grpc.StatusCode.PERMISSION_DENIED,
                    f"{short} changes the daemon's state and is refused over plaintext TCP; "
                    "use the Unix socket, configure mutual TLS (tls: with client_ca and "
                    "require_client_cert: true), or set allow_insecure_mutations: true")
        ids = identities_of(context)
        if not ids:
            return (grpc.StatusCode.UNAUTHENTICATED,
                    f"{short} changes the daemon's state and needs a client certificate "
                    "(mutual TLS); none was presented")
        if self.allowed and self.allowed.isdisjoint(ids):
            return (grpc.StatusCode.PERMISSION_DENIED,
                    f"client {ids[0]!r} may not call {short} (it changes the daemon's state); "
                    f"its certificate names {', '.join(ids)}, none is in mutating_identities")
        return None

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Any],
                          handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(handler_call_details)
        method = handler_call_details.method  # type: ignore[attr-defined]
        if handler is None or method not in self.mutating:
            return handler
        return _guarded(handler, method, self)


def _guarded(handler: grpc.RpcMethodHandler, method: str, guard: MutationGuard
             ) -> grpc.RpcMethodHandler:
    """``handler`` with the guard's check run before its behaviour."""

    def deny_or_none(context: grpc.ServicerContext) -> None:
        refused = guard.check(method, context)
        if refused is not None:
            code, msg = refused
            if guard.on_deny is not None:
                guard.on_deny(method, code, msg)
            context.abort(code, msg)

    def wrap(behaviour: Callable[..., Any]) -> Callable[..., Any]:
        def run(request_or_iterator: Any, context: grpc.ServicerContext) -> Any:
            deny_or_none(context)
            return behaviour(request_or_iterator, context)
        return run

    def wrap_stream(behaviour: Callable[..., Any]) -> Callable[..., Any]:
        def run(request_or_iterator: Any, context: grpc.ServicerContext) -> Any:
            deny_or_none(context)
            yield from behaviour(request_or_iterator, context)
        return run

    return rewrapped(handler, wrap, wrap_stream)


Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


def rewrapped(handler: grpc.RpcMethodHandler, wrap: Wrapper, wrap_stream: Wrapper
              ) -> grpc.RpcMethodHandler:
    """``handler`` with its behaviour wrapped: ``wrap`` for calls that answer
    once, ``wrap_stream`` (a generator) for calls that answer with a stream."""
    h: Any = handler
    kw = {"request_deserializer": h.request_deserializer,
          "response_serializer": h.response_serializer}
    if h.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(wrap(h.unary_unary), **kw)
    if h.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(wrap_stream(h.unary_stream), **kw)
    if h.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(wrap(h.stream_unary), **kw)
    return grpc.stream_stream_rpc_method_handler(wrap_stream(h.stream_stream), **kw)
