"""What a fault job resolves to (:class:`FaultOutcome`), and the dry run of
``ApplyFaults`` (:func:`run_dry`): the would-be tables and diff of a batch of
events against the serving epoch, computed on the core's sequencer and never
committed (nor journaled)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from smroute.errors import RoutingError
from smroute.service.epochs import Epoch, FaultRecord
from smroute.service.errors import ServiceError, Status
from smroute.service.faults import FaultJob, apply_events, degraded_fabric
from smroute.tables.diff import TableDiff

if TYPE_CHECKING:
    from smroute.service.core import RoutingCore

__all__ = ["FaultOutcome", "run_dry"]


@dataclass(frozen=True)
class FaultOutcome:
    """What a fault job resolves to: the epoch serving after it, the diff against
    the epoch it replaced (``None`` if nothing changed), how many events the
    batch had, whether a new epoch was committed."""

    epoch: Epoch
    diff: TableDiff | None
    coalesced: int
    committed: bool


def run_dry(core: RoutingCore, job: FaultJob) -> None:
    """Resolve ``job`` (a dry-run :class:`FaultJob`) with a pseudo-epoch (id 0)
    holding the tables and the diff its events would give."""
    cur = core.store.current
    base = core._need_base()
    if cur is None:
        raise ServiceError(Status.FAILED_PRECONDITION,
                           "no epoch committed yet: call Route first")
    down = apply_events(base, core.down, job.events)
    fabric = degraded_fabric(base, down)
    try:
        rr = core._reroute(cur, base, fabric)
    except RoutingError as err:
        raise ServiceError(Status.FAILED_PRECONDITION,
                           f"dry run: the fabric after these events cannot be routed: {err}"
                           ) from None
    res, diff, timings = rr.result, rr.diff, rr.timings
    pseudo = Epoch(
        id=0, parent_id=cur.id, cause="dry_run", fabric=fabric,
        base_hash=base.content_hash, result=res, algorithm=res.algorithm,
        lmc=core._lmc_of(res),
        timings=timings, faults=tuple(FaultRecord(e.kind, e.guid, e.port)
                                      for e in job.events),
        down=down.counts, committed_at=0.0, diff=diff, down_items=down.items(),
        instance=core.durable.instance,
    )
    job.future.set_result(FaultOutcome(pseudo, diff, len(job.events), False))
