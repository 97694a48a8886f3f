"""A small typed client of the routing daemon (``smroute.v1.Smroute``).

Used by tests, benchmarks and the OpenSM bridge::

    with SmrouteClient(default_target()) as c:   # unix:/run/smroute/smroute.sock
        c.load_fabric_path("/var/lib/smroute/fabrics/fabric.topo")  # inside fabric_dirs
        ep = c.route()
        snap = c.tables()                      # every switch, checksum verified
        out = c.apply_faults([link_down(0x...., 3)])
        delta = c.tables(since_epoch=ep.id, since_instance=ep.instance_id)
        tables = delta.patch(snap.tables)      # == c.tables(out.epoch.id).tables, verified
        header, tables = c.tables_update(snap.tables, ep.id, since_instance=ep.instance_id)
        for e in c.watch():                    # committed epochs, current first
            ...
        sel = c.select_lids(["node01", "node02"], pattern="ring")  # LMC > 0 epochs
        lanes = c.lanes()                      # SLs and SL-to-VL tables (detours over VLs)

Every RPC of ``smroute.v1.Smroute`` has a method: LoadFabric
(:meth:`SmrouteClient.load_fabric_text`, ``_path``, ``_live``), Route, GetTables
(:meth:`~SmrouteClient.tables`, :meth:`~SmrouteClient.tables_update`),
ApplyFaults, Diff, Watch (:meth:`~SmrouteClient.watch`,
:meth:`~SmrouteClient.epochs`), GetEpoch, Analyze, SelectLids, RouteSubnet and
GetLanes; :meth:`~SmrouteClient.health` asks grpc.health.v1.  The messages are
``smroute.service.rpc.client.pb`` (generated from proto/smroute/v1/smroute.proto).

Errors are ``grpc.RpcError`` (``.code()``, ``.details()``) as raised by grpc.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import grpc
import numpy as np

from smroute.service.epochs import table_checksum
from smroute.service.rpc._gen import smroute_pb2 as pb
from smroute.service.rpc._gen import smroute_pb2_grpc as pb_grpc
from smroute.service.rpc.listen import DEFAULT_LISTEN
from smroute.tables.lft import BLOCK, NO_ROUTE, ForwardingTables

__all__ = [
    "ADDRESS_ENV",
    "SmrouteClient",
    "default_target",
    "TablesSnapshot",
    "TablesChecksumError",
    "ca_down",
    "ca_up",
    "link_down",
    "link_up",
    "switch_down",
    "switch_up",
    "pb",
]


def link_down(guid: int, port: int) -> pb.FaultEvent:
    """A LINK_DOWN event for port ``port`` of node ``guid``."""
    return pb.FaultEvent(kind=pb.FaultEvent.LINK_DOWN, node_guid=guid, port=port)


def link_up(guid: int, port: int) -> pb.FaultEvent:
    """A LINK_UP event for port ``port`` of node ``guid``."""
    return pb.FaultEvent(kind=pb.FaultEvent.LINK_UP, node_guid=guid, port=port)


def switch_down(guid: int) -> pb.FaultEvent:
    """A SWITCH_DOWN event for switch ``guid``."""
    return pb.FaultEvent(kind=pb.FaultEvent.SWITCH_DOWN, node_guid=guid)


def switch_up(guid: int) -> pb.FaultEvent:
    """A SWITCH_UP event for switch ``guid``."""
    return pb.FaultEvent(kind=pb.FaultEvent.SWITCH_UP, node_guid=guid)


def ca_down(guid: int) -> pb.FaultEvent:
    """A CA_DOWN event for CA ``guid``."""
    return pb.FaultEvent(kind=pb.FaultEvent.CA_DOWN, node_guid=guid)


def ca_up(guid: int) -> pb.FaultEvent:
    """A CA_UP event for CA ``guid``."""
    return pb.FaultEvent(kind=pb.FaultEvent.CA_UP, node_guid=guid)


class TablesChecksumError(Exception):
    """A GetTables stream (full, or a delta once patched) did not match its
    header's checksum."""


