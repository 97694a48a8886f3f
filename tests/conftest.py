"""Suite-wide settings.

A daemon started without ``--state`` keeps its state database under
``$STATE_DIRECTORY`` (see :mod:`smroute.service.settings`); every test gets its
own, so no test writes the machine's ``/var/lib/smroute`` or shares a database
(and its lock) with another test.

Every test marked ``real`` or ``slow``, or that starts a real component (ibsim,
OpenSM, a daemon process, slurmctld, ibdmchk) directly, through a helper of its
module or through a fixture, is also marked ``integration`` at collection, so
``pytest -m "not integration"`` is the fast tier (:func:`starts_component`).
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any

import pytest

#: Calls and words that start a real component: ibsim, OpenSM, a daemon
#: process, slurmctld, ibdmchk, a side-by-side run or an OpenSM chain.
STARTERS = re.compile(
    r"\b(IbSim|run_opensm|run_opensm_engines|run_side_by_side|OpenSMProcess|OpenSMChain|"
    r"DaemonProcess|start_daemon|run_ibdmchk|ibnetdiscover|slurmctld)\b\s*\("
    # a command line that starts a tool, a daemon or a bridge
    r"|\[\s*[\"'](opensm|ibsim|ibsim-run|ibdmchk|slurmctld)[\"']"
    r"|[\"']smroute[\"']\s*,\s*[\"'](serve|opensm-bridge)[\"']"
    r"|\bmain\(\s*\[\s*[\"'](serve|opensm-bridge)[\"']")


def _source(obj: Any) -> str:
    """``obj``'s source without its decorators (a parametrize list names tools
    without starting them)."""
    try:
        src = textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        return ""
    head = re.search(r"^(async def|def|class) ", src, re.MULTILINE)
    return src[head.start():] if head else src


def _names_called(src: str) -> set[str]:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                names.add(f.id)
            elif isinstance(f, ast.Attribute):
                names.add(f.attr)
    return names


@cache
def _module_starters(module: ModuleType) -> frozenset[str]:
    """Names of the module's functions and classes that start a component,
    directly or through another such name of the module (a fixed point)."""
    own = {n: o for n, o in vars(module).items()
           if (inspect.isfunction(o) or inspect.isclass(o))
           and getattr(o, "__module__", None) == module.__name__}
    sources = {n: _source(o) for n, o in own.items()}
    starting = {n for n, s in sources.items() if STARTERS.search(s)}
    changed = True
    while changed:
        changed = False
        for n, s in sources.items():
            if n not in starting and _names_called(s) & starting:
                starting.add(n)
                changed = True
    return frozenset(starting)


def starts_component(func: Callable[..., Any], module: ModuleType | None) -> bool:
    """Whether ``func``'s body starts a real component, directly or through a
    function or class of ``module`` that does."""
    src = _source(func)
    if STARTERS.search(src):
        return True
    return module is not None and bool(_names_called(src) & _module_starters(module))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_integration(item):
            item.add_marker(pytest.mark.integration)


def _is_integration(item: pytest.Item) -> bool:
    if item.get_closest_marker("real") or item.get_closest_marker("slow"):
        return True
    func = getattr(item, "function", None)
    module = getattr(item, "module", None)
    if func is not None and starts_component(func, module):
        return True
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for name in item.fixturenames:  # type: ignore[attr-defined]
        for fdef in info.name2fixturedefs.get(name, ()):
            fmod = inspect.getmodule(fdef.func)
            if starts_component(fdef.func, fmod):
                return True
    return False


@pytest.fixture(autouse=True)
def _own_state_directory(tmp_path_factory: pytest.TempPathFactory,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path_factory.mktemp("smroute-state")))


@pytest.fixture()
def offer_dmodk(monkeypatch: pytest.MonkeyPatch) -> None:
    """D-mod-K offered by the daemon as if it were not lab-only: the engine
    whose tables leave CA pairs of a degraded tree unrouted, for the tests
    of the commit gate (the same class, so the pool's workers receive it by
    reference)."""
    import copy
    import dataclasses

    from smroute.routing import api
    d = api.engine("dmodk")
    offered = copy.copy(d)
    offered.guarantees = dataclasses.replace(d.guarantees, lab_only=False)  # type: ignore[misc]
    monkeypatch.setitem(api.REGISTRY, d.name, offered)
