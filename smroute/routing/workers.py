"""How many worker processes a one-shot routing uses when the user names none.

A :class:`~smroute.routing.pool.RoutePool` of more than one worker starts its
processes first (spawned interpreters importing numpy and smroute: about
0.3-0.5 s on an idle 2-core machine, more under load); routing in-process
costs nothing to start.  The routes' work grows with the switch-to-LID
entries of the tables, about 25-40 ns each in one process on such a machine,
so the pool can only win once half that work exceeds its start: above
:data:`IN_PROCESS_ENTRIES` entries (the 40,960-host tree's 160M entries);
the 11,664-host tree's 21.5M entries route faster in-process.  A daemon
keeps its pool for its lifetime and is not concerned: its ``workers`` stand.
"""

from __future__ import annotations

import os

__all__ = ["IN_PROCESS_ENTRIES", "workers_for"]

#: Switch-to-LID table entries up to which a one-shot routing stays in-process.
IN_PROCESS_ENTRIES = 32_000_000


def workers_for(n_switches: int, n_lids: int, given: int | None = None,
                cpus: int | None = None) -> int:
    """The worker count of one routing of ``n_switches`` switches and
    ``n_lids`` LIDs: ``given`` when the user named it, else 1 (in-process)
    up to :data:`IN_PROCESS_ENTRIES` entries and one per CPU above."""
    if given is not None:
        return given
    if n_switches * n_lids <= IN_PROCESS_ENTRIES:
        return 1
    return max(1, cpus if cpus is not None else os.cpu_count() or 1)
