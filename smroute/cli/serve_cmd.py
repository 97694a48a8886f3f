"""``smroute serve``: run the routing daemon (gRPC API ``smroute.v1.Smroute``).

The configuration comes from ``--config FILE`` (YAML, see deploy/smroute.yaml
and ``smroute check-config``) or the defaults; the flags override single
settings.  The process serves until SIGTERM/SIGINT (graceful: running calls
get ``shutdown_grace_s``); SIGHUP reloads ``--config`` keeping the last good
config on error.  Exit status: 0 after a clean shutdown on SIGTERM, 130 after
one on SIGINT (Ctrl-C), 1 if it cannot start for a reason a restart may cure,
2 bad config, flags or input -- a fabric that is missing, unreadable, not a
regular file, not parseable or a partial discovery (no switch), an LMC its
LIDs do not fit, an address another daemon holds -- which a restart cannot
cure (the systemd unit's ``RestartPreventExitStatus=2``), 3 the configured
fabric cannot be routed (:mod:`smroute.cli.exit_codes`).  Without
``--listen`` (and without ``listen:`` in the config) it listens on the Unix
socket ``/run/smroute/smroute.sock``.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
from typing import Any

from smroute.cli.inputs import add_workers_option, int_range, require_regular_file
from smroute.errors import InputError

__all__ = ["register", "cmd_serve", "config_from_args"]


def register(subparsers: Any) -> None:
    """Add the ``serve`` command to ``subparsers``."""
    from smroute.routing import api
    from smroute.service.config import LOG_LEVELS

    p = subparsers.add_parser(
        "serve",
        help="run the routing daemon (gRPC)",
        description="Run the smroute routing daemon: gRPC API (LoadFabric, Route, GetTables, "
        "ApplyFaults, Diff, Watch, Analyze, SelectLids, RouteSubnet), health, reflection, "
        "Prometheus metrics. "
        "Flags override the config file.",
    )
    p.add_argument("--config", metavar="FILE", help="YAML config file (default: built-in "
                   "defaults; see smroute check-config)")
    p.add_argument("--listen", metavar="ADDR",
                   help="gRPC address: unix:/path, host:port or [v6]:port (port 0 = any free; "
                   "default the config's, else unix:/run/smroute/smroute.sock)")
    p.add_argument("--fabric", metavar="FILE",
                   help="ibnetdiscover file to load and route at start")
    p.add_argument("--fabric-dir", metavar="DIR", action="append", dest="fabric_dirs",
                   help="directory LoadFabric(path=...) may read from (repeatable; replaces "
                   "the config's fabric_dirs; default: none, server-side paths refused)")
    add_workers_option(p, help="routing worker processes",
                       default_text="default: the config's workers, 2 without one")
    p.add_argument("--algorithm", choices=api.names(),
                   help=f"routing algorithm (default: the config's, {api.DEFAULT} without one)")
    p.add_argument("--lmc", type=int_range(0, 7), metavar="N", help="LMC (0..7)")
    p.add_argument("--max-vls", type=_max_vls, metavar="N|auto",
                   help="data VLs the subnet manager programs (1..15); 2 or more allows "
                   "detours over VLs, served through the OpenSM plugin (GetLanes); auto "
                   "(the config's default): what the plugin's VL facts allow, else 1")
    p.add_argument("--route-all-ca-pairs", action="store_const", const=True, default=None,
                   help="every CA pair needs a route (default: aggregation nodes need hosts "
                   "and the aggregation nodes of adjacent switches only; the config's "
                   "route_all_ca_pairs)")
    p.add_argument("--epoch-history", type=int, metavar="K", help="epochs kept")
    p.add_argument("--coalesce-ms", type=float, metavar="MS",
                   help="fault events within this window share one reroute")
    p.add_argument("--metrics-listen", metavar="ADDR",
                   help="Prometheus HTTP host:port, or 'off'")
    p.add_argument("--log-format", choices=("json", "text"))
    p.add_argument("--log-level", choices=LOG_LEVELS)
    p.add_argument("--state", metavar="PATH",
                   help="state database (SQLite) that survives restarts; 'none' keeps no "
                   "state (default: the config's state.path, else /var/lib/smroute/state.db "
                   "as root, $XDG_STATE_HOME/smroute/state.db otherwise)")
    p.add_argument("--ready-file", metavar="FILE",
                   help="write {address, pid, metrics} as JSON here once serving")
    p.set_defaults(func=cmd_serve)


_FLAGS = {
    "listen": "listen", "fabric": "fabric", "workers": "workers", "algorithm": "algorithm",
    "lmc": "lmc", "max_vls": "max_vls", "epoch_history": "epoch_history",
    "route_all_ca_pairs": "route_all_ca_pairs",
    "coalesce_ms": "coalesce_ms",
    "log_format": "log_format", "log_level": "log_level",
}


def _max_vls(text: str) -> Any:
    """argparse ``type`` of ``--max-vls``: ``auto`` or 1..15."""
    from smroute.service.vlchoice import parse_max_vls
    from smroute.text import excerpt

    try:
        return parse_max_vls(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected {err}, got {excerpt(text)}") from None


def config_from_args(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The effective :class:`ServiceConfig` and the overrides taken from flags."""
    from pathlib import Path

    from smroute.service.config import ConfigError, default_config, load_config

    cfg = load_config(args.config) if args.config else default_config()
    over: dict[str, Any] = {}
    for flag, key in _FLAGS.items():
        v = getattr(args, flag, None)
        if v is not None:
            over[key] = Path(v).resolve() if key == "fabric" else v
    if getattr(args, "fabric_dirs", None):
        from smroute.service.config import dir_problem

        dirs = []
        for d in args.fabric_dirs:
            p = Path(d).resolve()
            problem = dir_problem(p)
            if problem:
                raise InputError(f"--fabric-dir {d}: {problem}")
            dirs.append(p)
        over["fabric_dirs"] = tuple(dirs)
    if getattr(args, "state", None) is not None:
        from smroute.service.config import StateConfig

        path = None if args.state.strip().lower() in ("", "none") else Path(args.state).resolve()
        over["state"] = StateConfig(path=path, keep_epochs=cfg.state.keep_epochs)
    if args.metrics_listen is not None:
        over["metrics_listen"] = None if args.metrics_listen == "off" else args.metrics_listen
    try:
        cfg = dataclasses.replace(cfg, **over)
    except ConfigError as err:
        raise InputError(f"{err} (from the command line flags)") from None
    return cfg, over


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the daemon until SIGTERM (0) or SIGINT (130), after a clean shutdown."""
    from smroute.service.log import Logger
    from smroute.service.rpc.server import Daemon

    cfg, over = config_from_args(args)
    if cfg.fabric is not None:
        require_regular_file(cfg.fabric, "fabric")
    log = Logger(fmt=cfg.log_format, level=cfg.log_level)
    d = Daemon(cfg, config_path=args.config, overrides=over, ready_file=args.ready_file,
               log=log)
    d.install_signals()
    interrupted: list[int] = []

    def on_sigint(signum: int, _frame: object) -> None:
        interrupted.append(signum)
        d.request_stop()

    signal.signal(signal.SIGINT, on_sigint)
    try:
        d.start()
    except BaseException:
        d.stop()
        raise
    d.wait()
    return 128 + signal.SIGINT if interrupted else 0
