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

from benchinfo import (
    FTREE_CACHE,
    FTREE_FILE,
    Code,
    WarmRouter,
    alternate,
    checkouts,
    load,
    machine,
    report,
)

from smroute.interrupts import sigterm_interrupts

ROOT = Path(__file__).resolve().parents[1]
TREE = "3;18,18,36;1,18,18;1,1,1"
BIG = "3;32,32,40;1,32,32;1,1,1"
SMALL = ROOT / "fixtures" / "pgft-2level-648.topo"
CASES = ("command", "validate", "small", "big")
_TIME = re.compile(r"^time:\s+(.*?); total ([\d.]+) s$", re.M)


class Command(Code):
    """A checkout whose ``smroute`` command is timed."""

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


def fabric_file(cache: Path, spec: str, code: Command) -> Path:
    """The ibnetdiscover text of PGFT ``spec``, generated once into ``cache``."""
    path = cache / f"pgft-{spec.replace(';', '_').replace(',', '.')}.topo"
    if not path.exists():
        subprocess.run([sys.executable, "-m", "smroute", "fabric", "generate", "pgft", spec,
                        "--out", str(path)], env=code.env, check=True)
    return path


def case_command(codes: list[Command], runs: int, tree: Path, out: Path,
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
    return {lab: statistics.median([r["process"] for r in rs]) for lab, rs in got.items()}


def case_small(codes: list[Command], runs: int, out: Path) -> None:
    for extra in ([], ["--workers", "1"]):
        args = ["route", str(SMALL), "--no-validate", "--out", str(out), "-q", *extra]
        got = alternate(codes, runs, lambda c, a=args: c.smroute(a))
        report(f"smroute route, 648-host fixture, {'--workers 1' if extra else 'default workers'}",
               got, ["process", "parse", "route", "write"], "smroute " + " ".join(args))


def case_big(codes: list[Command], runs: int, workers: int) -> None:
    cfg = {"shape": [3, [32, 32, 40], [1, 32, 32], [1, 1, 1]], "workers": workers}
    with WarmRouter(codes, cfg) as warm:
        got = alternate(codes, runs, warm.one)
    keys = ["route", *[k for k in got[codes[0].label][0] if k != "route"]]
    report(f"routing, 40,960-host PGFT({BIG}), 44,544 LIDs, warm pool of {workers} workers",
           got, keys, f"route(fabric, pool=RoutePool({workers}), labels=False)")


def opensm_ftree(cache: Path, refresh: bool) -> dict[str, Any]:
    """OpenSM's ftree routing phase on the 11,664-host tree (cached)."""
    path = cache / FTREE_FILE
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
    ap.add_argument("--cache", type=Path, default=FTREE_CACHE)
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if any(c not in CASES for c in cases):
        sys.exit(f"command_bench.py: --cases: expected some of {', '.join(CASES)}")
    codes = [Command(c.label, c.path, args.cache)
             for c in checkouts(ROOT, args.before, "command_bench.py")]
    args.cache.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}")
    print(f"load average at start: {load()}")
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
    print(f"\nload average at end: {load()}; "
          f"benchmark wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    with sigterm_interrupts():
        main()
