"""MkDocs hooks of the docs site (``mkdocs.yml``: ``hooks``): the pages that
are generated, never written by hand.

* ``reference/cli.md``: every ``smroute`` command and subcommand with its
  ``--help``, walked from the argparse parsers (:func:`cli_reference`);
* ``reference/grpc-api.md``: the gRPC API from ``proto/smroute/v1/*.proto``
  and its comments, read through protoc's descriptors with source info
  (:func:`grpc_reference`).

Run alone (``python scripts/docs_hooks.py cli|grpc``) it prints a page.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
#: Width of the generated ``--help`` texts (the same page on every machine).
HELP_COLUMNS = 88


# --------------------------------------------------------------------------- CLI
def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # aliases name one parser
                    seen.add(id(sub))
                    yield name, sub


def walk_commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
                  ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command path (``("fabric", "summary")``) and its parser, depth first."""
    for name, sub in _subcommands(parser):
        path = (*prefix, name)
        yield path, sub
        yield from walk_commands(sub, path)


def _help(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(HELP_COLUMNS)
    try:
        return parser.format_help().rstrip()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def cli_reference() -> str:
    """The CLI reference page: ``smroute --help``, then each command's."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from smroute.cli.main import build_parser

    parser = build_parser()
    out = ["# Command-line reference", "",
           "Generated from the `smroute` argument parsers at each build of this site: "
           "it is exactly what `--help` prints. Exit statuses everywhere: 0 ok, "
           "1 routed but invalid / differences / undeliverable, 2 bad input, "
           "3 cannot route.", "",
           "```text", _help(parser), "```", ""]
    for path, sub in walk_commands(parser):
        level = "#" * min(len(path) + 1, 4)
        out += [f"{level} smroute {' '.join(path)}", "", "```text", _help(sub), "```", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------- gRPC
_TYPES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
          7: "fixed32", 8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32",
          16: "sfixed64", 17: "sint32", 18: "sint64"}


def _descriptor_set(proto_root: Path) -> Any:
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    protos = sorted(str(p.relative_to(proto_root)) for p in proto_root.rglob("*.proto"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        rc = protoc.main(["protoc", f"-I{proto_root}", "--include_source_info",
                          f"--descriptor_set_out={out}", *protos])
        if rc != 0:
            raise RuntimeError(f"protoc failed on {protos} (exit {rc})")
        fds = descriptor_pb2.FileDescriptorSet()
        fds.ParseFromString(out.read_bytes())
    return fds


def _comment(loc: Any) -> str:
    text = " ".join(s for s in (loc.leading_comments, loc.trailing_comments) if s)
    return " ".join(text.split()) if loc else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or " "


def _type_name(field: Any, package: str, maps: dict[str, str] | None = None) -> str:
    if maps and field.type_name in maps:
        return maps[field.type_name]
    if field.type_name:
        name = field.type_name.lstrip(".")
        name = name[len(package) + 1:] if name.startswith(package + ".") else name
        base = f"[{name}](#{name.lower().replace('.', '')})"
    else:
        base = _TYPES.get(field.type, str(field.type))
    if field.label == 3:
        return f"repeated {base}"
    return base


def grpc_reference(proto_root: Path = PROTO_ROOT) -> str:
    """The gRPC API page: services, then messages and enums, each with its
    comments from the ``.proto`` files."""
    fds = _descriptor_set(proto_root)
    out = ["# gRPC API", "",
           "Generated from the comments of `proto/` at each build of this site. "
           "`smroute.service.rpc.client.SmrouteClient` is the Python client of every RPC; "
           "`smroute ctl` is the command line over it.", ""]
    for f in fds.file:
        locs = {tuple(loc.path): loc for loc in f.source_code_info.location}
        file_doc = ""
        for loc in f.source_code_info.location:
            if loc.leading_detached_comments:
                file_doc = "\n".join(c.strip() for c in loc.leading_detached_comments[0]
                                     .replace("\n ", "\n").splitlines())
                break
        out += [f"## `{f.name}` (package `{f.package}`)", ""]
        if file_doc:
            out += [" ".join(file_doc.split()), ""]
        for si, svc in enumerate(f.service):
            out += [f"### service {svc.name}", "", "| RPC | request | response | what it does |",
                    "|---|---|---|---|"]
            for mi, m in enumerate(svc.method):
                req = m.input_type.lstrip(".").split(".")[-1]
                resp = m.output_type.lstrip(".").split(".")[-1]
                if m.client_streaming:
                    req = f"stream {req}"
                resp_t = f"stream [{resp}](#{resp.lower()})" if m.server_streaming \
                    else f"[{resp}](#{resp.lower()})"
                doc = _comment(locs.get((6, si, 2, mi)))
                out.append(f"| `{m.name}` | [{req.split()[-1]}](#{req.split()[-1].lower()}) "
                           f"| {resp_t} | {_cell(doc)} |")
            out.append("")
        out += ["### Messages", ""]
        for mi, msg in enumerate(f.message_type):
            out += _message(msg, (4, mi), locs, f.package, "")
        for ei, enum in enumerate(f.enum_type):
            out += _enum(enum, (5, ei), locs, "")
    return "\n".join(out).rstrip() + "\n"


def _message(msg: Any, path: tuple[int, ...], locs: dict[tuple[int, ...], Any],
             package: str, outer: str) -> list[str]:
    name = f"{outer}{msg.name}"
    out = [f"#### {name}", ""]
    doc = _comment(locs.get(path))
    if doc:
        out += [doc, ""]
    maps = {f".{package}.{name}.{n.name}": "map<{}, {}>".format(
                *(_type_name(e, package) for e in n.field))
            for n in msg.nested_type if n.options.map_entry}
    if msg.field:
        out += ["| field | type | number | description |", "|---|---|---|---|"]
        for fi, fld in enumerate(msg.field):
            oneof = ""
            if fld.HasField("oneof_index") and not fld.proto3_optional:
                oneof = f" (one of `{msg.oneof_decl[fld.oneof_index].name}`)"
            doc = _comment(locs.get((*path, 2, fi)))
            out.append(f"| `{fld.name}` | {_type_name(fld, package, maps)} | {fld.number} "
                       f"| {_cell(doc + oneof)} |")
        out.append("")
    else:
        out += ["No fields.", ""]
    for ni, nested in enumerate(msg.nested_type):
        if nested.options.map_entry:
            continue
        out += _message(nested, (*path, 3, ni), locs, package, f"{name}.")
    for ei, enum in enumerate(msg.enum_type):
        out += _enum(enum, (*path, 4, ei), locs, f"{name}.")
    return out


def _enum(enum: Any, path: tuple[int, ...], locs: dict[tuple[int, ...], Any],
          outer: str) -> list[str]:
    out = [f"#### {outer}{enum.name}", ""]
    doc = _comment(locs.get(path))
    if doc:
        out += [doc, ""]
    out += ["| value | number | description |", "|---|---|---|"]
    for vi, v in enumerate(enum.value):
        out.append(f"| `{v.name}` | {v.number} | {_cell(_comment(locs.get((*path, 2, vi))))} |")
    return [*out, ""]


# --------------------------------------------------------------------------- MkDocs
#: Generated pages: their path in the site and the function that writes them.
PAGES = {"reference/cli.md": cli_reference, "reference/grpc-api.md": grpc_reference}


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated pages to the site's files."""
    from mkdocs.structure.files import File

    for uri, make in PAGES.items():
        files.append(File.generated(config, uri, content=make()))
    return files


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "cli"
    print(cli_reference() if which == "cli" else grpc_reference(), end="")
