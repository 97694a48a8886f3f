"""Local HCAs and their ports (edge module).

Two sources, tried in order by :func:`local_ports`:

* **pyverbs** (rdma-core's Python bindings, Debian ``python3-pyverbs``): the
  verbs view (``ibv_query_device`` / ``ibv_query_port`` / ``ibv_query_gid``).
  The package installs into ``/usr/lib/python3/dist-packages``, which a venv
  does not see; :func:`import_pyverbs` adds that directory for that one import.
* **sysfs** ``/sys/class/infiniband/<dev>/{node_guid,ports/<n>/{lid,
  lid_mask_count,sm_lid,state,gids/0}}``: the kernel's view, also what
  infiniband-diags and libibumad use.

Under ``ibsim-run`` (umad2sim LD_PRELOADed) there is no uverbs device, so
pyverbs finds no device; umad2sim fakes the sysfs tree instead, but only for
the libc calls it intercepts (``open``, ``opendir``, ``scandir``): it writes a
snapshot under ``./sys-<pid>/`` in the working directory on first use and
redirects those calls there.  Python opens files with ``open64``, which
umad2sim does not intercept, so :func:`read_sysfs` first lists the directory
(``opendir``, which triggers umad2sim) and then reads the snapshot files
directly.  The source actually used is reported (``LocalPort.source``).

Parsing is pure (:func:`parse_sysfs_port`, :func:`parse_guid`); only
:func:`read_sysfs` and :func:`read_pyverbs` touch the system.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = [
    "PORT_STATES",
    "LocalPort",
    "import_pyverbs",
    "local_ports",
    "parse_guid",
    "parse_sysfs_port",
    "read_pyverbs",
    "read_sysfs",
    "read_sysfs_fresh",
    "umad2sim_active",
]

#: IB PortInfo.PortState values.
PORT_STATES: dict[int, str] = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE",
                               5: "ACTIVE_DEFER"}
SYSFS_ROOT = "/sys/class/infiniband"
DIST_PACKAGES = "/usr/lib/python3/dist-packages"


@dataclass(frozen=True)
class LocalPort:
    """One port of a local HCA.

    ``node_guid`` / ``port_guid``: 64-bit GUIDs (0 if unknown); ``lid``,
    ``sm_lid``: 16-bit LIDs (0 = none assigned); ``lmc``: 0..7; ``state``: IB
    port state number (4 = ACTIVE); ``link_layer``: "InfiniBand" or "Ethernet"
    ("" if unknown); ``source``: "pyverbs", "sysfs" or "sysfs (umad2sim)".
    """

    ca: str
    port: int
    node_guid: int
    port_guid: int
    lid: int
    lmc: int
    sm_lid: int
    state: int
    link_layer: str
    source: str

    @property
    def state_name(self) -> str:
        return PORT_STATES.get(self.state, f"state {self.state}")

    @property
    def active(self) -> bool:
        """ACTIVE with a LID and a known SM: a subnet manager has configured it."""
        return self.state == 4 and self.lid != 0 and self.sm_lid != 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["node_guid"] = f"{self.node_guid:#018x}"
        d["port_guid"] = f"{self.port_guid:#018x}"
        d["state_name"] = self.state_name
        d["active"] = self.active
        return d

    def describe(self) -> str:
        return (f"{self.ca} port {self.port}: {self.state_name}, LID {self.lid} LMC {self.lmc}, "
                f"SM LID {self.sm_lid}, node GUID {self.node_guid:#018x}, "
                f"port GUID {self.port_guid:#018x} [{self.source}]")


def parse_guid(text: str) -> int:
    """GUID from sysfs/verbs text: ``0002:c903:0000:0001``, ``0x0002c90300000001`` or a
    GID ``fe80:0000:0000:0000:0002:c903:0000:0001`` (its low 64 bits).

    Raises ``ValueError`` on anything else.
    """
    s = text.strip().lower()
    if s.startswith("0x"):
        s = s[2:]
    s = s.replace(":", "")
    bad = any(c not in "0123456789abcdef" for c in s)
    if not s or bad or (len(s) > 16 and len(s) != 32):
        raise ValueError(f"not a GUID: {text.strip()!r}")
    return int(s[-16:], 16)


def _num(text: str) -> int:
    """``0x1f``, ``31`` or sysfs ``4: ACTIVE`` -> int."""
    head = text.strip().split(":", 1)[0].strip()
    return int(head, 0)


def parse_sysfs_port(ca: str, port: int, values: Mapping[str, str], *,
                     source: str = "sysfs") -> LocalPort:
    """A :class:`LocalPort` from the text of sysfs files.

    ``values`` maps file names (``node_guid``, ``lid``, ``lid_mask_count``,
    ``sm_lid``, ``state``, ``link_layer``, ``gids/0``) to their contents; a
    missing file reads as 0 / "".  Raises ``ValueError`` naming the file whose
    text is malformed.
    """
    def get(name: str, conv: Callable[[str], int]) -> int:
        raw = values.get(name)
        if raw is None or not raw.strip():
            return 0
        try:
            return conv(raw)
        except ValueError:
            raise ValueError(f"{SYSFS_ROOT}/{ca}/{'' if name == 'node_guid' else f'ports/{port}/'}"
                             f"{name}: unexpected content {raw.strip()!r}") from None

    return LocalPort(
        ca=ca, port=port,
        node_guid=get("node_guid", parse_guid),
        port_guid=get("gids/0", parse_guid),
        lid=get("lid", _num), lmc=get("lid_mask_count", _num), sm_lid=get("sm_lid", _num),
        state=get("state", _num), link_layer=values.get("link_layer", "").strip(), source=source,
    )


def umad2sim_active(env: Mapping[str, str] | None = None) -> bool:
    """True when ibsim's umad2sim is LD_PRELOADed into this process."""
    return "umad2sim" in (env if env is not None else os.environ).get("LD_PRELOAD", "")


