"""``smroute fabric generate GENERATOR ...``: every fabric generator from the
command line, written as ibnetdiscover text or an ibsim net file.

Generators (:mod:`smroute.fabric.generate.trees`, :mod:`smroute.fabric.generate.shapes`)::

    pgft "3;18,18,36;1,18,18;1,1,1" [--rlft] [--hosts-per-leaf N]
    xgft "2;18,36;1,18"             kary-ntree K N
    thin-tree K K' N                slender-tree K K' N
    navaridas "8:4,4-thin-tree"     ring K --hosts H[,H..] [--parallel P]
    two-switch [--hosts A[,B]] [--parallel P]
    director [--line-cards N --spine-cards N --asics-per-card N --radix N --hosts-per-asic N]
    dragonfly-plus GROUPS LEAVES SPINES HOSTS [--global-cables N] [--spread] [--radix N]
    torus 4x4x4 [--hosts H] [--parallel P] [--radix N]   (a hypercube: 2x2x2x2)

Then, in this order: seeded degradation (``--seed S --remove-switches N
--remove-links N``: :func:`~smroute.fabric.generate.trees.degrade` with
``numpy.random.default_rng(S)``), ``--spine-hosts N`` service hosts on the
first top switch (:func:`~smroute.fabric.generate.shapes.attach_cas`), ``--split-ports``
(every switch with hosts split-ready, its host ports split:
:func:`~smroute.fabric.generate.shapes.with_split_ports`), ``--agg`` (a SHARP
aggregation node on every switch: :func:`~smroute.fabric.generate.shapes.with_aggregation_nodes`).
``--format topology`` (default) writes what ``ibnetdiscover`` prints
(``--ext-ports``: with ``[ext N]`` on chassis line-card ports, as
``ibnetdiscover -g``), ``--format ibsim`` an ibsim net file; ``--out FILE`` (written
atomically) or ``-`` (stdout, the default).  A one-line summary goes to stderr
unless ``-q``.  Bad parameters exit 2 with the reason.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

import numpy as np

from smroute.cli.inputs import SEED, int_range
from smroute.cli.outputs import check_output, is_stdout, write_output
from smroute.errors import InputError
from smroute.text import excerpt

__all__ = ["GENERATORS", "add_parser", "cmd_generate", "generate_fabric"]

#: Generator subcommands, in help order.
GENERATORS = ("pgft", "xgft", "kary-ntree", "thin-tree", "slender-tree", "navaridas", "ring",
              "two-switch", "director", "dragonfly-plus", "torus")
#: Nodes a generator may lay out (its full index space) before any is built: far
#: above the 49,151 unicast LIDs a fabric can address, far below running out of memory.
MAX_NODES = 1 << 21


_DESCRIPTION = """\
Generate a fabric and write it as ibnetdiscover text or an ibsim net file.

generators:
  pgft "3;18,18,36;1,18,18;1,1,1" [--rlft] [--hosts-per-leaf N]
  xgft "2;18,36;1,18"               kary-ntree K N
  thin-tree K K' N                  slender-tree K K' N
  navaridas "8:4,4-thin-tree"       ring K [--hosts H[,H..]] [--parallel P]
  two-switch [--hosts A[,B]] [--parallel P]
  director [--line-cards N] [--spine-cards N] [--asics-per-card N] [--radix N]
           [--hosts-per-asic N] [--device-id ID]
  dragonfly-plus GROUPS LEAVES SPINES HOSTS [--global-cables N] [--spread]
                 [--radix N]
  torus 4x4x4 [--hosts H] [--parallel P] [--radix N]  (a hypercube: 2x2x2x2x2)
  catalogue NAME | --list           (named site shapes; own options, see its --help)

then, in this order: --seed S --remove-switches N --remove-links N (seeded
degradation), --spine-hosts N (service hosts on the first top switch),
--split-ports, --agg (a SHARP aggregation node on every switch).  Output:
--format topology|ibsim, --out FILE or - (stdout, default).  Bad parameters
exit 2.  'smroute fabric generate GENERATOR --help' lists every option.

example:
  smroute fabric generate pgft "3;18,18,36;1,18,18;1,1,1" --agg --out big.topo
