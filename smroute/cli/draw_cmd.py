"""``smroute fabric draw FABRIC --out FILE.svg|FILE.png [--removed ORIGINAL]``.

The edge of :mod:`smroute.fabric.export.draw`: reads the fabric (and the original it
was degraded from), asks for the :class:`~smroute.fabric.export.draw.Drawing` and
renders it with Graphviz's ``dot`` (Debian package ``graphviz``, through the
PyPI ``graphviz`` package).  ``dot`` is made for layered graphs: it places
the levels in rows, orders each row to cross as few cables as possible and
routes the edges around the boxes, which a hand-made matplotlib layout would
have to reimplement; its SVG keeps every word as text (searchable, the
anomalies can be found with a text search).  ``--out FILE.dot`` writes the
Graphviz source and needs no ``dot`` binary.

Picture: spines on top, leaves at the bottom, hosts as one count box under
their switches; boxes and edges with an anomaly in red (orange for same-level
links, dashed red for removed equipment); the caption names every anomaly
with its total.
"""

from __future__ import annotations

import argparse
import html
import math
import sys
from pathlib import Path
from typing import Any

from smroute.cli.outputs import check_output, is_stdout, write_output
from smroute.errors import InputError, SmrouteError
from smroute.text import printable

__all__ = ["FORMATS", "DrawError", "add_parser", "cmd_draw", "picture", "render", "to_dot"]

#: Output formats by file suffix.
FORMATS = {".svg": "svg", ".png": "png", ".dot": "dot", ".gv": "dot"}

_FONT = "Helvetica"
_RED, _ORANGE, _GREY = "#c62828", "#ef6c00", "#888888"
_LEVEL_FILL = ("#dcebf7", "#e6def0", "#f6e7d3", "#e3f1df")  # leaf, L1, L2, L3...
_STYLE_FONT = {"title": ("", 11, True), "text": ("#222222", 10, False),
               "note": ("#555555", 9, False), "anomaly": (_RED, 10, True),
               "removed": (_RED, 10, False)}


class DrawError(SmrouteError):
    """The picture cannot be rendered (Graphviz missing or failing)."""

    exit_code = 1


def add_parser(sub: Any) -> None:
    """Add ``draw`` to the ``fabric`` command's subparsers."""
    from smroute.cli.inputs import add_role_options, add_strict_option, int_range
    from smroute.fabric.export.draw import MAX_BOXES

    d = sub.add_parser(
        "draw",
        help="a picture of the fabric by level: identical switches collapsed, "
        "anomalies and removed equipment highlighted (SVG or PNG)",
        description="Draw an ibnetdiscover topology with Graphviz: switches by level "
        "(rank 0 = leaves), identical switches collapsed into one box (\"648 x leaf\"), "
        "hosts as a count per box, anomalies (hosts on spines, self-looped cables, "
        "same-level links, missing links) in red; with --removed, the switches and links "
        "of the original fabric that are gone. The output format follows --out's suffix: "
        ".svg, .png (needs Graphviz's dot, Debian package graphviz) or .dot (the Graphviz "
        "source).",
    )
    d.add_argument("file", metavar="FABRIC", help="ibnetdiscover topology file")
    d.add_argument("--out", required=True, metavar="FILE|-",
                   help="FILE.svg, FILE.png or FILE.dot (a regular file, replaced atomically), "
                   "or - for standard output (--format says which; default svg)")
    d.add_argument("--format", choices=sorted(set(FORMATS.values())), default=None,
                   help="picture format (default: from --out's suffix; svg for -)")
    d.add_argument("--removed", metavar="ORIGINAL",
                   help="the fabric before equipment was removed: its switches and links "
                   "that are gone are drawn dashed")
    d.add_argument("--max-boxes", type=int_range(1), default=MAX_BOXES, metavar="N",
                   help=f"at most N switch boxes per level: identical switches are "
                   f"collapsed, then coarser groups until N is met (default {MAX_BOXES})")
    d.add_argument("--title", help="name of the fabric in the picture's title, before its "
                   "counts (default: the file name)")
    add_strict_option(d)
    add_role_options(d)
    d.set_defaults(func=cmd_draw)


def cmd_draw(args: argparse.Namespace) -> int:
    """Draw ``args.file`` into ``args.out``; prints what was drawn."""
    from smroute.cli.inputs import load_fabric, load_overrides
    from smroute.fabric.export.draw import draw_fabric
    from smroute.fabric.roles import fabric_roles

    to_stdout = is_stdout(args.out)
    fmt = args.format or ("svg" if to_stdout else FORMATS.get(Path(args.out).suffix.lower()))
    if fmt is None:
        raise InputError(f"--out {args.out}: unknown picture format; expected a name ending "
                         f"in {', '.join(FORMATS)} (or --format)")
    if not to_stdout:
        check_output(args.out)
    fabric = load_fabric(args.file, strict=args.strict)
    original = load_fabric(args.removed, strict=args.strict) if args.removed else None
    roles = fabric_roles(fabric, load_overrides(args))
    drawing = draw_fabric(fabric, original=original, roles=roles, max_boxes=args.max_boxes)
    title = f"{args.title or Path(args.file).name}: {drawing.title}"
    write_output(args.out, picture(drawing, fmt, title=title))
    named = ", ".join(f"{k} {v}" for k, v in drawing.anomalies.items()) or "none"
    print(f"{'standard output' if to_stdout else args.out}: {drawing.n_switches} switches in "
          f"{len(drawing.switch_boxes)} boxes ({drawing.grouping}), {drawing.n_nodes} nodes "
          f"drawn; anomalies: {named}", file=sys.stderr if to_stdout else sys.stdout)
    return 0


