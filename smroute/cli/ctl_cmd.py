"""``smroute ctl``: the routing daemon's client for operators.

    smroute ctl status                                  # health and the serving epoch
    smroute ctl epoch [ID] [--down-items]               # one epoch (default: current)
    smroute ctl epochs                                  # the epochs kept, newest first
    smroute ctl watch [--count N]                       # epochs as they are committed
    smroute ctl fault down|up link GUID PORT [--dry-run] [--max-entries N]
    smroute ctl fault down|up switch|ca GUID [--dry-run]
    smroute ctl route [--algorithm A] [--lmc N] [--wait] [--confirm-state-loss]
    smroute ctl load FILE | --server-path PATH | --live [--ca NAME --port N] [--route]
    smroute ctl diff EPOCH_A [EPOCH_B] [--max-entries N]
    smroute ctl tables [--epoch N] [--format opensm|fdbs|json] [--out FILE|-]
    smroute ctl lids HOST... [--hosts-file FILE] [--pattern P] [--per-stage]
    smroute ctl lanes [--epoch N] [--out FILE|-]
    smroute ctl analyze [--epoch N] [--order topological|random] [--seed S]
    smroute ctl reload [--pid PID]                      # SIGHUP: reload the config file

Every subcommand takes ``--json`` (``watch``: one JSON object per line), the
daemon's address (``--address``, else the ``listen:`` of the daemon's config
file given with ``--config``, else ``$SMROUTE_DAEMON``, else
``unix:/run/smroute/smroute.sock``) and the TLS options of a client
(``--tls-ca``, ``--tls-cert``, ``--tls-key``, ``--tls-server-name``), before
or after the subcommand.

Exit status: 0 ok; 1 differences (``diff``), an epoch that failed its
validation, a daemon that is not serving (``status``), or a call that failed
on the daemon's side; 2 bad input (options, files, an unknown GUID, epoch or
host: INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, UNAUTHENTICATED);
3 cannot route (FAILED_PRECONDITION: no fabric loaded, the fabric cannot be
routed); 4 the daemon cannot be reached (no daemon at the address, or TLS
refused), printed as one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import grpc

from smroute.cli.ctl_connect import (
    RpcFailed,
    add_daemon_options,
    address_of,
    connect,
    rpc_error,
)
from smroute.cli.ctl_render import (
    analyze_lines,
    diff_lines,
    epoch_line,
    epoch_lines,
    fault_name,
    lanes_text,
    to_json,
    validation_text,
)
from smroute.cli.inputs import SEED, int_range
from smroute.cli.outputs import check_output, is_stdout, write_output
from smroute.errors import InputError
from smroute.service.rpc.client import SmrouteClient, pb

__all__ = ["register"]


def _common(json_help: str = "print the answer as JSON") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    add_daemon_options(p, top=False)
    p.add_argument("--json", action="store_true", help=json_help)
    return p


def _guid(text: str) -> int:
    try:
        v = int(text, 0) if text.lower().startswith("0x") else int(text, 16)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a GUID (hex, 0x optional), got {text!r}") from None
    if not 0 < v < 1 << 64:
        raise argparse.ArgumentTypeError(f"GUID {text!r} is not 1..2^64-1")
    return v


def register(subparsers: Any) -> None:
    """Add ``ctl`` and its subcommands to ``subparsers``."""
    p = subparsers.add_parser(
        "ctl", help="talk to a running routing daemon (status, faults, epochs, tables...)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_daemon_options(p, top=True)
    sub = p.add_subparsers(dest="ctl_command", metavar="SUBCOMMAND", required=True)
    c = _common()

    def add(name: str, help: str, func: Any, **kw: Any) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help, parents=[kw.pop("common", c)],
                            **kw)
        sp.set_defaults(func=lambda a, f=func: _run(f, a))
        return sp

    add("status", "health and the serving epoch (exit 1 if not serving a valid epoch)",
        _status)
    s = add("epoch", "one epoch's description", _epoch)
    s.add_argument("id", nargs="?", type=int_range(0), default=0, metavar="ID",
                   help="epoch id (default 0: the current one)")
    s.add_argument("--down-items", action="store_true", help="list every item down in it")
    add("epochs", "the epochs the daemon keeps, newest first", _epochs)
    s = add("watch", "print epochs as they are committed, the current one first", _watch,
            common=_common("one JSON object per line"))
    s.add_argument("--count", type=int_range(1), metavar="N", help="stop after N epochs")
    s = add("fault", "apply a fault event (reroute and commit, or --dry-run)", _fault)
    s.add_argument("action", choices=("down", "up"))
    s.add_argument("kind", choices=("link", "switch", "ca"))
    s.add_argument("guid", type=_guid, metavar="GUID", help="node GUID (for a link: either end)")
    s.add_argument("port", nargs="?", type=int_range(1, 254), metavar="PORT",
                   help="links: the port on GUID")
    s.add_argument("--dry-run", action="store_true",
                   help="compute the diff against the current epoch; commit nothing")
    s.add_argument("--max-entries", type=int_range(0), default=20, metavar="N",
                   help="dry run: changed entries to list (default 20)")
    s = add("route", "route the loaded fabric and commit an epoch", _route)
    s.add_argument("--algorithm", help="routing algorithm (default: the daemon's)")
    s.add_argument("--lmc", type=int_range(0, 7), metavar="N", help="LMC (default: the daemon's)")
    s.add_argument("--wait", action="store_true", help="return once the validation is done")
    s.add_argument("--confirm-state-loss", action="store_true",
                   help="on a degraded daemon (its state database lost acknowledged "
                        "faults): accept the loss, route the loaded fabric as it is "
                        "and serve again once the epoch is committed")
    s = add("load", "load a fabric (it is served once routed: ctl route, or --route)", _load)
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("file", nargs="?", metavar="FILE",
                     help="ibnetdiscover file read here and sent (.gz/.xz too)")
    src.add_argument("--server-path", metavar="PATH",
                     help="a file on the daemon's host, inside its fabric_dirs")
    src.add_argument("--live", action="store_true", help="discover on the daemon's host")
    s.add_argument("--ca", default="", metavar="NAME", help="--live: HCA (ibnetdiscover -C)")
    s.add_argument("--port", type=int_range(0, 254), default=0, metavar="N",
                   help="--live: HCA port")
    s.add_argument("--route", action="store_true", help="route it at once (and wait)")
    s = add("diff", "differences between two kept epochs (exit 1 if they differ)", _diff)
    s.add_argument("epoch_a", type=int_range(0), metavar="EPOCH_A")
    s.add_argument("epoch_b", nargs="?", type=int_range(0), default=0, metavar="EPOCH_B",
                   help="default: the current epoch")
    s.add_argument("--max-entries", type=int_range(0), default=100, metavar="N",
                   help="changed entries to list (default 100)")
    s = add("tables", "an epoch's forwarding tables as a file", _tables)
    s.add_argument("--epoch", type=int_range(0), default=0, metavar="N")
    s.add_argument("--format", choices=("opensm", "fdbs", "json"), default="opensm")
    s.add_argument("--out", default="-", metavar="FILE|-",
                   help="write here (replaced atomically); - for stdout (default)")
    s = add("lids", "LID selection of a job (LMC > 0): the DLID of each rank pair", _lids)
    s.add_argument("hosts", nargs="*", metavar="HOST",
                   help="job hosts in rank order: node description or 0x GUID")
    s.add_argument("--hosts-file", metavar="FILE", help="hosts, one a line, in rank order")
    s.add_argument("--pattern", default="", help="shift (default) or a collective (ring, ...)")
    s.add_argument("--per-stage", action="store_true", help="HSD of each stage")
    s.add_argument("--epoch", type=int_range(0), default=0, metavar="N")
    s = add("lanes", "an epoch's SLs and SL-to-VL tables, as a lanes file", _lanes)
    s.add_argument("--epoch", type=int_range(0), default=0, metavar="N")
    s.add_argument("--out", default="-", metavar="FILE|-", help="write here; - for stdout")
    s = add("analyze", "congestion metrics of an epoch", _analyze)
    s.add_argument("--epoch", type=int_range(0), default=0, metavar="N")
    s.add_argument("--order", choices=("topological", "random"), default="topological")
    s.add_argument("--seed", type=SEED, default=0)
    s.add_argument("--rp-samples", type=int_range(0, 1000), default=0, metavar="N",
                   help="random permutations (0 = the daemon's 100)")
    s = add("reload", "make the daemon reload its config file (SIGHUP)", _reload)
    s.add_argument("--pid", type=int_range(1), metavar="PID",
                   help="the daemon's process (default: the peer of a unix: address)")


def _run(func: Any, args: argparse.Namespace) -> int:
    if func is _reload:
        return int(func(None, args))
    client = connect(args)
    try:
        return int(func(client, args))
    except grpc.RpcError as err:
        raise rpc_error(err, address_of(args)) from None
    finally:
        client.close()


def _emit(args: argparse.Namespace, doc: Any, lines: Any) -> None:
    if args.json:
        write_output(None, json.dumps(doc, indent=1) + "\n")
    else:
        write_output(None, "".join(f"{x}\n" for x in lines))


def _valid(ep: pb.Epoch) -> bool:
    v = ep.validation
    return not (v.state == pb.Validation.DONE and not v.ok)


def _status(client: SmrouteClient, args: argparse.Namespace) -> int:
    health = client.health()
    try:
        ep: pb.Epoch | None = client.get_epoch()
    except grpc.RpcError as err:
        if err.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION):
            raise
        ep, why = None, err.details()
    doc = {"address": address_of(args), "health": health,
           "epoch": to_json(ep) if ep is not None else None}
    lines = [f"daemon {address_of(args)}: {health}"]
    lines += list(epoch_lines(ep)) if ep is not None else [f"no epoch served: {why}"]
    _emit(args, doc, lines)
    return 0 if health == "SERVING" and ep is not None and _valid(ep) else 1


def _epoch(client: SmrouteClient, args: argparse.Namespace) -> int:
    ep = client.get_epoch(args.id, include_down_items=args.down_items)
    _emit(args, to_json(ep), epoch_lines(ep))
    return 0


def _epochs(client: SmrouteClient, args: argparse.Namespace) -> int:
    eps = [client.get_epoch()]
    while eps[-1].parent_id:
        try:
            eps.append(client.get_epoch(eps[-1].parent_id))
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.NOT_FOUND:
                raise
            break  # no longer kept
    _emit(args, [to_json(e) for e in eps], (epoch_line(e) for e in eps))
    return 0


def _watch(client: SmrouteClient, args: argparse.Namespace) -> int:
    stream = client.watch()
    try:
        for n, ep in enumerate(stream, 1):
            write_output(None, (json.dumps(to_json(ep)) if args.json else epoch_line(ep)) + "\n")
            sys.stdout.flush()
            if args.count is not None and n >= args.count:
                break
    finally:
        stream.cancel()
    return 0


def _fault(client: SmrouteClient, args: argparse.Namespace) -> int:
    from smroute.service.rpc import client as cl

    if args.kind == "link" and args.port is None:
        raise InputError("fault ... link GUID PORT: the port on GUID is missing")
    if args.kind != "link" and args.port is not None:
        raise InputError(f"fault ... {args.kind} GUID takes no port")
    make = getattr(cl, f"{args.kind}_{args.action}")
    ev = make(args.guid, args.port) if args.kind == "link" else make(args.guid)
    r = client.apply_faults([ev], dry_run=args.dry_run,
                            max_entries=args.max_entries if args.dry_run else 0)
    head = (f"dry run: {fault_name(ev)} (nothing committed)" if args.dry_run else
            f"{fault_name(ev)}: committed epoch {r.epoch.id}"
            f" ({r.coalesced_events} events in its batch)")
    lines = [head, f"  {validation_text(r.epoch.validation)}",
             *(f"  {x}" for x in diff_lines(r.diff, r.changes, r.truncated))]
    doc = {"dry_run": args.dry_run, "event": to_json(ev), **to_json(r)}
    _emit(args, doc, lines)
    return 0 if _valid(r.epoch) else 1


def _route(client: SmrouteClient, args: argparse.Namespace) -> int:
    ep = client.route(args.algorithm or "", args.lmc, wait_validation=args.wait,
                      confirm_state_loss=args.confirm_state_loss)
    _emit(args, to_json(ep), epoch_lines(ep))
    return 0 if _valid(ep) else 1


def _load(client: SmrouteClient, args: argparse.Namespace) -> int:
    if args.server_path:
        summary = client.load_fabric_path(args.server_path)
    elif args.live:
        summary = client.load_fabric_live(args.ca, args.port)
    else:
        from smroute.cli.inputs import read_capture_text

        summary = client.load_fabric_text(read_capture_text(args.file),
                                          source_name=os.path.basename(args.file))
    doc: dict[str, Any] = {"fabric": to_json(summary), "epoch": None}
    lines = [f"loaded {summary.source or args.file}: {summary.switches} switches, "
             f"{summary.cas} CAs, {summary.links} links, max LID {summary.max_lid}, "
             f"hash {summary.content_hash[:16]}"]
    rc = 0
    if args.route:
        ep = client.route(wait_validation=True)
        doc["epoch"] = to_json(ep)
        lines += list(epoch_lines(ep))
        rc = 0 if _valid(ep) else 1
    else:
        lines.append("not served yet: route it (smroute ctl route)")
    _emit(args, doc, lines)
    return rc


def _diff(client: SmrouteClient, args: argparse.Namespace) -> int:
    r = client.diff(args.epoch_a, args.epoch_b, max_entries=args.max_entries)
    lines = [f"epoch {r.epoch_a} -> epoch {r.epoch_b}",
             *diff_lines(r.summary, r.switches, r.truncated)]
    _emit(args, to_json(r), lines)
    return 0 if r.summary.identical else 1


def _tables(client: SmrouteClient, args: argparse.Namespace) -> int:
    from smroute.tables.formats import iter_json, iter_opensm, table_files, write_tables

    if not is_stdout(args.out):
        check_output(args.out)
    snap = client.tables(args.epoch)
    _require_valid(client, snap.epoch, args.timeout)
    t = snap.tables
    if is_stdout(args.out):
        chunks = (iter_json(t) if args.format == "json" else iter_opensm(t)
                  if args.format == "opensm" else table_files(t, "-", "fdbs")[0][1])
        write_output(None, chunks)
    else:
        written = write_tables(t, args.out, args.format)
        note = {"epoch": snap.epoch, "switches": t.n_switches, "max_lid": t.max_lid,
                "format": args.format, "files": [str(p) for p in written]}
        msg = f"epoch {snap.epoch}: {t.n_switches} switches, max LID {t.max_lid} -> " + \
            ", ".join(str(p) for p in written)
        if args.json:
            print(json.dumps(note, indent=1))
        else:
            print(msg, file=sys.stderr)
    return 0


def _require_valid(client: SmrouteClient, epoch: int, timeout: float) -> None:
    """Wait for ``epoch``'s validation walk; tables that failed it are not
    written (exit 1)."""
    import time

    deadline = time.monotonic() + timeout
    ep = client.get_epoch(epoch)
    while ep.validation.state == pb.Validation.PENDING and time.monotonic() < deadline:
        time.sleep(0.2)
        ep = client.get_epoch(epoch)
    if not _valid(ep):
        raise RpcFailed(f"epoch {epoch} failed its validation ({validation_text(ep.validation)}); "
                        "its tables are not written", 1)
    if ep.validation.state == pb.Validation.PENDING:
        raise RpcFailed(f"epoch {epoch}: validation still pending after {timeout:g} s; its "
                        "tables are not written", 1)


def _read_hosts(args: argparse.Namespace) -> list[str]:
    hosts = list(args.hosts)
    if args.hosts_file:
        from smroute.fileio import read_lines

        try:
            lines = read_lines(args.hosts_file)
        except OSError as err:
            raise InputError(f"cannot read: {err.strerror or err}", source=args.hosts_file) \
                from None
        hosts += [s.split("#", 1)[0].strip() for s in lines]
    hosts = [h for h in hosts if h]
    if len(hosts) < 2:
        raise InputError("lids: expected at least two hosts (arguments or --hosts-file)")
    return hosts


def _lids(client: SmrouteClient, args: argparse.Namespace) -> int:
    hosts = _read_hosts(args)
    r = client.select_lids(hosts, pattern=args.pattern, per_stage=args.per_stage,
                           epoch=args.epoch)
    n = r.n_ranks

    def rows() -> Iterator[str]:
        yield (f"epoch {r.epoch}, LMC {r.lmc}, {n} ranks: HSD avg {r.hsd_avg:.3f} max "
               f"{r.hsd_max:g} (base LIDs: avg {r.hsd_base_avg:.3f} max {r.hsd_base_max:g})")
        for s in range(n):
            yield f"{hosts[s]}: " + " ".join(str(x) for x in r.dlids[s * n:(s + 1) * n])
        yield from (f"stage {st.index}: max {st.max_flows} flows on a link" for st in r.stages)

    doc = to_json(r)
    doc["hosts"] = hosts
    doc["dlids"] = [list(r.dlids[s * n:(s + 1) * n]) for s in range(n)]
    _emit(args, doc, rows())
    return 0


def _lanes(client: SmrouteClient, args: argparse.Namespace) -> int:
    lanes = client.lanes(args.epoch)
    if not is_stdout(args.out):
        check_output(args.out)
    data = json.dumps(to_json(lanes), indent=1) + "\n" if args.json else lanes_text(lanes)
    write_output(args.out, data)
    return 0


def _analyze(client: SmrouteClient, args: argparse.Namespace) -> int:
    r = client.analyze(args.epoch, order=args.order, seed=args.seed,
                       rp_samples=args.rp_samples)
    _emit(args, to_json(r), analyze_lines(r))
    bad = r.unroutable_a2a + r.unroutable_rp + r.unroutable_sp
    return 1 if bad else 0


def _reload(_client: None, args: argparse.Namespace) -> int:
    from smroute.cli.ctl_reload import daemon_pid, send_reload

    address = address_of(args)
    pid = args.pid if args.pid is not None else daemon_pid(address)
    send_reload(pid)
    _emit(args, {"address": address, "pid": pid, "signal": "SIGHUP"},
          [f"sent SIGHUP to the daemon (pid {pid}): it reloads its config file and logs "
           "the outcome (reload_failed keeps the last good config)"])
    return 0
