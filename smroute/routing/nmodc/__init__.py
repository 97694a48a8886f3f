"""Nmodc: Dmodc with nominal slots for degraded trees (the engine,
:mod:`.engine`; its incremental reroute, :mod:`.incremental`).  Its kernel
and passes: :mod:`smroute.routing.nmodc.nominal` (the kernel),
:mod:`smroute.routing.nmodc.balance` (redirects by load),
:mod:`smroute.routing.nmodc.down_offsets` (down-cable offsets) and
:mod:`smroute.routing.nmodc.even_cables` (even up cables)."""
