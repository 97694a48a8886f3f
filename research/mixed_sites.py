#!/usr/bin/env python3
"""Production shapes with two kinds of leaf or pod in one tree, which
neither the catalogue nor the sweep has:

* ``taper``: a leaf/spine whose CPU leaves are tapered (cabled to the
  first half of the spines only) beside GPU leaves cabled to every spine,
  as a site that runs a non-blocking GPU partition and a 2:1 CPU
  partition on the same spines;
* ``dirmix``: one director with compute hosts on some of its line ASICs
  and edge leaves cabled to the others (a director-only cluster grown
  with edge switches);
* ``podspines``: a three-level tree whose pods have different numbers of
  spines (an older pod of 4 spines, newer ones of 8), each spine cabled to
  the cores of its share of the core indices;
* ``unequal``: leaves cabled to two directors with different cable counts
  (a second director added later with fewer cables);
* ``mixspine``: a leaf/spine grown with bigger spines, leaves cabled once
  to each old spine and two or three times to each new one;
* ``mixcore``: a three-level tree grown with bigger cores, each spine
  cabled once to each old core and twice to each new one;
* ``mixleaf``: a leaf/spine grown with bigger spines whose last leaves,
  added later, are cabled once to the new spines too.

Each at three sizes, complete and with 4 cables cut (``mixspine`` at 8
sizes and ``mixcore`` at 3, complete and with 2, 6 and 12 cut),
aggregation nodes on every
switch, written as ibnetdiscover text into ``DIR``:

    .venv/bin/python research/mixed_sites.py DIR
    .venv/bin/python bench/real_fabrics.py --catalogue --no-shapes --real DIR \\
        --engines smroute smroute-vls ftree updn dnup minhop dfsssp sssp nue
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (HERE.parent, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from unseen_sweep import (  # noqa: E402
    CONNECTX6,
    KINDS,
    QUANTUM,
    SPEED,
    SWITCHIB,
    Plan,
    add_director,
    add_hosts,
    build,
    per_leaf,
)

from smroute.fabric.export.writers import write_topology  # noqa: E402
from smroute.fabric.generate.sitegen import Site  # noqa: E402


def taper(cpu: int, gpu: int, spines: int, cpu_hosts: int, gpu_hosts: int,
          cables: int = 1, radix: int = 40) -> Plan:
    """``cpu`` leaves cabled ``cables`` times to the first half of the
    spines, ``gpu`` leaves to every spine."""
    site = Site(speed=SPEED[QUANTUM], host_device=CONNECTX6)
    cl = site.switches([f"MF0;cpu-leaf{i + 1:02d}:MQM/U1" for i in range(cpu)], radix, QUANTUM)
    gl = site.switches([f"MF0;gpu-leaf{i + 1:02d}:MQM/U1" for i in range(gpu)], radix, QUANTUM)
    add_hosts(site, cl, per_leaf(cpu_hosts, cpu), "std")
    add_hosts(site, gl, per_leaf(gpu_hosts, gpu), "std", cpu)
    sp = site.switches([f"MF0;spine{j + 1:02d}:MQM/U1" for j in range(spines)], radix, QUANTUM)
    for leaf in cl:
        for s in sp[:spines // 2]:
            site.cable(leaf, s, cables)
    for leaf in gl:
        for s in sp:
            site.cable(leaf, s, cables)
    return Plan(site, [])


def dirmix(kind: str, host_asics: int, per_asic: int, leaves: int, leaf_hosts: int,
           cables: int) -> Plan:
    """One director: ``per_asic`` hosts on each of its first ``host_asics``
    line ASICs; ``leaves`` edge leaves with ``cables`` single cables each,
    dealt round the other line ASICs."""
    _, _, _, radix, dev = KINDS[kind]
    site = Site(speed=SPEED[dev], host_device=CONNECTX6)
    d = add_director(site, 0, kind)
    add_hosts(site, d.line[:host_asics], per_leaf(per_asic, host_asics), "std")
    lv = site.switches([f"MF0;leaf{i + 1:03d}:MQM/U1" for i in range(leaves)], radix, dev)
    add_hosts(site, lv, per_leaf(leaf_hosts, leaves), "std", host_asics)
    free = d.line[host_asics:]
    k = 0
    for leaf in lv:
        for _ in range(cables):
            site.cable(leaf, free[k % len(free)])
            k += 1
    return Plan(site, [])


def podspines(pods: list[tuple[int, int]], hosts: int, cores: int, radix: int = 40) -> Plan:
    """Pods of (leaves, spines): every leaf has 8 up cables, spread over its
    pod's spines; spine ``j`` of a pod of ``s`` spines cabled to the cores
    ``j * cores / s`` up to ``(j + 1) * cores / s``, as many cables up as
    down."""
    site = Site(speed=SPEED[SWITCHIB], host_device=CONNECTX6)
    cr = site.switches([f"MF0;core{j + 1:02d}:MSB/U1" for j in range(cores)], radix, SWITCHIB)
    start = 0
    for g, (n, s) in enumerate(pods):
        lv = site.switches([f"MF0;p{g + 1}-leaf{i + 1:02d}:MSB/U1" for i in range(n)],
                           radix, SWITCHIB)
        add_hosts(site, lv, per_leaf(hosts, n), "std", start)
        start += n
        sp = site.switches([f"MF0;p{g + 1}-spine{j + 1:02d}:MSB/U1" for j in range(s)],
                           radix, SWITCHIB)
        for leaf in lv:
            for x in sp:
                site.cable(leaf, x, max(1, 8 // s))
        per = cores // s
        for j, x in enumerate(sp):
            for c in cr[j * per:(j + 1) * per]:
                site.cable(x, c, n * max(1, 8 // s) // per)
    return Plan(site, [])


def unequal(leaves: int, hosts: int, kinds: list[str], cables: list[int]) -> Plan:
    """Leaves cabled ``cables[k]`` times to director ``k`` (a second
    director added later with fewer cables)."""
    _, _, _, radix, dev = KINDS[kinds[0]]
    site = Site(speed=SPEED[dev], host_device=CONNECTX6)
    lv = site.switches([f"MF0;leaf{i + 1:03d}:MQM/U1" for i in range(leaves)], radix, dev)
    add_hosts(site, lv, per_leaf(hosts, leaves), "std")
    dirs = [add_director(site, k, kd) for k, kd in enumerate(kinds)]
    for leaf in lv:
        for d, c in zip(dirs, cables, strict=True):
            site.cable_director(leaf, d, c)
    return Plan(site, [])


def mixspine(leaves: int, hosts: int, old: int, new: int, new_cables: int,
             late: int = 0) -> Plan:
    """Leaf/spine grown with bigger spines: one cable from each leaf to
    each of ``old`` 40-port spines, ``new_cables`` to each of ``new``
    64-port ones (one from each of the last ``late`` leaves)."""
    site = Site(speed=SPEED[QUANTUM], host_device=CONNECTX6)
    lv = site.switches([f"MF0;leaf{i + 1:03d}:MQM/U1" for i in range(leaves)], 40, QUANTUM)
    add_hosts(site, lv, per_leaf(hosts, leaves), "std")
    sp = site.switches([f"MF0;spine{j + 1:02d}:MQM/U1" for j in range(old)], 40, QUANTUM)
    sp2 = site.switches([f"MF0;nspine{j + 1:02d}:MQM9700/U1" for j in range(new)], 64, QUANTUM)
    for i, leaf in enumerate(lv):
        for s in sp:
            site.cable(leaf, s)
        for s in sp2:
            site.cable(leaf, s, 1 if i >= leaves - late else new_cables)
    return Plan(site, [])


def mixcore(pods: int, leaves: int, spines: int, hosts: int, old: int, new: int) -> Plan:
    """``pods`` pods of ``leaves`` leaves of ``hosts`` hosts under
    ``spines`` spines, each leaf cabled twice to each spine; each spine
    cabled once to each of ``old`` 40-port cores and twice to each of
    ``new`` 64-port ones."""
    site = Site(speed=SPEED[QUANTUM], host_device=CONNECTX6)
    cr = site.switches([f"MF0;core{j + 1:02d}:MQM/U1" for j in range(old)], 40, QUANTUM)
    cr2 = site.switches([f"MF0;ncore{j + 1:02d}:MQM9700/U1" for j in range(new)], 64, QUANTUM)
    start = 0
    for g in range(pods):
        lv = site.switches([f"MF0;p{g + 1}-leaf{i + 1:02d}:MQM/U1" for i in range(leaves)],
                           40, QUANTUM)
        add_hosts(site, lv, per_leaf(hosts, leaves), "std", start)
        start += leaves
        sp = site.switches([f"MF0;p{g + 1}-spine{j + 1:02d}:MQM/U1" for j in range(spines)],
                           40, QUANTUM)
        for leaf in lv:
            for x in sp:
                site.cable(leaf, x, 2)
        for x in sp:
            for c in cr:
                site.cable(x, c)
            for c in cr2:
                site.cable(x, c, 2)
    return Plan(site, [])


#: mixcore sizes: (pods, leaves a pod, spines a pod, hosts a leaf, old cores, new cores)
MIXCORE = [(3, 8, 4, 16, 8, 4), (4, 6, 3, 12, 4, 4), (3, 10, 5, 14, 8, 3)]

#: mixspine sizes: (leaves, hosts a leaf, old spines, new spines, cables to a new one)
MIXSPINE = [(12, 16, 4, 2, 2), (16, 18, 6, 2, 2), (20, 16, 4, 4, 2), (24, 18, 6, 3, 2),
            (18, 20, 4, 4, 3), (10, 12, 2, 2, 2), (14, 20, 8, 2, 2), (28, 16, 4, 2, 2)]
#: mixspine damage: (cables cut, seed)
MIXSPINE_CUTS = [(0, 21), (2, 11), (6, 12), (12, 13)]


def plans() -> list[tuple[str, Plan]]:
    return [
        ("taper-8c8g-s8", taper(8, 8, 8, 18, 8)),
        ("taper-12c6g-s10", taper(12, 6, 10, 20, 10)),
        ("taper-16c16g-s16", taper(16, 16, 16, 24, 16)),
        ("dirmix-cs7510-10a-8l", dirmix("cs7510", 10, 18, 8, 18, 8)),
        ("dirmix-cs7500-20a-24l", dirmix("cs7500", 20, 18, 24, 18, 12)),
        ("dirmix-cs8500-16a-20l", dirmix("cs8500", 16, 20, 20, 20, 16)),
        ("podspines-8x4_8x8_8x8-c8", podspines([(8, 4), (8, 8), (8, 8)], 16, 8)),
        ("podspines-6x4_10x8-c8", podspines([(6, 4), (10, 8)], 16, 8)),
        ("podspines-8x4_8x4_12x8_12x8-c8", podspines([(8, 4), (8, 4), (12, 8), (12, 8)], 16, 8)),
        ("unequal-2xcs7510-16l-6c3", unequal(16, 18, ["cs7510", "cs7510"], [6, 3])),
        ("unequal-2xcs7500-32l-12c6", unequal(32, 18, ["cs7500", "cs7500"], [12, 6])),
        ("unequal-cs8500-cs7510-24l-10c5", unequal(24, 20, ["cs8500", "cs7510"], [10, 5])),
        ("mixleaf-16l4-16h-4o-2n", mixspine(16, 16, 4, 2, 2, late=4)),
        ("mixleaf-20l4-18h-6o-2n", mixspine(20, 18, 6, 2, 2, late=4)),
        ("mixleaf-24l8-16h-4o-4n", mixspine(24, 16, 4, 4, 2, late=8)),
    ]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, plan in plans():
        for cut in (0, 4):
            write_topology(build(plan, seed=5, links=cut), out / f"{name}-cut{cut}.topo")
    for leaves, hosts, old, new, c in MIXSPINE:
        plan = mixspine(leaves, hosts, old, new, c)
        for cut, seed in MIXSPINE_CUTS:
            write_topology(build(plan, seed=seed, links=cut),
                           out / f"mixspine-{leaves}l-{hosts}h-{old}o-{new}n{c}-cut{cut}.topo")
    for pods, leaves, spines, hosts, old, new in MIXCORE:
        plan = mixcore(pods, leaves, spines, hosts, old, new)
        for cut, seed in MIXSPINE_CUTS:
            write_topology(build(plan, seed=seed, links=cut), out / (
                f"mixcore-{pods}x{leaves}l{spines}s-{hosts}h-{old}o-{new}n-cut{cut}.topo"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
