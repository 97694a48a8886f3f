"""Load test of a real daemon (bounded, loopback only): 16 clients stream the
full tables in a loop while 4 senders deliver 100 fault events (one per
ApplyFaults call) on the 648-host fixture.

Checked: every stream is one complete epoch (the checksum over the streamed
tables equals the header's, and equals the epoch's own checksum), a client
never sees epoch ids go backwards, a Watch stream sees strictly increasing
ids, no event is lost (the final epoch's tables equal the engine's tables of
the fabric minus exactly the links whose last event was "down"), and the
daemon stays up.  The figures are printed (run with ``-s``) for the README.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from service_daemon import ROOT, start_daemon

from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.fabric.model.base import NodeType
from smroute.routing.engine import route
from smroute.service.epochs import table_checksum
from smroute.service.rpc.client import SmrouteClient, link_down, link_up, pb
from smroute.tables.diff import diff_tables

FIXTURE = str(ROOT / "fixtures" / "pgft-2level-648.topo")
N_CLIENTS = 16
N_SENDERS = 4


@pytest.mark.slow
def test_16_streaming_clients_during_100_fault_events(tmp_path: Path) -> None:
    f = read_topology(FIXTURE)
    sw = f.node_type == NodeType.SWITCH
    inter = np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])
    rng = np.random.default_rng(5)
    links = rng.choice(inter, size=60, replace=False)
    ends = [(int(f.node_guid[f.port_node[f.link_a[li]]]), int(f.port_num[f.link_a[li]]))
            for li in links]
    # 60 link-down events, then link-up for the first 40: 100 events; 20 stay down
    plans: list[list[pb.FaultEvent]] = [[] for _ in range(N_SENDERS)]
    for i, (g, p) in enumerate(ends):
        plans[i % N_SENDERS].append(link_down(g, p))
    for i, (g, p) in enumerate(ends[:40]):
        plans[i % N_SENDERS].append(link_up(g, p))
    assert sum(len(p) for p in plans) == 100
    still_down = links[40:]

    # the 16 readers, 4 senders and the watcher share this process's one
    # connection, so the daemon sees them as one client: allow them all
    cfg = tmp_path / "smroute.yaml"
    cfg.write_text("limits:\n  max_streams_per_client: 64\n")
    d = start_daemon(tmp_path / "d", "--config", str(cfg), "--coalesce-ms", "20",
                     "--epoch-history", "16", fabric=FIXTURE, workers=2)
    errors: list[str] = []
    senders_done = threading.Event()
    seen: list[list[tuple[int, str, str]]] = [[] for _ in range(N_CLIENTS)]
    watched: list[int] = []
    replies: list[pb.ApplyFaultsResponse] = []
    lock = threading.Lock()

    def reader(k: int) -> None:
        with SmrouteClient(d.address, timeout=120) as c:
            try:
                while True:
                    last = senders_done.is_set()
                    snap = c.tables()  # raises if the stream is not one complete epoch
                    seen[k].append((snap.epoch, snap.header.tables_sha256,
                                    table_checksum(snap.tables)))
                    if last:
                        return
            except Exception as err:  # noqa: BLE001 - collected and asserted below
                errors.append(f"reader {k}: {err!r}")

    def sender(k: int) -> None:
        r = np.random.default_rng(100 + k)
        with SmrouteClient(d.address, timeout=120) as c:
            try:
                for ev in plans[k]:
                    out = c.apply_faults([ev])
                    with lock:
                        replies.append(out)
                    time.sleep(float(r.uniform(0.0, 0.05)))
            except Exception as err:  # noqa: BLE001
                errors.append(f"sender {k}: {err!r}")

    def watcher(c: SmrouteClient, stream: object) -> None:
        try:
            for ep in stream:  # type: ignore[attr-defined]
                watched.append(ep.id)
        except Exception as err:  # noqa: BLE001 - cancelled at the end
            if "CANCELLED" not in repr(err):
                errors.append(f"watch: {err!r}")

    try:
        wc = SmrouteClient(d.address)
        stream = wc.watch()
        wt = threading.Thread(target=watcher, args=(wc, stream))
        wt.start()
        t0 = time.monotonic()
        readers = [threading.Thread(target=reader, args=(k,)) for k in range(N_CLIENTS)]
        senders = [threading.Thread(target=sender, args=(k,)) for k in range(N_SENDERS)]
        for t in readers + senders:
            t.start()
        for t in senders:
            t.join(300)
        t_events = time.monotonic() - t0
        senders_done.set()
        for t in readers:
            t.join(300)
        elapsed = time.monotonic() - t0
        time.sleep(0.5)
        stream.cancel()
        wt.join(30)
        wc.close()

        assert not errors, errors
        assert d.proc.poll() is None
        with SmrouteClient(d.address) as c:
            assert c.health() == "SERVING"
            final = c.get_epoch()
            assert final.down_links == len(still_down)
            got = c.tables().tables
            kept = {e: c.get_epoch(e).tables_sha256 for e in range(1, final.id + 1)
                    if _kept(c, e)}
        expect = route(f.with_removed(links=still_down), workers=1, lmc=0).tables
        assert diff_tables(got, expect).identical
        # every stream: complete (own checksum == header) and ids never go backwards
        streams = 0
        by_epoch: dict[int, set[str]] = {}
        for k in range(N_CLIENTS):
            ids = [e for e, _, _ in seen[k]]
            assert ids == sorted(ids), f"client {k} saw epochs go backwards: {ids}"
            for e, head, own in seen[k]:
                assert head == own
                by_epoch.setdefault(e, set()).add(head)
            streams += len(seen[k])
        assert all(len(v) == 1 for v in by_epoch.values())
        for e, sha in kept.items():
            if e in by_epoch:
                assert by_epoch[e] == {sha}
        assert watched == sorted(set(watched)) and watched[-1] == final.id
        n_epochs = final.id - 1
        assert n_epochs < 100  # coalesced
        reroute = [r.epoch.timings.get("event_to_commit", 0.0) for r in replies if r.committed]
        print(f"\nLOAD: {N_CLIENTS} clients, 100 events in {len(replies)} calls over "
              f"{t_events:.1f} s -> {n_epochs} epochs (coalesced); {streams} complete table "
              f"streams in {elapsed:.1f} s ({streams / elapsed:.1f}/s, "
              f"{len(by_epoch)} distinct epochs seen); event->commit median "
              f"{np.median(reroute):.3f} s max {max(reroute):.3f} s; watch saw "
              f"{len(watched)} epochs; daemon up")
    finally:
        assert d.stop() == 0


def _kept(c: SmrouteClient, e: int) -> bool:
    import grpc

    try:
        c.get_epoch(e)
        return True
    except grpc.RpcError:
        return False