"""


def _ints(text: str, what: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",")]
    except ValueError:
        raise InputError(f"{what}: expected comma-separated integers, got "
                         f"{excerpt(text)}") from None
    return vals


def _common(gen: argparse.ArgumentParser) -> None:
    """Options every generator takes: link and LID attributes, transforms, output."""
    g = gen.add_argument_group("links and LIDs")
    g.add_argument("--lmc", type=int_range(0, 7), default=0, metavar="N",
                   help="LMC of the CA ports, 0..7 (LIDs aligned to 2^N; default 0)")
    g.add_argument("--speed", default=None, metavar="SPEED",
                   help="link speed: SDR DDR QDR FDR10 FDR EDR HDR NDR XDR (default EDR)")
    g.add_argument("--width", type=int, default=None, metavar="N",
                   help="link width in lanes: 1 2 4 8 12 (default 4)")
    t = degradation_options(gen)
    t.add_argument("--spine-hosts", type=int_range(0), default=0, metavar="N",
                   help="attach N service hosts (\"service01 HCA-1\", ..) to the first top switch")
    t.add_argument("--split-ports", action="store_true",
                   help="every switch with hosts in split-ready mode, its host ports split (2x)")
    t.add_argument("--agg", action="store_true",
                   help="a SHARP aggregation node on every switch (as on Quantum switches)")
    o = gen.add_argument_group("output")
    o.add_argument("--format", choices=("topology", "ibsim"), default="topology",
                   help="ibnetdiscover text (default) or an ibsim net file")
    o.add_argument("--ext-ports", action="store_true",
                   help="topology: [ext N] on chassis line-card ports, as ibnetdiscover -g")
    o.add_argument("--out", default="-", metavar="FILE|-",
                   help="output file (a regular file, replaced atomically), - for stdout "
                   "(default)")
    o.add_argument("--quiet", "-q", action="store_true", help="no summary line on stderr")
    gen.set_defaults(func=cmd_generate)


def degradation_options(gen: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The seeded degradation's options (``--seed``, ``--remove-switches``,
    ``--remove-links``), in a group of transforms returned for more."""
    t = gen.add_argument_group("transforms (applied in this order)")
    t.add_argument("--seed", type=SEED, default=0,
                   help="seed of the degradation, 0..2^63-1 (default 0)")
    t.add_argument("--remove-switches", type=int_range(0), default=0, metavar="N",
                   help="remove N random switches")
    t.add_argument("--remove-links", type=int_range(0), default=0, metavar="N",
                   help="then remove N random switch-to-switch links")
    return t


def degraded(fabric: Any, args: argparse.Namespace) -> tuple[Any, str | None]:
    """``fabric`` with :func:`degradation_options`' switches and links
    removed (:func:`~smroute.fabric.generate.trees.degrade`), and what was
    removed (``None``: nothing asked)."""
    from smroute.fabric.generate.trees import degrade

    if not (args.remove_switches or args.remove_links):
        return fabric, None
    fabric, removed = degrade(fabric, np.random.default_rng(args.seed),
                              switches=args.remove_switches, links=args.remove_links)
    return fabric, (f"removed {len(removed.nodes)} switches and {len(removed.links)} links "
                    f"(seed {args.seed})")


def _tree_options(gen: argparse.ArgumentParser) -> None:
    gen.add_argument("--switch-ports", type=int, default=None, metavar="N",
                     help="ports per switch (default: what the tree uses; extra ports stay free)")


