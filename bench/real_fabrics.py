"""Benchmark: Dmodc against OpenSM's engines on every real fabric capture.

For each file of the real folder (default ``../shared/fabrics/real`` beside
the checkout): parse it (:func:`smroute.fabric.ibnetdiscover.parse.read_fabric`),
boot it in ibsim -- the capture itself when it is plain ibnetdiscover text
that parsed without a warning, else the parsed fabric written as a net file
-- run the real OpenSM once per engine, route the discovered view with
Dmodc, and compute the metrics for every engine that routed
(:func:`smroute.lab.sidebyside.run_side_by_side`).  Hosts: every linked
end-port except SHARP aggregation nodes, in Dmodc's topological order (port
GUID order where Dmodc did not route, or with ``--order guid``).

Prints the machine, then per fabric a markdown table (rows: engines;
columns: status, host pairs left out, SP, A2A, RP, HSD of the shift CPS,
routing time) and the notes, then one table of smroute's engines against the
best OpenSM engine that routed each capture completely, per metric
(:func:`against_best`); ``--json FILE`` writes every figure (atomically),
``--from-json FILE`` prints the tables of such a file again without running.

    .venv/bin/python bench/real_fabrics.py [--real DIR] [--only NAME ...]
        [--engines dmodc nmodc ftree updn dnup minhop dfsssp sssp nue lash] [--vls 1]
        [--rp-samples 1000]
        [--order topo|guid] [--seed 1] [--timeout 900] [--keep DIR] [--json FILE]
    .venv/bin/python bench/real_fabrics.py --catalogue [--shapes NAME,...] [--no-captures]
        [--max-hosts N] [--site-vls 8] [--opensm-cache DIR] [--engines smroute smroute-vls updn ...]
        [--timeout S] [--json FILE]     (bench/site_compare.py)
    .venv/bin/python bench/real_fabrics.py --from-json FILE
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchinfo import machine

from smroute.analysis.compare import CompareConfig
from smroute.errors import SmrouteError
from smroute.fabric.ibnetdiscover.parse import detect_format, read_fabric, require_switches
from smroute.fabric.ibnetdiscover.text import ParseWarning, read_text_lines
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import EndportRole, fabric_roles
from smroute.fileio import atomic_write_text
from smroute.interrupts import sigterm_interrupts
from smroute.lab.sidebyside import ENGINES, SMROUTE_ENGINES, SideBySide, run_side_by_side
from smroute.study.results import complete

DEFAULT_REAL = Path(__file__).resolve().parents[2] / "shared" / "fabrics" / "real"
METRICS = (("sp", "SP"), ("a2a", "A2A"), ("rp", "RP"), ("hsd_topo_shift", "HSD"))
Row = dict[str, Any]


def status_text(e: Row) -> str:
    """The table's status cell of one engine."""
    if e["status"] == "ok":
        s = "routed" if not e.get("unroutable_pairs") else "routed, incomplete"
        return s + (f" ({e['note'].split(':')[0]})" if e.get("note") else "")
    if e["status"] == "failed" and e.get("fallback"):
        return f"fell back to {e['fallback']}" + e["error"].split(e["fallback"], 1)[1]
    if e["status"] == "error":
        return f"not run: {e['error']}"
    return f"failed: {e['error']}"


def _num(v: object, digits: int = 3) -> str:
    if not isinstance(v, (int, float)) or math.isnan(v):
        return "-"
    return f"{v:.{digits}g}" if v != int(v) else str(int(v))


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    ms = seconds * 1000
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.2g}"


def markdown(r: Row) -> list[str]:
    """The markdown lines of one fabric's result."""
    out = [f"#### {r['file']}", ""]
    if r.get("input_error"):
        return [*out, f"Not routed: {r['input_error']}", ""]
    out.append(f"{r['switches']} switches, {r['cas']} CAs ({r['hosts_in_capture']} host ports, "
               f"{r['aggregation']} aggregation nodes); net file: {r['net_source'] or '-'}; "
               f"{r['hosts']} hosts in the patterns ({r['order_kind']} order)")
    out += [""] + [f"* parser: {w}" for w in r["warnings"][:3]] + [f"* {n}" for n in r["notes"]]
    if r["partition"]:
        out.append(f"* not simulated: {r['partition']}")
    if r["error"]:
        out.append(f"* no metrics: {r['error']}")
    n = r["hosts"]
    out += ["", "| engine | status | pairs left out | SP | A2A | RP | HSD shift | routing ms |",
            "|---|---|---|---|---|---|---|---|"]
    for e in r["engines"]:
        v = e.get("values", {})
        left = (f"{e['unroutable_pairs']} of {n * (n - 1)}"
                if e.get("unroutable_pairs") is not None else "-")
        rt = e.get("routing_seconds")
        out.append(f"| {e['engine']} | {status_text(e)} | {left} | {_num(v.get('sp'))} | "
                   f"{_num(v.get('a2a'))} | {_num(v.get('rp'))} | "
                   f"{_num(v.get('hsd_topo_shift'))} | {_ms(rt)} |")
    dm = next((e for e in r["engines"] if e["engine"] == "dmodc" and e.get("note")), None)
    if dm and ":" in dm["note"]:
        out += ["", f"Dmodc's mode: {dm['note']}"]
    return [*out, ""]


