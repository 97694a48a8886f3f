"""The OpenSM bridge's dry run: what a change would do, writing nothing
(``smroute opensm-bridge --dry-run``; :meth:`smroute.opensm.bridge.Bridge.dry_run`)."""

from __future__ import annotations

from smroute.errors import InputError
from smroute.opensm.bridge_ops import BridgeOps
from smroute.opensm.bridge_state import DryRun, format_dry_run
from smroute.tables.diff import diff_tables, format_diff
from smroute.tables.formats import read_tables

__all__ = ["dry_run"]


def dry_run(bridge: BridgeOps, *, max_entries: int = 200) -> DryRun:
    """What a change would do; writes nothing.

    1. Re-discover and show the fault events pending against the daemon's
       state, with the daemon's dry-run diff per switch and 64-LID block.
    2. Diff the file OpenSM has (``lfts_file``) against the daemon's latest epoch.
    """
    b = bridge
    out: list[str] = []
    events, desired, warnings, _ = b.pending()
    out.append(f"fabric: {len(events)} pending fault events "
               f"(down now: {desired.summary()}, recorded: {b.state.down.summary()})")
    out += [f"  {e.describe()}" for e in events]
    out += [f"  not a fault (reload needed): {w}" for w in warnings]
    blocks = 0
    if events:
        resp = b.call("ApplyFaults", b.client.apply_faults, b.events_pb(events),
                       dry_run=True, max_entries=max_entries)
        out += format_dry_run(resp.diff, resp.changes, resp.truncated)
        blocks = int(resp.diff.blocks_changed)
    latest = b.call("GetEpoch", b.client.get_epoch, 0)
    new = b.fetch_tables(int(latest.id))
    try:
        old = read_tables(b.opts.lfts_file)
    except (OSError, InputError) as exc:
        out.append(f"OpenSM's file {b.opts.lfts_file}: unreadable ({exc}); the whole "
                   f"epoch {latest.id} would be written")
        return DryRun(tuple(out), tuple(events), blocks, None)
    d = diff_tables(old, new)
    out.append(f"OpenSM's file {b.opts.lfts_file} vs daemon epoch {latest.id}:")
    out += ["  " + ln for ln in format_diff(d, max_entries=max_entries)]
    return DryRun(tuple(out), tuple(events), blocks, int(d.blocks_changed))
