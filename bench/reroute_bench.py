"""Benchmark: daemon-side reroute time after one link failure.

Runs the daemon's core (smroute.service.core.RoutingCore: the same code
path ``smroute serve`` runs, without the gRPC transport) on the 11,664-host
PGFT(3;18,18,36;1,18,18;1,1,1), routes it once, then per run takes one
switch-to-switch link down (alternating leaf-L2 and L2-spine links) and brings
it back up, each as one ApplyFaults batch.  The figure is the epoch's
``event_to_commit``: from the event's arrival at the core to the committed
epoch with its diff (coalescing window 0 here; the daemon's default adds
``coalesce_ms`` = 20 ms).  Median of ``--runs``, after as many warm-up runs
as the daemon keeps epochs (8): until its history is full, every commit
grows the heap and page-faults, up to twice as slow (the first link down
and the warm-up median are printed too).  The background validation walk is
disabled so runs do not overlap with it.

After the timed runs, the served tables of a degraded state are compared with a
from-scratch route of that fabric (must be identical).

    .venv/bin/python bench/reroute_bench.py [--runs 7] [--workers 2] [--full] [--grpc]
        [--algorithm dmodc|nmodc] [--switches] [--remove-links N]

``--full`` also times the non-incremental path (full route + full diff);
``--remove-links N`` starts from the tree with N random switch-to-switch links
removed (seed 1), as ``route_bench.py`` does.  ``--switches`` also takes
``--runs`` leaves and as many upper switches down and up again (a switch set
change: the full route and the full diff; a leaf's loss renumbers the
end-ports after it, so most of the tables change).
``--grpc`` instead starts a real ``smroute serve`` (loopback, ``--coalesce-ms
0``, background validation on) on the same tree written as an ibnetdiscover
file, and reports per link down the daemon-side ``event_to_commit``, the whole
ApplyFaults call as the client sees it, the ``since_epoch`` delta stream, and
the time of a full GetTables stream (checksum verified).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from benchinfo import machine

from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import fabric_roles
from smroute.interrupts import sigterm_interrupts
from smroute.routing.api import DEFAULT
from smroute.routing.engine import route
from smroute.service.core import RoutingCore
from smroute.service.sequencer import FaultEvent
from smroute.tables.diff import diff_tables


def _links(f: Fabric, n: int) -> list[tuple[int, int, int]]:
    """``n`` switch-to-switch links, alternating leaf-L2 / L2-spine: (link, guid, port)."""
    sw = f.node_type == NodeType.SWITCH
    inter = np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])
    # a switch's level: CAs attached -> leaf; else by description digit (PGFT naming)
    has_ca = np.zeros(f.n_nodes, bool)
    ca_links = ~sw[f.port_node[f.link_a]] | ~sw[f.port_node[f.link_b]]
    for arr in (f.link_a, f.link_b):
        has_ca[f.port_node[arr[ca_links]]] = True
    leaf_link = has_ca[f.port_node[f.link_a[inter]]] | has_ca[f.port_node[f.link_b[inter]]]
    rng = np.random.default_rng(7)
    a = rng.permutation(inter[leaf_link])
    b = rng.permutation(inter[~leaf_link])
    out = []
    for i in range(n):
        li = int((a if i % 2 == 0 else b)[i // 2])
        row = int(f.link_a[li])
        out.append((li, int(f.node_guid[f.port_node[row]]), int(f.port_num[row])))
    return out


def _switches(f: Fabric, n: int) -> list[tuple[int, bool]]:
    """``n`` switches, alternating leaves and upper switches: (GUID, is a leaf)."""
    sw = f.node_type == NodeType.SWITCH
    leaf = fabric_roles(f).rank == 0  # (rank 0: the switches' leaves)
    rng = np.random.default_rng(7)
    kinds = [rng.permutation(np.flatnonzero(sw & m)) for m in (leaf, ~leaf)]
    return [(int(f.node_guid[kinds[i % 2][i // 2]]), i % 2 == 0) for i in range(n)]


def _run_switches(core: RoutingCore, switches: list[tuple[int, bool]]) -> None:
    """Each switch down, then up again, as one ApplyFaults batch each (a
    switch set change: always the full route and the full diff)."""
    for is_leaf in (True, False):
        down, up, entries = [], [], []
        for g, _ in [s for s in switches if s[1] == is_leaf]:
            out = core.apply_faults([FaultEvent("switch_down", g, 0)])
            assert out.committed and out.diff is not None
            down.append(out.epoch.timings["event_to_commit"])
            entries.append(out.diff.entries_changed)
            up.append(core.apply_faults([FaultEvent("switch_up", g, 0)]).epoch.timings[
                "event_to_commit"])
        print(f"{'leaf' if is_leaf else 'upper'} switch down -> committed epoch: median "
              f"{statistics.median(down):.3f} s (min {min(down):.3f}, max {max(down):.3f}), "
              f"up {statistics.median(up):.3f} s, over {len(down)} switches; "
              f"{int(statistics.median(entries))} entries changed (median)")


def _run(core: RoutingCore, links: list[tuple[int, int, int]]) -> dict[str, list[float]]:
    res: dict[str, list[float]] = {"down": [], "up": [], "down_call": [], "entries": [],
                                   "blocks": [], "cpu": []}
    for _, g, p in links:
        t = time.perf_counter()
        out = core.apply_faults([FaultEvent("link_down", g, p)])
        res["down_call"].append(time.perf_counter() - t)
        assert out.committed and out.diff is not None
        res["down"].append(out.epoch.timings["event_to_commit"])
        res["cpu"].append(out.epoch.timings["cpu"])
        res["entries"].append(out.diff.entries_changed)
        res["blocks"].append(out.diff.blocks_changed)
        back = core.apply_faults([FaultEvent("link_up", g, p)])
        res["up"].append(back.epoch.timings["event_to_commit"])
    return res


def _grpc(args: argparse.Namespace, f: Fabric, links: list[tuple[int, int, int]]) -> None:
    import os
    import tempfile
    from pathlib import Path

    from smroute.fabric.export.writers import write_topology
    from smroute.lab.processes import DaemonProcess
    from smroute.service.rpc.client import SmrouteClient, link_down, link_up

    with tempfile.TemporaryDirectory(prefix="smroute-bench-") as tmp:
        topo = Path(tmp) / "fabric.topo"
        write_topology(f, topo)
        root = Path(__file__).resolve().parent.parent
        daemon = DaemonProcess(
            None, Path(tmp) / "daemon", workers=args.workers, log_level="warning",
            extra_args=("--fabric", str(topo), "--coalesce-ms", "0"),
            env=dict(os.environ, PYTHONPATH=str(root)), cwd=root)
        try:
            addr = daemon.start(timeout=600)
            with SmrouteClient(addr) as c:
                # let the initial epoch's background validation walk finish first
                t = time.perf_counter()
                while c.get_epoch().validation.state == c.get_epoch().validation.PENDING:
                    time.sleep(0.2)
                v = c.get_epoch().validation
                print(f"background validation of the initial epoch ({v.pairs} walks) done "
                      f"{time.perf_counter() - t:.1f} s after serving: {v.summary}")
                full = []
                for _ in range(3):
                    t = time.perf_counter()
                    snap = c.tables()
                    full.append(time.perf_counter() - t)
                print(f"full GetTables stream ({snap.blocks} blocks, checksum verified): "
                      f"median {statistics.median(full):.2f} s of 3")
                side, call, delta, cpu = [], [], [], []
                for _, g, p in links:
                    t = time.perf_counter()
                    out = c.apply_faults([link_down(g, p)])
                    call.append(time.perf_counter() - t)
                    side.append(out.epoch.timings["event_to_commit"])
                    cpu.append(out.epoch.timings["cpu"])
                    t = time.perf_counter()
                    d = c.tables(since_epoch=out.epoch.parent_id)
                    delta.append(time.perf_counter() - t)
                    c.apply_faults([link_up(g, p)])
                print(f"link down over gRPC: daemon-side event->commit median "
                      f"{statistics.median(side):.3f} s (min {min(side):.3f}, max {max(side):.3f});"
                      f" ApplyFaults call median {statistics.median(call):.3f} s; since_epoch "
                      f"delta ({d.blocks} blocks) median {statistics.median(delta):.3f} s; "
                      f"{len(links)} runs; reroute thread CPU median "
                      f"{statistics.median(cpu):.3f} s")
        finally:
            daemon.stop(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--full", action="store_true", help="also time the full (non-incremental)"
                    " reroute")
    ap.add_argument("--grpc", action="store_true", help="through a real smroute serve process")
    ap.add_argument("--algorithm", choices=("dmodc", "nmodc"), default=DEFAULT,
                    help=f"the daemon's routing algorithm (default {DEFAULT}; not with --grpc)")
    ap.add_argument("--switches", action="store_true",
                    help="also time switches taken down and up (leaves and upper switches)")
    ap.add_argument("--remove-links", type=int, default=0, metavar="N",
                    help="start from the tree with N random switch-to-switch links removed")
    args = ap.parse_args()
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f} at start")
    f = pgft(3, [18, 18, 36], [1, 18, 18], [1, 1, 1])
    if args.remove_links:
        f, _ = degrade(f, np.random.default_rng(1), links=args.remove_links)
    print(f"fabric: PGFT(3;18,18,36;1,18,18;1,1,1): {len(f.cas)} hosts, {len(f.switches)} "
          f"switches, {f.n_links} links"
          + (f" ({args.remove_links} random switch-to-switch links removed, seed 1)"
             if args.remove_links else "") + f"; {args.workers} workers")
    links = _links(f, args.runs)
    if args.grpc:
        _grpc(args, f, links)
        return
    modes = [True, False] if args.full else [True]
    for inc in modes:
        core = RoutingCore(workers=args.workers, coalesce_s=0.0, validate_epochs=False,
                           incremental=inc, algorithm=args.algorithm)
        try:
            core.load_fabric(f, "pgft-11664")
            t = time.perf_counter()
            core.route()
            t_route = time.perf_counter() - t
            # the first commits grow the heap up to the epoch history's tables
            # (page faults on numpy's huge pages: up to 70 ms of system time a
            # phase); steady state is what a running daemon sees
            cold = _run(core, links[:1] * core.store.history)
            r = _run(core, links)
            name = (f"{args.algorithm}, "
                    + ("incremental" if inc else "full route + full diff"))
            print(f"\n[{name}] initial route {t_route:.3f} s; first link down after it "
                  f"{cold['down'][0]:.3f} s, then {core.store.history} down/up warm-up runs "
                  f"(median down {statistics.median(cold['down']):.3f} s) fill the "
                  f"{core.store.history}-epoch history")
            med = statistics.median(r["down"])
            print(f"link down -> committed epoch with diff: median {med:.3f}"
                  f" s (min {min(r['down']):.3f}, max {max(r['down']):.3f}) over {args.runs} runs;"
                  f" ApplyFaults call median {statistics.median(r['down_call']):.3f} s")
            print(f"  CPU seconds of the reroute thread per link down: median "
                  f"{statistics.median(r['cpu']):.3f} s (full path: plus the workers')")
            med = statistics.median(r["up"])
            print(f"link up   -> committed epoch with diff: median {med:.3f}"
                  f" s (min {min(r['up']):.3f}, max {max(r['up']):.3f})")
            print(f"diff per link down: {int(statistics.median(r['entries']))} entries, "
                  f"{int(statistics.median(r['blocks']))} LFT blocks (median)")
            ep = core.store.current
            assert ep is not None
            print("phases of the last link-up epoch: " + ", ".join(
                f"{k} {v * 1000:.1f} ms" for k, v in ep.timings.items()))
            if args.switches and inc:
                _run_switches(core, _switches(f, 2 * args.runs))
            # correctness: a degraded state equals a from-scratch route
            li, g, p = links[0]
            out = core.apply_faults([FaultEvent("link_down", g, p)])
            ref = route(f.with_removed(links=[li]), pool=core.pool, lmc=0,
                        algorithm=args.algorithm)
            same = diff_tables(out.epoch.tables, ref.tables).identical
            print(f"tables after link down identical to a from-scratch route: {same}")
            assert same
        finally:
            core.close()


if __name__ == "__main__":
    with sigterm_interrupts():
        main()
