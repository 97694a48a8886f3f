#!/usr/bin/env python3
"""Nmodc on leaves in uneven bundles (:mod:`smroute.routing.nmodc.bundles`:
the spread of leaves with a shortcut, the weighted ways up from the leaves
and the skewed one from the line switches, the weighted way down, the
shortcuts through the deal) on and off, on fabrics whose leaves reach
directors' line switches over uneven bundles (an investigation, not the
product).

Each fabric is routed by the default two ways, the mode chain included: as
the product does (``on``) and without them (``off``: no leaf has a
shortcut).  Per way: the mode, the needed pairs left, credit-loop freedom,
the table entries that differ from ``off`` and the catalogue bench's
metrics over compute hosts (``bench/site_compare.table_metrics``: SP / A2A
/ RP / shift HSD in GUID order, SP and HSD in host-name order).
``--interleave`` adds the other end of the trade: every leaf deals every
destination off it over all its up cables by NID (on the ``on`` tables,
where the cable's switch has an up*/down* path).

The fabrics: files given, or ``--sweep K``: K sites of
:func:`~smroute.fabric.generate.catalogue.bundles_to_directors` (2-4
directors, 24-120 leaves of 18 hosts, 14-18 up cables a leaf in bundles of 1 to 4-6
cables to 3-6 / 5-9 line ASICs, with and without UFM and storage on line
ASICs), drawn with ``--seed``.  ``--summary`` prints, per metric, on how
many fabrics ``on`` is below / above ``off`` and the sign test.

    .venv/bin/python research/leaf_shortcuts.py FABRIC ... [--interleave]
    .venv/bin/python research/leaf_shortcuts.py --sweep 24 --summary
    .venv/bin/python research/leaf_shortcuts.py --sweep 24 --write DIR
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from site_compare import table_metrics  # noqa: E402

from smroute.cli.inputs import load_fabric  # noqa: E402
from smroute.fabric.export.writers import format_topology  # noqa: E402
from smroute.fabric.generate.catalogue import Shape, build, bundles_to_directors  # noqa: E402
from smroute.fabric.generate.sitegen import CONNECTX5, SWITCHIB  # noqa: E402
from smroute.fabric.model.arrays import Fabric  # noqa: E402
from smroute.fabric.model.base import FabricError  # noqa: E402
from smroute.routing.dmodc import INF, Destinations  # noqa: E402
from smroute.routing.engine import route  # noqa: E402
from smroute.routing.nmodc import shortcuts  # noqa: E402
from smroute.routing.runs import runs  # noqa: E402
from smroute.routing.topology import SwitchGraph  # noqa: E402
from smroute.study.signtest import sign_test  # noqa: E402

METRICS = ("sp", "a2a", "rp", "hsd", "sp_name", "hsd_name")
_LEAVES = shortcuts.shortcut_leaves


def _way(name: str) -> None:
    """Route the next fabrics the way ``name`` (module doc)."""
    shortcuts.shortcut_leaves = (  # type: ignore[assignment]
        (lambda g, c: np.zeros(0, dtype=np.int64)) if name == "off" else _LEAVES)


def restore() -> None:
    """The product's own function back."""
    shortcuts.shortcut_leaves = _LEAVES  # type: ignore[assignment]


def interleaved(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray) -> None:
    """Every leaf deals every destination off it over all its up cables
    (one cable of each group in turn) by NID, where the cable's switch has
    an up*/down* path to it (else the entry stays)."""
    for s in np.flatnonzero(g.is_leaf).tolist():
        ks = np.arange(g.grp_first[s], g.grp_first[s] + g.grp_count[s])
        ks = ks[g.rank[g.grp_remote[ks]] > g.rank[s]]
        which, at = runs(g.grp_port_first[ks], g.grp_port_count[ks])
        place = at - g.grp_port_first[ks][which]
        o = np.lexsort((which, place))
        cable, upper = g.grp_ports[at][o], g.grp_remote[ks][which][o]
        off = np.flatnonzero(dest.target != s)
        if not len(cable) or not len(off):
            continue
        pick = dest.nid[off] % len(cable)
        ok = c[upper[pick], dest.target[off]] < INF
        ports[s, dest.lid[off[ok]]] = cable[pick[ok]]


