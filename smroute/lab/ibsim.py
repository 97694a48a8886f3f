"""Drive the real InfiniBand tools on a simulated fabric (edge module, no mocks).

:class:`IbSim` starts ``ibsim`` (package ``ibsim-utils``) on a net file, waits
until it serves clients, runs umad tools under ``ibsim-run`` (which
LD_PRELOADs ``libumad2sim.so``) and talks to the simulator's console (link
up/down, routes).  :mod:`smroute.lab.sim` runs OpenSM 3.3.x and infiniband-diags through it.

Isolation
---------
ibsim and umad2sim meet on *abstract* unix datagram sockets named
``<base>:ctl``, ``<base>:out<N>`` and ``<base>:in<pid>`` / ``<base>:ctl<pid>``,
where ``<base>`` is the ``IBSIM_SOCKNAME`` environment variable (default
``sim``).  Both ibsim and umad2sim read it (ibsim >= 0.8, so the Debian 0.10
package too).  Every :class:`IbSim` picks a fresh base name
(``smroute-<pid>-<random>``), starts ibsim with it and passes it to every client
it runs, so any number of simulators (tests, helpers running in parallel) can
live on one machine.  Abstract sockets vanish with their process: there is
nothing to clean up on disk.  An ibsim serves at most 10 clients at once
(``IBSIM_MAX_CLIENTS``); clients killed on timeout are disconnected from the
console (``X <id>``) so that their slot and their SM flag are freed.

Console
-------
Without ``-n`` ibsim reads commands on stdin, one line of at most 127 bytes,
answers on stdout and prints a ``sim> `` prompt.  It does not echo commands, so
:meth:`IbSim.console` follows each command with a comment line ``# <marker>``
(which ibsim prints back) and returns what was printed in between.  The first
such echo also proves that the simulator's sockets are bound (the console is
served by the same select loop as the clients), which is how start-up waits.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from smroute.tools import (
    ToolError,
    ToolTimeoutError,
    require_tool,
    run_in_group,
    tail,
)

__all__ = [
    "CONSOLE_MAX_LINE",
    "IBSIM_DEFAULT_LINEAR_CAP",
    "IBSIM_DEFAULT_NODES",
    "IBSIM_DEFAULT_PORTS",
    "IBSIM_DEFAULT_SWITCHES",
    "UMAD2SIM_LIB",
    "IbSim",
    "NetLimits",
    "ToolResult",
    "net_limits",
]

#: ibsim 0.10 compiled-in limits (sim.h): nodes, switches, ports, linear FDB cap.
IBSIM_DEFAULT_NODES = 2048
IBSIM_DEFAULT_SWITCHES = 256
IBSIM_DEFAULT_PORTS = IBSIM_DEFAULT_SWITCHES * 36 + IBSIM_DEFAULT_NODES * 2
IBSIM_DEFAULT_LINEAR_CAP = 30 * 1024
#: Longest console line ibsim reads in one piece (its buffer is 128 bytes).
CONSOLE_MAX_LINE = 127


#: The library ``ibsim-run`` LD_PRELOADs (Debian ibsim-utils) to point umad at ibsim.
UMAD2SIM_LIB = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"


@dataclass(frozen=True)
class ToolResult:
    """Outcome of one command run under ibsim."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def lines(self) -> list[str]:
        """Standard output split into lines."""
        return self.stdout.splitlines()


# --------------------------------------------------------------------------- limits
@dataclass(frozen=True)
class NetLimits:
    """Sizes of a net file, as ibsim counts them."""

    nodes: int
    switches: int
    ports: int


_HEADER_RE = re.compile(r'^\s*(Switch|Hca|Ca|Rt|Router)\s+(\d+)\s+"')


