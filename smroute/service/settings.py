"""The routing daemon's settings as frozen dataclasses (:class:`ServiceConfig`,
:class:`TlsConfig`, :class:`LimitsConfig`), their value parsers (sizes;
listen addresses come from :mod:`smroute.service.rpc.listen`) and the cross-field
rules checked in ``__post_init__`` so that ``dataclasses.replace(cfg, ...)``
(CLI overrides) is validated too.  :mod:`smroute.service.config` reads them
from YAML.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smroute.errors import InputError
from smroute.routing import api
from smroute.service.rpc.listen import DEFAULT_LISTEN, ListenAddress, parse_listen
from smroute.service.vlchoice import AUTO, MaxVls, parse_max_vls

__all__ = [
    "BadValue",
    "ConfigError",
    "GRPC_MAX",
    "GUID_FILE_KEYS",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "LimitsConfig",
    "ListenAddress",
    "MAX_CONFIG_BYTES",
    "ServiceConfig",
    "StateConfig",
    "TlsConfig",
    "v_max_vls",
    "default_config",
    "default_state_path",
    "format_size",
    "parse_listen",
    "parse_size",
]

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

#: A config file larger than this is refused before YAML sees it (bytes).
MAX_CONFIG_BYTES = 1 * MiB
#: gRPC message size limits are C ints.
GRPC_MAX = 2**31 - 1

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


class BadValue(Exception):
    """A value check failed; ``expected`` completes "expected ...". """

    def __init__(self, expected: str):
        super().__init__(expected)
        self.expected = expected


def v_max_vls(v: Any) -> MaxVls:
    """The config's ``max_vls`` (``auto`` or 1..15); :class:`BadValue` else."""
    try:
        return parse_max_vls(v)
    except ValueError as err:
        raise BadValue(str(err)) from None


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
    ``max_streams_per_client``: streams (GetTables, Watch, reflection) one
    client may hold open (see :mod:`smroute.service.rpc.capacity`
    for who counts as a client).  ``stream_idle_s``: a Watch stream that sees
    no new epoch for this many seconds is closed with UNAVAILABLE (0: never).
    ``reserved_workers``: RPC worker threads that read-only calls can never
    take: they stay free for LoadFabric, Route, ApplyFaults and health checks.
    """

    max_topology_bytes: int = 64 * MiB
    max_message_bytes: int = 256 * MiB
    max_receive_bytes: int = 80 * MiB
    max_fault_events: int = 10000
    max_streams: int = 64
    max_watchers: int = 64
    analyze_max_hosts: int = 20000
    max_streams_per_client: int = 16
    stream_idle_s: float = 3600.0
    reserved_workers: int = 8

    @property
    def read_slots(self) -> int:
        """Read-only calls in flight at most: every stream the limits allow and
        16 unary calls (the RPC thread pool has :attr:`reserved_workers` more)."""
        return self.max_streams + self.max_watchers + 16

    def __post_init__(self) -> None:
        for name in ("max_topology_bytes", "max_message_bytes", "max_receive_bytes"):
            _check_int(f"limits.{name}", getattr(self, name), 1024, GRPC_MAX)
        _check_int("limits.max_fault_events", self.max_fault_events, 1, 10_000_000)
        _check_int("limits.max_streams", self.max_streams, 1, 100_000)
        _check_int("limits.max_watchers", self.max_watchers, 1, 100_000)
        _check_int("limits.analyze_max_hosts", self.analyze_max_hosts, 1, 10_000_000)
        _check_int("limits.max_streams_per_client", self.max_streams_per_client, 1, 100_000)
        _check_float("limits.stream_idle_s", self.stream_idle_s, 0.0, 604_800.0)
        _check_int("limits.reserved_workers", self.reserved_workers, 1, 1000)
        if self.max_topology_bytes > self.max_receive_bytes:
            raise ConfigError(
                f"{self.max_topology_bytes} bytes can never arrive: it exceeds "
                f"limits.max_receive_bytes ({self.max_receive_bytes}); expected at most that",
                key="limits.max_topology_bytes")


def default_state_path(env: dict[str, str] | None = None, uid: int | None = None) -> Path:
    """Where the state database lives by default: ``$STATE_DIRECTORY/state.db``
    (systemd's ``StateDirectory=``), else ``/var/lib/smroute/state.db`` for
    root, else ``$XDG_STATE_HOME/smroute/state.db`` (``~/.local/state``)."""
    env = dict(os.environ) if env is None else env
    uid = os.geteuid() if uid is None else uid
    if env.get("STATE_DIRECTORY"):
        return Path(env["STATE_DIRECTORY"].split(":")[0]) / "state.db"
    if uid == 0:
        return Path("/var/lib/smroute/state.db")
    xdg = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(xdg) / "smroute" / "state.db"


@dataclass(frozen=True)
class StateConfig:
    """The durable state database (:mod:`smroute.service.state.store`): ``path``, an
    SQLite file (``None`` = off: nothing survives a restart; the strings
    ``""`` and ``"none"`` mean ``None`` too, ``"default"``
    :func:`default_state_path`); ``keep_epochs``: committed
    epochs (metadata and tables) kept in it, 1..10000."""

    path: Path | None = field(default_factory=default_state_path)
    keep_epochs: int = 8

    def __post_init__(self) -> None:
        p = self.path
        if isinstance(p, str):
            p = (None if p.strip().lower() in ("", "none") else default_state_path()
                 if p == "default" else Path(p))
            object.__setattr__(self, "path", p)
        if p is not None and (not isinstance(p, Path) or "\0" in str(p)):
            raise _fail("state.path", "a file path, or none to keep no state", p)
        _check_int("state.keep_epochs", self.keep_epochs, 1, 10_000)



def _id_name(v: object) -> bool:
    """A user or group name, or a number."""
    return isinstance(v, str | int) and not isinstance(v, bool) and bool(str(v).strip()) \
        and len(str(v)) <= 256 and "\0" not in str(v)


#: Config keys naming OpenSM guid files (roles overrides).
GUID_FILE_KEYS = ("root_guid_file", "cn_guid_file", "io_guid_file")


@dataclass(frozen=True)
class ServiceConfig:
    """Everything ``smroute serve`` needs.  See deploy/smroute.yaml for each key.

    ``listen``: gRPC address (``host:port``, ``[v6]:port``, ``unix:/path``).
    ``workers``: routing worker processes.  ``algorithm``: one of
    :func:`smroute.routing.api.names` (no lab-only engine).  ``lmc``: LIDs per end-port =
    2**lmc (0..7); ``None``: each end-port's LMC in the fabric (as ``smroute
    route`` without ``--lmc``).  ``max_vls``: data VLs the subnet manager
    programs (1..15; 2 or more lets a tree take detours over virtual lanes,
    served to the OpenSM plugin with their SLs and SL-to-VL tables), or
    ``"auto"`` (default): what the OpenSM plugin's VL facts allow, one VL for
    every other source (:func:`smroute.service.vlchoice.choose_vls`).
    ``route_all_ca_pairs``: every CA pair needs a route (default: the roles'
    rule, :func:`~smroute.fabric.roles.needed_pairs`: aggregation nodes need
    hosts and the aggregation nodes of adjacent switches only).
    ``epoch_history``: committed epochs kept for Diff / since_epoch.
    ``fabric``: ibnetdiscover file loaded and routed at start (or ``None``).
    ``root_guid_file`` / ``cn_guid_file`` / ``io_guid_file``: the operator's
    overrides of the fabric's roles, in OpenSM's guid-file formats (or ``None``).
    ``fabric_dirs``: absolute directories from which ``LoadFabric(path=...)``
    may read (the resolved real path must lie inside one; empty: server-side
    paths refused).
    ``coalesce_ms``: fault events arriving within this window share a reroute
    (milliseconds).  ``tls``: ``None`` = plaintext.  ``mutating_identities``:
    client certificate CNs / SAN DNS or URI names allowed to call the mutating
    RPCs over TCP (empty: any verified client certificate; plaintext TCP
    mutations only with ``allow_insecure_mutations``).  On a Unix socket the
    peer's credentials decide: ``mutating_users`` (names or uids) and
    ``mutating_groups`` (names or gids; ``None``: the socket's group);
    ``socket_group``: the socket file's group (``None``: the daemon's).
    ``allow_insecure_listen``: permit a non-loopback listener without TLS.
    ``metrics_listen``: Prometheus HTTP ``host:port`` (loopback unless
    ``metrics_tls``) or ``None`` (off).  ``shutdown_grace_s``: seconds SIGTERM
    waits for streams to drain.  ``state``: the durable state database.
    """

    listen: str = DEFAULT_LISTEN
    workers: int = 2
    algorithm: str = api.DEFAULT
    lmc: int | None = None
    max_vls: MaxVls = AUTO
    route_all_ca_pairs: bool = False
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
    metrics_tls: TlsConfig | None = None
    socket_group: str | None = None
    mutating_users: tuple[str, ...] = ("root",)
    mutating_groups: tuple[str, ...] | None = None
    log_format: str = "json"
    log_level: str = "info"
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    shutdown_grace_s: float = 5.0
    state: StateConfig = field(default_factory=StateConfig)

    def __post_init__(self) -> None:
        try:
            addr = parse_listen(self.listen)
        except ValueError as err:
            raise ConfigError(str(err), key="listen") from None
        _check_int("workers", self.workers, 1, 256)
        if self.algorithm not in api.names():
            raise _fail("algorithm", " or ".join(repr(a) for a in api.names()), self.algorithm)
        if self.lmc is not None:
            _check_int("lmc", self.lmc, 0, 7)
        try:
            object.__setattr__(self, "max_vls", parse_max_vls(self.max_vls))
        except ValueError as err:
            raise _fail("max_vls", str(err), self.max_vls) from None
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
        _check_bool("route_all_ca_pairs", self.route_all_ca_pairs)
        _check_bool("allow_insecure_listen", self.allow_insecure_listen)
        if self.metrics_listen is not None:
            try:
                m = parse_listen(self.metrics_listen, allow_unix=False)
            except ValueError as err:
                raise ConfigError(f"{err} (or null to disable metrics)",
                                  key="metrics_listen") from None
            if not m.is_loopback and self.metrics_tls is None:
                raise ConfigError(f"{self.metrics_listen} is not a loopback address; expected "
                                  "a loopback address, null (off), or a metrics_tls: section",
                                  key="metrics_listen")
        if self.metrics_tls is not None and not isinstance(self.metrics_tls, TlsConfig):
            raise _fail("metrics_tls", "a TlsConfig or null", self.metrics_tls)
        if self.socket_group is not None and not _id_name(self.socket_group):
            raise _fail("socket_group", "a group name or number, or null", self.socket_group)
        for key in ("mutating_users", "mutating_groups"):
            v = getattr(self, key)
            if v is None and key == "mutating_groups":
                continue
            if isinstance(v, list | set | frozenset):
                v = tuple(v)
                object.__setattr__(self, key, v)
            if not isinstance(v, tuple) or not all(_id_name(i) for i in v):
                raise _fail(key, "a list of user/group names or numbers", v)
        if self.log_format not in LOG_FORMATS:
            raise _fail("log_format", " or ".join(map(repr, LOG_FORMATS)), self.log_format)
        if self.log_level not in LOG_LEVELS:
            raise _fail("log_level", "one of " + ", ".join(LOG_LEVELS), self.log_level)
        if not isinstance(self.limits, LimitsConfig):
            raise _fail("limits", "a LimitsConfig", self.limits)
        _check_float("shutdown_grace_s", self.shutdown_grace_s, 0.0, 3600.0)
        if not isinstance(self.state, StateConfig):
            raise _fail("state", "a StateConfig", self.state)
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
        unix = self.listen_address.kind == "unix"
        if self.tls is None and not loop:
            out.append(f"listen {self.listen}: plaintext gRPC on a non-loopback address "
                       "(allow_insecure_listen); anyone on the network can read the tables")
        if self.allow_insecure_mutations and not unix:
            out.append(f"allow_insecure_mutations: any client that can connect to {self.listen} "
                       "can load fabrics, route and inject faults, without a certificate")
        elif self.tls is None and not unix:
            out.append("mutating RPCs (LoadFabric, Route, ApplyFaults, RouteSubnet) are refused "
                       f"on the plaintext TCP listener {self.listen}; use the Unix socket or "
                       "mutual TLS to allow them")
        if self.tls is not None and not self.tls.mutual and not unix:
            out.append(f"TLS without client certificates on {self.listen}: mutating RPCs are "
                       "refused (they need mutual TLS: tls.client_ca and "
                       "tls.require_client_cert: true)")
        elif self.tls is not None and not self.mutating_identities and not unix:
            out.append("mutating_identities is empty: any client with a certificate from "
                       "tls.client_ca may call mutating RPCs")
        if self.allow_insecure_mutations and unix:
            out.append("allow_insecure_mutations has no effect on a Unix socket (the peer's "
                       "credentials decide: mutating_users, mutating_groups)")
        if self.metrics_tls is not None and not self.metrics_tls.mutual:
            out.append(f"metrics_listen {self.metrics_listen}: HTTPS without client "
                       "certificates; anyone who can connect can read the metrics")
        if self.limits.max_message_bytes < 16 * MiB:
            out.append(f"limits.max_message_bytes {self.limits.max_message_bytes} is small: "
                       "GetTables of large fabrics may fail with RESOURCE_EXHAUSTED")
        return tuple(out)


def default_config() -> ServiceConfig:
    """All defaults: the Unix socket :data:`DEFAULT_LISTEN`, metrics on 127.0.0.1:9464."""
    return ServiceConfig()


# --------------------------------------------------------------------------- schema
