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

import dataclasses
import ipaddress
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from smroute.errors import InputError
from smroute.routing.engine import ALGORITHMS

__all__ = [
    "ConfigError",
    "TlsConfig",
    "LimitsConfig",
    "ServiceConfig",
    "ListenAddress",
    "parse_listen",
    "parse_size",
    "parse_config",
    "load_config",
    "default_config",
    "dir_problem",
    "config_to_dict",
    "MAX_CONFIG_BYTES",
    "LOG_LEVELS",
    "LOG_FORMATS",
]

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

#: A config file larger than this is refused before YAML sees it (bytes).
MAX_CONFIG_BYTES = 1 * MiB
#: gRPC message size limits are C ints.
_GRPC_MAX = 2**31 - 1
#: sun_path is 108 bytes including the terminating NUL.
_UNIX_PATH_MAX = 107

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("json", "text")


class ConfigError(InputError):
    """A bad configuration: ``SOURCE:LINE: KEY: what was expected, got what``.

    ``key`` is the dotted key path (``tls.client_ca``) or ``None`` for errors
    about the document as a whole (syntax, size).
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        source: str | None = None,
        line: int | None = None,
    ):
        self.key = key
        super().__init__(f"{key}: {message}" if key else message, source=source, line=line)
        self.detail = message

    def with_source(self, source: str) -> ConfigError:
        return self.located(source=source)

    def located(self, *, source: str | None = None, line: int | None = None) -> ConfigError:
        """The same error with ``source`` / ``line`` filled in where missing."""
        return ConfigError(
            self.detail,
            key=self.key,
            source=self.source if self.source is not None else source,
            line=self.line if self.line is not None else line,
        )


class _Bad(Exception):
    """A value check failed; ``expected`` completes "expected ...". """

    def __init__(self, expected: str):
        super().__init__(expected)
        self.expected = expected


# --------------------------------------------------------------------------- listen addresses


@dataclass(frozen=True)
class ListenAddress:
    """A parsed listen address.

    ``kind`` is ``"tcp"`` (``host``, ``port`` set; ``host`` without brackets)
    or ``"unix"`` (``path`` set).  ``grpc_address`` is the form
    ``grpc.Server.add_*_port`` takes.
    """

    kind: Literal["tcp", "unix"]
    host: str = ""
    port: int = 0
    path: str = ""

    @property
    def is_loopback(self) -> bool:
        """True for Unix sockets, ``localhost``, 127.0.0.0/8 and ``::1``."""
        if self.kind == "unix":
            return True
        if self.host.lower() in ("localhost", "localhost."):
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name other than localhost: cannot tell, assume not

    @property
    def grpc_address(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return self.grpc_address


_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")
_LISTEN_EXPECTED = "'host:port', '[ipv6]:port' or 'unix:/absolute/path'"


def parse_listen(value: str, *, allow_unix: bool = True) -> ListenAddress:
    """Parse ``host:port``, ``[v6]:port`` or (if ``allow_unix``) ``unix:/abs/path``.

    Raises ``ValueError`` whose message says what was expected.  Port 0 (pick a
    free port) is allowed.
    """
    expected = _LISTEN_EXPECTED if allow_unix else "'host:port' or '[ipv6]:port'"
    if not isinstance(value, str) or not value or value != value.strip():
        raise ValueError(f"expected {expected}, got {value!r}")
    if value.startswith("unix:"):
        if not allow_unix:
            raise ValueError(f"expected {expected} (no Unix socket here), got {value!r}")
        path = value[len("unix:"):]
        if path.startswith("//"):  # unix:///abs/path (the URI form) means /abs/path
            path = path[2:]
        if not path.startswith("/"):
            raise ValueError(f"expected an absolute socket path after 'unix:', got {value!r}")
        if len(os.fsencode(path)) > _UNIX_PATH_MAX:
            raise ValueError(
                f"Unix socket path is {len(os.fsencode(path))} bytes, "
                f"at most {_UNIX_PATH_MAX} fit in sun_path: {value!r}"
            )
        if "\0" in path:
            raise ValueError(f"NUL byte in socket path {value!r}")
        return ListenAddress("unix", path=os.path.normpath(path))
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or value[end + 1:end + 2] != ":":
            raise ValueError(f"expected {expected}, got {value!r}")
        host, port_s = value[1:end], value[end + 2:]
        try:
            if ipaddress.ip_address(host).version != 6:
                raise ValueError
        except ValueError:
            raise ValueError(f"expected an IPv6 address inside [...], got {value!r}") from None
    else:
        host, sep, port_s = value.rpartition(":")
        if not sep or not host:
            raise ValueError(f"expected {expected}, got {value!r}")
        if ":" in host:
            raise ValueError(f"an IPv6 address needs brackets, e.g. '[::1]:50051', got {value!r}")
        if not _HOSTNAME.match(host):
            try:
                ipaddress.ip_address(host)
            except ValueError:
                raise ValueError(f"expected a host name or IP address, got {host!r} "
                                 f"in {value!r}") from None
    if not port_s.isdigit() or not 0 <= int(port_s) <= 65535:
        raise ValueError(f"expected a port 0..65535, got {port_s!r} in {value!r}")
    return ListenAddress("tcp", host=host, port=int(port_s))


# --------------------------------------------------------------------------- sizes

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
          "kib": KiB, "mib": MiB, "gib": GiB, "tib": 1024 * GiB}


def parse_size(value: int | str) -> int:
    """Bytes from an integer or a string like ``"64MiB"``, ``"1.5 GB"``, ``"4096"``.

    Raises ``ValueError`` (message says what was expected).  Fractional
    results are rounded down to whole bytes.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a size (integer bytes or e.g. '64MiB'), got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected a size >= 0, got {value}")
        return value
    if isinstance(value, str):
        m = _SIZE.match(value)
        if m:
            unit = (m.group(2) or "B").lower()
            return int(float(m.group(1)) * _UNITS[unit])
    raise ValueError(
        f"expected a size: integer bytes or a number with unit B, KB, MB, GB, KiB, MiB, GiB "
        f"(e.g. '64MiB'), got {value!r}"
    )