def add_parser(sub: Any) -> None:
    """Add ``generate`` to the ``fabric`` command's subparsers."""
    p = sub.add_parser(
        "generate",
        help="generate a fat-tree or a real-world shape as ibnetdiscover text or an ibsim "
        "net file (degraded, with aggregation nodes, hosts on a spine, split ports)",
        description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gs = p.add_subparsers(dest="generator", metavar="GENERATOR", required=True)

    g = gs.add_parser("pgft", help="PGFT(h; m..; w..; p..) by Zahavi's wiring rule")
    g.add_argument("spec", metavar="TUPLE", help='"h;m1,..,mh;w1,..,wh;p1,..,ph" or '
                   '"PGFT(...)", e.g. "3;18,18,36;1,18,18;1,1,1"')
    g.add_argument("--rlft", action="store_true",
                   help="refuse a tuple that is not a Real Life Fat-Tree (Zahavi's rules)")
    g.add_argument("--hosts-per-leaf", type=int, default=None, metavar="N",
                   help="keep N hosts per leaf switch (1..m1)")
    _tree_options(g)
    _common(g)

    g = gs.add_parser("xgft", help="XGFT(h; m..; w..) = PGFT with p = 1")
    g.add_argument("spec", metavar="TUPLE", help='"h;m1,..,mh;w1,..,wh", e.g. "2;18,36;1,18"')
    g.add_argument("--hosts-per-leaf", type=int, default=None, metavar="N",
                   help="keep N hosts per leaf switch (1..m1)")
    _tree_options(g)
    _common(g)

    g = gs.add_parser("kary-ntree", help="k-ary n-tree: k^n hosts, n k^(n-1) switches")
    g.add_argument("k", type=int)
    g.add_argument("n", type=int)
    _tree_options(g)
    _common(g)

    for name, what in (("thin-tree", "Navaridas' k:k',n-thin-tree"),
                       ("slender-tree", "Navaridas' k:k',n-slender-tree (k' divides k)")):
        g = gs.add_parser(name, help=what)
        g.add_argument("k", type=int, help="down-ports per switch")
        g.add_argument("k_up", type=int, metavar="K'", help="up-ports per switch")
        g.add_argument("n", type=int, help="levels")
        _tree_options(g)
        _common(g)

    g = gs.add_parser("navaridas", help='a tree in Navaridas\' notation: "8,4-fat-tree", '
                      '"8:4,4-thin-tree", "8:4,8-slender-tree"')
    g.add_argument("spec", metavar="SPEC")
    _tree_options(g)
    _common(g)

    g = gs.add_parser("ring", help="K switches in a ring with hosts on each")
    g.add_argument("k", type=int, help="switches")
    g.add_argument("--hosts", default="4", metavar="H[,H..]",
                   help="hosts per switch: one number or K numbers (default 4)")
    g.add_argument("--parallel", type=int, default=1, metavar="P",
                   help="links between neighbours (default 1)")
    _tree_options(g)
    _common(g)

    g = gs.add_parser("two-switch", help="two switches with hosts on both, linked")
    g.add_argument("--hosts", default="4", metavar="A[,B]",
                   help="hosts per switch: one number or two (default 4)")
    g.add_argument("--parallel", type=int, default=2, metavar="P",
                   help="links between the switches (default 2)")
    _tree_options(g)
    _common(g)

    g = gs.add_parser("director", help="a director chassis: line and spine ASICs, "
                      "internally a 2-level fat tree")
    g.add_argument("--system", default="dir01", help="system name (default dir01)")
    g.add_argument("--model", default="CS7500", help="model in descriptions (default CS7500)")
    g.add_argument("--line-cards", type=int, default=4, metavar="N", help="default 4")
    g.add_argument("--spine-cards", type=int, default=2, metavar="N", help="default 2")
    g.add_argument("--asics-per-card", type=int, default=1, metavar="N", help="default 1")
    g.add_argument("--radix", type=int, default=36, metavar="N", help="ASIC ports (default 36)")
    g.add_argument("--hosts-per-asic", type=int, default=0, metavar="N",
                   help="hosts on the external ports of every line ASIC (default 0)")
    g.add_argument("--device-id", type=lambda s: int(s, 0), default=0xCB20, metavar="ID",
                   help="ASIC device id (default 0xcb20; 0xbd36 = InfiniScale IV, whose "
                   "line-card ports ibnetdiscover -g prints as [ext N])")
    _common(g)

    g = gs.add_parser("dragonfly-plus", help="Dragonfly+: groups of a leaf/spine Clos, spine "
                      "j of every group cabled to spine j of every other")
    g.add_argument("groups", type=int, help="groups")
    g.add_argument("leaves", type=int, help="leaves a group")
    g.add_argument("spines", type=int, help="spines a group")
    g.add_argument("hosts", type=int, help="hosts a leaf")
    g.add_argument("--global-cables", type=int, default=1, metavar="N",
                   help="cables between spine j of two groups (default 1)")
    g.add_argument("--spread", action="store_true",
                   help="every two groups joined by one spine of each, a group's spines "
                   "spreading the other groups (the canonical Dragonfly+; default: spine j of "
                   "every group to spine j of every other)")
    g.add_argument("--radix", type=int, default=40, metavar="N",
                   help="switch ports (default 40, HDR Quantum)")
    _common(g)

    g = gs.add_parser("torus", help="a torus of switches with hosts on each (Gordon's 3-D "
                      "torus; a hypercube, SGI ICE's: every axis 2)")
    g.add_argument("dims", metavar="XxYxZ..", help="switches along each axis, e.g. 4x4x4")
    g.add_argument("--hosts", type=int_range(0), default=4, metavar="H",
                   help="hosts a switch (default 4)")
    g.add_argument("--parallel", type=int_range(1), default=1, metavar="P",
                   help="cables between neighbours (default 1)")
    g.add_argument("--radix", type=int, default=40, metavar="N",
                   help="switch ports (default 40, HDR Quantum)")
    _common(g)

    from smroute.cli.catalogue_cmd import add_catalogue_parser

    add_catalogue_parser(gs)  # named site shapes (smroute/cli/catalogue_cmd.py)


# --------------------------------------------------------------------------- building
def _check_size(nodes: int, label: str) -> None:
    if nodes > MAX_NODES:
        raise InputError(f"{label} lays out {nodes:,} nodes, more than the {MAX_NODES:,} "
                         "this command builds (a fabric addresses at most 49,151 LIDs)")


def _tree_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kw: dict[str, Any] = {"lmc": args.lmc}
    if args.speed is not None:
        kw["speed"] = args.speed
    if args.width is not None:
        kw["width"] = args.width
    if getattr(args, "switch_ports", None) is not None:
        kw["switch_ports"] = args.switch_ports
    return kw


def _pgft_args(args: argparse.Namespace) -> tuple[int, list[int], list[int], list[int], str]:
    from smroute.study.degrade import parse_pgft

    text = args.spec
    if args.generator == "xgft":
        mo = re.fullmatch(r"\s*(?:XGFT\s*\()?\s*([0-9;, ]+?)\s*\)?\s*", text, re.I)
        parts = mo.group(1).split(";") if mo else []
        if len(parts) != 3:
            raise InputError(f"bad XGFT tuple {excerpt(text)}: expected h;m1,..,mh;w1,..,wh, "
                             "e.g. 2;18,36;1,18")
        h = parts[0].strip()
        ones = ",".join(["1"] * int(h)) if h.isdigit() and int(h) < 64 else "1"
        text = f"{h};{parts[1]};{parts[2]};{ones}"
    try:
        spec = parse_pgft(text)
    except InputError as err:
        raise InputError(err.message.replace("PGFT", args.generator.upper())) from None
    h, m, w, p = spec.h, list(spec.m), list(spec.w), list(spec.p)
    name = (f"{args.generator.upper()}({h};{','.join(map(str, m))};{','.join(map(str, w))}"
            + (f";{','.join(map(str, p))})" if args.generator == "pgft" else ")"))
    return h, m, w, p, name


def generate_fabric(args: argparse.Namespace) -> tuple[Any, str]:
    """The generated fabric of ``args`` (before the transforms) and its label."""
    from smroute.fabric.generate import shapes
    from smroute.fabric.generate import trees as gen

    kind = args.generator
    kw = _tree_kwargs(args)
    if kind in ("pgft", "xgft"):
        h, m, w, p, label = _pgft_args(args)
        if kind == "pgft" and args.rlft:
            broken = gen.rlft_check(h, m, w, p)
            if broken:
                raise InputError(f"{label} is not a Real Life Fat-Tree: " + "; ".join(broken))
        _check_size(sum(gen.level_sizes(h, m, w)), label)
        if args.hosts_per_leaf is not None:
            kw["hosts_per_leaf"] = args.hosts_per_leaf
        if kind == "xgft":
            return gen.xgft(h, m, w, **kw), label
        return gen.pgft(h, m, w, p, **kw), label
    if kind in ("kary-ntree", "thin-tree", "slender-tree"):
        k, n = args.k, args.n
        if k < 1 or n < 1:
            raise InputError(f"{kind} needs k >= 1 and n >= 1, got k={k} n={n}")
        _check_size((n + 1) * k ** min(n, 64), f"{kind} k={k} n={n}")
        if kind == "kary-ntree":
            return gen.kary_ntree(k, n, **kw), f"{k}-ary {n}-tree"
        if kind == "thin-tree":
            return gen.thin_tree(k, args.k_up, n, **kw), f"{k}:{args.k_up},{n}-thin-tree"
        return gen.slender_tree(k, args.k_up, n, **kw), f"{k}:{args.k_up},{n}-slender-tree"
    if kind == "navaridas":
        nums = [int(x) for x in re.findall(r"\d+", args.spec)]
        if len(nums) >= 2:
            _check_size((nums[-1] + 1) * nums[0] ** min(nums[-1], 64), args.spec)
        return gen.navaridas_tree(args.spec, **kw), args.spec.strip()
    if kind in ("ring", "two-switch"):
        hosts = _ints(args.hosts, "--hosts")
        k = args.k if kind == "ring" else 2
        if len(hosts) not in (1, k):
            raise InputError(f"--hosts: expected one number or {k}, got {len(hosts)}")
        _check_size(k + (sum(hosts) if len(hosts) == k else k * hosts[0]), f"{kind}")
        per: int | list[int] = hosts[0] if len(hosts) == 1 else hosts
        if kind == "ring":
            return shapes.ring(k, per, parallel=args.parallel, **kw), f"ring of {k}"
        return shapes.two_switch(per, parallel=args.parallel, **kw), "two switches"
    if kind == "director":
        kw.pop("switch_ports", None)
        n_line = args.line_cards * args.asics_per_card
        _check_size(n_line * (1 + max(args.hosts_per_asic, 0))
                    + args.spine_cards * args.asics_per_card, "director")
        f = shapes.director(
            args.system, model=args.model, line_cards=args.line_cards,
            spine_cards=args.spine_cards, asics_per_card=args.asics_per_card,
            radix=args.radix, hosts_per_asic=args.hosts_per_asic, device_id=args.device_id,
            **kw,
        )
        return f, f"director {args.system} ({args.model})"
    if kind == "dragonfly-plus":
        _check_size(args.groups * args.leaves * (1 + max(args.hosts, 0))
                    + args.groups * args.spines, "dragonfly-plus")
        f = shapes.dragonfly_plus(args.groups, args.leaves, args.spines, args.hosts,
                                  global_cables=args.global_cables, spread=args.spread,
                                  radix=args.radix, speed=kw.get("speed", "HDR"),
                                  width=kw.get("width", 4), lmc=args.lmc, seed=args.seed)
        return f, (f"Dragonfly+ of {args.groups} groups ({args.leaves} leaves, {args.spines} "
                   "spines)")
    if kind == "torus":
        if not re.fullmatch(r"\d+(x\d+)*", args.dims):
            raise InputError(f"torus: expected switches along each axis as 4x4x4, got "
                             f"{excerpt(args.dims)}")
        dims = [int(x) for x in args.dims.split("x")]
        _check_size(int(np.prod(dims, dtype=object)) * (1 + args.hosts), "torus")
        f = shapes.torus(dims, args.hosts, parallel=args.parallel, radix=args.radix,
                         speed=kw.get("speed", "HDR"), width=kw.get("width", 4), lmc=args.lmc,
                         seed=args.seed)
        return f, f"torus {args.dims}"
    raise InputError(f"unknown generator {kind!r}; expected one of {', '.join(GENERATORS)}")


def _top_switch(fabric: Any) -> int:
    """The first switch of the highest rank (the first switch if none is ranked)."""
    from smroute.fabric.roles import fabric_roles

    roles = fabric_roles(fabric)
    sw = fabric.switches
    if roles.max_rank < 0:
        return int(sw[0])
    return int(np.flatnonzero(roles.rank == roles.max_rank)[0])


def _host_switches(fabric: Any) -> np.ndarray:
    """Switches linked to a CA, ascending."""
    from smroute.fabric.model.base import NodeType

    ca_rows = np.flatnonzero((fabric.node_type[fabric.port_node] == NodeType.CA)
                             & (fabric.port_peer >= 0))
    peers = fabric.port_node[fabric.port_peer[ca_rows]]
    return np.unique(peers[fabric.node_type[peers] == NodeType.SWITCH]).astype(np.int64)


def cmd_generate(args: argparse.Namespace) -> int:
    """Generate, transform and write the fabric (module doc); exit status 0."""
    from smroute.fabric.export.writers import chassis_ext_ports, format_ibsim_net, format_topology
    from smroute.fabric.generate import shapes

    if not is_stdout(args.out):
        check_output(args.out)
    fabric, label = generate_fabric(args)
    fabric, note = degraded(fabric, args)
    notes = [note] if note else []
    if args.spine_hosts:
        if len(fabric.switches) == 0:
            raise InputError("--spine-hosts: the fabric has no switch left")
        top = _top_switch(fabric)
        fabric = shapes.attach_cas(
            fabric, [top] * args.spine_hosts,
            [f"service{i + 1:02d} HCA-1" for i in range(args.spine_hosts)], lmc=args.lmc,
        )
        notes.append(f"{args.spine_hosts} service hosts on {fabric.node_desc[top]!r}")
    if args.split_ports:
        on = _host_switches(fabric)
        fabric = shapes.with_split_ports(fabric, on)
        notes.append(f"{len(on)} switches split-ready")
    if args.agg:
        fabric = shapes.with_aggregation_nodes(fabric)
        notes.append("aggregation nodes")

    if args.format == "ibsim":
        if args.ext_ports:
            raise InputError("--ext-ports applies to --format topology only")
        lines = format_ibsim_net(fabric)
    else:
        ext = chassis_ext_ports(fabric) if args.ext_ports else None
        lines = format_topology(fabric, ext_ports=ext)
    text = "\n".join(lines) + "\n"
    write_output(args.out, text)
    if not args.quiet:
        where = "stdout" if args.out == "-" else args.out
        print(f"smroute: {label}: {len(fabric.switches)} switches, {len(fabric.cas)} CAs, "
              f"{fabric.n_links} links" + "".join(f"; {n}" for n in notes)
              + f" -> {where} ({args.format})", file=sys.stderr)
    return 0
