"""Benchmark: kill -9 and restart the daemon under a steady fault-event load.

Starts a real ``smroute serve`` (:class:`smroute.lab.processes.DaemonProcess`)
on the 11,664-host PGFT(3;18,18,36;1,18,18;1,1,1) written as an ibnetdiscover
file, with a state database.  A client thread applies link down/up events
(one per ApplyFaults call, on a fixed set of switch-to-switch links, back to
back) and records every acknowledged call.  Each cycle lets the load run for
a random 0.5-2 s, kills the daemon's process group with SIGKILL, restarts it
on the same state database and measures the time from the process start to
the first GetEpoch answering (the resumed epoch, caught up with the
journal before the daemon serves).  Then it waits until the daemon's fault
set holds every acknowledged event, and counts

* lost events: acknowledged, but not in the daemon's fault set after the
  restart (must be 0); the call cut short by the kill was never answered, so
  its link may be either way;
* resumed mismatches: the resumed epoch is one the client saw acknowledged,
  but with another checksum (must be 0);
* stale first epochs: the first epoch served after the restart lacks an
  acknowledged event (must be 0: the daemon catches up before it serves).

    .venv/bin/python bench/restart_bench.py [--cycles 100] [--workers 2] [--small]

``--small`` uses the 648-host two-level PGFT (quick check while developing).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import grpc
import numpy as np
from benchinfo import machine

from smroute.fabric.export.writers import write_topology
from smroute.fabric.generate.trees import pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.interrupts import sigterm_interrupts
from smroute.lab.processes import DaemonProcess
from smroute.service.rpc.client import SmrouteClient, link_down, link_up, pb

SHAPES = {
    "11664": (3, (18, 18, 36), (1, 18, 18), (1, 1, 1)),
    "648": (2, (18, 36), (1, 18), (1, 1)),
}


def _links(f: Fabric, n: int, seed: int = 7) -> list[tuple[int, int]]:
    """``n`` switch-to-switch links by their first end (GUID, port)."""
    sw = f.node_type == NodeType.SWITCH
    inter = np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])
    pick = np.random.default_rng(seed).permutation(inter)[:n]
    rows = f.link_a[pick]
    return [(int(f.node_guid[f.port_node[r]]), int(f.port_num[r])) for r in rows.tolist()]


class Load:
    """A client thread applying link down/up events back to back; ``intended``:
    each link's state as last acknowledged (True = down; ``None``: unknown, the
    call was cut short by a kill; the next event on it is a LINK_DOWN, which
    makes it known again); ``inflight``: the link of the call in progress."""

    def __init__(self, links: list[tuple[int, int]], seed: int) -> None:
        self.links = links
        self.rng = np.random.default_rng(seed)
        self.intended: dict[tuple[int, int], bool | None] = {}
        self.inflight: tuple[int, int] | None = None
        self.acked = 0
        self.acked_epochs: dict[int, str] = {}  # epoch id -> tables_sha256 (acknowledged)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, address: str) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(address,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    def _run(self, address: str) -> None:
        with SmrouteClient(address, timeout=60) as c:
            while not self._stop.is_set():
                link = self.links[int(self.rng.integers(len(self.links)))]
                down = self.intended.get(link, False) is not True
                self.inflight = link
                try:
                    r = c.apply_faults([link_down(*link) if down else link_up(*link)])
                except grpc.RpcError:
                    return  # the daemon was killed: this call was never answered
                self.intended[link] = down
                self.acked += 1
                self.acked_epochs[int(r.epoch.id)] = r.epoch.tables_sha256
                self.inflight = None


def _down_links(ep: pb.Epoch) -> set[tuple[int, int]]:
    return {(int(e.node_guid), int(e.port)) for e in ep.down_items
            if e.kind == pb.FaultEvent.LINK_DOWN}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--links", type=int, default=32, help="links the load toggles")
    ap.add_argument("--small", action="store_true", help="the 648-host tree")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    name = "648" if args.small else "11664"
    h, m, w, p = SHAPES[name]
    fabric = pgft(h, m, w, p)
    links = _links(fabric, args.links, args.seed)
    print(f"machine: {machine()}")
    print(f"fabric: PGFT({h};{','.join(map(str, m))};{','.join(map(str, w))};"
          f"{','.join(map(str, p))}): {len(fabric.cas)} hosts, {len(fabric.switches)} switches; "
          f"daemon workers {args.workers}; load toggles {len(links)} switch links")
    rng = np.random.default_rng(args.seed)
    load = Load(links, args.seed)
    serve_s: list[float] = []
    settle_s: list[float] = []
    lost = mismatched = replays = stale = 0
    with tempfile.TemporaryDirectory(prefix="smroute-restart-") as wd:
        topo = Path(wd) / "fabric.topo"
        write_topology(fabric, topo)
        d = DaemonProcess(None, Path(wd) / "daemon", workers=args.workers,
                          extra_args=("--fabric", str(topo)), state=Path(wd) / "state.db",
                          log_format="json")
        t0 = time.monotonic()
        d.start(600)
        print(f"first start (parse, route, serve): {time.monotonic() - t0:.2f} s")
        try:
            for cycle in range(args.cycles):
                load.start(d.address)
                time.sleep(float(rng.uniform(0.5, 2.0)))
                if cycle:  # the log of the run about to be killed (a new file per start)
                    replays += any(e.get("event") == "caught_up" for e in d.log_events())
                d.kill()
                load.stop()
                t0 = time.monotonic()
                d.start(600)
                with SmrouteClient(d.address, timeout=60) as c:
                    while True:
                        try:
                            ep = c.get_epoch(0, include_down_items=True)
                            break
                        except grpc.RpcError:
                            time.sleep(0.005)
                    serve_s.append(time.monotonic() - t0)
                    sha = load.acked_epochs.get(int(ep.id))
                    if sha is not None and sha != ep.tables_sha256:
                        mismatched += 1
                    if load.inflight is not None:  # never answered: either way
                        load.intended[load.inflight] = None
                        load.inflight = None
                    want = {k for k, v in load.intended.items() if v is True}
                    free = {k for k, v in load.intended.items() if v is None}
                    first = _down_links(ep)  # the first epoch served: caught up already?
                    stale += bool(want - first or first - want - free)
                    deadline = time.monotonic() + 60
                    while True:  # until the journal replay put every answered event in force
                        now = c.get_epoch(0, include_down_items=True)
                        have = _down_links(now)
                        if want <= have and have - want <= free or time.monotonic() > deadline:
                            break
                        time.sleep(0.02)
                    settle_s.append(time.monotonic() - t0)
                    # an answered DOWN not in force, or an answered UP whose link is down
                    miss = len(want - have) + len(have - want - free)
                    lost += miss
                if miss or (cycle + 1) % 10 == 0 or cycle + 1 == args.cycles:
                    print(f"cycle {cycle + 1}: epoch {ep.id} resumed={ep.resumed} "
                          f"serving after {serve_s[-1]:.3f} s, state in force after "
                          f"{settle_s[-1]:.3f} s, acknowledged {load.acked}, lost {lost}",
                          flush=True)
        finally:
            load.stop()
            d.stop()
    print(f"cycles: {args.cycles}; acknowledged events: {load.acked}; lost events: {lost}; "
          f"resumed epochs with another checksum: {mismatched}; restarts whose first "
          f"epoch served lacked an acknowledged event: {stale}")
    print(f"process start -> serving (resumed, caught up): median "
          f"{statistics.median(serve_s):.3f} s, "
          f"max {max(serve_s):.3f} s; -> every acknowledged event in force: median "
          f"{statistics.median(settle_s):.3f} s, max {max(settle_s):.3f} s "
          f"(restarts that replayed journaled events or a lost commit: {replays})")


if __name__ == "__main__":
    with sigterm_interrupts():
        main()