def measured(f: Fabric, r: Any, ports: np.ndarray | None = None) -> dict[str, Any]:
    tables = r.tables if ports is None else dataclasses.replace(r.tables, ports=ports)
    m = table_metrics(f, tables, r.roles, r.lanes, seed=1, rp_samples=300)
    s = m["sets"]["compute"]
    return {"mode": r.mode, "left": m["missing_needed"], "loop_free": m["credit_loop_free"],
            "sp": s["guid"]["sp"], "a2a": s["a2a"], "rp": s["guid"]["rp"],
            "hsd": s["guid"]["hsd"], "sp_name": s["name"]["sp"], "hsd_name": s["name"]["hsd"]}


def sweep(k: int, seed: int) -> list[tuple[str, Fabric]]:
    """``k`` generated sites (module doc)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < k:
        n_dir = int(rng.integers(2, 5))
        up = int(rng.choice([14, 16, 18]))
        leaves = int(rng.choice([24, 48, 80, 120]))
        line = 36 if leaves * up > n_dir * 12 * 18 * 0.8 else 12
        if leaves * up > n_dir * line * 18 * 0.85:
            continue
        spread = [(3, 6), (5, 9)][int(rng.integers(2))]
        most = int(rng.choice([4, 6]))
        svc = bool(rng.integers(2))
        s = int(rng.integers(1 << 30))
        name = (f"bundles-{n_dir}dir{line}-{leaves}x{up}-{spread[0]}_{spread[1]}-{most}"
                f"{'-svc' if svc else ''}-{s % 1000}")
        shape = Shape(name, name, "ibnetdiscover", s, bundles_to_directors(
            "CS7500" if line == 36 else "CS7520", n_dir, line, line // 2, 36, SWITCHIB, leaves,
            18, up, spread, most, "SB7800", "cn", 2 if svc else 0, 8 if svc else 0, s),
            "EDR", CONNECTX5)
        try:
            out.append((name, build(shape)))
        except FabricError:  # no room left on the line ASICs for some bundle
            continue
    return out


def ways(name: str, f: Fabric, interleave: bool, vls: int = 1) -> dict[str, dict[str, Any]]:
    """``f`` routed the two ways (module doc), printed as they come."""
    got: dict[str, dict[str, Any]] = {}
    r = off = None
    for way in ("off", "on"):
        _way(way)
        r = route(f, workers=1, max_vls=vls)
        off = r if off is None else off
        changed = int((r.tables.ports != off.tables.ports).sum())
        got[way] = {**measured(f, r), "changed": changed}
        print(f"{name} {way}: {got[way]}", flush=True)
    if interleave and r is not None:
        ports = r.tables.ports.copy()
        interleaved(r.graph, r.costs, r.dest, ports)
        print(f"{name} interleaved: {measured(f, r, ports)}", flush=True)
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fabrics", nargs="*")
    ap.add_argument("--sweep", type=int, default=0, help="this many generated sites")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--interleave", action="store_true", help="also the interleaved deal")
    ap.add_argument("--vls", type=int, default=1, help="data VLs (as route's max_vls)")
    ap.add_argument("--summary", action="store_true", help="per metric: on against off")
    ap.add_argument("--write", metavar="DIR", help="only write the sweep's fabrics here "
                    "(ibnetdiscover text, for bench/real_fabrics.py --catalogue --no-shapes "
                    "--real DIR)")
    args = ap.parse_args()
    fabrics = [(Path(fn).name, load_fabric(fn)) for fn in args.fabrics] + sweep(args.sweep,
                                                                               args.seed)
    if args.write:
        Path(args.write).mkdir(parents=True, exist_ok=True)
        for name, f in fabrics:
            (Path(args.write) / f"{name}.topo").write_text("\n".join(format_topology(f)) + "\n")
        return
    try:
        rows = [ways(name, f, args.interleave, args.vls) for name, f in fabrics]
    finally:
        restore()
    if args.summary:
        for m in METRICS:
            d = np.array([row["on"][m] - row["off"][m] for row in rows], dtype=float)
            lo, hi = int((d < -1e-9).sum()), int((d > 1e-9).sum())
            p = sign_test(lo, hi)
            print(f"{m}: on below off on {lo}, above on {hi}, equal on {len(d) - lo - hi} "
                  f"(sign test p {p:.3g}); mean change {d.mean():+.3f}")


if __name__ == "__main__":
    main()
