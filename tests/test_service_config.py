"""Daemon config: every key, every class of bad value (with key path and line),
defensive YAML, listen addresses, sizes, cross-field rules, warnings, the
example deploy/smroute.yaml, and ``smroute check-config`` through the real CLI."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from smroute.cli.main import main as cli_main
from smroute.service.config import (
    MAX_CONFIG_BYTES,
    ConfigError,
    LimitsConfig,
    ServiceConfig,
    TlsConfig,
    config_to_dict,
    default_config,
    load_config,
    parse_config,
    parse_listen,
    parse_size,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "deploy" / "smroute.yaml"
SMROUTE = ROOT / ".venv" / "bin" / "smroute"

MiB = 1024 * 1024


def bad(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "t.yaml")
    err = ei.value
    assert err.exit_code == 2
    assert str(err).startswith("t.yaml:")
    return err


# --------------------------------------------------------------------------- defaults, every key


def test_empty_document_is_the_default_config():
    for text in ("", "\n# only a comment\n", "---\n", "~\n"):
        assert parse_config(text) == default_config()
    d = default_config()
    assert d.listen == "unix:/run/smroute/smroute.sock" and d.loopback_only
    assert d.workers == 2 and d.algorithm == "nmodc" and d.lmc is None  # the fabric's LMC
    assert d.epoch_history == 8 and d.fabric is None and d.coalesce_ms == 20.0
    assert d.fabric_dirs == ()
    assert d.tls is None and d.mutating_identities == ()
    assert d.metrics_listen == "127.0.0.1:9464"
    assert d.log_format == "json" and d.log_level == "info" and d.shutdown_grace_s == 5.0
    assert d.limits == LimitsConfig()
    assert d.limits.max_topology_bytes == 64 * MiB
    assert d.limits.max_message_bytes == 256 * MiB
    assert d.limits.max_receive_bytes == 80 * MiB
    assert d.warnings() == ()


FULL = """\
listen: "[::1]:6000"
workers: 4
algorithm: nmodc
lmc: 2
epoch_history: 3
fabric: topo/fabric.txt
fabric_dirs:
  - /var/lib/smroute/fabrics
  - "/srv/topologies/"
coalesce_ms: 0
tls:
  cert: certs/server.crt
  key: /abs/server.key
  client_ca: certs/ca.crt
  require_client_cert: true
mutating_identities:
  - opensm-bridge
  - "spiffe://fabric/operator"
allow_insecure_mutations: false
allow_insecure_listen: false
metrics_listen: "localhost:0"
log_format: text
log_level: debug
shutdown_grace_s: 0.5
limits:
  max_topology_bytes: 1MiB
  max_message_bytes: "16 MiB"
  max_receive_bytes: 2000000
  max_fault_events: 5
  max_streams: 3
  max_watchers: 2
  analyze_max_hosts: 100
