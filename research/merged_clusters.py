#!/usr/bin/env python3
"""Two leaf/spine clusters joined at their spines: every spine of cluster A
cabled to every spine of cluster B (a site that merged a second cluster
into its fabric).  B's spines rank as the tops, A's spines below them, and
B's leaves are ranked apart (their cables skip a rank): the case of
``smroute/routing/nmodc/entries.py``'s tops.

Writes 24 such sites (eight sizes, each complete and with 3 and 8 random
cables cut), and 6 of two three-level trees joined at their cores (three
sizes, complete and with 4 cables cut: the smaller tree's spines are the
tops and its leaves are ranked apart below them), aggregation nodes on
every switch, hosts named in cabling order, as ibnetdiscover text into
``DIR``, for the side by side with OpenSM and the code before:

    .venv/bin/python research/merged_clusters.py DIR
    .venv/bin/python bench/real_fabrics.py --catalogue --no-shapes --real DIR \\
        --engines smroute smroute-vls ftree updn dnup minhop dfsssp sssp nue
    PYTHONPATH=. .venv/bin/python research/ab_metrics.py --before CHECKOUT DIR/*.topo
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
    QUANTUM,
    SPEED,
    Plan,
    add_hosts,
    build,
    per_leaf,
    pod_leaves,
    pod_spines,
)

from smroute.fabric.export.writers import write_topology  # noqa: E402
from smroute.fabric.generate.catalogue import core_tier  # noqa: E402
from smroute.fabric.generate.sitegen import Site  # noqa: E402

#: (A's leaves, A's spines, B's leaves, B's spines, hosts a leaf in A and
#: in B, cables between two spines, cables between a leaf and a spine)
SIZES = [
    (8, 4, 6, 3, 16, 16, 1, 1),
    (10, 5, 10, 5, 16, 16, 1, 1),
    (12, 6, 6, 3, [16, 18, 20, 14], [12, 16, 10], 1, 1),
    (16, 8, 8, 4, 16, 16, 1, 2),
    (18, 6, 9, 3, 20, 20, 2, 1),
    (24, 8, 12, 4, 18, 18, 1, 1),
    (20, 8, 6, 3, 16, 16, 1, 1),
    (8, 4, 8, 6, 16, 16, 1, 1),
]
CUTS = (0, 3, 8)
#: (A's pods' leaves, B's, hosts a leaf, spines a pod, cores per spine index)
THREE_LEVEL = [([4, 4, 4], [4, 4], 16, 4, 1), ([6, 6], [4], 12, 4, 2),
               ([5, 5, 5, 5], [5, 5], 12, 5, 1)]
THREE_LEVEL_CUTS = (0, 4)


def merged(la: int, sa: int, lb: int, sb: int, hosts_a: int | list[int],
           hosts_b: int | list[int], join: int = 1, cables: int = 1,
           radix: int = 40) -> Plan:
    """Cluster A (``la`` leaves under ``sa`` spines) and B (``lb`` under
    ``sb``), each spine of A cabled ``join`` times to each spine of B."""
    site = Site(speed=SPEED[QUANTUM], host_device=CONNECTX6)
    spines: list[list[int]] = []
    for c, n_leaves, n_spines, hosts, start in (("a", la, sa, hosts_a, 0),
                                                ("b", lb, sb, hosts_b, la)):
        leaves = site.switches([f"MF0;{c}-leaf{i + 1:02d}:MQM/U1" for i in range(n_leaves)],
                               radix, QUANTUM)
        add_hosts(site, leaves, per_leaf(hosts, n_leaves), "std", start)
        spines += pod_spines(site, [leaves], n_spines, cables, radix, QUANTUM, prefix=c)
    for a in spines[0]:
        for b in spines[1]:
            site.cable(a, b, join)
    return Plan(site, [])


def merged_three_level(pods_a: list[int], pods_b: list[int], hosts: int, spines: int,
                       cores_per: int, radix: int = 40) -> Plan:
    """Two three-level trees (pods of leaves under ``spines`` spines, spine
    ``j`` of every pod cabled to the ``cores_per`` cores of index ``j``),
    every core of A cabled to every core of B."""
    site = Site(speed=SPEED[QUANTUM], host_device=CONNECTX6)
    cores, start = [], 0
    for c, pods in (("a", pods_a), ("b", pods_b)):
        groups = pod_leaves(site, pods, hosts, radix, QUANTUM, prefix=c, start=start)
        start += sum(pods)
        spine_sets = pod_spines(site, groups, spines, 1, radix, QUANTUM, prefix=c)
        cores.append(core_tier(site, spine_sets, cores_per, 1, radix, QUANTUM, f"MQM-{c}"))
    for a in cores[0]:
        for b in cores[1]:
            site.cable(a, b)
    return Plan(site, [])


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for size in SIZES:
        la, sa, lb, sb, _, _, join, cables = size
        name = f"merged-{la}x{sa}-{lb}x{sb}-j{join}-c{cables}"
        for cut in CUTS:
            write_topology(build(merged(*size), seed=7, links=cut), out / f"{name}-cut{cut}.topo")
    for pods_a, pods_b, hosts, spines, cores_per in THREE_LEVEL:
        name = (f"merged3-{'-'.join(map(str, pods_a))}_{'-'.join(map(str, pods_b))}"
                f"-s{spines}c{cores_per}")
        for cut in THREE_LEVEL_CUTS:
            plan = merged_three_level(pods_a, pods_b, hosts, spines, cores_per)
            write_topology(build(plan, seed=3, links=cut), out / f"{name}-cut{cut}.topo")
    return 0


if __name__ == "__main__":
    sys.exit(main())
