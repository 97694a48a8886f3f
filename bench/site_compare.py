"""The catalogue mode of ``bench/real_fabrics.py``: smroute's default and
OpenSM's engines side by side on every real capture and every catalogue
shape, over compute hosts and over all CAs, in port-GUID and host-name order.

Per fabric: boot it once in ibsim (:func:`smroute.lab.sidebyside.simulate`:
the capture itself when it is plain ibnetdiscover text that parsed without a
warning, else the fabric written as a net file), run the real OpenSM once
per engine (each with a time budget), discover it with ibnetdiscover and
route the discovered view with smroute's default twice: on one VL (what the
file engine and the bridge program) and with ``--vls`` data VLs (what the
OpenSM plugin may program).  Per engine:

* **completeness**: needed (source, destination) end-port pairs not
  delivered.  Needed: every pair with a host (compute, service, storage,
  management, I/O) at either end, and aggregation node to aggregation node
  on the same or adjacent switches (SHARP's trees follow cables between
  adjacent switches), or from a switch that carries hosts (its table routes
  every CA anyway): the roles' one rule; other aggregation-node pairs are
  counted apart.
* **credit loops**: ibdmchk on one-VL tables of fabrics up to
  ``--ibdmchk-max`` CAs, and the channel dependency graph of the routes
  from CAs to CAs (:func:`smroute.routing.deadlock.check_credit_loops`
  without switch sources, on the tables without switch LIDs: what ibdmchk
  checks; OpenSM's nue, free of credit loops for CA traffic, has cycles
  through the routes to and from switches' port 0) on VL 0, or with
  smroute's SLs and SL-to-VL tables where it uses VLs.  OpenSM's dfsssp and
  lash spread routes over VLs this check does not see (their SL-to-VL tables
  are not dumped): a cycle on VL 0 is theirs to break, marked ``(VLs)``.
* **metrics**, per host set (``compute``: compute hosts; ``cas``: every
  CA, aggregation nodes included) and order (``guid``: port GUIDs;
  ``name``: node descriptions, i.e. host names, ties by port GUID): SP
  (max congestion risk over the shifts), A2A, RP (median over random
  permutations, the same permutations for every engine) and the HSD
  average of the shift CPS; with each permutation's max and each shift's
  max flows (``rp_stages``, ``shift_stages``: :mod:`site_stages`), which
  the comparison pairs.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from opensm_cache import OpenSMCache, fabric_key, sim_facts
from site_stages import Verdict, significant_miss, stages
from site_stages import encode as encode_stages

from smroute.analysis import patterns as P
from smroute.analysis.congestion import a2a_risk, evaluate
from smroute.analysis.paths import pair_paths, routing_view
from smroute.errors import SmrouteError
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import EndportRole, FabricRoles, fabric_roles, needed_pairs
from smroute.fileio import atomic_write_text
from smroute.lab.sidebyside import OPENSM_ENGINES, EngineRun, simulate
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.engine import route
from smroute.routing.vlassign import VirtualLanes
from smroute.tables.lft import NO_ROUTE, ForwardingTables

Row = dict[str, Any]
#: smroute's default on one VL and with VLs, then OpenSM's engines.
SITE_ENGINES = ("smroute", "smroute-vls", *OPENSM_ENGINES)
#: OpenSM engines free of credit loops on one VL (the bar of smroute on one VL).
ONE_VL_ENGINES = ("updn", "dnup", "ftree", "nue")
#: OpenSM engines that put routes on several VLs.
VL_ENGINES = ("dfsssp", "lash")
METRICS = ("sp", "a2a", "rp", "hsd")
SETS = ("compute", "cas")
ORDERS = ("guid", "name")


def progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ pure parts
def needed_mask(f: Fabric, roles: FabricRoles, ep_node: np.ndarray) -> np.ndarray:
    """``(E, E)`` bool over the view's end-ports: the pairs that need a route
    (the roles' rule, :func:`~smroute.fabric.roles.needed_pairs`), the
    diagonal excluded."""
    rule = needed_pairs(f, roles, f.switches, ep_node)
    sid = np.searchsorted(f.switches, roles.attach[ep_node])
    need = rule.mask(sid, sid, rule.agg)
    np.fill_diagonal(need, False)
    return need


def delivered(view: Any, paths: Any) -> np.ndarray:
    """``(E, E)`` bool: the flow from end-port ``a`` to ``b`` is delivered."""
    st = paths.status.reshape(view.n_leaves, view.n_endports)
    return st[view.ep_leaf_row] == 0


def host_orders(f: Fabric, roles: FabricRoles, ep_node: np.ndarray, ep_guid: np.ndarray
                ) -> dict[str, dict[str, np.ndarray]]:
    """Per host set and order, the end-port indices of the view."""
    comp = np.flatnonzero(roles.endport_role[ep_node] == EndportRole.COMPUTE)
    every = np.arange(len(ep_node), dtype=np.int64)
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, ep in (("compute", comp), ("cas", every)):
        by_guid = ep[np.argsort(ep_guid[ep], kind="stable")]
        descs = np.asarray([f.node_desc[int(n)] for n in ep_node[by_guid]], dtype=object)
        by_name = by_guid[np.argsort(descs, kind="stable")] if len(ep) else by_guid
        out[name] = {"guid": by_guid.astype(np.int64), "name": by_name.astype(np.int64)}
    return out


def ca_destinations(f: Fabric, tables: ForwardingTables) -> ForwardingTables:
    """``tables`` without the routes to switch LIDs (their columns
    :data:`~smroute.tables.lft.NO_ROUTE`): what CAs send to CAs."""
    ports = np.array(tables.ports, copy=True)
    lids = f.port_lid[f.port_start[f.switches]].astype(np.int64)
    ports[:, lids[(lids > 0) & (lids < ports.shape[1])]] = NO_ROUTE
    return dataclasses.replace(tables, ports=ports)


def table_metrics(f: Fabric, tables: ForwardingTables, roles: FabricRoles,
                  lanes: VirtualLanes | None, *, seed: int, rp_samples: int) -> Row:
    """Completeness, credit loops and the metrics of one table set."""
    view = routing_view(f, tables)
    paths = pair_paths(view)
    ok = delivered(view, paths)
    need = needed_mask(f, roles, view.ep_node)
    agg = roles.endport_role[view.ep_node] == EndportRole.AGGREGATION
    other = agg[:, None] & agg[None, :] & ~need
    np.fill_diagonal(other, False)
    loops = check_credit_loops(f, ca_destinations(f, tables), lanes, switch_sources=False)
    out: Row = {"needed_pairs": int(need.sum()), "missing_needed": int((need & ~ok).sum()),
                "other_agg_pairs": int(other.sum()), "missing_other": int((other & ~ok).sum()),
                "credit_loop_free": loops.ok, "cyclic_channels": loops.cyclic,
                "vls": loops.vls, "forwarding_loops": loops.unfinished, "sets": {}}
    for hs, orders in host_orders(f, roles, view.ep_node, view.ep_guid).items():
        o_any = orders["guid"]
        n = len(o_any)
        if n < 2:
            continue
        row: Row = {"hosts": n, "a2a": int(a2a_risk(view, paths, o_any).value)}
        for oname, o in orders.items():
            shift = evaluate(view, paths, P.cps("shift", n), o)
            rp = evaluate(view, paths, P.random_permutations(n, np.random.default_rng(seed),
                                                              rp_samples), o)
            row[oname] = {"sp": shift.risk_max, "hsd": round(shift.hsd_avg, 3),
                          "rp": rp.risk_median, "unroutable": shift.total_unroutable,
                          "rp_stages": encode_stages(rp.risk),
                          "shift_stages": encode_stages(shift.max_flows)}
        out["sets"][hs] = row
    return out


def ibdmchk_verdict(f: Fabric, tables: ForwardingTables, work: Path) -> str:
    """ibdmchk on the tables (written as ``opensm.fdbs`` and
    ``opensm-subnet.lst``): ``"no credit loop"``, ``"credit loop"``,
    ``"N missing paths"`` (it stops before the loop check) or why it did not run."""
    from smroute.lab.ibdmchk import run_ibdmchk
    from smroute.tables.formats import format_fdbs, format_subnet_lst

    work.mkdir(parents=True, exist_ok=True)
    (work / "opensm-subnet.lst").write_text(format_subnet_lst(f))
    (work / "opensm.fdbs").write_text(format_fdbs(tables))
    try:
        rep = run_ibdmchk(work / "opensm.fdbs", work / "opensm-subnet.lst", timeout=600)
    except SmrouteError as err:
        return f"not run: {str(err).splitlines()[0][:60]}"
    if rep.credit_loops is None:
        return f"{rep.missing_paths} missing paths" if rep.missing_paths else "no verdict"
    return "credit loop" if rep.credit_loops else "no credit loop"


def value(e: Row, hs: str, order: str, metric: str) -> float:
    s = e.get("metrics", {}).get("sets", {}).get(hs)
    if not s:
        return math.nan
    return float(s["a2a"] if metric == "a2a" else s[order][metric])


def complete(e: Row) -> bool:
    """Routed by the engine itself, every needed pair delivered."""
    m = e.get("metrics")
    return e["status"] == "ok" and isinstance(m, dict) and bool(m) and m["missing_needed"] == 0


# ------------------------------------------------------------------ running
def _simulations(name: str, fabric: Fabric, work: Path, opensm: list[str], *, budget: float,
                 capture: Path | None, cache: OpenSMCache | None, key: str
                 ) -> tuple[Fabric, Row, dict[str, EngineRun | Row]]:
    """The discovered fabric, its facts and engine -> run (or cached row) of
    ``opensm``.  Without a cache: one ibsim for every engine; with one: the
    cached rows, and one ibsim per engine left (each row is cached as soon
    as it is measured, by :func:`run_fabric`); no ibsim at all when every
    engine and the discovered fabric are cached."""
    runs: dict[str, EngineRun | Row] = {}
    if cache is None:
        progress(f"{name}: ibsim and OpenSM ({', '.join(opensm) or 'none'})")
        sim = simulate(fabric, work, opensm, timeout=budget, capture=capture)
        runs.update(sim.runs)
        return sim.fabric, sim_facts(sim), runs
    for e in opensm:
        hit = cache.engine(key, e, budget)
        if hit is not None:
            runs[e] = hit
    todo = [e for e in opensm if e not in runs]
    found = None if todo else cache.discovered(key)
    if found is not None:
        return found[0], found[1], runs
    return fabric, {}, runs  # run_fabric simulates the engines left, one at a time


def run_fabric(name: str, fabric: Fabric, work: Path, *, engines: list[str], vls: int,
               budget: float, seed: int, rp_samples: int, capture: Path | None,
               ibdmchk_max: int = 0, cache: OpenSMCache | None = None) -> Row:
    """Simulate, route and measure one fabric (module doc); with ``cache``,
    OpenSM's rows come from it where they are there and go to it as they are
    measured (:class:`OpenSMCache`)."""
    row: Row = {"fabric": name, "switches": len(fabric.switches), "cas": len(fabric.cas),
                "engines": []}
    opensm = [e for e in engines if e in OPENSM_ENGINES]
    key = fabric_key(fabric)
    t0 = time.monotonic()
    try:
        disc, facts, runs = _simulations(name, fabric, work, opensm, budget=budget, capture=capture,
                                         cache=cache, key=key)
        left = [e for e in opensm if e not in runs]
        if cache is not None:
            progress(f"{name}: OpenSM cached: {', '.join(runs) or 'none'}; to run: "
                     f"{', '.join(left) or 'none'}")
        if cache is not None and (left or not facts):
            for e in left or [""]:  # "": no engine left, discover the fabric only
                progress(f"{name}: ibsim and OpenSM {e or '(none)'}")
                sim = simulate(fabric, work / (e or "discover"), [e] if e else [],
                               timeout=budget, capture=capture)
                disc, facts = sim.fabric, sim_facts(sim)
                cache.put_discovered(key, sim)
                if e:
                    done = _opensm_row(name, disc, sim.runs[e], work, seed=seed,
                                       rp_samples=rp_samples, ibdmchk_max=ibdmchk_max)
                    cache.put_engine(key, e, budget, done)
                    runs[e] = done
    except (SmrouteError, OSError) as err:
        row["error"] = f"cannot simulate: {str(err).splitlines()[0]}"
        return row
    roles = fabric_roles(disc)
    row.update(facts, compute=len(roles.endports(EndportRole.COMPUTE)),
               aggregation=len(roles.endports(EndportRole.AGGREGATION)), fabric_key=key)
    for e in engines:
        if e in OPENSM_ENGINES:
            run = runs[e]
            if isinstance(run, dict):  # measured already (with the cache)
                row["engines"].append(run)
                continue
            r = _opensm_row(name, disc, run, work, seed=seed, rp_samples=rp_samples,
                            ibdmchk_max=ibdmchk_max)
            row["engines"].append(r)
            continue
        r = {"engine": e}
        try:
            t = time.monotonic()
            res = route(disc, workers=1, labels=False, max_vls=vls if e == "smroute-vls" else 1)
        except SmrouteError as err:
            r.update(status="failed", error=str(err).splitlines()[0])
            row["engines"].append(r)
            continue
        r.update(status="ok", error="", fallback="", routing_seconds=res.total_seconds,
                 wall_seconds=round(time.monotonic() - t, 2),
                 mode=res.mode + (f": {res.mode_reason}" if res.mode_reason else ""))
        progress(f"{name}: metrics of {e}")
        r["metrics"] = table_metrics(disc, res.tables, roles, res.lanes, seed=seed,
                                     rp_samples=rp_samples)
        if len(disc.cas) <= ibdmchk_max:  # one VL only: ibdmchk reads no SL-to-VL
            r["ibdmchk"] = ("not run: VLs" if res.lanes is not None
                            else ibdmchk_verdict(disc, res.tables, work / "ibdmchk" / e))
        row["engines"].append(r)
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def _opensm_row(name: str, disc: Fabric, run: EngineRun, work: Path, *, seed: int,
                rp_samples: int, ibdmchk_max: int) -> Row:
    """One OpenSM engine's row: its run and the metrics of its tables."""
    r: Row = {"engine": run.engine, "status": run.status, "error": run.error,
              "fallback": run.fallback, "routing_seconds": run.routing_seconds,
              "wall_seconds": round(run.wall_seconds, 2)}
    if run.tables is not None:
        progress(f"{name}: metrics of {run.engine}")
        r["metrics"] = table_metrics(disc, run.tables, fabric_roles(disc), None, seed=seed,
                                     rp_samples=rp_samples)
        if len(disc.cas) <= ibdmchk_max:  # one VL only: ibdmchk reads no SL-to-VL
            r["ibdmchk"] = ("not run: VLs" if run.engine in VL_ENGINES
                            else ibdmchk_verdict(disc, run.tables, work / "ibdmchk" / run.engine))
    return r


# ------------------------------------------------------------------ tables
def _n(v: float) -> str:
    if math.isnan(v):
        return "-"
    return str(int(v)) if v == int(v) else f"{v:.3g}"


def fabric_markdown(r: Row) -> list[str]:
    """One fabric's engines: status, completeness, credit loops, metrics."""
    out = [f"#### {r['fabric']}", ""]
    if r.get("error"):
        return [*out, f"Not measured: {r['error']}", ""]
    out.append(f"{r['switches']} switches, {r['cas']} CAs ({r.get('compute', 0)} compute hosts, "
               f"{r.get('aggregation', 0)} aggregation nodes); net file: "
               f"{r.get('net_source', '-')}; {r.get('seconds', '-')} s")
    out += [f"* {n}" for n in r.get("notes", [])]
    out += ["", "| engine | status | needed pairs missing | credit loops | "
            "SP c/guid | SP c/name | A2A c | RP c/guid | HSD c/guid | HSD c/name | "
            "SP all/guid | A2A all | routing s |", "|---" * 13 + "|"]
    for e in r["engines"]:
        m = e.get("metrics")
        st = e["status"] if e["status"] == "ok" else (
            f"fell back to {e['fallback']}" if e.get("fallback") else
            f"{e['status']}: {e.get('error', '')[:60]}")
        if e.get("mode"):
            st += f" ({e['mode'].split(':')[0]})"
        if m:
            miss = f"{m['missing_needed']} of {m['needed_pairs']}"
            if m["missing_other"]:
                miss += f" (+{m['missing_other']} other agg)"
            cl = ("none" if m["credit_loop_free"] else f"{m['cyclic_channels']} ch") + (
                " (VLs)" if e["engine"] in VL_ENGINES and not m["credit_loop_free"] else "")
            if e.get("ibdmchk"):
                cl += f"; ibdmchk: {e['ibdmchk']}"
            if m["vls"] > 1:
                cl += f", {m['vls']} VLs"
        else:
            miss = cl = "-"
        cells = [value(e, "compute", "guid", "sp"), value(e, "compute", "name", "sp"),
                 value(e, "compute", "guid", "a2a"), value(e, "compute", "guid", "rp"),
                 value(e, "compute", "guid", "hsd"), value(e, "compute", "name", "hsd"),
                 value(e, "cas", "guid", "sp"), value(e, "cas", "guid", "a2a")]
        rt = e.get("routing_seconds")
        out.append(f"| {e['engine']} | {st} | {miss} | {cl} | " + " | ".join(map(_n, cells))
                   + f" | {_n(rt) if rt is not None else '-'} |")
    return [*out, ""]


#: The comparison's columns: (metric, host order); A2A has no order.
COLUMNS = [(m, o) for o in ORDERS for m in METRICS if not (m == "a2a" and o == "name")]
#: ``(metric, order, ours, best, best engines, verdict)``; the verdict of the
#: noise rule (:func:`site_stages.significant_miss`) where ours is above the
#: best, else ``None``.
Cell = tuple[str, str, float, float, list[str], Verdict | None]


def best_cells(r: Row, ours: str, rivals: tuple[str, ...] | None, hs: str = "compute", *,
               loop_free: bool = True) -> list[Cell | None] | str:
    """``ours`` against the best rival engine on one fabric, per
    :data:`COLUMNS` cell: a :data:`Cell` (``None``: no value), or why there
    is no comparison; where ours is above the best, the cell's verdict tests
    it against every rival below it over the paired stages (RP, shift HSD;
    SP and A2A are exact).  Rivals ``None`` =
    every OpenSM engine that routed the needed pairs; else those of
    ``rivals`` that did so free of credit loops (any, with
    ``loop_free=False``: OpenSM's updn has credit loops where aggregation
    nodes mislead its root detection, ibdmchk agreeing)."""
    engines = {e["engine"]: e for e in r.get("engines", [])}
    mine = engines.get(ours)
    if rivals is None:
        pool = [e for n, e in engines.items() if n in OPENSM_ENGINES and complete(e)]
    else:
        pool = [e for n, e in engines.items() if n in rivals and complete(e)
                and (e["metrics"]["credit_loop_free"] or not loop_free)]
    if mine is None or not complete(mine) or not pool:
        return ("not routed completely" if mine is not None and not complete(mine)
                else "no rival routed it completely" if mine is not None else "not run")
    cells: list[Cell | None] = []
    for m, o in COLUMNS:
        v = value(mine, hs, o, m)
        vals = [(x, e["engine"]) for e in pool if not math.isnan(x := value(e, hs, o, m))]
        if math.isnan(v) or not vals:
            cells.append(None)
            continue
        best = min(x for x, _ in vals)
        verdict = None if v <= best else significant_miss(
            m, stages(mine, hs, o, m), v,
            [(e["engine"], value(e, hs, o, m), stages(e, hs, o, m)) for e in pool])
        cells.append((m, o, v, best, [n for x, n in vals if x == best], verdict))
    return cells


def against_best(fabrics: list[Row], ours: str, rivals: tuple[str, ...] | None,
                 hs: str = "compute", *, loop_free: bool = True
                 ) -> tuple[list[str], int, int, int]:
    """:func:`best_cells` of every fabric as a table: cells ``ours <= best
    (engine)`` or ``>``, a sampled cell above with its sign test (``p``,
    ``significant`` or ``within noise``); ``(markdown, at or below, cells,
    significant misses)``."""
    out = ["| fabric | hosts | " + " | ".join(f"{m.upper()} {o}" for m, o in COLUMNS) + " |",
           "|---" * (2 + len(COLUMNS)) + "|"]
    ok = total = sig = 0
    for r in fabrics:
        got = best_cells(r, ours, rivals, hs, loop_free=loop_free)
        if isinstance(got, str):
            if got != "not run" and r.get("compute", 0) >= 2:
                out.append(f"| {r['fabric']} | {r.get('compute', 0)} | {got} |"
                           + " |" * (len(COLUMNS) - 1))
            continue
        text = []
        for c in got:
            if c is None:
                text.append("-")
                continue
            _, _, v, best, who, verdict = c
            total += 1
            ok += v <= best
            sig += verdict is not None and verdict.significant
            text.append(f"{_n(v)} {'<=' if v <= best else '>'} {_n(best)} "
                        f"{'/'.join(who[:2])}{f' +{len(who) - 2}' if len(who) > 2 else ''}"
                        + (verdict.mark() if verdict is not None else ""))
        out.append(f"| {r['fabric']} | {r.get('compute', 0)} | " + " | ".join(text) + " |")
    return out, ok, total, sig


#: How a miss counts, as the reports say it.
NOISE_RULE = ("SP and A2A exactly; RP and shift HSD only where the two-sided sign test "
              "over the paired permutations or shifts, ties dropped, gives p < 0.05 with "
              "smroute worse on more of them against a rival below it")


def summary(fabrics: list[Row]) -> list[str]:
    out: list[str] = []
    for ours, rivals, free, title in (
        ("smroute", ONE_VL_ENGINES, True, "smroute (one VL) against the best of updn, dnup, "
         "ftree, nue that routed every needed pair free of credit loops"),
        ("smroute", ONE_VL_ENGINES, False, "smroute (one VL) against the best of updn, dnup, "
         "ftree, nue that routed every needed pair, credit loops or not"),
        ("smroute-vls", None, False, "smroute (VLs) against the best OpenSM engine that routed "
         "every needed pair"),
    ):
        lines, ok, total, sig = against_best(fabrics, ours, rivals, loop_free=free)
        out += [f"### {title} (compute hosts)", "", *lines, "",
                f"{ours}: at or below the best in {ok} of {total} cells; above it in "
                f"{total - ok} (raw), {sig} of them significant misses", ""]
    return [*out, f"A miss counts as significant: {NOISE_RULE}.", ""]


# ------------------------------------------------------------------ the mode
def fabrics_to_run(real: Path | None, shapes: list[str] | None, max_hosts: int | None
                   ) -> list[tuple[str, Fabric | str, Path | None]]:
    """(name, fabric or why not, capture to boot as is) of every real capture
    (``real``: the folder, ``None``: none) and catalogue shape (``shapes``:
    names, ``None``: all), those with more than ``max_hosts`` CAs left out."""
    from smroute.fabric.generate.catalogue import CATALOGUE, build_shape
    from smroute.fabric.ibnetdiscover.parse import detect_format, read_fabric, require_switches
    from smroute.fabric.ibnetdiscover.text import ParseWarning, read_text_lines

    out: list[tuple[str, Fabric | str, Path | None]] = []
    if real is not None:
        for p in sorted(x for x in real.iterdir() if x.is_file() and x.name != "README.md"):
            warnings: list[ParseWarning] = []
            try:
                f = read_fabric(p, warnings=warnings)
                require_switches(f, str(p))
            except SmrouteError as err:
                out.append((p.name, str(err).splitlines()[0].replace(str(p), p.name), None))
                continue
            plain = detect_format(read_text_lines(p)) == "topology" and not warnings
            out.append((p.name, f, p if plain else None))
    names = list(CATALOGUE) if shapes is None else shapes
    for n in names:
        if n not in CATALOGUE:
            raise SystemExit(f"no shape {n!r} in the catalogue; known: {', '.join(CATALOGUE)}")
        out.append((n, build_shape(n), None))
    if max_hosts is not None:
        out = [x for x in out if isinstance(x[1], str) or len(x[1].cas) <= max_hosts]
    return out


def run_catalogue(args: Any, machine: str) -> list[Row]:
    """The catalogue mode of ``bench/real_fabrics.py`` (its ``--catalogue``)."""
    import tempfile

    engines = args.engines or list(SITE_ENGINES)
    bad = [e for e in engines if e not in SITE_ENGINES]
    if bad:
        raise SystemExit(f"unknown engine(s) {', '.join(bad)}; catalogue mode knows "
                         f"{', '.join(SITE_ENGINES)}")
    shapes = [] if args.no_shapes else args.shapes.split(",") if args.shapes else None
    real = None if args.no_captures else args.real
    if real is not None and not real.is_dir():
        raise SystemExit(f"no real fabrics folder at {real} (pass --real DIR or --no-captures)")
    todo = fabrics_to_run(real, shapes, args.max_hosts)
    if args.only:
        todo = [x for x in todo if x[0] in set(args.only)]
    cache = (OpenSMCache(args.opensm_cache, seed=args.seed, rp_samples=args.rp_samples)
             if getattr(args, "opensm_cache", None) else None)
    print(f"Machine: {machine}\n", flush=True)
    results: list[Row] = []
    for i, (name, f, cap) in enumerate(todo, 1):
        progress(f"fabric {i} of {len(todo)}: {name}")
        if isinstance(f, str):
            r: Row = {"fabric": name, "error": f, "engines": []}
        else:
            with tempfile.TemporaryDirectory(prefix="smroute-site-") as tmp:
                work = args.keep / name if args.keep else Path(tmp)
                r = run_fabric(name, f, work, engines=engines, vls=args.site_vls,
                               budget=args.timeout, seed=args.seed, rp_samples=args.rp_samples,
                               capture=cap, ibdmchk_max=args.ibdmchk_max, cache=cache)
        results.append(r)
        print("\n".join(fabric_markdown(r)), flush=True)
        if args.json:  # after every fabric: a long run keeps what it measured
            atomic_write_text(args.json, json.dumps(
                {"machine": machine, "mode": "catalogue", "engines": engines,
                 "vls": args.site_vls, "rp_samples": args.rp_samples, "seed": args.seed,
                 "budget": args.timeout, "fabrics": results}, indent=1) + "\n")
    print("\n".join(summary(results)))
    return results
