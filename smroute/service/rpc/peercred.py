"""Who is on the other end of the daemon's Unix socket.

gRPC does not give a server the credentials of a Unix-socket peer (its
``context.peer()`` is ``unix:`` plus the client's socket name, which clients
leave empty, and ``auth_context()`` is empty).  The daemon therefore accepts
the connections of its public Unix socket itself: :class:`CredentialRelay`
reads the connecting process's uid, gid and pid with ``SO_PEERCRED`` (what the
kernel recorded at ``connect()``; a client cannot choose it), opens a
connection to the gRPC server's private socket -- in a mode-0700 directory only
the daemon's user can enter -- from a socket bound to a fresh name it records with those
credentials, and copies the bytes both ways.  The gRPC server sees that
name as the call's peer (``context.peer()``), from which
:meth:`CredentialRelay.peer_credentials` gives the credentials back.

:class:`PeerAllow` is the allow-list the mutation guard applies to them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import struct
import tempfile
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass

__all__ = ["MAX_CONNECTIONS", "CredentialRelay", "PeerAllow", "PeerCredentials", "peer_allow",
           "resolve_ids", "socket_credentials"]

_CHUNK = 256 * 1024
#: Connections relayed at once (two threads each; the systemd unit caps the
#: daemon's tasks at 512): more are closed at once and logged.
MAX_CONNECTIONS = 128


@dataclass(frozen=True)
class PeerCredentials:
    """The kernel's record of a Unix-socket client: user, primary group,
    process, and its supplementary groups (``SO_PEERGROUPS``)."""

    uid: int
    gid: int
    pid: int
    groups: tuple[int, ...] = ()

    def __str__(self) -> str:
        return f"uid {self.uid} gid {self.gid} pid {self.pid}"


#: Linux's SO_PEERGROUPS (4.13+); Python's socket module does not name it.
_SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)


def socket_credentials(sock: socket.socket) -> PeerCredentials:
    """``SO_PEERCRED`` (and ``SO_PEERGROUPS`` where the kernel has it) of a
    connected Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    groups: tuple[int, ...] = ()
    try:
        graw = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERGROUPS, 1024)  # Python: at most 1024
        groups = struct.unpack(f"{len(graw) // 4}I", graw[: len(graw) // 4 * 4])
    except OSError:
        pass  # an old kernel: the primary group only
    return PeerCredentials(uid=uid, gid=gid, pid=pid, groups=tuple(groups))


@dataclass(frozen=True)
class PeerAllow:
    """Unix-socket peers allowed to change the daemon's state: any of ``uids``,
    or a member (primary or supplementary group) of one of ``gids``."""

    uids: frozenset[int]
    gids: frozenset[int]

    def allows(self, cred: PeerCredentials) -> bool:
        return (cred.uid in self.uids or cred.gid in self.gids
                or not self.gids.isdisjoint(cred.groups))

    def describe(self) -> str:
        return (f"uids {sorted(self.uids)} or groups {sorted(self.gids)}")


class CredentialRelay:
    """The public Unix socket ``path`` in front of a gRPC server.

    :attr:`grpc_target` is the private address the gRPC server must listen on
    (``server.add_insecure_port``); :meth:`start` binds ``path`` (mode
    ``mode``, group ``group`` when given) and serves it, :meth:`close` stops
    and removes the private directory.  ``on_error(message)`` hears of a
    connection that could not be relayed.
    """

    def __init__(self, path: str, *, mode: int = 0o660, group: int | None = None,
                 on_error: Callable[[str], None] | None = None,
                 max_connections: int = MAX_CONNECTIONS) -> None:
        self.path = path
        self.max_connections = max_connections
        self.mode = mode
        self.group = group
        self.on_error = on_error
        base = os.environ.get("RUNTIME_DIRECTORY", "").split(":")[0] or None
        if base is not None and not os.path.isdir(base):
            base = None
        self.dir = tempfile.mkdtemp(prefix=".smroute-relay-", dir=base)
        self.grpc_target = f"unix:{self.dir}/g"
        self._listener: socket.socket | None = None
        self._count = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closed = threading.Event()
        self._peers: dict[str, PeerCredentials] = {}

    def peer_credentials(self, peer: str) -> PeerCredentials | None:
        """The credentials of the client behind a call's peer name
        (``context.peer()``), or ``None`` for a peer that did not come
        through this relay."""
        with self._lock:
            return self._peers.get(peer)

    def start(self) -> None:
        """Bind and listen on :attr:`path` and accept in a thread."""
        lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o777 & ~self.mode)  # born with its final mode: no open window
        try:
            lst.bind(self.path)
        finally:
            os.umask(old)
        if self.group is not None:
            os.chown(self.path, -1, self.group)
        os.chmod(self.path, self.mode)
        lst.listen(128)
        self._listener = lst
        threading.Thread(target=self._accept, daemon=True, name="smroute-relay").start()

    def socket_gid(self) -> int:
        """The group of the public socket file (who may connect when it is 0660)."""
        return os.stat(self.path).st_gid

    def _accept(self) -> None:
        lst = self._listener
        assert lst is not None
        while not self._closed.is_set():
            try:
                conn, _ = lst.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            with self._lock:
                full = len(self._peers) >= self.max_connections
            if full:
                conn.close()
                if self.on_error is not None:
                    self.on_error(f"{self.max_connections} connections open: a new one was "
                                  "closed")
                continue
            try:
                cred = socket_credentials(conn)
                upstream, peer = self._connect(cred)
            except OSError as err:
                conn.close()
                if self.on_error is not None:
                    self.on_error(f"cannot relay a connection: {err.strerror or err}")
                continue
            with self._lock:
                self._open.update((conn, upstream))
                self._peers[peer] = cred
            done = [2]
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pump, args=(a, b, done, peer), daemon=True,
                                 name="smroute-relay-io").start()

    def _connect(self, cred: PeerCredentials) -> tuple[socket.socket, str]:
        with self._lock:
            self._count += 1
            n = self._count
        name = f"{self.dir}/c{n}"
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.bind(name)
            up.connect(self.grpc_target[len("unix:"):])
        except OSError:
            up.close()
            raise
        finally:
            with contextlib.suppress(OSError):
                os.unlink(name)  # the connection keeps its name
        return up, f"unix:{name}"

    def _pump(self, src: socket.socket, dst: socket.socket, done: list[int], peer: str
              ) -> None:
        buf = bytearray(_CHUNK)
        view = memoryview(buf)
        try:
            while True:
                n = src.recv_into(buf)
                if n == 0:
                    break
                dst.sendall(view[:n])
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
        with self._lock:
            done[0] -= 1
            last = done[0] == 0
            if last:
                self._open.difference_update((src, dst))
                self._peers.pop(peer, None)
        if last:  # both directions ended: the connection is over
            src.close()
            dst.close()

    def close(self) -> None:
        """Stop accepting, drop the relayed connections, remove the socket
        file and the private directory."""
        self._closed.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        with self._lock:
            socks, self._open = set(self._open), set()
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                os.unlink(self.path)
        shutil.rmtree(self.dir, ignore_errors=True)


def resolve_ids(values: Collection[int | str], kind: str) -> frozenset[int]:
    """Numeric ids of ``values`` (numbers, or user / group names)."""
    import grp
    import pwd

    out = set()
    for v in values:
        if isinstance(v, int) or str(v).isdigit():
            out.add(int(v))
            continue
        try:
            out.add(pwd.getpwnam(str(v)).pw_uid if kind == "user" else grp.getgrnam(str(v)).gr_gid)
        except KeyError:
            raise ValueError(f"no {kind} named {v!r} on this host") from None
    return frozenset(out)


def peer_allow(users: Collection[int | str], groups: Collection[int | str] | None,
               socket_gid: int) -> PeerAllow:
    """The allow-list of ``users`` and ``groups`` (names or numbers; ``None``:
    the socket's group ``socket_gid``).  ``ValueError`` names an unknown name."""
    gids = resolve_ids(groups, "group") if groups is not None else frozenset({socket_gid})
    return PeerAllow(uids=resolve_ids(users, "user"), gids=gids)
