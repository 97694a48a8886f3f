"""Node orders and job host lists (:mod:`smroute.analysis.patterns` describes
orders): which end-port each participant (an MPI rank) runs on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from smroute.analysis.paths import RoutingView
from smroute.errors import InputError

if TYPE_CHECKING:
    from smroute.routing.engine import RoutingResult

__all__ = [
    "host_finder",
    "host_order",
    "parse_job",
    "random_order",
    "read_job",
    "resolve_job",
    "topological_order",
    "topological_order_from",
]

IntArray = npt.NDArray[np.int64]


def topological_order_from(view: RoutingView, ep_row: npt.ArrayLike,
                           nids: npt.ArrayLike) -> IntArray:
    """End-ports sorted by NID: ``ep_row`` ``(K,)`` fabric port rows and their
    ``nids`` ``(K,)`` (e.g. ``RoutingResult.graph.ep_row`` and
    ``RoutingResult.nids``).  Rows that are not end-ports of ``view`` (router
    ports) are skipped.  Returns ``(N,)`` int64 end-port indices."""
    eps = view.endports_of_rows(ep_row)
    t = np.asarray(nids, dtype=np.int64)
    keep = eps >= 0
    return eps[keep][np.argsort(t[keep], kind="stable")]


def topological_order(view: RoutingView, result: RoutingResult) -> IntArray:
    """Order by Dmodc's topological NIDs of a
    :class:`~smroute.routing.engine.RoutingResult` (its ``graph.ep_row`` and
    ``nids``) routed on the same fabric.  ``(N,)`` int64 end-port indices."""
    return topological_order_from(view, result.graph.ep_row, result.nids)


def random_order(view: RoutingView | int, rng: np.random.Generator,
                 participants: npt.ArrayLike | None = None) -> IntArray:
    """A uniformly random order of ``participants`` (end-port indices; default:
    every end-port of the view, or ``0 .. view - 1`` for an int)."""
    if participants is None:
        n = view if isinstance(view, int) else view.n_endports
        base = np.arange(n, dtype=np.int64)
    else:
        base = np.asarray(participants, dtype=np.int64)
    return rng.permutation(base)


def host_order(view: RoutingView, hosts: Sequence[str | int]) -> IntArray:
    """End-ports of a job allocation, in the given order.

    Each item names a host by node description (exact), by node GUID or by
    port GUID (an int, or a ``"0x..."`` string).  A node names its first
    end-port (lowest CA port number); a port GUID names that port.  Raises
    :class:`~smroute.errors.InputError` for unknown or ambiguous names and
    for hosts listed twice."""
    find = host_finder(view)
    arr = np.asarray([find(item) for item in hosts], dtype=np.int64)
    if len(np.unique(arr)) != len(arr):
        vals, counts = np.unique(arr, return_counts=True)
        e = int(vals[counts > 1][0])
        raise InputError(f"host listed twice: {view.describe_endport(e)}")
    return arr


def host_finder(view: RoutingView) -> Callable[[str | int], int]:
    """A function naming host -> end-port index (see :func:`host_order`),
    its lookup tables built once."""
    f = view.fabric
    by_node: dict[int, int] = {}
    for e in np.lexsort((f.port_num[view.ep_row], view.ep_node)).tolist():
        by_node.setdefault(int(view.ep_node[e]), e)
    by_desc: dict[str, list[int]] = {}
    for node in by_node:
        by_desc.setdefault(f.node_desc[node], []).append(node)
    by_pguid = {int(g): e for e, g in enumerate(view.ep_guid.tolist()) if g}
    by_nguid = {int(f.node_guid[n]): e for n, e in by_node.items()}

    def find(item: str | int) -> int:
        key: int | None = None
        if isinstance(item, int | np.integer):
            key = int(item)
        elif item.lower().startswith("0x") and item not in by_desc:
            try:
                key = int(item, 16)
            except ValueError:
                key = None
        if key is not None:
            if key in by_pguid:
                return by_pguid[key]
            if key in by_nguid:
                return by_nguid[key]
            raise InputError(f"no end-port or CA with GUID {key:#018x}")
        nodes = by_desc.get(str(item))
        if not nodes:
            raise InputError(f"no CA with node description {item!r}")
        if len(nodes) > 1:
            raise InputError(f"node description {item!r} names {len(nodes)} CAs; use GUIDs")
        return by_node[nodes[0]]

    return find


def parse_job(lines: Iterable[str], source: str = "<job>") -> list[tuple[int, str]]:
    """A job's host list, one host per line in rank order: a node description
    (exact) or a node/port GUID (``0x...``), as :func:`host_order` takes
    them.  ``#`` starts a comment; blank lines are skipped.  Returns
    ``(line number, host)`` pairs; raises :class:`~smroute.errors.InputError`
    for an empty list."""
    out: list[tuple[int, str]] = []
    for no, raw in enumerate(lines, 1):
        text = raw.split("#", 1)[0].strip()
        if text:
            out.append((no, text))
    if not out:
        raise InputError("no host listed (one node description or 0x-GUID per line)",
                         source=source)
    return out


def read_job(path: str) -> list[tuple[int, str]]:
    """:func:`parse_job` of a file."""
    from smroute.fileio import read_lines

    try:
        lines = read_lines(path)
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", source=path) from None
    return parse_job(lines, path)


def resolve_job(view: RoutingView, entries: Sequence[tuple[int, str]],
                source: str = "<job>") -> IntArray:
    """End-port indices ``(n,)`` int64 of a job's ``(line, host)`` entries
    (see :func:`parse_job`), in rank order.  Unknown, ambiguous and repeated
    hosts raise :class:`~smroute.errors.InputError` naming ``source`` and the
    line."""
    find = host_finder(view)
    seen: dict[int, int] = {}
    for no, h in entries:
        try:
            e = find(h)
        except InputError as err:
            raise InputError(err.message, source=source, line=no) from None
        if e in seen:
            raise InputError(f"host {h!r} listed twice (first on line {seen[e]})",
                             source=source, line=no)
        seen[e] = no
    return np.fromiter(seen, dtype=np.int64, count=len(seen))
