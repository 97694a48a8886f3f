"""Slurm's network topology from the fabric's roles: ``topology.conf`` for the
``topology/tree`` plugin and ``topology.yaml`` (Slurm 24.11+: ``tree`` and
``block`` topologies).

Pure: :func:`slurm_topology` takes a :class:`~smroute.fabric.model.Fabric`
(and its :class:`~smroute.fabric.roles.FabricRoles`) and returns a
:class:`SlurmTopology`, whose :meth:`~SlurmTopology.to_conf` and
:meth:`~SlurmTopology.to_yaml` give the files' text.  Deterministic.

**Hosts.**  The end-ports of the roles ``include`` (default: compute only;
any of compute, service, storage, management, I/O) are Slurm nodes; SHARP
aggregation nodes, other switch-embedded CAs (a CA whose node GUID is its
switch's but for the low byte, or which shares its switch's system image GUID)
and routers are left out.  A host is named, per HCA, by the first of:

1. a ``host_map`` entry for the HCA's node GUID or one of its port GUIDs;
2. a ``host_map`` entry for its whole node description, or for the name
   derived from it;
3. the name derived from its node description: with ``name_regex``, the
   regex's group ``host`` (else its first group, else the whole match); by
   default the description's first word (``"a08-p1-dgx-04-c01 mlx5_5"`` gives
   ``a08-p1-dgx-04-c01``), unless the description is a vendor default
   (``"MT4129 ConnectX7   Mellanox Technologies"``, empty, ``localhost``).

A derived name must be a host name Slurm can use (letters, digits, ``.``,
``_``, ``-``; starting with a letter or digit; at most :data:`MAX_NAME`
characters).  HCAs with no usable name either get a generated name,
``ib-<node GUID>`` (one Slurm node per HCA), with a warning
(``unnamed="generate"``, the default), or make :func:`slurm_topology` raise
:class:`~smroute.errors.InputError` naming them (``unnamed="error"``).

HCAs with the same name are one Slurm node (a DGX's eight HCAs).  **A host whose
HCAs hang off several switches** (rail-optimized DGX pods, dual-rail hosts) is
placed on one of them, since Slurm's tree plugin wants every node under exactly
one leaf ("Multiple leaf switches contain nodes" otherwise): the switch with
most of its HCAs, then the lowest rank (a leaf before a spine), then the switch
of its first HCA in the natural order of the descriptions (``mlx5_0`` /
``HCA-1``: in a rail-optimized pod every host lands on its rail-0 leaf, so the
hosts of a scalable unit stay together).  The result counts them and a warning
names one.

**Switches.**  A switch's name comes from its description: ``MF0;NAME:MODEL/U1``
gives ``NAME``, a Voltaire ``"... # NAME"`` gives ``NAME``, a one-word
description is kept; vendor text (``"Quantum Mellanox Technologies"``) gives
``sw-<node GUID>``; a ``host_map`` entry for the switch's GUID wins.  Names are
sanitized to Slurm's limits (letters, digits, ``.``, ``_``, ``-``; at most
:data:`MAX_NAME` characters) and made unique by appending ``-<node GUID>``.

**Tree.**  One line per switch that has hosts below it: a switch that carries
hosts lists them (``Nodes=``); a switch of rank ``r > 0`` lists its linked
switches of rank ``r - 1`` (``Switches=``; a spine lists every leaf it is
cabled to, so a leaf has as many parents as spines).  Slurm refuses a switch
with both child switches and nodes, so hosts cabled to an upper switch are
listed by a switch ``<name>-hosts`` that stands for the upper switch's host
ports and is one of its children: they stay under the switch they are cabled
to.  Switches with no host below them (unranked ones, ones above only
aggregation nodes) are left out.  When no switch of a connected part of the
fabric reaches all of that part's hosts (leaves cabled to each other, degraded
trees), a switch ``fabric`` (``fabric2``, ...) lists the part's top switches,
so that Slurm lets jobs span the part as the cables do; parts of the fabric
that no cable joins stay separate trees.

``LinkSpeed=`` is the nominal data rate in Gb/s (4x NDR = 400, 4x HDR = 200,
4x EDR = 100) most common on the switch's cables to the children it lists;
omitted when the capture gives no speed.  Slurm does not use it.

**topology.yaml**: a list of topologies (``topology``, ``cluster_default``,
then one of ``tree`` / ``block`` / ``flat``); the ``tree`` entry has the
switches above as ``{switch, children, nodes}`` (hostlist strings), the
``block`` entry one block per switch that lists nodes (``{block, nodes}``) and
optionally ``block_sizes``.  :data:`TOPOLOGY_YAML_SCHEMA` is a JSON schema
written from Slurm's ``topology.yaml(5)``.

The pieces: host names and the host map are :mod:`smroute.fabric.export.slurm_names`,
the hostlist syntax :mod:`smroute.fabric.export.slurm_hostlist`, the result and its
files :mod:`smroute.fabric.export.slurm_files`; this module places hosts and switches.
"""

