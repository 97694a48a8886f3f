"""Nmodc: Dmodc with nominal slots for degraded trees (the engine,
:mod:`.engine`; its incremental reroute, :mod:`.incremental`).  Its kernel
and passes: :mod:`smroute.routing.nmodc.nominal` (the kernel),
:mod:`smroute.routing.nmodc.descent` (its way down where the low digit sends
every arrival one way), :mod:`smroute.routing.nmodc.balance` (redirects by
load) and :mod:`smroute.routing.nmodc.even_cables` (even up cables)."""
