"""How the daemon's transaction (:meth:`smroute.service.core.RoutingCore.change`)
says no: a route that fails (:func:`route_failed`) and tables that leave CA
pairs that cables join unrouted (:func:`gate`).  Each is counted (not for a
dry run), logged, and said as FAILED_PRECONDITION naming what keeps
serving; the last good epoch keeps serving.
"""

from __future__ import annotations

from collections.abc import Callable

from smroute.routing.engine import RoutingResult, commit_gaps
from smroute.service.core_api import CAUSES, Change
from smroute.service.epochs import Epoch
from smroute.service.errors import ServiceError, Status

__all__ = ["gate", "route_failed"]

Report = Callable[..., None]


def route_failed(c: Change, cur: Epoch | None, source: str, err: Exception,
                 metric: Report, log: Report) -> ServiceError:
    """The error for change ``c`` whose route failed with ``err`` (``cur``:
    the serving epoch, ``source``: the base fabric's), counted and logged."""
    serving = f"epoch {cur.id} keeps serving" if cur is not None else "no epoch is served"
    what = CAUSES.get(c.cause, c.cause).format(n=len(c.faults))
    if not c.dry_run:
        metric("reroute_failed", "route" if c.cause == "route" else "routing_error")
    log("error", "reroute_failed", cause=c.cause, events=len(c.faults),
        serving=cur.id if cur is not None else 0, error=str(err))
    return ServiceError(Status.FAILED_PRECONDITION,
                        f"{what} failed ({'nothing is committed' if c.dry_run else serving})"
                        f": cannot route {source or 'the fabric'}: {err}")


def gate(c: Change, res: RoutingResult, cur: Epoch | None, metric: Report, log: Report
         ) -> None:
    """Refuse tables that leave CA pairs that cables join unrouted
    (:func:`~smroute.routing.engine.commit_gaps`: the cheap first-hop check
    for engines that route every such pair by construction, the background
    walk following; the full walk now for the others)."""
    gaps = commit_gaps(res)
    if not gaps:
        return
    serving = cur.id if cur is not None else 0
    if not c.dry_run:
        metric("reroute_failed", "route" if c.cause == "route" else "unrouted_pairs")
    log("error", "epoch_refused", cause=c.cause, unrouted_ca_pairs=gaps,
        serving=serving, mode=res.mode, dry_run=c.dry_run)
    raise ServiceError(
        Status.FAILED_PRECONDITION,
        f"{'dry run: would be ' if c.dry_run else ''}refused to commit: the "
        f"{res.algorithm} tables leave {gaps} CA pairs that cables join unrouted; "
        + (f"epoch {serving} keeps serving" if serving else "no epoch is served"))
