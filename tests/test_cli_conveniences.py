"""Operator conveniences: the Grafana dashboard covers every daemon metric with
valid PromQL, ``smroute completion bash|zsh|fish`` completes the real command line,
and the one progress display (tqdm) keeps the phase lines and -q."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smroute.cli.main import main
from smroute.cli.progress import LOG_INTERVAL, Progress
from smroute.service.metrics import ServiceMetrics

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "grafana-smroute.json"


# --------------------------------------------------------------------------- dashboard
def _exprs(node: object) -> list[str]:
    if isinstance(node, dict):
        own = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return own + [e for v in node.values() for e in _exprs(v)]
    if isinstance(node, list):
        return [e for v in node for e in _exprs(v)]
    return []


def _exposed_families() -> set[str]:
    """Metric names the daemon exposes (histograms by their base name)."""
    m = ServiceMetrics()
    m.observe_route(0.1, "route")
    m.epoch_committed(1, 100)
    m.faults_received(1, "link_down")
    m.request("Route", "INTERNAL")
    m.stream_opened("Watch")
    m.reroute_failed("unroutable")
    names = set()
    for line in m.exposition().decode().splitlines():
        if line and not line.startswith("#"):
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            if not name.endswith("_created"):
                names.add(re.sub(r"_(bucket|sum|count)$", "", name))
    return names


def test_dashboard_covers_every_metric() -> None:
    dash = json.loads(DASHBOARD.read_text())
    exprs = _exprs(dash)
    used = {re.sub(r"_(bucket|sum|count)$", "", n)
            for e in exprs for n in re.findall(r"\bsmroute_[a-z_]+", e)}
    exposed = _exposed_families()
    assert "smroute_route_seconds" in exposed and "smroute_routing_mode" in exposed
    assert used == exposed, (sorted(exposed - used), sorted(used - exposed))
    titles = " / ".join(p["title"] for p in dash["panels"]).lower()
    for topic in ("epoch", "reroute time", "route time", "fault events", "request errors",
                  "open streams", "reroute failures", "routing mode"):
        assert topic in titles, topic
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24 and g["h"] >= 1
        for t in p.get("targets", []):
            assert t["datasource"]["uid"] == "${datasource}"
    names = [v["name"] for v in dash["templating"]["list"]]
    assert names == ["datasource", "instance"]
    assert all('instance=~"$instance"' in e for e in exprs)


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool (Debian package prometheus) not installed")
def test_dashboard_queries_parse(tmp_path: Path) -> None:
    exprs = _exprs(json.loads(DASHBOARD.read_text()))
    rules = tmp_path / "rules.yml"
    lines = ["groups:", "- name: dashboard", "  rules:"]
    for i, e in enumerate(exprs):
        e = e.replace("$__rate_interval", "5m").replace("$instance", ".*")
        lines += [f"  - record: dashboard:expr{i}", f"    expr: {json.dumps(e)}"]
    rules.write_text("\n".join(lines) + "\n")
    r = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# --------------------------------------------------------------------------- completion
def _script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def test_bash_completion_completes_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "smroute.bash"
    script.write_text(_script("bash", capsys))
    (tmp_path / "fab.topo").write_text("")
    prog = f"""