def _complete(e: Row) -> bool:
    """An engine that routed every host pair (no fallback, nothing left out:
    the study's :func:`~smroute.study.results.complete`) and has metrics."""
    return complete(e) and bool(e.get("values"))


def against_best(fabrics: list[Row], ours: str) -> tuple[list[str], int, int]:
    """smroute's engine ``ours`` against the best OpenSM engine that routed
    each capture completely, per metric: ``(markdown lines, cells at or
    below, cells compared)``.  A cell is one (capture, metric) where both
    ``ours`` and at least one OpenSM engine routed completely; its text is
    ``ours`` value, then the best OpenSM value and engine (of tied engines
    the first two and how many more), ``>`` where ``ours`` is above it.
    Captures with fewer than two hosts are left out (no pair to route)."""
    head = "| capture | hosts | " + " | ".join(label for _, label in METRICS) + " |"
    out = [head, "|---" * (2 + len(METRICS)) + "|"]
    ok = total = 0
    for r in fabrics:
        engines = {e["engine"]: e for e in r.get("engines", [])}
        mine = engines.get(ours)
        rivals = [e for name, e in engines.items() if name not in SMROUTE_ENGINES and _complete(e)]
        if r.get("hosts", 0) < 2 or mine is None or not _complete(mine) or not rivals:
            continue
        cells = []
        for key, _ in METRICS:
            best = min(e["values"][key] for e in rivals)
            tied = [e["engine"] for e in rivals if e["values"][key] == best]
            names = "/".join(tied[:2]) + (f" +{len(tied) - 2}" if len(tied) > 2 else "")
            v = mine["values"][key]
            total += 1
            ok += v <= best
            cells.append(f"{_num(v)} {'<=' if v <= best else '>'} {_num(best)} {names}")
        out.append(f"| {r['file']} | {r['hosts']} | " + " | ".join(cells) + " |")
    return out, ok, total


def summary(fabrics: list[Row]) -> list[str]:
    """The :func:`against_best` tables of smroute's engines that ran."""
    out: list[str] = []
    for ours in SMROUTE_ENGINES:
        lines, ok, total = against_best(fabrics, ours)
        if total:
            out += [f"### {ours} against the best complete OpenSM engine", "", *lines, "",
                    f"{ours}: at or below the best complete OpenSM engine in {ok} of {total} "
                    "(capture, metric) cells", ""]
    return out


def result_row(path: Path, fabric_info: Row, sbs: SideBySide) -> Row:
    r: Row = {**fabric_info, "net_source": sbs.net_source, "notes": sbs.notes,
              "partition": sbs.partition, "error": sbs.error, "order_kind": sbs.order_kind,
              "hosts": len(sbs.order), "engines": []}
    for e, run in sbs.runs.items():
        row: Row = {"engine": e, "status": run.status, "error": run.error,
                    "fallback": run.fallback, "note": run.note,
                    "routing_seconds": run.routing_seconds,
                    "wall_seconds": round(run.wall_seconds, 3)}
        m = sbs.metrics.get(e)
        if m is not None:
            row.update(values=m.values, unroutable_pairs=m.unroutable["pairs"],
                       unroutable=m.unroutable, hot_link=m.hot_link)
        r["engines"].append(row)
    return r


