"""A daemon config as plain data: :func:`config_to_dict` (what ``smroute
check-config`` prints) and :func:`config_value` (one key by its dotted path)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from smroute.service.settings import ServiceConfig

__all__ = ["config_to_dict", "config_value"]


def config_value(cfg: ServiceConfig, key: str) -> Any:
    """The value of the dotted ``key`` (``tls.cert``) in ``cfg``; ``None``
    under a section that is off."""
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
