"""The structured log lines shared by the daemon and the OpenSM bridge."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from smroute.service.log import Logger


def _fields(line: str) -> dict[str, str]:
    """``key=value`` tokens of a text line, JSON-quoted values decoded."""
    out = {}
    for k, v in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line):
        out[k] = json.loads(v) if v.startswith('"') else v
    return out


def test_text_lines_split_back_into_their_fields() -> None:
    buf = io.StringIO()
    log = Logger(buf, fmt="text")
    log("info", "epoch_written", epoch=3, file=Path("/tmp/a b/x.lfts"), plain=Path("/tmp/x"),
        detail='LINK_DOWN 0x1 port 2; say "hi"', empty="", ratio=0.5, ok=True, none=None)
    (line,) = buf.getvalue().splitlines()
    f = _fields(line)
    assert f["level"] == "info" and f["event"] == "epoch_written" and f["epoch"] == "3"
    assert float(f["ts"]) > 1e9
    assert f["file"] == "/tmp/a b/x.lfts"  # a Path is its text, quoted once
    assert f["plain"] == "/tmp/x" and "plain=/tmp/x " in line
    assert f["detail"] == 'LINK_DOWN 0x1 port 2; say "hi"'
    assert f["empty"] == "" and f["ratio"] == "0.5" and f["ok"] == "true"
    assert f["none"] == "null"


def test_json_lines_and_level_filter() -> None:
    buf = io.StringIO()
    log = Logger(buf, fmt="json", level="warning")
    log("info", "dropped")
    log("error", "kept", path=Path("/x"), n=2)
    (line,) = buf.getvalue().splitlines()
    rec = json.loads(line)
    assert rec["event"] == "kept" and rec["path"] == "/x" and rec["n"] == 2
    log.configure("text", "debug")
    log("debug", "now_text")
    assert buf.getvalue().splitlines()[-1].split()[1:3] == ["level=debug", "event=now_text"]
