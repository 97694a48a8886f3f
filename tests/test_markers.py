"""The ``integration`` marker (tests/conftest.py): every test that is ``real``
or ``slow`` or starts a real component is marked, so ``-m "not integration"``
is the fast tier."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "tests_conftest", Path(__file__).resolve().parent / "conftest.py")
assert _spec is not None and _spec.loader is not None
conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conftest)


def _daemon_test() -> None:
    from service_daemon import start_daemon  # type: ignore[import-not-found]
    start_daemon(None)  # type: ignore[arg-type]  # never called


def _helper() -> None:
    _daemon_test()


def _through_helper() -> None:
    _helper()


def _ibsim_test() -> None:
    from smroute.lab.sim import IbSim
    IbSim("x")  # type: ignore[call-arg]  # never called


def _subprocess_serve() -> None:
    import subprocess
    subprocess.run(["smroute", "serve"])


def _pure() -> None:
    assert sorted([2, 1]) == [1, 2]


@pytest.mark.parametrize("fmt", ["opensm", "ibsim"])
def _decorated(fmt: str) -> None:  # tool names as arguments start nothing
    assert fmt in ("opensm", "ibsim")


@pytest.mark.parametrize("func,expected", [
    (_daemon_test, True), (_ibsim_test, True), (_subprocess_serve, True),
    (_through_helper, True), (_pure, False), (_decorated, False)])
def test_starts_component_sees_real_components(func, expected) -> None:
    assert conftest.starts_component(func, sys.modules[__name__]) is expected


def test_collected_items_are_marked(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    marked = {i.name for i in items if i.get_closest_marker("integration")}
    for item in items:
        if item.get_closest_marker("real") or item.get_closest_marker("slow"):
            assert item.name in marked
    assert request.node.name not in marked
