"""The default's tables and metrics, the code before against the code now,
on a set of fabric files: which fabrics' tables change, and per changed
fabric every metric that moves, with the sign test over its paired samples.

    git worktree add /tmp/before REV
    PYTHONPATH=. .venv/bin/python research/ab_metrics.py --before /tmp/before FILE...

Each side runs in its own process with its checkout first on the path:
``smroute route``'s default (Nmodc, one VL, one worker), then over the
compute hosts (``bench/site_compare.host_orders``) A2A, and in port-GUID and
host-name order the shift permutation's SP and HSD (paired by shift) and
RP (printed as the mean of each permutation's largest link load) over
``--perms`` random permutations (paired by permutation), and the
shift HSD over ``--orders`` random host orders (paired by order).  A cell
prints as ``before -> after``, with ``p`` of the two-sided sign test
(``smroute.study.signtest.sign_test``, ties dropped) where it has samples.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(files: list[str], perms: int, orders: int, digests_only: bool) -> dict:
    """Per file: the tables' digest, and unless ``digests_only`` the samples."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "bench"))
    from site_compare import host_orders

    from smroute.analysis import patterns as P
    from smroute.analysis.congestion import a2a_risk, evaluate
    from smroute.analysis.paths import pair_paths, routing_view
    from smroute.fabric.ibnetdiscover.parse import read_fabric
    from smroute.fabric.roles import fabric_roles
    from smroute.routing.engine import route

    out: dict = {}
    for fn in files:
        f = read_fabric(fn)
        r = route(f, workers=1, labels=False)
        row: dict = {"digest": hashlib.sha1(r.tables.ports.tobytes()).hexdigest()}
        out[fn] = row
        if digests_only:
            continue
        view = routing_view(f, r.tables)
        paths = pair_paths(view)
        oo = host_orders(f, fabric_roles(f), view.ep_node, view.ep_guid)["compute"]
        n = len(oo["guid"])
        if n < 2:
            continue
        row["A2A"] = [int(a2a_risk(view, paths, oo["guid"]).value)]
        for on in ("guid", "name"):
            sh = evaluate(view, paths, P.cps("shift", n), oo[on])
            rp = evaluate(view, paths, P.random_permutations(n, np.random.default_rng(1), perms),
                          oo[on])
            row[f"SP {on}"] = [int(sh.risk_max)]
            row[f"HSD {on}"] = [int(x) for x in sh.max_flows]
            row[f"RP {on}"] = [int(x) for x in rp.risk]
        rng = np.random.default_rng(7)
        row["HSD random orders"] = [
            float(evaluate(view, paths, P.cps("shift", n), rng.permutation(oo["guid"])).hsd_avg)
            for _ in range(orders)]
    return out


def side(checkout: Path, args: argparse.Namespace, files: list[str], digests_only: bool) -> dict:
    """:func:`measure` in a process with ``checkout`` first on the path."""
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--dump", tmp.name,
               "--perms", str(args.perms), "--orders", str(args.orders)]
        cmd += ["--digests-only"] if digests_only else []
        subprocess.run([*cmd, *files], env=env, check=True, cwd=checkout)
        return json.loads(Path(tmp.name).read_text())


def cell(name: str, a: list[float], b: list[float]) -> str:
    """``name before -> after`` (means), with the sign test where paired."""
    from smroute.study.signtest import sign_test

    ma, mb = sum(a) / len(a), sum(b) / len(b)
    if len(a) == 1:
        return f"{name} {ma:g} -> {mb:g}"
    worse = sum(1 for x, y in zip(a, b, strict=True) if y > x)
    better = sum(1 for x, y in zip(a, b, strict=True) if y < x)
    return f"{name} {ma:.3f} -> {mb:.3f} (p {sign_test(worse, better):.2g})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--before", type=Path, help="a checkout of the code before")
    ap.add_argument("--perms", type=int, default=300, help="random permutations for RP")
    ap.add_argument("--orders", type=int, default=20, help="random host orders for HSD")
    ap.add_argument("--dump", help=argparse.SUPPRESS)
    ap.add_argument("--digests-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    files = [str(Path(f).resolve()) for f in args.files]
    if args.dump:
        Path(args.dump).write_text(json.dumps(measure(files, args.perms, args.orders,
                                                      args.digests_only)))
        return
    if args.before is None:
        ap.error("--before DIR is required")
    a = side(args.before.resolve(), args, files, True)
    b = side(ROOT, args, files, True)
    changed = [f for f in files if a[f]["digest"] != b[f]["digest"]]
    print(f"{len(changed)} of {len(files)} fabrics change tables")
    if not changed:
        return
    a, b = side(args.before.resolve(), args, changed, False), side(ROOT, args, changed, False)
    for f in changed:
        cells = [cell(k, a[f][k], b[f][k]) for k in a[f] if k != "digest" and a[f][k] != b[f][k]]
        print(f"{Path(f).name}: {'; '.join(cells) or 'the same figures'}")


if __name__ == "__main__":
    main()
