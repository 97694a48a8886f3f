"""The README and the docs site: short, current, generated where they can
be, and the commands they show work against the real tools."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from script_module import load_script

from smroute.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
hooks = load_script("docs_hooks")


def _markdown() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_readme_is_for_users_and_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, len(lines)
    text = "\n".join(lines)
    for command in ("scripts/run-default.sh", "scripts/test.sh", 'not integration'):
        assert command in text


def test_no_history_in_readme_or_docs() -> None:
    """History stays in git: no session or issue numbers in what users read."""
    pattern = re.compile(r"session[s -]+[0-9]+|issue[s -]+#?[0-9]+", re.IGNORECASE)
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in _markdown()
             for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, "\n".join(found)


def test_cli_reference_has_every_command() -> None:
    page = hooks.cli_reference()
    paths = [" ".join(p) for p, _ in hooks.walk_commands(build_parser())]
    assert {"route", "serve", "fabric summary", "fabric generate pgft", "study report"
            } <= set(paths)
    for path in paths:
        assert f" smroute {path}\n" in page, path
    assert "routing worker processes" in page  # a help text, not only the headings


def test_grpc_reference_has_every_rpc_message_and_field() -> None:
    from smroute.service.rpc._gen import smroute_pb2

    page = hooks.grpc_reference()
    fd = smroute_pb2.DESCRIPTOR
    for svc in fd.services_by_name.values():
        for m in svc.methods:
            assert f"| `{m.name}` |" in page, m.name
    for msg in fd.message_types_by_name.values():
        assert f"#### {msg.name}\n" in page, msg.name
        for f in msg.fields:
            assert f"| `{f.name}` |" in page, (msg.name, f.name)
    # the comments come along: Epoch.cause lists its four values
    cause = next(line for line in page.splitlines() if line.startswith("| `cause` |"))
    for value in ("route", "faults", "sm", "dry_run"):
        assert f'"{value}"' in cause


def _ctl_examples() -> list[str]:
    text = "\n".join(p.read_text() for p in (DOCS / "ctl.md", DOCS / "getting-started.md",
                                            ROOT / "README.md"))
    lines = [line.removeprefix(".venv/bin/") for line in text.splitlines()]
    return [line.split("#")[0].strip() for line in lines if line.startswith("smroute ctl ")]


def test_ctl_examples_parse() -> None:
    """Every ``smroute ctl`` line of the docs is a valid command line."""
    parser = build_parser()
    if not any(path == ("ctl",) for path, _ in hooks.walk_commands(parser)):
        pytest.skip("this build has no 'smroute ctl' command")
    examples = _ctl_examples()
    assert len(examples) >= 20
    for line in examples:
        try:
            parser.parse_args(shlex.split(line)[1:])
        except SystemExit as ex:
            raise AssertionError(f"docs example does not parse: {line}") from ex


def test_site_builds_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict``: a broken link, anchor or include fails it."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "s")]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    trial = (tmp_path / "s" / "opensm" / "index.html").read_text()
    assert "IBSIM_SOCKNAME" in trial and "keep the console open" in trial  # the trial, included
    assert (tmp_path / "s" / "deploy" / "OPERATORS" / "index.html").exists()


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibdmchk") is None,
                    reason="needs ibdmchk (Debian ibutils; scripts/setup.sh installs it)")
def test_ibdmchk_command_of_the_docs_accepts_our_tables(tmp_path: Path) -> None:
    """The ``ibdmchk`` line of the routing guide, run as written on the
    tables the guide's ``route`` line writes."""
    text = (DOCS / "routing.md").read_text()
    block = text[text.index("## Check the tables with ibdmchk"):]
    lines = [line for line in block.split("```sh\n", 1)[1].split("```")[0].splitlines() if line]
    assert lines[0].startswith("smroute route ") and lines[1].startswith("ibdmchk ")
    route = shlex.split(lines[0].replace("fixtures/", f"{ROOT}/fixtures/"))
    r = subprocess.run([sys.executable, "-m", "smroute", *route[1:]], cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(shlex.split(lines[1]), cwd=tmp_path, capture_output=True, text=True,
                       timeout=600)
    out = r.stdout + r.stderr
    assert "Scanned:" in out and "-I- no credit loops found" in out, out[-2000:]
    assert "Fail to find a path" not in out


TRIAL_TOOLS = ("ibsim", "ibsim-run", "opensm", "dump_fts", "ibnetdiscover", "make")


@pytest.mark.real
@pytest.mark.skipif(not all(shutil.which(t) for t in TRIAL_TOOLS),
                    reason="needs ibsim-utils, opensm, infiniband-diags and make "
                           "(scripts/setup.sh installs them)")
def test_ibsim_trial_of_the_docs_runs(tmp_path: Path) -> None:
    """``scripts/ibsim-trial.sh``, the OpenSM guide's trial, as a user runs it."""
    build = ROOT / "build" / "opensm-plugin"
    r = subprocess.run(["make", "-s", "-C", str(ROOT / "opensm-plugin"), f"BUILD={build}", "all"],
                       capture_output=True, text=True, timeout=1800, check=False)
    if r.returncode != 0 or not (build / "libsmroute.so").exists():
        pytest.skip("the OpenSM plugin cannot be built (scripts/setup.sh installs its build "
                    "packages): " + (r.stderr or r.stdout)[-800:])
    env = dict(os.environ, TRIAL_DIR=str(tmp_path), PYTHONPATH=str(ROOT),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.Popen([str(ROOT / "scripts" / "ibsim-trial.sh")], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the trial and everything it started
        out, _ = proc.communicate()
        raise AssertionError(f"the trial did not finish in 600 s:\n{out[-4000:]}") from None
    assert proc.returncode == 0, out[-4000:]
    assert "trial: the switches hold smroute's tables" in out
    assert "trial: after the cut the switches hold smroute's new tables" in out
    assert "identical" in (tmp_path / "diff.txt").read_text()


def test_study_report_is_generated_from_the_csvs(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/study/report.md is exactly what ``smroute study report`` writes
    from the CSVs beside it: no paragraph by hand."""
    from smroute.cli.main import main

    csvs = ["docs/study/pgft648/study.csv", "docs/study/pgft1728/study.csv"]
    for c in csvs:
        (tmp_path / c).parent.mkdir(parents=True)
        shutil.copy(ROOT / c, tmp_path / c)
    monkeypatch.chdir(tmp_path)
    assert main(["study", "report", *csvs, "--out", "docs/study/report.md"]) == 0
    assert (tmp_path / "docs/study/report.md").read_text() == \
        (DOCS / "study" / "report.md").read_text()
    assert main(["study", "report", *csvs, "--compact", "--out", "x.md"]) == 2


def test_readme_links_resolve() -> None:
    """The README is read on its own (outside the site): its links name files."""
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert len(links) >= 10
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert not missing, missing