_PORT_FILES = ("lid", "lid_mask_count", "sm_lid", "state", "link_layer", "gids/0")


def read_sysfs(root: str = SYSFS_ROOT) -> list[LocalPort]:
    """Ports of every device under ``root`` (empty if there is none).

    Under umad2sim the simulated snapshot is read (see the module docstring).
    """
    source = "sysfs"
    base = Path(root)
    try:
        devices = sorted(os.listdir(root))  # opendir: umad2sim intercepts and builds its snapshot
    except OSError:
        return []
    if umad2sim_active() and root == SYSFS_ROOT and not base.exists():
        base = Path(f"sys-{os.getpid()}") / root.lstrip("/")
        source = "sysfs (umad2sim)"
    out: list[LocalPort] = []
    for dev in devices:
        ddir = base / dev
        vals: dict[str, str] = {}
        with contextlib.suppress(OSError):
            vals["node_guid"] = (ddir / "node_guid").read_text()
        try:
            ports = sorted(int(p) for p in os.listdir(ddir / "ports") if p.isdigit())
        except OSError:
            continue
        for p in ports:
            pv = dict(vals)
            for name in _PORT_FILES:
                with contextlib.suppress(OSError):
                    pv[name] = (ddir / "ports" / str(p) / name).read_text()
            out.append(parse_sysfs_port(dev, p, pv, source=source))
    return out


def import_pyverbs() -> ModuleType | None:
    """``pyverbs.device``, or ``None`` if rdma-core's bindings are not installed.

    Looks on ``sys.path`` first, then in Debian's dist-packages directory
    (added to ``sys.path`` only for this import).
    """
    try:
        return importlib.import_module("pyverbs.device")
    except ImportError:
        pass
    if not os.path.isdir(os.path.join(DIST_PACKAGES, "pyverbs")):
        return None
    sys.path.append(DIST_PACKAGES)
    try:
        return importlib.import_module("pyverbs.device")
    except ImportError:
        return None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(DIST_PACKAGES)