@dataclass(frozen=True)
class TablesSnapshot:
    """One GetTables stream: the header and the switch messages in order."""

    header: pb.TablesHeader
    switches: tuple[pb.SwitchTable, ...]

    @property
    def epoch(self) -> int:
        """The epoch the stream is of."""
        return int(self.header.epoch)

    @property
    def blocks(self) -> int:
        """64-LID blocks sent, over every switch."""
        return sum(len(s.blocks) for s in self.switches)

    @cached_property
    def tables(self) -> ForwardingTables:
        """The switches of this stream as :class:`ForwardingTables` (blocks not
        sent are NO_ROUTE; use :meth:`patch` for ``since_epoch`` streams)."""
        sw = [s for s in self.switches if not s.removed]
        width = int(self.header.max_lid) + 1
        nb = -(-width // BLOCK)
        ports = np.full((len(sw), nb * BLOCK), NO_ROUTE, dtype=np.uint8)
        for i, s in enumerate(sw):
            _fill(ports[i], s.blocks)
        return ForwardingTables(
            switch_guid=np.array([s.guid for s in sw], dtype=np.uint64),
            switch_lid=np.array([s.lid for s in sw], dtype=np.int64),
            switch_desc=tuple(s.desc for s in sw),
            ports=ports[:, :width],
        )

    def verify(self) -> None:
        """Check a full, unfiltered stream against ``header.tables_sha256``."""
        got = table_checksum(self.tables)
        if got != self.header.tables_sha256:
            raise TablesChecksumError(
                f"epoch {self.epoch}: tables checksum {got} != header {self.header.tables_sha256}")

    def patch(self, old: ForwardingTables, *, verify: bool = True) -> ForwardingTables:
        """Apply a ``since_epoch`` stream to the tables of that epoch: changed
        blocks replaced, new switches added, removed switches dropped.  A full
        stream (``header.since_epoch`` 0: the daemon restarted, or that epoch
        is no longer kept) is the new tables by itself.  ``verify``: check the
        result against ``header.tables_sha256`` (:class:`TablesChecksumError`:
        ``old`` was not the tables of ``since_epoch``; fetch in full, as
        :meth:`SmrouteClient.tables_update` does); off for a stream restricted
        to some switches."""
        if not self.header.since_epoch:
            if verify:
                self.verify()
            return self.tables
        new = self._patched(old)
        if verify:
            got = table_checksum(new)
            if got != self.header.tables_sha256:
                raise TablesChecksumError(
                    f"epoch {self.epoch} patched from epoch {self.header.since_epoch}: "
                    f"checksum {got} != header {self.header.tables_sha256}")
        return new

    def _patched(self, old: ForwardingTables) -> ForwardingTables:
        width = int(self.header.max_lid) + 1
        nb = -(-width // BLOCK)
        removed = {int(s.guid) for s in self.switches if s.removed}
        keep = [i for i, g in enumerate(old.switch_guid.tolist()) if int(g) not in removed]
        rows = {int(old.switch_guid[i]): k for k, i in enumerate(keep)}
        new_sw = [s for s in self.switches if not s.removed and int(s.guid) not in rows]
        rows.update((int(s.guid), len(keep) + k) for k, s in enumerate(new_sw))
        ports = np.full((len(keep) + len(new_sw), nb * BLOCK), NO_ROUTE, dtype=np.uint8)
        w = min(old.ports.shape[1], nb * BLOCK)
        ports[:len(keep), :w] = old.ports[keep, :w]
        guid = [int(old.switch_guid[i]) for i in keep] + [int(s.guid) for s in new_sw]
        lid = [int(old.switch_lid[i]) for i in keep] + [int(s.lid) for s in new_sw]
        desc = [old.switch_desc[i] for i in keep] + [s.desc for s in new_sw]
        for s in self.switches:
            if s.removed:
                continue
            r = rows[int(s.guid)]
            lid[r], desc[r] = int(s.lid), s.desc
            _fill(ports[r], s.blocks)
        return ForwardingTables(
            switch_guid=np.array(guid, dtype=np.uint64), switch_lid=np.array(lid, np.int64),
            switch_desc=tuple(desc), ports=ports[:, :width],
        )


def _fill(row: np.ndarray, blocks: Sequence[pb.LftBlock]) -> None:
    """Write ``blocks`` into ``row`` (``(nb * 64,)`` uint8), vectorized."""
    if not blocks:
        return
    data = b"".join(b.ports for b in blocks)
    idx = np.fromiter((b.index for b in blocks), dtype=np.int64, count=len(blocks))
    nb = len(row) // BLOCK
    if len(data) != BLOCK * len(blocks) or int(idx.max()) >= nb:
        bad = next(b for b in blocks if len(b.ports) != BLOCK or b.index >= nb)
        raise ValueError(f"block {bad.index}: {len(bad.ports)} bytes; expected {BLOCK} "
                         f"within {len(row)} LIDs")
    row.reshape(nb, BLOCK)[idx] = np.frombuffer(data, dtype=np.uint8).reshape(-1, BLOCK)


#: The environment variable naming the daemon's address (the OpenSM plugin's too).
ADDRESS_ENV = "SMROUTE_DAEMON"


def default_target(env: dict[str, str] | None = None) -> str:
    """``$SMROUTE_DAEMON`` when set (as the OpenSM plugin reads it), else
    the daemon's default listen address
    (:data:`~smroute.service.rpc.listen.DEFAULT_LISTEN`).  Over the Unix
    socket the daemon allows mutations by the client process's credentials
    (root, or the socket's group by default): run as such a user, no
    certificate needed."""
    import os

    value = (env if env is not None else os.environ).get(ADDRESS_ENV, "").strip()
    return value or DEFAULT_LISTEN


class SmrouteClient:
    """A channel to one daemon.  ``target``: ``host:port`` or ``unix:/path``
    (:func:`default_target`);
    ``credentials``: TLS channel credentials (see smroute.service.rpc.auth
    .client_credentials), ``None`` = plaintext; ``timeout``: default seconds per
    unary call."""

    def __init__(self, target: str, *, credentials: grpc.ChannelCredentials | None = None,
                 timeout: float = 120.0, max_message_bytes: int = 256 << 20,
                 server_name: str | None = None) -> None:
        opts: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
        ]
        if server_name:
            opts.append(("grpc.ssl_target_name_override", server_name))
        self.channel = (grpc.secure_channel(target, credentials, options=opts)
                        if credentials is not None else
                        grpc.insecure_channel(target, options=opts))
        self.stub = pb_grpc.SmrouteStub(self.channel)
        self.timeout = timeout

    def close(self) -> None:
        """Close the channel."""
        self.channel.close()

    def __enter__(self) -> SmrouteClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the channel is ready (``grpc.FutureTimeoutError`` after ``timeout`` s)."""
        grpc.channel_ready_future(self.channel).result(timeout=timeout)

    # ------------------------------------------------------------ calls
    def load_fabric_text(self, text: str, source_name: str = "") -> pb.FabricSummary:
        """LoadFabric from ibnetdiscover text sent inline."""
        r = self.stub.LoadFabric(pb.LoadFabricRequest(topology_text=text,
                                                      source_name=source_name),
                                 timeout=self.timeout)
        return r.fabric

    def load_fabric_path(self, path: str) -> pb.FabricSummary:
        """Load a topology file on the server: ``path`` must be absolute and
        resolve inside the daemon's ``fabric_dirs`` (else PERMISSION_DENIED)."""
        r = self.stub.LoadFabric(pb.LoadFabricRequest(path=path), timeout=self.timeout)
        return r.fabric

    def load_fabric_live(self, ca: str = "", port: int = 0, timeout_s: float = 0.0
                         ) -> pb.FabricSummary:
        """LoadFabric by live discovery on the daemon's host (0 / "" = defaults)."""
        r = self.stub.LoadFabric(pb.LoadFabricRequest(
            live=pb.LiveSource(ca=ca, port=port, timeout_s=timeout_s)), timeout=self.timeout)
        return r.fabric

    def route(self, algorithm: str = "", lmc: int | None = None, *,
              wait_validation: bool = False, confirm_state_loss: bool = False) -> pb.Epoch:
        """Route the loaded fabric; returns the committed epoch (``wait_validation``:
        once its validation is done; ``confirm_state_loss``: also on a degraded
        daemon, which then leaves that state)."""
        req = pb.RouteRequest(algorithm=algorithm, wait_validation=wait_validation,
                              confirm_state_loss=confirm_state_loss)
        if lmc is not None:
            req.lmc = lmc
        return self.stub.Route(req, timeout=self.timeout).epoch

    def get_epoch(self, epoch: int = 0, *, include_down_items: bool = False) -> pb.Epoch:
        """Epoch ``epoch`` (0 = current); ``include_down_items``: with every item
        down in it (``Epoch.down_items``)."""
        return self.stub.GetEpoch(pb.GetEpochRequest(epoch=epoch,
                                                     include_down_items=include_down_items),
                                  timeout=self.timeout)

    def tables(self, epoch: int = 0, *, switch_guids: Sequence[int] = (), since_epoch: int = 0,
               since_instance: str = "", verify: bool = True) -> TablesSnapshot:
        """One GetTables stream (``since_instance``: the instance ``since_epoch``
        came from; the daemon answers a full stream if it is not its own).
        ``verify``: check the checksum when the stream is full and unfiltered
        (raises :class:`TablesChecksumError`)."""
        it = self.stub.GetTables(pb.GetTablesRequest(epoch=epoch, switch_guids=switch_guids,
                                                     since_epoch=since_epoch,
                                                     since_instance=since_instance),
                                 timeout=self.timeout)
        header: pb.TablesHeader | None = None
        items: list[pb.SwitchTable] = []
        for msg in it:
            if msg.HasField("header"):
                header = msg.header
            else:
                items.append(msg.switch)
        if header is None:
            raise TablesChecksumError("GetTables stream ended without a header")
        if len(items) != header.switches:
            raise TablesChecksumError(f"epoch {header.epoch}: {len(items)} switch messages, "
                                      f"header announced {header.switches}")
        snap = TablesSnapshot(header, tuple(items))
        if verify and not switch_guids and not header.since_epoch:
            snap.verify()
        return snap

    def tables_update(self, old: ForwardingTables, since_epoch: int, *,
                      since_instance: str = "", epoch: int = 0
                      ) -> tuple[pb.TablesHeader, ForwardingTables]:
        """The tables of ``epoch`` (0 = current) from ``old``, the tables of
        ``since_epoch`` of instance ``since_instance``: only the changed blocks
        are sent and patched onto ``old``; the result is checked against the
        published checksum, and fetched in full if it does not match (or if the
        daemon sends the full tables: restarted, epoch no longer kept).
        Returns the header of the epoch served and its tables."""
        snap = self.tables(epoch, since_epoch=since_epoch, since_instance=since_instance)
        try:
            return snap.header, snap.patch(old)
        except TablesChecksumError:  # old was not that epoch's tables
            full = self.tables(epoch)
            return full.header, full.tables

    def apply_faults(self, events: Iterable[pb.FaultEvent], *, dry_run: bool = False,
                     max_entries: int = 0) -> pb.ApplyFaultsResponse:
        """ApplyFaults (``dry_run``: the diff only, ``max_entries`` changed entries listed)."""
        return self.stub.ApplyFaults(pb.ApplyFaultsRequest(
            events=list(events), dry_run=dry_run, max_entries=max_entries),
            timeout=self.timeout)

    def diff(self, epoch_a: int, epoch_b: int = 0, *, max_entries: int = 0
             ) -> pb.DiffResponse:
        """Diff between two kept epochs (``epoch_b`` 0 = current)."""
        return self.stub.Diff(pb.DiffRequest(epoch_a=epoch_a, epoch_b=epoch_b,
                                             max_entries=max_entries), timeout=self.timeout)

    def watch(self, timeout: float | None = None) -> Any:
        """The Watch stream (an iterator of :class:`pb.Epoch`, current first);
        call ``.cancel()`` on it to stop."""
        return self.stub.Watch(pb.WatchRequest(), timeout=timeout)

    def epochs(self, *, after: int = 0, timeout: float | None = None) -> Iterator[pb.Epoch]:
        """Committed epochs with ``id > after``, as they happen (for the bridge)."""
        stream = self.watch(timeout)
        try:
            for ep in stream:
                if ep.id > after:
                    yield ep
        finally:
            stream.cancel()

    def analyze(self, epoch: int = 0, *, order: str = "topological", seed: int = 0,
                rp_samples: int = 0) -> pb.AnalyzeResponse:
        """Congestion analysis of an epoch (see the AnalyzeRequest fields)."""
        return self.stub.Analyze(pb.AnalyzeRequest(epoch=epoch, order=order, seed=seed,
                                                   rp_samples=rp_samples),
                                 timeout=self.timeout)

    def select_lids(self, hosts: Sequence[str], *, pattern: str = "", per_stage: bool = False,
                    epoch: int = 0) -> pb.SelectLidsResponse:
        """SelectLids: the DLID of every (source, destination) rank of a job
        under LMC > 0.  ``hosts``: the job's hosts in rank order, each a node
        GUID as ``0x``-hex or a node description; ``pattern``: ``"shift"``
        (``""``, the default) or a collective such as ``"ring"``;
        ``per_stage``: the hot-spot degree of each stage too.  The answer's
        ``dlids`` is row-major ``n_ranks x n_ranks``."""
        return self.stub.SelectLids(pb.SelectLidsRequest(
            epoch=epoch, hosts=list(hosts), pattern=pattern, per_stage=per_stage),
            timeout=self.timeout)

    def lanes(self, epoch: int = 0) -> pb.Lanes:
        """GetLanes: the SLs and SL-to-VL tables of an epoch routed with
        detours over virtual lanes (``vls`` 1 and nothing else without)."""
        return self.stub.GetLanes(pb.GetLanesRequest(epoch=epoch), timeout=self.timeout)

    def route_subnet(self, request: pb.RouteSubnetRequest) -> pb.RouteSubnetResponse:
        """RouteSubnet: a subnet manager's view of the fabric (nodes, links,
        LMC) routed, answered with the validated epoch's tables (what the
        OpenSM plugin calls)."""
        return self.stub.RouteSubnet(request, timeout=self.timeout)

    def health(self, service: str = "") -> str:
        """The grpc.health.v1 status name (``SERVING``, ``NOT_SERVING``...)."""
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        stub = health_pb2_grpc.HealthStub(self.channel)
        r = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=self.timeout)
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(r.status))
