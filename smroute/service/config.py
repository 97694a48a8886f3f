"""The routing daemon's configuration: YAML in, frozen dataclasses out.

``parse_config(text, source)`` is pure (YAML text in, :class:`ServiceConfig`
out); ``load_config(path)`` reads a file, resolves relative paths against the
file's directory and checks that the files it names exist.  Every unknown key
and bad value raises :class:`ConfigError` naming the key path (``tls.key``),
what was expected, the file and the line.

The YAML is read defensively: the file is bounded to :data:`MAX_CONFIG_BYTES`,
anchors, aliases and custom tags are refused (no alias bombs, no object
construction), duplicate keys are errors instead of "last one wins".

Sizes (``limits.*_bytes``) accept integers or strings such as ``"64MiB"``
(units B, KB/MB/GB = 1000^n, KiB/MiB/GiB = 1024^n).  Listen addresses are
``host:port``, ``[v6addr]:port`` or ``unix:/absolute/path``.
``fabric_dirs`` entries must be absolute (they are not resolved against the
file's directory); ``load_config`` checks they are readable directories.

Cross-field rules are checked in ``ServiceConfig.__post_init__`` so that
``dataclasses.replace(cfg, listen=...)`` (CLI overrides) is validated too:

* a non-loopback plaintext listener needs ``allow_insecure_listen: true``;
* ``tls.require_client_cert`` and ``mutating_identities`` need ``tls.client_ca``;
* ``limits.max_topology_bytes`` must fit in ``limits.max_receive_bytes``.

Conditions that are allowed but worth a log line are returned by
:meth:`ServiceConfig.warnings`.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from smroute.routing import api
from smroute.service.config_dump import config_to_dict, config_value
from smroute.service.config_files import dir_problem, file_problem, read_regular
from smroute.service.rpc.listen import LISTEN_EXPECTED
from smroute.service.rpc.peercred import resolve_ids
from smroute.service.rpc.tls import check_tls
from smroute.service.settings import (
    GRPC_MAX,
    GUID_FILE_KEYS,
    LOG_FORMATS,
    LOG_LEVELS,
    MAX_CONFIG_BYTES,
    BadValue,
    ConfigError,
    LimitsConfig,
    ListenAddress,
    ServiceConfig,
    StateConfig,
    TlsConfig,
    default_config,
    default_state_path,
    format_size,
    parse_listen,
    parse_size,
    v_max_vls,
)

__all__ = [
    "ConfigError",
    "GUID_FILE_KEYS",
    "TlsConfig",
    "LimitsConfig",
    "ServiceConfig",
    "StateConfig",
    "ListenAddress",
    "parse_listen",
    "parse_size",
    "format_size",
    "parse_config",
    "load_config",
    "check_config",
    "default_config",
    "dir_problem",
    "config_to_dict",
    "MAX_CONFIG_BYTES",
    "LOG_LEVELS",
    "LOG_FORMATS",
]


def _v_int(lo: int, hi: int) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise BadValue(f"an integer {lo}..{hi}")
        return v
    return check


def _v_null_or(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def check_or_null(v: Any) -> Any:
        if v is None:
            return None
        try:
            return check(v)
        except BadValue as bad:
            raise BadValue(f"{bad.expected} or null") from None
    return check_or_null


def _v_float(lo: float, hi: float, unit: str) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                or not lo <= v <= hi:
            raise BadValue(f"a number of {unit} {lo:g}..{hi:g}")
        return float(v)
    return check


def _v_bool(v: Any) -> Any:
    if not isinstance(v, bool):
        raise BadValue("true or false")
    return v


def _v_choice(*choices: str) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v not in choices:
            raise BadValue("one of " + ", ".join(choices))
        return v
    return check


def _v_listen(allow_unix: bool, nullable: bool) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v is None and nullable:
            return None
        if not isinstance(v, str):
            raise BadValue((LISTEN_EXPECTED if allow_unix else "'host:port' or '[ipv6]:port'")
                       + (" (or null to disable)" if nullable else ""))
        try:
            return str(parse_listen(v, allow_unix=allow_unix))
        except ValueError as err:
            msg = str(err).removeprefix("expected ")
            raise BadValue(msg + (" (or null to disable)" if nullable else "")) from None
    return check


def _v_path(nullable: bool) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v is None and nullable:
            return None
        if not isinstance(v, str) or not v.strip() or "\0" in v:
            raise BadValue("a file path" + (" or null" if nullable else ""))
        return Path(os.path.expanduser(v))
    return check


def _v_size(lo: int, hi: int) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        try:
            n = parse_size(v)
        except ValueError as err:
            raise BadValue(str(err).removeprefix("expected ").split(", got ")[0]) from None
        if not lo <= n <= hi:
            raise BadValue(f"a size {format_size(lo)}..{format_size(hi)} ({lo}..{hi} bytes)")
        return n
    return check


def _v_identities(v: Any) -> Any:
    if not isinstance(v, list):
        raise BadValue("a list of client identities (certificate CN or SAN names)")
    return v  # items are checked one by one with their own lines


def _v_dirs(v: Any) -> Any:
    if not isinstance(v, list):
        raise BadValue("a list of absolute directory paths (e.g. [/var/lib/smroute/fabrics])")
    return v  # items are checked one by one with their own lines


def _v_ids(v: Any) -> Any:
    if v is not None and not isinstance(v, list):
        raise BadValue("a list of user or group names or numbers (or null for the default)")
    return v  # items are checked one by one with their own lines


def _item_id(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, str | int) or not str(v).strip():
        raise BadValue("a user or group name, or a number")
    return str(v).strip()


def _item_identity(v: Any) -> str:
    if not isinstance(v, str) or not v.strip() or len(v) > 1024:
        raise BadValue("a non-empty name (certificate CN or SAN)")
    return v.strip()


def _item_dir(v: Any) -> Path:
    if not isinstance(v, str) or not v.strip() or "\0" in v:
        raise BadValue("an absolute directory path")
    p = Path(os.path.expanduser(v.strip()))
    if not p.is_absolute():
        raise BadValue("an absolute directory path (relative paths are not accepted here)")
    return p


#: List-valued keys: the check of the whole value and the check of each item.
_LISTS: dict[Callable[[Any], Any], Callable[[Any], Any]] = {
    _v_identities: _item_identity,
    _v_dirs: _item_dir,
    _v_ids: _item_id,
}


_TOP: dict[str, Callable[[Any], Any]] = {
    "listen": _v_listen(True, False),
    "workers": _v_int(1, 256),
    "algorithm": _v_choice(*api.names()),
    "lmc": _v_null_or(_v_int(0, 7)),
    "max_vls": v_max_vls,
    "route_all_ca_pairs": _v_bool,
    "epoch_history": _v_int(2, 10_000),
    "fabric": _v_path(True),
    "root_guid_file": _v_path(True),
    "cn_guid_file": _v_path(True),
    "io_guid_file": _v_path(True),
    "fabric_dirs": _v_dirs,
    "coalesce_ms": _v_float(0.0, 60_000.0, "milliseconds"),
    "mutating_identities": _v_identities,
    "allow_insecure_mutations": _v_bool,
    "allow_insecure_listen": _v_bool,
    "metrics_listen": _v_listen(False, True),
    "socket_group": _v_null_or(_item_id),
    "mutating_users": _v_ids,
    "mutating_groups": _v_ids,
    "log_format": _v_choice(*LOG_FORMATS),
    "log_level": _v_choice(*LOG_LEVELS),
    "shutdown_grace_s": _v_float(0.0, 3600.0, "seconds"),
}
_TLS: dict[str, Callable[[Any], Any]] = {
    "cert": _v_path(False),
    "key": _v_path(False),
    "client_ca": _v_path(True),
    "require_client_cert": _v_bool,
}
_LIMITS: dict[str, Callable[[Any], Any]] = {
    "max_topology_bytes": _v_size(1024, GRPC_MAX),
    "max_message_bytes": _v_size(1024, GRPC_MAX),
    "max_receive_bytes": _v_size(1024, GRPC_MAX),
    "max_fault_events": _v_int(1, 10_000_000),
    "max_streams": _v_int(1, 100_000),
    "max_watchers": _v_int(1, 100_000),
    "analyze_max_hosts": _v_int(1, 10_000_000),
    "max_streams_per_client": _v_int(1, 100_000),
    "stream_idle_s": _v_float(0.0, 604_800.0, "seconds"),
    "reserved_workers": _v_int(1, 1000),
}
_STATE: dict[str, Callable[[Any], Any]] = {
    "path": lambda v: None if v is None or str(v).strip().lower() in ("", "none")
    else default_state_path() if v == "default" else _v_path(False)(v),
    "keep_epochs": _v_int(1, 10_000),
}
_SECTIONS = {"tls": _TLS, "metrics_tls": _TLS, "limits": _LIMITS, "state": _STATE}
_PATH_KEYS = ("fabric", *(f"{t}.{k}" for t in ("tls", "metrics_tls")
                          for k in ("cert", "key", "client_ca")), *GUID_FILE_KEYS)


# --------------------------------------------------------------------------- YAML walk


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _construct_scalar(node: yaml.ScalarNode) -> Any:
    constructor = yaml.constructor.SafeConstructor()
    return constructor.construct_object(node, deep=True)


@contextlib.contextmanager
def _collecting(errors: list[ConfigError] | None) -> Iterator[None]:
    """Append a :class:`ConfigError` raised inside to ``errors`` and go on,
    or let it through when ``errors`` is ``None``."""
    try:
        yield
    except ConfigError as err:
        if errors is None:
            raise
        errors.append(err)


def _mapping(node: yaml.Node, key: str, source: str, schema: Mapping[str, Any],
             errors: list[ConfigError] | None = None
             ) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    """``{name: (key_node, value_node)}`` of a YAML mapping, refusing unknown
    and duplicate keys (each one added to ``errors`` and left out, if given)."""
    where = f"'{key}'" if key else "the top level"
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"expected a mapping of keys at {where}, got a "
                          f"{'list' if isinstance(node, yaml.SequenceNode) else 'value'}",
                          key=key or None, source=source, line=_line(node))
    out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for knode, vnode in node.value:
        name = knode.value if isinstance(knode, yaml.ScalarNode) else None
        if not isinstance(name, str) or knode.tag != "tag:yaml.org,2002:str":
            raise ConfigError(f"expected a key name at {where}, got {name!r}",
                              key=key or None, source=source, line=_line(knode))
        path = f"{key}.{name}" if key else name
        with _collecting(errors):
            if name not in schema:
                known = ", ".join(sorted(schema))
                raise ConfigError(f"unknown key; expected one of: {known}", key=path,
                                  source=source, line=_line(knode))
            if name in out:
                raise ConfigError(f"duplicate key (first given on line {_line(out[name][0])})",
                                  key=path, source=source, line=_line(knode))
            out[name] = (knode, vnode)
    return out


def _value(vnode: yaml.Node, path: str, check: Callable[[Any], Any], source: str,
           lines: dict[str, int] | None = None) -> Any:
    if isinstance(vnode, yaml.MappingNode):
        raise ConfigError("expected a single value, got a mapping", key=path, source=source,
                          line=_line(vnode))
    if isinstance(vnode, yaml.SequenceNode):
        item_check = _LISTS.get(check)
        if item_check is None:
            raise ConfigError("expected a single value, got a list", key=path, source=source,
                              line=_line(vnode))
        items = []
        for i, item in enumerate(vnode.value):
            v = _plain(item, f"{path}[{i}]", source)
            try:
                items.append(item_check(v))
            except BadValue as bad:
                raise ConfigError(f"expected {bad.expected}, got {v!r}", key=f"{path}[{i}]",
                                  source=source, line=_line(item)) from None
            if lines is not None:
                lines[f"{path}[{i}]"] = _line(item)
        return tuple(items)
    raw = _plain(vnode, path, source)
    try:
        out = check(raw)
    except BadValue as bad:
        raise ConfigError(f"expected {bad.expected}, got {raw!r}", key=path, source=source,
                          line=_line(vnode)) from None
    return tuple(out) if isinstance(out, list) else out


def _plain(node: yaml.Node, path: str, source: str) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        raise ConfigError("expected a single value", key=path, source=source, line=_line(node))
    if node.tag not in _PLAIN_TAGS:
        raise ConfigError(f"unsupported YAML value type {node.tag}", key=path, source=source,
                          line=_line(node))
    return _construct_scalar(node)


_PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null"))


def _mark_line(mark: Any) -> int | None:
    return mark.line + 1 if mark is not None else None


def _compose(text: str, source: str) -> yaml.Node | None:
    """The YAML node tree of ``text``; refuses anchors, aliases, tags, many documents."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"config is {size} bytes; expected at most {MAX_CONFIG_BYTES}",
                          source=source)
    try:
        for ev in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
                raise ConfigError("YAML anchors and aliases (&, *) are not accepted in a "
                                  "config file; write each value out", source=source,
                                  line=_mark_line(ev.start_mark))
            tag = getattr(ev, "tag", None)
            if tag is not None and tag != "!" and not isinstance(ev, yaml.DocumentStartEvent):
                raise ConfigError(f"explicit YAML tags ({tag}) are not accepted in a config "
                                  "file", source=source, line=_mark_line(ev.start_mark))
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        what = " ".join(x for x in (err.context, err.problem) if x)
        raise ConfigError(f"not valid YAML: {what}", source=source,
                          line=mark.line + 1 if mark else None) from None
    except yaml.YAMLError as err:
        raise ConfigError(f"not valid YAML: {err}", source=source) from None


