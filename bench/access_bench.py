"""Benchmark: the Unix socket's credential relay against loopback TCP.

Starts two real ``smroute serve`` processes
(:class:`smroute.lab.processes.DaemonProcess`) on the same generated PGFT:
one on a Unix socket (the default: every connection goes through the
credential relay of :mod:`smroute.service.rpc.peercred`, which copies its bytes
between two sockets), one on loopback TCP (gRPC's own listener).  For each it
measures the median time of a full ``GetTables`` (the stream of every
switch's table) and of a ``GetEpoch`` (one small unary call): what the relay
costs in throughput and in latency per call.

    .venv/bin/python bench/access_bench.py [--small] [--calls 200]

``--small`` uses the 648-host two-level PGFT instead of the 3,888-host
PGFT(3;18,18,12;1,18,18;1,1,1).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchinfo import machine

from smroute.fabric.export.writers import write_topology
from smroute.fabric.generate.trees import pgft
from smroute.interrupts import sigterm_interrupts
from smroute.lab.processes import DaemonProcess
from smroute.service.rpc.client import SmrouteClient


def measure(address: str, calls: int) -> tuple[float, float, int]:
    """Median GetTables seconds, median GetEpoch seconds, table bytes."""
    with SmrouteClient(address, timeout=600) as c:
        nbytes = int(c.tables().tables.ports.nbytes)
        full = []
        for _ in range(5):
            t0 = time.perf_counter()
            c.tables()
            full.append(time.perf_counter() - t0)
        unary = []
        for _ in range(calls):
            t0 = time.perf_counter()
            c.get_epoch()
            unary.append(time.perf_counter() - t0)
    return statistics.median(full), statistics.median(unary), nbytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="the 648-host two-level PGFT")
    ap.add_argument("--calls", type=int, default=200, help="GetEpoch calls per listener")
    args = ap.parse_args()
    f = (pgft(2, [18, 36], [1, 18], [1, 1]) if args.small
         else pgft(3, [18, 18, 12], [1, 18, 18], [1, 1, 1]))
    print(machine())
    with tempfile.TemporaryDirectory(prefix="access-bench-") as tmp:
        wd = Path(tmp)
        topo = wd / "fabric.topo"
        write_topology(f, topo)
        print(f"fabric: {len(f.cas)} hosts, {len(f.switches)} switches")
        for name, listen in (("unix socket + relay", None), ("loopback TCP", "127.0.0.1:0")):
            d = DaemonProcess(None, wd / name.split()[0], listen=listen, state="none",
                              extra_args=("--fabric", str(topo)))
            address = d.start(900)
            try:
                full, unary, nbytes = measure(address, args.calls)
            finally:
                d.stop()
            print(f"{name:20s} GetTables ({nbytes / 1e6:.1f} MB of tables) median "
                  f"{full * 1000:.0f} ms; GetEpoch median {unary * 1e6:.0f} us")


if __name__ == "__main__":
    with sigterm_interrupts():
        main()
