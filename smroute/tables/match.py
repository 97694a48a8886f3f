"""Do forwarding tables belong to a fabric?

Tables analysed against the wrong fabric give numbers that look plausible
("congestion risk 0") while every flow is lost, so :func:`check_tables_fit`
refuses tables that cannot be the given fabric's:

* a table switch whose GUID is no switch of the fabric;
* a route to a LID above the fabric's highest LID (LMC ranges included);
* a route out of a port the switch does not have (above its port count).

Fabric switches the tables leave out are no error (``ibroute`` of one switch,
a partial ``dump_fts``): they are returned as a note.
"""

from __future__ import annotations

import numpy as np

from smroute.errors import InputError
from smroute.fabric.model.arrays import Fabric
from smroute.tables.lft import NO_ROUTE, ForwardingTables
from smroute.text import excerpt

__all__ = ["check_tables_fit"]

_SHOWN = 3  # examples named per problem


def _guids(values: np.ndarray) -> str:
    shown = ", ".join(f"{int(g):#018x}" for g in values[:_SHOWN].tolist())
    return shown + (f" and {len(values) - _SHOWN} more" if len(values) > _SHOWN else "")


def check_tables_fit(fabric: Fabric, tables: ForwardingTables, *, tables_source: str,
                     fabric_source: str) -> str | None:
    """Raise :class:`InputError` (naming ``tables_source`` and
    ``fabric_source``) if ``tables`` cannot route ``fabric`` (module doc);
    else return a note on the fabric switches without a table, or ``None``."""
    sw = fabric.switches.astype(np.int64)
    fab_guid = fabric.node_guid[sw].astype(np.uint64)
    t_guid = tables.switch_guid.astype(np.uint64)
    where = f"(--fabric {fabric_source}: is it the fabric these tables route?)"
    unknown = ~np.isin(t_guid, fab_guid)
    if unknown.any():
        raise InputError(f"{int(unknown.sum())} of {tables.n_switches} switches in the tables "
                         f"are no switch of the fabric: {_guids(t_guid[unknown])} {where}",
                         source=tables_source)
    routed = tables.ports != NO_ROUTE
    top = len(fabric.lid_to_port) - 1
    if routed.shape[1] > top + 1 and routed[:, top + 1:].any():
        beyond = np.flatnonzero(routed[:, top + 1:].any(axis=0)) + top + 1
        raise InputError(f"the tables route LIDs up to {int(beyond[-1])} ({len(beyond)} above "
                         f"the fabric's highest LID {top}) {where}", source=tables_source)
    order = np.argsort(fab_guid)
    node = sw[order[np.searchsorted(fab_guid[order], t_guid)]]  # fabric node of each table row
    n_ports = fabric.num_ports[node].astype(np.int64)
    over = routed & (tables.ports.astype(np.int64) > n_ports[:, None])
    if over.any():
        i, lid = (int(x) for x in np.argwhere(over)[0])
        raise InputError(
            f"switch {int(t_guid[i]):#018x} ({excerpt(fabric.node_desc[node[i]])}) routes "
            f"LID {lid} "
            f"to port {int(tables.ports[i, lid])} but has {int(n_ports[i])} ports in the "
            f"fabric ({int(over.any(axis=1).sum())} switches route to ports they lack) {where}",
            source=tables_source)
    missing = ~np.isin(fab_guid, t_guid)
    if missing.any():
        return (f"{int(missing.sum())} of the fabric's {len(sw)} switches have no table "
                f"({_guids(fab_guid[missing])}): they route nothing")
    return None