# --------------------------------------------------------------------------- rendering
def _html(lines: Any, *, title_colour: str = "#000000") -> str:
    rows = []
    for ln in lines:
        colour, size, bold = _STYLE_FONT.get(ln.style, _STYLE_FONT["text"])
        text = html.escape(ln.text, quote=False)
        if bold:
            text = f"<B>{text}</B>"
        rows.append(f'<FONT POINT-SIZE="{size}" COLOR="{colour or title_colour}">{text}</FONT>')
    return "<" + "<BR/>".join(rows) + ">"


def to_dot(drawing: Any, *, title: str | None = None) -> Any:
    """The ``graphviz.Digraph`` of a :class:`~smroute.fabric.export.draw.Drawing`."""
    try:
        import graphviz
    except ImportError as err:  # pragma: no cover - a dependency
        raise DrawError("the Python package graphviz is missing (pip install graphviz)") from err
    from smroute.fabric.export.draw import Line

    g = graphviz.Digraph("fabric")
    caption = [Line(title or drawing.title, "title"), *drawing.legend]
    g.attr(rankdir="BT", nodesep="0.3", ranksep="0.8", fontname=_FONT, labelloc="t",
           labeljust="l", label=_html(caption), bgcolor="white", pad="0.2",
           newrank="true")
    g.attr("node", fontname=_FONT, shape="box", style="rounded,filled", margin="0.12,0.06")
    g.attr("edge", fontname=_FONT, fontsize="9", dir="none", color="#555555",
           fontcolor="#333333")
    for rank, ids in drawing.rows:
        with g.subgraph() as row:
            row.attr(rank="same")
            for box_id in ids:
                _node(row, drawing.box(box_id), rank)
    for b in drawing.boxes:
        if b.kind in ("hosts", "service"):
            _node(g, b, b.rank)
    for b in drawing.boxes:
        if b.attached_to:
            colour = _ORANGE if b.anomalies else "#aaaaaa"
            g.edge(b.id, b.attached_to, color=colour, penwidth="1.2")
    for e in drawing.edges:
        width = f"{1 + math.log10(max(e.cables, 1)) * 0.9:.2f}"
        attrs: dict[str, str] = {"label": e.label, "penwidth": width}
        if e.kind == "same_rank":
            attrs.update(color=_ORANGE, fontcolor=_ORANGE, style="dashed", constraint="false")
        elif e.kind == "self_loop":
            attrs.update(color=_RED, fontcolor=_RED, penwidth="2")
        elif e.kind == "removed":
            attrs.update(color=_RED, fontcolor=_RED, style="dashed")
        elif e.kind == "other":
            attrs.update(color=_GREY, style="dotted", constraint="false")
        g.edge(e.tail, e.head, **attrs)
    return g


def _node(g: Any, b: Any, rank: int) -> None:
    if b.kind == "removed":
        g.node(b.id, _html(b.lines), style="rounded,dashed,filled", fillcolor="#fdecec",
               color=_RED, penwidth="1.6")
    elif b.kind == "hosts":
        g.node(b.id, _html(b.lines), fillcolor="#f3f3f3", color="#aaaaaa", shape="box",
               style="filled")
    elif b.kind == "service":
        g.node(b.id, _html(b.lines), fillcolor="#fff1db", style="filled",
               color=_ORANGE if b.anomalies else "#aaaaaa", penwidth="2" if b.anomalies else "1")
    else:
        fill = "#eeeeee" if rank < 0 else _LEVEL_FILL[min(rank, len(_LEVEL_FILL) - 1)]
        bad = bool(b.anomalies)
        g.node(b.id, _html(b.lines), fillcolor=fill, color=_RED if bad else "#4a6a8a",
               penwidth="2.4" if bad else "1.2", peripheries="2" if b.count > 1 else "1")


def render(drawing: Any, path: str | Path, fmt: str | None = None, *,
           title: str | None = None) -> Path:
    """Write ``drawing`` to ``path`` as ``fmt`` (``svg``, ``png`` or ``dot``;
    default from the suffix) with the CLI's one writer
    (:func:`smroute.cli.outputs.write_output`: a regular file, atomically)."""
    out = Path(path)
    fmt = fmt or FORMATS.get(out.suffix.lower())
    if fmt not in ("svg", "png", "dot"):
        raise InputError(f"unknown picture format for {out}", source=str(out))
    write_output(str(out), picture(drawing, fmt, title=title))
    return out


def picture(drawing: Any, fmt: str, *, title: str | None = None) -> bytes:
    """``drawing`` as ``fmt`` (``svg``, ``png`` or ``dot``) bytes (Graphviz)."""
    g = to_dot(drawing, title=title)
    if fmt == "dot":
        data = g.source.encode()
    else:
        import graphviz

        if fmt == "png":
            g.attr(dpi="96")
        try:
            data = g.pipe(format=fmt, engine="dot")
        except graphviz.ExecutableNotFound:
            raise DrawError("Graphviz's dot is not installed (Debian package graphviz; "
                            "scripts/setup.sh installs it); --out FILE.dot writes the "
                            "picture's source without it") from None
        except graphviz.CalledProcessError as err:
            msg = (err.stderr or b"").decode(errors="replace").strip()
            raise DrawError(f"dot failed: {printable(msg, 300)}") from None
    return bytes(data)


if __name__ == "__main__":  # pragma: no cover
    from smroute.cli.main import main

    sys.exit(main())
