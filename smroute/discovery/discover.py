"""Discover the fabric through a local HCA with ``ibnetdiscover`` (edge module).

:func:`discover_topology_lines` is what ``smroute discover`` and the daemon's
live ``LoadFabric`` source call: it checks the local HCA ports first
(:func:`smroute.discovery.hca.local_ports`), runs ``ibnetdiscover [-C CA] [-P PORT]``
(infiniband-diags) and returns its topology text, which
:func:`smroute.fabric.ibnetdiscover.parse.parse_topology` parses like a file.

Failures raise :class:`DiscoveryError` saying which of these it is:

* **no HCA** (``reason == "no-hca"``): no verbs device, no sysfs device, or
  ibnetdiscover cannot read the umad ABI (ib_umad not loaded);
* **no permission** (``"no-permission"``): the umad device
  ``/dev/infiniband/umadN`` cannot be opened read-write by this user;
* **no SM / port not active** (``"no-sm"``): the port is not ACTIVE, has LID 0
  or knows no SM LID, or the discovered LIDs are all 0;
* ``"tool"``: ibnetdiscover missing, timed out or failed otherwise.

Under ``ibsim-run`` the same code sees the simulated fabric (umad2sim fakes
the umad device and sysfs; pyverbs sees nothing there, so the port check uses
the faked sysfs and says so).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from smroute.discovery.hca import LocalPort, local_ports, umad2sim_active
from smroute.errors import SmrouteError
from smroute.tools import ToolError, ToolMissingError, require_tool, run_in_group

__all__ = [
    "DiscoveryError",
    "check_port",
    "classify_failure",
    "discover_topology_lines",
    "select_port",
]

UMAD_SYSFS = "/sys/class/infiniband_mad"
UMAD_DEV = "/dev/infiniband"


class DiscoveryError(SmrouteError):
    """Live discovery failed; ``reason`` is "no-hca", "no-permission", "no-sm" or "tool"."""

    exit_code = 1

    def __init__(self, message: str, *, reason: str) -> None:
        self.reason = reason
        super().__init__(message)


def select_port(ports: Sequence[LocalPort], ca: str | None, port: int | None) -> LocalPort:
    """The port discovery will use: ``ca``/``port`` if given, else the first
    ACTIVE InfiniBand port, else the first port (as ibnetdiscover does).

    Raises :class:`DiscoveryError` ("no-hca") if none matches.
    """
    ib = [p for p in ports if p.link_layer in ("", "InfiniBand")]
    if not ib:
        raise DiscoveryError(
            "no InfiniBand HCA found" + (f" (found only: {', '.join(p.ca for p in ports)})"
                                         if ports else ""), reason="no-hca")
    cand = [p for p in ib if (ca is None or p.ca == ca) and (port is None or p.port == port)]
    if not cand:
        have = ", ".join(f"{p.ca} port {p.port}" for p in ib)
        want = f"{ca or 'any HCA'} port {port if port is not None else 'any'}"
        raise DiscoveryError(f"no InfiniBand port {want}; available: {have}", reason="no-hca")
    active = [p for p in cand if p.active]
    return active[0] if active else cand[0]


def check_port(p: LocalPort) -> None:
    """Raise :class:`DiscoveryError` ("no-sm") unless a subnet manager configured ``p``."""
    if p.active:
        return
    what = []
    if p.state != 4:
        what.append(f"state {p.state_name} (not ACTIVE)")
    if p.lid == 0:
        what.append("LID 0")
    if p.sm_lid == 0:
        what.append("SM LID 0")
    raise DiscoveryError(
        f"no subnet manager: {p.ca} port {p.port} has {', '.join(what)} [{p.source}]; "
        "start a subnet manager (e.g. OpenSM) on the fabric and wait until the port is ACTIVE",
        reason="no-sm")


def _umad_device(p: LocalPort, sysfs: str | None = None) -> str | None:
    """``/dev/infiniband/umadN`` of port ``p`` (from ``infiniband_mad/umadN/{ibdev,port}``)."""
    sysfs = UMAD_SYSFS if sysfs is None else sysfs
    try:
        names = os.listdir(sysfs)
    except OSError:
        return None
    for name in names:
        if not name.startswith("umad"):
            continue
        try:
            with open(os.path.join(sysfs, name, "ibdev"), encoding="ascii") as fh:
                dev = fh.read().strip()
            with open(os.path.join(sysfs, name, "port"), encoding="ascii") as fh:
                port = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if dev == p.ca and port == p.port:
            return os.path.join(UMAD_DEV, name)
    return None


def _check_permission(p: LocalPort) -> None:
    dev = _umad_device(p)
    if dev is None or not os.path.exists(dev):
        return  # nothing to check here; ibnetdiscover's own error is classified later
    if not os.access(dev, os.R_OK | os.W_OK):
        raise DiscoveryError(
            f"no permission: {dev} ({p.ca} port {p.port}) is not readable and writable by "
            f"uid {os.getuid()}; run as root, or grant access to the umad device (e.g. the "
            "'rdma' group or a udev rule)", reason="no-permission")


_NO_HCA = re.compile(r"can't read ABI version|is ib_umad module loaded|No IB devices found|"
                     r"umad_init|no such device", re.I)
_PERM = re.compile(r"Permission denied|EACCES|Operation not permitted", re.I)
_NOT_ACTIVE = re.compile(r"port .*not active|state.*DOWN|No SM|smlid.*0", re.I)


def classify_failure(stderr: str, returncode: int, ca: str | None = None,
                     port: int | None = None) -> DiscoveryError:
    """Turn ibnetdiscover's exit status and stderr into a :class:`DiscoveryError`."""
    where = f"{ca or 'default HCA'}:{port if port is not None else 'default port'}"
    tail = stderr.strip()[-800:]
    if _PERM.search(stderr):
        return DiscoveryError(
            f"no permission to open the umad device for {where}: run as root or grant access "
            f"to /dev/infiniband/umad* (ibnetdiscover: {tail})", reason="no-permission")
    if _NO_HCA.search(stderr):
        return DiscoveryError(
            f"no HCA: ibnetdiscover cannot open a umad port for {where} (is an InfiniBand "
            f"HCA present and the ib_umad module loaded?) (ibnetdiscover: {tail})",
            reason="no-hca")
    if _NOT_ACTIVE.search(stderr):
        return DiscoveryError(
            f"no subnet manager / port not active for {where} (ibnetdiscover: {tail})",
            reason="no-sm")
    return DiscoveryError(f"ibnetdiscover failed with status {returncode} for {where}: {tail}",
                          reason="tool")


