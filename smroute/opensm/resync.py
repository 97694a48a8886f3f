"""How the OpenSM bridge follows a daemon that restarted (:func:`resync`).

A daemon start is visible as a new ``Epoch.instance_id`` (and, without a
state database, as epoch ids that start again).  If the restarted daemon
routes the bridge's base fabric (it resumed from its state database, or
loaded the same file), the down set it holds (``GetEpoch(include_down_items)``)
becomes the one the bridge has reported, and its current epoch is written
once more; the next check sends what differs from discovery.  Otherwise the
bridge loads the fabric again (``load`` live/discover) or forgets its down
set (``load`` none) so that the next check re-sends it.
"""

from __future__ import annotations

from typing import Any

from smroute.fabric.faults import DownSet, FaultEventError, apply_events
from smroute.fabric.model.arrays import Fabric
from smroute.opensm.bridge_ops import BridgeOps
from smroute.opensm.bridge_state import BridgeError
from smroute.service.errors import ServiceError
from smroute.service.rpc.messages import events_from_msgs

__all__ = ["daemon_down_set", "resync"]


def daemon_down_set(base: Fabric, ep: Any) -> DownSet | None:
    """The down set of a daemon ``Epoch`` message read with ``include_down_items``,
    as items of ``base`` (links by the bridge's own first end); ``None`` if an
    item is not in ``base``."""
    try:
        events = events_from_msgs(ep.down_items)
        return apply_events(base, DownSet(), events, "daemon down items")
    except (FaultEventError, ServiceError):
        return None


def _adopt(b: BridgeOps, ep: Any) -> bool:
    """Take the restarted daemon's down set if it routes ``b``'s base fabric."""
    if b.base is None or ep.base_fabric_hash != b.base.content_hash:
        return False
    full = b.call("GetEpoch", b.client.get_epoch, int(ep.id), include_down_items=True)
    down = daemon_down_set(b.base, full)
    if down is None:
        return False
    b.state.down, b.daemon_instance = down, str(full.instance_id)
    b.save_state()
    b.epoch_queue.put(int(full.id))  # written again at the next turn of the run loop
    b.log("info", "daemon_restarted", instance=full.instance_id, epoch=full.id,
          resumed=full.resumed, down=down.summary())
    return True


def resync(b: BridgeOps) -> bool:
    """:meth:`Bridge.resync` (module doc): True if the bridge resynchronized,
    False if the daemon is the one it follows; :class:`BridgeError` while the
    daemon is unreachable."""
    import grpc

    try:
        ep = b.client.get_epoch(0)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.UNAVAILABLE or b.opts.load == "none":
            # down (retry later; no discovery storm meanwhile), or nothing we can do
            raise BridgeError(f"daemon GetEpoch: {exc.code().name}: "
                              f"{exc.details()}") from None
        b.log("warning", "daemon_has_no_epoch", detail=exc.details())
        ep = None
    if ep is not None and int(ep.id) >= b.state.written_epoch and \
            ep.instance_id == b.daemon_instance:
        return False
    b.state.written_epoch = 0  # write the daemon's current epoch once more
    b.last_tables = None
    if ep is not None and _adopt(b, ep):
        return True
    if b.opts.load != "none":
        b.initialize(reason="daemon restarted")
    else:
        b.state.down = DownSet()
        b.save_state()
    return True
