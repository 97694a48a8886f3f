"""Benchmark: what a user waits for, beside the code before, in the same run.

Each case runs the code of this checkout and, with ``--before DIR`` (a
checkout of the baseline, e.g. ``git worktree add /tmp/before main``), the
code in ``DIR`` (``PYTHONPATH=DIR``), in alternating runs (the order reversed
every other run, so a busy spell of the machine slows both alike), and
prints medians side by side with the median of the runs' ratios.  The load
average is printed before and after: on a shared machine the figures of one
run compare with each other, not with another machine's; "cpu" (the
process's user + system time) moves less with the load than the wall times.
Each checkout runs with its compiled modules kept in ``--cache`` (as an
installed copy has them; ``PYTHONDONTWRITEBYTECODE`` is ignored), after one
run per case that is not counted.

Cases (``--cases``, default all but ``big``):

* ``command``: ``smroute route`` on the 11,664-host tree
  PGFT(3;18,18,36;1,18,18;1,1,1), ``--no-validate --no-port-guids``, OpenSM's
  file-engine format: the whole process (wall), and its phases from the
  summary line (parse, route with the pool's start, write); "outside" is the
  process minus the phases (interpreter start, imports, exit).
* ``validate``: the same command with the validation walk: its phase.
* ``small``: the 648-host fixture ``fixtures/pgft-2level-648.topo``, whole
  command and routing phase, with the default worker count and with
  ``--workers 1``.
* ``big``: the 40,960-host PGFT(3;32,32,40;1,32,32;1,1,1) (44,544 LIDs)
  routed in a warm pool of ``--workers`` (default 2), one long-lived process
  per checkout answering each run (ingest excluded, as ``route_bench.py``).
* ``opensm``: (``--opensm-ftree``) OpenSM 3.3.23's ftree routing phase on the
  11,664-host tree under ibsim (minutes: ibsim's start), cached in
  ``--cache`` (``~/.cache/smroute-bench``) and reused unless ``--refresh``.

    .venv/bin/python bench/command_bench.py [--before DIR] [--runs 5]
        [--cases command,validate,small,big] [--opensm-ftree [--refresh]]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchinfo import machine

ROOT = Path(__file__).resolve().parents[1]
TREE = "3;18,18,36;1,18,18;1,1,1"
BIG = "3;32,32,40;1,32,32;1,1,1"
SMALL = ROOT / "fixtures" / "pgft-2level-648.topo"
CASES = ("command", "validate", "small", "big")
_TIME = re.compile(r"^time:\s+(.*?); total ([\d.]+) s$", re.M)

#: A process that routes the big tree in a warm pool, once per line read.
_WARM = """
import json, sys
from smroute.fabric.generate.trees import pgft
from smroute.routing.engine import route
from smroute.routing.pool import RoutePool
h, m, w, p = json.loads(sys.argv[1])
fabric = pgft(h, m, w, p)
with RoutePool(int(sys.argv[2])) as pool:
    route(fabric, pool=pool, labels=False)
    print("ready", flush=True)
    for _ in sys.stdin:
        r = route(fabric, pool=pool, labels=False)
        print(json.dumps({"route": sum(r.timings.values()), **r.timings}), flush=True)
        del r
