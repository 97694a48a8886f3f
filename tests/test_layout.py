"""The shape of the code ("one house"), checked by parsing every module under
``smroute/`` with :mod:`ast` (nothing is imported):

1. no module outside ``smroute/service/rpc/_gen`` (generated) is over
   :data:`MAX_LINES` lines, but for the explicit :data:`ALLOWED_LONG` set,
   which must not be stale;
2. no import cycle among smroute modules at module level (imports inside
   functions do not run at import time and do not count), nor one closed by
   an import under ``if TYPE_CHECKING:`` (it does not run, but still ties the
   two modules together);
2b. no ``from x import _y``: another module's private names stay private,
   and no module but ``smroute/service/core.py`` uses ``core._x`` (the
   daemon core's private members);
3. no production module imports :mod:`smroute.lab` (production: every package
   but ``smroute.lab`` and ``smroute.study``, and not ``smroute/cli/study_cmd.py``,
   the lab's command);
4. the service's pure modules (core, errors, sources) and everything under
   ``smroute/{fabric,routing,tables,analysis}`` import no ``grpc`` (nor
   ``grpc_*``), neither themselves nor through the smroute modules they import
   at module level;
5. no module outside ``smroute/routing/`` spells a routing engine's name as
   a string literal (the names: the ``name`` of every class under
   ``smroute/routing/`` that states ``guarantees``, the engines); it asks the
   registry (:mod:`smroute.routing.api`) instead.

For 3 and 4 an import inside a function counts too (it runs when the
function does); one under ``if TYPE_CHECKING:`` does not.  ``from x import y``
is an import of module ``x.y`` when that is a module, else of ``x``; relative
names are resolved against the importing module's package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "smroute"
GENERATED = "smroute/service/rpc/_gen/"
MAX_LINES = 550

#: Modules still over :data:`MAX_LINES`, each with why.  Every one must still be
#: over the limit (an entry that is not is stale and fails the test): take it out
#: when the module is split.
ALLOWED_LONG: dict[str, str] = {}

#: ``from x import _y`` still present, each with why.  Every one must still be
#: there (a stale entry fails the test): take it out when the name is made
#: public or moved.
ALLOWED_PRIVATE_IMPORTS: dict[str, str] = {}

#: Packages that are the lab, not production, and the lab's one command.
LAB_PACKAGES = ("smroute.lab", "smroute.study")
LAB_COMMANDS = ("smroute.cli.study_cmd",)
#: What must run without grpc installed.
NO_GRPC_MODULES = ("smroute.service.core", "smroute.service.errors", "smroute.service.sources")
NO_GRPC_PACKAGES = ("smroute.fabric", "smroute.routing", "smroute.tables", "smroute.analysis",
                    "smroute.lids")


@dataclass(frozen=True)
class Import:
    """One imported module: ``target`` (dotted name), the line, and whether
    it runs at import time (``module_level``: not in a function)."""

    target: str
    line: int
    module_level: bool


@dataclass(frozen=True)
class Module:
    name: str
    path: str  # relative to the repository, with /
    is_package: bool
    lines: int
    tree: ast.Module


@cache
def modules() -> dict[str, Module]:
    """Every module under ``smroute/`` by dotted name."""
    out: dict[str, Module] = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        rel = p.relative_to(ROOT)
        parts = list(rel.with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        text = p.read_text(encoding="utf-8")
        out[".".join(parts)] = Module(
            ".".join(parts), rel.as_posix(), is_package, len(text.splitlines()),
            ast.parse(text, filename=str(rel)),
        )
    return out


def in_package(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(
    node: ast.AST, module_level: bool = True, typing: bool = False,
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Import statements under ``node`` and whether each is at module level;
    the bodies of ``if TYPE_CHECKING:`` are skipped (their ``else`` is not)
    unless ``typing`` (then they count as module level)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, module_level
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in (child.body + child.orelse) if typing else child.orelse:
                if isinstance(stmt, ast.Import | ast.ImportFrom):
                    yield stmt, module_level
                else:
                    yield from _import_nodes(stmt, module_level, typing)
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _import_nodes(child, False, typing)
        else:
            yield from _import_nodes(child, module_level, typing)


def _base_package(mod: Module, level: int) -> str:
    """The package a relative import of ``level`` dots starts from."""
    parts = mod.name.split(".")
    if not mod.is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts)


@cache
def imports(name: str, typing: bool = False) -> tuple[Import, ...]:
    """Every module ``name`` imports (smroute or not), in source order
    (``typing``: with those under ``if TYPE_CHECKING:``, as module level)."""
    mods = modules()
    mod = mods[name]
    out: list[Import] = []
    for node, module_level in _import_nodes(mod.tree, typing=typing):
        if isinstance(node, ast.Import):
            out += [Import(a.name, node.lineno, module_level) for a in node.names]
            continue
        base = node.module or ""
        if node.level:
            pkg = _base_package(mod, node.level)
            base = f"{pkg}.{base}" if base and pkg else (base or pkg)
        for a in node.names:
            sub = f"{base}.{a.name}"
            target = sub if a.name != "*" and sub in mods else base
            out.append(Import(target, node.lineno, module_level))
    return tuple(out)


def smroute_edges(name: str, typing: bool = False) -> set[str]:
    """The smroute modules ``name`` imports at module level (``typing``: and
    under ``if TYPE_CHECKING:``)."""
    mods = modules()
    return {i.target for i in imports(name, typing) if i.module_level and i.target in mods}


def is_grpc(target: str) -> bool:
    top = target.split(".", 1)[0]
    return top == "grpc" or top.startswith("grpc_")


def cycles(typing: bool = False) -> list[list[str]]:
    """The import cycles among smroute modules at module level (``typing``:
    counting the imports under ``if TYPE_CHECKING:`` too): one cycle per
    strongly connected component (Tarjan), as a path that returns to its start."""
    graph = {n: sorted(smroute_edges(n, typing)) for n in modules()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)

    out = []
    for comp in comps:
        members = set(comp)
        # a shortest way back to the first member, through the component
        start = comp[0]
        prev: dict[str, str] = {}
        frontier = [start]
        found = None
        while frontier and found is None:
            nxt = []
            for v in frontier:
                for w in graph[v]:
                    if w == start:
                        found = v
                        break
                    if w in members and w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if found is not None:
                    break
            frontier = nxt
        path = [start]
        v = found if found is not None else start
        back = []
        while v != start:
            back.append(v)
            v = prev[v]
        path += reversed(back)
        out.append(path + [start])
    return out


# ----------------------------------------------------------------- the checks
def test_the_parser_sees_the_package() -> None:
    mods = modules()
    assert "smroute.fabric.model" in mods and "smroute.service.core" in mods
    # where relative imports start: a module's package, a package itself
    probe = Module("smroute.fabric.x", "smroute/fabric/x.py", False, 1, ast.parse(""))
    assert _base_package(probe, 1) == "smroute.fabric"
    assert _base_package(probe, 2) == "smroute"
    pkg = Module("smroute.fabric", "smroute/fabric/__init__.py", True, 1, ast.parse(""))
    assert _base_package(pkg, 1) == "smroute.fabric"
    # an edge we know: the builder makes a Fabric
    assert "smroute.fabric.model.arrays" in smroute_edges("smroute.fabric.model.builder")


def test_no_module_is_over_the_line_limit() -> None:
    long = {m.path: m.lines for m in modules().values()
            if m.lines > MAX_LINES and not m.path.startswith(GENERATED)}
    offenders = {p: n for p, n in long.items() if p not in ALLOWED_LONG}
    assert not offenders, (
        f"modules over {MAX_LINES} lines (split them by concern): "
        + ", ".join(f"{p} ({n})" for p, n in sorted(offenders.items())))


def test_the_long_module_allowance_is_not_stale() -> None:
    by_path = {m.path: m.lines for m in modules().values()}
    stale = {p: by_path.get(p) for p in ALLOWED_LONG if by_path.get(p, 0) <= MAX_LINES}
    assert not stale, (
        f"ALLOWED_LONG lists modules that are not over {MAX_LINES} lines (any more): "
        + ", ".join(f"{p} ({'gone' if n is None else n})" for p, n in sorted(stale.items()))
        + "; take them out")


def test_no_import_cycle_at_module_level() -> None:
    found = cycles()
    assert not found, "import cycles at module level: " + "; ".join(
        " -> ".join(c) for c in found)


def test_no_import_cycle_through_type_checking_imports() -> None:
    # an import only for type checking still ties the two modules together:
    # the dependency must go one way (a Protocol or a parameter, not a cycle)
    found = [c for c in cycles(typing=True) if c not in cycles()]
    assert not found, "import cycles through `if TYPE_CHECKING:` imports: " + "; ".join(
        " -> ".join(c) for c in found)


def test_the_pure_core_packages_import_one_way() -> None:
    """fabric, routing, tables, analysis and lids: no two of them import each
    other (any import, deferred and type-only ones included), so each can be
    read with only the ones it names."""
    core = NO_GRPC_PACKAGES
    mods = modules()

    def pkg(name: str) -> str | None:
        return next((p for p in core if in_package(name, (p,))), None)

    deps: dict[str, set[str]] = {p: set() for p in core}
    for name in mods:
        src = pkg(name)
        if src is None:
            continue
        for i in imports(name, typing=True):
            dst = pkg(i.target)
            if dst is not None and dst != src:
                deps[src].add(dst)
    both = sorted(f"{a} <-> {b}" for a in core for b in deps[a] if a < b and a in deps[b])
    assert not both, "pure-core packages importing each other: " + ", ".join(both)


def private_imports() -> list[str]:
    """``from x import _y`` anywhere in smroute (``_y`` another module's private
    name; dunder names and ``import x._y`` of a private package are not)."""
    bad = []
    for mod in modules().values():
        for node, _ in _import_nodes(mod.tree, typing=True):
            if not isinstance(node, ast.ImportFrom):
                continue
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    bad.append(f"{mod.path} imports {a.name} from "
                               f"{'.' * node.level}{node.module or ''}")
    return bad


def test_no_private_name_is_imported_from_another_module() -> None:
    probe = ast.parse("from a import _b, __version__\nfrom . import c")
    names = [a.name for n in probe.body if isinstance(n, ast.ImportFrom) for a in n.names]
    assert names == ["_b", "__version__", "c"]
    found = private_imports()
    bad = [b for b in found if b not in ALLOWED_PRIVATE_IMPORTS]
    assert not bad, "private names imported across modules (make them public or move " \
        "them): " + "; ".join(bad)
    stale = sorted(set(ALLOWED_PRIVATE_IMPORTS) - set(found))
    assert not stale, "ALLOWED_PRIVATE_IMPORTS lists imports that are gone: " + "; ".join(
        stale) + "; take them out"


def core_private_uses() -> list[str]:
    """``core._x`` (or ``self.core._x``) outside the daemon core's module: the
    core's private members are its own; others use its public calls."""
    bad = []
    for name, mod in modules().items():
        if name == "smroute.service.core":
            continue
        for node in ast.walk(mod.tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                v = node.value
                if (isinstance(v, ast.Name) and v.id == "core") or (
                        isinstance(v, ast.Attribute) and v.attr == "core"):
                    bad.append(f"{mod.path}:{node.lineno} uses core.{node.attr}")
    return bad


def test_no_module_touches_the_daemon_cores_private_members() -> None:
    assert not core_private_uses(), "private members of RoutingCore used outside " \
        "smroute/service/core.py: " + "; ".join(core_private_uses())


def test_production_does_not_import_the_lab() -> None:
    bad = []
    for name, mod in modules().items():
        if in_package(name, LAB_PACKAGES) or name in LAB_COMMANDS:
            continue
        bad += [f"{mod.path}:{i.line} imports {i.target}" for i in imports(name)
                if in_package(i.target, ("smroute.lab",))]
    assert not bad, "production modules import smroute.lab: " + "; ".join(bad)


def test_the_pure_core_imports_no_grpc() -> None:
    mods = modules()
    pure = [n for n in mods if n in NO_GRPC_MODULES or in_package(n, NO_GRPC_PACKAGES)]
    assert set(NO_GRPC_MODULES) <= set(pure)
    bad = []
    for name in sorted(pure):
        direct = [i for i in imports(name) if is_grpc(i.target)]
        bad += [f"{mods[name].path}:{i.line} imports {i.target}" for i in direct]
        # through the smroute modules it imports at module level
        seen = {name}
        todo = [(name, [name])]
        while todo:
            v, via = todo.pop()
            for w in sorted(smroute_edges(v) - seen):
                seen.add(w)
                hit = [i for i in imports(w) if i.module_level and is_grpc(i.target)]
                if hit:
                    bad.append(f"{mods[name].path} imports {hit[0].target} through "
                               + " -> ".join(via + [w]))
                todo.append((w, via + [w]))
    assert not bad, "the pure core imports grpc: " + "; ".join(bad)


def engine_names() -> set[str]:
    """The registered engines' names, read from the classes under
    ``smroute/routing/`` that have both ``name = "..."`` and ``guarantees``."""
    out = set()
    for name, mod in modules().items():
        if not in_package(name, ("smroute.routing",)):
            continue
        for cls in (n for n in ast.walk(mod.tree) if isinstance(n, ast.ClassDef)):
            attrs: dict[str, ast.expr | None] = {}
            for stmt in cls.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                    attrs[stmt.targets[0].id] = stmt.value
                elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    attrs[stmt.target.id] = stmt.value
            v = attrs.get("name")
            if "guarantees" in attrs and isinstance(v, ast.Constant) and isinstance(v.value, str):
                out.add(v.value)
    return out


def test_no_engine_name_as_a_string_outside_routing() -> None:
    names = engine_names()
    assert {"dmodc", "nmodc", "dmodk"} <= names
    bad = [f"{mod.path}:{n.lineno} {n.value!r}"
           for name, mod in modules().items() if not in_package(name, ("smroute.routing",))
           for n in ast.walk(mod.tree)
           if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names]
    assert not bad, ("engine names spelled outside smroute/routing/ (ask "
                     "smroute.routing.api instead): " + "; ".join(bad))
