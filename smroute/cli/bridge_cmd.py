"""``smroute opensm-bridge``: run the OpenSM bridge, or dry-run a change.

    smroute opensm-bridge --daemon unix:/run/smroute/smroute.sock \\
        --lfts-file /var/cache/opensm/smroute.lfts \\
        [--console 127.0.0.1:10000 | --opensm-pid PID] [--opensm-log /var/log/opensm.log] \\
        [--load live|discover|none] [--poll-interval S] [--dry-run]

See :mod:`smroute.opensm.bridge`.  ``--dry-run`` prints the fault events the
current fabric implies, the daemon's dry-run diff per switch and 64-LID block,
and the diff between OpenSM's file and the daemon's latest epoch; it writes
nothing (exit 0 no change, 1 a change is pending, 4 the daemon cannot be
reached: told at once).  A bridge started while the daemon is down waits for
it, retrying with back-off (:mod:`smroute.opensm.connect`).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from smroute.cli.inputs import float_range, int_range
from smroute.opensm.connect import connect_with_retry

__all__ = ["register", "cmd_bridge", "DRY_RUN_CONNECT_S"]

#: Seconds a dry run waits for a daemon that accepted the connection to answer.
DRY_RUN_CONNECT_S = 30.0


def register(subparsers: Any) -> None:
    """Add the ``opensm-bridge`` command to ``subparsers``."""
    p = subparsers.add_parser(
        "opensm-bridge",
        help="write the daemon's epochs for OpenSM's file engine; report fabric changes",
        description="Run next to OpenSM: follow the smroute daemon's epochs, write OpenSM's "
        "file-engine LFT file atomically and make OpenSM load it (console reroute or SIGHUP); "
        "re-discover the fabric when OpenSM logs a trap or a heavy sweep and send the "
        "changes to the daemon as fault events. A bridge started while the daemon is down "
        "logs it and retries with back-off (1 s doubling to 30 s). Exit status: 0 stopped "
        "(or --dry-run: nothing pending), 1 a change is pending (--dry-run), 2 bad input, "
        "4 the daemon cannot be reached (--dry-run: told at once).",
    )
    p.add_argument("--daemon", required=True, metavar="ADDR",
                   help="smroute daemon gRPC address (host:port or unix:/path)")
    p.add_argument("--lfts-file", required=True, metavar="PATH",
                   help="OpenSM's lfts_file (routing_engine file)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--console", metavar="HOST:PORT",
                   help="OpenSM loopback console (default 127.0.0.1:10000); reroute through it")
    g.add_argument("--opensm-pid", type=int_range(1), metavar="PID",
                   help="signal OpenSM with SIGHUP (heavy sweep) instead of the console")
    g.add_argument("--no-trigger", action="store_true",
                   help="only write the file (OpenSM reads it at its next heavy sweep)")
    p.add_argument("--opensm-log", metavar="PATH",
                   help="OpenSM's log file: traps and SUBNET UP wake the change detector")
    p.add_argument("--poll-interval", type=float_range(0), default=60.0, metavar="S",
                   help="re-discover at least this often (0 = only on log triggers; default 60)")
    p.add_argument("--debounce", type=float_range(0), default=0.5, metavar="S",
                   help="wait this long after the last trigger line (default 0.5)")
    p.add_argument("--load", choices=("live", "discover", "none"), default="none",
                   help="at start: daemon discovers (live), bridge discovers and sends the "
                   "text (discover), or use the daemon's current epoch (none, default)")
    p.add_argument("--ca", metavar="NAME", help="HCA for discovery (ibnetdiscover -C)")
    p.add_argument("--port", type=int_range(1, 254), metavar="N",
                   help="HCA port (ibnetdiscover -P)")
    p.add_argument("--state-dir", metavar="DIR",
                   help="where the base topology and down set are kept (default: the "
                   "lfts file's directory)")
    p.add_argument("--tls-ca", metavar="PEM", help="TLS to the daemon: CA certificate to trust")
    p.add_argument("--tls-cert", metavar="PEM",
                   help="client certificate for mutual TLS (its CN must be in the daemon's "
                   "mutating_identities)")
    p.add_argument("--tls-key", metavar="PEM", help="key of --tls-cert")
    p.add_argument("--tls-server-name", metavar="NAME",
                   help="name to check in the daemon's certificate (default: the host)")
    p.add_argument("--no-port-guids", action="store_true",
                   help="leave the per-LID port GUID comments out of the file (about 6x "
                   "smaller on big fabrics; OpenSM can then not remap LIDs that moved)")
    p.add_argument("--dry-run", action="store_true",
                   help="show the diff a change would make (per switch, 64-LID blocks); "
                   "write nothing")
    p.add_argument("--max-entries", type=int_range(0), default=200, metavar="N",
                   help="dry run: changed entries to list (default 200)")
    p.set_defaults(func=cmd_bridge)


def cmd_bridge(args: argparse.Namespace) -> int:
    """Run the bridge until SIGTERM/SIGINT (0), or dry-run (0 nothing pending,
    1 pending, 4 the daemon cannot be reached)."""
    from smroute.cli.outputs import check_output
    from smroute.errors import InputError
    from smroute.opensm.bridge import Bridge, BridgeOptions
    from smroute.opensm.console import parse_console_address

    trigger = ("none" if args.no_trigger
               else "sighup" if args.opensm_pid is not None else "console")
    console = parse_console_address(args.console or "127.0.0.1:10000")
    lfts = check_output(args.lfts_file, "--lfts-file")  # a regular file, in a directory
    if args.state_dir is not None and not Path(args.state_dir).is_dir():
        raise InputError(f"--state-dir: {args.state_dir}: not an existing directory")
    opts = BridgeOptions(
        daemon=args.daemon, lfts_file=lfts, trigger=trigger, console=console,
        opensm_pid=args.opensm_pid, opensm_log=Path(args.opensm_log) if args.opensm_log else None,
        poll_interval=args.poll_interval, debounce=args.debounce, load=args.load, ca=args.ca,
        port=args.port, state_dir=Path(args.state_dir) if args.state_dir else None,
        tls_ca=Path(args.tls_ca) if args.tls_ca else None,
        tls_cert=Path(args.tls_cert) if args.tls_cert else None,
        tls_key=Path(args.tls_key) if args.tls_key else None,
        tls_server_name=args.tls_server_name, port_guids=not args.no_port_guids)
    bridge = Bridge(opts)
    if args.dry_run:
        _reach_at_once(bridge, args.daemon)
        bridge.load_state()
        res = bridge.dry_run(max_entries=args.max_entries)
        sys.stdout.write("\n".join(res.lines) + "\n")
        bridge.close()
        return 1 if res.pending else 0
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()
        bridge.close()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if not connect_with_retry(bridge, stop=stop):
        return 0
    bridge.initialize()
    bridge.start()
    bridge.run()
    bridge.close()
    return 0


def _reach_at_once(bridge: Any, address: str) -> None:
    """Connect for a dry run: a daemon that refuses the connection (or a
    missing socket) is told at once, a slow one with a message on stderr
    while waiting; :class:`DaemonUnreachableError` (exit 4) if it does not
    answer within :data:`DRY_RUN_CONNECT_S`."""
    from smroute.cli.ctl_connect import probe
    from smroute.errors import DaemonUnreachableError

    problem = probe(address, 2.0)
    if problem:
        raise DaemonUnreachableError(f"cannot reach the daemon at {address}: {problem}")
    try:
        bridge.connect(timeout=1.0)
    except DaemonUnreachableError:
        print(f"smroute: the daemon at {address} does not answer yet; waiting up to "
              f"{DRY_RUN_CONNECT_S:g} s", file=sys.stderr, flush=True)
        bridge.connect(timeout=DRY_RUN_CONNECT_S)