def _parse(text: str, source: str, base_dir: Path | None,
           errors: list[ConfigError] | None = None
           ) -> tuple[ServiceConfig | None, dict[str, int]]:
    """The config and the line of each key given (``{"tls.key": 7}``).

    With ``errors``, each bad key is added to it and left at its default, and
    the config is ``None`` when the keys given do not combine."""
    root = _compose(text, source)
    lines: dict[str, int] = {}
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    if root is not None and not (isinstance(root, yaml.ScalarNode)
                                 and root.tag == "tag:yaml.org,2002:null"):
        schema: dict[str, Any] = {**_TOP, **_SECTIONS}
        for name, (knode, vnode) in _mapping(root, "", source, schema, errors).items():
            lines[name] = _line(knode)
            if name in _SECTIONS:
                if isinstance(vnode, yaml.ScalarNode) and vnode.tag.endswith(":null"):
                    sections[name] = {}
                    continue
                sub = _SECTIONS[name]
                sections[name] = {}
                with _collecting(errors):
                    for sname, (sk, sv) in _mapping(vnode, name, source, sub, errors).items():
                        lines[f"{name}.{sname}"] = _line(sk)
                        with _collecting(errors):
                            sections[name][sname] = _value(sv, f"{name}.{sname}", sub[sname],
                                                           source)
            else:
                with _collecting(errors):
                    top[name] = _value(vnode, name, _TOP[name], source, lines)
    if base_dir is not None:
        for key in _PATH_KEYS:
            sec, _, name = key.rpartition(".")
            holder = sections.get(sec, {}) if sec else top
            p = holder.get(name)
            if isinstance(p, Path) and not p.is_absolute():
                holder[name] = base_dir / p
    try:
        for sec in ("tls", "metrics_tls"):
            if sec in sections:
                top[sec] = _tls_section(sec, sections[sec], sec in lines and root is not None)
        if "limits" in sections:
            top["limits"] = LimitsConfig(**sections["limits"])
        if "state" in sections:  # a relative path: against the file's directory
            sp = sections["state"].get("path")
            if base_dir is not None and isinstance(sp, Path) and not sp.is_absolute():
                sections["state"]["path"] = base_dir / sp
            top["state"] = StateConfig(**sections["state"])
        cfg = ServiceConfig(**top)
    except ConfigError as err:
        line = lines.get(err.key or "", lines.get((err.key or "").partition(".")[0]))
        with _collecting(errors):
            raise err.located(source=source, line=line) from None
        return None, lines
    return cfg, lines


