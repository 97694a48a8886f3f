"""The generated gRPC code is fresh and importable as smroute.service.rpc._gen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_code_is_fresh_and_a_package() -> None:
    r = subprocess.run([sys.executable, "scripts/gen_proto.py", "--check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    from smroute.service.rpc._gen import smroute_pb2, smroute_pb2_grpc

    assert smroute_pb2.DESCRIPTOR.package == "smroute.v1"
    assert smroute_pb2.DESCRIPTOR.name == "smroute/v1/smroute.proto"
    svc = smroute_pb2.DESCRIPTOR.services_by_name["Smroute"]
    assert {m.name for m in svc.methods} == {
        "LoadFabric", "Route", "GetTables", "ApplyFaults", "Diff", "Watch", "GetEpoch",
        "Analyze", "SelectLids", "RouteSubnet", "GetLanes"}
    assert hasattr(smroute_pb2_grpc, "SmrouteStub")
    text = (ROOT / "smroute/service/rpc/_gen/smroute_pb2_grpc.py").read_text()
    assert "from smroute.v1 import" not in text


def test_check_ignores_generator_versions_only() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_proto
    finally:
        sys.path.pop(0)
    a = "# Protobuf Python Version: 7.35.1\nx = 1\nGRPC_GENERATED_VERSION = '1.85.1'\n"
    b = "# Protobuf Python Version: 8.0.0\nx = 1\nGRPC_GENERATED_VERSION = '1.90.0'\n"
    assert gen_proto.normalized(a) == gen_proto.normalized(b)
    assert gen_proto.normalized(a) != gen_proto.normalized(a.replace("x = 1", "x = 2"))
