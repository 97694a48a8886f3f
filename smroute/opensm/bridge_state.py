"""The OpenSM bridge's options, results and persistent state (see
:mod:`smroute.opensm.bridge`).

The state (``STATE_FILE`` beside ``BASE_FILE``, in ``state_dir``) holds the
base fabric the daemon loaded, the down set in force and the last epoch
written, so a restarted bridge resumes instead of reloading the daemon.
Format 2 keys a down link as the :class:`~smroute.fabric.faults.DownSet`
does (the base fabric's first end); format 1 (both ends) still loads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from smroute.errors import InputError, SmrouteError
from smroute.fabric.faults import DownSet, FaultEvent, link_key
from smroute.fabric.ibnetdiscover.parse import parse_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fileio import atomic_write_text
from smroute.tables.lft import NO_ROUTE

__all__ = ["BASE_FILE", "STATE_FILE", "BridgeError", "BridgeOptions", "BridgeState",
           "CheckResult", "DryRun", "SyncResult", "format_dry_run", "read_state",
           "write_state"]

STATE_FILE = "bridge-state.json"
BASE_FILE = "bridge-base.topo"


class BridgeError(SmrouteError):
    """The bridge cannot do its job (daemon unreachable, bad state, ...)."""


@dataclass(frozen=True)
class BridgeOptions:
    """What the bridge talks to and how.

    daemon: gRPC target (``unix:/run/smroute/smroute.sock`` or ``host:port``).
    lfts_file: OpenSM's ``lfts_file`` (the file engine's input).
    trigger: "console" (loopback console ``reroute``), "sighup" (``opensm_pid``)
        or "none" (write only; OpenSM picks the file up at its next heavy sweep).
    opensm_log: OpenSM's log file, followed for traps/sweeps (None: poll only).
    poll_interval: seconds between re-discoveries without a log trigger (0 = never).
    debounce: seconds from the first trigger line of a burst to the re-discovery.
    load: at start, "live" (daemon discovers: LoadFabric live + Route),
        "discover" (the bridge discovers and sends the text) or "none"
        (the daemon already serves an epoch of this fabric).
    tls_ca / tls_cert / tls_key: TLS to the daemon (CA to trust; client
        certificate and key for mutual TLS, whose CN the daemon must list in
        ``mutating_identities``); tls_server_name overrides the name checked.
    port_guids: name each LID's port GUID (and node) in the file, which lets
        OpenSM remap LIDs that moved; without, the file is about 6x smaller
        (38 MB instead of 249 MB on a 4,096-host PGFT).
    """

    daemon: str
    lfts_file: Path
    trigger: str = "console"
    console: tuple[str, int] = ("127.0.0.1", 10000)
    opensm_pid: int | None = None
    opensm_log: Path | None = None
    poll_interval: float = 60.0
    debounce: float = 0.5
    load: str = "none"
    ca: str | None = None
    port: int | None = None
    discover_timeout: float = 120.0
    discover_env: Mapping[str, str] | None = None
    state_dir: Path | None = None
    rpc_timeout: float = 120.0
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_server_name: str | None = None
    port_guids: bool = True

    def __post_init__(self) -> None:
        if self.trigger not in ("console", "sighup", "none"):
            raise InputError(f"trigger must be console, sighup or none, not {self.trigger!r}")
        if self.trigger == "sighup" and not (self.opensm_pid and self.opensm_pid > 0):
            raise InputError("trigger sighup needs the OpenSM PID (--opensm-pid, > 0), "
                             f"not {self.opensm_pid}")
        if self.load not in ("live", "discover", "none"):
            raise InputError(f"load must be live, discover or none, not {self.load!r}")
        if self.poll_interval < 0 or self.debounce < 0:
            raise InputError("poll interval and debounce must be >= 0")

    @property
    def state_path(self) -> Path:
        """Directory of the bridge state (``state_dir``, else the LFT file's directory)."""
        return Path(self.state_dir or Path(self.lfts_file).parent)


@dataclass(frozen=True)
class SyncResult:
    """One epoch written for OpenSM: ids, sizes, what changed since the last file."""

    epoch: int
    switches: int
    max_lid: int
    blocks_changed: int
    entries_changed: int
    fetch_s: float
    write_s: float
    trigger_s: float
    trigger_reply: str
    written_unix_s: float


@dataclass(frozen=True)
class CheckResult:
    """One re-discovery: the down set found, events sent and the epoch they made."""

    events: tuple[FaultEvent, ...]
    down: DownSet
    warnings: tuple[str, ...]
    epoch: int | None
    discover_s: float
    apply_s: float


@dataclass(frozen=True)
class DryRun:
    """Result of :meth:`Bridge.dry_run`: the text, the pending events, the LFT
    blocks those events would change (daemon dry run), and the blocks that
    differ between OpenSM's file and the daemon's latest epoch (None: no file)."""

    lines: tuple[str, ...]
    events: tuple[FaultEvent, ...]
    fault_blocks: int
    file_blocks: int | None

    @property
    def pending(self) -> bool:
        """True if fault events are pending or OpenSM's file differs (or is unreadable)."""
        return bool(self.events) or self.file_blocks != 0


@dataclass
class BridgeState:
    """What the bridge keeps across restarts (besides the base fabric);
    ``write_failures``: failed writes of the LFT file by the running bridge
    (a counter for operators: ``lfts_write_failures`` in the state file)."""

    down: DownSet = field(default_factory=DownSet)
    written_epoch: int = 0
    write_failures: int = 0


def write_state(d: Path, base: Fabric | None, state: BridgeState) -> None:
    """Write ``state`` (and the base fabric's hash) to ``d / STATE_FILE``, atomically."""
    doc = {
        "format": "smroute-bridge-state/2",
        "base_hash": base.content_hash if base is not None else None,
        "written_epoch": state.written_epoch,
        "lfts_write_failures": state.write_failures,
        "down": {
            "switches": [f"{g:#018x}" for g in sorted(state.down.switches)],
            "cas": [f"{g:#018x}" for g in sorted(state.down.cas)],
            "links": [[f"{g:#018x}", p] for g, p in sorted(state.down.links)],
        },
    }
    atomic_write_text(d / STATE_FILE, json.dumps(doc, indent=1) + "\n")


def read_state(d: Path) -> tuple[Fabric, BridgeState]:
    """The base fabric and state kept in ``d`` (:class:`BridgeError` if absent,
    :class:`InputError` naming the file if malformed)."""
    try:
        doc = json.loads((d / STATE_FILE).read_text())
        lines = (d / BASE_FILE).read_text().splitlines()
    except (OSError, ValueError) as exc:
        raise BridgeError(f"no bridge state in {d} ({exc}); run the bridge first") from None
    base = parse_topology(lines, str(d / BASE_FILE))
    try:
        down = doc["down"]
        state = BridgeState(
            down=DownSet(
                switches=frozenset(int(g, 16) for g in down["switches"]),
                cas=frozenset(int(g, 16) for g in down["cas"]),
                links=frozenset(_state_link(base, item) for item in down["links"])),
            written_epoch=int(doc.get("written_epoch", 0)))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"bad bridge state ({exc})", source=str(d / STATE_FILE)) from None
    return base, state