"""


def test_lab_only_engines_are_not_offered():
    """D-mod-K routes complete generated trees only: the daemon's config
    refuses it, naming the engines it offers."""
    with pytest.raises(ConfigError, match="algorithm.*nmodc.*dmodc"):
        parse_config("algorithm: dmodk\n", "lab.yaml")


def test_every_key_is_read():
    cfg = parse_config(FULL, "full.yaml", base_dir="/etc/smroute")
    assert cfg.listen == "[::1]:6000" and cfg.loopback_only
    assert cfg.listen_address.host == "::1" and cfg.listen_address.port == 6000
    assert (cfg.workers, cfg.algorithm, cfg.lmc, cfg.epoch_history) == (4, "nmodc", 2, 3)
    assert cfg.fabric == Path("/etc/smroute/topo/fabric.txt")
    assert cfg.fabric_dirs == (Path("/var/lib/smroute/fabrics"), Path("/srv/topologies"))
    assert cfg.coalesce_ms == 0.0
    assert cfg.tls == TlsConfig(Path("/etc/smroute/certs/server.crt"), Path("/abs/server.key"),
                                Path("/etc/smroute/certs/ca.crt"), True)
    assert cfg.tls.mutual
    assert cfg.mutating_identities == ("opensm-bridge", "spiffe://fabric/operator")
    assert cfg.metrics_listen == "localhost:0"
    assert (cfg.log_format, cfg.log_level, cfg.shutdown_grace_s) == ("text", "debug", 0.5)
    assert cfg.limits == LimitsConfig(MiB, 16 * MiB, 2_000_000, 5, 3, 2, 100)
    # without base_dir relative paths stay as written (parse_config is pure)
    assert parse_config(FULL).fabric == Path("topo/fabric.txt")


def test_effective_config_round_trips_through_yaml():
    cfg = parse_config(FULL, base_dir="/etc/smroute")
    d = config_to_dict(cfg)
    assert d["limits"]["max_message_bytes"] == 16 * MiB
    assert d["tls"]["cert"] == "/etc/smroute/certs/server.crt"
    assert parse_config(yaml.safe_dump(d)) == cfg
    assert json.loads(json.dumps(config_to_dict(default_config())))["tls"] is None
    assert parse_config(yaml.safe_dump(config_to_dict(default_config()))) == default_config()


def test_every_schema_key_is_in_the_example_config():
    text = EXAMPLE.read_text()
    d = config_to_dict(default_config())
    for key, value in d.items():
        assert f"\n{key}:" in text, key
        if isinstance(value, dict):
            for sub in value:
                assert f"  {sub}:" in text, f"{key}.{sub}"
    for sub in ("cert", "key", "client_ca", "require_client_cert"):
        assert f"#   {sub}:" in text, f"tls.{sub}"


def test_example_config_is_the_default_and_loads(tmp_path):
    # the example shows the defaults; it loads with file checks (it names no files)
    assert load_config(EXAMPLE) == default_config()
    # the commented TLS example parses when uncommented
    text = EXAMPLE.read_text().replace("tls: null\n# tls:", "tls:").replace("#   ", "    ")
    text = text.replace("mutating_identities: []\n# mutating_identities:",
                        "mutating_identities:")
    cfg = parse_config(text, "example-tls.yaml")
    assert cfg.tls is not None and cfg.tls.mutual
    assert cfg.tls.key == Path("/run/credentials/smroute.service/server.key")
    assert cfg.mutating_identities == ("opensm-bridge.fabric.example",
                                       "spiffe://fabric.example/operator")


# --------------------------------------------------------------------------- bad values


@pytest.mark.parametrize("text,key,line,expect", [
    ("workers: 0", "workers", 1, "an integer 1..256"),
    ("workers: 2.5", "workers", 1, "an integer"),
    ("workers: true", "workers", 1, "an integer"),
    ("workers: '2'", "workers", 1, "an integer"),
    ("\n\nlmc: 8", "lmc", 3, "0..7"),
    ("lmc: -1", "lmc", 1, "0..7"),
    ("epoch_history: 1", "epoch_history", 1, "2..10000"),
    ("algorithm: ftree", "algorithm", 1, "dmodc"),
    ("fabric: 3", "fabric", 1, "a file path or null"),
    ("fabric: ''", "fabric", 1, "a file path"),
    ("coalesce_ms: -1", "coalesce_ms", 1, "milliseconds 0..60000"),
    ("coalesce_ms: .nan", "coalesce_ms", 1, "milliseconds"),
    ("coalesce_ms: fast", "coalesce_ms", 1, "milliseconds"),
    ("allow_insecure_mutations: yes please", "allow_insecure_mutations", 1, "true or false"),
    ("allow_insecure_listen: 1", "allow_insecure_listen", 1, "true or false"),
    ("log_format: xml", "log_format", 1, "json, text"),
    ("log_level: verbose", "log_level", 1, "debug, info"),
    ("shutdown_grace_s: 7200", "shutdown_grace_s", 1, "seconds 0..3600"),
    ("listen: 50051", "listen", 1, "'host:port'"),
    ("listen: localhost", "listen", 1, "'host:port'"),
    ("listen: '127.0.0.1:70000'", "listen", 1, "a port 0..65535"),
    ("listen: '127.0.0.1:http'", "listen", 1, "a port 0..65535"),
    ("listen: '::1:50051'", "listen", 1, "needs brackets"),
    ("listen: '[127.0.0.1]:5'", "listen", 1, "IPv6 address inside"),
    ("listen: '[::1]5'", "listen", 1, "'host:port'"),
    ("listen: 'bad_host!:5'", "listen", 1, "a host name or IP address"),
    ("listen: 'unix:relative.sock'", "listen", 1, "absolute socket path"),
    ("listen: 'unix:/" + "x" * 120 + "'", "listen", 1, "sun_path"),
    ("metrics_listen: 'unix:/run/m.sock'", "metrics_listen", 1, "no Unix socket"),
    ("metrics_listen: 9464", "metrics_listen", 1, "or null to disable"),
    ("mutating_identities: operator", "mutating_identities", 1, "a list"),
    ("mutating_identities:\n  - ok\n  - ''", "mutating_identities[1]", 3, "non-empty name"),
    ("mutating_identities: [a, 3]", "mutating_identities[1]", 1, "non-empty name"),
    ("mutating_identities: [[a]]", "mutating_identities[0]", 1, "a single value"),
    ("fabric_dirs: /var/lib/smroute", "fabric_dirs", 1, "a list of absolute directory paths"),
    ("fabric_dirs: null", "fabric_dirs", 1, "a list of absolute directory paths"),
    ("fabric_dirs:\n  - /ok\n  - fabrics", "fabric_dirs[1]", 3,
     "an absolute directory path (relative paths are not accepted here)"),
    ("fabric_dirs: [/ok, '']", "fabric_dirs[1]", 1, "an absolute directory path"),
    ("fabric_dirs: [5]", "fabric_dirs[0]", 1, "an absolute directory path"),
    ("fabric_dirs: [{a: 1}]", "fabric_dirs[0]", 1, "a single value"),
    ("limits:\n  max_topology_bytes: lots", "limits.max_topology_bytes", 2, "64MiB"),
    ("limits:\n  max_topology_bytes: 100", "limits.max_topology_bytes", 2, "1KiB.."),
    ("limits:\n  max_message_bytes: 4GiB", "limits.max_message_bytes", 2, "..2147483647"),
    ("limits:\n  max_receive_bytes: -5", "limits.max_receive_bytes", 2, "a size"),
    ("limits:\n  max_fault_events: 0", "limits.max_fault_events", 2, "1..10000000"),
    ("limits:\n  max_streams: 1.0", "limits.max_streams", 2, "an integer"),
    ("limits:\n  max_watchers: null", "limits.max_watchers", 2, "an integer"),
    ("limits:\n  analyze_max_hosts: 0", "limits.analyze_max_hosts", 2, "an integer"),
    ("limits: 5", "limits", 1, "a mapping"),
    ("tls: [a]", "tls", 1, "a mapping"),
    ("tls:\n  cert: a.crt\n  key: 5", "tls.key", 3, "a file path"),
    ("tls:\n  cert: a.crt\n  key: a.key\n  require_client_cert: 'no'",
     "tls.require_client_cert", 4, "true or false"),
    ("workers: [1, 2]", "workers", 1, "a single value, got a list"),
    ("workers: {a: 1}", "workers", 1, "a single value, got a mapping"),
    ("workers: 2020-01-01", "workers", 1, "unsupported YAML value type"),
])
def test_bad_values_name_key_line_and_expectation(text, key, line, expect):
    err = bad(text)
    assert err.key == key
    assert err.line == line
    assert expect in str(err)
    assert f"t.yaml:{line}: {key}: " in str(err)


@pytest.mark.parametrize("text,key,line,expect", [
    ("workerz: 2", "workerz", 1, "unknown key; expected one of: algorithm"),
    ("limits:\n  max_topology: 5", "limits.max_topology", 2, "max_topology_bytes"),
    ("tls:\n  cert: a\n  key: b\n  ca: c", "tls.ca", 4, "client_ca"),
    ("workers: 2\nlmc: 1\nworkers: 3", "workers", 3, "duplicate key (first given on line 1)"),
    ("1: 2", None, 1, "expected a key name"),
])
def test_unknown_and_duplicate_keys(text, key, line, expect):
    err = bad(text)
    assert (err.key, err.line) == (key, line)
    assert expect in str(err)


@pytest.mark.parametrize("text,key,line,expect", [
    # cross-field rules, reported at the key's line
    ("workers: 2\nlisten: '0.0.0.0:50051'", "listen", 2, "allow_insecure_listen: true"),
    ("listen: '[::]:1'", "listen", 1, "not a loopback"),
    ("listen: 'smroute.example:1'", "listen", 1, "not a loopback"),
    ("tls:\n  cert: a\n  key: b\n  require_client_cert: true", "tls.require_client_cert", 4,
     "needs tls.client_ca"),
    ("tls:\n  cert: a\n  key: b\n  client_ca: c", "tls.client_ca", 4,
     "would never be used"),
    ("tls:\n  cert: a", "tls.key", 1, "missing; expected a PEM file path"),
    ("tls:\n  key: a", "tls.cert", 1, "missing"),
    ("mutating_identities: [op]", "mutating_identities", 1, "expected mutual TLS"),
    ("tls:\n  cert: a\n  key: b\nmutating_identities: [op]", "mutating_identities", 4,
     "expected mutual TLS"),
    ("limits:\n  max_receive_bytes: 32MiB", "limits.max_topology_bytes", 1,
     "exceeds limits.max_receive_bytes (33554432)"),
])
def test_cross_field_rules(text, key, line, expect):
    err = bad(text)
    assert (err.key, err.line) == (key, line)
    assert expect in str(err)


def test_yaml_syntax_errors_have_lines():
    err = bad("workers: 2\nlisten: [\n")
    assert err.key is None and "not valid YAML" in str(err) and err.line is not None
    err = bad("a: 1\n  b: 2\n")
    assert err.line == 2
    err = bad("workers: 2\n---\nworkers: 3\n")
    assert "not valid YAML" in str(err) and "single document" in str(err)
    err = bad("- workers: 2\n")
    assert "a mapping of keys at the top level" in str(err)
    err = bad("just a string\n")
    assert "a mapping of keys at the top level" in str(err)


def test_anchors_aliases_and_tags_are_refused():
    err = bad("workers: &w 2\nlmc: 1\nepoch_history: *w\n")
    assert "anchors and aliases" in str(err) and err.line == 1
    err = bad("limits: &l {max_streams: 3}\n")
    assert "anchors" in str(err)
    # a billion-laughs document is refused at the first anchor, before expansion
    lol = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(1, 9):
        prev = chr(ord("a") + i - 1)
        cur = chr(ord("a") + i)
        lol += f"{cur}: &{cur} [{', '.join(['*' + prev] * 9)}]\n"
    assert "anchors" in str(bad(lol))
    err = bad("workers: !!int 2\n")
    assert "explicit YAML tags" in str(err)
    err = bad("listen: !!python/object/apply:os.system ['true']\n")
    assert "explicit YAML tags" in str(err)
    err = bad("tls: !custom {cert: a, key: b}\n")
    assert "explicit YAML tags" in str(err)


def test_size_bound(tmp_path):
    text = "# " + "x" * MAX_CONFIG_BYTES + "\n"
    assert "expected at most" in str(bad(text))
    p = tmp_path / "big.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match="larger than"):
        load_config(p)


# --------------------------------------------------------------------------- units


@pytest.mark.parametrize("value,n", [
    (4096, 4096), ("4096", 4096), ("64MiB", 64 * MiB), ("64 mib", 64 * MiB),
    ("1KB", 1000), ("1KiB", 1024), ("1.5GiB", 3 * 512 * MiB), ("2GB", 2_000_000_000),
    ("10B", 10), ("1TiB", 1024**4),
])
def test_parse_size(value, n):
    assert parse_size(value) == n


@pytest.mark.parametrize("value", ["", "MiB", "-1", "1 XB", "1e6", True, None, 1.5, -3, "1 MiB B"])
def test_parse_size_rejects(value):
    with pytest.raises(ValueError, match="expected a size"):
        parse_size(value)


@pytest.mark.parametrize("text,kind,host,port,path,loop", [
    ("127.0.0.1:50051", "tcp", "127.0.0.1", 50051, "", True),
    ("127.1.2.3:0", "tcp", "127.1.2.3", 0, "", True),
    ("localhost:1", "tcp", "localhost", 1, "", True),
    ("[::1]:5", "tcp", "::1", 5, "", True),
    ("0.0.0.0:50051", "tcp", "0.0.0.0", 50051, "", False),
    ("[::]:50051", "tcp", "::", 50051, "", False),
    ("[fe80::1]:7", "tcp", "fe80::1", 7, "", False),
    ("10.0.0.1:7", "tcp", "10.0.0.1", 7, "", False),
    ("sm1.example.org:7", "tcp", "sm1.example.org", 7, "", False),
    ("unix:/run/smroute/s.sock", "unix", "", 0, "/run/smroute/s.sock", True),
    ("unix:///run/smroute/s.sock", "unix", "", 0, "/run/smroute/s.sock", True),
])
def test_parse_listen(text, kind, host, port, path, loop):
    a = parse_listen(text)
    assert (a.kind, a.host, a.port, a.path, a.is_loopback) == (kind, host, port, path, loop)
    assert parse_listen(a.grpc_address) == a


# --------------------------------------------------------------------------- overrides, warnings


def test_replace_validates_overrides():
    cfg = default_config()
    assert dataclasses.replace(cfg, workers=8).workers == 8
    with pytest.raises(ConfigError) as ei:
        dataclasses.replace(cfg, listen="0.0.0.0:50051")
    assert ei.value.key == "listen"
    with pytest.raises(ConfigError, match="workers: expected an integer 1..256, got 0"):
        dataclasses.replace(cfg, workers=0)
    with pytest.raises(ConfigError, match="algorithm"):
        dataclasses.replace(cfg, algorithm="updn")
    ok = dataclasses.replace(cfg, listen="0.0.0.0:50051", allow_insecure_listen=True)
    assert not ok.loopback_only
    assert dataclasses.replace(cfg, mutating_identities=["a"],  # type: ignore[arg-type]
                               tls=TlsConfig("c", "k", "ca", True)).mutating_identities == ("a",)
    assert dataclasses.replace(cfg, fabric_dirs=["/x"]).fabric_dirs == (Path("/x"),)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"fabric_dirs\[1\]: expected an absolute directory"):
        dataclasses.replace(cfg, fabric_dirs=(Path("/x"), Path("rel")))
    with pytest.raises(ConfigError, match="fabric_dirs: expected a list"):
        dataclasses.replace(cfg, fabric_dirs="/x")  # type: ignore[arg-type]


def test_warnings():
    w = parse_config("listen: '0.0.0.0:1'\nallow_insecure_listen: true").warnings()
    assert any("plaintext gRPC on a non-loopback address" in x for x in w)
    assert any("mutating RPCs (LoadFabric, Route, ApplyFaults, RouteSubnet) are refused" in x
               for x in w)
    w = parse_config("listen: '0.0.0.0:1'\nallow_insecure_listen: true\n"
                     "allow_insecure_mutations: true").warnings()
    assert any("any client that can connect to 0.0.0.0:1 can load fabrics" in x for x in w)
    w = parse_config("listen: '127.0.0.1:1'\nallow_insecure_mutations: true").warnings()
    assert any("any client that can connect to 127.0.0.1:1 can load fabrics" in x for x in w)
    w = parse_config("listen: '0.0.0.0:1'\ntls: {cert: a, key: b}").warnings()
    assert w == ("TLS without client certificates on 0.0.0.0:1: mutating RPCs are refused "
                 "(they need mutual TLS: tls.client_ca and tls.require_client_cert: true)",)
    mtls = "tls: {cert: a, key: b, client_ca: c, require_client_cert: true}\n"
    w = parse_config("listen: '0.0.0.0:1'\n" + mtls).warnings()
    assert len(w) == 1 and "any client with a certificate from tls.client_ca" in w[0]
    assert parse_config("listen: '0.0.0.0:1'\nmutating_identities: [op]\n" + mtls).warnings() == ()
    w = parse_config("metrics_listen: '0.0.0.0:9464'\n"
                     "metrics_tls: {cert: a, key: b}").warnings()
    assert len(w) == 1 and "HTTPS without client certificates" in w[0]
    assert any("has no effect" in x
               for x in parse_config("allow_insecure_mutations: true").warnings())
    assert parse_config("metrics_listen: null").metrics_listen is None
    assert parse_config("tls: null").tls is None
    w = parse_config("limits: {max_message_bytes: 1MiB, max_topology_bytes: 1MiB}").warnings()
    assert any("GetTables of large fabrics may fail" in x for x in w)


# --------------------------------------------------------------------------- load_config (files)


def test_load_config_resolves_and_checks_files(tmp_path):
    d = tmp_path / "etc"
    d.mkdir()
    (d / "fabric.topo").write_text("# topology\n")
    (d / "cfg.yaml").write_text("workers: 1\nfabric: fabric.topo\n")
    cfg = load_config(d / "cfg.yaml")
    assert cfg.fabric == d / "fabric.topo"
    (d / "cfg.yaml").write_text("workers: 1\n\nfabric: missing.topo\n")
    with pytest.raises(ConfigError) as ei:
        load_config(d / "cfg.yaml")
    assert ei.value.key == "fabric" and ei.value.line == 3
    assert str(ei.value).startswith(f"{d / 'cfg.yaml'}:3: fabric: no such file: ")
    assert load_config(d / "cfg.yaml", check_files=False).fabric == d / "missing.topo"
    (d / "cfg.yaml").write_text(f"fabric: {d}\n")
    with pytest.raises(ConfigError, match="fabric: expected a regular file"):
        load_config(d / "cfg.yaml")
    (d / "cfg.yaml").write_text("tls:\n  cert: fabric.topo\n  key: nokey.pem\n")
    with pytest.raises(ConfigError, match=r"cfg.yaml:3: tls.key: no such file"):
        load_config(d / "cfg.yaml")
    (d / "bin.yaml").write_bytes(b"workers: \xff\n")
    with pytest.raises(ConfigError, match="expected UTF-8"):
        load_config(d / "bin.yaml")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(d / "absent.yaml")


def test_load_config_checks_fabric_dirs(tmp_path):
    fab = tmp_path / "fabrics"
    fab.mkdir()
    (tmp_path / "c.yaml").write_text(f"fabric_dirs: [{fab}]\n")
    assert load_config(tmp_path / "c.yaml").fabric_dirs == (fab,)
    (tmp_path / "c.yaml").write_text(f"workers: 1\nfabric_dirs:\n  - {fab}\n"
                                     f"  - {tmp_path / 'missing'}\n")
    with pytest.raises(ConfigError) as ei:
        load_config(tmp_path / "c.yaml")
    assert (ei.value.key, ei.value.line) == ("fabric_dirs[1]", 4)
    assert str(ei.value) == (f"{tmp_path / 'c.yaml'}:4: fabric_dirs[1]: no such directory: "
                             f"{tmp_path / 'missing'}")
    (tmp_path / "f.topo").write_text("x\n")
    (tmp_path / "c.yaml").write_text(f"fabric_dirs: [{tmp_path / 'f.topo'}]\n")
    with pytest.raises(ConfigError, match=r"c.yaml:1: fabric_dirs\[0\]: expected a directory"):
        load_config(tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.yaml", check_files=False).fabric_dirs == (
        tmp_path / "f.topo",)


def test_serve_fabric_dir_flags_replace_the_config(tmp_path):
    import argparse

    from smroute.cli.serve_cmd import config_from_args, register
    from smroute.errors import InputError

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (tmp_path / "c.yaml").write_text(f"fabric_dirs: [{a}]\n")
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["serve", "--config", str(tmp_path / "c.yaml")])
    assert config_from_args(args)[0].fabric_dirs == (a,)
    args = parser.parse_args(["serve", "--config", str(tmp_path / "c.yaml"),
                              "--fabric-dir", str(b), "--fabric-dir", str(a)])
    cfg, over = config_from_args(args)
    assert cfg.fabric_dirs == (b, a) and over["fabric_dirs"] == (b, a)
    args = parser.parse_args(["serve", "--fabric-dir", str(tmp_path / "nope")])
    with pytest.raises(InputError, match="--fabric-dir .*nope: no such directory"):
        config_from_args(args)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_load_config_unreadable_file(tmp_path):
    (tmp_path / "k.pem").write_text("x")
    (tmp_path / "k.pem").chmod(0)
    (tmp_path / "c.yaml").write_text("tls: {cert: k.pem, key: k.pem}\n")
    with pytest.raises(ConfigError, match="not readable"):
        load_config(tmp_path / "c.yaml")


# --------------------------------------------------------------------------- the CLI


def test_check_config_cli_in_process(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text("workers: 3\nlisten: '127.0.0.1:50051'\n")
    assert cli_main(["check-config", str(good)]) == 0
    out, err = capsys.readouterr()
    assert "valid" in out and "workers: 3" in out
    assert "warning: mutating RPCs (LoadFabric, Route, ApplyFaults, RouteSubnet) are " \
           "refused on the plaintext TCP listener 127.0.0.1:50051" in err
    open_metrics = tmp_path / "metrics.yaml"
    open_metrics.write_text("metrics_listen: '0.0.0.0:9464'\n")
    assert cli_main(["check-config", str(open_metrics)]) == 2
    assert "metrics_listen: 0.0.0.0:9464 is not a loopback address" in capsys.readouterr().err
    assert cli_main(["check-config", "--json", str(good)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["config"]["workers"] == 3 and len(doc["warnings"]) == 1
    badf = tmp_path / "bad.yaml"
    badf.write_text("workers: 3\nlimits:\n  max_streams: many\n")
    assert cli_main(["check-config", str(badf)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"smroute: error: {badf}:3: limits.max_streams: expected an integer "
                           "1..100000, got 'many'")
    assert cli_main(["check-config", "--json", str(badf)]) == 2
    doc = json.loads(capsys.readouterr().out)
    msg = f"{badf}:3: limits.max_streams: expected an integer 1..100000, got 'many'"
    assert doc == {"ok": False, "source": str(badf), "key": "limits.max_streams", "line": 3,
                   "error": msg, "errors": [{"error": msg, "key": "limits.max_streams",
                                             "line": 3}]}


def test_check_config_reports_every_error_in_one_run(tmp_path, capsys):
    """Four typos, one run: each error with its key path and line, in file
    order, then the file the config names that does not exist."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("workres: 3\nlimits:\n  max_streams: many\n  max_stremas: 4\n"
                   "log_level: loud\nfabric: missing.lst\nalgorithm: dmodc\n")
    assert cli_main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split(": ")[2:4] for line in err[:-1]] == [
        [f"{bad}:1", "workres"], [f"{bad}:3", "limits.max_streams"],
        [f"{bad}:4", "limits.max_stremas"], [f"{bad}:5", "log_level"],
        [f"{bad}:6", "fabric"]]
    assert err[-1] == f"smroute: {bad}: 5 errors"
    assert cli_main(["check-config", "--json", str(bad)]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert [(e["key"], e["line"]) for e in doc["errors"]] == [
        ("workres", 1), ("limits.max_streams", 3), ("limits.max_stremas", 4),
        ("log_level", 5), ("fabric", 6)]
    assert (doc["key"], doc["line"]) == ("workres", 1)
    # the daemon still stops at the first one
    with pytest.raises(ConfigError, match="workres"):
        load_config(bad)


def test_check_config_cli_subprocess(tmp_path):
    exe = [str(SMROUTE)] if SMROUTE.exists() else [sys.executable, "-m", "smroute"]
    r = subprocess.run([*exe, "check-config", str(EXAMPLE)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout) == config_to_dict(default_config())
    assert r.stderr == ""
    (tmp_path / "c.yaml").write_text("listen: '0.0.0.0:50051'\n")
    r = subprocess.run([*exe, "check-config", str(tmp_path / "c.yaml")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2
    assert "c.yaml:1: listen: 0.0.0.0:50051 is not a loopback" in r.stderr
    assert "Traceback" not in r.stderr
    r = subprocess.run([*exe, "check-config", "--json", str(tmp_path / "none.yaml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and json.loads(r.stdout)["ok"] is False


def test_service_config_is_frozen():
    cfg = default_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.workers = 3  # type: ignore[misc]
    assert isinstance(ServiceConfig().limits, LimitsConfig)


# --------------------------------------------------------------------------- deploy/ files


UNIT = ROOT / "deploy" / "smroute.service"


def _unit_settings() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if line and not line.startswith(("#", "[")) and "=" in line:
            k, _, v = line.partition("=")
            out.setdefault(k, []).append(v)
    return out


def test_systemd_unit_runs_serve_with_checked_config():
    s = _unit_settings()
    (start,) = s["ExecStart"]
    (pre,) = s["ExecStartPre"]
    assert start.endswith("/.venv/bin/smroute serve --config /etc/smroute/smroute.yaml")
    assert pre == start.replace(" serve --config ", " check-config ")
    assert s["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert s["KillSignal"] == ["SIGTERM"]
    # TimeoutStopSec leaves room for the default shutdown grace period
    assert int(s["TimeoutStopSec"][0]) > default_config().shutdown_grace_s
    assert s["RestartPreventExitStatus"] == [str(ConfigError("x").exit_code)]
    assert s["DynamicUser"] == ["yes"] and s["ProtectSystem"] == ["strict"]
    assert s["RuntimeDirectory"] == ["smroute"]
    assert s["CapabilityBoundingSet"] == [""] and s["NoNewPrivileges"] == ["yes"]
    # the Unix socket path the example config suggests lives in the RuntimeDirectory
    assert "unix:/run/smroute/smroute.sock" in EXAMPLE.read_text()
    assert parse_listen("unix:/run/smroute/smroute.sock").is_loopback


def test_systemd_unit_verifies_and_is_hardened(tmp_path):
    import shutil

    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    exe = SMROUTE if SMROUTE.exists() else Path(shutil.which("smroute") or "/nonexistent")
    if not exe.exists():
        pytest.skip("no smroute executable to point the unit at")
    unit = tmp_path / "smroute.service"
    unit.write_text(UNIT.read_text().replace("/opt/smroute/.venv/bin/smroute", str(exe)))
    r = subprocess.run([tool, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    r = subprocess.run([tool, "security", "--offline=yes", "--threshold=15", str(unit)],
                       capture_output=True, text=True, timeout=60)
    if "Unknown option" in r.stderr or "unrecognized option" in r.stderr:
        pytest.skip(f"systemd-analyze too old for --offline: {r.stderr.strip()}")
    import re

    m = re.search(r"Overall exposure level for smroute.service: ([0-9.]+) (\w+)", r.stdout)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= 1.5, r.stdout  # systemd calls <= 1.9 "SAFE"/"OK"


# --------------------------------------------------------------------------- fuzz

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40),
                     st.floats(allow_nan=True), st.text(max_size=30),
                     st.sampled_from(["64MiB", "127.0.0.1:0", "unix:/run/x.sock", "[::1]:1",
                                      "dmodc", "json", "debug", "/etc/x"]))
_keys = st.sampled_from([*config_to_dict(default_config()), "bogus"])
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["cert", "key", "client_ca", "require_client_cert",
                                     "max_streams", "max_topology_bytes", "x"]),
                    inner, max_size=4)), max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_any_text_gives_config_or_config_error(text):
    try:
        cfg = parse_config(text, "fuzz.yaml")
    except ConfigError as err:
        assert str(err).startswith("fuzz.yaml")
    else:
        assert isinstance(cfg, ServiceConfig)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=5))
def test_fuzz_structured_documents(doc):
    text = yaml.safe_dump(doc)
    try:
        cfg = parse_config(text, "fuzz.yaml")
    except ConfigError as err:
        # every error about a given key names it, with its line
        if err.key is not None:
            assert err.key.split(".")[0].split("[")[0] in doc
            assert err.line is not None
    else:
        # a config that parsed round-trips through its effective dict
        assert parse_config(yaml.safe_dump(config_to_dict(cfg))) == cfg