source {script}
comp() {{ COMP_WORDS=("$@"); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMP_LINE="$*";
  COMP_POINT=${{#COMP_LINE}}; COMPREPLY=();
  _shtab_smroute smroute "${{COMP_WORDS[-1]}}" "${{COMP_WORDS[-2]}}";
  echo "${{COMPREPLY[*]}}"; }}
comp smroute fa
comp smroute fabric g
comp smroute fabric generate sl
comp smroute route --no-p
comp smroute route --format ""
comp smroute route fa
comp smroute completion ""
comp smroute ctl fa
comp smroute ctl fault down ""
comp smroute tr
comp smroute fabric com
"""
    r = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "fabric", "generate", "slender-tree", "--no-port-guids", "opensm fdbs json", "fab.topo",
        "bash zsh fish", "fault", "link switch ca", "trace", "compare"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh not installed")
def test_zsh_completion_is_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "_smroute"
    script.write_text(_script("zsh", capsys))
    text = script.read_text()
    assert text.startswith("#compdef smroute")
    assert "generate" in text and "--no-port-guids" in text
    r = subprocess.run(["zsh", "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish not installed (scripts/setup.sh "
                    "installs it)")
def test_fish_completion_completes_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "smroute.fish"
    script.write_text(_script("fish", capsys))
    r = subprocess.run(["fish", "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    prog = (f"source {script}; complete -C 'smroute ct'; complete -C 'smroute ctl fau'; "
            "complete -C 'smroute ctl fault --dr'; complete -C 'smroute completion '")
    r = subprocess.run(["fish", "-c", prog], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    words = [line.split("\t")[0] for line in r.stdout.splitlines()]
    assert words == ["ctl", "fault", "--dry-run", "bash", "zsh", "fish"]


def test_completion_bad_shell_exits_2() -> None:
    r = subprocess.run([sys.executable, "-m", "smroute", "completion", "tcsh"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "invalid choice" in r.stderr


# --------------------------------------------------------------------------- progress
class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.25
        return self.t


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_phase_lines_bars_and_quiet() -> None:
    out = _Terminal()
    p = Progress(out, clock=_Clock())
    t = p.start("routing")
    p.fraction("stages", 0, 40)
    for k in range(1, 41):
        p.fraction("stages", k, 40)
        if k == 20:
            p.write("a line above the bar")
    p.done("route", t, "note")
    text = out.getvalue()
    lines = [ln.split("\r")[-1] for ln in text.splitlines()]
    assert lines[0] == "smroute: routing..."
    assert "a line above the bar" in lines
    assert re.search(r"\rsmroute:   stages: 100%\|.*\| 40/40 ", text)
    assert lines[-1] == "smroute:   route done in 0.250 s (note)"
    assert p.timings == {"route": 0.25}
    # a second run of the same label starts a new bar; done() closes open bars
    p.fraction("stages", 5, 10)
    p.done("again", p.start("again"))
    assert re.search(r"smroute:   stages:  50%\|.*\| 5/10 ", out.getvalue())

    quiet = io.StringIO()
    q = Progress(quiet, enabled=False, clock=_Clock())
    t = q.start("routing")
    q.fraction("stages", 3, 4)
    q.write("nothing")
    q.done("route", t)
    assert quiet.getvalue() == "" and q.timings == {"route": 0.25}


def test_progress_in_a_log_is_one_line_per_update_at_most() -> None:
    """Not a terminal: no redrawn bar (no carriage returns, no state twice),
    a line at the start, at most one per LOG_INTERVAL, and the last."""
    clock = _Clock()  # 0.25 s per reading
    out = io.StringIO()
    p = Progress(out, clock=clock)
    for k in range(0, 201):
        p.fraction("throws", k, 200)
    p.fraction("throws", 200, 200)  # reported again: no second line
    p.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[0] == "smroute:   throws: 0/200 (0%)"
    assert lines[-1] == "smroute:   throws: 200/200 (100%)"
    assert len(lines) == len(set(lines)) == 1 + 200 // int(LOG_INTERVAL / 0.25)
    p.fraction("throws", 3, 4)  # a second run of the label starts again
    assert out.getvalue().splitlines()[-1] == "smroute:   throws: 3/4 (75%)"


def test_analyze_progress_bar_and_quiet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from smroute.fabric.export.writers import write_topology
    from smroute.fabric.generate.trees import pgft

    topo, tables = tmp_path / "f.topo", tmp_path / "t.dump"
    write_topology(pgft(2, [4, 8], [1, 4], [1, 1]), topo)
    assert main(["route", str(topo), "--out", str(tables), "-q", "--workers", "1"]) == 0
    capsys.readouterr()
    argv = ["analyze", str(tables), "--fabric", str(topo), "--pattern", "sp"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert re.search(r"^smroute:   stages: 31/31 \(100%\)$", err, re.M)  # a log: no bar
    assert "\r" not in err
    assert re.search(r"^smroute:   analysis done in \d+\.\d{3} s", err, re.M)
    assert main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
