"""Run ibutils' ``ibdmchk`` on forwarding tables and parse its report (edge module).

``ibdmchk`` (package ``ibutils``, ibdm 1.5.7) in verification mode reads what
OpenSM dumps with log flags 0x43 -- ``opensm-subnet.lst`` (links) and
``opensm.fdbs`` (unicast LFTs) -- plus ``opensm.mcfdbs`` (multicast), checks
that every CA reaches every other CA by following the LFTs and looks for
credit loops (cycles in the channel dependency graph)::

    ibdmchk -s opensm-subnet.lst -f opensm.fdbs -m opensm.mcfdbs [-l LMC]

Without ``-m`` it looks for ``/var/log/osm.mcfdbs`` and stops if there is none,
so :func:`run_ibdmchk` writes an empty ``opensm.mcfdbs`` when none is given.
It needs no fabric (no ibsim): the files are everything.

What it prints that :class:`IbdmchkReport` parses::

    -I- Defined 11/11 systems/nodes
    -I- Defined 55 fdb entries for:5 switches
    -E- Unassigned LFT for lid:3 Dead end at:S0002c90310000000/U1
    -E- Fail to find a path from:S0002c90300000000/U1/1 to:S0002c90300000020/U1/1
    -I- Scanned:30 CA to CA paths
    -E- Found 2 missing paths out of:30 paths
    -I- no credit loops found                   (or)
    Found credit loop on: S0002c90320000000/U1/P3 VL: 0 ... -E- credit loops in routing

After missing paths it stops with ``-E- Some Point to Point Traversals
Failed.`` and exit status 1, before the credit-loop check.  Otherwise the
credit-loop verdict is its last word, and the Debian build of ibdm 1.5.7 then
crashes in ``CrdLoopCleanup()`` (SIGSEGV, on every fabric, OpenSM's own dumps
included): its exit status says nothing, the printed report is complete.  So
:attr:`IbdmchkReport.ok` judges the report, not the exit status.  ibdmchk
always (over)writes ``/var/cache/ibutils/ibdmchk.sw_out_port_num_dlids``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from smroute.tools import require_tool, run_in_group

__all__ = ["IbdmchkReport", "parse_ibdmchk", "run_ibdmchk"]

_NODES = re.compile(r"^-I- Defined (\d+)/(\d+) systems/nodes", re.M)
_FDBS = re.compile(r"^-I- Defined (\d+) fdb entries for:(\d+) switches", re.M)
_SCANNED = re.compile(r"^-I- Scanned:(\d+) CA to CA paths", re.M)
_MISSING = re.compile(r"^-E- Found (\d+) missing paths out of:(\d+) paths", re.M)
_DEAD_END = re.compile(r"^-E- Unassigned LFT for lid:(\d+) Dead end at:(\S+)", re.M)
_NO_PATH = re.compile(r"^-E- Fail to find a path from:(\S+) to:(\S+)", re.M)
_LOOP_ON = re.compile(r"^Found credit loop on: (\S+) VL: (\d+)", re.M)


@dataclass(frozen=True)
class IbdmchkReport:
    """What one ``ibdmchk`` run reported.

    ``systems``/``nodes``: parsed from the subnet file; ``fdb_entries`` /
    ``fdb_switches``: from the FDB file; ``ca_paths``: CA-to-CA paths scanned;
    ``missing_paths``: of those, paths not found; ``dead_ends``: ``(lid,
    node)`` pairs where an LFT had no entry; ``unreachable``: ``(from, to)``
    port names without a path; ``credit_loops``: True if a loop was reported,
    False if the check ran and found none, None if it did not run;
    ``loop_ports``: ports where a credit loop was found; ``errors``: every
    ``-E-`` line.  Counts are ``None`` when the line is absent.
    """

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    systems: int | None
    nodes: int | None
    fdb_entries: int | None
    fdb_switches: int | None
    ca_paths: int | None
    missing_paths: int
    dead_ends: list[tuple[int, str]] = field(default_factory=list)
    unreachable: list[tuple[str, str]] = field(default_factory=list)
    credit_loops: bool | None = None
    loop_ports: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def all_paths_valid(self) -> bool:
        """Every CA-to-CA path was scanned and found."""
        return bool(self.ca_paths) and self.missing_paths == 0 and not self.dead_ends

    @property
    def completed(self) -> bool:
        """The report got to the credit-loop verdict (its last step)."""
        return self.credit_loops is not None

    @property
    def ok(self) -> bool:
        """All CA-to-CA paths valid, the credit-loop check ran and found none,
        no ``-E-`` line (the exit status is ignored: see the module doc)."""
        return self.all_paths_valid and self.credit_loops is False and not self.errors


def _int(m: re.Match[str] | None, group: int = 1) -> int | None:
    return int(m.group(group)) if m else None


def parse_ibdmchk(
    stdout: str, stderr: str = "", returncode: int = 0, args: tuple[str, ...] = ()
) -> IbdmchkReport:
    """Parse an ``ibdmchk`` verification report (see the module doc)."""
    text = stdout + "\n" + stderr
    nodes = _NODES.search(text)
    fdbs = _FDBS.search(text)
    missing = _MISSING.search(text)
    if "credit loops in routing" in text or _LOOP_ON.search(text):
        loops: bool | None = True
    elif "no credit loops found" in text:
        loops = False
    else:
        loops = None
    return IbdmchkReport(
        args=args,
        returncode=returncode,
        stdout=stdout,
        stderr=stderr,
        systems=_int(nodes, 1),
        nodes=_int(nodes, 2),
        fdb_entries=_int(fdbs, 1),
        fdb_switches=_int(fdbs, 2),
        ca_paths=_int(_SCANNED.search(text)),
        missing_paths=int(missing.group(1)) if missing else 0,
        dead_ends=[(int(m.group(1)), m.group(2)) for m in _DEAD_END.finditer(text)],
        unreachable=[(m.group(1), m.group(2)) for m in _NO_PATH.finditer(text)],
        credit_loops=loops,
        loop_ports=[m.group(1) for m in _LOOP_ON.finditer(text)],
        errors=[ln.strip() for ln in text.splitlines() if ln.startswith("-E-")],
    )


def run_ibdmchk(
    fdbs: str | os.PathLike[str],
    subnet_lst: str | os.PathLike[str],
    *,
    mcfdbs: str | os.PathLike[str] | None = None,
    lmc: int = 0,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 600.0,
) -> IbdmchkReport:
    """Run ``ibdmchk -s SUBNET_LST -f FDBS -m MCFDBS [-l LMC]`` and parse it.

    ``mcfdbs`` ``None`` writes an empty ``opensm.mcfdbs`` beside ``fdbs``
    (unless one is already there).  Raises
    :class:`~smroute.lab.sim.ToolMissingError` if ibdmchk is not installed
    and :class:`~smroute.lab.sim.ToolTimeoutError` after ``timeout`` s;
    a non-zero exit is reported, not raised.
    """
    exe = require_tool("ibdmchk")
    fdbs_p = Path(fdbs).resolve()
    if mcfdbs is None:
        mc = fdbs_p.with_name("opensm.mcfdbs")
        if not mc.exists():
            mc.write_text("")
    else:
        mc = Path(mcfdbs).resolve()
    args = [exe, "-s", str(Path(subnet_lst).resolve()), "-f", str(fdbs_p), "-m", str(mc)]
    if lmc:
        args += ["-l", str(int(lmc))]
    returncode, out, err = run_in_group(
        args, timeout=timeout, cwd=cwd if cwd is not None else fdbs_p.parent, name="ibdmchk"
    )
    return parse_ibdmchk(
        out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), returncode,
        tuple(args),
    )
