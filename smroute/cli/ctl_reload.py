"""``smroute ctl reload``: SIGHUP to the daemon, which reloads its config file.

The daemon has no RPC for it (a config reload is the operator's, like
``systemctl reload smroute``): the process is found as the peer of the
``unix:`` socket it listens on (``SO_PEERCRED``), or given with ``--pid``,
and checked to be ``smroute serve`` before it is signalled.
"""

from __future__ import annotations

import os
import signal
import socket

from smroute.errors import DaemonUnreachableError, InputError, SmrouteError
from smroute.service.rpc.peercred import socket_credentials

__all__ = ["daemon_pid", "send_reload"]


def daemon_pid(address: str) -> int:
    """The pid of the process listening on ``unix:PATH`` (``address``);
    :class:`InputError` for another kind of address."""
    if not address.startswith("unix:"):
        raise InputError(f"reload: {address} is not a unix: socket, so the daemon's process "
                         "cannot be found from it; give --pid PID (or systemctl reload smroute)")
    path = address[5:].removeprefix("//")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(path)
        except OSError as err:
            raise DaemonUnreachableError(
                f"cannot reach the daemon at {address}: {err.strerror or err}") from None
        pid = socket_credentials(s).pid
    if pid <= 0:
        raise SmrouteError(f"reload: the peer of {address} has no process id; give --pid PID")
    return pid


def send_reload(pid: int) -> None:
    """SIGHUP to ``pid`` once it is seen to be ``smroute serve``."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        raise InputError(f"reload: no process {pid}") from None
    if b"serve" not in argv or not any(b"smroute" in a for a in argv):
        shown = " ".join(a.decode(errors="replace") for a in argv if a)[:120]
        raise InputError(f"reload: process {pid} is not smroute serve ({shown})")
    try:
        os.kill(pid, signal.SIGHUP)
    except PermissionError:
        raise SmrouteError(f"reload: not allowed to signal process {pid} (run as the "
                           "daemon's user or root)") from None
    except ProcessLookupError:
        raise InputError(f"reload: no process {pid}") from None
