"""What a fault job resolves to (:class:`FaultOutcome`), and the would-be
epoch of a dry run (:func:`would_be`): the tables and diff a change would
give against the serving epoch, computed by the core's transaction
(:meth:`smroute.service.core.RoutingCore.change` with ``dry_run=True``) and
never committed (nor journaled)."""

from __future__ import annotations

from dataclasses import dataclass

from smroute.fabric.model.arrays import Fabric
from smroute.routing.engine import RoutingResult
from smroute.service.epochs import Epoch, FaultRecord
from smroute.service.sequencer import DownSet
from smroute.tables.diff import TableDiff

__all__ = ["FaultOutcome", "would_be"]


@dataclass(frozen=True)
class FaultOutcome:
    """What a fault job resolves to: the epoch serving after it, the diff against
    the epoch it replaced (``None`` if nothing changed), how many events the
    batch had, whether a new epoch was committed."""

    epoch: Epoch
    diff: TableDiff | None
    coalesced: int
    committed: bool


def would_be(parent: Epoch | None, fabric: Fabric, base: Fabric, down: DownSet,
             result: RoutingResult, lmc: int, timings: dict[str, float],
             faults: tuple[FaultRecord, ...], diff: TableDiff | None,
             instance: str) -> Epoch:
    """The pseudo-epoch (id 0, cause ``dry_run``) holding the tables and diff
    a change would give on top of ``parent``."""
    return Epoch(
        id=0, parent_id=parent.id if parent is not None else 0, cause="dry_run",
        fabric=fabric, base_hash=base.content_hash, result=result,
        algorithm=result.algorithm, lmc=lmc, timings=timings, faults=faults,
        down=down.counts, committed_at=0.0, diff=diff, down_items=down.items(),
        instance=instance,
    )
