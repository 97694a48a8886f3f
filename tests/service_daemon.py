"""Start a real ``smroute serve`` process for tests (helper module, not a test).

:func:`start_daemon` is :class:`smroute.lab.processes.DaemonProcess` (the one
way to start a daemon) with the settings these tests use: a Unix socket in a
private directory (or ``listen``), metrics on a free port, JSON logs at debug level, the
checkout on ``PYTHONPATH``; it fails the test if the daemon exits before it is
ready.  ``stop()`` sends SIGTERM and returns the exit code; a hanging daemon
is killed and fails the test.
"""

from __future__ import annotations

import os
from pathlib import Path

from smroute.lab.processes import DaemonProcess
from smroute.tools import ToolError

ROOT = Path(__file__).resolve().parent.parent

#: What :func:`start_daemon` returns.
DaemonProc = DaemonProcess


def start_daemon(workdir: Path, *args: str, fabric: str | None = None, workers: int = 1,
                 listen: str | None = None, timeout: float = 60.0) -> DaemonProcess:
    extra = (*args, "--fabric", fabric) if fabric is not None else args
    d = DaemonProcess(None, workdir, workers=workers, extra_args=extra, listen=listen,
                      metrics_listen="127.0.0.1:0", log_format="json", log_level="debug",
                      env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    try:
        d.start(timeout)
    except ToolError as err:
        raise AssertionError(f"daemon not started: {err}") from None
    return d
