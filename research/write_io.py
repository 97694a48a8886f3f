"""What writing OpenSM's file-engine text of a large table set costs: the
formatting (CPU) apart from the I/O, beside ``dd`` of the same bytes.

Routes PGFT(3;18,18,36;1,18,18;1,1,1) (11,664 hosts) in-process without
labels (``--no-port-guids``: 227 MB of text), then, ``--runs`` times each:

* ``format``: :func:`smroute.tables.formats.stream_opensm` consumed without
  writing (process CPU seconds and wall);
* ``write``: the same bytes (already formatted) written with ``os.write`` to
  a new file in ``--dir``; ``+fsync``; ``+fsync+rename`` over the previous
  file, as :func:`smroute.fileio.atomic_writer` publishes a table file;
* ``dd``: ``dd bs=4M conv=fsync`` of the same bytes to the same directory;
* ``command``: :func:`smroute.tables.formats.write_tables` (format + the
  atomic write), what ``smroute route`` does.

Prints wall, CPU (user + system of this process) and system seconds per
step, medians, and the load average::

    PYTHONPATH=. python research/write_io.py [--dir /tmp] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from smroute.fabric.generate.trees import pgft
from smroute.routing.engine import route
from smroute.tables.formats import stream_opensm, write_tables


def measure(fn: Callable[[], object]) -> tuple[float, float, float]:
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    sys_t = r1.ru_stime - r0.ru_stime + c1.ru_stime - c0.ru_stime
    user = r1.ru_utime - r0.ru_utime + c1.ru_utime - c0.ru_utime
    return wall, user + sys_t, sys_t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    fabric = pgft(3, [18, 18, 36], [1, 18, 18], [1, 1, 1])
    tables = route(fabric, workers=1, labels=False).tables
    data = b"".join(bytes(p) for p in stream_opensm(tables))
    work = Path(tempfile.mkdtemp(prefix="write-io-", dir=args.dir))
    target, src = work / "lfts", work / "src"
    src.write_bytes(data)
    target.write_bytes(data)
    view = memoryview(data)

    def fmt() -> None:
        for _ in stream_opensm(tables):
            pass

    def write(fsync: bool, rename: bool) -> None:
        tmp = work / "tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for i in range(0, len(data), 4 << 20):
            os.write(fd, view[i:i + (4 << 20)])
        if fsync:
            os.fsync(fd)
        os.close(fd)
        if rename:
            os.replace(tmp, target)
        else:
            tmp.unlink()

    def dd() -> None:
        subprocess.run(["dd", f"if={src}", f"of={work / 'dd'}", "bs=4M", "conv=fsync"],
                       check=True, capture_output=True)

    steps: dict[str, Callable[[], object]] = {
        "format": fmt,
        "write": lambda: write(False, False),
        "write+fsync": lambda: write(True, False),
        "write+fsync+rename": lambda: write(True, True),
        "dd conv=fsync": dd,
        "command (write_tables)": lambda: write_tables(tables, target),
    }
    got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in steps}
    print(f"{len(data) / 1e6:.0f} MB, {tables.n_switches} switches x {tables.max_lid} LIDs; "
          f"{args.dir}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for _ in range(args.runs):
        for name, fn in steps.items():
            got[name].append(measure(fn))
    print(f"  {'median of ' + str(args.runs):26s}{'wall':>8s}{'cpu':>8s}{'system':>8s}")
    for name, rows in got.items():
        w, c, s = (statistics.median(r[k] for r in rows) for k in range(3))
        print(f"  {name:26s}{w:8.3f}{c:8.3f}{s:8.3f}")
    print(f"load average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for p in work.iterdir():
        p.unlink()
    work.rmdir()


if __name__ == "__main__":
    main()