def format_size(n: int) -> str:
    """``67108864`` -> ``"64MiB"`` when exact, else the integer as text."""
    for unit, mult in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return str(n)


# --------------------------------------------------------------------------- dataclasses


def _fail(key: str, expected: str, got: Any) -> ConfigError:
    return ConfigError(f"expected {expected}, got {got!r}", key=key)


def _check_int(key: str, value: Any, lo: int, hi: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(key, "an integer", value)
    if value < lo or (hi is not None and value > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise _fail(key, f"an integer {rng}", value)


def _check_float(key: str, value: Any, lo: float, hi: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(key, "a number", value)
    if not lo <= value <= hi:
        raise _fail(key, f"a number {lo:g}..{hi:g}", value)


def _check_bool(key: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise _fail(key, "true or false", value)


def _check_dirs(key: str, value: Any) -> tuple[Path, ...]:
    """``value`` (paths or strings) as a tuple of absolute Paths (symlinks and
    ``..`` are resolved when a path is checked, not here)."""
    if isinstance(value, str | Path) or not isinstance(value, tuple | list):
        raise _fail(key, "a list of absolute directory paths", value)
    out = []
    for i, v in enumerate(value):
        if isinstance(v, str) and v.strip() and "\0" not in v:
            v = Path(v)
        if not isinstance(v, Path) or not v.is_absolute():
            raise _fail(f"{key}[{i}]", "an absolute directory path", str(v) if
                        isinstance(v, Path) else v)
        out.append(v)
    return tuple(out)


@dataclass(frozen=True)
class TlsConfig:
    """TLS settings.  PEM files: ``cert`` (server certificate chain), ``key``
    (its private key), ``client_ca`` (CA bundle that verifies client
    certificates).  With ``client_ca`` and ``require_client_cert`` it is
    mutual TLS: a client without a certificate signed by ``client_ca`` fails
    the handshake.  ``client_ca`` without ``require_client_cert`` is refused:
    gRPC then never asks for client certificates, so it would be ignored."""

    cert: Path
    key: Path
    client_ca: Path | None = None
    require_client_cert: bool = False

    def __post_init__(self) -> None:
        for name in ("cert", "key", "client_ca"):
            v = getattr(self, name)
            if v is None and name == "client_ca":
                continue
            if isinstance(v, str) and v:
                object.__setattr__(self, name, Path(v))
            elif not isinstance(v, Path):
                raise _fail(f"tls.{name}", "a file path", v)
        _check_bool("tls.require_client_cert", self.require_client_cert)
        if self.require_client_cert and self.client_ca is None:
            raise ConfigError(
                "true needs tls.client_ca (the CA that signs client "
                "certificates)", key="tls.require_client_cert")
        if self.client_ca is not None and not self.require_client_cert:
            # gRPC Python either requires and verifies client certificates or
            # does not ask for them at all: a CA alone would be silently unused.
            raise ConfigError(
                "a client CA without require_client_cert: true would never be used (the "
                "server does not ask for client certificates then); expected "
                "require_client_cert: true for mutual TLS, or no client_ca",
                key="tls.client_ca")

    @property
    def mutual(self) -> bool:
        """True when every client must present a certificate signed by ``client_ca``."""
        return self.client_ca is not None and self.require_client_cert


@dataclass(frozen=True)
class LimitsConfig:
    """Size and count limits (bytes / counts).

    ``max_topology_bytes``: ibnetdiscover text accepted by LoadFabric (inline or
    from a server-side path).  ``max_message_bytes``: largest gRPC message the
    server sends; ``max_receive_bytes``: largest it receives.
    ``max_fault_events``: events in one ApplyFaults call.  ``max_streams``:
    concurrent GetTables streams; ``max_watchers``: concurrent Watch streams
    (counted separately).  ``analyze_max_hosts``: Analyze refuses larger fabrics.
    """

    max_topology_bytes: int = 64 * MiB
    max_message_bytes: int = 256 * MiB
    max_receive_bytes: int = 80 * MiB
    max_fault_events: int = 10000
    max_streams: int = 64
    max_watchers: int = 64
    analyze_max_hosts: int = 20000

    def __post_init__(self) -> None:
        for name in ("max_topology_bytes", "max_message_bytes", "max_receive_bytes"):
            _check_int(f"limits.{name}", getattr(self, name), 1024, _GRPC_MAX)
        _check_int("limits.max_fault_events", self.max_fault_events, 1, 10_000_000)
        _check_int("limits.max_streams", self.max_streams, 1, 100_000)
        _check_int("limits.max_watchers", self.max_watchers, 1, 100_000)
        _check_int("limits.analyze_max_hosts", self.analyze_max_hosts, 1, 10_000_000)
        if self.max_topology_bytes > self.max_receive_bytes:
            raise ConfigError(
                f"{self.max_topology_bytes} bytes can never arrive: it exceeds "
                f"limits.max_receive_bytes ({self.max_receive_bytes}); expected at most that",
                key="limits.max_topology_bytes")


#: Config keys naming OpenSM guid files (roles overrides).
GUID_FILE_KEYS = ("root_guid_file", "cn_guid_file", "io_guid_file")


@dataclass(frozen=True)
class ServiceConfig:
    """Everything ``smroute serve`` needs.  See deploy/smroute.yaml for each key.

    ``listen``: gRPC address (``host:port``, ``[v6]:port``, ``unix:/path``).
    ``workers``: routing worker processes.  ``algorithm``: ``dmodc`` or
    ``dmodk``.  ``lmc``: LIDs per end-port = 2**lmc (0..7).
    ``epoch_history``: committed epochs kept for Diff / since_epoch.
    ``fabric``: ibnetdiscover file loaded and routed at start (or ``None``).
    ``root_guid_file`` / ``cn_guid_file`` / ``io_guid_file``: the operator's
    overrides of the fabric's roles, in OpenSM's guid-file formats (or ``None``).
    ``fabric_dirs``: absolute directories from which ``LoadFabric(path=...)``
    may read (the resolved real path must lie inside one; empty: server-side
    paths refused).
    ``coalesce_ms``: fault events arriving within this window share a reroute
    (milliseconds).  ``tls``: ``None`` = plaintext.  ``mutating_identities``:
    client certificate CNs / SAN DNS or URI names allowed to call LoadFabric,
    Route, ApplyFaults (empty: any client that passed the TLS handshake; without
    TLS mutations are allowed on loopback / Unix listeners only, unless
    ``allow_insecure_mutations``).  ``allow_insecure_listen``: permit a
    non-loopback listener without TLS.  ``metrics_listen``: Prometheus HTTP
    ``host:port`` or ``None`` (off).  ``shutdown_grace_s``: seconds SIGTERM
    waits for streams to drain.
    """

    listen: str = "127.0.0.1:50051"
    workers: int = 2
    algorithm: str = "dmodc"
    lmc: int = 0
    epoch_history: int = 8
    fabric: Path | None = None
    root_guid_file: Path | None = None
    cn_guid_file: Path | None = None
    io_guid_file: Path | None = None
    fabric_dirs: tuple[Path, ...] = ()
    coalesce_ms: float = 20.0
    tls: TlsConfig | None = None
    mutating_identities: tuple[str, ...] = ()
    allow_insecure_mutations: bool = False
    allow_insecure_listen: bool = False
    metrics_listen: str | None = "127.0.0.1:9464"
    log_format: str = "json"
    log_level: str = "info"
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    shutdown_grace_s: float = 5.0

    def __post_init__(self) -> None:
        try:
            addr = parse_listen(self.listen)
        except ValueError as err:
            raise ConfigError(str(err), key="listen") from None
        _check_int("workers", self.workers, 1, 256)
        if self.algorithm not in ALGORITHMS:
            raise _fail("algorithm", " or ".join(repr(a) for a in ALGORITHMS), self.algorithm)
        _check_int("lmc", self.lmc, 0, 7)
        _check_int("epoch_history", self.epoch_history, 2, 10_000)
        if isinstance(self.fabric, str) and self.fabric:
            object.__setattr__(self, "fabric", Path(self.fabric))
        if self.fabric is not None and not isinstance(self.fabric, Path):
            raise _fail("fabric", "a file path or null", self.fabric)
        for key in GUID_FILE_KEYS:
            v = getattr(self, key)
            if isinstance(v, str) and v:
                object.__setattr__(self, key, Path(v))
            elif v is not None and not isinstance(v, Path):
                raise _fail(key, "a file path or null", v)
        object.__setattr__(self, "fabric_dirs", _check_dirs("fabric_dirs", self.fabric_dirs))
        _check_float("coalesce_ms", self.coalesce_ms, 0.0, 60_000.0)
        if self.tls is not None and not isinstance(self.tls, TlsConfig):
            raise _fail("tls", "a TlsConfig or null", self.tls)
        ids = self.mutating_identities
        if isinstance(ids, list | frozenset | set):
            ids = tuple(ids)
            object.__setattr__(self, "mutating_identities", ids)
        if not isinstance(ids, tuple) or not all(isinstance(i, str) and i.strip() for i in ids):
            raise _fail("mutating_identities", "a list of non-empty names", ids)
        _check_bool("allow_insecure_mutations", self.allow_insecure_mutations)
        _check_bool("allow_insecure_listen", self.allow_insecure_listen)
        if self.metrics_listen is not None:
            try:
                parse_listen(self.metrics_listen, allow_unix=False)
            except ValueError as err:
                raise ConfigError(f"{err} (or null to disable metrics)",
                                  key="metrics_listen") from None
        if self.log_format not in LOG_FORMATS:
            raise _fail("log_format", " or ".join(map(repr, LOG_FORMATS)), self.log_format)
        if self.log_level not in LOG_LEVELS:
            raise _fail("log_level", "one of " + ", ".join(LOG_LEVELS), self.log_level)
        if not isinstance(self.limits, LimitsConfig):
            raise _fail("limits", "a LimitsConfig", self.limits)
        _check_float("shutdown_grace_s", self.shutdown_grace_s, 0.0, 3600.0)
        # cross-field rules
        if ids and (self.tls is None or not self.tls.mutual):
            raise ConfigError(
                "client identities can only be checked with client certificates: expected "
                "mutual TLS (tls.cert, tls.key, tls.client_ca and tls.require_client_cert: "
                "true), or an empty list", key="mutating_identities")
        if self.tls is None and not addr.is_loopback and not self.allow_insecure_listen:
            raise ConfigError(
                f"{self.listen} is not a loopback or Unix-socket address and TLS is off; "
                "expected a tls: section, a loopback address, or allow_insecure_listen: true",
                key="listen")

    @property
    def listen_address(self) -> ListenAddress:
        return parse_listen(self.listen)

    @property
    def loopback_only(self) -> bool:
        """True when the gRPC listener is loopback or a Unix socket."""
        return self.listen_address.is_loopback

    def warnings(self) -> tuple[str, ...]:
        """Allowed but risky settings, one sentence each, for the server to log."""
        out: list[str] = []
        loop = self.loopback_only
        if self.tls is None and not loop:
            out.append(f"listen {self.listen}: plaintext gRPC on a non-loopback address "
                       "(allow_insecure_listen); anyone on the network can read the tables")
            if self.allow_insecure_mutations:
                out.append("allow_insecure_mutations: any network client can load fabrics, "
                           "route and inject faults")
            else:
                out.append("mutating RPCs (LoadFabric, Route, ApplyFaults) are refused on this "
                           "plaintext non-loopback listener; set up TLS to allow them")
        if self.tls is not None and not self.mutating_identities and not loop:
            who = ("any client with a certificate from tls.client_ca" if self.tls.mutual
                   else "any client that completes the TLS handshake")
            out.append(f"mutating_identities is empty: {who} may call mutating RPCs")
        if self.allow_insecure_mutations and (self.tls is not None or loop):
            out.append("allow_insecure_mutations has no effect (TLS is on or the listener is "
                       "loopback)")
        if self.metrics_listen is not None:
            m = parse_listen(self.metrics_listen, allow_unix=False)
            if not m.is_loopback:
                out.append(f"metrics_listen {self.metrics_listen} is not loopback: metrics are "
                           "served unauthenticated over plain HTTP")
        if self.limits.max_message_bytes < 16 * MiB:
            out.append(f"limits.max_message_bytes {self.limits.max_message_bytes} is small: "
                       "GetTables of large fabrics may fail with RESOURCE_EXHAUSTED")
        return tuple(out)


def default_config() -> ServiceConfig:
    """All defaults: loopback 127.0.0.1:50051, plaintext, metrics on 127.0.0.1:9464."""
    return ServiceConfig()


# --------------------------------------------------------------------------- schema


def _v_int(lo: int, hi: int) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise _Bad(f"an integer {lo}..{hi}")
        return v
    return check


def _v_float(lo: float, hi: float, unit: str) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                or not lo <= v <= hi:
            raise _Bad(f"a number of {unit} {lo:g}..{hi:g}")
        return float(v)
    return check


def _v_bool(v: Any) -> Any:
    if not isinstance(v, bool):
        raise _Bad("true or false")
    return v


def _v_choice(*choices: str) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v not in choices:
            raise _Bad("one of " + ", ".join(choices))
        return v
    return check


def _v_listen(allow_unix: bool, nullable: bool) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v is None and nullable:
            return None
        if not isinstance(v, str):
            raise _Bad((_LISTEN_EXPECTED if allow_unix else "'host:port' or '[ipv6]:port'")
                       + (" (or null to disable)" if nullable else ""))
        try:
            return str(parse_listen(v, allow_unix=allow_unix))
        except ValueError as err:
            msg = str(err).removeprefix("expected ")
            raise _Bad(msg + (" (or null to disable)" if nullable else "")) from None
    return check


def _v_path(nullable: bool) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v is None and nullable:
            return None
        if not isinstance(v, str) or not v.strip() or "\0" in v:
            raise _Bad("a file path" + (" or null" if nullable else ""))
        return Path(os.path.expanduser(v))
    return check


def _v_size(lo: int, hi: int) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        try:
            n = parse_size(v)
        except ValueError as err:
            raise _Bad(str(err).removeprefix("expected ").split(", got ")[0]) from None
        if not lo <= n <= hi:
            raise _Bad(f"a size {format_size(lo)}..{format_size(hi)} ({lo}..{hi} bytes)")
        return n
    return check


def _v_identities(v: Any) -> Any:
    if not isinstance(v, list):
        raise _Bad("a list of client identities (certificate CN or SAN names)")
    return v  # items are checked one by one with their own lines


def _v_dirs(v: Any) -> Any:
    if not isinstance(v, list):
        raise _Bad("a list of absolute directory paths (e.g. [/var/lib/smroute/fabrics])")
    return v  # items are checked one by one with their own lines


def _item_identity(v: Any) -> str:
    if not isinstance(v, str) or not v.strip() or len(v) > 1024:
        raise _Bad("a non-empty name (certificate CN or SAN)")
    return v.strip()


def _item_dir(v: Any) -> Path:
    if not isinstance(v, str) or not v.strip() or "\0" in v:
        raise _Bad("an absolute directory path")
    p = Path(os.path.expanduser(v.strip()))
    if not p.is_absolute():
        raise _Bad("an absolute directory path (relative paths are not accepted here)")
    return p


#: List-valued keys: the check of the whole value and the check of each item.
_LISTS: dict[Callable[[Any], Any], Callable[[Any], Any]] = {
    _v_identities: _item_identity,
    _v_dirs: _item_dir,
}


_TOP: dict[str, Callable[[Any], Any]] = {
    "listen": _v_listen(True, False),
    "workers": _v_int(1, 256),
    "algorithm": _v_choice(*ALGORITHMS),
    "lmc": _v_int(0, 7),
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
    "max_topology_bytes": _v_size(1024, _GRPC_MAX),
    "max_message_bytes": _v_size(1024, _GRPC_MAX),
    "max_receive_bytes": _v_size(1024, _GRPC_MAX),
    "max_fault_events": _v_int(1, 10_000_000),
    "max_streams": _v_int(1, 100_000),
    "max_watchers": _v_int(1, 100_000),
    "analyze_max_hosts": _v_int(1, 10_000_000),
}
_SECTIONS = {"tls": _TLS, "limits": _LIMITS}
_PATH_KEYS = ("fabric", "tls.cert", "tls.key", "tls.client_ca")


# --------------------------------------------------------------------------- YAML walk


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _construct_scalar(node: yaml.ScalarNode) -> Any:
    constructor = yaml.constructor.SafeConstructor()
    return constructor.construct_object(node, deep=True)


def _mapping(node: yaml.Node, key: str, source: str,
             schema: Mapping[str, Any]) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    """``{name: (key_node, value_node)}`` of a YAML mapping, refusing unknown
    and duplicate keys."""
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
            except _Bad as bad:
                raise ConfigError(f"expected {bad.expected}, got {v!r}", key=f"{path}[{i}]",
                                  source=source, line=_line(item)) from None
            if lines is not None:
                lines[f"{path}[{i}]"] = _line(item)
        return tuple(items)
    raw = _plain(vnode, path, source)
    try:
        out = check(raw)
    except _Bad as bad:
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


def _parse(text: str, source: str, base_dir: Path | None
           ) -> tuple[ServiceConfig, dict[str, int]]:
    """The config and the line of each key given (``{"tls.key": 7}``)."""
    root = _compose(text, source)
    lines: dict[str, int] = {}
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    if root is not None and not (isinstance(root, yaml.ScalarNode)
                                 and root.tag == "tag:yaml.org,2002:null"):
        schema: dict[str, Any] = {**_TOP, **_SECTIONS}
        for name, (knode, vnode) in _mapping(root, "", source, schema).items():
            lines[name] = _line(knode)
            if name in _SECTIONS:
                if isinstance(vnode, yaml.ScalarNode) and vnode.tag.endswith(":null"):
                    sections[name] = {}
                    continue
                sub = _SECTIONS[name]
                sections[name] = {}
                for sname, (sk, sv) in _mapping(vnode, name, source, sub).items():
                    lines[f"{name}.{sname}"] = _line(sk)
                    sections[name][sname] = _value(sv, f"{name}.{sname}", sub[sname], source)
            else:
                top[name] = _value(vnode, name, _TOP[name], source, lines)
    if base_dir is not None:
        for key in _PATH_KEYS:
            sec, _, name = key.rpartition(".")
            holder = sections.get(sec, {}) if sec else top
            p = holder.get(name)
            if isinstance(p, Path) and not p.is_absolute():
                holder[name] = base_dir / p
    try:
        if "tls" in sections:
            tls = sections["tls"]
            if "tls" in lines and sections["tls"] == {} and root is not None:
                tls_cfg = None  # "tls:" or "tls: null" = off
            else:
                missing = [k for k in ("cert", "key") if k not in tls]
                if missing:
                    raise ConfigError("missing; expected a PEM file path when a tls: section "
                                      "is given (or tls: null for plaintext)",
                                      key=f"tls.{missing[0]}")
                tls_cfg = TlsConfig(**tls)
            top["tls"] = tls_cfg
        if "limits" in sections:
            top["limits"] = LimitsConfig(**sections["limits"])
        cfg = ServiceConfig(**top)
    except ConfigError as err:
        line = lines.get(err.key or "", lines.get((err.key or "").partition(".")[0]))
        raise err.located(source=source, line=line) from None
    return cfg, lines


def parse_config(text: str, source: str = "<config>", *,
                 base_dir: str | os.PathLike[str] | None = None) -> ServiceConfig:
    """The :class:`ServiceConfig` described by YAML ``text``.

    Keys not given take their defaults; an empty document is the default
    config.  Relative paths (``fabric``, ``tls.*``) are resolved against
    ``base_dir`` when given (``load_config`` passes the file's directory),
    else kept as written.  Raises :class:`ConfigError` (exit code 2) naming
    ``source``, the line, the key path and what was expected.
    """
    return _parse(text, source, Path(base_dir) if base_dir is not None else None)[0]


def load_config(path: str | os.PathLike[str], *, check_files: bool = True) -> ServiceConfig:
    """Read and parse the config file ``path``.

    Relative paths inside are resolved against the file's directory.  With
    ``check_files`` every file the config names (``fabric``, ``tls.cert``,
    ``tls.key``, ``tls.client_ca``) must exist and be readable, every
    ``fabric_dirs`` entry must be a readable directory, and the TLS
    files must be usable (PEM, key matching the certificate, certificate
    within its validity dates: :func:`smroute.service.auth.check_tls`);
    otherwise a :class:`ConfigError` names the key and its line.
    """
    p = Path(path)
    source = str(path)
    try:
        with open(p, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"cannot read config file: {err.strerror or err}", source=source) \
            from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file is larger than {MAX_CONFIG_BYTES} bytes; expected a "
                          "small YAML file", source=source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"expected UTF-8 text ({err.reason} at byte {err.start})",
                          source=source) from None
    cfg, lines = _parse(text, source, p.resolve().parent)
    if check_files:
        for key in _PATH_KEYS:
            value = _get(cfg, key)
            if value is None:
                continue
            problem = _file_problem(Path(value))
            if problem:
                raise ConfigError(f"{problem}: {value}", key=key, source=source,
                                  line=lines.get(key))
        for i, d in enumerate(cfg.fabric_dirs):
            problem = dir_problem(d)
            if problem:
                key = f"fabric_dirs[{i}]"
                raise ConfigError(f"{problem}: {d}", key=key, source=source,
                                  line=lines.get(key, lines.get("fabric_dirs")))
        if cfg.tls is not None:
            from smroute.service.auth import check_tls  # grpc is imported only when needed

            try:
                check_tls(cfg.tls)
            except ConfigError as err:
                raise err.located(source=source, line=lines.get(err.key or "")) from None
    return cfg


def _file_problem(p: Path) -> str | None:
    if not p.exists():
        return "no such file"
    if not p.is_file():
        return "expected a regular file"
    if not os.access(p, os.R_OK):
        return "file is not readable by this user"
    return None


def dir_problem(p: Path) -> str | None:
    """Why ``p`` cannot serve as a fabric directory, or ``None``."""
    if not p.exists():
        return "no such directory"
    if not p.is_dir():
        return "expected a directory"
    if not os.access(p, os.R_OK | os.X_OK):
        return "directory is not readable by this user"
    return None


def _get(cfg: ServiceConfig, key: str) -> Any:
    obj: Any = cfg
    for part in key.split("."):
        if obj is None:
            return None
        obj = getattr(obj, part)
    return obj


def config_to_dict(cfg: ServiceConfig) -> dict[str, Any]:
    """The effective config as plain JSON/YAML data (paths as strings, sizes
    as integer bytes, tuples as lists); ``parse_config`` of its YAML dump gives
    ``cfg`` back."""

    def conv(v: Any) -> Any:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: conv(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, Path):
            return str(v)
        if isinstance(v, tuple):
            return [conv(x) for x in v]
        return v

    out = conv(cfg)
    assert isinstance(out, dict)
    return out