def _be64(num: int) -> int:
    """verbs GUIDs are big-endian 64-bit numbers read as host integers."""
    return int.from_bytes(int(num).to_bytes(8, "little"), "big")


def read_pyverbs() -> tuple[list[LocalPort], str]:
    """Ports of every verbs device; returns (ports, note).

    ``note`` says why the list is empty (bindings missing, no device).
    """
    dev_mod = import_pyverbs()
    if dev_mod is None:
        return [], "pyverbs not installed (Debian package python3-pyverbs)"
    try:
        devices = dev_mod.get_device_list()
    except Exception as exc:  # PyverbsRDMAError when there is no uverbs device
        return [], f"pyverbs found no device ({exc})"
    out: list[LocalPort] = []
    for dev in devices:
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        try:
            with dev_mod.Context(name=name) as ctx:
                attr = ctx.query_device()
                node_guid = _be64(attr.node_guid)
                for p in range(1, int(attr.phys_port_cnt) + 1):
                    pa = ctx.query_port(p)
                    try:
                        port_guid = parse_guid(str(ctx.query_gid(p, 0)))
                    except Exception:
                        port_guid = 0
                    ll = {1: "InfiniBand", 2: "Ethernet"}.get(int(getattr(pa, "link_layer", 1)), "")
                    out.append(LocalPort(
                        ca=name, port=p, node_guid=node_guid, port_guid=port_guid,
                        lid=int(pa.lid), lmc=int(pa.lmc), sm_lid=int(pa.sm_lid),
                        state=int(pa.state), link_layer=ll, source="pyverbs"))
        except Exception as exc:
            return out, f"pyverbs could not query {name} ({exc})"
    return out, "" if out else "pyverbs found no device"


_CHILD_ENV = "SMROUTE_HCA_SNAPSHOT_CHILD"


def read_sysfs_fresh(timeout: float = 60.0) -> list[LocalPort]:
    """:func:`read_sysfs` in a new process.

    umad2sim builds its sysfs snapshot once per process, so a long-lived
    process (the daemon, the bridge) would keep seeing the port as it was at
    its first look (e.g. INIT before the SM came up).  A child process takes
    a fresh snapshot.  Raises ``OSError`` if the child fails or times out.
    """
    import json
    import subprocess

    env = dict(os.environ)
    env[_CHILD_ENV] = "1"
    try:
        res = subprocess.run([sys.executable, "-m", "smroute.discovery.hca"], capture_output=True,
                             text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise OSError(f"sysfs snapshot child did not finish within {timeout:g} s") from None
    if res.returncode != 0:
        raise OSError(f"sysfs snapshot child failed ({res.returncode}): {res.stderr[-300:]}")
    return [LocalPort(**d) for d in json.loads(res.stdout)]


def local_ports() -> tuple[list[LocalPort], list[str]]:
    """Local HCA ports from pyverbs, else from sysfs; returns (ports, notes).

    ``notes`` explain which source was tried and why it was not used.  Under
    umad2sim the sysfs snapshot is taken in a child process each time (see
    :func:`read_sysfs_fresh`).
    """
    notes: list[str] = []
    ports, note = read_pyverbs()
    if ports:
        return ports, notes
    notes.append(note)
    if umad2sim_active() and not os.environ.get(_CHILD_ENV):
        try:
            ports = read_sysfs_fresh()
        except (OSError, ValueError) as exc:
            notes.append(f"fresh sysfs snapshot failed ({exc}); reading this process's")
            ports = read_sysfs()
    else:
        ports = read_sysfs()
    if not ports:
        notes.append(f"no device under {SYSFS_ROOT}")
    else:
        notes.append(f"using {ports[0].source}")
    return ports, notes


if __name__ == "__main__":  # the child of read_sysfs_fresh: print the ports as JSON
    import json as _json

    print(_json.dumps([asdict(p) for p in read_sysfs()]))