def _state_link(base: Fabric, item: list[Any]) -> tuple[int, int]:
    """A down link of the state file: ``[guid, port]`` (format 2), or
    ``[guid_a, port_a, guid_b, port_b]`` (format 1), keyed as the
    :class:`DownSet` keys it (the base fabric's first end)."""
    guid, port = int(item[0], 16), int(item[1])
    if len(item) == 2:
        return guid, port
    row = base.port_row(base.node_by_guid(guid), port)
    links = np.flatnonzero((base.link_a == row) | (base.link_b == row))
    return link_key(base, int(links[0]))


def format_dry_run(summary: Any, changes: Sequence[Any], truncated: bool) -> list[str]:
    """Lines of a daemon dry run (``ApplyFaults(dry_run=True)``'s diff summary
    and listed changes)."""
    out = [f"daemon dry run: {summary.switches_changed} of {summary.switches_compared} "
           f"switches change, {summary.entries_changed} entries, "
           f"{summary.blocks_changed} 64-LID blocks"
           + ("" if not summary.switches_only_a else
              f", {summary.switches_only_a} switches removed")]
    for sc in changes:
        blocks = ", ".join(str(b) for b in sc.blocks)
        out.append(f'switch {sc.guid:#018x} "{sc.desc}" (LID {sc.new_lid or sc.old_lid}): '
                   f"{sc.lids_changed} LIDs changed in {len(sc.blocks)} blocks [{blocks}]")
        for e in sc.changes:
            o = "-" if e.old_port == NO_ROUTE else str(e.old_port)
            n = "-" if e.new_port == NO_ROUTE else str(e.new_port)
            out.append(f"  0x{e.lid:04x}: {o} -> {n}")
    if truncated:
        out.append("... more changed entries not listed")
    return out