def run_one(path: Path, args: argparse.Namespace, work: Path) -> Row:
    info: Row = {"file": path.name, "warnings": []}
    warnings: list[ParseWarning] = []
    try:
        lines = read_text_lines(path)
        fabric = read_fabric(path, warnings=warnings)
        require_switches(fabric, str(path))
    except SmrouteError as err:
        return {**info, "input_error": str(err).splitlines()[0].replace(str(path), path.name)}
    roles = fabric_roles(fabric)
    plain = detect_format(lines) == "topology" and not warnings
    f = fabric
    rows = np.flatnonzero((f.port_num > 0) & (f.port_peer >= 0) & roles.hosts_mask[f.port_node])
    to_sw = f.node_type[f.port_node[f.port_peer[rows]]] == NodeType.SWITCH
    info.update(warnings=[str(w).replace(str(path), path.name) for w in warnings],
                nodes=fabric.n_nodes,
                switches=len(fabric.switches), cas=len(fabric.cas),
                hosts_in_capture=int(to_sw.sum()),
                aggregation=len(roles.endports(EndportRole.AGGREGATION)))
    cfg = CompareConfig(rp_samples=args.rp_samples, random_orders=0, cps=("shift",))
    t0 = time.monotonic()
    sbs = run_side_by_side(fabric, work, np.random.default_rng(args.seed), engines=args.engines,
                           config=cfg, opensm_timeout=args.timeout,
                           capture=path if plain else None, order=args.order,
                           max_vls=args.vls)
    return {**result_row(path, info, sbs), "seconds": round(time.monotonic() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", type=Path, default=DEFAULT_REAL, help="the real fabrics folder")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these files (names)")
    ap.add_argument("--engines", nargs="+", default=None,
                    help="smroute's (dmodc nmodc; with --catalogue: smroute smroute-vls) and "
                    "OpenSM's engines (ftree updn dnup minhop dfsssp sssp nue lash)")
    cat = ap.add_argument_group("catalogue mode (bench/site_compare.py)")
    cat.add_argument("--catalogue", action="store_true",
                     help="smroute's default (one VL and --site-vls VLs) against OpenSM's "
                     "engines on the captures and the catalogue shapes: needed pairs, credit "
                     "loops, metrics over compute hosts and all CAs in GUID and name order")
    cat.add_argument("--shapes", metavar="NAME,...", help="only these catalogue shapes")
    cat.add_argument("--no-captures", action="store_true", help="only catalogue shapes")
    cat.add_argument("--no-shapes", action="store_true",
                     help="only the captures of --real (e.g. a folder of generated variants)")
    cat.add_argument("--max-hosts", type=int, metavar="N",
                     help="leave out fabrics with more than N CAs")
    cat.add_argument("--ibdmchk-max", type=int, default=1500, metavar="N",
                     help="run ibdmchk on one-VL tables of fabrics up to N CAs (default 1500)")
    cat.add_argument("--opensm-cache", type=Path, metavar="DIR",
                     help="keep OpenSM's engine rows here (JSON per fabric and engine, keyed by "
                     "the fabric's content hash) and reuse them: a rerun measures only "
                     "smroute's engines")
    cat.add_argument("--site-vls", type=int, default=8,
                     help="data VLs of smroute-vls, as the plugin gets them (default 8)")
    ap.add_argument("--vls", type=int, default=1,
                    help="data VLs nmodc may use (2+: detours where a tree has no path)")
    ap.add_argument("--rp-samples", type=int, default=1000, help="random permutations for RP")
    ap.add_argument("--order", choices=("topo", "guid"), default="topo",
                    help="host order of SP and HSD: Dmodc's topological order or port GUIDs")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="per OpenSM run (s): the time budget of each engine")
    ap.add_argument("--keep", type=Path, help="keep the work directories here")
    ap.add_argument("--json", metavar="FILE", help="write the results here")
    ap.add_argument("--from-json", metavar="FILE", type=Path,
                    help="print the tables of a --json file, run nothing")
    args = ap.parse_args()
    if args.catalogue:
        from site_compare import run_catalogue

        run_catalogue(args, machine())
        return
    if args.engines is None:
        args.engines = list(ENGINES)
    if args.from_json:
        try:
            saved = json.loads(args.from_json.read_text())
            ran_on, fabrics = saved["machine"], saved["fabrics"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            sys.exit(f"{args.from_json}: not a results file of --json ({err})")
        print(f"Machine (of the run): {ran_on}\n")
        if saved.get("mode") == "catalogue":
            from site_compare import fabric_markdown
            from site_compare import summary as site_summary

            for r in fabrics:
                print("\n".join(fabric_markdown(r)))
            print("\n".join(site_summary(fabrics)))
            return
        for r in fabrics:
            print("\n".join(markdown(r)))
        print("\n".join(summary(fabrics)))
        return
    if not args.real.is_dir():
        sys.exit(f"no real fabrics folder at {args.real} (pass --real DIR)")
    files = sorted(p for p in args.real.iterdir() if p.is_file() and p.name != "README.md")
    if args.only:
        files = [p for p in files if p.name in set(args.only)]
    print(f"Machine: {machine()}\n", flush=True)
    results = []
    for p in files:
        with tempfile.TemporaryDirectory(prefix="smroute-real-") as tmp:
            work = args.keep / p.name if args.keep else Path(tmp)
            r = run_one(p, args, work)
        results.append(r)
        print("\n".join(markdown(r)), flush=True)
    print("\n".join(summary(results)))
    if args.json:
        atomic_write_text(args.json, json.dumps(
            {"machine": machine(), "engines": args.engines, "rp_samples": args.rp_samples,
             "order": args.order, "seed": args.seed, "fabrics": results}, indent=1) + "\n")


if __name__ == "__main__":
    with sigterm_interrupts():
        main()
