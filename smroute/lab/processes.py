"""A long-running OpenSM on an ibsim fabric (edge module, for tests and demos).

:func:`smroute.lab.sim.run_opensm` runs ``opensm -o`` (one sweep, exit);
the bridge needs OpenSM as it runs in production: sweeping, answering traps,
with the ``file`` routing engine and the console.  :class:`OpenSMProcess`
starts ``ibsim-run opensm -F CONF -f LOG`` in its own process group with a
config holding ``routing_engine file``, ``lfts_file``, ``console loopback``,
``console_port`` and ``sweep_interval``, waits for ``SUBNET UP`` in its log
and stops it (SIGTERM, then SIGKILL of the group).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO

from smroute.lab.sim import IbSim, ToolError, ToolTimeoutError, format_conf, require_tool

__all__ = ["DaemonProcess", "OpenSMProcess", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def terminate_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM ``proc``'s process group (it leads one), SIGKILL after
    ``timeout`` s; nothing if it has already exited."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class OpenSMProcess:
    """``opensm`` running on ``sim`` with the file engine and the loopback console.

    ``workdir`` receives ``opensm.conf``, ``opensm.log``, ``opensm.out`` and
    the dump/cache/tmp directories.  ``log_flags`` 0x03 (errors + info) logs
    traps, ``SUBNET UP`` after each heavy sweep, ``REROUTE COMPLETE`` and
    ``file tables configured on all switches``.
    """

    def __init__(
        self, sim: IbSim, workdir: str | os.PathLike[str], *, lfts_file: str | os.PathLike[str],
        console_port: int | None = None, sweep_interval: int = 2, log_flags: int = 0x03,
        extra_conf: Mapping[str, object] | None = None,
    ) -> None:
        self.sim = sim
        self.workdir = Path(workdir).resolve()
        self.lfts_file = Path(lfts_file).resolve()
        self.console_port = console_port or free_port()
        self.sweep_interval = sweep_interval
        self.log_flags = log_flags
        self.extra_conf = dict(extra_conf or {})
        self.conf = self.workdir / "opensm.conf"
        self.log = self.workdir / "opensm.log"
        self.out = self.workdir / "opensm.out"
        self._proc: subprocess.Popen[bytes] | None = None
        self._out_fh: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        """PID of the opensm process (ibsim-run execs it)."""
        if self._proc is None:
            raise ToolError("opensm: not started")
        return self._proc.pid

    @property
    def running(self) -> bool:
        """True while the opensm process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def conf_text(self) -> str:
        """The ``opensm.conf`` text :meth:`start` writes (``extra_conf`` last, overriding)."""
        settings: dict[str, object] = {
            "routing_engine": "file",
            "lfts_file": self.lfts_file,
            "console": "loopback",
            "console_port": self.console_port,
            "sweep_interval": self.sweep_interval,
            "log_flags": f"{self.log_flags:#04x}",
            "force_log_flush": "TRUE",
            "dump_files_dir": self.workdir / "dump",
        }
        settings.update(self.extra_conf)
        return format_conf(settings)

    def start(self, timeout: float = 120.0) -> None:
        """Start OpenSM and wait until its log says ``SUBNET UP``."""
        if self._proc is not None:
            raise ToolError("opensm: already started")
        require_tool("opensm")
        wrapper = require_tool("ibsim-run")
        for d in ("dump", "cache", "tmp"):
            (self.workdir / d).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(self.conf_text())
        env = self.sim.client_env()
        env.update({"OSM_TMP_DIR": str(self.workdir / "tmp"),
                    "OSM_CACHE_DIR": str(self.workdir / "cache")})
        self._out_fh = open(self.out, "wb")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            [wrapper, "opensm", "-F", str(self.conf), "-f", str(self.log)],
            cwd=self.workdir, env=env, stdin=subprocess.DEVNULL, stdout=self._out_fh,
            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.log.exists() and "SUBNET UP" in self.log.read_text(errors="replace"):
                return
            if self._proc.poll() is not None:
                text = self.out.read_text(errors="replace")[-2000:]
                self.stop()
                raise ToolError(f"opensm exited with status {self._proc.returncode} "
                                f"before SUBNET UP (log: {self.log})", stderr_tail=text)
            if time.monotonic() > deadline:
                self.stop()
                raise ToolTimeoutError(f"opensm: no SUBNET UP within {timeout:g} s "
                                       f"(log: {self.log})")
            time.sleep(0.1)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the opensm process."""
        if self.running:
            os.kill(self.pid, sig)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL after ``timeout``; idempotent."""
        proc = self._proc
        if proc is not None:
            terminate_group(proc, timeout)
        if self._out_fh is not None:
            self._out_fh.close()
            self._out_fh = None

    def __enter__(self) -> OpenSMProcess:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class DaemonProcess:
    """``smroute serve`` as a real process attached to ``sim`` through
    ``ibsim-run`` (so its live ``LoadFabric`` discovers the simulated fabric),
    on a free loopback port; ``address`` is read from its ``--ready-file``."""

    def __init__(self, sim: IbSim, workdir: str | os.PathLike[str], *, workers: int = 1,
                 extra_args: tuple[str, ...] = (), listen: str = "127.0.0.1:0") -> None:
        self.sim = sim
        self.listen = listen
        self.workdir = Path(workdir).resolve()
        self.workers = workers
        self.extra_args = extra_args
        self.ready = self.workdir / "daemon-ready.json"
        self.out = self.workdir / "daemon.out"
        self.address = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._out_fh: IO[bytes] | None = None

    def start(self, timeout: float = 60.0) -> str:
        """Start ``smroute serve`` under ``ibsim-run``; return its address once
        the ready file is there (:class:`ToolError` if it exits first,
        :class:`ToolTimeoutError` after ``timeout`` s)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.ready.unlink()
        wrapper = require_tool("ibsim-run")
        env = self.sim.client_env()
        self._out_fh = open(self.out, "wb")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            [wrapper, sys.executable, "-m", "smroute", "serve", "--listen", self.listen,
             "--ready-file", str(self.ready), "--metrics-listen", "off", "--workers",
             str(self.workers), "--log-format", "text", *self.extra_args],
            cwd=self.workdir, env=env, stdin=subprocess.DEVNULL, stdout=self._out_fh,
            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.ready.exists():
                with contextlib.suppress(ValueError):
                    self.address = str(json.loads(self.ready.read_text())["address"])
                    return self.address
            if self._proc.poll() is not None:
                text = self.out.read_text(errors="replace")[-2000:]
                raise ToolError(f"smroute serve exited with status {self._proc.returncode}",
                                stderr_tail=text)
            if time.monotonic() > deadline:
                self.stop()
                raise ToolTimeoutError(f"smroute serve: not ready within {timeout:g} s")
            time.sleep(0.05)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (graceful), SIGKILL after ``timeout``; returns the exit status."""
        proc = self._proc
        if proc is not None:
            terminate_group(proc, timeout)
        if self._out_fh is not None:
            self._out_fh.close()
            self._out_fh = None
        return None if proc is None else proc.returncode