def _tls_section(sec: str, tls: dict[str, Any], given: bool) -> TlsConfig | None:
    if given and tls == {}:
        return None  # "tls:" or "tls: null" = off
    missing = [k for k in ("cert", "key") if k not in tls]
    if missing:
        raise ConfigError(f"missing; expected a PEM file path when a {sec}: section is given "
                          f"(or {sec}: null for plaintext)", key=f"{sec}.{missing[0]}")
    return TlsConfig(**tls)


def parse_config(text: str, source: str = "<config>", *,
                 base_dir: str | os.PathLike[str] | None = None) -> ServiceConfig:
    """The :class:`ServiceConfig` described by YAML ``text``.

    Keys not given take their defaults; an empty document is the default
    config.  Relative paths (``fabric``, ``tls.*``) are resolved against
    ``base_dir`` when given (``load_config`` passes the file's directory),
    else kept as written.  Raises :class:`ConfigError` (exit code 2) naming
    ``source``, the line, the key path and what was expected.
    """
    cfg = _parse(text, source, Path(base_dir) if base_dir is not None else None)[0]
    assert cfg is not None  # without a list of errors, the first one is raised
    return cfg


def load_config(path: str | os.PathLike[str], *, check_files: bool = True) -> ServiceConfig:
    """Read and parse the config file ``path``.

    Relative paths inside are resolved against the file's directory.  With
    ``check_files`` every file the config names (``fabric``, ``tls.cert``,
    ``tls.key``, ``tls.client_ca``) must exist and be readable, every
    ``fabric_dirs`` entry must be a readable directory, and the TLS
    files must be usable (PEM, key matching the certificate, certificate
    within its validity dates: :func:`smroute.service.rpc.auth.check_tls`);
    otherwise a :class:`ConfigError` names the key and its line (the first
    of them: :func:`check_config` gives them all).
    """
    cfg, errors = check_config(path, check_files=check_files)
    if errors:
        raise errors[0]
    assert cfg is not None
    return cfg