_LID_RE = re.compile(r"\blid (\d+)")


def discover_topology_lines(
    *, ca: str | None = None, port: int | None = None, timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """Run ``ibnetdiscover`` through a local HCA port; return its topology lines.

    ``ca`` / ``port`` select the HCA and port (``-C`` / ``-P``); ``env`` is the
    environment of ibnetdiscover (default: this process's, e.g. under
    ``ibsim-run``).  The local port is checked first when this process sees
    the same device set as ibnetdiscover will (``env`` None or with the same
    ``LD_PRELOAD``).  Raises :class:`DiscoveryError` (see the module docstring).
    """
    if port is not None and not 1 <= port <= 255:
        raise DiscoveryError(f"port must be in 1..255, not {port}", reason="no-hca")
    run_env = dict(os.environ if env is None else env)
    same_view = env is None or run_env.get("LD_PRELOAD", "") == os.environ.get("LD_PRELOAD", "")
    if same_view:
        ports, notes = local_ports()
        if not ports:
            hint = "; ".join(n for n in notes if n)
            raise DiscoveryError(
                f"no HCA: no InfiniBand device found ({hint}); is an HCA present and its "
                "driver loaded (ib_umad, mlx5_ib)?", reason="no-hca")
        chosen = select_port(ports, ca, port)
        check_port(chosen)
        if not umad2sim_active(run_env):
            _check_permission(chosen)
    try:
        exe = require_tool("ibnetdiscover")
    except ToolMissingError as exc:
        raise DiscoveryError(str(exc), reason="tool") from None
    args = [exe]
    if ca is not None:
        args += ["-C", ca]
    if port is not None:
        args += ["-P", str(port)]
    try:
        rc, out, err = run_in_group(args, timeout=timeout, env=run_env, name="ibnetdiscover")
    except ToolError as exc:
        raise DiscoveryError(str(exc), reason="tool") from None
    stderr = err.decode("utf-8", "replace")
    if rc != 0:
        raise classify_failure(stderr, rc, ca, port)
    lines = out.decode("utf-8", "replace").splitlines()
    if not any(ln.startswith(("Switch", "Ca", "Rt")) for ln in lines):
        raise DiscoveryError(f"ibnetdiscover printed no node for {ca or 'default HCA'}: "
                             f"{stderr.strip()[-400:]}", reason="tool")
    lids = [int(m.group(1)) for ln in lines for m in _LID_RE.finditer(ln)]
    if lids and not any(lids):
        raise DiscoveryError(
            "no subnet manager: every discovered LID is 0 (no SM has assigned LIDs yet); "
            "start OpenSM and retry", reason="no-sm")
    return lines
