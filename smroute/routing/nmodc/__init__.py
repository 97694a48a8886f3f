"""Nmodc: Dmodc with nominal slots for degraded trees (the engine,
:mod:`.engine`; its incremental reroute, :mod:`.incremental`).  Its kernel
and passes: :mod:`smroute.routing.nominal` (the kernel),
:mod:`smroute.routing.balance` (redirects by load),
:mod:`smroute.routing.down_offsets` (down-cable offsets) and
:mod:`smroute.routing.even_cables` (even up cables)."""
