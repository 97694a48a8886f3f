#!/usr/bin/env python3
"""Development comparison of Nmodc with Dmodc and the cached OpenSM results
of a previous degradation study (an investigation, not the study).

Re-plans throws of ``docs/study/<fabric>/study.csv`` (same seed, same
protocol: :func:`smroute.study.degrade.plan_throw`), routes each degraded
fabric with Dmodc and Nmodc and computes the study's metrics for both with
the throw's metrics generator (:func:`smroute.analysis.compare.compare_tables`,
hosts in Dmodc's topological order).  OpenSM's engines are not rerun: their
rows are read from the CSV.  The fabric is the generated one, not the one
ibsim discovered, so RP and the random-order HSD draw other permutations than
the CSV's (statistically alike; the CSV's own Dmodc figures are printed as
``dmodc*`` for comparison); A2A and SP are the same.

Prints per throw, then per removal band the medians over complete throws,
with the best OpenSM engine that routed every throw of the band completely
(or, failing that, the best median among the engines' complete throws).

    .venv/bin/python scripts/study_nmodc_dev.py --fabric pgft1728 --mode link --throws 0-59
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from smroute.analysis.compare import CompareConfig, compare_tables  # noqa: E402
from smroute.analysis.paths import routing_view  # noqa: E402
from smroute.analysis.patterns import topological_order_from  # noqa: E402
from smroute.fabric.roles import fabric_roles  # noqa: E402
from smroute.routing.engine import route  # noqa: E402
from smroute.study.degrade import parse_pgft, plan_throw  # noqa: E402
from smroute.study.results import BANDS, complete, read_rows  # noqa: E402

TREES = {"pgft1728": "3;12,12,12;1,12,12;1,1,1", "pgft648": "2;18,36;1,18;1,1"}
OPENSM = ("ftree", "updn", "minhop", "dfsssp", "sssp")
METRICS = ("a2a", "rp", "sp", "hsd_topo", "hsd_random")


def _throws(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabric", choices=sorted(TREES), default="pgft1728")
    ap.add_argument("--mode", choices=("link", "switch"), default="link")
    ap.add_argument("--throws", default="0-9", help="e.g. 0-59 or 1,4,7")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--rp-samples", type=int, default=1000)
    ap.add_argument("--algorithms", default="dmodc,nmodc")
    ap.add_argument("--max-vls", type=int, default=1,
                    help="VLs for the last algorithm (2+: detours where the tree has no path)")
    args = ap.parse_args()
    algs = args.algorithms.split(",")
    csv_rows = read_rows(ROOT / "docs/study" / args.fabric / "study.csv")
    cached = {(int(str(r["throw"])), str(r["engine"])): r for r in csv_rows
              if r["mode"] == args.mode and int(str(r["seed"])) == args.seed}
    full = parse_pgft(TREES[args.fabric]).build()
    cfg = CompareConfig(rp_samples=args.rp_samples, random_orders=3)
    res_rows: dict[int, dict[str, dict[str, float] | None]] = {}
    removed: dict[int, int] = {}
    print("throw removed  " + "  ".join(f"{a}:a2a/rp/sp/hsdT/hsdR" for a in algs)
          + "  dmodc*  best-OpenSM(a2a/rp/sp/hsdT/hsdR)")
    for i in _throws(args.throws):
        th = plan_throw(full, args.mode, args.seed, i)
        removed[i] = th.removed
        tables, results = {}, {}
        secs = {}
        for a in algs:
            t0 = time.perf_counter()
            vls = args.max_vls if a == algs[-1] else 1
            r = route(th.fabric, algorithm=a, workers=1, labels=False, max_vls=vls)
            secs[a] = time.perf_counter() - t0
            tables[a], results[a] = r.tables, r
        base = results[algs[0]]
        view = routing_view(th.fabric, base.tables)
        topo = topological_order_from(view, base.graph.ep_row, base.nids)
        hosts = fabric_roles(th.fabric).hosts_mask[view.ep_node]
        order = topo[hosts[topo]]
        ms = compare_tables(th.fabric, tables, order, th.metrics_rng, cfg)
        res_rows[i] = {}
        cells = []
        for m in ms:
            ok = m.unroutable["pairs"] == 0
            res_rows[i][m.name] = {k: m.values[k] for k in METRICS} if ok else None
            v = m.values
            cells.append("/".join(f"{v[k]:.3g}" for k in METRICS) + ("" if ok else " (inc)"))
        d = cached.get((i, "dmodc"))
        dm = "/".join(f"{float(str(d[k])):.3g}" for k in METRICS) if d and complete(d) else "-"
        best = []
        for k in METRICS:
            vals = [float(str(cached[(i, e)][k])) for e in OPENSM
                    if (i, e) in cached and complete(cached[(i, e)])]
            best.append(f"{min(vals):.3g}" if vals else "-")
        print(f"{i:5d} {th.removed:7d}  " + "  ".join(cells) + f"  {dm}  {'/'.join(best)}"
              + "  " + " ".join(f"{a}={secs[a]:.2f}s" for a in algs), flush=True)
    print("\nmedians per band over complete throws (best OpenSM engine: lowest median among "
          "engines complete on every throw of the band; * none was)")
    for label, lo, hi in BANDS:
        ts = [i for i in res_rows if lo <= removed[i] <= hi]
        if not ts:
            continue
        line = [f"{label:>6} ({len(ts):2d})"]
        for a in algs:
            vals = [res_rows[i][a] for i in ts if res_rows[i].get(a) is not None]
            line.append(f"{a}: " + "/".join(
                f"{statistics.median(v[k] for v in vals):.3g}" if vals else "-"
                for k in METRICS) + f" ({len(ts) - len(vals)} inc)")
        best = []
        for k in METRICS:
            cand, partial = [], []
            for e in OPENSM:
                rs = [cached.get((i, e)) for i in ts]
                ok = [float(str(r[k])) for r in rs if r is not None and complete(r)]
                if ok and len(ok) == len(ts):
                    cand.append((statistics.median(ok), e))
                elif ok:
                    partial.append((statistics.median(ok), e))
            if cand:
                v, e = min(cand)
                best.append(f"{v:.3g} {e}")
            elif partial:
                v, e = min(partial)
                best.append(f"{v:.3g} {e}*")
            else:
                best.append("-")
        line.append("OpenSM: " + " / ".join(best))
        print("  ".join(line))
        # paired: the last algorithm against the best engine of each metric, same throws
        alg = algs[-1]
        pairs = []
        for k, cell in zip(METRICS, best, strict=True):
            e = cell.split()[-1].rstrip("*") if cell != "-" else ""
            w = eq = bt = 0
            for i in ts:
                mine, theirs = res_rows[i].get(alg), cached.get((i, e))
                if mine is None or theirs is None or not complete(theirs):
                    continue
                d = float(f"{mine[k]:.6g}") - float(str(theirs[k]))  # the CSV's precision
                w, eq, bt = w + (d > 1e-9), eq + (abs(d) <= 1e-9), bt + (d < -1e-9)
            pairs.append(f"{k} {w}/{eq}/{bt}")
        print(f"{'':13}{alg} worse/equal/better than that engine: " + ", ".join(pairs))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
