"""What the shipped configs, the proto and ``--help`` tell an operator."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from smroute.cli.main import build_parser
from smroute.lab.harness import read_conf_snippet

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto" / "smroute" / "v1" / "smroute.proto"
#: Every OpenSM configuration smroute ships.
OPENSM_CONFIGS = sorted(p for p in (ROOT / "deploy").iterdir()
                        if "opensm" in p.name and p.suffix in (".conf", ".snippet"))


def test_opensm_configs_are_found() -> None:
    assert {p.name for p in OPENSM_CONFIGS} >= {"opensm-plugin.conf", "opensm.conf.snippet"}


@pytest.mark.parametrize("conf", OPENSM_CONFIGS, ids=lambda p: p.name)
def test_shipped_opensm_configs_flush_the_log(conf: Path) -> None:
    """Without force_log_flush OpenSM's log lines (its INFO lines, smroute's
    epoch lines, "SUBNET UP" that wakes the bridge) arrive a minute late."""
    assert read_conf_snippet(conf.read_text()).get("force_log_flush") == "TRUE"


def _subparser(name: str):
    parser = build_parser()
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        if name in getattr(action, "choices", {}):
            return action.choices[name]
    raise AssertionError(f"no subcommand {name}")


def test_serve_help_gives_one_default_for_workers() -> None:
    text = " ".join(_subparser("serve").format_help().split())
    entry = re.search(r"--workers N (.*?)(?= --\w)", text)
    assert entry is not None
    assert entry.group(1).count("default") == 1, entry.group(1)


def test_epoch_cause_comment_lists_every_cause() -> None:
    """Every cause an epoch can carry (the core's one table of causes; a
    resume reinstalls the stored epoch with its own cause) is in the proto's
    comment."""
    from smroute.service.core_api import CAUSES

    text = PROTO.read_text()
    msg = text[text.index("message Epoch {"):]
    field = msg.index("string cause = 3;")
    comment = msg[msg.rindex(";", 0, field) + 1:msg.index("\n", field)]
    causes = set(CAUSES) - {"resume"}
    assert causes >= {"route", "faults", "sm", "dry_run"}, causes
    for cause in causes:
        assert f'"{cause}"' in comment, (cause, comment)


def test_load_fabric_says_it_changes_nothing_served() -> None:
    text = " ".join(PROTO.read_text().split())
    rpc = text[text.index("service Smroute"):text.index("rpc LoadFabric")]
    assert "what is served" in rpc and "until Route" in rpc
