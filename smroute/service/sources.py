"""Where the daemon's fabrics come from, read with status-coded errors:
topology text of a request (bounded), the operator's configured file, a
file a ``LoadFabric(path=...)`` request names (only inside ``fabric_dirs``:
symlink, ``..``, FIFO, hard-link, foreign-owner and check-then-open tricks
refused; errors quote none of a file that is not ibnetdiscover output), and
live discovery.  A fabric without a switch (a partial discovery) is refused
from every source.

Every failure is a :class:`~smroute.service.errors.ServiceError` naming what
was wrong; nothing here imports gRPC.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence

from smroute.errors import InputError
from smroute.fabric.ibnetdiscover.parse import (
    looks_like_ibnetdiscover,
    parse_topology,
    read_topology,
    require_switches,
)
from smroute.fabric.ibnetdiscover.text import ParseWarning
from smroute.fabric.model.arrays import Fabric
from smroute.fileio import decompressed
from smroute.service.errors import ServiceError, Status, echo, shown

__all__ = [
    "MAX_DISCOVER_TIMEOUT_S",
    "check_fabric_path",
    "discover_fabric",
    "parse_fabric_text",
    "read_fabric_path",
    "read_request_path",
]

#: Longest live discovery (ibnetdiscover) a LoadFabric request may ask for, seconds.
MAX_DISCOVER_TIMEOUT_S = 3600.0


def _whole(fabric: Fabric, source: str, status: Status = Status.INVALID_ARGUMENT) -> Fabric:
    """``fabric`` unless it has no switch (a partial discovery, refused as the
    CLI refuses it: nothing to route, and loading it would drop the base)."""
    try:
        require_switches(fabric, source)
    except InputError as err:
        raise ServiceError(status, str(err)) from None
    return fabric


def parse_fabric_text(text: str, source: str, max_bytes: int, *, quote: bool = True,
                      skipped: list[ParseWarning] | None = None) -> Fabric:
    """Parse ibnetdiscover text of at most ``max_bytes`` (``limits.max_topology_bytes``);
    a fabric without a switch is INVALID_ARGUMENT.  ``quote=False`` (a file
    on the server): an error quotes none of the text unless it is
    ibnetdiscover output at all.  ``skipped``: the noise lines skipped
    (within the parser's budget) are appended to it."""
    n = len(text.encode("utf-8", errors="replace")) if len(text) * 4 > \
        max_bytes else len(text)
    if n > max_bytes:
        raise ServiceError(Status.RESOURCE_EXHAUSTED,
                           f"{source}: topology text is {n} bytes; the limit "
                           f"(limits.max_topology_bytes) is {max_bytes}")
    if not text.strip():
        raise ServiceError(Status.INVALID_ARGUMENT,
                           f"{source}: empty topology text; expected ibnetdiscover output")
    try:
        fabric = parse_topology(text, source, warnings=skipped)
    except InputError as err:
        lines = text.splitlines()
        if quote or looks_like_ibnetdiscover(lines[: err.line or len(lines)]):
            raise ServiceError(Status.INVALID_ARGUMENT, str(err)) from None
        at = f"{source}:{err.line}" if err.line else source
        raise ServiceError(Status.INVALID_ARGUMENT,
                           f"{at}: not ibnetdiscover output (no topology or ports-report "
                           "line before this one); expected an ibnetdiscover file") from None
    return _whole(fabric, source)

def read_fabric_path(path: str) -> Fabric:
    """Parse the operator's configured topology file (no directory check, no
    size bound: it comes from the config, not from a request; requests go
    through :func:`read_request_path`).  NOT_FOUND if it cannot be read,
    INVALID_ARGUMENT naming the line if it does not parse."""
    if not path:
        raise ServiceError(Status.INVALID_ARGUMENT, "path is empty")
    try:
        fabric = read_topology(path)
    except InputError as err:
        code = (Status.NOT_FOUND if isinstance(err.__cause__, OSError)
                else Status.INVALID_ARGUMENT)
        raise ServiceError(code, str(err)) from None
    return _whole(fabric, path)

def read_request_path(path: str, fabric_dirs: Sequence[str], max_bytes: int, *,
                      skipped: list[ParseWarning] | None = None) -> Fabric:
    """Parse the topology file a ``LoadFabric(path=...)`` request names.

    Only regular files whose real path (symlinks and ``..`` resolved) lies
    inside one of ``fabric_dirs`` are opened; anything else is
    PERMISSION_DENIED before the file is touched, so a client cannot read
    (or probe the existence of) other files through parse errors.  The
    file is opened without following a final symlink, and the opened
    descriptor's path is checked again (a directory swapped between the
    check and the open is caught).  Bounded by ``max_bytes`` (a gzip or xz
    file too: compressed, and once decompressed).
    """
    dirs = fabric_dirs
    real = check_fabric_path(path, dirs)
    path = shown(path)  # as messages show it (the real path is opened)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(real, flags)
    except OSError as err:
        if err.errno == errno.ELOOP:  # the checked file was replaced by a symlink
            raise ServiceError(Status.PERMISSION_DENIED,
                               f"LoadFabric path {path} is a symlink that cannot be "
                               "resolved inside fabric_dirs") from None
        raise ServiceError(Status.NOT_FOUND,
                           f"{path}: cannot read: {err.strerror or err}") from None
    limit = max_bytes
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ServiceError(Status.PERMISSION_DENIED,
                               f"LoadFabric path {path} is not a regular file; expected "
                               "an ibnetdiscover file inside fabric_dirs")
        opened = _fd_path(fd)
        if opened is not None and _inside_dirs(
                opened, [os.path.realpath(d) for d in dirs]) is None:
            raise ServiceError(Status.PERMISSION_DENIED,
                               f"LoadFabric path {path} changed while it was opened and "
                               f"is now outside fabric_dirs ({', '.join(dirs)})")
        if st.st_nlink > 1:
            raise ServiceError(Status.PERMISSION_DENIED,
                               f"LoadFabric path {path} has {st.st_nlink} hard links; expected "
                               "a file with one name (a hard link could reach any file)")
        if st.st_uid not in (0, os.geteuid()):
            raise ServiceError(Status.PERMISSION_DENIED,
                               f"LoadFabric path {path} is owned by uid {st.st_uid}; expected "
                               "a file owned by the daemon's user or root")
        if st.st_size > limit:
            raise ServiceError(Status.RESOURCE_EXHAUSTED,
                               f"{path}: {st.st_size} bytes; the limit "
                               f"(limits.max_topology_bytes) is {limit}")
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        try:
            data = fh.read(limit + 1)  # bounded even if the file grew after fstat
        except OSError as err:
            raise ServiceError(Status.NOT_FOUND,
                               f"{path}: cannot read: {err.strerror or err}") from None
    try:  # gzip or xz: decompressed within the same bound
        data = decompressed(data, path, max_bytes=limit)
    except InputError as err:
        raise ServiceError(Status.INVALID_ARGUMENT, str(err)) from None
    return parse_fabric_text(data.decode("utf-8", errors="replace"), path, max_bytes,
                             quote=False, skipped=skipped)


def discover_fabric(ca: str, port: int, timeout: float) -> Fabric:
    """Live discovery through smroute.discovery, parsed like a file.
    ``timeout`` (seconds, 0 = 120) must be in 0..MAX_DISCOVER_TIMEOUT_S: a
    request cannot hold an RPC thread on ibnetdiscover for longer."""
    if not 0 <= timeout <= MAX_DISCOVER_TIMEOUT_S:
        raise ServiceError(Status.INVALID_ARGUMENT,
                           f"live timeout_s {timeout:g}: expected 0 (default 120) .. "
                           f"{MAX_DISCOVER_TIMEOUT_S:g} seconds")
    try:
        from smroute.discovery.discover import DiscoveryError, discover_topology_lines
    except ImportError:
        raise ServiceError(Status.UNIMPLEMENTED,
                           "live discovery is not available in this build "
                           "(smroute.discovery.discover is missing)") from None
    try:
        lines = discover_topology_lines(ca=ca or None, port=port or None,
                                        timeout=timeout or 120.0)
    except DiscoveryError as err:
        raise ServiceError(Status.FAILED_PRECONDITION, str(err)) from None
    try:
        fabric = parse_topology(lines, "live discovery")
    except InputError as err:
        raise ServiceError(Status.FAILED_PRECONDITION, str(err)) from None
    return _whole(fabric, "live discovery", Status.FAILED_PRECONDITION)


def _inside_dirs(real: str, real_dirs: Iterable[str]) -> str | None:
    """The first of ``real_dirs`` (real paths) containing ``real``, or ``None``."""
    for d in real_dirs:
        try:
            if os.path.commonpath([real, d]) == d:
                return d
        except ValueError:  # mixed absolute / relative: never inside
            continue
    return None


def _fd_path(fd: int) -> str | None:
    """The path of the file open as ``fd`` (Linux ``/proc/self/fd``), or ``None``."""
    try:
        p = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return p if p.startswith("/") else None


def check_fabric_path(path: str, fabric_dirs: Sequence[str]) -> str:
    """The real path of ``path`` if a LoadFabric request may read it.

    ``path`` must be absolute; its real path (:func:`os.path.realpath`:
    symlinks and ``..`` resolved) must lie inside the real path of one of
    ``fabric_dirs``.  Raises :class:`ServiceError`: INVALID_ARGUMENT for an
    empty or relative path, PERMISSION_DENIED when server-side paths are
    disabled (no ``fabric_dirs``) or the path is outside them.  Whether the
    file exists is not revealed for paths outside the directories.
    """
    if not path:
        raise ServiceError(Status.INVALID_ARGUMENT, "path is empty")
    if not fabric_dirs:
        raise ServiceError(Status.PERMISSION_DENIED,
                           f"LoadFabric path {shown(path)}: server-side paths are disabled; set "
                           "fabric_dirs in the config (or smroute serve --fabric-dir DIR), or "
                           "send the topology as topology_text")
    if "\0" in path or not os.path.isabs(path):
        raise ServiceError(Status.INVALID_ARGUMENT,
                           f"LoadFabric path {echo(path)}: expected an absolute path on the "
                           "server")
    real_dirs = [os.path.realpath(d) for d in fabric_dirs]
    real = os.path.realpath(path)
    if _inside_dirs(real, real_dirs) is not None:
        return real
    written_inside = _inside_dirs(os.path.normpath(path),
                                  [os.path.normpath(d) for d in fabric_dirs] + real_dirs)
    path, real = shown(path), shown(real)  # as messages show them
    listed = ", ".join(fabric_dirs)
    if written_inside:
        # written inside a directory, but a symlink there leads out of it
        raise ServiceError(Status.PERMISSION_DENIED,
                           f"LoadFabric path {path} resolves to {real}, which is outside "
                           f"fabric_dirs ({listed}); symlinks out of fabric_dirs are not "
                           "followed")
    raise ServiceError(Status.PERMISSION_DENIED,
                       f"LoadFabric path {path} is outside fabric_dirs ({listed}); put the file "
                       "in one of them (or add its directory to fabric_dirs), or send the "
                       "topology as topology_text")