from __future__ import annotations

import re
from collections.abc import Collection

import numpy as np
import numpy.typing as npt

from smroute.errors import InputError
from smroute.fabric.export.slurm_files import (
    TOPOLOGY_YAML_SCHEMA,
    SlurmSwitch,
    SlurmTopology,
    check_block_sizes,
)
from smroute.fabric.export.slurm_hostlist import expand_hostlist, hostlist, natural_key
from smroute.fabric.export.slurm_names import (
    MAX_NAME,
    HostMap,
    derived_names,
    guid_names,
    parse_host_map,
    read_host_map,
    switch_base_name,
    unique_names,
)
from smroute.fabric.graph import components
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import EndportRole, FabricRoles, fabric_roles, switch_links

__all__ = [
    "MAX_NAME",
    "HOST_ROLES",
    "DEFAULT_ROLES",
    "LANE_GBPS",
    "TOPOLOGY_YAML_SCHEMA",
    "HostMap",
    "SlurmSwitch",
    "SlurmTopology",
    "parse_host_map",
    "read_host_map",
    "hostlist",
    "expand_hostlist",
    "natural_key",
    "slurm_topology",
    "check_block_sizes",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: End-port roles that are hosts (Slurm node candidates).
HOST_ROLES: tuple[EndportRole, ...] = (
    EndportRole.COMPUTE, EndportRole.SERVICE, EndportRole.STORAGE,
    EndportRole.MANAGEMENT, EndportRole.IO,
)
#: The roles that are Slurm nodes by default: compute hosts only (storage
#: servers, UFM and other management hosts, I/O and service nodes are not
#: where jobs run; ``include`` adds them).
DEFAULT_ROLES: tuple[EndportRole, ...] = (EndportRole.COMPUTE,)
#: Nominal data rate per lane in Gb/s, index = speed code of
#: :data:`smroute.fabric.model.SPEEDS` (4x of each is the marketed link rate).
LANE_GBPS: tuple[float, ...] = (0.0, 2.5, 5.0, 10.0, 10.0, 14.0, 25.0, 50.0, 100.0, 200.0)


# ------------------------------------------------------------------ the build
def _embedded(f: Fabric, ep: IntArray, att: IntArray) -> BoolArray:
    """End-ports built into their switch: the switch's node GUID but for the
    low byte, or the switch's (non-zero) system image GUID."""
    sw = np.maximum(att, 0)
    same = (f.node_guid[ep] >> np.uint64(8)) == (f.node_guid[sw] >> np.uint64(8))
    sysimg = (f.sysimg_guid[ep] != 0) & (f.sysimg_guid[ep] == f.sysimg_guid[sw])
    return (att >= 0) & (f.node_type[ep] == NodeType.CA) & (same | sysimg)


def _link_rates(f: Fabric) -> tuple[IntArray, IntArray, IntArray]:
    """Per link: node at each end and the nominal rate in Gb/s (0 unknown)."""
    la, lb = f.link_a, f.link_b
    w = np.where(f.port_width[la] > 0, f.port_width[la], f.port_width[lb]).astype(np.float64)
    s = np.where(f.port_speed[la] > 0, f.port_speed[la], f.port_speed[lb]).astype(np.int64)
    rate = np.floor(w * np.asarray(LANE_GBPS)[s] + 0.5).astype(np.int64)
    return f.port_node[la].astype(np.int64), f.port_node[lb].astype(np.int64), rate


def _mode_rate(group: IntArray, rate: IntArray, n_groups: int) -> IntArray:
    """Per group, the most common positive rate (the higher on a tie; 0 if none)."""
    out = np.zeros(n_groups, dtype=np.int64)
    ok = rate > 0
    if not ok.any():
        return out
    g, r = group[ok], rate[ok]
    key, cnt = np.unique(g * (1 << 20) + r, return_counts=True)
    kg, kr = key >> 20, key & ((1 << 20) - 1)
    o = np.lexsort((kr, cnt, kg))  # last per group: most common, then highest
    last = np.ones(len(o), dtype=bool)
    last[:-1] = kg[o][1:] != kg[o][:-1]
    out[kg[o][last]] = kr[o][last]
    return out


def slurm_topology(
    fabric: Fabric,
    roles: FabricRoles | None = None,
    *,
    host_map: HostMap | None = None,
    name_regex: str | re.Pattern[str] | None = None,
    unnamed: str = "generate",
    include: Collection[EndportRole] = DEFAULT_ROLES,
) -> SlurmTopology:
    """Slurm's view of ``fabric`` (see the module doc).

    ``roles`` default to :func:`~smroute.fabric.roles.fabric_roles`;
    ``host_map`` names hosts (and switches) by GUID or description;
    ``name_regex`` derives host names from descriptions instead of the first
    word; ``unnamed``: ``"generate"`` (``ib-<GUID>`` and a warning) or
    ``"error"`` (:class:`InputError`) for HCAs without a name; ``include``: the
    end-port roles that are Slurm nodes (default :data:`DEFAULT_ROLES`, compute
    hosts; aggregation nodes and routers never are).  :class:`InputError` if no host is left.
    """
    if unnamed not in ("generate", "error"):
        raise ValueError(f"unnamed must be 'generate' or 'error', not {unnamed!r}")
    f = fabric
    r = roles if roles is not None else fabric_roles(f)
    hmap = host_map or HostMap()
    rx = re.compile(name_regex) if isinstance(name_regex, str) else name_regex
    n = f.n_nodes
    is_sw = f.node_type == NodeType.SWITCH
    warnings: list[str] = []

    # ---- which end-ports are hosts
    ep = np.flatnonzero(r.endport_role >= 0)
    role = r.endport_role[ep].astype(np.int64)
    att = r.attach[ep]
    agg = role == EndportRole.AGGREGATION
    router = role == EndportRole.ROUTER
    emb = _embedded(f, ep, att) & ~agg
    wanted = np.isin(role, [int(x) for x in include if x not in (
        EndportRole.AGGREGATION, EndportRole.ROUTER)])
    keep = wanted & ~agg & ~router & ~emb
    left_out = {
        "aggregation": int(agg.sum()), "embedded": int(emb.sum()), "router": int(router.sum()),
        "role": int((~wanted & ~agg & ~router & ~emb).sum()),
    }
    hca = ep[keep]
    hatt = att[keep]
    if not len(hca):
        raise InputError("no host to place: the fabric has no end-port of the included roles "
                         f"({', '.join(EndportRole(int(x)).name.lower() for x in include)}) "
                         "other than aggregation nodes, switch-embedded CAs and routers")

    # ---- names
    descs = [f.node_desc[i] for i in hca.tolist()]
    names: list[str | None] = guid_names(f, hca, hmap)
    derived = derived_names(descs, rx)
    used_desc: set[str] = set()
    for i, nm in enumerate(names):
        if nm is not None:
            continue
        d, dn = descs[i], derived[i]
        if d in hmap.by_desc:
            names[i] = hmap.by_desc[d]
            used_desc.add(d)
        elif dn is not None and dn in hmap.by_desc:
            names[i] = hmap.by_desc[dn]
            used_desc.add(dn)
        else:
            names[i] = dn
    missing = [i for i, nm in enumerate(names) if nm is None]
    generated: list[str] = []
    if missing:
        eg = "; ".join(f.describe_node(int(hca[i])) for i in missing[:3])
        if unnamed == "error":
            raise InputError(
                f"{len(missing)} host(s) have no usable host name in their node description "
                f"(e.g. {eg}); name them in a host map (--host-map: 'GUID NAME' lines), derive "
                "names with --name-regex, or let them be named ib-<GUID> (--unnamed generate)")
        for i in missing:
            names[i] = f"ib-{int(f.node_guid[hca[i]]):016x}"
            generated.append(names[i])  # type: ignore[arg-type]
        warnings.append(
            f"{len(missing)} host(s) have no usable host name in their node description "
            f"(e.g. {eg}): named ib-<node GUID>, one Slurm node per HCA; name them with a "
            "host map (--host-map) or --name-regex")
    host_names_arr = np.array(names, dtype=object)
    uniq_names, hid = np.unique(host_names_arr, return_inverse=True)
    hid = hid.astype(np.int64).reshape(-1)
    n_hosts = len(uniq_names)

    # ---- placement: most HCAs, then lowest rank, then the first HCA's switch
    hca_order = np.empty(len(hca), dtype=np.int64)
    hca_order[sorted(range(len(hca)), key=lambda i: (natural_key(descs[i]),
                                                      int(f.node_guid[hca[i]])))] = \
        np.arange(len(hca))
    pair_key, pair_inv, pair_cnt = np.unique(hid * n + hatt, return_inverse=True,
                                             return_counts=True)
    pair_inv = pair_inv.reshape(-1)
    pair_host, pair_sw = pair_key // n, pair_key % n
    pair_first = np.full(len(pair_key), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(pair_first, pair_inv, hca_order)
    sw_rank = r.rank[pair_sw]
    rank_key = np.where(sw_rank < 0, np.iinfo(np.int32).max, sw_rank)
    o = np.lexsort((pair_first, rank_key, -pair_cnt, pair_host))
    first = np.ones(len(o), dtype=bool)
    first[1:] = pair_host[o][1:] != pair_host[o][:-1]
    host_sw = np.empty(n_hosts, dtype=np.int64)
    host_sw[pair_host[o][first]] = pair_sw[o][first]
    n_pairs = np.bincount(pair_host, minlength=n_hosts)
    split = np.flatnonzero(n_pairs > 1)

    # ---- which switches: those with a host below them
    a, b, loop = switch_links(f)
    la, lb = a[~loop], b[~loop]
    rank = r.rank
    src, dst = np.concatenate([la, lb]), np.concatenate([lb, la])
    ce = (rank[src] > 0) & (rank[dst] >= 0) & (rank[src] == rank[dst] + 1)
    edges = np.unique(src[ce] * n + dst[ce])
    par, chi = edges // n, edges % n
    carrier = np.zeros(n, dtype=bool)
    carrier[host_sw] = True
    has = carrier.copy()
    for rr in range(1, r.max_rank + 1):
        sel = rank[par] == rr
        np.logical_or.at(has, par[sel], has[chi[sel]])
    keep_e = has[par] & has[chi]
    par, chi = par[keep_e], chi[keep_e]
    emitted = np.flatnonzero(is_sw & has)
    with_children = np.zeros(n, dtype=bool)
    with_children[par] = True
    pseudo_of = np.flatnonzero(carrier & with_children)  # upper switches with hosts

    # ---- names of switches
    sw_map = guid_names(f, emitted, hmap) if hmap.by_guid else [None] * len(emitted)
    base = [m if m is not None else switch_base_name(f.node_desc[s], int(f.node_guid[s]))
            for s, m in zip(emitted.tolist(), sw_map, strict=True)]
    idx_of = np.full(n, -1, dtype=np.int64)
    idx_of[emitted] = np.arange(len(emitted))
    pseudo_base = [base[int(idx_of[s])][: MAX_NAME - 6] + "-hosts" for s in pseudo_of.tolist()]
    all_names = unique_names(
        base + pseudo_base,
        [int(g) for g in f.node_guid[emitted]] + [int(g) for g in f.node_guid[pseudo_of]])
    sw_name = {int(s): all_names[i] for i, s in enumerate(emitted.tolist())}
    holder_name = dict(sw_name)  # switch node -> name of the line listing its hosts
    for j, s in enumerate(pseudo_of.tolist()):
        holder_name[int(s)] = all_names[len(emitted) + j]

    # ---- link speeds
    na, nb, rate = _link_rates(f)
    kept_hca = np.zeros(n, dtype=bool)
    kept_hca[hca] = True
    # host cables: the switch end of each link to a kept HCA
    h_sw = np.concatenate([na[kept_hca[nb] & is_sw[na]], nb[kept_hca[na] & is_sw[nb]]])
    h_rate = np.concatenate([rate[kept_hca[nb] & is_sw[na]], rate[kept_hca[na] & is_sw[nb]]])
    host_speed = _mode_rate(h_sw, h_rate, n)
    # switch cables to listed children
    child_pair = np.zeros(0, dtype=np.int64) if not len(par) else np.unique(par * n + chi)
    lk1, lk2 = na * n + nb, nb * n + na
    m1 = np.isin(lk1, child_pair)
    m2 = np.isin(lk2, child_pair)
    d_sw = np.concatenate([na[m1], nb[m2]])
    d_rate = np.concatenate([rate[m1], rate[m2]])
    down_speed = _mode_rate(d_sw, d_rate, n)

    # ---- hosts per holder
    order_h = sorted(range(n_hosts), key=lambda i: natural_key(str(uniq_names[i])))
    hosts_of: dict[int, list[str]] = {}
    for i in order_h:
        hosts_of.setdefault(int(host_sw[i]), []).append(str(uniq_names[i]))

    lines: list[SlurmSwitch] = []
    children_of: dict[int, list[str]] = {}
    for p, c in zip(par.tolist(), chi.tolist(), strict=True):
        children_of.setdefault(p, []).append(sw_name[c])
    for s in emitted.tolist():
        lvl = int(rank[s]) if rank[s] >= 0 else 0
        if s in children_of:
            kids = list(children_of[s])
            if carrier[s]:
                kids.append(holder_name[s])
                lines.append(SlurmSwitch(holder_name[s], s, 0, (), tuple(hosts_of[s]),
                                         int(host_speed[s]), "hosts"))
            lines.append(SlurmSwitch(sw_name[s], s, lvl, tuple(sorted(kids, key=natural_key)),
                                     (), int(down_speed[s])))
        else:
            lines.append(SlurmSwitch(sw_name[s], s, lvl, (), tuple(hosts_of[s]),
                                     int(host_speed[s])))

    # ---- a root for each connected part no switch covers
    lines += _fabric_roots(f, lines, la, lb)
    lines.sort(key=lambda s: (s.level, natural_key(s.name)))

    if len(split):
        h = int(split[0])
        others = sorted({sw_name.get(s) or switch_base_name(f.node_desc[s], int(f.node_guid[s]))
                         for s in pair_sw[pair_host == h].tolist()}
                        - {holder_name[int(host_sw[h])]}, key=natural_key)
        warnings.append(
            f"{len(split)} host(s) have HCAs on several switches; each is listed under the "
            "switch with most of its HCAs (a leaf first, then its first HCA's), e.g. "
            f"{uniq_names[h]} under {holder_name[int(host_sw[h])]}, not {', '.join(others[:4])}"
            + (" ..." if len(others) > 4 else ""))
    unused = [k for k in hmap.by_desc if k not in used_desc]
    used_g = set(int(g) for g in f.node_guid) | set(int(g) for g in f.port_guid[f.port_exists])
    unused_g = [g for g in hmap.by_guid if g not in used_g]
    if unused or unused_g:
        eg2 = [f"{g:#018x}" for g in unused_g[:2]] + [repr(k) for k in unused[:2]]
        warnings.append(f"{hmap.source}: {len(unused) + len(unused_g)} entries match no host "
                        f"(e.g. {', '.join(eg2)})")

    hca_host = np.full(n, -1, dtype=np.int64)
    rank_of_name = np.empty(n_hosts, dtype=np.int64)
    rank_of_name[np.array(order_h, dtype=np.int64)] = np.arange(n_hosts)
    hca_host[hca] = rank_of_name[hid]
    return SlurmTopology(
        switches=tuple(lines),
        hosts=tuple(str(uniq_names[i]) for i in order_h),
        host_switch=tuple(holder_name[int(host_sw[i])] for i in order_h),
        hca_host=hca_host,
        split_hosts=tuple(sorted((str(uniq_names[i]) for i in split.tolist()), key=natural_key)),
        generated=tuple(sorted(generated, key=natural_key)),
        left_out=left_out,
        warnings=tuple(warnings),
    )


def _fabric_roots(
    f: Fabric, lines: list[SlurmSwitch], la: IntArray, lb: IntArray,
) -> list[SlurmSwitch]:
    """Synthetic ``fabric`` switches: one per connected part of the fabric in
    which no switch reaches all of the part's node-listing switches."""
    if not lines:
        return []
    names = [s.name for s in lines]
    pos = {nm: i for i, nm in enumerate(names)}
    holders = np.array([i for i, s in enumerate(lines) if s.nodes], dtype=np.int64)
    hpos = np.full(len(lines), -1, dtype=np.int64)
    hpos[holders] = np.arange(len(holders))
    cover = np.zeros((len(lines), len(holders)), dtype=bool)
    cover[holders, np.arange(len(holders))] = True
    # children edges between lines, processed by level
    pe, ce = [], []
    for i, s in enumerate(lines):
        for c in s.switches:
            pe.append(i)
            ce.append(pos[c])
    par, chi = np.array(pe, dtype=np.int64), np.array(ce, dtype=np.int64)
    level = np.array([s.level for s in lines], dtype=np.int64)
    for lv in range(1, int(level.max()) + 1 if len(level) else 1):
        sel = level[par] == lv
        np.logical_or.at(cover, par[sel], cover[chi[sel]])
    # physical parts: components of the switch graph, through each line's switch
    comp = components(f.n_nodes, la, lb)
    line_node = np.array([s.node for s in lines], dtype=np.int64)
    line_comp = comp[line_node]
    has_parent = np.zeros(len(lines), dtype=bool)
    has_parent[chi] = True
    out: list[SlurmSwitch] = []
    used = set(names)
    for cpt in np.unique(line_comp[holders]).tolist():
        in_c = line_comp == cpt
        hcols = hpos[np.flatnonzero(in_c & (hpos >= 0))]
        if cover[np.ix_(np.flatnonzero(in_c), hcols)].all(axis=1).any():
            continue
        tops = [names[i] for i in np.flatnonzero(in_c & ~has_parent).tolist()]
        k = len(out) + 1
        nm = "fabric" if k == 1 else f"fabric{k}"
        while nm in used:
            k += 1
            nm = f"fabric{k}"
        used.add(nm)
        lvl = int(level[in_c].max()) + 1
        out.append(SlurmSwitch(nm, -1, lvl, tuple(sorted(tops, key=natural_key)), (), 0,
                               "fabric"))
    return out