def net_limits(netfile: str | os.PathLike[str]) -> NetLimits:
    """Count nodes, switches and port slots in an ibsim/ibnetdiscover net file.

    Port slots follow ibsim: a switch uses ``ports + 1`` (port 0), others ``ports``.
    """
    nodes = switches = ports = 0
    with open(netfile, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            m = _HEADER_RE.match(line)
            if not m:
                continue
            n = int(m.group(2))
            nodes += 1
            if m.group(1) == "Switch":
                switches += 1
                ports += n + 1
            else:
                ports += n
    return NetLimits(nodes, switches, ports)


# --------------------------------------------------------------------------- IbSim
class IbSim:
    """A running ``ibsim`` on ``netfile``, private to this object.

    Use as a context manager::

        with IbSim("fabric.net", tmpdir) as sim:
            topo = ibnetdiscover(sim)
            sim.console('Unlink "S-0000000000000101"[3]')

    Args:
        netfile: ibsim net file (ibnetdiscover format).
        workdir: directory for ibsim's stderr log (``ibsim.stderr``).
        max_nodes, max_switches, max_ports: ibsim's ``-N -S -P`` limits; ``None``
            sizes them from the net file (never below ibsim's defaults).
        linear_cap: ``-L``, LIDs per switch LFT (``None``: ibsim's 30720).
        sockname: ``IBSIM_SOCKNAME`` base; ``None`` picks a unique one.
        start_timeout: seconds to wait for the simulator to parse and bind.
    """

    def __init__(
        self,
        netfile: str | os.PathLike[str],
        workdir: str | os.PathLike[str],
        *,
        max_nodes: int | None = None,
        max_switches: int | None = None,
        max_ports: int | None = None,
        linear_cap: int | None = None,
        sockname: str | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        self.netfile = Path(netfile).resolve()
        self.workdir = Path(workdir).resolve()
        self.max_nodes = max_nodes
        self.max_switches = max_switches
        self.max_ports = max_ports
        self.linear_cap = linear_cap
        self.sockname = sockname or f"smroute-{os.getpid()}-{uuid.uuid4().hex[:10]}"
        self.start_timeout = start_timeout
        self.stderr_path = self.workdir / "ibsim.stderr"
        self._proc: subprocess.Popen[bytes] | None = None
        self._out = bytearray()
        self._out_cond = threading.Condition()
        self._reader: threading.Thread | None = None
        self._console_lock = threading.Lock()
        self._stderr_fh: IO[bytes] | None = None
        self.start_seconds: float | None = None

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> IbSim:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """True while the ibsim process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def command_line(self) -> list[str]:
        """The ibsim command this object runs (limits sized from the net file)."""
        exe = require_tool("ibsim")
        if not self.netfile.is_file():
            raise ToolError(f"ibsim: net file {self.netfile} does not exist")
        need = net_limits(self.netfile)
        nodes = self.max_nodes or max(IBSIM_DEFAULT_NODES, need.nodes + 16)
        switches = self.max_switches or max(IBSIM_DEFAULT_SWITCHES, need.switches + 16)
        ports = self.max_ports or max(IBSIM_DEFAULT_PORTS, need.ports + 256)
        cmd = [exe, "-s", "-N", str(nodes), "-S", str(switches), "-P", str(ports)]
        if self.linear_cap is not None:
            cmd += ["-L", str(self.linear_cap)]
        cmd.append(str(self.netfile))
        return cmd

    def start(self) -> None:
        """Start ibsim and wait until it serves clients.

        Raises :class:`ToolMissingError` if ibsim is not installed,
        :class:`ToolError` if it exits (bad net file, socket name in use) and
        :class:`ToolTimeoutError` if it is not ready within ``start_timeout``.
        """
        if self._proc is not None:
            raise ToolError("ibsim: already started")
        cmd = self.command_line()
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["IBSIM_SOCKNAME"] = self.sockname
        env.pop("LD_PRELOAD", None)
        t0 = time.monotonic()
        stderr_fh = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in stop()
        self._stderr_fh = stderr_fh
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_fh,
            cwd=self.workdir,
            env=env,
            start_new_session=True,
        )
        self._reader = threading.Thread(
            target=self._read_stdout, name=f"ibsim-stdout-{self.sockname}", daemon=True
        )
        self._reader.start()
        try:
            self.console("# smroute: ready?", timeout=self.start_timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0

    def stop(self, timeout: float = 10.0) -> None:
        """Quit ibsim (console ``Quit``, then SIGTERM, then SIGKILL); idempotent."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                assert proc.stdin is not None
                proc.stdin.write(b"Quit\n")
                proc.stdin.flush()
            try:
                proc.wait(timeout=timeout / 2)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout / 2)
                except subprocess.TimeoutExpired:
                    self._signal(signal.SIGKILL)
                    proc.wait()
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        if self._reader is not None:
            self._reader.join(timeout=5)
        with contextlib.suppress(OSError):
            if proc.stdout is not None:
                proc.stdout.close()
        fh = self._stderr_fh
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()
        self._stderr_fh = None

    def _signal(self, sig: int) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

    def _read_stdout(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            with self._out_cond:
                if chunk:
                    self._out += chunk
                self._out_cond.notify_all()
            if not chunk:
                return

    def stderr_tail(self, n: int = 2000) -> str:
        """The end of ibsim's standard error."""
        try:
            data = self.stderr_path.read_bytes()
        except OSError:
            return ""
        return tail(data.decode("utf-8", "replace"), n)

    def stdout_text(self) -> str:
        """Everything ibsim printed on stdout so far (console answers, banner)."""
        with self._out_cond:
            return self._out.decode("utf-8", "replace")

    # ------------------------------------------------------------ console
    def console(self, cmd: str, *, timeout: float = 30.0) -> str:
        """Send one console command; return what ibsim printed for it.

        Examples: ``Unlink "S-0000000000000101"[3]``, ``ReLink "S-..."[3]``,
        ``Route 1 7``, ``Attached``.  The returned text has the prompt removed.
        Raises ``ValueError`` for a command ibsim cannot read in one piece.
        """
        if "\n" in cmd or len(cmd.encode()) > CONSOLE_MAX_LINE:
            raise ValueError(f"ibsim console command must be one line <= {CONSOLE_MAX_LINE} bytes")
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise ToolError("ibsim: not started")
        marker = f"# smroute-mark-{uuid.uuid4().hex}"
        with self._console_lock:
            with self._out_cond:
                pos = len(self._out)
            try:
                proc.stdin.write(f"{cmd}\n{marker}\n".encode())
                proc.stdin.flush()
            except (BrokenPipeError, OSError) as err:
                raise ToolError(
                    f"ibsim: console closed ({err})", stderr_tail=self.stderr_tail()
                ) from err
            needle = marker.encode()
            deadline = time.monotonic() + timeout
            with self._out_cond:
                while True:
                    idx = self._out.find(needle, pos)
                    if idx >= 0:
                        text = self._out[pos:idx].decode("utf-8", "replace")
                        break
                    if proc.poll() is not None:
                        raise ToolError(
                            f"ibsim exited with status {proc.returncode}",
                            stderr_tail=self.stderr_tail(),
                        )
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ToolTimeoutError(
                            f"ibsim: no answer to console command {cmd!r} within {timeout:g} s",
                            stderr_tail=self.stderr_tail(),
                        )
                    self._out_cond.wait(min(left, 0.5))
        return _strip_prompts(text)

    def unlink(self, node_id: str, port: int | None = None) -> str:
        """Console ``Unlink "node"[port]`` (all links of the node if ``port`` is None)."""
        return self.console(_node_ref("Unlink", node_id, port))

    def relink(self, node_id: str, port: int | None = None) -> str:
        """Console ``ReLink "node"[port]``: restore links removed by :meth:`unlink`."""
        return self.console(_node_ref("ReLink", node_id, port))

    def route(self, from_lid: int, to_lid: int) -> str:
        """Console ``Route``: the hops ibsim's switches forward along (their LFTs)."""
        return self.console(f"Route {int(from_lid)} {int(to_lid)}")

    def attached(self) -> list[tuple[int, int]]:
        """Connected clients as ``(client id, pid)`` pairs (console ``Attached``)."""
        text = self.console("Attached")
        return [
            (int(m.group(1)), int(m.group(2)))
            for m in re.finditer(r"Client (\d+): pid (\d+)", text)
        ]

    def reap_clients(self) -> list[int]:
        """Disconnect clients whose process is gone; return their client ids."""
        dropped = []
        for cid, pid in self.attached():
            if not _pid_alive(pid):
                self.console(f"X {cid}")
                dropped.append(cid)
        return dropped

    # ------------------------------------------------------------ clients
    def client_env(self, sim_host: str | None = None, *, preload: bool = False
                   ) -> dict[str, str]:
        """Environment for a umad client of this simulator: without LD_PRELOAD
        (``ibsim-run`` adds it), or with ``preload`` umad2sim already preloaded,
        as ``ibsim-run`` would, for a client started without the wrapper."""
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if preload:
            env["LD_PRELOAD"] = UMAD2SIM_LIB
        env.pop("IBSIM_SERVER_NAME", None)
        env.pop("IBSIM_SERVER_PORT", None)
        env["IBSIM_SOCKNAME"] = self.sockname
        if sim_host is not None:
            env["SIM_HOST"] = sim_host
        else:
            env.pop("SIM_HOST", None)
        return env

    def run(
        self,
        cmd: Sequence[str],
        *,
        timeout: float = 300.0,
        check: bool = True,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        sim_host: str | None = None,
    ) -> ToolResult:
        """Run ``cmd`` under ``ibsim-run`` attached to this simulator.

        ``env`` adds variables; ``sim_host`` picks the node the client attaches
        to (ibsim's ``SIM_HOST``; default: the first node of the net file).
        Raises :class:`ToolMissingError` if ``cmd[0]`` or ibsim-run is absent,
        :class:`ToolTimeoutError` after ``timeout`` seconds (the process group is
        killed) and, with ``check``, :class:`ToolError` on a non-zero exit.
        """
        if not self.running:
            raise ToolError("ibsim is not running", stderr_tail=self.stderr_tail())
        if not cmd:
            raise ValueError("empty command")
        wrapper = require_tool("ibsim-run")
        exe = require_tool(cmd[0]) if os.sep not in cmd[0] else cmd[0]
        args = (wrapper, exe, *cmd[1:])
        full_env = self.client_env(sim_host)
        if env:
            full_env.update(env)
        t0 = time.monotonic()
        def reap() -> None:
            with contextlib.suppress(ToolError):
                self.reap_clients()

        returncode, out, err = run_in_group(
            args, timeout=timeout, cwd=cwd, env=full_env, name=cmd[0], on_timeout=reap
        )
        seconds = time.monotonic() - t0
        res = ToolResult(
            args=tuple(args[1:]),
            returncode=returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            seconds=seconds,
        )
        if returncode < 0:
            reap()
        if check and returncode != 0:
            raise ToolError(
                f"{cmd[0]}: exited with status {returncode}",
                stderr_tail=tail(res.stderr),
            )
        return res


def _node_ref(verb: str, node_id: str, port: int | None) -> str:
    if '"' in node_id:
        raise ValueError(f"node id {node_id!r} contains a double quote")
    return f'{verb} "{node_id}"' + ("" if port is None else f"[{int(port)}]")


def _strip_prompts(text: str) -> str:
    return re.sub(r"sim(?: \(inactive\))?> ", "", text).strip("\n")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0); look at its state
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"
