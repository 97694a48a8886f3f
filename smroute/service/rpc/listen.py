"""Listen addresses of the routing daemon (``host:port``, ``[v6]:port``,
``unix:/absolute/path``): :func:`parse_listen` and :class:`ListenAddress`
(re-exported by :mod:`smroute.service.settings`), and :func:`claim_listen`,
which makes sure one daemon serves an address."""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import os
import re
import socket
from dataclasses import dataclass
from typing import Literal

from smroute.errors import InputError

#: Where the daemon listens unless configured otherwise (the systemd unit's
#: RuntimeDirectory): mode 0660, mutations by peer credentials.  Clients
#: connect here by default.
DEFAULT_LISTEN = "unix:/run/smroute/smroute.sock"

__all__ = ["LISTEN_EXPECTED", "ListenAddress", "ListenClaim", "claim_listen", "parse_listen"]

#: sun_path is 108 bytes including the terminating NUL.
_UNIX_PATH_MAX = 107


@dataclass(frozen=True)
class ListenAddress:
    """A parsed listen address.

    ``kind`` is ``"tcp"`` (``host``, ``port`` set; ``host`` without brackets)
    or ``"unix"`` (``path`` set).  ``grpc_address`` is the form
    ``grpc.Server.add_*_port`` takes.
    """

    kind: Literal["tcp", "unix"]
    host: str = ""
    port: int = 0
    path: str = ""

    @property
    def is_loopback(self) -> bool:
        """True for Unix sockets, ``localhost``, 127.0.0.0/8 and ``::1``."""
        if self.kind == "unix":
            return True
        if self.host.lower() in ("localhost", "localhost."):
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name other than localhost: cannot tell, assume not

    @property
    def grpc_address(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return self.grpc_address


_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")
#: What a listen address may be (for error messages).
LISTEN_EXPECTED = "'host:port', '[ipv6]:port' or 'unix:/absolute/path'"


def parse_listen(value: str, *, allow_unix: bool = True) -> ListenAddress:
    """Parse ``host:port``, ``[v6]:port`` or (if ``allow_unix``) ``unix:/abs/path``.

    Raises ``ValueError`` whose message says what was expected.  Port 0 (pick a
    free port) is allowed.
    """
    expected = LISTEN_EXPECTED if allow_unix else "'host:port' or '[ipv6]:port'"
    if not isinstance(value, str) or not value or value != value.strip():
        raise ValueError(f"expected {expected}, got {value!r}")
    if value.startswith("unix:"):
        if not allow_unix:
            raise ValueError(f"expected {expected} (no Unix socket here), got {value!r}")
        path = value[len("unix:"):]
        if path.startswith("//"):  # unix:///abs/path (the URI form) means /abs/path
            path = path[2:]
        if not path.startswith("/"):
            raise ValueError(f"expected an absolute socket path after 'unix:', got {value!r}")
        if len(os.fsencode(path)) > _UNIX_PATH_MAX:
            raise ValueError(
                f"Unix socket path is {len(os.fsencode(path))} bytes, "
                f"at most {_UNIX_PATH_MAX} fit in sun_path: {value!r}"
            )
        if "\0" in path:
            raise ValueError(f"NUL byte in socket path {value!r}")
        return ListenAddress("unix", path=os.path.normpath(path))
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or value[end + 1:end + 2] != ":":
            raise ValueError(f"expected {expected}, got {value!r}")
        host, port_s = value[1:end], value[end + 2:]
        try:
            if ipaddress.ip_address(host).version != 6:
                raise ValueError
        except ValueError:
            raise ValueError(f"expected an IPv6 address inside [...], got {value!r}") from None
    else:
        host, sep, port_s = value.rpartition(":")
        if not sep or not host:
            raise ValueError(f"expected {expected}, got {value!r}")
        if ":" in host:
            raise ValueError(f"an IPv6 address needs brackets, e.g. '[::1]:50051', got {value!r}")
        if not _HOSTNAME.match(host):
            try:
                ipaddress.ip_address(host)
            except ValueError:
                raise ValueError(f"expected a host name or IP address, got {host!r} "
                                 f"in {value!r}") from None
    if not port_s.isdigit() or not 0 <= int(port_s) <= 65535:
        raise ValueError(f"expected a port 0..65535, got {port_s!r} in {value!r}")
    return ListenAddress("tcp", host=host, port=int(port_s))


class ListenClaim:
    """A listen address held by this process (:func:`claim_listen`);
    :meth:`release` lets it go (also at process exit)."""

    def __init__(self, lock_fd: int | None = None, lock_path: str = "") -> None:
        self.lock_fd = lock_fd
        self.lock_path = lock_path

    def release(self) -> None:
        """Drop the Unix socket's lock (the lock file stays: removing it would
        let two daemons lock two different files of the same name)."""
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def claim_listen(addr: ListenAddress) -> ListenClaim:
    """Make sure no other daemon serves ``addr``, before anything of it is touched.

    Unix socket: an exclusive ``flock`` on ``<socket>.lock`` (created 0600 beside
    the socket, with the holder's PID inside), held until :meth:`ListenClaim.release`
    or exit; a stale socket file of a dead daemon is then safe to remove.  TCP
    with a fixed port: a trial bind (``SO_REUSEADDR``, as gRPC binds).  A
    second daemon gets :class:`~smroute.errors.InputError` (exit 2: starting it
    again would fail the same way) naming the address and what holds it.
    """
    if addr.kind == "unix":
        lock = addr.path + ".lock"
        try:
            os.makedirs(os.path.dirname(addr.path), exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as err:
            raise InputError(f"listen unix:{addr.path}: cannot create the lock file {lock}: "
                             f"{err.strerror or err}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise InputError(f"listen unix:{addr.path}: another smroute daemon (pid {holder}) "
                             f"serves this socket (it holds {lock}); stop it first, or give "
                             "this one another listen address") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return ListenClaim(fd, lock)
    if addr.port:
        try:
            family, kind, proto, _, sockaddr = socket.getaddrinfo(
                addr.host, addr.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        except OSError:
            return ListenClaim()  # gRPC's own bind reports it
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(sockaddr)
            except OSError as err:
                if err.errno == errno.EADDRINUSE:
                    raise InputError(
                        f"listen {addr}: the address is in use (another smroute daemon or "
                        f"another program listens there; see ss -ltnp 'sport = :{addr.port}'); "
                        "stop it first, or give this one another listen address") from None
    return ListenClaim()