def check_config(path: str | os.PathLike[str], *, check_files: bool = True
                 ) -> tuple[ServiceConfig | None, list[ConfigError]]:
    """Every error of the config file ``path`` (in file order, then the
    files it names), as :func:`load_config` checks it, and the config its
    good keys make (bad keys at their defaults; ``None`` when the file cannot
    be read or parsed, or its keys do not combine)."""
    p = Path(path)
    source = str(path)
    errors: list[ConfigError] = []
    try:
        data = read_regular(p, source)
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(f"config file is larger than {MAX_CONFIG_BYTES} bytes; expected "
                              "a small YAML file", source=source)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ConfigError(f"expected UTF-8 text ({err.reason} at byte {err.start})",
                              source=source) from None
        cfg, lines = _parse(text, source, p.resolve().parent, errors)
    except ConfigError as err:
        return None, [*errors, err]
    if check_files and cfg is not None:
        for key in _PATH_KEYS:
            value = config_value(cfg, key)
            problem = file_problem(Path(value)) if value is not None else None
            if problem:
                errors.append(ConfigError(f"{problem}: {value}", key=key, source=source,
                                          line=lines.get(key)))
        for i, d in enumerate(cfg.fabric_dirs):
            problem = dir_problem(d)
            if problem:
                key = f"fabric_dirs[{i}]"
                errors.append(ConfigError(f"{problem}: {d}", key=key, source=source,
                                          line=lines.get(key, lines.get("fabric_dirs"))))
        for key, kind in (("mutating_users", "user"), ("mutating_groups", "group"),
                          ("socket_group", "group")):
            names = getattr(cfg, key)
            try:  # names must exist on this host (the daemon resolves them at start)
                resolve_ids([names] if isinstance(names, str) else names or (), kind)
            except ValueError as err:
                errors.append(ConfigError(str(err), key=key, source=source,
                                          line=lines.get(key)))
        for sec in ("tls", "metrics_tls"):
            tls = getattr(cfg, sec)
            if tls is None:
                continue
            try:
                check_tls(tls)
            except ConfigError as err:
                key = (err.key or "").replace("tls.", f"{sec}.", 1)
                errors.append(err.located(source=source, line=lines.get(key)))
    return cfg, errors
