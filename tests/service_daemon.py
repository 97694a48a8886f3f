"""Start a real ``smroute serve`` process for tests (helper module, not a test).

:func:`start_daemon` runs ``python -m smroute serve`` on 127.0.0.1 port 0 (or a
Unix socket) with metrics on a free port, waits for its ready file and returns
a :class:`DaemonProc` (address, metrics URL, log path).  ``stop()`` sends
SIGTERM and returns the exit code; the process is killed if it hangs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class DaemonProc:
    proc: subprocess.Popen[bytes]
    address: str
    metrics: str | None
    log_path: Path
    workdir: Path
    log_file: Any = None

    def log_events(self) -> list[dict[str, object]]:
        out = []
        for line in self.log_path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 30.0) -> int:
        try:
            return self._stop(timeout)
        finally:
            if self.log_file is not None:
                self.log_file.close()

    def _stop(self, timeout: float) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError(
                    f"daemon did not stop within {timeout} s after SIGTERM") from None
        return int(self.proc.returncode)


def start_daemon(workdir: Path, *args: str, fabric: str | None = None, workers: int = 1,
                 listen: str = "127.0.0.1:0", timeout: float = 60.0) -> DaemonProc:
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / "ready.json"
    if ready.exists():
        ready.unlink()
    log_path = workdir / "daemon.log"
    cmd = [sys.executable, "-m", "smroute", "serve", "--listen", listen,
           "--metrics-listen", "127.0.0.1:0", "--workers", str(workers),
           "--ready-file", str(ready), "--log-level", "debug", *args]
    if fabric is not None:
        cmd += ["--fabric", fabric]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    log = open(log_path, "wb")  # noqa: SIM115 - owned by the process's lifetime
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited with {proc.returncode}:\n"
                                 + log_path.read_text()[-3000:])
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("daemon not ready in time:\n" + log_path.read_text()[-3000:])
        time.sleep(0.05)
    info = json.loads(ready.read_text())
    return DaemonProc(proc, info["address"], info.get("metrics"), log_path, workdir, log)
