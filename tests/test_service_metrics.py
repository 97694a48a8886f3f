"""Daemon metrics: a private registry per ServiceMetrics, the real HTTP /metrics
server on loopback (scraped over HTTP, counters move), histogram buckets,
label bounds, and errors for bad / busy addresses."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from smroute.errors import InputError, SmrouteError
from smroute.service.metrics import (
    MAX_LABEL_VALUES,
    ROUTE_BUCKETS,
    ServiceMetrics,
    start_metrics_server,
)


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of a real HTTP scrape."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_scrape_over_http_and_counters_move():
    m = ServiceMetrics(clock=lambda: 1_790_000_000.0)
    with start_metrics_server("127.0.0.1:0", m) as srv:
        assert srv.port > 0 and srv.host == "127.0.0.1"
        assert srv.url == f"http://127.0.0.1:{srv.port}/metrics"
        before = scrape(srv.url)
        assert before[("smroute_build_info", (("version", "0.1.0"),))] == 1.0
        assert ("smroute_requests_total", (("code", "OK"), ("method", "Route"))) not in before
        assert before[("smroute_epochs_committed_total", ())] == 0.0

        m.request("Route", "OK")
        m.request("Route", "OK")
        m.request("ApplyFaults", "FAILED_PRECONDITION")
        m.observe_route(0.41, "route")
        m.observe_route(0.004, "reroute")
        m.observe_route(0.2, "reroute")
        m.epoch_committed(7, 21_000_000)
        m.faults_received(36, "link_down")
        m.faults_received(1, "switch_down")
        m.stream_opened("GetTables")
        m.stream_opened("GetTables")
        m.stream_opened("Watch")
        m.stream_closed("GetTables")
        m.reroute_failed("unroutable")

        after = scrape(srv.url)
    rq = "smroute_requests_total"
    assert after[(rq, (("code", "OK"), ("method", "Route")))] == 2.0
    assert after[(rq, (("code", "FAILED_PRECONDITION"), ("method", "ApplyFaults")))] == 1.0
    assert after[("smroute_request_errors_total", (("method", "ApplyFaults"),))] == 1.0
    assert ("smroute_request_errors_total", (("method", "Route"),)) not in after
    assert after[("smroute_route_seconds_count", (("kind", "route"),))] == 1.0
    assert after[("smroute_route_seconds_count", (("kind", "reroute"),))] == 2.0
    assert after[("smroute_route_seconds_sum", (("kind", "reroute"),))] == pytest.approx(0.204)
    # bucket boundaries: 4 ms is in le=0.005, not in le=0.0025; 0.2 s in le=0.2
    b = "smroute_route_seconds_bucket"
    assert after[(b, (("kind", "reroute"), ("le", "0.0025")))] == 0.0
    assert after[(b, (("kind", "reroute"), ("le", "0.005")))] == 1.0
    assert after[(b, (("kind", "reroute"), ("le", "0.2")))] == 2.0
    assert after[(b, (("kind", "route"), ("le", "0.3")))] == 0.0
    assert after[(b, (("kind", "route"), ("le", "0.5")))] == 1.0
    assert after[(b, (("kind", "route"), ("le", "+Inf")))] == 1.0
    assert after[("smroute_routes_total", (("kind", "reroute"),))] == 2.0
    assert after[("smroute_epochs_committed_total", ())] == 1.0
    assert after[("smroute_epoch_id", ())] == 7.0
    assert after[("smroute_table_bytes", ())] == 21_000_000.0
    assert after[("smroute_epoch_committed_timestamp_seconds", ())] == 1_790_000_000.0
    assert after[("smroute_fault_events_total", (("kind", "link_down"),))] == 36.0
    assert after[("smroute_fault_events_total", (("kind", "switch_down"),))] == 1.0
    assert after[("smroute_streams_open", (("method", "GetTables"),))] == 1.0
    assert after[("smroute_streams_open", (("method", "Watch"),))] == 1.0
    assert after[("smroute_reroute_failures_total", (("reason", "unroutable"),))] == 1.0
    # the server is closed: nothing listens on its port any more
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(srv.url, timeout=2)
    srv.close()  # idempotent


def test_buckets_cover_1ms_to_60s():
    assert ROUTE_BUCKETS[0] == 0.001 and ROUTE_BUCKETS[-1] == 60.0
    assert list(ROUTE_BUCKETS) == sorted(set(ROUTE_BUCKETS))
    # neighbouring buckets at most 2.5x apart: a percentile is never off by more
    assert all(b / a <= 2.5 for a, b in zip(ROUTE_BUCKETS, ROUTE_BUCKETS[1:], strict=False))
    assert 0.3 in ROUTE_BUCKETS  # the reroute target of issue 5


def test_registries_are_private():
    a, b = ServiceMetrics(), ServiceMetrics()
    a.request("Route", "OK")
    assert a.value("smroute_requests_total", method="Route", code="OK") == 1.0
    assert b.value("smroute_requests_total", method="Route", code="OK") is None
    assert REGISTRY.get_sample_value("smroute_requests_total",
                                     {"method": "Route", "code": "OK"}) is None
    assert b"smroute_requests_total" in a.exposition()


def test_label_values_are_bounded():
    m = ServiceMetrics()
    for i in range(MAX_LABEL_VALUES + 50):
        m.reroute_failed(f"reason {i}: " + "x" * 500)
    text = m.exposition().decode()
    reasons = [ln for ln in text.splitlines() if ln.startswith("smroute_reroute_failures_total{")]
    assert len(reasons) == MAX_LABEL_VALUES + 1  # + "other"
    assert m.value("smroute_reroute_failures_total", reason="other") == 50.0
    assert max(len(ln) for ln in reasons) < 200
    with pytest.raises(ValueError):
        m.faults_received(-1, "link_down")


def test_ipv6_loopback_and_errors():
    m = ServiceMetrics()
    if socket.has_ipv6:
        try:
            srv = start_metrics_server("[::1]:0", m)
        except SmrouteError as err:  # no IPv6 loopback configured on this host
            pytest.skip(f"no ::1: {err}")
        with srv:
            assert srv.url == f"http://[::1]:{srv.port}/metrics"
            assert ("smroute_build_info", (("version", "0.1.0"),)) in scrape(srv.url)
    with pytest.raises(InputError, match="metrics_listen"):
        start_metrics_server("unix:/tmp/x.sock", m)
    with pytest.raises(InputError, match="metrics_listen"):
        start_metrics_server("9464", m)
    with start_metrics_server("127.0.0.1:0", m) as first, \
            pytest.raises(SmrouteError, match="cannot listen"):
        start_metrics_server(f"127.0.0.1:{first.port}", m)
