"""Files a daemon config names or is read from: the config file itself (a
regular file, read without blocking) and the files and directories it lists."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from smroute.service.settings import MAX_CONFIG_BYTES, ConfigError

__all__ = ["dir_problem", "file_kind", "file_problem", "read_regular"]


def read_regular(p: Path, source: str) -> bytes:
    """At most ``MAX_CONFIG_BYTES + 1`` bytes of ``p``, which must be a regular
    file.  Opened without blocking (``O_NONBLOCK``: a FIFO put in the config's
    place must not hang a reload, and with it SIGTERM) and checked on the open
    descriptor (``fstat``), so nothing else is ever read."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as err:
        raise ConfigError(f"cannot read config file: {err.strerror or err}", source=source) \
            from None
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"expected a regular file, got {file_kind(mode)}", source=source)
        try:
            return fh.read(MAX_CONFIG_BYTES + 1)
        except OSError as err:
            raise ConfigError(f"cannot read config file: {err.strerror or err}",
                              source=source) from None


def file_kind(mode: int) -> str:
    """What a non-regular file is, for messages ("a FIFO")."""
    return {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character "
            "device", stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"
            }.get(stat.S_IFMT(mode), "a special file")


def file_problem(p: Path) -> str | None:
    if not p.exists():
        return "no such file"
    if not p.is_file():
        return "expected a regular file"
    if not os.access(p, os.R_OK):
        return "file is not readable by this user"
    return None


def dir_problem(p: Path) -> str | None:
    """Why ``p`` cannot serve as a fabric directory, or ``None``."""
    if not p.exists():
        return "no such directory"
    if not p.is_dir():
        return "expected a directory"
    if not os.access(p, os.R_OK | os.X_OK):
        return "directory is not readable by this user"
    return None
