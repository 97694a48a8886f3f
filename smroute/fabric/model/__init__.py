"""Immutable, numpy-backed model of an InfiniBand fabric.

Layout
------
* **Nodes** ``(N,)``: one row per switch, channel adapter (CA) or router.
* **Ports** ``(P,)``: dense per node: node ``i`` owns the rows
  ``port_start[i] .. port_start[i] + num_ports[i]`` (inclusive), i.e. port
  numbers ``0 .. num_ports[i]``.  Port 0 is a switch's management port (it
  carries the switch's LID); on CAs and routers port 0 does not exist and its
  row has ``port_exists == False``.  The row of port ``p`` of node ``i`` is
  ``port_start[i] + p``: lookups by ``(node, port)`` are arithmetic.
* **Links** ``(L,)``: ``link_a`` / ``link_b`` are port rows.  Parallel links
  between two nodes are separate links.  ``port_peer`` gives, per port row,
  the row at the other end of its link (``-1`` if none).

A :class:`Fabric` is built in one pass by :class:`FabricBuilder` and is never
mutated afterwards (all arrays are made read-only).

The pieces: node types, speeds and :class:`FabricError` are
:mod:`smroute.fabric.model.base`, :class:`Fabric` is :mod:`smroute.fabric.model.arrays`,
:class:`FabricBuilder` is :mod:`smroute.fabric.model.builder`; this module
re-exports them."""
