"""The OpenSM bridge: the manager side of smroute (edge module).

It runs next to OpenSM and connects three things:

* **Epochs -> OpenSM.**  It follows the daemon's committed epochs (gRPC
  ``Watch``), fetches each one's tables (``GetTables``, checked against the
  epoch's ``tables_sha256``), writes OpenSM's ``file``-engine LFT file
  atomically (temporary file in the same directory, fsync, rename; via
  :func:`smroute.tables.formats.write_tables`) and then makes OpenSM load it.
  The trigger is the console ``reroute`` command on the loopback console
  (default): it only reruns the routing engine (the file engine re-reads the
  file) and sends the changed LFT blocks, without rediscovering the subnet,
  and the console acknowledges it.  ``SIGHUP`` is the alternative when the
  console is off: OpenSM 3.3.23 turns it into a forced heavy sweep (full
  rediscovery, then routing, which also re-reads the file) - slower, and it
  needs the PID and the right to signal it.  The file is renamed into place
  *before* the trigger, so OpenSM can only read a complete old or new file.
* **Fabric changes -> fault events.**  It keeps the *base* fabric the daemon
  loaded and the set of items it has reported down.  When OpenSM's log shows a
  trap (``Received Generic Notice``, e.g. trap 128 "link state change", which
  ibsim's Unlink/ReLink also send) or the end of a heavy sweep (``SUBNET
  UP``), or every ``poll_interval`` seconds, it re-discovers the fabric with
  ``ibnetdiscover`` (:mod:`smroute.discovery.discover`) after a short debounce,
  computes what of the base is missing (:func:`smroute.discovery.changes.down_set`)
  and sends the step from the old down set to the new one with
  ``ApplyFaults`` (``*_DOWN`` for new failures, ``*_UP`` for recoveries).
  Re-discovery is the source of truth (a missed or repressed trap only delays
  detection until the next sweep or poll); the log is only the wake-up call.
  Our own ``reroute`` logs ``REROUTE COMPLETE``, not ``SUBNET UP``, so it does
  not wake the detector.
* **State.**  The base topology and the down set are kept in ``state_dir``
  (``bridge-base.topo``, ``bridge-state.json``, written atomically), so a
  restarted bridge and ``--dry-run`` know what the daemon holds.

The dry run (:meth:`Bridge.dry_run`) re-discovers, computes the pending
events and asks the daemon for ``ApplyFaults(dry_run=True)``; it also diffs
the file OpenSM has against the daemon's latest epoch.  It writes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from smroute.discovery.changes import down_set, fault_events, unexpected
from smroute.errors import DaemonUnreachableError, InputError, SmrouteError
from smroute.fabric.faults import DownSet, FaultEvent
from smroute.fabric.ibnetdiscover.parse import parse_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fileio import atomic_write_text
from smroute.opensm.backoff import Backoff
from smroute.opensm.bridge_state import (
    BASE_FILE,
    BridgeError,
    BridgeOptions,
    BridgeState,
    CheckResult,
    DryRun,
    SyncResult,
    read_state,
    write_state,
)
from smroute.opensm.console import LogFollower, OpenSMConsole
from smroute.opensm.resync import resync
from smroute.service.log import Logger
from smroute.service.rpc.messages import event_msgs
from smroute.tables.diff import diff_tables
from smroute.tables.formats import write_tables
from smroute.tables.lft import ForwardingTables, lid_labels

__all__ = ["Bridge", "BridgeError", "BridgeOptions", "CheckResult", "DryRun", "SyncResult",
           "TRIGGER_RE"]

#: OpenSM log lines that wake the change detector: traps and the end of heavy sweeps.
TRIGGER_RE = re.compile(r"Received Generic Notice|SUBNET UP|Forcing heavy sweep")

class _WriteFailed(BridgeError):
    """Writing the LFT file failed (already logged; :meth:`Bridge.run` retries)."""


Discover = Callable[[], list[str]]
Log = Callable[..., None]


class Bridge:
    """See the module docstring.  ``discover`` returns ibnetdiscover lines (default:
    :func:`smroute.discovery.discover.discover_topology_lines` with the options' HCA,
    port, timeout and env); ``log`` receives ``(level, event, **fields)``
    (default: ``key=value`` lines on stdout, :class:`smroute.service.log.Logger`;
    journald adds its own timestamp, ``ts`` is the wall time in seconds for
    lining up with OpenSM's log)."""

    def __init__(self, opts: BridgeOptions, *, discover: Discover | None = None,
                 log: Log | None = None) -> None:
        self.opts = opts
        self.log: Log = log or Logger(sys.stdout, fmt="text")
        self._discover = discover or self._default_discover
        self.base: Fabric | None = None
        self.state = BridgeState()
        self.last_tables: ForwardingTables | None = None
        self.syncs: list[SyncResult] = []
        self.checks: list[CheckResult] = []
        self._client: Any = None
        self._stop = threading.Event()
        self._resync_needed = threading.Event()
        #: the daemon instance (Epoch.instance_id) whose state the bridge follows;
        #: a Watch epoch of another instance means the daemon restarted
        self.daemon_instance = ""
        self.trigger_pending = False
        self.epoch_queue: queue.Queue[int] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._watch_call: Any = None
        self._lock = threading.Lock()
        self.errors: list[str] = []
        #: Writing the LFT file (or the state beside it) failed: when to retry,
        #: and how many failures so far (``total``, also in the state file).
        self.write_retry = Backoff(initial_s=1.0, max_s=60.0)
        self._base_text: str | None = None  # initialize()'s base, until it is on disk

    # ------------------------------------------------------------ plumbing
    def _default_discover(self) -> list[str]:
        from smroute.discovery.discover import discover_topology_lines

        return discover_topology_lines(ca=self.opts.ca, port=self.opts.port,
                                       timeout=self.opts.discover_timeout,
                                       env=self.opts.discover_env)

    def connect(self, timeout: float = 30.0) -> None:
        """Open the gRPC channel (the daemon's :class:`SmrouteClient`) and wait
        until the daemon answers (else :class:`DaemonUnreachableError`)."""
        import grpc

        from smroute.service.rpc.client import SmrouteClient

        creds = None
        o = self.opts
        if o.tls_ca is not None or o.tls_cert is not None:
            from smroute.service.rpc.auth import client_credentials

            creds = client_credentials(o.tls_ca, o.tls_cert, o.tls_key)
        self._client = SmrouteClient(o.daemon, timeout=o.rpc_timeout, credentials=creds,
                                     server_name=o.tls_server_name)
        try:
            self._client.wait_ready(timeout)
        except grpc.FutureTimeoutError:
            raise DaemonUnreachableError(f"cannot reach the daemon at {self.opts.daemon} "
                                         f"within {timeout:g} s") from None

    @property
    def client(self) -> Any:
        """The connected :class:`~smroute.service.rpc.client.SmrouteClient`."""
        if self._client is None:
            raise BridgeError("not connected to the daemon (connect() first)")
        return self._client

    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """``fn(*args, **kw)`` with gRPC and checksum errors as :class:`BridgeError`."""
        import grpc

        from smroute.service.rpc.client import TablesChecksumError

        try:
            return fn(*args, **kw)
        except grpc.RpcError as exc:
            code = exc.code().name if hasattr(exc, "code") else "?"
            detail = exc.details() if hasattr(exc, "details") else str(exc)
            raise BridgeError(f"daemon {what}: {code}: {detail}") from None
        except TablesChecksumError as exc:
            raise BridgeError(f"daemon {what}: {exc}") from None

    def close(self) -> None:
        """Stop the loops, cancel the Watch stream, join the threads, close the channel."""
        self._stop.set()
        if self._watch_call is not None:
            with contextlib.suppress(Exception):
                self._watch_call.cancel()
        for t in self._threads:
            t.join(timeout=10)
        if self._client is not None:
            self._client.close()

    # ------------------------------------------------------------ state
    def save_state(self) -> None:
        self.state.write_failures = self.write_retry.total
        if self._base_text is not None:
            atomic_write_text(self.opts.state_path / BASE_FILE, self._base_text)
            self._base_text = None
        write_state(self.opts.state_path, self.base, self.state)

    def load_state(self) -> None:
        """Base fabric and down set from ``state_dir`` (:class:`BridgeError` if absent)."""
        self.base, self.state = read_state(self.opts.state_path)

    # ------------------------------------------------------------ start-up
    def initialize(self, lines: list[str] | None = None, *, reason: str = "start") -> int:
        """Load/route per ``opts.load``, record the base fabric; return the epoch id.

        ``lines``: a discovery already made (default: discover now).  Also used
        to *reload* when the fabric gained something the base does not have
        (``reason`` is logged)."""
        c = self.client
        t0 = time.monotonic()
        if lines is None:
            lines = self._discover()
        base = parse_topology(lines, "ibnetdiscover")
        if self.opts.load == "live":
            summary = self.call("LoadFabric", c.load_fabric_live, self.opts.ca or "",
                                 self.opts.port or 0, self.opts.discover_timeout)
            if summary.content_hash != base.content_hash:
                self.log("warning", "base_hash_differs", daemon=summary.content_hash[:12],
                         bridge=base.content_hash[:12])
            epoch = self.call("Route", c.route)
        elif self.opts.load == "discover":
            self.call("LoadFabric", c.load_fabric_text, "\n".join(lines) + "\n",
                       "bridge discovery")
            epoch = self.call("Route", c.route)
        else:
            epoch = self.call("GetEpoch", c.get_epoch, 0)
            self.daemon_instance = str(epoch.instance_id)
            if epoch.base_fabric_hash and epoch.base_fabric_hash != base.content_hash:
                if self._resume(epoch.base_fabric_hash):
                    self.log("info", "resumed", epoch=epoch.id, down=self.state.down.summary())
                    return int(epoch.id)
                raise BridgeError(
                    "the daemon's fabric is not the one discovered here (content hash "
                    f"{epoch.base_fabric_hash[:12]} vs {base.content_hash[:12]}) and the "
                    f"bridge state in {self.opts.state_path} is not for it either; start "
                    "the bridge with --load live or --load discover")
            if epoch.down_links or epoch.down_switches or epoch.down_cas:
                if self._resume(epoch.base_fabric_hash):
                    self.log("info", "resumed", epoch=epoch.id, down=self.state.down.summary())
                    return int(epoch.id)
                self.log("warning", "daemon_has_down_items", links=epoch.down_links,
                         switches=epoch.down_switches, cas=epoch.down_cas)
        self.daemon_instance = str(epoch.instance_id)  # the daemon this state is synced with
        self.base = base
        self.state = BridgeState(written_epoch=self.state.written_epoch)
        self._base_text = "\n".join(lines) + "\n"
        try:
            self.save_state()
        except OSError as exc:  # e.g. a full disk: saved with the first epoch written
            self.log("error", "state_write_failed", dir=self.opts.state_path,
                     error=exc.strerror or str(exc), retry="with the next epoch written")
        self.log("info", "initialized", reason=reason, epoch=epoch.id, load=self.opts.load,
                 switches=len(base.switches), cas=len(base.cas), links=base.n_links,
                 seconds=f"{time.monotonic() - t0:.2f}")
        return int(epoch.id)

    def _resume(self, daemon_base_hash: str) -> bool:
        """Take base and down set from ``state_dir`` if they are for the daemon's
        base fabric (a restarted bridge, ``load`` none); the next check sends
        whatever changed meanwhile."""
        try:
            self.load_state()
        except (BridgeError, InputError):
            return False
        if self.base is None or self.base.content_hash != daemon_base_hash:
            self.base, self.state = None, BridgeState()
            return False
        self.state.written_epoch = 0  # write the daemon's current epoch once
        return True

    # ------------------------------------------------------------ epochs -> OpenSM
    def fetch_tables(self, epoch: int) -> ForwardingTables:
        """Full tables of ``epoch`` (checksum-verified), with per-LID port GUIDs and
        descriptions from the base fabric (the file then names each LID's port
        GUID, which lets OpenSM remap LIDs that moved)."""
        snap = self.call(f"GetTables({epoch})", self.client.tables, epoch)
        t = snap.tables
        if self.base is None or not self.opts.port_guids:
            return t
        lid_guid, lid_kind, lid_desc = lid_labels(self.base, t.ports.shape[1])
        return dataclasses.replace(t, lid_guid=lid_guid, lid_kind=lid_kind, lid_desc=lid_desc,
                                   _index={})

    def trigger(self) -> str:
        """Make OpenSM load the file (console reroute or SIGHUP); returns the reply."""
        if self.opts.trigger == "console":
            host, port = self.opts.console
            return OpenSMConsole(host, port).reroute() or "reroute sent"
        if self.opts.trigger == "sighup":
            assert self.opts.opensm_pid is not None
            try:
                os.kill(self.opts.opensm_pid, signal.SIGHUP)
            except OSError as exc:
                raise BridgeError(f"cannot signal OpenSM (pid {self.opts.opensm_pid}): "
                                  f"{exc}") from None
            return f"SIGHUP sent to {self.opts.opensm_pid}"
        return "not triggered (trigger none)"

    def sync_epoch(self, epoch: int) -> SyncResult | None:
        """Write ``epoch``'s tables to the LFT file and trigger OpenSM (skips an
        epoch at or below the last one written).

        The epoch counts as written once the file is in place.  If the trigger
        fails (console down, OpenSM gone) the error is raised and
        :attr:`trigger_pending` stays set: :meth:`run` retries the trigger
        (OpenSM would otherwise only pick the file up at its next heavy sweep).
        """
        with self._lock:
            if epoch <= self.state.written_epoch:
                return None
            ep = self.call(f"GetEpoch({epoch})", self.client.get_epoch, epoch)
            v = ep.validation
            if v.state == v.DONE and not v.ok:  # never hand OpenSM a table set that failed
                self.log("error", "epoch_not_written", epoch=epoch, reason="failed validation",
                         validation=v.summary)
                return None
            if ep.vls > 1:  # detours over VLs: the file engine cannot program SLs and VLs
                self.log("error", "epoch_not_written", epoch=epoch, vls=ep.vls,
                         reason="routed with detours over virtual lanes, which OpenSM's file "
                         "engine cannot program (use the plugin, or max_vls auto or 1)")
                return None
            t0 = time.monotonic()
            tables = self.fetch_tables(epoch)
            t1 = time.monotonic()
            written = self.state.written_epoch
            try:
                write_tables(tables, self.opts.lfts_file, "opensm")
                self.state.written_epoch = epoch
                self.save_state()
            except OSError as exc:  # full or read-only disk: retried with back-off
                self.state.written_epoch = written
                raise self._write_failed(epoch, exc) from None
            self.write_retry.succeeded()
            t2 = time.monotonic()
            old = self.last_tables if self.last_tables is not None else dataclasses.replace(
                tables, ports=tables.ports[:, :0], _index={})  # first write: every block
            d = diff_tables(old, tables)
            blocks, entries = int(d.blocks_changed), int(d.entries_changed)
            self.last_tables = tables
            self.trigger_pending = True
            reply = self.trigger()
            self.trigger_pending = False
            t3 = time.monotonic()
            res = SyncResult(epoch=epoch, switches=tables.n_switches, max_lid=tables.max_lid,
                             blocks_changed=blocks, entries_changed=entries, fetch_s=t1 - t0,
                             write_s=t2 - t1, trigger_s=t3 - t2, trigger_reply=reply,
                             written_unix_s=time.time())
            self.syncs.append(res)
            self.log("info", "epoch_written", epoch=epoch, file=self.opts.lfts_file,
                     blocks_changed=blocks, entries_changed=entries,
                     fetch_s=f"{res.fetch_s:.3f}", write_s=f"{res.write_s:.3f}",
                     trigger=self.opts.trigger)
            return res

    def _write_failed(self, epoch: int, exc: OSError) -> BridgeError:
        """Log a failed write of ``epoch`` and schedule its retry (back-off)."""
        delay = self.write_retry.failed(time.monotonic())
        what = f"cannot write epoch {epoch} to {self.opts.lfts_file}: {exc.strerror or exc}"
        self.log("error", "lfts_write_failed", epoch=epoch, file=self.opts.lfts_file,
                 error=exc.strerror or str(exc), attempt=self.write_retry.failures,
                 failures_total=self.write_retry.total, retry_in_s=f"{delay:g}")
        return _WriteFailed(f"{what}; retrying in {delay:g} s")

    def retry_trigger(self) -> str:
        """Trigger OpenSM again for the file already written."""
        with self._lock:
            reply = self.trigger()
            self.trigger_pending = False
            self.log("info", "trigger_retried", epoch=self.state.written_epoch,
                     trigger=self.opts.trigger)
            return reply

    # ------------------------------------------------------------ changes -> faults
    def events_pb(self, events: Sequence[FaultEvent]) -> list[Any]:
        return event_msgs(events)

    def pending(self) -> tuple[list[FaultEvent], DownSet, list[str], float]:
        """Re-discover; return (events, new down set, warnings, discovery seconds)."""
        events, desired, warnings, secs, _ = self._pending()
        return events, desired, warnings, secs

    def _pending(self) -> tuple[list[FaultEvent], DownSet, list[str], float, list[str]]:
        if self.base is None:
            raise BridgeError("no base fabric: initialize() or load_state() first")
        t0 = time.monotonic()
        lines = self._discover()
        seen = parse_topology(lines, "ibnetdiscover")
        secs = time.monotonic() - t0
        desired = down_set(self.base, seen)
        return (fault_events(self.state.down, desired), desired, unexpected(self.base, seen),
                secs, lines)

    def check_changes(self) -> CheckResult:
        """Re-discover and send the fault events for what changed (if anything).

        Something the base fabric does not have (a new node or link, a moved
        LID) is not a fault: with ``load`` "live" or "discover" the bridge
        reloads the fabric into the daemon (a fresh base, no down items) and
        routes it; with "none" it only logs it."""
        events, desired, warnings, disc_s, lines = self._pending()
        for w in warnings:
            self.log("warning", "not_a_fault", detail=w)
        epoch_id: int | None = None
        t0 = time.monotonic()
        if warnings and self.opts.load != "none":
            epoch_id = self.initialize(lines, reason="fabric grew: " + warnings[0])
            res = CheckResult(events=(), down=DownSet(), warnings=tuple(warnings),
                              epoch=epoch_id, discover_s=disc_s, apply_s=time.monotonic() - t0)
            self.checks.append(res)
            return res
        if events:
            resp = self.call("ApplyFaults", self.client.apply_faults, self.events_pb(events))
            epoch_id = int(resp.epoch.id)
            self.state.down = desired
            self.save_state()
            self.log("info", "faults_applied", events=len(events), epoch=epoch_id,
                     discover_s=f"{disc_s:.3f}", apply_s=f"{time.monotonic() - t0:.3f}",
                     detail="; ".join(e.describe() for e in events[:8])
                     + (f"; ... {len(events) - 8} more" if len(events) > 8 else ""))
        res = CheckResult(events=tuple(events), down=desired, warnings=tuple(warnings),
                          epoch=epoch_id, discover_s=disc_s, apply_s=time.monotonic() - t0)
        self.checks.append(res)
        return res

    # ------------------------------------------------------------ dry run
    def dry_run(self, *, max_entries: int = 200) -> DryRun:
        """What a change would do; writes nothing (:func:`smroute.opensm.dryrun.dry_run`)."""
        from smroute.opensm.dryrun import dry_run

        return dry_run(self, max_entries=max_entries)

    # ------------------------------------------------------------ running
    def _watch_loop(self) -> None:
        import grpc

        lost = False
        while not self._stop.is_set():
            try:
                self._watch_call = self.client.watch()
                first = True
                for ep in self._watch_call:
                    if first and lost:
                        self._resync_needed.set()  # reconnected: maybe a new daemon
                    first = lost = False
                    if ep.instance_id != self.daemon_instance:
                        self._resync_needed.set()  # a restarted daemon, whatever its ids
                    self.epoch_queue.put(int(ep.id))
                if self._stop.is_set():
                    return
                # the daemon ended the stream (graceful shutdown): as good as lost
                if not lost:
                    self.log("warning", "watch_ended")
                lost = True
                self._resync_needed.set()
            except grpc.RpcError as exc:
                if self._stop.is_set():
                    return
                if not lost:
                    self.log("warning", "watch_lost", code=exc.code().name,
                             detail=exc.details())
                lost = True
                self._resync_needed.set()
            self._stop.wait(1.0)

    def resync(self) -> bool:
        """After the Watch stream was lost or an epoch of another daemon instance
        came: follow a restarted daemon (:func:`smroute.opensm.resync.resync`).
        Returns True if it resynchronized."""
        return resync(self)

    def start(self) -> None:
        """Start following the daemon's epochs (background thread)."""
        t = threading.Thread(target=self._watch_loop, name="bridge-watch", daemon=True)
        t.start()
        self._threads.append(t)

    def run(self, *, until: Callable[[], bool] | None = None, tick: float = 0.1) -> None:
        """Main loop: write new epochs, watch OpenSM's log, re-discover on triggers
        and every ``poll_interval``; returns when :meth:`close` is called or
        ``until()`` is true.  Errors are logged and retried on the next trigger;
        a failed write of the LFT file (full disk) is retried with exponential
        back-off (:attr:`write_retry`) while the rest of the loop goes on."""
        follower = LogFollower(self.opts.opensm_log) if self.opts.opensm_log else None
        pending_since: float | None = None
        last_check = time.monotonic()
        last_resync = 0.0
        last_retry = time.monotonic()
        checking = False
        unwritten = 0  # the newest epoch reported and not written yet (0: none)
        while not self._stop.is_set() and not (until and until()):
            ep: int | None = None
            try:
                unwritten = max(unwritten, self.epoch_queue.get(timeout=tick))
                while True:
                    unwritten = max(unwritten, self.epoch_queue.get_nowait())
            except queue.Empty:
                pass
            try:
                if self._resync_needed.is_set() and time.monotonic() - last_resync >= 1.0:
                    last_resync = time.monotonic()
                    if self.resync():
                        unwritten = 0
                        pending_since = time.monotonic()  # re-check the fabric soon
                    self._resync_needed.clear()  # not reached while the daemon is down
                if self.trigger_pending and time.monotonic() - last_retry >= 2.0:
                    last_retry = time.monotonic()
                    self.retry_trigger()
                if unwritten and self.write_retry.due(time.monotonic()):
                    ep, unwritten = unwritten, 0
                    self.sync_epoch(ep)
                now = time.monotonic()
                if follower is not None and any(TRIGGER_RE.search(ln) for ln in follower.read()) \
                        and pending_since is None:
                    pending_since = now  # debounce from the first line of a burst
                poll = self.opts.poll_interval
                due_poll = poll > 0 and now - last_check >= poll
                due_log = pending_since is not None and now - pending_since >= self.opts.debounce
                if due_log or due_poll:
                    pending_since = None
                    last_check = now
                    checking = True
                    res = self.check_changes()
                    checking = False
                    if res.epoch is not None and self.write_retry.due(time.monotonic()):
                        ep = res.epoch
                        self.sync_epoch(ep)  # at once; Watch will report it too
            except (SmrouteError, OSError) as exc:  # OSError: e.g. the state file
                self.errors.append(str(exc))
                if not isinstance(exc, _WriteFailed):  # that one is logged already
                    self.log("error", "bridge_error", detail=str(exc))
                if checking:  # e.g. discovery caught a link mid-change: check again
                    checking = False
                    pending_since = time.monotonic()
                if ep is not None and ep > self.state.written_epoch:
                    unwritten = max(unwritten, ep)  # not written yet: try again
                self._stop.wait(1.0)

    def run_in_thread(self) -> threading.Thread:
        """:meth:`run` on a daemon thread (joined by :meth:`close`)."""
        t = threading.Thread(target=self.run, name="bridge-main", daemon=True)
        t.start()
        self._threads.append(t)
        return t
