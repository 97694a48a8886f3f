#!/usr/bin/env python3
"""Where random traffic loads each engine's links on the study's throws (an
investigation, not the study).

Re-plans throws of a study (same seed and protocol:
:func:`smroute.study.degrade.plan_throw`), routes each with the engines
(OpenSM's under ibsim, as the study does) and prints per engine:

* per class of switch-to-switch link (the levels of its two switches, 0 for
  the leaves: ``0>1`` a leaf's up-links, ``2>1`` a spine's down-links into
  an L2 switch), the expected largest load of ``--samples`` random
  permutations of the hosts (:func:`smroute.analysis.congestion.link_loads`);
* ``entries``: the mean number of distinct links through which the flows of
  one destination, from every source leaf, enter the destination's leaf
  (1: every source reaches a destination through the same last link).

A random permutation's largest load is the largest of these classes; a
routing whose sources reach each destination through fewer links leaves
fewer destinations per down-link in play.

    .venv/bin/python research/study_link_classes.py --fabric pgft648 --mode link --throws 47
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from smroute.analysis.compare import CompareConfig  # noqa: E402
from smroute.analysis.congestion import link_loads  # noqa: E402
from smroute.analysis.paths import pair_paths  # noqa: E402
from smroute.analysis.view import OK, routing_view  # noqa: E402
from smroute.fabric.model.arrays import Fabric  # noqa: E402
from smroute.lab.sidebyside import run_side_by_side  # noqa: E402
from smroute.study.degrade import parse_pgft, plan_throw  # noqa: E402
from smroute.tables.lft import ForwardingTables  # noqa: E402

TREES = {"pgft1728": "3;12,12,12;1,12,12;1,1,1", "pgft648": "2;18,36;1,18;1,1"}


def link_classes(fabric: Fabric, tables: ForwardingTables, hosts: np.ndarray,
                 rng: np.random.Generator, samples: int) -> tuple[dict[str, float], float]:
    """``({class: expected largest load}, entries)`` of one engine's tables
    (module doc); ``hosts`` ``(N,)`` end-port indices of the routing view."""
    view = routing_view(fabric, tables)
    paths = pair_paths(view)
    lvl = view.sw_level
    link_of = view.link_of.reshape(-1, 256)
    nxt = view.next_sw.reshape(-1, 256)
    s, p = np.nonzero(link_of >= 0)
    n2 = nxt[s, p]
    core = n2 >= 0
    cls = np.full(paths.n_links, "", dtype=object)
    cls[link_of[s[core], p[core]]] = [f"{a}>{b}" for a, b in
                                      zip(lvl[s[core]].tolist(), lvl[n2[core]].tolist(),
                                          strict=True)]
    names = sorted(set(cls.tolist()) - {""})
    masks = [cls == c for c in names]
    top = np.zeros((samples, len(names)))
    for k in range(samples):
        loads, _ = link_loads(view, paths, hosts, hosts[rng.permutation(len(hosts))])
        top[k] = [loads[m].max(initial=0) for m in masks]
    # the last core link of every delivered (leaf, end-port) pair
    hops = paths.hops.astype(np.int64)
    ok = (paths.status == OK) & (hops > 0)
    last = paths.links[np.flatnonzero(ok), hops[ok] - 1].astype(np.int64)
    dst = np.flatnonzero(ok) % paths.n_endports
    pairs = np.unique(dst * (paths.n_links + 1) + last)
    per_dst = np.bincount(pairs // (paths.n_links + 1), minlength=paths.n_endports)[hosts]
    return dict(zip(names, top.mean(axis=0).tolist(), strict=True)), float(per_dst.mean())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabric", choices=sorted(TREES), default="pgft648")
    ap.add_argument("--mode", choices=("link", "switch"), default="link")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--throws", default="47", help="throw indices, comma-separated")
    ap.add_argument("--engines", default="nmodc,dmodc,dfsssp")
    ap.add_argument("--vls", type=int, default=4, help="data VLs nmodc may use (as the study)")
    ap.add_argument("--samples", type=int, default=150, help="random permutations per engine")
    args = ap.parse_args()
    full = parse_pgft(TREES[args.fabric]).build()
    engines = tuple(args.engines.split(","))
    for i in (int(t) for t in args.throws.split(",")):
        th = plan_throw(full, args.mode, args.seed, i)
        with tempfile.TemporaryDirectory(prefix="smroute-classes-") as work:
            sbs = run_side_by_side(th.fabric, work, th.metrics_rng, engines=engines,
                                   config=CompareConfig(rp_samples=1, random_orders=0, cps=()),
                                   max_vls=args.vls)
        if sbs.fabric is None:
            print(f"throw {i}: {sbs.error}", file=sys.stderr)
            continue
        print(f"{args.fabric} {args.mode} throw {i} ({th.removed} removed)")
        for e in engines:
            run = sbs.runs[e]
            if run.tables is None:
                print(f"  {e:8s} {run.status}: {run.error}")
                continue
            rng = np.random.default_rng(args.seed)  # the same permutations for every engine
            loads, entries = link_classes(sbs.fabric, run.tables, sbs.order, rng, args.samples)
            print(f"  {e:8s} " + " ".join(f"{c} {v:.2f}" for c, v in loads.items())
                  + f" | entries {entries:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
