"""Drive the real InfiniBand tools on a simulated fabric (edge module, no mocks):
:func:`run_opensm`, :func:`ibnetdiscover` and :func:`dump_switch_routes` run
OpenSM 3.3.x and infiniband-diags through an :class:`~smroute.lab.ibsim.IbSim`
(the simulator, its isolation and console are described there; it is
re-exported here with its helpers, as the lab's one entry point).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from smroute.errors import RoutingError
from smroute.lab.ibsim import (
    CONSOLE_MAX_LINE,
    IBSIM_DEFAULT_LINEAR_CAP,
    UMAD2SIM_LIB,
    IbSim,
    NetLimits,
    ToolResult,
    net_limits,
)
from smroute.tools import (
    TOOL_PACKAGES,
    ToolError,
    ToolMissingError,
    ToolTimeoutError,
    require_tool,
    tail,
)

__all__ = [
    "CONSOLE_MAX_LINE",
    "DEFAULT_LOG_FLAGS",
    "IBSIM_DEFAULT_LINEAR_CAP",
    "UMAD2SIM_LIB",
    "TOOL_PACKAGES",
    "IbSim",
    "NetLimits",
    "OpenSMRun",
    "ToolError",
    "ToolMissingError",
    "ToolResult",
    "ToolTimeoutError",
    "dump_switch_routes",
    "format_conf",
    "ibnetdiscover",
    "log_time",
    "net_limits",
    "parse_routing_seconds",
    "require_tool",
    "run_opensm",
]

# --------------------------------------------------------------------------- OpenSM
@dataclass(frozen=True)
class OpenSMRun:
    """Files and facts from one ``opensm -o`` run.

    ``lfts`` (``opensm-lfts.dump``), ``fdbs`` (``opensm.fdbs``) and
    ``subnet_lst`` (``opensm-subnet.lst``) are in ``dump_dir``; ``log`` is
    OpenSM's log file.  ``engine_used`` is the engine OpenSM reports having
    configured the tables with (it may differ from ``engine`` after a fallback,
    e.g. ftree with LMC > 0).  ``routing_seconds`` is the routing phase measured
    from the log's timestamps (``None`` if the log lacks the markers).
    """

    workdir: Path
    dump_dir: Path
    conf: Path
    log: Path
    lfts: Path
    fdbs: Path
    subnet_lst: Path
    engine: str
    engine_used: str | None
    lmc: int
    routing_seconds: float | None
    seconds: float
    stdout: str
    stderr: str


#: OpenSM log flags: ERROR | INFO | VERBOSE | ROUTING.  VERBOSE (0x04) adds the
#: "building routing with ..." line that marks where routing starts; ROUTING
#: (0x40) makes OpenSM write opensm-lfts.dump.
DEFAULT_LOG_FLAGS = 0x47

_LOG_TS_RE = re.compile(r"^(\w{3})\s+(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{6}) ")
_ROUTE_START_RE = re.compile(r"building routing with '([^']+)' routing algorithm")
_ROUTE_END_RE = re.compile(r"-> osm_ucast_mgr_process: (\S+) tables configured on all switches")
_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}


def log_time(line: str) -> _dt.datetime | None:
    """Timestamp of an OpenSM log line (``Nov 22 00:33:13 663810 ...``), or
    ``None`` if the line has none.  The log has no year: the result is in 2000."""
    m = _LOG_TS_RE.match(line)
    if not m or m.group(1) not in _MONTHS:
        return None
    # The log has no year: 2000 (a leap year, so Feb 29 parses) stands in; the
    # caller moves an end that lies before its start into the next year.
    return _dt.datetime(
        2000, _MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)), int(m.group(4)),
        int(m.group(5)), int(m.group(6)),
    )


def parse_routing_seconds(lines: Iterable[str]) -> tuple[float | None, str | None]:
    """Routing time and engine from an OpenSM log.

    Routing starts at the first ``building routing with '<engine>' routing
    algorithm...`` line (log flag 0x04) and ends at the next
    ``<engine> tables configured on all switches`` line.  Returns
    ``(seconds, engine_used)``; either is ``None`` if its marker is missing.
    """
    start: _dt.datetime | None = None
    for line in lines:
        if start is None and _ROUTE_START_RE.search(line):
            start = log_time(line)
            continue
        m = _ROUTE_END_RE.search(line)
        if m:
            end = log_time(line)
            if start is None or end is None:
                return None, m.group(1)
            if end < start:  # across New Year
                end = end.replace(year=end.year + 1)
            return (end - start).total_seconds(), m.group(1)
    return None, None


def _conf_value(v: object) -> str:
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    return str(v)


def format_conf(settings: Mapping[str, object]) -> str:
    """``opensm.conf`` text: one ``key value`` line per setting (bools as TRUE/FALSE)."""
    return "".join(f"{k} {_conf_value(v)}\n" for k, v in settings.items())


def run_opensm(
    sim: IbSim,
    workdir: str | os.PathLike[str],
    *,
    engine: str = "minhop",
    lmc: int = 0,
    extra_conf: Mapping[str, object] | None = None,
    lfts_file: str | os.PathLike[str] | None = None,
    log_flags: int = DEFAULT_LOG_FLAGS,
    timeout: float = 900.0,
    sim_host: str | None = None,
) -> OpenSMRun:
    """Run OpenSM once (``opensm -o``) on the simulated fabric and collect its dumps.

    Writes ``opensm.conf`` in ``workdir`` (``dump_files_dir``, ``log_flags``,
    ``lmc`` and ``extra_conf`` lines), points ``OSM_TMP_DIR``/``OSM_CACHE_DIR``
    into ``workdir`` (so no guid2lid cache leaks in from elsewhere), and runs
    ``opensm -o -F conf -R engine -f log [-U lfts_file]`` under ibsim-run.
    OpenSM assigns LIDs and programs the simulated switches' LFTs.

    Raises :class:`ToolError` if OpenSM fails or leaves no ``opensm-lfts.dump``,
    :class:`ToolTimeoutError` after ``timeout`` s and
    :class:`smroute.errors.RoutingError` if no routing engine configured the tables.
    """
    if not 0 <= lmc <= 7:
        raise ValueError(f"LMC must be in 0..7, not {lmc}")
    wd = Path(workdir).resolve()
    dump_dir, cache_dir, tmp_dir = wd / "dump", wd / "cache", wd / "tmp"
    for d in (dump_dir, cache_dir, tmp_dir):
        d.mkdir(parents=True, exist_ok=True)
    log = wd / "opensm.log"
    conf = wd / "opensm.conf"
    settings: dict[str, object] = {
        "dump_files_dir": dump_dir,
        "log_flags": f"{log_flags:#04x}",
        "lmc": lmc,
        "force_log_flush": False,
    }
    if extra_conf:
        settings.update(extra_conf)
    conf.write_text(format_conf(settings))
    cmd = ["opensm", "-o", "-F", str(conf), "-R", engine, "-f", str(log)]
    if lfts_file is not None:
        cmd += ["-U", str(Path(lfts_file).resolve())]
    require_tool("opensm")
    t0 = time.monotonic()
    res = sim.run(
        cmd, timeout=timeout, check=False, cwd=wd, sim_host=sim_host,
        env={"OSM_TMP_DIR": str(tmp_dir), "OSM_CACHE_DIR": str(cache_dir)},
    )
    seconds = time.monotonic() - t0
    log_text = log.read_text(errors="replace") if log.exists() else ""
    if res.returncode != 0:
        raise ToolError(
            f"opensm: exited with status {res.returncode} (log: {log})",
            stderr_tail=tail(res.stderr + "\n" + tail(log_text)),
        )
    if "No routing engine able to successfully configure" in log_text:
        raise RoutingError(f"opensm: no routing engine could route the fabric (log: {log})")
    routing_seconds, engine_used = parse_routing_seconds(log_text.splitlines())
    out = OpenSMRun(
        workdir=wd, dump_dir=dump_dir, conf=conf, log=log,
        lfts=dump_dir / "opensm-lfts.dump", fdbs=dump_dir / "opensm.fdbs",
        subnet_lst=dump_dir / "opensm-subnet.lst",
        engine=engine, engine_used=engine_used, lmc=lmc,
        routing_seconds=routing_seconds, seconds=seconds,
        stdout=res.stdout, stderr=res.stderr,
    )
    if log_flags & 0x40 and not out.lfts.exists():
        raise ToolError(
            f"opensm: finished but wrote no {out.lfts.name} (log: {log})",
            stderr_tail=tail(log_text),
        )
    return out


# --------------------------------------------------------------------------- diags
def ibnetdiscover(sim: IbSim, *, timeout: float = 600.0, sim_host: str | None = None) -> list[str]:
    """The real ``ibnetdiscover`` text of the simulated fabric, as lines.

    Run it after :func:`run_opensm` to see OpenSM's LIDs (before, all LIDs are 0).
    """
    return sim.run(["ibnetdiscover"], timeout=timeout, sim_host=sim_host).lines()


def dump_switch_routes(
    sim: IbSim, *, timeout: float = 600.0, sim_host: str | None = None
) -> str:
    """What every switch of the simulated fabric really holds in its LFT.

    The text of ``dump_fts`` (infiniband-diags), which discovers the fabric and
    prints, per switch, ``Unicast lids [0x0-0xN] of switch ... guid 0x... (desc):``
    then ``0x0001 001 : (Channel Adapter portguid 0x...: 'desc')`` rows.
    """
    return sim.run(["dump_fts"], timeout=timeout, sim_host=sim_host).stdout
