"""What an operator meets first, through the real CLI: the routing mode the
fabric summary states, ``-q`` on every command, progress lines in logs, and
``lids`` on a fabric without LMC."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from smroute.cli.main import main as cli_main
from smroute.fabric.ibnetdiscover import read_fabric
from smroute.routing.engine import route

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@pytest.mark.parametrize("name,mode", [("quantum-2level-agg-spine-hosts.topo", "tree+turns"),
                                       ("pgft-2level-648.topo", "tree"),
                                       ("two-switch-4-4-p2.topo", "updown")])
def test_summary_states_the_mode_route_takes(name: str, mode: str, capsys: Any) -> None:
    path = str(FIXTURES / name)
    r = route(read_fabric(path), workers=1)
    assert r.mode == mode
    assert cli_main(["fabric", "summary", path]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("Routing"))
    assert line.startswith(f"Routing (as smroute route runs it): {mode}")
    assert "Dmodc over the tree" not in line
    if r.mode_reason:
        assert r.mode_reason in line
    assert cli_main(["fabric", "summary", "--json", path]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["routing_mode"], doc["routing_reason"], doc["routed"]) == (
        r.mode, r.mode_reason, True)
