#!/usr/bin/env python3
"""The leaves' up-link floor of random traffic on the study's throws (an
investigation, not the study).

Re-plans every throw of ``docs/study/<fabric>/study.csv`` (same seed and
protocol: :func:`smroute.study.degrade.plan_throw`) and splits each leaf's
destinations evenly over its up-link cables, as a routing that balances
every leaf's up-links perfectly would.  Under random permutations of the
end-ports, the largest load on those up-links is then what no routing can
go below by balancing its leaves' up-links alone: its median is RP's
floor, its mean the floor of the random-order HSD of a shift (each stage a
random permutation).  Prints, per removal band, the medians over the
throws of the floor and of each engine's RP and random-order shift HSD
from the CSV (complete throws), and how many throws each engine is within
``--tolerance`` of the floor.

    .venv/bin/python research/study_uplink_floor.py --fabric pgft648 --mode link
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from smroute.routing.topology import switch_graph  # noqa: E402
from smroute.study.degrade import parse_pgft, plan_throw  # noqa: E402
from smroute.study.results import BANDS, complete, read_rows  # noqa: E402


def even_split(ep_leaf: np.ndarray, cables: np.ndarray,
               rng: np.random.Generator) -> np.ndarray:
    """``(L, E)`` int64: for each leaf (``cables`` ``(L,)`` its up-link cables)
    and end-port (``ep_leaf`` ``(E,)`` the leaf it hangs off), the index of
    the leaf's up-link cable it is sent on, among all leaves' cables (cables
    numbered leaf after leaf), in an even split of the end-ports on other
    leaves (shuffled, then dealt in turn); -1 for its own end-ports or a leaf
    without up-links."""
    n_l, n_e = len(cables), len(ep_leaf)
    first = np.cumsum(cables) - cables
    out = np.full((n_l, n_e), -1, dtype=np.int64)
    for leaf in np.flatnonzero(cables).tolist():
        others = rng.permutation(np.flatnonzero(ep_leaf != leaf))
        out[leaf, others] = first[leaf] + np.arange(len(others)) % cables[leaf]
    return out


def floor_loads(split: np.ndarray, ep_leaf: np.ndarray, n_cables: int, samples: int,
                rng: np.random.Generator) -> np.ndarray:
    """``(samples,)`` int64: the largest up-link load of each of ``samples``
    random permutations of the end-ports (end-port ``i`` sends to
    ``perm[i]``) under ``split`` (:func:`even_split`)."""
    n_e = len(ep_leaf)
    out = np.empty(samples, dtype=np.int64)
    for k in range(samples):
        link = split[ep_leaf, rng.permutation(n_e)]
        out[k] = np.bincount(link[link >= 0], minlength=n_cables).max(initial=0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabric", default="pgft648",
                    help="the study's directory under docs/study (its CSV names the PGFT)")
    ap.add_argument("--mode", choices=("link", "switch"), default="link")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--samples", type=int, default=1000, help="random permutations per throw")
    ap.add_argument("--tolerance", type=float, default=0.05,
                    help="an engine's shift HSD this close to the floor counts as at it")
    ap.add_argument("--engines", default="nmodc,dmodc,dfsssp,sssp,minhop")
    args = ap.parse_args()
    engines = args.engines.split(",")
    path = ROOT / "docs/study" / args.fabric / "study.csv"
    if not path.is_file():
        ap.error(f"no study CSV at {path}")
    rows = [r for r in read_rows(path)
            if r["mode"] == args.mode and int(str(r["seed"])) == args.seed]
    if not rows:
        ap.error(f"{path}: no {args.mode} throws with seed {args.seed}")
    by = {(int(str(r["throw"])), str(r["engine"])): r for r in rows}
    full = parse_pgft(str(rows[0]["fabric"])).build()
    rng = np.random.default_rng(args.seed)
    res: dict[int, tuple[int, float, float]] = {}
    for i in sorted({int(str(r["throw"])) for r in rows}):
        th = plan_throw(full, args.mode, args.seed, i)
        g = switch_graph(th.fabric)
        leaves = np.flatnonzero(g.rank == 0)
        up = g.rank[g.grp_remote] > g.rank[g.grp_switch]
        per_sw = np.bincount(g.grp_switch[up], weights=g.grp_port_count[up],
                             minlength=g.n_switches).astype(np.int64)
        index = np.full(g.n_switches, -1, dtype=np.int64)
        index[leaves] = np.arange(len(leaves))
        ep_leaf = index[g.ep_switch]
        ep_leaf = ep_leaf[ep_leaf >= 0]  # (end-ports on leaves only)
        cables = per_sw[leaves]
        split = even_split(ep_leaf, cables, rng)
        loads = floor_loads(split, ep_leaf, int(cables.sum()), args.samples, rng)
        res[i] = (th.removed, float(np.median(loads)), float(loads.mean()))
        print(f"throw {i:3d} removed {th.removed:4d}: floor RP {res[i][1]:g}, "
              f"shift HSD {res[i][2]:.3f}", file=sys.stderr, flush=True)
    print(f"{args.fabric} {args.mode}: medians over the band's throws; "
          f"'at' = throws within {args.tolerance} of the floor's shift HSD / at its RP")
    for label, lo, hi in BANDS:
        ts = [i for i in res if lo <= res[i][0] <= hi]
        if not ts:
            continue
        line = [f"{label:>6} ({len(ts):3d}) floor RP {statistics.median(res[i][1] for i in ts):g}"
                f" HSD {statistics.median(res[i][2] for i in ts):.3f}"]
        for e in engines:
            done = [i for i in ts if (i, e) in by and complete(by[(i, e)])]
            if not done:
                continue
            rp = [float(str(by[(i, e)]["rp"])) for i in done]
            hsd = [float(str(by[(i, e)]["hsd_random_shift"])) for i in done]
            at_h = sum(h <= res[i][2] + args.tolerance for i, h in zip(done, hsd, strict=True))
            at_r = sum(r <= res[i][1] for i, r in zip(done, rp, strict=True))
            line.append(f"{e}: RP {statistics.median(rp):g} (at {at_r}/{len(done)})"
                        f" HSD {statistics.median(hsd):.3f} (at {at_h}/{len(done)})")
        print(" | ".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
