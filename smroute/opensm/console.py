"""Client for OpenSM's console over the loopback socket (edge module).

OpenSM 3.3.x started with ``console loopback`` (``--console loopback``) and
``console_port N`` listens on 127.0.0.1:N; a client gets a banner ending in the
prompt ``OpenSM $ ``, sends one command per line and reads until the next
prompt.  OpenSM serves one console connection at a time (a second one is told
"already in use" and closed), so :class:`OpenSMConsole` connects for each
command and says ``quit`` afterwards.

Commands used by smroute: ``reroute`` (sets ``force_reroute`` and wakes the
state manager: the routing engine runs again - the ``file`` engine re-reads
its ``lfts_file`` - and changed LFT blocks are sent; no rediscovery) and
``resweep heavy|light``.  They return at once; completion shows in OpenSM's
log (``REROUTE COMPLETE`` / ``<engine> tables configured on all switches``),
see :class:`LogFollower`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from smroute.errors import InputError, SmrouteError

__all__ = ["ConsoleError", "LogFollower", "OpenSMConsole", "parse_console_address", "PROMPT"]

PROMPT = b"OpenSM $ "
MAX_REPLY = 1 << 20


class ConsoleError(SmrouteError):
    """The OpenSM console could not be reached or did not answer."""


def parse_console_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``PORT`` -> (host, port); the host defaults to 127.0.0.1.

    Raises :class:`InputError` for anything else.
    """
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        num = int(port)
    except ValueError:
        raise InputError(f"console address {text!r}: expected HOST:PORT or PORT") from None
    if not 1 <= num <= 65535:
        raise InputError(f"console address {text!r}: port must be in 1..65535")
    return host, num


@dataclass
class OpenSMConsole:
    """One OpenSM loopback console, e.g. ``OpenSMConsole("127.0.0.1", 10000)``."""

    host: str = "127.0.0.1"
    port: int = 10000
    timeout: float = 10.0

    def _read_prompt(self, sock: socket.socket, deadline: float) -> bytes:
        buf = bytearray()
        while not buf.endswith(PROMPT):
            left = deadline - time.monotonic()
            if left <= 0:
                raise ConsoleError(f"OpenSM console {self.host}:{self.port}: no prompt within "
                                   f"{self.timeout:g} s (got {bytes(buf[-200:])!r})")
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                text = bytes(buf).decode("utf-8", "replace").strip()
                raise ConsoleError(f"OpenSM console {self.host}:{self.port} closed the connection"
                                   + (f": {text}" if text else ""))
            buf += chunk
            if len(buf) > MAX_REPLY:
                raise ConsoleError(f"OpenSM console {self.host}:{self.port}: reply too long")
        return bytes(buf[: -len(PROMPT)])

    def command(self, cmd: str) -> str:
        """Send one command; return what OpenSM printed before the next prompt."""
        if "\n" in cmd or "\r" in cmd or not cmd.strip():
            raise ValueError("one non-empty console command per call")
        deadline = time.monotonic() + self.timeout
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as exc:
            raise ConsoleError(
                f"cannot connect to the OpenSM console at {self.host}:{self.port} ({exc}); is "
                "OpenSM running with 'console loopback' and this console_port?") from None
        with sock:
            self._read_prompt(sock, deadline)
            sock.sendall(cmd.encode() + b"\n")
            out = self._read_prompt(sock, deadline)
            with contextlib.suppress(OSError):
                sock.sendall(b"quit\n")
        return out.decode("utf-8", "replace").strip()

    def reroute(self) -> str:
        """Ask OpenSM to run its routing engine again (the file engine re-reads its file)."""
        return self.command("reroute")


class LogFollower:
    """Read lines appended to a log file since the last call (handles truncation
    and rotation by inode).  ``skip_existing`` starts at the current end."""

    def __init__(self, path: str | os.PathLike[str], *, skip_existing: bool = True) -> None:
        self.path = Path(path)
        self._pos = 0
        self._ino: int | None = None
        self._partial = b""
        if skip_existing:
            try:
                st = self.path.stat()
                self._pos, self._ino = st.st_size, st.st_ino
            except OSError:
                pass

    def read(self, max_bytes: int = 1 << 24) -> list[str]:
        """Complete new lines (at most ``max_bytes`` read per call)."""
        try:
            st = self.path.stat()
        except OSError:
            return []
        if self._ino is not None and st.st_ino != self._ino or st.st_size < self._pos:
            self._pos, self._partial = 0, b""
        self._ino = st.st_ino
        if st.st_size == self._pos:
            return []
        with open(self.path, "rb") as fh:
            fh.seek(self._pos)
            data = fh.read(max_bytes)
        self._pos += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return [ln.decode("utf-8", "replace") for ln in lines]
