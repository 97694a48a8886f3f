"""Long-running processes of the lab: OpenSM on an ibsim fabric, and the
routing daemon (:class:`DaemonProcess`, the one way to start one).

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
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
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
        extra_conf: Mapping[str, object] | None = None, env: Mapping[str, str] | None = None,
    ) -> None:
        self.sim = sim
        self.env = dict(env or {})  # added to the simulator's client environment
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
                    "OSM_CACHE_DIR": str(self.workdir / "cache"), **self.env})
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
    """``smroute serve`` as a real process (the one way tests, the lab and the
    benchmarks start a daemon), on a Unix socket in a fresh private directory
    (or ``listen``; the process's user may mutate there, as root or the
    socket's group);
    ``address`` and ``metrics`` are read from its ``--ready-file``.

    With ``sim`` it runs under ``ibsim-run`` (so its live ``LoadFabric``
    discovers the simulated fabric) and is stopped with its process group;
    otherwise SIGTERM goes to the daemon itself, which drains and stops its
    workers.  ``metrics_listen``, ``log_format`` and ``log_level`` are passed
    on; ``extra_args`` follow (``--fabric``, ``--config``, ...).  ``state``:
    the state database (``--state``; default ``workdir/state.db``, so a
    restart in the same ``workdir`` resumes; ``"none"``: keep no state).
    :meth:`kill` is ``kill -9`` (no shutdown at all).
    """

    def __init__(self, sim: IbSim | None, workdir: str | os.PathLike[str], *,
                 workers: int = 1, extra_args: tuple[str, ...] = (),
                 listen: str | None = None, metrics_listen: str = "off",
                 log_format: str = "text", log_level: str | None = None,
                 env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
                 state: str | os.PathLike[str] | None = None) -> None:
        self.sim = sim
        self._own_dir = None if listen else tempfile.mkdtemp(prefix="smroute-d-")
        self.listen = listen or f"unix:{self._own_dir}/smroute.sock"
        self.workdir = Path(workdir).resolve()
        self.workers = workers
        self.extra_args = extra_args
        self.metrics_listen = metrics_listen
        self.log_format = log_format
        self.log_level = log_level
        self.env = env
        self.cwd = Path(cwd) if cwd is not None else self.workdir
        self.state = str(state) if state is not None else str(self.workdir / "state.db")
        self.ready = self.workdir / "daemon-ready.json"
        self.out = self.workdir / "daemon.out"
        self.address = ""
        self.metrics: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._out_fh: IO[bytes] | None = None

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        """The running process (after :meth:`start`)."""
        assert self._proc is not None, "not started"
        return self._proc

    @property
    def log_path(self) -> Path:
        """Where the daemon's output (its log) goes."""
        return self.out

    def log_events(self) -> list[dict[str, object]]:
        """The daemon's JSON log lines (``log_format="json"``) as dicts."""
        out = []
        for line in self.out.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the daemon."""
        self.proc.send_signal(sig)

    def start(self, timeout: float = 60.0) -> str:
        """Start ``smroute serve``; return its address once the ready file is
        there (:class:`ToolError` if it exits first, :class:`ToolTimeoutError`
        after ``timeout`` s)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.ready.unlink()
        cmd = [sys.executable, "-m", "smroute", "serve", "--listen", self.listen,
               "--ready-file", str(self.ready), "--metrics-listen", self.metrics_listen,
               "--workers", str(self.workers), "--log-format", self.log_format,
               "--state", self.state]
        if self.log_level is not None:
            cmd += ["--log-level", self.log_level]
        cmd += list(self.extra_args)
        env = dict(self.env) if self.env is not None else dict(os.environ)
        if self.sim is not None:
            cmd = [require_tool("ibsim-run"), *cmd]
            env.update(self.sim.client_env())
        self._out_fh = open(self.out, "wb")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            cmd, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL, stdout=self._out_fh,
            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.ready.exists():
                with contextlib.suppress(ValueError, KeyError):
                    info = json.loads(self.ready.read_text())
                    self.address = str(info["address"])
                    self.metrics = info.get("metrics")
                    return self.address
            if self._proc.poll() is not None:
                text = self.out.read_text(errors="replace")[-3000:]
                raise ToolError(f"smroute serve exited with status {self._proc.returncode}",
                                stderr_tail=text)
            if time.monotonic() > deadline:
                self.stop()
                raise ToolTimeoutError(f"smroute serve: not ready within {timeout:g} s")
            time.sleep(0.05)

    def kill(self) -> int | None:
        """SIGKILL the daemon's process group (``kill -9``: no shutdown, no
        flush; what the state database must survive); returns the exit status."""
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        if self._out_fh is not None:
            self._out_fh.close()
            self._out_fh = None
        return None if proc is None else proc.returncode

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (graceful; the whole group under ``ibsim-run``), SIGKILL of
        the group after ``timeout``; returns the exit status."""
        proc = self._proc
        if proc is not None:
            if self.sim is not None:
                terminate_group(proc, timeout)
            elif proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
        if self._out_fh is not None:
            self._out_fh.close()
            self._out_fh = None
        if self._own_dir is not None:  # its socket's lock; a restart makes it again
            shutil.rmtree(self._own_dir, ignore_errors=True)
        return None if proc is None else proc.returncode