"""


class Code:
    """One checkout: its label and the environment that runs it."""

    def __init__(self, label: str, path: Path, cache: Path) -> None:
        self.label, self.path = label, path
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env = {**env, "PYTHONPATH": str(path),
                    "PYTHONPYCACHEPREFIX": str(cache / "pycache" / label)}

    def smroute(self, args: list[str]) -> dict[str, float]:
        """Run ``smroute ARGS``: the process's wall time and its summary's phases."""
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        cp = subprocess.run([sys.executable, "-m", "smroute", *args], env=self.env,
                            capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if cp.returncode != 0:
            sys.exit(f"{self.label}: smroute {' '.join(args)}: exit {cp.returncode}\n"
                     f"{cp.stderr[-2000:]}")
        m = _TIME.search(cp.stdout)
        if m is None:
            sys.exit(f"{self.label}: no time line in the summary:\n{cp.stdout}")
        out = {"process": wall, "total": float(m.group(2)),
               "cpu": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime}
        for part in m.group(1).split(", "):
            name, value = part.rsplit(" ", 2)[0], part.rsplit(" ", 2)[1]
            out[name] = float(value)
        # routing with the pool's start: what the summary's total leaves to it
        out["route"] = out["total"] - sum(out.get(k, 0.0) for k in (
            "parse", "validate", "hops", "write", "deadlock"))
        out["outside"] = wall - out["total"]
        return out


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def alternate(codes: list[Code], runs: int, one: Any) -> dict[str, list[dict[str, float]]]:
    """``one(code)`` ``runs`` times per code, in turn, the order reversed every
    other run, after one run per code that is not counted."""
    got: dict[str, list[dict[str, float]]] = {c.label: [] for c in codes}
    for c in codes:
        one(c)
    for i in range(runs):
        for c in codes if i % 2 == 0 else codes[::-1]:
            got[c.label].append(one(c))
    return got


def report(title: str, got: dict[str, list[dict[str, float]]], keys: list[str],
           command: str) -> None:
    labels = list(got)
    runs = len(next(iter(got.values())))
    print(f"\n{title}\n  command: {command}\n  medians of {runs} alternating runs (s):")
    print("  " + f"{'':10s}" + "".join(f"{k:>10s}" for k in keys))
    for lab in labels:
        print("  " + f"{lab:10s}" + "".join(
            f"{_median([r[k] for r in got[lab]]):10.3f}" if all(k in r for r in got[lab])
            else f"{'-':>10s}" for k in keys))
    if len(labels) == 2:
        now, before = got[labels[0]], got[labels[1]]
        cells = []
        for k in keys:
            if all(k in r for r in now + before):
                ratio = _median([a[k] / b[k] for a, b in zip(now, before, strict=True)
                                 if b[k] > 0])
                cells.append(f"{ratio:9.2f}x")
            else:
                cells.append(f"{'-':>10s}")
        print("  " + f"{'now/before':10s}" + "".join(cells))


def fabric_file(cache: Path, spec: str, code: Code) -> Path:
    """The ibnetdiscover text of PGFT ``spec``, generated once into ``cache``."""
    path = cache / f"pgft-{spec.replace(';', '_').replace(',', '.')}.topo"
    if not path.exists():
        subprocess.run([sys.executable, "-m", "smroute", "fabric", "generate", "pgft", spec,
                        "--out", str(path)], env=code.env, check=True)
    return path


def case_command(codes: list[Code], runs: int, tree: Path, out: Path,
                 validate: bool) -> dict[str, float]:
    args = ["route", str(tree), "--no-port-guids", "--out", str(out), "-q"]
    if not validate:
        args.insert(2, "--no-validate")
    got = alternate(codes, runs, lambda c: c.smroute(args))
    keys = (["process", "cpu", "parse", "route", "write", "outside"] if not validate
            else ["process", "cpu", "validate"])
    report(f"smroute route, 11,664-host tree PGFT({TREE}), "
           + ("validation walk" if validate else "no validation, no port GUIDs"),
           got, keys, "smroute " + " ".join(args))
    return {lab: _median([r["process"] for r in rs]) for lab, rs in got.items()}


def case_small(codes: list[Code], runs: int, out: Path) -> None:
    for extra in ([], ["--workers", "1"]):
        args = ["route", str(SMALL), "--no-validate", "--out", str(out), "-q", *extra]
        got = alternate(codes, runs, lambda c, a=args: c.smroute(a))
        report(f"smroute route, 648-host fixture, {'--workers 1' if extra else 'default workers'}",
               got, ["process", "cpu", "parse", "route", "write"], "smroute " + " ".join(args))


def case_big(codes: list[Code], runs: int, workers: int) -> None:
    spec = json.dumps([3, [32, 32, 40], [1, 32, 32], [1, 1, 1]])
    procs = {c.label: subprocess.Popen([sys.executable, "-c", _WARM, spec, str(workers)],
                                       env=c.env, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True) for c in codes}
    try:
        for lab, p in procs.items():
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                sys.exit(f"{lab}: the warm routing process did not start")

        def one(c: Code) -> dict[str, float]:
            p = procs[c.label]
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write("\n")
            p.stdin.flush()
            return dict(json.loads(p.stdout.readline()))

        got = alternate(codes, runs, one)
    finally:
        for p in procs.values():
            if p.stdin is not None:
                p.stdin.close()
            p.wait(120)
    keys = ["route", *[k for k in got[codes[0].label][0] if k != "route"]]
    report(f"routing, 40,960-host PGFT({BIG}), 44,544 LIDs, warm pool of {workers} workers",
           got, keys, f"route(fabric, pool=RoutePool({workers}), labels=False)")


def opensm_ftree(cache: Path, refresh: bool) -> dict[str, Any]:
    """OpenSM's ftree routing phase on the 11,664-host tree (cached)."""
    path = cache / "opensm-ftree-11664.json"
    if path.exists() and not refresh:
        return dict(json.loads(path.read_text()), cached=str(path))
    sys.path.insert(0, str(Path(__file__).parent))
    from plugin_bench import SweepRun  # OpenSM under ibsim, as that benchmark runs it

    from smroute.fabric.generate.trees import pgft

    fabric = pgft(3, [18, 18, 36], [1, 18, 18], [1, 1, 1])
    with tempfile.TemporaryDirectory(prefix="smroute-ftree-") as tmp:
        run = SweepRun(fabric, Path(tmp), "ftree")
        try:
            run.start()
            used, secs = run.first_routing()
        finally:
            run.stop()
    got = {"engine": used, "routing_s": round(secs, 3), "machine": machine(),
           "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "load": os.getloadavg()[0]}
    path.write_text(json.dumps(got) + "\n")
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", metavar="DIR", type=Path,
                    help="a checkout of the code before, run in the same invocation")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cases", default="command,validate,small",
                    help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--workers", type=int, default=2, help="the big case's pool")
    ap.add_argument("--opensm-ftree", action="store_true",
                    help="OpenSM's ftree routing phase on the 11,664-host tree (cached)")
    ap.add_argument("--refresh", action="store_true", help="measure OpenSM again")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "smroute-bench")
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if any(c not in CASES for c in cases):
        sys.exit(f"command_bench.py: --cases: expected some of {', '.join(CASES)}")
    if args.before is not None and not (args.before / "smroute" / "__init__.py").exists():
        sys.exit(f"command_bench.py: --before {args.before}: no smroute checkout there")
    args.cache.mkdir(parents=True, exist_ok=True)
    codes = [Code("now", ROOT, args.cache)] + ([Code("before", args.before.resolve(), args.cache)]
                                               if args.before else [])
    print(f"machine: {machine()}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    t0 = time.perf_counter()
    whole: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="smroute-bench-") as tmp:
        out = Path(tmp) / "tables.lfts"
        if {"command", "validate"} & set(cases):
            tree = fabric_file(args.cache, TREE, codes[0])
            if "command" in cases:
                whole = case_command(codes, args.runs, tree, out, validate=False)
            if "validate" in cases:
                case_command(codes, args.runs, tree, out, validate=True)
        if "small" in cases:
            case_small(codes, args.runs, out)
        if "big" in cases:
            case_big(codes, args.runs, args.workers)
    if args.opensm_ftree:
        got = opensm_ftree(args.cache, args.refresh)
        print(f"\nOpenSM ftree routing phase, 11,664-host tree under ibsim: "
              f"{got['routing_s']:.1f} s (engine {got['engine']}, {got['measured']}, load "
              f"{got['load']:.1f}" + (f"; cached in {got['cached']}" if "cached" in got else "")
              + ")")
        for lab, secs in whole.items():
            print(f"  the whole smroute route command ({lab}, {secs:.2f} s) takes "
                  f"{secs / got['routing_s']:.1%} of ftree's routing phase alone")
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"benchmark wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
