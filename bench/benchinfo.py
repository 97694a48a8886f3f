"""Shared by the benchmark scripts: a one-line description of the machine,
and running the code of this checkout beside the code before in the same
run (:class:`Code`, :func:`alternate`, :func:`report`, :class:`WarmRouter`)."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

Runs = dict[str, list[dict[str, float]]]


def machine() -> str:
    """CPU model, core count, Python and numpy versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"numpy {np.__version__}")


def load() -> str:
    """The load averages (1, 5, 15 minutes)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class Code:
    """One checkout: its label and the environment that runs it."""

    def __init__(self, label: str, path: Path, cache: Path | None = None) -> None:
        self.label, self.path = label, path
        self.env = {**os.environ, "PYTHONPATH": str(path)}
        if cache is not None:  # bytecode kept, as an installed package has it
            self.env.pop("PYTHONDONTWRITEBYTECODE", None)
            self.env["PYTHONPYCACHEPREFIX"] = str(cache / "pycache" / label)


def checkouts(root: Path, before: Path | None, prog: str,
              cache: Path | None = None) -> list[Code]:
    """This checkout (``now``) and, with ``before``, that one (``before``),
    their bytecode kept under ``cache`` when given; exits with a message if
    ``before`` holds no smroute checkout."""
    if before is not None and not (before / "smroute" / "__init__.py").exists():
        sys.exit(f"{prog}: --before {before}: no smroute checkout there")
    return [Code("now", root, cache)] + ([Code("before", before.resolve(), cache)]
                                         if before else [])


def alternate(codes: Sequence[Code], runs: int, one: Callable[[Code], dict[str, float]]) -> Runs:
    """``one(code)`` ``runs`` times per code, in turn, the order reversed every
    other run (a busy spell of the machine slows both alike), after one run
    per code that is not counted."""
    got: Runs = {c.label: [] for c in codes}
    for c in codes:
        one(c)
    for i in range(runs):
        for c in codes if i % 2 == 0 else codes[::-1]:
            got[c.label].append(one(c))
    return got


def report(title: str, got: Runs, keys: list[str], command: str) -> None:
    """Medians per code and key, and with two codes the median of the runs'
    ratios (now / before)."""
    labels = list(got)
    runs = len(next(iter(got.values())))
    print(f"\n{title}\n  command: {command}\n  medians of {runs} alternating runs (s), "
          f"load average {load()}:")
    print("  " + f"{'':10s}" + "".join(f"{k:>10s}" for k in keys))
    for lab in labels:
        print("  " + f"{lab:10s}" + "".join(
            f"{statistics.median([r[k] for r in got[lab]]):10.3f}"
            if all(k in r for r in got[lab]) else f"{'-':>10s}" for k in keys))
    if len(labels) == 2:
        now, before = got[labels[0]], got[labels[1]]
        cells = []
        for k in keys:
            if all(k in r for r in now + before):
                ratio = statistics.median([a[k] / b[k] for a, b in zip(now, before, strict=True)
                                           if b[k] > 0] or [float("nan")])
                cells.append(f"{ratio:9.2f}x")
            else:
                cells.append(f"{'-':>10s}")
        print("  " + f"{'now/before':10s}" + "".join(cells))


#: A process that routes a generated PGFT in a warm pool, once per line read,
#: and answers each with the run's timings (``route`` their sum, ``cpu`` the
#: CPU seconds of the process and its workers, ``walk`` the validation walk
#: and ``walk_cpu`` its CPU seconds).
_WARM = """
import json, os, sys, time
from smroute.fabric.generate.trees import degrade, pgft
from smroute.routing.engine import route, validate_result
from smroute.routing.pool import RoutePool
cfg = json.loads(sys.argv[1])
fabric = pgft(*cfg["shape"])
if cfg.get("agg"):
    from smroute.fabric.generate.shapes import with_aggregation_nodes
    fabric = with_aggregation_nodes(fabric)
if cfg.get("remove_links") or cfg.get("remove_switches"):
    import numpy as np
    fabric, _ = degrade(fabric, np.random.default_rng(cfg["seed"]),
                        switches=cfg.get("remove_switches", 0), links=cfg.get("remove_links", 0))
kw = {"algorithm": cfg["algorithm"]} if cfg.get("algorithm") else {}
tick = os.sysconf("SC_CLK_TCK")
def cpu(pids):
    s = time.process_time()
    for pid in pids:
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        s += (int(f[11]) + int(f[12])) / tick
    return s
with RoutePool(cfg["workers"]) as pool:
    pids = pool.worker_pids()
    r = route(fabric, pool=pool, labels=False, **kw)
    if cfg.get("validate"):
        validate_result(r)
    del r
    print("ready", flush=True)
    for _ in sys.stdin:
        c0 = cpu(pids)
        r = route(fabric, pool=pool, labels=False, **kw)
        out = {"route": sum(r.timings.values()), **r.timings, "cpu": cpu(pids) - c0}
        if cfg.get("validate"):
            t, c0 = time.perf_counter(), time.process_time()
            if not validate_result(r).ok:
                sys.exit("the tables did not pass the validation walk")
            out["walk"] = time.perf_counter() - t
            out["walk_cpu"] = time.process_time() - c0
        print(json.dumps(out), flush=True)
        del r
"""


class WarmRouter:
    """One long-lived routing process per code (:data:`_WARM`), over the
    PGFT ``cfg["shape"]`` ``[h, m, w, p]`` with ``cfg`` keys workers,
    algorithm (default: the code's own), agg, remove_links, remove_switches,
    seed, validate."""

    def __init__(self, codes: Sequence[Code], cfg: dict[str, Any]) -> None:
        self.procs = {c.label: subprocess.Popen(
            [sys.executable, "-c", _WARM, json.dumps(cfg)], env=c.env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True) for c in codes}
        for lab, p in self.procs.items():
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                self.close()
                sys.exit(f"{lab}: the warm routing process did not start")

    def __enter__(self) -> WarmRouter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def one(self, c: Code) -> dict[str, float]:
        """One routing run of ``c``'s process: its figures."""
        p = self.procs[c.label]
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write("\n")
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            sys.exit(f"{c.label}: the warm routing process ended (exit {p.wait()})")
        return dict(json.loads(line))

    def close(self) -> None:
        for p in self.procs.values():
            if p.stdin is not None:
                p.stdin.close()
            p.wait(120)


#: OpenSM 3.3.23's ftree routing phase on the 11,664-host PGFT (DESIGN.md,
#: measured on ibsim), when ``bench/command_bench.py --opensm-ftree`` has not
#: measured it on this machine.
OPENSM_FTREE_11664_S = 14.0
#: Where ``bench/command_bench.py --opensm-ftree`` keeps its measure.
FTREE_CACHE = Path.home() / ".cache" / "smroute-bench"
FTREE_FILE = "opensm-ftree-11664.json"


def ftree_seconds(cache: Path = FTREE_CACHE) -> tuple[float, str]:
    """OpenSM ftree's routing phase on the 11,664-host tree and where the
    figure comes from (this machine's cached measure, else DESIGN.md's)."""
    try:
        got = json.loads((cache / FTREE_FILE).read_text())
        return float(got["routing_s"]), (f"measured here {got['measured']}, load "
                                         f"{float(got['load']):.1f}")
    except (OSError, ValueError, KeyError):
        return OPENSM_FTREE_11664_S, "DESIGN.md, measured on ibsim"
