"""The routing-engine interface and the registry of engines.

An engine (:class:`Engine`) turns a switch graph into forwarding tables.
It states what it guarantees (:class:`Guarantees`), prepares its costs,
dividers and destinations from the switch graph and the LMC
(:meth:`Engine.prepare`), lays out the arrays its kernel reads
(:meth:`Engine.arrays`), runs its kernel on a block of switches
(:meth:`Engine.kernel`: what the pool's workers call), lists its
whole-table passes in order (:meth:`Engine.passes`, each with an optional
split into parallel parts) and may have an incremental hook
(:attr:`Engine.incremental`, :mod:`smroute.routing.reroute`).  The pool
(:mod:`smroute.routing.pool`), the mode chain (:mod:`smroute.routing.modes`)
and the daemon know engines only through this interface.

:data:`REGISTRY` maps each engine's name to it; adding an engine is one
entry there (docs/ARCHITECTURE.md, "Adding an engine").
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from smroute.errors import RoutingError
from smroute.fabric.model.arrays import Fabric
from smroute.routing.dmodc import Destinations
from smroute.routing.topology import SwitchGraph

__all__ = ["DEFAULT", "Arrays", "Engine", "Guarantees", "Pass", "Prepared", "REGISTRY",
           "Runner", "engine", "names", "register"]

#: Named arrays an engine's kernel and passes read (the pool's shared
#: memory); ``"table"`` ``(S, W)`` uint8 is the table being routed.
Arrays = dict[str, np.ndarray]


@dataclass(frozen=True)
class Guarantees:
    """What an engine promises.

    closer_groups: every route takes a port group towards a switch with an
    up*/down* path to its target, closer to it (Dmodc's costs) or, at a
    leaf with a shortcut, one rank up (Nmodc,
    :mod:`smroute.routing.nmodc.shortcuts`): every pair with a path is
    routed by construction, and the mode chain's turns and detours apply.
    incremental: it has an incremental reroute hook that gives the same
    tables as a full route.
    dmodc_tables: its tables equal Dmodc's on complete PGFTs.  trees_only:
    it routes fat-trees only (no ``updown`` fallback).  lab_only: offered by
    the lab commands only, never by ``serve``, the daemon config, the plugin
    or ``order``.  detours_by_load: the mode chain's detours choose among
    candidates by link load (:mod:`smroute.routing.detour_load`).
    stateless: its tables are a function of :class:`Prepared` alone, so a
    stored table set is resumed by recomputing that structure around it
    (else it is routed again and compared).
    """

    closer_groups: bool = True
    incremental: bool = False
    dmodc_tables: bool = False
    trees_only: bool = False
    lab_only: bool = False
    detours_by_load: bool = False
    stateless: bool = False


@dataclass(frozen=True, eq=False)
class Prepared:
    """What an engine routes with: the graph, encoded costs ``(S, S)``
    uint8, dividers ``(S,)`` int64, the end-ports' topological NIDs ``(E,)``,
    the destinations, and the engine's own data (``aux``, opaque to the
    rest: Nmodc's nominal slots)."""

    graph: SwitchGraph
    costs: np.ndarray
    dividers: np.ndarray
    nids: np.ndarray
    dest: Destinations
    aux: Any = None


@dataclass(frozen=True)
class Pass:
    """A whole-table pass over ``arrays["table"]``, in place.

    ``run(arrays, part)``: ``part`` ``None`` for the whole table, else one
    of ``parts(k)``'s index arrays.  With ``parts`` (at most ``k`` parts
    that may run in parallel), ``run`` must be a module-level function (the
    pool's workers receive it by reference); without, it runs in the
    calling process and may be a closure.  ``optional``: it only evens
    loads; where the mode chain then leaves destinations no orientation
    serves on one VL, the tables are routed again without the last optional
    pass, then without the last two, and so on
    (:func:`smroute.routing.engine.route`)."""

    name: str
    run: Callable[[Arrays, np.ndarray | None], None]
    parts: Callable[[int], list[np.ndarray]] | None = None
    optional: bool = False


class Runner(Protocol):
    """What runs an engine's kernel and passes over a whole table: the
    pool (:meth:`smroute.routing.pool.RoutePool.run`)."""

    def run(self, engine: Engine, prep: Prepared, *, rows: np.ndarray | None = None,
            table: np.ndarray | None = None, passes: Sequence[Pass] | None = None
            ) -> np.ndarray: ...


class Engine(Protocol):
    """A routing engine (module doc).  Engines are module-level instances
    (the pool's workers receive them by reference)."""

    name: str
    title: str
    guarantees: Guarantees
    #: whether :meth:`tables` routes in a :class:`~smroute.routing.pool.RoutePool`
    pooled: bool

    @property
    def incremental(self) -> object | None:
        """Its part of the incremental reroute: an instance of
        :class:`smroute.routing.reroute.IncrementalHook`, or ``None``."""

    def prepare(self, g: SwitchGraph, lmc: int | None, clock: Callable[[], float],
                timings: dict[str, float], costs: np.ndarray | None = None) -> Prepared:
        """Costs (``costs`` where the caller knows them), dividers and
        destinations of ``g`` (``timings["costs"]`` and ``timings["nids"]``
        measured with ``clock``)."""

    def tables(self, fabric: Fabric, prep: Prepared, pool: Runner | None) -> np.ndarray:
        """The ``(S, max_lid + 1)`` uint8 tables of ``prep``."""

    def arrays(self, prep: Prepared) -> Arrays:
        """The arrays :meth:`kernel` and :meth:`passes` read."""

    def kernel(self, a: Arrays, switches: np.ndarray, out: np.ndarray,
               cache: dict[str, Any]) -> None:
        """Rows ``out`` ``(len(switches), W)`` of ``switches`` (ascending);
        ``cache``: per-job data kept between blocks of one process."""

    def passes(self, prep: Prepared) -> Sequence[Pass]:
        """The whole-table passes after the kernel, in order."""


#: Every engine by name, in the order they are offered (read it through
#: :func:`names` and :func:`engine`, which register the built-in ones first).
REGISTRY: dict[str, Engine] = {}
#: The engine used when none is named: Nmodc (Dmodc's tables where the tree
#: lost nothing, in Dmodc's time; nominal slots where it did).  The one
#: switch: the CLI, the daemon, its config, the plugin's daemon, ``order``,
#: ``lids`` and the study read it.
DEFAULT = "nmodc"


def _builtin() -> None:
    """Register the built-in engines (once; their modules import this one,
    so they are imported on first use, not with it)."""
    if "smroute.routing.builtin" not in sys.modules:
        importlib.import_module("smroute.routing.builtin")


def register(e: Engine) -> Engine:
    """Add ``e`` to :data:`REGISTRY` (replacing an engine of its name)."""
    _builtin()
    REGISTRY[e.name] = e
    return e


def names(*, lab: bool = False) -> tuple[str, ...]:
    """The registered engines' names; ``lab=False``: without the lab-only ones."""
    _builtin()
    return tuple(n for n, e in REGISTRY.items() if lab or not e.guarantees.lab_only)


def engine(name: str, *, lab: bool = True) -> Engine:
    """The engine called ``name``; :class:`~smroute.errors.RoutingError`
    naming the choices if none is (or, ``lab=False``, if it is lab-only)."""
    _builtin()
    e = REGISTRY.get(name)
    if e is None or not (lab or not e.guarantees.lab_only):
        raise RoutingError(f"unknown algorithm {name!r}; expected one of {names(lab=lab)}")
    return e



#: The switch-graph fields a kernel reads (the pool shares them as ``g_<field>``).
GRAPH_FIELDS = ("sw_guid", "rank", "grp_first", "grp_count", "grp_switch", "grp_remote",
                "grp_port_first", "grp_port_count", "grp_ports")
#: The destination fields (shared as ``d_<field>``).
DEST_FIELDS = ("lid", "nid", "target", "local_port", "is_switch", "owner")


def base_arrays(prep: Prepared) -> Arrays:
    """The arrays every kernel built on Dmodc's costs reads: costs ``c``,
    dividers ``pi``, the graph's and the destinations' fields."""
    g, dest = prep.graph, prep.dest
    out: Arrays = {"c": prep.costs, "pi": prep.dividers}
    out.update({"g_" + f: getattr(g, f) for f in GRAPH_FIELDS})
    out.update({"d_" + f: getattr(dest, f) for f in DEST_FIELDS})
    return out


def graph_from(a: Arrays) -> SwitchGraph:
    """The switch graph of :func:`base_arrays` (the fields a kernel reads;
    the others empty)."""
    empty = np.zeros(0, dtype=np.int64)
    return SwitchGraph(
        sw_node=empty, sw_guid=a["g_sw_guid"], sw_lid=empty, n_up=empty,
        grp_switch=a["g_grp_switch"],
        ep_row=empty, ep_switch=empty, ep_switch_port=empty, ep_lid=empty, ep_lmc=empty,
        ep_agg=empty.astype(bool),
        is_leaf=empty.astype(bool), component=empty,
        rank=a["g_rank"], grp_first=a["g_grp_first"], grp_count=a["g_grp_count"],
        grp_remote=a["g_grp_remote"], grp_port_first=a["g_grp_port_first"],
        grp_port_count=a["g_grp_port_count"], grp_ports=a["g_grp_ports"],
    )


def dest_from(a: Arrays) -> Destinations:
    """The destinations of :func:`base_arrays`."""
    return Destinations(**{f: a["d_" + f] for f in DEST_FIELDS})


def subset(dest: Destinations, sel: np.ndarray) -> Destinations:
    """The destinations ``sel`` (indices into ``dest``) as columns ``0 ..
    len(sel) - 1`` (their LIDs renumbered so): what a kernel routes to fill
    a block of columns of a table."""
    return Destinations(
        lid=np.arange(len(sel), dtype=np.int64), nid=dest.nid[sel], target=dest.target[sel],
        local_port=dest.local_port[sel], is_switch=dest.is_switch[sel], owner=dest.owner[sel])
