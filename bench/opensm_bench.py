"""Benchmark: from a fabric change to the new tables in the switches, through
the real chain (ibsim + OpenSM file engine + smroute serve + smroute opensm-bridge).

For each fabric: start the chain (smroute.lab.harness.OpenSMChain), then
``--cuts`` times cut a random leaf up-link (seeded) and relink it, and cut and
relink one random spine switch.  Every change is checked (the switches hold the
daemon's epoch, read back with dump_fts).  Prints the machine, per change the
seconds from the ibsim console command to OpenSM's REROUTE COMPLETE, the steps
in between, the LFT blocks rewritten, and medians.

    .venv/bin/python bench/opensm_bench.py [--cuts 5] [--big | --sizes 256 1024 4096]
                                           [--seed 1] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import numpy as np
from benchinfo import machine

from smroute.fabric.generate.trees import pgft
from smroute.fabric.roles import fabric_roles
from smroute.fileio import atomic_write_text
from smroute.interrupts import sigterm_interrupts
from smroute.lab.harness import ChangeFigures, OpenSMChain

SHAPES = {
    "256": ("PGFT(3;8,4,8;1,4,4;1,1,1)", (3, (8, 4, 8), (1, 4, 4), (1, 1, 1))),
    "1024": ("PGFT(3;8,8,16;1,8,8;1,1,1)", (3, (8, 8, 16), (1, 8, 8), (1, 1, 1))),
    "4096": ("PGFT(3;16,16,16;1,16,16;1,1,1)", (3, (16, 16, 16), (1, 16, 16), (1, 1, 1))),
}
SNIPPET = Path(__file__).resolve().parents[1] / "deploy" / "opensm.conf.snippet"


def run(name: str, cuts: int, seed: int, debounce: float,
        port_guids: bool = True) -> dict[str, object]:
    label, (h, m, w, p) = SHAPES[name]
    fabric = pgft(h, list(m), list(w), list(p))
    rng = np.random.default_rng(seed)
    rank = fabric_roles(fabric).rank
    leaves = fabric.switches[rank[fabric.switches] == 0]
    spines = fabric.switches[rank[fabric.switches] == rank.max()]
    figs: list[ChangeFigures] = []
    with tempfile.TemporaryDirectory(prefix="smroute-opensm-bench-") as tmp:
        chain = OpenSMChain(fabric, Path(tmp), SNIPPET.read_text(), debounce=debounce,
                            port_guids=port_guids)
        try:
            held = chain.start(timeout=600)
            print(f"{label}: {len(fabric.cas)} hosts, {len(fabric.switches)} switches; "
                  f"chain up in {chain.startup['first_epoch_in_switches_s']:.1f} s", flush=True)
            changes = []
            for _ in range(cuts):
                leaf = int(rng.choice(leaves))
                n_hosts = int(m[0])
                port = int(rng.integers(n_hosts + 1, int(fabric.num_ports[leaf]) + 1))
                ref = f'"S-{int(fabric.node_guid[leaf]):016x}"[{port}]'
                changes += [(f"Unlink {ref}", "link_cut"), (f"ReLink {ref}", "link_back")]
            spine = f'"S-{int(fabric.node_guid[int(rng.choice(spines))]):016x}"'
            changes += [(f"Unlink {spine}", "spine_cut"), (f"ReLink {spine}", "spine_back")]
            for cmd, kind in changes:
                f, held, _ = chain.change(cmd, held, kind, timeout=300)
                figs.append(f)
                st = f.steps
                print(f"  {kind:10s} {f.seconds_to_tables_in_switches:6.3f} s  "
                      f"{f.lft_blocks_rewritten:5d} blocks  discovery "
                      f"{st['bridge_discovery']} s; at: OpenSM sweep done "
                      f"{st['opensm_heavy_sweep_done']}, faults applied "
                      f"{st['faults_applied_by_daemon']}, file written "
                      f"{st['file_written_and_reroute_sent']} s", flush=True)
        finally:
            chain.stop()
    out: dict[str, object] = {"fabric": label, "hosts": len(fabric.cas),
                              "switches": len(fabric.switches), "debounce_s": debounce,
                              "port_guids": port_guids}
    for kind in ("link_cut", "link_back", "spine_cut", "spine_back"):
        sel = [f for f in figs if f.label == kind]
        out[kind] = {
            "n": len(sel),
            "median_s": round(statistics.median(f.seconds_to_tables_in_switches for f in sel), 3),
            "max_s": round(max(f.seconds_to_tables_in_switches for f in sel), 3),
            "median_blocks": statistics.median(f.lft_blocks_rewritten for f in sel),
            "median_discovery_s": round(statistics.median(
                float(f.steps["bridge_discovery"] or 0) for f in sel), 3),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuts", type=int, default=5, help="link cuts (and relinks) per fabric")
    ap.add_argument("--big", action="store_true", help="also the 1,024-host PGFT")
    ap.add_argument("--sizes", nargs="+", choices=sorted(SHAPES), metavar="HOSTS",
                    help=f"fabrics by host count ({', '.join(SHAPES)}); overrides --big")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--debounce", type=float, default=0.3, help="the bridge's debounce (s)")
    ap.add_argument("--no-port-guids", action="store_true",
                    help="the bridge writes the bare file (no per-LID port GUIDs)")
    ap.add_argument("--json", metavar="FILE", help="write the results here")
    args = ap.parse_args()
    print(f"Machine: {machine()}")
    sizes = args.sizes or (["256", "1024"] if args.big else ["256"])
    results = [run(n, args.cuts, args.seed, args.debounce, not args.no_port_guids)
               for n in sizes]
    for r in results:
        print(json.dumps(r))
    if args.json:
        atomic_write_text(args.json, json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    with sigterm_interrupts():
        main()
