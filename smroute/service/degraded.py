"""The daemon's degraded state (:class:`Degraded`): part of the acknowledged
state could not be rebuilt at start (:func:`smroute.service.state.resume.read_state`
names it), or the state committed last could not be routed again, so no
tables are served until the operator says what is true now.

It ends with the subnet manager's view (RouteSubnet), a LoadFabric, or a
Route with ``confirm_state_loss`` (which routes the down set rebuilt), each
once it is done (:data:`ENDS`); the gauge ``smroute_state_degraded`` follows.
"""

from __future__ import annotations

from collections.abc import Callable

from smroute.fabric.faults import DownSet
from smroute.service.errors import ServiceError, Status

__all__ = ["ENDS", "Degraded"]

#: The transaction causes that end the degraded state once committed, and
#: what the log calls them.
ENDS = {"route": "Route with confirm_state_loss", "sm": "RouteSubnet"}


class Degraded:
    """What of the acknowledged state was lost (:attr:`lost`, ``""``: nothing),
    entered and left on the core's sequencer; ``log`` and ``metric`` are the
    core's (:meth:`smroute.service.core.RoutingCore.metric`)."""

    def __init__(self, log: Callable[..., None], metric: Callable[..., None]) -> None:
        self.log = log
        self.metric = metric
        #: what could not be rebuilt; while set no tables are served
        self.lost = ""

    def check(self, down: DownSet) -> None:
        """FAILED_PRECONDITION naming what was lost, while degraded (``down``:
        the down set rebuilt, which a confirmed Route routes)."""
        if self.lost:
            raise ServiceError(
                Status.FAILED_PRECONDITION,
                f"degraded, serving no tables: {self.lost}; this ends with the "
                f"subnet manager's view (RouteSubnet), a LoadFabric, or a Route with "
                f"confirm_state_loss (`smroute ctl route --confirm-state-loss`; routes "
                f"the down set rebuilt: {down.summary()})")

    def enter(self, lost: str, down: DownSet) -> None:
        """Serve no tables until :meth:`leave` (at start, before serving)."""
        self.lost = lost
        self.metric("state_degraded", True)
        self.log("error", "state_degraded", lost=lost, down=down.summary())

    def leave(self, how: str) -> None:
        """End the degraded state (``how``: what ended it)."""
        if self.lost:
            self.log("warning", "state_degraded_cleared", by=how, lost=self.lost)
            self.lost = ""
            self.metric("state_degraded", False)
