"""How ``smroute ctl`` reaches the daemon: its address (``--address``, the
daemon's config, ``$SMROUTE_DAEMON``, the default socket), TLS, a quick
probe that tells a missing socket or a refused connection at once, and the
exit status of a failed call."""

from __future__ import annotations

import argparse
import os
from typing import Any

import grpc

from smroute.cli.inputs import float_range
from smroute.errors import DaemonUnreachableError, InputError, SmrouteError
from smroute.service.rpc.client import ADDRESS_ENV, SmrouteClient, default_target
from smroute.service.rpc.listen import DEFAULT_LISTEN

__all__ = ["RpcFailed", "add_daemon_options", "address_of",
           "connect", "probe", "rpc_error"]


_BAD_INPUT = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
              grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
              grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.ALREADY_EXISTS}


class RpcFailed(SmrouteError):
    """A call the daemon answered with an error, with the exit status it maps to."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def address_of(args: argparse.Namespace) -> str:
    """``--address``, else the listen address of ``--config``, else
    ``$SMROUTE_DAEMON``, else :data:`DEFAULT_LISTEN`."""
    if args.address:
        return str(args.address)
    if args.config:
        return _config_address(args.config)
    return default_target()


def _config_address(path: str) -> str:
    """The address a client on the daemon's host reaches the config's
    ``listen`` at (a wildcard host becomes loopback)."""
    from smroute.service.config import ConfigError, load_config

    try:
        listen = str(load_config(path, check_files=False).listen)
    except ConfigError as err:
        raise InputError(f"--config: {err}", source=path) from None
    except OSError as err:
        raise InputError(f"--config: cannot read: {err.strerror or err}", source=path) from None
    if listen.startswith("0.0.0.0:"):
        return "127.0.0.1:" + listen.split(":", 1)[1]
    if listen.startswith("[::]:"):
        return "[::1]:" + listen.rsplit(":", 1)[1]
    return listen


def rpc_error(err: grpc.RpcError, address: str) -> SmrouteError:
    """The CLI error of a failed call: UNAVAILABLE is
    :class:`DaemonUnreachableError` (exit 4), bad requests exit 2,
    FAILED_PRECONDITION 3, anything else 1."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = (err.details() if hasattr(err, "details") else "") or str(code.name)
    if code == grpc.StatusCode.UNAVAILABLE:
        return DaemonUnreachableError(f"cannot reach the daemon at {address}: {details}")
    status = 2 if code in _BAD_INPUT else 3 if code == grpc.StatusCode.FAILED_PRECONDITION else 1
    return RpcFailed(f"{code.name}: {details}", status)


def probe(address: str, timeout: float) -> str | None:
    """Why nothing answers at ``address`` (a socket that does not exist, a
    connection refused: told at once instead of after gRPC's retries), or
    ``None`` if a connection opens (or the address is not one to probe)."""
    import socket

    target: str | tuple[str, int]
    if address.startswith("unix:"):
        path = address[5:].removeprefix("//")
        if not os.path.exists(path):
            return "no such socket"
        family, target = socket.AF_UNIX, path
    else:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or "/" in host:
            return None
        family, target = (socket.AF_INET6 if host.startswith("[") else socket.AF_INET,
                          (host.strip("[]"), int(port)))
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(target)
    except OSError as err:
        if isinstance(err, socket.gaierror) or family != socket.AF_UNIX and isinstance(
                err, TimeoutError):
            return None  # a name to resolve, or slow: let gRPC try
        return err.strerror or str(err)
    return None


def connect(args: argparse.Namespace) -> SmrouteClient:
    """A client of the daemon the options name, once its channel is ready
    (:class:`DaemonUnreachableError` if it does not become ready within
    ``--connect-timeout``)."""
    address = address_of(args)
    problem = probe(address, args.connect_timeout)
    if problem:
        raise DaemonUnreachableError(
            f"cannot reach the daemon at {address}: {problem} (is smroute serve running "
            f"there? set --address or ${ADDRESS_ENV})")
    creds = None
    if args.tls_ca or args.tls_cert or args.tls_key:
        from smroute.service.config import ConfigError
        from smroute.service.rpc.auth import client_credentials

        try:
            creds = client_credentials(args.tls_ca, args.tls_cert, args.tls_key)
        except (ConfigError, OSError, ValueError) as err:
            raise InputError(f"TLS options: {err}") from None
    client = SmrouteClient(address, credentials=creds, timeout=args.timeout,
                           server_name=args.tls_server_name)
    try:
        client.wait_ready(args.connect_timeout)
    except grpc.FutureTimeoutError:
        client.close()
        raise DaemonUnreachableError(
            f"cannot reach the daemon at {address} within {args.connect_timeout:g} s (is "
            f"smroute serve running there? set --address or ${ADDRESS_ENV})") from None
    return client


def add_daemon_options(p: argparse.ArgumentParser, *, top: bool) -> None:
    """The daemon's address, TLS and timeouts: on ``ctl`` itself with their
    defaults (``top``), and on each subcommand without any (so ``smroute ctl
    --address A status`` and ``smroute ctl status --address A`` both work)."""
    def d(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    g = p.add_argument_group("daemon")
    g.add_argument("--address", metavar="ADDR", default=d(None),
                   help=f"the daemon: host:port or unix:/path (default ${ADDRESS_ENV}, else "
                   f"{DEFAULT_LISTEN})")
    g.add_argument("--config", metavar="FILE", default=d(None),
                   help="take the address from the daemon's config file (its listen:)")
    g.add_argument("--tls-ca", metavar="PEM", default=d(None),
                   help="TLS: CA certificate to trust")
    g.add_argument("--tls-cert", metavar="PEM", default=d(None),
                   help="TLS: client certificate (mutual TLS)")
    g.add_argument("--tls-key", metavar="PEM", default=d(None), help="TLS: key of --tls-cert")
    g.add_argument("--tls-server-name", metavar="NAME", default=d(None),
                   help="TLS: name to check in the daemon's certificate")
    g.add_argument("--timeout", type=float_range(0, above=True), default=d(120.0), metavar="S",
                   help="seconds per call (default 120)")
    g.add_argument("--connect-timeout", type=float_range(0, above=True), default=d(5.0),
                   metavar="S", help="seconds to wait for the connection (default 5)")
