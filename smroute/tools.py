"""Running the real InfiniBand tools (ibnetdiscover, OpenSM, infiniband-diags,
ibsim): finding a binary with an install hint, running it in its own process
group with a time limit, and the errors that say what went wrong.  Used by
live discovery (production) and by the simulation lab alike."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence

from smroute.errors import SmrouteError

__all__ = [
    "TOOL_PACKAGES",
    "ToolError",
    "ToolMissingError",
    "ToolTimeoutError",
    "require_tool",
    "run_in_group",
    "tail",
]

#: Debian package that ships each tool, for "install ..." hints.
TOOL_PACKAGES: dict[str, str] = {
    "ibsim": "ibsim-utils",
    "ibsim-run": "ibsim-utils",
    "opensm": "opensm",
    "ibnetdiscover": "infiniband-diags",
    "dump_fts": "infiniband-diags",
    "ibroute": "infiniband-diags",
    "smpquery": "infiniband-diags",
    "ibtracert": "infiniband-diags",
    "ibdmchk": "ibutils",
}

_TAIL = 2000


class ToolError(SmrouteError):
    """A real tool failed: could not start, exited non-zero or misbehaved.

    ``stderr_tail`` holds the end of its standard error, also quoted in the message.
    """

    exit_code = 1

    def __init__(self, message: str, *, stderr_tail: str = "") -> None:
        self.stderr_tail = stderr_tail
        if stderr_tail.strip():
            message = f"{message}\n--- stderr (tail) ---\n{stderr_tail.rstrip()}"
        super().__init__(message)


class ToolMissingError(ToolError):
    """A required binary is not installed (the message names the Debian package)."""


class ToolTimeoutError(ToolError):
    """A tool did not finish within its timeout (it has been killed)."""


def tail(text: str, n: int = _TAIL) -> str:
    """The last ``n`` characters of ``text`` (``...`` marks a cut)."""
    return text if len(text) <= n else "..." + text[-n:]


def require_tool(name: str) -> str:
    """Absolute path of binary ``name``; :class:`ToolMissingError` if absent."""
    path = shutil.which(name)
    if path is None:
        pkg = TOOL_PACKAGES.get(name, "the package providing it")
        raise ToolMissingError(f"{name}: not found on PATH (install {pkg})")
    return path


def run_in_group(
    args: Sequence[str], *, timeout: float, cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None, name: str = "", on_timeout: Callable[[], None] | None = None,
) -> tuple[int, bytes, bytes]:
    """Run ``args`` in its own process group, no stdin; return (status, stdout, stderr).

    After ``timeout`` seconds the whole group is killed, ``on_timeout`` is
    called and :class:`ToolTimeoutError` is raised with the stderr tail.
    """
    proc = subprocess.Popen(
        list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=cwd, env=env, start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        if on_timeout is not None:
            on_timeout()
        raise ToolTimeoutError(
            f"{name or args[0]}: timed out after {timeout:g} s (killed)",
            stderr_tail=tail(err.decode("utf-8", "replace")),
        ) from None
    return proc.returncode, out, err
